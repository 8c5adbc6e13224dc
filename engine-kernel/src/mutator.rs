//! Mutators: one business operation, written once as an `async fn` with `#[engine::mutator]`,
//! run authoritatively by the server in a Postgres transaction and optimistically by the client
//! against its local store.
//!
//! The function sees only a [`MutatorCtx`]: the actor, an id generator, the mutation's HLC and
//! typed reads and writes. Behind it sits a [`MutatorTx`], implemented once per store; the
//! server's enforces write authorization and merge policies, so a mutator cannot write where its
//! actor cannot read.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::actor::Actor;
use crate::bucket::BucketKey;
use crate::error::{Error, Result};
use crate::handle::{Assignment, Filter};
use crate::hlc::Hlc;
use crate::table::{Row, Table, TableMeta};

/// A boxed, sendable future, the return type of object-safe async methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a mutator reports besides its writes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The id of the row the mutation created or addressed, as the server knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_id: Option<String>,
    /// Ids the client proposed, mapped to the ids the server chose.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reconciliation: BTreeMap<String, String>,
    /// Buckets to ping besides those computed from the rows written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affected_buckets: Vec<BucketKey>,
}

impl Outcome {
    /// An outcome with nothing to report.
    pub fn new() -> Self {
        Outcome::default()
    }

    /// This outcome with `server_id` set.
    #[must_use]
    pub fn server_id(mut self, id: impl Into<String>) -> Self {
        self.server_id = Some(id.into());
        self
    }

    /// This outcome mapping the client's id `client` to the server's id `server`.
    #[must_use]
    pub fn reconcile(mut self, client: impl Into<String>, server: impl Into<String>) -> Self {
        self.reconciliation.insert(client.into(), server.into());
        self
    }

    /// This outcome also pinging `bucket`.
    #[must_use]
    pub fn affect(mut self, bucket: impl Into<BucketKey>) -> Self {
        self.affected_buckets.push(bucket.into());
        self
    }
}

/// The store side of a mutator's context: one implementation per store, with untyped rows.
///
/// Implementations scope every read to the actor's buckets and refuse every write that would put
/// data where the actor cannot read (`docs/design.md` §4).
pub trait MutatorTx: Send {
    /// The actor the mutation acts for.
    fn actor(&self) -> &Actor;
    /// The mutation's clock reading.
    fn hlc(&self) -> &Hlc;
    /// A fresh id (a UUID v7 string unless the store decides otherwise), for a mutation the
    /// store cannot name ([`mutation_seed`](MutatorTx::mutation_seed) is `None`).
    fn new_id(&mut self) -> String {
        uuid::Uuid::now_v7().to_string()
    }
    /// The `clientMutationId` of the mutation, when the store knows it: [`MutatorCtx::new_id`]
    /// then derives its ids from it, so the client's optimistic run and the server's run of one
    /// mutation choose the same ids.
    fn mutation_seed(&self) -> Option<uuid::Uuid> {
        None
    }
    /// Insert a row (every column present).
    fn insert<'a>(&'a mut self, table: &'static TableMeta, row: Row) -> BoxFuture<'a, Result<()>>;
    /// Update the row with primary key `key`; returns whether it exists.
    fn update<'a>(
        &'a mut self,
        table: &'static TableMeta,
        key: Row,
        changes: Vec<(&'static str, serde_json::Value)>,
    ) -> BoxFuture<'a, Result<bool>>;
    /// Delete the row with primary key `key` (a soft delete on tables that have one); returns
    /// whether it existed.
    fn delete<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, Result<bool>>;
    /// Delete the row with primary key `key` for good, even on tables with a soft-delete column.
    fn purge<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, Result<bool>>;
    /// The row with primary key `key`, if the actor can read it.
    fn get<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, Result<Option<Row>>>;
    /// Whether the row with primary key `key` exists and the actor can read it, for a mutation
    /// that needs the row but not its contents ([`MutatorCtx::require`]). A store that can
    /// confirm it together with the mutation's writes answers `true` at once and, should the
    /// row turn out to be missing, runs the mutation again asking; by default, [`get`](Self::get).
    fn require<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move { Ok(self.get(table, key).await?.is_some()) })
    }
    /// The rows the actor can read whose columns equal the given values, in primary-key order.
    fn select<'a>(
        &'a mut self,
        table: &'static TableMeta,
        filter: Vec<(&'static str, serde_json::Value)>,
        limit: Option<u32>,
    ) -> BoxFuture<'a, Result<Vec<Row>>>;
    /// Enqueue a background job, to run once the mutation commits (and never if it does not).
    ///
    /// Jobs are the server's: a store that runs mutators optimistically (the client's) does
    /// nothing here, and the server enqueues the job when it applies the mutation.
    fn enqueue<'a>(&'a mut self, job: JobRequest) -> BoxFuture<'a, Result<()>>;
}

