//! The app's model, read from schema `public` by `engine introspect`.
//!
//! - Tables: `activity`, `feature_flags`.
//! - Sync rules: none could be guessed; see the end of this file.
//! - Mutators: none yet; an example per table is commented out at the end of this file.
//!
//! The crate depends on `engine`, `uuid` (uuid columns).

use engine::Timestamp;

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

// No sync rule could be guessed: no table has an owner column (`owner_id`, text) and none looks
// like a membership (a user column and a foreign key as its primary key or a unique pair).
// Until the app has `#[engine::sync_rules]`, no table is synced; the server keeps them.

/// The app: its tables; add mutators to `mutators` as you write them.
pub fn app() -> engine::App {
    engine::app! {
        tables: [Activity, FeatureFlag],
        mutators: [],
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
// /// Add a row to `feature_flags` as the client wrote it.
// #[engine::mutator]
// pub async fn add_feature_flag(ctx: &mut engine::MutatorCtx<'_>, row: FeatureFlag) -> engine::Result<engine::Outcome> {
//     ctx.insert(&row).await?;
//     Ok(engine::Outcome::new())
// }
