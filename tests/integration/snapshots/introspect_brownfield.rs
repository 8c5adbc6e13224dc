//! The app's model, read from schema `public` by `engine introspect`.
//!
//! - Tables: `activity`, `comments`, `feature_flags`, `invoices`, `members`, `organisations`, `projects`, `task_watchers`, `tasks`.
//! - Sync rules ([`rules`]): `own`, `member_of_organisation`, `member_of_task`; every guess is commented.
//! - Mutators: none yet; an example per table is commented out at the end of this file.
//! - Left out, the reasons next to where they would be: column `comments.postedAt` (`timestamp with time zone`), column `invoices.amount` (`numeric(12,2)`), column `invoices.issued_on` (`date`), column `invoices.status` (`invoice_status`), column `invoices.tags` (`text[]`), column `invoices.total_cents` (`bigint`), column `invoices.seq` (`integer`), table `import_log`.
//!
//! The crate depends on `engine`, `uuid` (uuid columns), `serde_json` (jsonb columns).

use engine::Timestamp;

// Table `import_log` is left out: it has no primary key, and the engine identifies every row by one.

/// Table `activity`.
#[engine::table(name = "activity")]
#[derive(Debug, Clone, PartialEq)]
pub struct Activity {
    /// `at timestamp with time zone` not null, the primary key.
    #[engine(primary_key)]
    pub at: Timestamp,
    /// `org_id uuid` not null, references `organisations.id`.
    pub org_id: uuid::Uuid,
    /// `actor_id text` not null.
    pub actor_id: String,
    /// `what text` not null.
    pub what: String,
}

/// Table `comments`.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Comment {
    /// `id bigint` not null, the primary key.
    #[engine(primary_key)]
    pub id: i64,
    /// `org_id uuid` not null, references `organisations.id`.
    pub org_id: uuid::Uuid,
    /// `task_id uuid` not null, references `tasks.id`.
    pub task_id: uuid::Uuid,
    /// `author_id text` not null.
    pub author_id: String,
    /// `body text` not null.
    pub body: String,
    /// `attachment bytea`.
    pub attachment: Option<Vec<u8>>,
    // Left out: `postedAt timestamp with time zone`: its name is not a lowercase SQL identifier, which the engine requires of column names.
}

/// Table `feature_flags`.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureFlag {
    /// `name text` not null, the primary key.
    #[engine(primary_key)]
    pub name: String,
    /// `enabled boolean` not null.
    pub enabled: bool,
    /// `crate text`.
    #[engine(rename = "crate")]
    pub crate_: Option<String>,
}

/// Table `invoices`.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Invoice {
    /// `id bigint` not null, the primary key.
    #[engine(primary_key)]
    pub id: i64,
    /// `org_id uuid` not null, references `organisations.id`.
    pub org_id: uuid::Uuid,
    /// `number integer` not null.
    pub number: i32,
    // Left out: `amount numeric(12,2)`: exact decimals; the engine carries text, varchar, smallint, integer, bigint, real, double precision, boolean, uuid, timestamptz, jsonb and bytea (integers of the smallest unit carry money).
    // Left out: `issued_on date`: the engine carries text, varchar, smallint, integer, bigint, real, double precision, boolean, uuid, timestamptz, jsonb and bytea.
    // Left out: `status invoice_status`: an enum type; the engine carries text, varchar, smallint, integer, bigint, real, double precision, boolean, uuid, timestamptz, jsonb and bytea (a text column with a check constraint carries the same values).
    // Left out: `tags text[]`: an array; the engine carries text, varchar, smallint, integer, bigint, real, double precision, boolean, uuid, timestamptz, jsonb and bytea.
    // Left out: `total_cents bigint`: the database computes it, and the engine writes every column it carries.
    // Left out: `seq integer`: the database numbers it (`GENERATED ALWAYS AS IDENTITY`) and refuses values written to it.
}