/// A background job a mutator enqueues: the name of a job the server's workers handle, its
/// payload, and how long to wait before it is due.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JobRequest {
    /// The job's name, as the workers register it.
    pub name: String,
    /// What the job is given.
    pub payload: serde_json::Value,
    /// How long after the commit the job becomes due.
    pub delay: std::time::Duration,
}

impl JobRequest {
    /// The longest job name accepted.
    pub const MAX_NAME_LEN: usize = 128;

    /// A request for job `name` with `payload`, due at once.
    pub fn new(name: impl Into<String>, payload: &impl Serialize) -> Result<Self> {
        let name = name.into();
        if name.is_empty() || name.len() > Self::MAX_NAME_LEN {
            return Err(Error::validation(format!(
                "a job name has 1 to {} bytes; `{name}` has {}",
                Self::MAX_NAME_LEN,
                name.len()
            )));
        }
        let payload = serde_json::to_value(payload)
            .map_err(|e| Error::validation(format!("the payload of job `{name}` is not JSON: {e}")))?;
        Ok(JobRequest { name, payload, delay: std::time::Duration::ZERO })
    }

    /// Due `delay` after the commit.
    #[must_use]
    pub fn after(mut self, delay: std::time::Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// The `n`-th id of the mutation `seed` at clock `ms`: a UUID v7 whose time is the mutation's and
/// whose random bits are a name-based hash (UUID v5) of the seed and `n`.
///
/// ```
/// # use engine_kernel::mutator::derived_id;
/// let seed = uuid::Uuid::from_u128(42);
/// let id = derived_id(seed, 1_763_700_000_000, 0);
/// assert_eq!(id, derived_id(seed, 1_763_700_000_000, 0));
/// assert_ne!(id, derived_id(seed, 1_763_700_000_000, 1));
/// assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 7);
/// ```
pub fn derived_id(seed: uuid::Uuid, ms: u64, n: u32) -> String {
    let hash = uuid::Uuid::new_v5(&seed, &n.to_be_bytes());
    let mut random = [0u8; 10];
    random.copy_from_slice(&hash.as_bytes()[6..]);
    uuid::Builder::from_unix_timestamp_millis(ms, &random).into_uuid().to_string()
}

/// What a mutator works with: the actor, ids, the clock and typed reads and writes.
///
/// ```
/// # use engine_kernel::{MutatorCtx, Outcome, Result, Table};
/// # async fn example<T: Table>(ctx: &mut MutatorCtx<'_>, row: T) -> Result<Outcome> {
/// let id = ctx.new_id();
/// ctx.insert(&row).await?;
/// Ok(Outcome::new().server_id(id))
/// # }
/// ```
pub struct MutatorCtx<'a> {
    tx: &'a mut dyn MutatorTx,
    /// How many ids this mutation has taken.
    ids: u32,
}

impl std::fmt::Debug for MutatorCtx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutatorCtx").field("actor", self.tx.actor()).field("hlc", self.tx.hlc()).finish()
    }
}

impl<'a> MutatorCtx<'a> {
    /// A context over a store's transaction.
    pub fn new(tx: &'a mut dyn MutatorTx) -> Self {
        MutatorCtx { tx, ids: 0 }
    }

