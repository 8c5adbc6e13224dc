//! Pull benchmarks, over the wire: a notes server process, data written through pushes (batches
//! of `add_note`, each mutation its own transaction, never analyzed), ten other users' notes in
//! the same table, and the same reads done directly on Postgres in the same run.
//!
//! - Bootstrap: a new client of `alice` pulls every note of her list in pages of 1,000 over
//!   HTTP; the baseline reads the same notes with a keyset-paged `SELECT … WHERE list_id = $1
//!   AND id > $2 ORDER BY id LIMIT 1000` (on an index made for it) and serializes each page
//!   to JSON objects. Each side five times, turn about; the medians. At every size on rows
//!   never analyzed (the baseline's planner kept to the index's order), then at the last size
//!   once more on analyzed rows with the planner's own plan, the strongest baseline. Beside
//!   each side's rows/s, the CPU of the server process, the load generator and the database's
//!   Postgres backends per 1,000 rows.
//! - Incremental: a caught-up client of `alice`; 10 of her notes change in one push and the
//!   client pulls them (median of 30); the baseline selects the same 10 rows by key.
//! - Many buckets: `carol` is a member of 10,000 lists of 10 notes; her bootstrap and her
//!   incremental pulls.
//!
//! With `--backend sqlite`, the server runs on a SQLite file and the bootstraps alone are
//! measured, beside the same keyset paging done by a connection of this process on the same
//! file (on a copy of the notes with an index of its own, analyzed); each side's CPU per 1,000
//! rows is reported too (the baseline's is all this process's: SQLite runs in it).

use std::time::{Duration, Instant};

use engine::ColumnType;
use serde_json::{Value, json};
use sqlx::Row;

use crate::db::{Backend, BenchDb, BenchFile};
use crate::wire::{BackendsSpent, CpuSpent, ServerProcess, WireClient, ms, percentile, write_notes};

/// Other users writing beside alice: their notes are half as many as hers, in lists of their own.
const OTHERS: usize = 10;

pub(crate) async fn run(backend: Backend, sizes: &[usize], lists: usize) {
    match backend {
        Backend::Postgres => {
            growing(sizes).await;
            many_buckets(lists, 10).await;
        }
        Backend::Sqlite => sqlite_bootstraps(sizes).await,
    }
}

/// Write `more` notes of alice beside the ones `written` so far, from four devices, and the
/// other users' notes beside them (half as many), all at once; print how fast.
async fn seed(server: &ServerProcess, written: usize, more: usize) {
    let started = Instant::now();
    let alice = write_notes(server, "alice", "alice-list", more, 4, written == 0);
    let others = futures_util::future::join_all((0..OTHERS).map(|u| {
        let user = format!("user-{u}");
        let list = format!("list-of-user-{u}");
        async move { write_notes(server, &user, &list, more / (2 * OTHERS), 1, written == 0).await }
    }));
    tokio::join!(alice, others);
    let seconds = started.elapsed().as_secs_f64();
    let pushed = more + more / 2;
    println!("(seeded {pushed} notes through pushes in {seconds:.0} s: {:.0} mutations/s)", pushed as f64 / seconds);
}

/// Whether the bootstrap is measured at `size` of `sizes`: from 100,000 notes, and at the last.
fn bootstraps_at(size: usize, sizes: &[usize]) -> bool {
    size >= 100_000 || Some(&size) == sizes.last()
}

