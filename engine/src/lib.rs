//! # engine
//!
//! Offline-first sync for Rust. Declare an app's tables, mutators and sync rules as annotated
//! Rust code; the server (feature `server`) provisions Postgres and serves pull, push, realtime
//! and presence (across instances through NATS with the feature `nats`; pings to the clients of
//! an edge relay with the feature `edge`), and blobs (in an S3-compatible object store with the
//! feature `s3`); the client (feature `client`) keeps a durable local copy that takes writes
//! offline and converges when it reconnects. A sync rule that could leak rows to the wrong user
//! does not compile.
//!
//! - Tables: [`table`] on a struct, one field per column; [`CrdtText`] and [`CrdtMap`] for
//!   collaborative columns, whose edits travel as [`CrdtUpdate`]s.
//! - Mutators: [`mutator`] on an `async fn(ctx, args)`, run by the server in one transaction and
//!   by the client optimistically, through [`MutatorCtx`]; [`args`] on their argument types.
//! - Sync rules: [`sync_rules`] on a module of bucket definitions, checked by the no-leak lint.
//! - The app: [`app!`] bundles them into an [`App`]; [`contract()`] describes it as OpenAPI 3.1.
//! - The wire protocol's messages: [`wire`].
//!
//! The `notes` example (`examples/notes`) declares a complete app with every feature.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use engine_kernel::{
    Actor, App, AppBuilder, Assignment, BlobKey, Bucket, BucketKey, Column, ColumnType, CrdtMap, CrdtText, CrdtUpdate,
    Error, ErrorCode, Filter, Hlc, JobRequest, MergePolicy, Mutator, MutatorArgs, MutatorCtx, MutatorTx, Outcome,
    Result, Row, SqlType, SyncRules, Table, TableMeta, Timestamp, contract,
};
pub use engine_kernel::{bucket, column, crdt, error, hlc, mutator as mutators, rules, wire};

/// Declare a table: a struct whose named fields are its columns.
///
/// ```
/// #[engine::table(merge = "field")]
/// pub struct Note {
///     #[engine(primary_key)]
///     pub id: String,
///     #[engine(owner)]
///     pub owner_id: String,
///     pub list_id: String,
///     pub title: String,
///     pub done: bool,
///     pub body: engine::CrdtText,
///     #[engine(soft_delete)]
///     pub deleted_at: Option<engine::Timestamp>,
/// }
///
/// use engine::Table;
/// assert_eq!(Note::META.name, "notes");
/// assert_eq!(Note::title.name(), "title");
/// assert_eq!(Note::META.soft_delete, Some("deleted_at"));
/// ```
///
/// # Arguments
///
/// - `name = "…"`: the SQL table name. The default is the struct's name in snake_case, made
///   plural by English's regular rule: `Note` → `notes`, `ListMember` → `list_members`,
///   `Category` → `categories`, `Box` → `boxes`. Irregular plurals need `name`.
/// - `merge = "lww" | "field" | "crdt"`: how concurrent writes merge. `lww` (the default)
///   replaces whole rows in server commit order and holds no collaborative column; `field` merges
///   column by column by hybrid logical clock and may mix scalar and collaborative columns;
///   `crdt` holds only collaborative columns besides its keys, owner and soft-delete column.
///
/// # Field attributes
///
/// - `#[engine(primary_key)]` on one or more fields (several make a composite key, whose
///   [`Table::Key`] is a tuple in field order): `String`, `i16`, `i32`, `i64`, `uuid::Uuid`,
///   [`Timestamp`] or `Vec<u8>`, the types whose values have one exact wire form.
/// - `#[engine(owner)]` on at most one `String` field, holding the actor's owner id.
/// - `#[engine(soft_delete)]` on at most one `Option<engine::Timestamp>` field: a non-null value
///   makes the row a tombstone for clients.
/// - `#[engine(rename = "…")]`: the SQL column name, when it differs from the field's.
///
/// # Column types
///
/// `String`, `i16`, `i32`, `i64`, `f32`, `f64`, `bool`, `uuid::Uuid`, [`Timestamp`],
/// `serde_json::Value`, `Vec<u8>`, [`BlobKey`] (a file stored beside the rows), `Option<T>` of those,
/// and [`CrdtText`] / [`CrdtMap`].
///
/// # Generated
///
/// An impl of [`Table`] with the table's metadata; `Serialize`, `Deserialize` and `JsonSchema`
/// giving the row's wire form (SQL column names as keys; do not derive them yourself); and a
/// typed column handle per field (`Note::title`, a [`Column`]) for sync rules and mutators.
///
/// # Mistakes are compile errors
///
/// ```compile_fail
/// // A `lww` table replaces whole rows, so it cannot hold a collaborative column.
/// #[engine::table]
/// pub struct Doc {
///     #[engine(primary_key)]
///     pub id: String,
///     pub body: engine::CrdtText,
/// }
/// ```
#[doc(inline)]
pub use engine_macros::table;