    /// The actor the mutation acts for.
    pub fn actor(&self) -> &Actor {
        self.tx.actor()
    }

    /// A fresh id, a UUID v7 string.
    ///
    /// Within a pushed mutation the ids are derived from its `clientMutationId` and clock: the
    /// `n`-th id of a mutation is the same wherever the mutation runs (the client's optimistic
    /// run, the server's), so a row created offline keeps its id once the server applies it.
    pub fn new_id(&mut self) -> String {
        match self.tx.mutation_seed() {
            Some(seed) => {
                let id = derived_id(seed, self.tx.hlc().physical_ms(), self.ids);
                self.ids += 1;
                id
            }
            None => self.tx.new_id(),
        }
    }

    /// The mutation's hybrid-logical-clock reading.
    pub fn hlc(&self) -> &Hlc {
        self.tx.hlc()
    }

    /// Insert `row`.
    pub async fn insert<T: Table>(&mut self, row: &T) -> Result<()> {
        self.tx.insert(T::META, row.to_row()).await
    }

    /// Update the row with primary key `key`, column by column; returns whether it exists.
    pub async fn update<T: Table>(
        &mut self,
        key: &T::Key,
        changes: impl IntoIterator<Item = Assignment<T>>,
    ) -> Result<bool> {
        let changes: Vec<_> = changes.into_iter().map(Assignment::into_parts).collect();
        if changes.is_empty() {
            return Ok(self.get::<T>(key).await?.is_some());
        }
        self.tx.update(T::META, T::key_row(key), changes).await
    }

    /// Delete the row with primary key `key`: a soft delete (the soft-delete column set to now)
    /// on tables that have one. Returns whether it existed.
    pub async fn delete<T: Table>(&mut self, key: &T::Key) -> Result<bool> {
        self.tx.delete(T::META, T::key_row(key)).await
    }

    /// Delete the row with primary key `key` for good. Returns whether it existed.
    pub async fn purge<T: Table>(&mut self, key: &T::Key) -> Result<bool> {
        self.tx.purge(T::META, T::key_row(key)).await
    }

    /// The row with primary key `key`, if the actor can read it.
    pub async fn get<T: Table>(&mut self, key: &T::Key) -> Result<Option<T>> {
        match self.tx.get(T::META, T::key_row(key)).await? {
            Some(row) => T::from_row(row).map(Some),
            None => Ok(None),
        }
    }

    /// Go on only if the row with primary key `key` exists and the actor can read it; otherwise
    /// the mutation fails with `otherwise`. Where the mutator needs only that the row is there
    /// (a note's list, say), this is cheaper than [`get`](Self::get): the server checks it in
    /// the statement that records the mutation, and when the check fails it runs the mutation
    /// again, reading the row first, so the mutation fails with `otherwise` as it would have.
    pub async fn require<T: Table>(&mut self, key: &T::Key, otherwise: Error) -> Result<()> {
        if self.tx.require(T::META, T::key_row(key)).await? { Ok(()) } else { Err(otherwise) }
    }

    /// The rows the actor can read that match `filter`, in primary-key order.
    pub async fn select<T: Table>(&mut self, filter: Filter<T>) -> Result<Vec<T>> {
        self.select_limit(filter, None).await
    }

    /// Enqueue the background job `name` with `payload`, to run once this mutation commits on
    /// the server; a mutation that fails or is rejected enqueues nothing, and a replayed one
    /// does not enqueue again. The client's optimistic run skips it.
    pub async fn enqueue(&mut self, name: &str, payload: &impl Serialize) -> Result<()> {
        self.tx.enqueue(JobRequest::new(name, payload)?).await
    }

    /// Like [`enqueue`](Self::enqueue), for a job due `delay` after the commit.
    pub async fn enqueue_after(
        &mut self,
        name: &str,
        payload: &impl Serialize,
        delay: std::time::Duration,
    ) -> Result<()> {
        self.tx.enqueue(JobRequest::new(name, payload)?.after(delay)).await
    }