/// Alice's notes grow through `sizes`; at each, the incremental pull, and at 100,000 and more
/// (and the last) the bootstrap.
async fn growing(sizes: &[usize]) {
    let db = BenchDb::new(4).await;
    db.storage(example_notes::app()).await;
    let server = ServerProcess::start(&db.url).await;
    let mut incremental = Vec::new();
    let mut bootstraps = Vec::new();
    let mut written = 0;
    let mut follower = WireClient::new(&server, "alice");
    let mut writer = WireClient::new(&server, "alice");
    let mut cursor = None;
    for &size in sizes {
        seed(&server, written, size - written).await;
        written = size;
        cursor = Some(follower.catch_up(cursor).await);
        incremental.push((size, changes(&db, &mut follower, &mut writer, cursor.as_mut().unwrap()).await));
        if bootstraps_at(size, sizes) {
            let baseline = async || baseline_bootstrap(&db, size, Statistics::None).await;
            bootstraps.push((size, bootstrap(&server, size, Some(&db.pool), baseline).await));
        }
    }
    // The strongest baseline: the rows analyzed, as autovacuum leaves a live table, and the
    // plan the planner chooses on them. Last, since the statistics stay.
    let size = written;
    sqlx::raw_sql("ANALYZE notes").execute(&db.pool).await.unwrap();
    let baseline = async || baseline_bootstrap(&db, size, Statistics::Analyzed).await;
    let analyzed = bootstrap(&server, size, Some(&db.pool), baseline).await;

    println!("\n## Pull: paged bootstrap over HTTP (`limit` 1,000), alice's notes among others'\n");
    println!("Never analyzed; the baseline's planner kept to the index's order (bitmap scans and sorts off):\n");
    print_bootstraps(&bootstraps);
    println!("\nAnalyzed (`ANALYZE notes`), the baseline's plan the planner's own choice:\n");
    print_bootstraps(&[(size, analyzed)]);
    println!("\n## Pull: 10 recent changes, over HTTP (median of 30)\n");
    println!("| notes of alice (table) | engine pull | baseline (SELECT of the 10 rows) |");
    println!("|---:|---:|---:|");
    for (size, (engine, baseline)) in &incremental {
        println!("| {size} ({}) | {:.2} ms | {:.2} ms |", size + size / 2, ms(*engine), ms(*baseline));
    }
    db.drop_database().await;
}

/// The medians of a size's bootstraps.
struct Bootstrap {
    engine: f64,
    /// The engine's rows/s with the answers read but their rows not built (`PageRead`).
    engine_read: f64,
    baseline: f64,
    first_pages: Duration,
    last_pages: Duration,
    baseline_page: Duration,
    /// CPU milliseconds per 1,000 rows: the server process's and this process's during the
    /// engine's decoded walks, and this process's during the baseline's reads.
    server_cpu: f64,
    generator_cpu: f64,
    baseline_cpu: f64,
    /// CPU milliseconds of the database's Postgres backends per 1,000 rows, during the engine's
    /// decoded walks and during the baseline's reads (none on SQLite).
    database_cpu: Option<(f64, f64)>,
}

/// The bootstraps' table: rows/s of each side and their ratio, page medians, and CPU per 1,000
/// rows (the baseline's is this process's: all of it on SQLite, the client's part on Postgres).
fn print_bootstraps(bootstraps: &[(usize, Bootstrap)]) {
    println!(
        "| notes of alice (table) | engine rows/s, answers decoded | answers read, rows not built | baseline rows/s | ratio, decoded / read | engine page p50, first / last tenth | baseline page p50 | CPU per 1,000 rows: server / load generator / baseline's process | Postgres CPU per 1,000 rows: engine / baseline |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (size, b) in bootstraps {
        println!(
            "| {size} ({}) | {:.0} | {:.0} | {:.0} | {:.2} / {:.2} | {:.1} / {:.1} ms | {:.1} ms | {:.1} / {:.1} / {:.1} ms | {} |",
            size + size / 2,
            b.engine,
            b.engine_read,
            b.baseline,
            b.engine / b.baseline,
            b.engine_read / b.baseline,
            ms(b.first_pages),
            ms(b.last_pages),
            ms(b.baseline_page),
            b.server_cpu,
            b.generator_cpu,
            b.baseline_cpu,
            b.database_cpu
                .map_or_else(|| "–".to_owned(), |(engine, baseline)| format!("{engine:.1} / {baseline:.1} ms")),
        );
    }
}

/// Bootstraps of each side, for the median: the machine's noise is of the size of the effects.
const BOOTSTRAPS: usize = 5;

/// One read by a baseline: how long it took, the median of its pages, and this process's CPU.
struct Paged {
    took: Duration,
    page: Duration,
    cpu: f64,
    /// The CPU seconds of the database's backends, where they were watched.
    database: f64,
}

