//! Primary keys of every type the engine takes (text, integers, uuid, timestamp, bytes and
//! composites of them) travel in one wire form: a row's key in a pull and the key of its
//! tombstone are the same JSON, so a client removes exactly the rows that were deleted or moved
//! out of its buckets.

use std::time::Duration;

use engine::Timestamp;
use engine::client::{BearerToken, Client, StoreLocation};

use crate::support::client::eventually;
use crate::support::{Backend, TestDb, TestServer, backend};

mod app {
    use engine::{MutatorCtx, Outcome, Result, Timestamp};

    /// Something that happened, keyed by when.
    #[engine::table(name = "events")]
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct Event {
        #[engine(primary_key)]
        pub at: Timestamp,
        #[engine(owner)]
        pub owner_id: String,
        pub what: String,
    }

    /// A stored chunk, keyed by its hash.
    #[engine::table(name = "chunks")]
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct Chunk {
        #[engine(primary_key)]
        pub hash: Vec<u8>,
        #[engine(owner)]
        pub owner_id: String,
        pub size: i64,
    }

    /// A spreadsheet cell, keyed by sheet, row and column.
    #[engine::table(name = "cells")]
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct Cell {
        #[engine(primary_key)]
        pub sheet: String,
        #[engine(primary_key)]
        pub row: i64,
        #[engine(primary_key)]
        pub col: uuid::Uuid,
        #[engine(owner)]
        pub owner_id: String,
        pub value: String,
    }

    #[engine::sync_rules]
    pub(crate) mod rules {
        use super::{Cell, Chunk, Event};

        /// What the actor owns.
        #[bucket(
            data(
                Event::owner_id == bucket.owner_id,
                Chunk::owner_id == bucket.owner_id,
                Cell::owner_id == bucket.owner_id,
            ),
            write(Event, Chunk, Cell),
        )]
        pub(crate) struct Own {
            #[param(actor.owner_id)]
            pub owner_id: String,
        }
    }

    /// One row of each table.
    #[engine::args]
    pub(crate) struct Rows {
        pub event: Timestamp,
        pub chunk: Vec<u8>,
        pub cell: (String, i64, uuid::Uuid),
    }

    /// Insert a row of each table, owned by the actor.
    #[engine::mutator]
    pub(crate) async fn put(ctx: &mut MutatorCtx<'_>, args: Rows) -> Result<Outcome> {
        let owner_id = ctx.actor().owner_id.clone();
        ctx.insert(&Event { at: args.event, owner_id: owner_id.clone(), what: "e".into() }).await?;
        ctx.insert(&Chunk { hash: args.chunk, owner_id: owner_id.clone(), size: 3 }).await?;
        let (sheet, row, col) = args.cell;
        ctx.insert(&Cell { sheet, row, col, owner_id, value: "v".into() }).await?;
        Ok(Outcome::new())
    }

    pub(crate) fn app() -> engine::App {
        engine::app! { tables: [Event, Chunk, Cell], mutators: [put], sync_rules: rules }
    }
}

use app::{Cell, Chunk, Event, Rows, put};

#[tokio::test]
async fn deletes_and_moves_reach_clients_whatever_the_key_type() {
    let db = TestDb::new().await;
    let store = db.store(engine::storage::StoreLimits::default());
    let server = TestServer::start(&db, move |b| b.app(app::app()).storage(store)).await;
    let client = Client::builder(server.url(""))
        .app(app::app())
        .auth(BearerToken::new(TestServer::token("alice")))
        .store(StoreLocation::Memory)
        .pull_interval(Duration::from_millis(200))
        .build()
        .await
        .unwrap();

    let at = |micros: i64| Timestamp::from_timestamp_micros(1_700_000_000_000_000 + micros).unwrap();
    let col = |n: u128| uuid::Uuid::from_u128(0xABCD_0000 + n);
    for n in 0..3_u8 {
        let rows = Rows {
            event: at(i64::from(n) * 7),
            chunk: vec![n, 0xff, 0x00, b'\n'],
            cell: ("sheet 1".into(), i64::from(n) - 1, col(u128::from(n))),
        };
        client.mutate::<put>(rows).await.unwrap();
    }
    let on_server = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM chunks) + (SELECT count(*) FROM cells)",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap()
    };
    eventually(Duration::from_secs(10), "the rows reach the server", || async { on_server().await == 9 }).await;

    // Deleted by another program, and a cell given to someone else: each leaves alice's bucket.
    // SQLite keeps timestamps and bytes in their wire form.
    let (writes, tombstones) = match backend() {
        Backend::Postgres => (
            "DELETE FROM events WHERE at = to_timestamp(1700000000.000007);
             DELETE FROM chunks WHERE hash = '\\x01ff000a'::bytea;
             UPDATE cells SET owner_id = 'bob' WHERE row = 1;",
            "SELECT CAST(key AS TEXT) FROM _engine_tombstones ORDER BY id",
        ),
        Backend::Sqlite => (
            "DELETE FROM events WHERE at = '2023-11-14T22:13:20.000007Z';
             DELETE FROM chunks WHERE hash = 'Af8ACg==';
             UPDATE cells SET owner_id = 'bob' WHERE row = 1;",
            "SELECT CAST(key AS TEXT) FROM _engine_tombstones ORDER BY seq",
        ),
    };
    sqlx::raw_sql(writes).execute(&db.pool).await.unwrap();
    let keys: Vec<String> = sqlx::query_scalar(tombstones).fetch_all(&db.pool).await.unwrap();
    let keys: Vec<serde_json::Value> = keys.iter().map(|k| serde_json::from_str(k).unwrap()).collect();
    assert_eq!(
        keys,
        vec![
            serde_json::json!({"at": "2023-11-14T22:13:20.000007Z"}),
            serde_json::json!({"hash": "Af8ACg=="}),
            serde_json::json!({"sheet": "sheet 1", "row": 1, "col": col(2).to_string()}),
        ],
        "tombstone keys are in the wire form"
    );

    eventually(Duration::from_secs(10), "the client drops exactly the rows that left", || async {
        client.get::<Event>(&at(7)).await.unwrap().is_none()
            && client.get::<Chunk>(&vec![1, 0xff, 0x00, b'\n']).await.unwrap().is_none()
            && client.get::<Cell>(&("sheet 1".into(), 1, col(2))).await.unwrap().is_none()
    })
    .await;
    for n in [0_u8, 2] {
        assert!(client.get::<Event>(&at(i64::from(n) * 7)).await.unwrap().is_some());
        assert!(client.get::<Chunk>(&vec![n, 0xff, 0x00, b'\n']).await.unwrap().is_some());
    }
    assert!(client.get::<Cell>(&("sheet 1".into(), -1, col(0))).await.unwrap().is_some());
    assert!(client.get::<Cell>(&("sheet 1".into(), 0, col(1))).await.unwrap().is_some());
}