/// Table `members`.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// `id bigint` not null, default `nextval('members_id_seq'::regclass)`, the primary key.
    ///
    /// The database numbers rows inserted by SQL; rows inserted through the engine carry the value their mutator gives them, which must not collide with the database's numbers.
    #[engine(primary_key)]
    pub id: i64,
    /// `org_id uuid` not null, references `organisations.id`.
    pub org_id: uuid::Uuid,
    /// `user_id text` not null.
    pub user_id: String,
    /// `role text` not null, default `'member'::text`.
    pub role: String,
}

/// Table `organisations`.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Organisation {
    /// `id uuid` not null, default `gen_random_uuid()`, the primary key.
    #[engine(primary_key)]
    pub id: uuid::Uuid,
    /// `name text` not null.
    pub name: String,
    /// `created_at timestamp with time zone` not null, default `now()`.
    pub created_at: Timestamp,
}

/// Table `projects`.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    /// `id bigint` not null, the primary key.
    #[engine(primary_key)]
    pub id: i64,
    /// `org_id uuid` not null, references `organisations.id`.
    pub org_id: uuid::Uuid,
    /// `owner_id text` not null.
    ///
    /// Owner column (a guess: named `owner_id` and of type text): the engine fills it with the actor's owner id on insert, and the `own` bucket syncs the actor's rows by it.
    #[engine(owner)]
    pub owner_id: String,
    /// `name character varying(80)` not null.
    pub name: String,
    /// `archived boolean` not null, default `false`.
    pub archived: bool,
    /// `deleted_at timestamp with time zone`.
    ///
    /// Soft-delete column (a guess: named `deleted_at`, a nullable timestamptz): a delete sets it, and a row with it set leaves its buckets.
    #[engine(soft_delete)]
    pub deleted_at: Option<Timestamp>,
}

/// Table `task_watchers`.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct TaskWatcher {
    /// `task_id uuid` not null, part of the primary key, references `tasks.id`.
    #[engine(primary_key)]
    pub task_id: uuid::Uuid,
    /// `user_id text` not null, part of the primary key.
    #[engine(primary_key)]
    pub user_id: String,
    /// `org_id uuid` not null, references `organisations.id`.
    pub org_id: uuid::Uuid,
    /// `since timestamp with time zone` not null, default `now()`.
    pub since: Timestamp,
}

/// Table `tasks`.
#[engine::table]
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// `id uuid` not null, the primary key.
    #[engine(primary_key)]
    pub id: uuid::Uuid,
    /// `org_id uuid` not null, references `organisations.id`.
    pub org_id: uuid::Uuid,
    /// `project_id bigint` not null, references `projects.id`.
    pub project_id: i64,
    /// `title text` not null.
    pub title: String,
    /// `type text` not null, default `'task'::text`.
    pub r#type: String,
    /// `assignee_id text`.
    pub assignee_id: Option<String>,
    /// `priority smallint` not null, default `0`.
    pub priority: i16,
    /// `points integer`.
    pub points: Option<i32>,
    /// `estimate double precision`.
    pub estimate: Option<f64>,
    /// `details jsonb`.
    pub details: Option<serde_json::Value>,
    /// `due_at timestamp with time zone`.
    pub due_at: Option<Timestamp>,
}

/// Who sees what: a first guess from the schema's keys. Read every comment before serving it.
#[engine::sync_rules]
pub mod rules {
    use super::{Activity, Comment, Invoice, Member, Organisation, Project, Task, TaskWatcher};