/// New clients of alice pull everything, and the baseline reads her notes, turn about (the
/// machine's speed drifts over tens of seconds; alternating exposes both sides to the same
/// drift). The medians of each side.
/// With `database`, the CPU of its Postgres backends is watched too.
async fn bootstrap(
    server: &ServerProcess,
    size: usize,
    database: Option<&sqlx::PgPool>,
    mut baseline: impl AsyncFnMut() -> Paged,
) -> Bootstrap {
    let mut walks = Vec::new();
    let mut reads = Vec::new();
    let mut baselines = Vec::new();
    let mut cpus = Vec::new();
    let mut engine_database = Vec::new();
    for _ in 0..BOOTSTRAPS {
        let backends = match database {
            Some(pool) => Some(BackendsSpent::start(pool).await),
            None => None,
        };
        let cpu = CpuSpent::start(server.pid);
        let walk = Walk::pull(&WireClient::new(server, "alice"), Decode::Typed).await;
        cpus.push(cpu.stop());
        if let (Some(backends), Some(pool)) = (backends, database) {
            engine_database.push(backends.stop(pool).await);
        }
        assert_eq!(walk.notes, size, "the bootstrap delivers every note of alice");
        walks.push(walk);
        let read = Walk::pull(&WireClient::new(server, "alice"), Decode::Read).await;
        assert_eq!(read.notes, size, "the bootstrap delivers every note of alice");
        reads.push(read.took);
        baselines.push(baseline().await);
    }
    walks.sort_by_key(|w| w.took);
    reads.sort();
    baselines.sort_by_key(|b| b.took);
    let walk = &walks[BOOTSTRAPS / 2];
    let base = &baselines[BOOTSTRAPS / 2];
    let per_thousand = |seconds: f64| seconds * 1000.0 / (size as f64 / 1000.0);
    let mut server_cpu: Vec<f64> = cpus.iter().map(|c| per_thousand(c.server)).collect();
    let mut generator_cpu: Vec<f64> = cpus.iter().map(|c| per_thousand(c.own)).collect();
    let mut baseline_cpu: Vec<f64> = baselines.iter().map(|b| per_thousand(b.cpu)).collect();
    let mut engine_database: Vec<f64> = engine_database.into_iter().map(per_thousand).collect();
    let mut baseline_database: Vec<f64> = baselines.iter().map(|b| per_thousand(b.database)).collect();
    for figures in
        [&mut server_cpu, &mut generator_cpu, &mut baseline_cpu, &mut engine_database, &mut baseline_database]
    {
        figures.sort_by(f64::total_cmp);
    }
    Bootstrap {
        engine: size as f64 / walk.took.as_secs_f64(),
        engine_read: size as f64 / reads[BOOTSTRAPS / 2].as_secs_f64(),
        baseline: size as f64 / base.took.as_secs_f64(),
        first_pages: walk.first_tenth,
        last_pages: walk.last_tenth,
        baseline_page: base.page,
        server_cpu: server_cpu[BOOTSTRAPS / 2],
        generator_cpu: generator_cpu[BOOTSTRAPS / 2],
        baseline_cpu: baseline_cpu[BOOTSTRAPS / 2],
        database_cpu: database.map(|_| (engine_database[BOOTSTRAPS / 2], baseline_database[BOOTSTRAPS / 2])),
    }
}

/// What the baseline's planner knows of the notes.
#[derive(Clone, Copy, PartialEq)]
enum Statistics {
    /// Nothing (never analyzed): the planner is kept to the index's order.
    None,
    /// The table analyzed: the planner's own choice, printed.
    Analyzed,
}

/// One read of alice's notes by the baseline, on an index of its own made for it and dropped
/// afterwards (the engine's walks run without it).
async fn baseline_bootstrap(db: &BenchDb, size: usize, statistics: Statistics) -> Paged {
    sqlx::query("CREATE INDEX bench_notes_by_list ON notes (list_id, id COLLATE \"C\")")
        .execute(&db.pool)
        .await
        .unwrap();
    let mut conn = db.pool.acquire().await.unwrap();
    let page = "SELECT id, owner_id, list_id, title, done, position, body, deleted_at FROM notes
         WHERE list_id = 'alice-list' AND id COLLATE \"C\" > $1 ORDER BY id COLLATE \"C\" LIMIT 1000";
    match statistics {
        // The plan a tuned app gets: the index in its order. On unanalyzed rows Postgres may
        // pick a bitmap over the rest of the list and a sort instead, and a page costs the rest
        // of the list.
        Statistics::None => {
            sqlx::raw_sql("SET enable_bitmapscan = off; SET enable_sort = off").execute(&mut *conn).await.unwrap();
        }
        Statistics::Analyzed => {
            sqlx::raw_sql("ANALYZE notes").execute(&mut *conn).await.unwrap();
            let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("EXPLAIN {page}")))
                .bind("")
                .fetch_all(&mut *conn)
                .await
                .unwrap();
            eprintln!("(the baseline's plan on analyzed rows: {})", plan.join(" / "));
        }
    }
    let backends = BackendsSpent::start(&db.pool).await;
    let mut paged = keyset_read::<sqlx::Postgres>(size, &mut conn, page, |r| {
        (r.get::<Vec<u8>, _>(6).to_json(), r.get::<Option<engine::Timestamp>, _>(7).to_json())
    })
    .await;
    paged.database = backends.stop(&db.pool).await;
    sqlx::raw_sql("RESET ALL").execute(&mut *conn).await.unwrap();
    drop(conn);
    sqlx::query("DROP INDEX bench_notes_by_list").execute(&db.pool).await.unwrap();
    paged
}

