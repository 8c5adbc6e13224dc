//! What a pull reads in its first statement, which fixes its snapshot: the horizon, the
//! tombstone horizon, the client's sequence and every bucket the actor holds, in one round trip.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::{Actor, BucketKey};
use sqlx::PgConnection;

use super::horizon::{Floor, HORIZON};
use crate::core::Core;
use crate::error::Result;
use crate::pg::sql;
use crate::pg::sql::Sql;
use crate::rules::held;

/// What a pull reads in its first statement.
pub(crate) struct PullStart {
    pub(crate) horizon: u64,
    pub(crate) tombstone_horizon: u64,
    pub(crate) last_mutation_id: u64,
    pub(crate) synced_mutation_id: u64,
    /// Every bucket the actor holds, in the pull's snapshot.
    pub(crate) held: BTreeSet<BucketKey>,
    /// For a bucket held through rows of a synced membership table, the transaction that last
    /// wrote the oldest of them: the actor has held it since.
    pub(crate) since: BTreeMap<BucketKey, u64>,
}

/// For a pull transaction, in its first statement: the horizon (at least `at_least`, from
/// [`Floor::get`]), the tombstone horizon, the client's last mutation
/// id, and the last whose transaction is below the horizon (whose rows the pull holds).
pub(crate) async fn read_pull_start(
    core: &Core,
    floor: &Floor,
    conn: &mut PgConnection,
    actor: &Actor,
    client: uuid::Uuid,
    at_least: u64,
) -> Result<PullStart> {
    let user = actor.user_id.as_str();
    let mut sql = Sql::new("WITH h AS (SELECT greatest((");
    sql.push(HORIZON).push(")::xid8, ").push_bind(at_least.to_string()).push("::text::xid8) AS h), ");
    sql.push("c AS (SELECT last_mutation_id, last_xid FROM _engine_clients WHERE user_id = ")
        .push_bind(user.to_owned());
    sql.push(" AND client_id = ").push_bind(client).push(") ");
    sql.push(
        "SELECT h.h::text,
                (SELECT value FROM _engine_meta WHERE key = 'tombstone_horizon'),
                (SELECT last_mutation_id FROM c),
                (SELECT CASE WHEN c.last_xid < h.h THEN c.last_mutation_id
                             ELSE coalesce((SELECT m.mutation_id FROM _engine_mutations m
                                            WHERE m.user_id = ",
    );
    sql.push_bind(user.to_owned()).push(" AND m.client_id = ").push_bind(client);
    sql.push(" AND m.xid < h.h ORDER BY m.mutation_id DESC LIMIT 1), 0) END FROM c), ");
    held::push_held_json(&mut sql, &core.memberships, actor);
    sql.push(" FROM h");
    let (horizon, gc, last, synced, held): (String, Option<String>, Option<i64>, Option<i64>, String) =
        sql.build_query_as().fetch_one(conn).await?;
    let (held, since) = held::held_from_json(&core.app, &core.memberships, actor, &held)?;
    let horizon: u64 = sql::xid(&horizon)?;
    floor.raise(horizon);
    let id = |n: Option<i64>| n.map_or(0, |n| u64::try_from(n).unwrap_or(0));
    Ok(PullStart {
        horizon,
        tombstone_horizon: gc.and_then(|v| v.parse().ok()).unwrap_or(0),
        last_mutation_id: id(last),
        synced_mutation_id: id(synced),
        held,
        since,
    })
}