/// Declare a mutator: one business operation, an `async fn` taking the context and its
/// arguments.
///
/// ```
/// # #[engine::table]
/// # pub struct List {
/// #     #[engine(primary_key)]
/// #     pub id: String,
/// #     #[engine(owner)]
/// #     pub owner_id: String,
/// #     pub title: String,
/// # }
/// use engine::{MutatorCtx, Outcome, Result};
///
/// #[engine::args]
/// pub struct RenameList {
///     pub id: String,
///     pub title: String,
/// }
///
/// /// Rename a list.
/// #[engine::mutator]
/// pub async fn rename_list(ctx: &mut MutatorCtx<'_>, args: RenameList) -> Result<Outcome> {
///     if !ctx.update::<List>(&args.id, [List::title.set(args.title)]).await? {
///         return Err(engine::Error::mutator_failed("no such list"));
///     }
///     Ok(Outcome::new().server_id(args.id))
/// }
///
/// use engine::Mutator;
/// assert_eq!(<rename_list as Mutator>::NAME, "rename_list");
/// ```
///
/// The function stays callable as written. Beside it the macro declares a type of the same name
/// (types and functions live in different namespaces) implementing [`Mutator`]: that is what
/// [`app!`] lists and what the client's `mutate::<rename_list>(…)` names.
///
/// # Arguments
///
/// - `name = "…"`: the wire name (`mutations[].name`), when it differs from the function's.
///
/// # Rules
///
/// The signature is `async fn name(ctx: &mut engine::MutatorCtx<'_>, args: Args) ->
/// engine::Result<engine::Outcome>`, where `Args` is marked [`args`] (or implements
/// [`MutatorArgs`] otherwise); the arguments are validated against its schema before the
/// function runs. The function must not be generic and its future must be `Send`.
///
/// ```compile_fail
/// // A mutator awaits the store, so it is an `async fn`.
/// #[engine::args]
/// pub struct Args {}
///
/// #[engine::mutator]
/// pub fn noop(ctx: &mut engine::MutatorCtx<'_>, args: Args) -> engine::Result<engine::Outcome> {
///     Ok(engine::Outcome::new())
/// }
/// ```
#[doc(inline)]
pub use engine_macros::mutator;

/// Mark a mutator's argument type, and each type its fields hold, as the engine carries them:
/// JSON both ways, described by a JSON Schema in the contract.
///
/// ```
/// /// Arguments of `share_list`.
/// #[engine::args]
/// #[derive(Debug, Clone)]
/// pub struct ShareList {
///     pub list_id: String,
///     /// Who to share with.
///     pub user_id: String,
///     #[serde(default)]
///     pub role: Role,
/// }
///
/// #[engine::args]
/// #[derive(Debug, Clone, Copy, Default)]
/// #[serde(rename_all = "lowercase")]
/// pub enum Role {
///     #[default]
///     Viewer,
///     Editor,
/// }
///
/// fn is_mutator_args<A: engine::MutatorArgs>() {}
/// is_mutator_args::<ShareList>();
/// ```
///
/// It derives `serde::Serialize`, `serde::Deserialize` and `schemars::JsonSchema` through the
/// engine's own copies of those crates, so the app's manifest names neither and no version has to
/// match the engine's. `#[serde(...)]` and `#[schemars(...)]` attributes work as with the
/// derives; write them below `#[engine::args]`. Doc comments become the schema's descriptions.
///
/// Deriving the three traits yourself, with the `serde` and `schemars` versions the engine uses,
/// works too: [`MutatorArgs`] is implemented for every type that has them.
///
/// ```compile_fail
/// // `#[engine::args]` derives `Deserialize` itself.
/// #[engine::args]
/// #[derive(serde::Deserialize)]
/// pub struct Args {}
/// ```
#[doc(inline)]
pub use engine_macros::args;