/// Alice's `size` notes read on `conn` in keyset pages by the statement `page` (of the key a
/// page starts after), each row as a JSON object (its `body` and `deleted_at` as `rest` reads
/// them: their types are the database's) and each page then written as JSON.
async fn keyset_read<DB>(
    size: usize,
    conn: &mut DB::Connection,
    page: &'static str,
    rest: fn(&DB::Row) -> (Value, Value),
) -> Paged
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
    String: for<'r> sqlx::Decode<'r, DB> + for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    bool: for<'r> sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    i64: for<'r> sqlx::Decode<'r, DB> + sqlx::Type<DB>,
{
    let cpu = CpuSpent::start(std::process::id());
    let start = Instant::now();
    let mut pages = Vec::new();
    let mut after = String::new();
    let mut read = 0;
    loop {
        let page_start = Instant::now();
        let rows: Vec<Value> = sqlx::query::<DB>(page)
            .bind(after.clone())
            .fetch_all(&mut *conn)
            .await
            .unwrap()
            .iter()
            .map(|r| {
                let (body, deleted_at) = rest(r);
                json!({
                    "id": r.get::<String, _>(0), "owner_id": r.get::<String, _>(1), "list_id": r.get::<String, _>(2),
                    "title": r.get::<String, _>(3), "done": r.get::<bool, _>(4), "position": r.get::<i64, _>(5),
                    "body": body, "deleted_at": deleted_at,
                })
            })
            .collect();
        if rows.is_empty() {
            break;
        }
        std::hint::black_box(serde_json::to_vec(&rows).unwrap());
        pages.push(page_start.elapsed());
        read += rows.len();
        after = rows.last().and_then(|r| r["id"].as_str()).expect("a row's id").to_owned();
    }
    let took = start.elapsed();
    assert_eq!(read, size, "the baseline reads every note of alice");
    pages.sort();
    Paged { took, page: percentile(&pages, 0.5), cpu: cpu.stop().own, database: 0.0 }
}

/// On SQLite: alice's notes grow through `sizes` (written through pushes, as on Postgres), and
/// at 100,000 and more (and the last) the bootstraps, beside keyset paging on the same file.
async fn sqlite_bootstraps(sizes: &[usize]) {
    let file = BenchFile::new();
    let server = ServerProcess::start(&file.url).await;
    let mut bootstraps = Vec::new();
    let mut written = 0;
    for &size in sizes {
        seed(&server, written, size - written).await;
        written = size;
        if bootstraps_at(size, sizes) {
            let mut conn = sqlite_baseline_copy(&file).await;
            let baseline = async || keyset_read::<sqlx::Sqlite>(size, &mut conn, SQLITE_PAGE, sqlite_rest).await;
            bootstraps.push((size, bootstrap(&server, size, None, baseline).await));
            sqlx::raw_sql("DROP TABLE bench_notes").execute(&mut conn).await.unwrap();
        }
    }
    println!(
        "\n## Pull on SQLite: paged bootstrap over HTTP (`limit` 1,000), alice's notes among others', beside keyset paging on the same file\n"
    );
    print_bootstraps(&bootstraps);
    drop(server);
    file.remove();
}

/// The baseline's page on SQLite: keyset paging of alice's notes in the baseline's copy.
const SQLITE_PAGE: &str = "SELECT id, owner_id, list_id, title, done, position, body, deleted_at FROM bench_notes
     WHERE list_id = 'alice-list' AND id > ? ORDER BY id LIMIT 1000";

/// A baseline row's `body` and `deleted_at`, as SQLite keeps them (text).
fn sqlite_rest(r: &sqlx::sqlite::SqliteRow) -> (Value, Value) {
    (json!(r.get::<String, _>(6)), json!(r.get::<Option<String>, _>(7)))
}

