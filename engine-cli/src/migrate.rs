//! `engine migrate`: provision a database for the app a contract describes.

use std::sync::Arc;

use engine_runtime::storage::Storage;

use crate::error::Result;
use crate::source::Contract;

/// The provisioning plan's SQL, one statement after another.
pub(crate) fn plan(contract: &Contract) -> Result<String> {
    let app = contract.app()?;
    let plan = engine_runtime::provision_plan(&app);
    Ok(plan.iter().map(|statement| format!("{statement};\n\n")).collect())
}

/// What provisioning would change in the database at `url`, as a diff; empty when it is current.
pub(crate) async fn diff(contract: &Contract, url: &str) -> Result<String> {
    let app = Arc::new(contract.app()?);
    if let Some(path) = engine_runtime::storage::sqlite_path(url) {
        if !path.exists() {
            // Nothing is touched: a missing file would be created with all of it.
            let plan = engine_runtime::storage::sqlite_plan(&app);
            return Ok(plan.iter().filter(|s| !s.starts_with("INSERT")).map(|s| format!("+ {s}\n")).collect());
        }
        return Ok(engine_runtime::storage::sqlite(path).connect(app).await?.plan_changes().await?);
    }
    let storage = engine_runtime::postgres(url).max_connections(1).connect(app).await?;
    Ok(storage.plan_changes().await?)
}

/// Provision the database at `url` (created first when `create` asks and it is missing).
pub(crate) async fn migrate(contract: &Contract, url: &str, create: bool) -> Result<String> {
    let app = Arc::new(contract.app()?);
    let (created, already) = match engine_runtime::storage::sqlite_path(url) {
        // A SQLite file is created when missing.
        Some(path) => {
            let created = !path.exists();
            let storage = engine_runtime::storage::sqlite(path).connect(app.clone()).await?;
            let already = storage.verify().await.is_ok();
            if !already {
                storage.provision().await?;
            }
            (created, already)
        }
        None => {
            let created = create && engine_runtime::storage::create_database_if_missing(url).await?;
            let storage = engine_runtime::postgres(url).max_connections(1).connect(app.clone()).await?;
            let already = storage.verify().await.is_ok();
            if !already {
                storage.provision().await?;
            }
            (created, already)
        }
    };
    let tables: Vec<&str> = app.tables().iter().map(|t| t.meta().name).collect();
    let what = if already { "already provisioned for" } else { "provisioned for" };
    let mut report = String::new();
    if created {
        report.push_str("created the database\n");
    }
    report.push_str(&format!("{what} tables {} ({} sync rules)\n", tables.join(", "), app.sync_rules().rules.len()));
    Ok(report)
}