/// Declare the sync rules: a module of bucket definitions, checked by the no-leak lint.
///
/// Each struct marked `#[bucket(...)]` is one rule. Its fields are the bucket's parameters, so a
/// value of the struct is a typed bucket key ([`Bucket`]); `#[param(...)]` on each field says
/// where the value comes from; `data(...)` lists the rows the bucket holds.
///
/// ```
/// # #[engine::table]
/// # pub struct List {
/// #     #[engine(primary_key)]
/// #     pub id: String,
/// #     #[engine(owner)]
/// #     pub owner_id: String,
/// #     pub archived: bool,
/// # }
/// # #[engine::table]
/// # pub struct ListMember {
/// #     #[engine(primary_key)]
/// #     pub list_id: String,
/// #     #[engine(primary_key)]
/// #     pub user_id: String,
/// # }
/// #[engine::sync_rules]
/// pub mod rules {
///     use super::{List, ListMember};
///
///     /// The lists the actor owns and has not archived; the owner writes them.
///     #[bucket(data(List::owner_id == bucket.owner_id && List::archived == false), write(List))]
///     pub struct Own {
///         #[param(actor.owner_id)]
///         pub owner_id: String,
///     }
///
///     /// The lists shared with the actor, and their members: read-only, and a member may leave.
///     #[bucket(
///         membership(ListMember::user_id == actor.user_id),
///         data(List::id == bucket.list_id, ListMember::list_id == bucket.list_id),
///         leave,
///     )]
///     pub struct Shared {
///         #[param(ListMember::list_id)]
///         pub list_id: String,
///     }
/// }
///
/// fn main() {
///     use engine::Bucket;
///     let key = rules::Own { owner_id: "alice".into() }.key();
///     assert_eq!(key.as_str(), "own/alice");
///     assert_eq!(rules::SYNC_RULES.rules.len(), 2);
/// }
/// ```
///
/// # A bucket definition
///
/// - `#[bucket(name = "…")]`: the rule's name, the first segment of its bucket keys (default:
///   the struct's name in snake_case). Keys are `<rule>/<param>/…` with each parameter
///   percent-encoded, so buckets of different rules never share a key.
/// - `#[param(...)]` on every field: `actor.user_id`, `actor.owner_id`, `actor.claims.<name>`
///   (a claim of the actor's token), or `Table::column` of the bucket's membership table, or
///   `membership.<column>` of a raw membership query. The actor holds one bucket per row of its
///   membership query.
/// - `membership(...)`: equalities joined by `&&` on one table, at least one against an actor
///   claim (`ListMember::user_id == actor.user_id && ListMember::role == "editor"`); or
///   `raw("SELECT … WHERE user_id = $user_id", reads(Member))`, whose placeholders `$user_id`,
///   `$owner_id`, `$claims.<name>` are bound as parameters, and `reads(...)` names the app's
///   tables it reads: only server code writes those (the server checks the list when it
///   starts). Raw SQL is allowed here only.
/// - `data(...)`: table selections, each equalities joined by `&&` on one table: one
///   `Table::column == bucket.<parameter>` for every parameter of the bucket (so a row names its
///   buckets completely), optionally `Table::column == <constant>`.
/// - `write(...)`: who may write which of the bucket's tables. Nothing is writable that no
///   `write` names: `write(Table)` lets every holder of the bucket write `Table`;
///   `write(Table: Member::role == "owner" || Member::role == "editor")` lets the holders whose
///   membership row matches; an alternative may look at the row written, before and after the
///   write (`Member::role == "admin" && row.role != "owner"`: an admin manages members, never
///   the owner). Taking a row out of a bucket is a write there. A row lying in no bucket is
///   written by server code only.
/// - `accept(Other)`: a holder of `Other`'s bucket may put a row into a bucket of this rule it
///   does not hold (a task assigned to a teammate), when the row also lies in that `Other`
///   bucket and the bucket's own actor holds it too; `accept(open(Other))` drops the last
///   condition (an inbox anyone may write to from their outbox).
/// - `leave`: a member may delete its own membership row without any other write permission.
/// - `while(Other)`: the bucket is held through `Other`'s membership, exactly while its actor
///   holds the `Other` bucket of the same parameters; with `accept(Other)`, the tasks assigned
///   to a member leave with the member's team (`examples/teams`).
/// - `anchor(Team::id == bucket.team_id)`: the row a bucket belongs to; no membership of a
///   bucket is written while its anchor is missing (unless the same mutation writes it), nor a
///   row put into it through `accept(...)`, so nobody takes a team id by putting another row
///   and their own membership into it, nor by opening a ticket with it before the team exists.
/// - `#[engine::sync_rules(server_only(Table, …))]`: tables only server code (jobs, admin
///   tools) writes; client mutations may not, and their rows may lie in no bucket. A membership
///   table that no bucket selects must be declared so.
///
/// # The no-leak lint
///
/// Each of these is a compile error that underlines the offending tokens and says what to write
/// instead: a selection not scoped by equality to a bucket parameter; `||`, `!` or `!=` in a
/// selection; raw SQL in a selection; a parameter taken from anything but an actor claim or an
/// actor-scoped membership query; a membership query not filtered by an actor claim; an unknown
/// table or column; a column compared with a parameter of another type; a selection that leaves a
/// parameter unscoped.
///
/// ```compile_fail
/// # #[engine::table]
/// # pub struct List {
/// #     #[engine(primary_key)]
/// #     pub id: String,
/// #     #[engine(owner)]
/// #     pub owner_id: String,
/// #     pub archived: bool,
/// # }
/// #[engine::sync_rules]
/// pub mod rules {
///     use super::List;
///
///     // Every unarchived list, of every owner: not scoped to the bucket.
///     #[bucket(data(List::archived == false))]
///     pub struct Own {
///         #[param(actor.owner_id)]
///         pub owner_id: String,
///     }
/// }
/// ```
#[doc(inline)]
pub use engine_macros::sync_rules;