/// The baseline's own copy of the notes in the file, `bench_notes` (every row, in the order of
/// the engine's table), with its index `(list_id, id)` made and analyzed: the plan is the
/// planner's choice, printed. Made once for a size's turns, not at each turn: a change of the
/// file's schema makes each of the server's connections load the schema and prepare its
/// statements again at its next pull, a cost the engine would not have but for the benchmark.
/// The engine's table gets neither the index nor statistics: the engine's walks run on the
/// file as the engine keeps it, never analyzed. A connection of this process, open on the file.
async fn sqlite_baseline_copy(file: &BenchFile) -> sqlx::SqliteConnection {
    let mut conn = file.connect().await;
    sqlx::raw_sql(
        "CREATE TABLE bench_notes AS SELECT * FROM notes ORDER BY rowid;
         CREATE INDEX bench_notes_by_list ON bench_notes (list_id, id); ANALYZE bench_notes_by_list",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let plan = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {SQLITE_PAGE}")))
        .bind("")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let plan: Vec<String> = plan.iter().map(|step| step.get("detail")).collect();
    eprintln!("(the baseline's plan: {})", plan.join("; "));
    conn
}

/// 30 rounds of 10 of alice's notes changed in one push and pulled by the caught-up `follower`:
/// the medians of the engine's pull and of the baseline's `SELECT` of the 10 rows.
async fn changes(
    db: &BenchDb,
    follower: &mut WireClient,
    writer: &mut WireClient,
    cursor: &mut String,
) -> (Duration, Duration) {
    let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM notes WHERE list_id = 'alice-list' LIMIT 300")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    let mut engine = Vec::new();
    let mut baseline = Vec::new();
    for round in 0..30 {
        let chosen: Vec<String> = (0..10).map(|i| ids[(round * 10 + i) % ids.len()].clone()).collect();
        let updates: Vec<(&str, Value)> =
            chosen.iter().map(|id| ("update_note", json!({"id": id, "title": format!("round {round}")}))).collect();
        writer.push(&updates).await;
        // The pull that brings the 10 notes is timed (a pull that raced the horizon is not).
        loop {
            let start = Instant::now();
            let page = follower.pull(Some(cursor), 1000).await;
            let elapsed = start.elapsed();
            *cursor = page.cursor;
            if page.changes.iter().filter(|c| c.table == "notes").count() == 10 {
                engine.push(elapsed);
                break;
            }
            assert!(page.changes.is_empty(), "all 10 notes come in one pull");
        }
        let start = Instant::now();
        let rows = sqlx::query(
            "SELECT id, owner_id, list_id, title, done, position, body, deleted_at FROM notes WHERE id = ANY($1)",
        )
        .bind(&chosen)
        .fetch_all(&db.pool)
        .await
        .unwrap();
        std::hint::black_box(rows.len());
        baseline.push(start.elapsed());
    }
    engine.sort();
    baseline.sort();
    (percentile(&engine, 0.5), percentile(&baseline, 0.5))
}

