//! What the store knows of the actor's holdings, for the write rules evaluated offline
//! ([`crate::authorize`]): the buckets its pulls said are held, and the live rows of the
//! membership tables that carry the actor's claims (its own membership rows, and any other row
//! a claim column shares), as the view has them.

use std::collections::BTreeSet;

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::rules::{FilterValue, Membership};
use engine_kernel::{Actor, BucketKey};
use sqlx::SqliteConnection;

use super::sql::select_live;
use super::values::decode_row;
use crate::authorize::Holdings;
use crate::error::Result;

/// The holdings of `actor` under the rules of `index`, as the store has them now.
pub(crate) async fn read(conn: &mut SqliteConnection, index: &RuleIndex, actor: &Actor) -> Result<Holdings> {
    let keys: Vec<String> =
        sqlx::query_scalar("SELECT bucket FROM _engine_buckets WHERE left_at IS NULL").fetch_all(&mut *conn).await?;
    let held: BTreeSet<BucketKey> = keys.iter().filter_map(|key| BucketKey::parse(key).ok()).collect();
    let mut holdings = Holdings { held, ..Holdings::default() };
    for rule in index.rules().rules {
        let Some(Membership::Table { table, filters }) = rule.membership else { continue };
        // A membership table no rule selects has no local copy.
        let Some(meta) = index.table(table).filter(|t| !index.selections(t.name).is_empty()) else { continue };
        let mut claims = Vec::new();
        for filter in filters {
            let FilterValue::Claim(claim) = filter.value else { continue };
            let (Some(column), Some(value)) = (meta.column(filter.column), claim.value(actor)) else { continue };
            claims.push((column, value));
        }
        let filter: Vec<_> = claims.iter().map(|(column, value)| (*column, value)).collect();
        let found = select_live(meta, &filter, None).build().fetch_all(&mut *conn).await?;
        let rows = found.iter().map(|row| decode_row(meta, row)).collect::<Result<Vec<_>>>()?;
        // Two rules on one table may read other claims: the rows of both are kept (twice, at worst).
        holdings.rows.entry(meta.name).or_default().extend(rows);
    }
    Ok(holdings)
}