    /// At most `limit` rows the actor can read that match `filter`, in primary-key order.
    pub async fn select_limit<T: Table>(&mut self, filter: Filter<T>, limit: Option<u32>) -> Result<Vec<T>> {
        let rows = self.tx.select(T::META, filter.conditions().to_vec(), limit).await?;
        rows.into_iter().map(T::from_row).collect()
    }
}

/// A mutator, as `#[engine::mutator]` declares it: a type named after the function.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a mutator",
    label = "not declared with `#[engine::mutator]`",
    note = "add `#[engine::mutator]` to the `async fn` of that name"
)]
pub trait Mutator: Send + Sync + 'static {
    /// The wire name (`mutations[].name`).
    const NAME: &'static str;
    /// The doc comment of the function.
    const DESCRIPTION: &'static str;
    /// The arguments, validated against their schema before the function runs.
    type Args: MutatorArgs;

    /// Run the mutator.
    fn run<'a, 'c>(ctx: &'a mut MutatorCtx<'c>, args: Self::Args) -> BoxFuture<'a, Result<Outcome>>;
}

/// What a mutator's argument type must be: serializable both ways and described by a JSON
/// Schema.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the arguments of a mutator",
    label = "needs `Serialize`, `Deserialize` and `JsonSchema`",
    note = "write `#[engine::args]` on `{Self}` (and on each type its fields hold) to derive them"
)]
pub trait MutatorArgs: Serialize + DeserializeOwned + schemars::JsonSchema + Send + 'static {}
// Errors name `MutatorArgs`, whose message says what to write, not the missing serde trait.
#[diagnostic::do_not_recommend]
impl<T: Serialize + DeserializeOwned + schemars::JsonSchema + Send + 'static> MutatorArgs for T {}

type ErasedRun = for<'a, 'c> fn(&'a mut MutatorCtx<'c>, serde_json::Value) -> BoxFuture<'a, Result<Outcome>>;
type SchemaFn = fn(&mut schemars::SchemaGenerator) -> schemars::Schema;

/// A registered mutator with its arguments erased to JSON.
#[derive(Clone, Copy)]
pub struct MutatorDef {
    name: &'static str,
    description: &'static str,
    args_schema: SchemaFn,
    run: ErasedRun,
}

impl std::fmt::Debug for MutatorDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutatorDef").field("name", &self.name).finish_non_exhaustive()
    }
}

impl MutatorDef {
    /// The definition of mutator `M`.
    pub fn of<M: Mutator>() -> Self {
        MutatorDef {
            name: M::NAME,
            description: M::DESCRIPTION,
            args_schema: |generator| generator.subschema_for::<M::Args>(),
            run: run_erased::<M>,
        }
    }

    /// The wire name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The doc comment of the function.
    pub fn description(&self) -> &'static str {
        self.description
    }

    /// The schema of the arguments (a `$ref` into the generator's definitions).
    pub fn args_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        (self.args_schema)(generator)
    }

    /// Validate `args` against the mutator's argument type, then run it.
    pub fn run<'a, 'c>(&self, ctx: &'a mut MutatorCtx<'c>, args: serde_json::Value) -> BoxFuture<'a, Result<Outcome>> {
        (self.run)(ctx, args)
    }
}

fn run_erased<'a, 'c, M: Mutator>(
    ctx: &'a mut MutatorCtx<'c>,
    args: serde_json::Value,
) -> BoxFuture<'a, Result<Outcome>> {
    // serde reads a struct from an array too, by position; the contract says an object.
    if args.is_array() && schemars::schema_for!(M::Args).get("type") == Some(&serde_json::json!("object")) {
        let err = Error::validation(format!("arguments of `{}`: a JSON object is expected, not an array", M::NAME));
        return Box::pin(std::future::ready(Err(err)));
    }
    match serde_json::from_value::<M::Args>(args) {
        Ok(args) => M::run(ctx, args),
        Err(e) => {
            let err = Error::validation(format!("arguments of `{}`: {e}", M::NAME));
            Box::pin(std::future::ready(Err(err)))
        }
    }
}