/// `carol` is made a member of `lists` lists of `per_list` notes each (ten owners write them);
/// her bootstrap, and 30 incremental pulls of 10 changes.
async fn many_buckets(lists: usize, per_list: usize) {
    let db = BenchDb::new(4).await;
    db.storage(example_notes::app()).await;
    let server = ServerProcess::start(&db.url).await;
    let started = Instant::now();
    let owners = 10;
    let tasks: Vec<_> = (0..owners)
        .map(|o| {
            let mut owner = WireClient::new(&server, &format!("owner-{o}"));
            let mine: Vec<usize> = (0..lists).filter(|l| l % owners == o).collect();
            tokio::spawn(async move {
                for chunk in mine.chunks(25) {
                    let mut batch: Vec<(&str, Value)> = Vec::new();
                    for l in chunk {
                        let list = format!("shared-{l:05}");
                        batch.push(("create_list", json!({"id": list, "title": list})));
                        batch.push(("share_list", json!({"list_id": list, "user_id": "carol", "role": "editor"})));
                        for n in 0..per_list {
                            batch.push(("add_note", json!({"list_id": list, "title": format!("note {n}")})));
                        }
                    }
                    owner.push(&batch).await;
                }
                owner
            })
        })
        .collect();
    let mut writers = Vec::new();
    for task in tasks {
        writers.push(task.await.unwrap());
    }
    let notes = lists * per_list;
    println!(
        "(seeded {lists} lists shared with carol and {notes} notes through pushes in {:.0} s)",
        started.elapsed().as_secs_f64()
    );

    // A share is an invitation: carol accepts each list before her first sync.
    let mut carol = WireClient::new(&server, "carol");
    let accepts: Vec<(&str, Value)> =
        (0..lists).map(|l| ("accept_list", json!({"list_id": format!("shared-{l:05}")}))).collect();
    for chunk in accepts.chunks(250) {
        carol.push(chunk).await;
    }
    let walk = Walk::pull(&carol, Decode::Typed).await;
    let bootstrap = walk.took;
    assert_eq!(walk.notes, notes, "carol gets every note of her lists");

    let mut cursor = walk.cursor;
    let ids: Vec<String> =
        sqlx::query_scalar("SELECT id FROM notes ORDER BY random() LIMIT 300").fetch_all(&db.pool).await.unwrap();
    let owner_of: Vec<(String, String)> = sqlx::query_as("SELECT id, owner_id FROM notes WHERE id = ANY($1)")
        .bind(&ids)
        .fetch_all(&db.pool)
        .await
        .unwrap();
    let mut incremental = Vec::new();
    // Ten distinct notes a round, as many rounds as there are notes for (30 at most): a round
    // without ten changes would wait for them forever.
    for round in 0..(owner_of.len() / 10).min(30) {
        for (id, owner) in owner_of.iter().skip(round * 10).take(10) {
            let o: usize = owner.trim_start_matches("owner-").parse().unwrap();
            writers[o].push(&[("update_note", json!({"id": id, "title": format!("round {round}")}))]).await;
        }
        let mut seen = 0;
        while seen < 10 {
            let start = Instant::now();
            let page = carol.pull(Some(&cursor), 1000).await;
            let elapsed = start.elapsed();
            cursor = page.cursor;
            let n = page.changes.iter().filter(|c| c.table == "notes").count();
            if n > 0 {
                incremental.push(elapsed);
            }
            seen += n;
        }
    }
    incremental.sort();
    println!("\n## Pull: an actor holding {lists} buckets ({per_list} notes each), over HTTP\n");
    println!("| bootstrap rows/s | page p50, first / last tenth | incremental pull of recent changes (median) |");
    println!("|---:|---:|---:|");
    println!(
        "| {:.0} | {:.1} / {:.1} ms | {:.2} ms |",
        notes as f64 / bootstrap.as_secs_f64(),
        ms(walk.first_tenth),
        ms(walk.last_tenth),
        ms(percentile(&incremental, 0.5))
    );
    db.drop_database().await;
}

/// A bootstrap in pages of 1,000: how long it took, the notes it delivered, the median page of
/// its first and of its last tenth, and the cursor it ended with.
struct Walk {
    took: Duration,
    notes: usize,
    first_tenth: Duration,
    last_tenth: Duration,
    cursor: String,
}

/// How the load generator reads each answer of a walk.
#[derive(Clone, Copy, PartialEq)]
enum Decode {
    /// Into the wire types, as the Rust client does.
    Typed,
    /// Whole, without building the rows (`PageRead`).
    Read,
}

impl Walk {
    async fn pull(client: &WireClient, decode: Decode) -> Walk {
        let start = Instant::now();
        let mut cursor: Option<String> = None;
        let mut pages = Vec::new();
        let mut notes = 0;
        loop {
            let page_start = Instant::now();
            let (page_notes, next, more) = if decode == Decode::Typed {
                let page = client.pull(cursor.as_deref(), 1000).await;
                (page.changes.iter().filter(|c| c.table == "notes").count(), page.cursor, page.has_more)
            } else {
                let page = client.pull_read(cursor.as_deref(), 1000).await;
                let notes = page.changes.iter().filter(|c| c.table == "notes" && !c.buckets.is_empty()).count();
                (notes, page.cursor, page.has_more)
            };
            pages.push(page_start.elapsed());
            notes += page_notes;
            cursor = Some(next);
            if !more {
                break;
            }
        }
        let took = start.elapsed();
        let tenth = (pages.len() / 10).max(1);
        let mut first: Vec<Duration> = pages[..tenth].to_vec();
        let mut last: Vec<Duration> = pages[pages.len() - tenth..].to_vec();
        first.sort();
        last.sort();
        let cursor = cursor.expect("at least one page");
        Walk { took, notes, first_tenth: percentile(&first, 0.5), last_tenth: percentile(&last, 0.5), cursor }
    }
}