    /// Everything the actor owns.
    ///
    /// A guess from the owner columns `projects.owner_id`.
    #[bucket(data(
        Project::owner_id == bucket.owner_id,
    ))]
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct Own {
        /// The actor's owner id.
        #[param(actor.owner_id)]
        pub owner_id: String,
    }

    /// Every `organisations` row the actor is a member of, with the rows that reference it.
    ///
    /// A guess: `members` looks like a membership: its unique constraint is (`org_id`, `user_id`), `user_id` names a user and `org_id` references `organisations.id`.
    /// The data are the rows of every table with a foreign key to the same row; a table that
    /// reaches it only through another table is not here (see the end of this module).
    #[bucket(
        membership(Member::user_id == actor.user_id),
        data(
            Organisation::id == bucket.org_id,
            Activity::org_id == bucket.org_id,
            Comment::org_id == bucket.org_id,
            Invoice::org_id == bucket.org_id,
            Member::org_id == bucket.org_id,
            Project::org_id == bucket.org_id,
            TaskWatcher::org_id == bucket.org_id,
            Task::org_id == bucket.org_id,
        ),
    )]
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct MemberOfOrganisation {
        /// `members.org_id` of one of the actor's memberships.
        #[param(Member::org_id)]
        pub org_id: uuid::Uuid,
    }

    /// Every `tasks` row the actor is a member of, with the rows that reference it.
    ///
    /// A guess: `task_watchers` looks like a membership: its primary key is (`task_id`, `user_id`), `user_id` names a user and `task_id` references `tasks.id`.
    /// The data are the rows of every table with a foreign key to the same row; a table that
    /// reaches it only through another table is not here (see the end of this module).
    #[bucket(
        membership(TaskWatcher::user_id == actor.user_id),
        data(
            Task::id == bucket.task_id,
            Comment::task_id == bucket.task_id,
            TaskWatcher::task_id == bucket.task_id,
        ),
    )]
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    pub struct MemberOfTask {
        /// `task_watchers.task_id` of one of the actor's memberships.
        #[param(TaskWatcher::task_id)]
        pub task_id: uuid::Uuid,
    }

    // Not scoped by any rule, so not synced (the server keeps them): `feature_flags`.
    // None has an owner column or a foreign key to a membership's table; give each a bucket
    // whose data compare one of its columns with a parameter the actor vouches for.
}

/// The app: its tables and sync rules; add mutators to `mutators` as you write them.
pub fn app() -> engine::App {
    engine::app! {
        tables: [Activity, Comment, FeatureFlag, Invoice, Member, Organisation, Project, TaskWatcher, Task],
        mutators: [],
        sync_rules: rules,
    }
}

// The app's operations go here, one mutator per business operation, each listed in `app()`.
// A mutator runs in one transaction on the server and optimistically on the client; it can
// only write rows its actor can read. One example per table:
//
// /// Add a row to `activity` as the client wrote it.
// #[engine::mutator]
// pub async fn add_activity(ctx: &mut engine::MutatorCtx<'_>, row: Activity) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
//
// /// Add a row to `comments` as the client wrote it.
// #[engine::mutator]
// pub async fn add_comment(ctx: &mut engine::MutatorCtx<'_>, row: Comment) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
//
// /// Add a row to `feature_flags` as the client wrote it.
// #[engine::mutator]
// pub async fn add_feature_flag(ctx: &mut engine::MutatorCtx<'_>, row: FeatureFlag) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
//
// /// Add a row to `invoices` as the client wrote it.
// #[engine::mutator]
// pub async fn add_invoice(ctx: &mut engine::MutatorCtx<'_>, row: Invoice) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
//
// /// Add a row to `members` as the client wrote it.
// #[engine::mutator]
// pub async fn add_member(ctx: &mut engine::MutatorCtx<'_>, row: Member) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
//
// /// Add a row to `organisations` as the client wrote it.
// #[engine::mutator]
// pub async fn add_organisation(ctx: &mut engine::MutatorCtx<'_>, row: Organisation) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
//
// /// Add a row to `projects` as the client wrote it.
// #[engine::mutator]
// pub async fn add_project(ctx: &mut engine::MutatorCtx<'_>, row: Project) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
//
// /// Add a row to `task_watchers` as the client wrote it.
// #[engine::mutator]
// pub async fn add_task_watcher(ctx: &mut engine::MutatorCtx<'_>, row: TaskWatcher) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
//
// /// Add a row to `tasks` as the client wrote it.
// #[engine::mutator]
// pub async fn add_task(ctx: &mut engine::MutatorCtx<'_>, row: Task) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