/// Bundle an app's tables, mutators and sync rules into an [`App`].
///
/// ```
/// # #[engine::table]
/// # pub struct List {
/// #     #[engine(primary_key)]
/// #     pub id: String,
/// #     #[engine(owner)]
/// #     pub owner_id: String,
/// # }
/// # #[engine::sync_rules]
/// # pub mod rules {
/// #     use super::List;
/// #     #[bucket(data(List::owner_id == bucket.owner_id))]
/// #     pub struct Own {
/// #         #[param(actor.owner_id)]
/// #         pub owner_id: String,
/// #     }
/// # }
/// # #[engine::args]
/// # pub struct Args {}
/// # #[engine::mutator]
/// # async fn noop(_ctx: &mut engine::MutatorCtx<'_>, _args: Args) -> engine::Result<engine::Outcome> {
/// #     Ok(engine::Outcome::new())
/// # }
/// fn main() {
///     let app: engine::App = engine::app! {
///         tables: [List],
///         mutators: [noop],
///         sync_rules: rules,
///     };
///     assert!(app.mutator("noop").is_some());
/// }
/// ```
///
/// At compile time it checks what [`AppBuilder::build`] checks at run time: no two mutators
/// share a wire name, no two tables share a SQL name, and every table a sync rule reads is
/// listed.
///
/// ```compile_fail
/// # #[engine::args]
/// # pub struct Args {}
/// #[engine::mutator]
/// async fn noop(_ctx: &mut engine::MutatorCtx<'_>, _args: Args) -> engine::Result<engine::Outcome> {
///     Ok(engine::Outcome::new())
/// }
/// #[engine::mutator(name = "noop")]
/// async fn other(_ctx: &mut engine::MutatorCtx<'_>, _args: Args) -> engine::Result<engine::Outcome> {
///     Ok(engine::Outcome::new())
/// }
/// let app = engine::app! { tables: [], mutators: [noop, other] };
/// ```
#[doc(inline)]
pub use engine_macros::app;

/// The `serde`, `serde_json` and `schemars` the engine is built with: a mutator's argument type
/// implements their traits and a JSON column is a `serde_json::Value`, of these versions.
/// [`args`] derives the traits for you; name these crates to implement them by hand without a
/// version to match (`#[serde(crate = "engine::serde")]`, `#[schemars(crate = "engine::schemars")]`).
pub use {schemars, serde, serde_json};

/// The server crate: builder, router, storage, realtime, auth, limits, jobs and observer hooks.
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub use engine_runtime as server;
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub use engine_runtime::{Server, auth, blob, jobs, limits, observer, realtime, storage};

/// The Rust client.
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub use engine_client as client;

/// The names most apps use, for `use engine::prelude::*`.
pub mod prelude {
    pub use crate::{
        App, Bucket as _, BucketKey, CrdtMap, CrdtText, CrdtUpdate, MutatorCtx, Outcome, Result, Table as _, Timestamp,
        app, args, mutator, sync_rules, table,
    };
}

/// What generated code names. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use engine_kernel::bucket::{
        ConstComparable, InvitationColumn, ParamComparable, TextClaimComparable, TextClaimParam,
    };
    pub use engine_kernel::column::{KeyColumn, OwnerColumn, SoftDeleteColumn};
    pub use engine_kernel::macro_support::*;
    pub use engine_kernel::rules::{
        Accept, Claim, ConstFilter, ConstValue, FilterValue, Membership, MembershipFilter, ParamMeta, ParamSource,
        RowTerm, RuleMeta, ScopeEq, Selection, WriteAlternative, WriteRule,
    };
    pub use engine_kernel::{
        App, BoxFuture, Bucket, BucketKey, Column, ColumnMeta, ColumnType, MergePolicy, Mutator, MutatorArgs,
        MutatorCtx, Outcome, ParamValue, Result, Row, SyncRules, Table, TableMeta,
    };
    pub use {schemars, serde, serde_json};
}
