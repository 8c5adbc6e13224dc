//! Provisioning: the SQL that makes a Postgres database serve an app, without logical
//! replication (`docs/design.md` §1). User tables are created when missing and otherwise get the
//! engine's columns added, keeping their rows; every synced table gets a trigger that stamps each
//! written row with its transaction id and records, in `_engine_tombstones`, every bucket a row
//! leaves (by delete, soft delete or a change of scope column); and indexes serve the change
//! stream and bucket-scoped scans. The engine's own tables share the `_engine_` prefix.
//!
//! [`provision_plan`] returns the statements. `apply.rs` reads the catalog first and runs
//! only what is missing (`docs/design.md` §1): nothing, and no lock on any table, when the
//! database is current; indexes on tables that already exist are built `CONCURRENTLY` outside
//! the transaction; lock waits are bounded and retried, and a wait that gives up names the
//! blocking query (`locks.rs`); `diff.rs` shows what it would change. `catalog.rs` reads what the database has and finds drift (a column whose type,
//! nullability or key differs from the app's). Plans are ordered (`_engine_plans`): an older
//! plan never replaces a newer one.

mod apply;
mod catalog;
mod diff;
mod locks;
pub(crate) mod sqlite;

pub(crate) use apply::{provision, verify};
pub(crate) use diff::changes;
pub use locks::ProvisionLocks;

use engine_kernel::rules::buckets::RuleSelection;
use engine_kernel::{App, MergePolicy, TableMeta};

use crate::pg::sql::{collated, ident, index_name, literal, trigger_function, wire_json};
use crate::rules::selection::{bucket_key_of, live};

/// The version of the engine's own schema. A database provisioned by a newer engine is refused.
pub const SCHEMA_VERSION: i64 = 1;

/// Serializes concurrent provisioning by several servers.
const ADVISORY_LOCK: i64 = 0x656e_6769_6e65;

/// The SQL statements that provision `app`, in order.
///
/// The plan depends on what the app declares, not on the order it lists tables and rules in:
/// tables go by name, and a table's selections by rule name. So the app compiled and the same
/// app read from its contract ([`engine_kernel::contract::app_from_contract`]) have one plan.
pub fn provision_plan(app: &App) -> Vec<String> {
    steps(app).into_iter().map(|step| step.sql).collect()
}

/// What a statement of the plan creates or changes: how its need is read from the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Object {
    /// `CREATE TABLE IF NOT EXISTS`, with the columns it creates.
    Table { table: String, columns: Vec<String> },
    /// `ALTER TABLE … ADD COLUMN IF NOT EXISTS`; `required` when it is `NOT NULL` without a
    /// default (it cannot be added to a table that has rows).
    Column { table: String, column: String, required: bool },
    /// `CREATE [UNIQUE] INDEX IF NOT EXISTS`.
    Index { table: String, name: String },
    /// `CREATE OR REPLACE FUNCTION`: replaced when its body differs.
    Function { name: String },
    /// `CREATE OR REPLACE TRIGGER`.
    Trigger { table: String, name: String },
    /// The engine's metadata rows: written every time (no table lock).
    Meta,
    /// A statement of a table's rebuild, on SQLite (`sqlite::rebuilt`): Postgres changes its
    /// tables in place.
    Rebuild { table: String },
}

/// One statement of the plan and what it creates.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) sql: String,
    pub(crate) object: Object,
}

impl Step {
    fn new(sql: impl Into<String>, object: Object) -> Self {
        Step { sql: sql.into(), object }
    }

    /// A step read from its own SQL (the engine's fixed statements).
    fn parse(sql: &str) -> Self {
        let words: Vec<&str> = sql.split_whitespace().collect();
        let bare = |w: &str| w.split('(').next().unwrap_or_default().trim_matches('"').to_owned();
        let object = match words.as_slice() {
            ["CREATE", "TABLE", "IF", "NOT", "EXISTS", table, ..] => {
                let columns = sql
                    .lines()
                    .skip(1)
                    .filter_map(|l| l.split_whitespace().next())
                    .filter(|c| *c != "PRIMARY" && *c != ")")
                    .map(bare)
                    .collect();
                Object::Table { table: bare(table), columns }
            }
            ["ALTER", "TABLE", table, "ADD", "COLUMN", "IF", "NOT", "EXISTS", column, ..] => {
                Object::Column { table: bare(table), column: bare(column), required: false }
            }
            ["CREATE", "INDEX" | "UNIQUE", ..] => {
                let at = words.iter().position(|w| *w == "EXISTS").expect("an index statement names its index");
                Object::Index { table: bare(words[at + 3]), name: bare(words[at + 1]) }
            }
            ["CREATE", "OR", "REPLACE", "FUNCTION", name, ..] => Object::Function { name: bare(name) },
            ["CREATE", "OR", "REPLACE", "TRIGGER", name, ..] => {
                let at = words.iter().position(|w| *w == "ON").expect("a trigger statement names its table");
                Object::Trigger { table: bare(words[at + 1]), name: bare(name) }
            }
            _ => Object::Meta,
        };
        Step::new(sql, object)
    }

    /// The table the statement locks, if any.
    pub(crate) fn table(&self) -> Option<&str> {
        match &self.object {
            Object::Table { table, .. }
            | Object::Column { table, .. }
            | Object::Index { table, .. }
            | Object::Trigger { table, .. }
            | Object::Rebuild { table } => Some(table),
            Object::Function { .. } => None,
            Object::Meta => Some("_engine_meta"),
        }
    }
}

/// The plan's statements with what each creates, in order.
pub(crate) fn steps(app: &App) -> Vec<Step> {
    let rules = app.rule_index();
    let mut plan: Vec<Step> = engine_tables().iter().map(|sql| Step::parse(sql)).collect();
    let mut tables: Vec<&TableMeta> = app.tables().iter().map(|def| def.meta()).collect();
    tables.sort_by_key(|t| t.name);
    for table in tables {
        plan.extend(user_table(table));
        let mut selections = rules.selections(table.name).to_vec();
        selections.sort_by_key(|s| s.rule.name);
        if !selections.is_empty() {
            plan.extend(tracking(table, &selections));
        }
    }
    for (table, columns) in membership_indexes(app) {
        plan.push(Step::parse(&format!(
            "CREATE INDEX IF NOT EXISTS {} ON {} ({})",
            ident(&index_name(table, "member", &columns)),
            ident(table),
            columns.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", ")
        )));
    }
    // Blob columns are looked up by key when a download is asked for, and who wrote each key
    // into a row is kept: a download needs a row an uploader of the bytes wrote.
    if app.tables().iter().any(|def| def.meta().columns.iter().any(|c| c.blob)) {
        plan.extend(blob_refs().iter().map(|sql| Step::parse(sql)));
    }
    for def in app.tables() {
        let table = def.meta();
        for column in table.columns.iter().filter(|c| c.blob) {
            plan.push(Step::parse(&format!(
                "CREATE INDEX IF NOT EXISTS {} ON {} ({})",
                ident(&index_name(table.name, "blob", &[column.name])),
                ident(table.name),
                ident(column.name)
            )));
        }
    }
    plan.push(Step::new(format!(
        "INSERT INTO _engine_meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value WHERE _engine_meta.value IS DISTINCT FROM EXCLUDED.value"
    ), Object::Meta));
    plan.push(Step::new(
        "INSERT INTO _engine_meta (key, value) VALUES ('tombstone_horizon', '0') ON CONFLICT (key) DO NOTHING",
        Object::Meta,
    ));
    plan
}

fn engine_tables() -> Vec<String> {
    vec![
        "CREATE TABLE IF NOT EXISTS _engine_meta (\n  key text PRIMARY KEY,\n  value text NOT NULL\n)".into(),
        // The plans provisioned, in order: an instance whose plan is older than the last one
        // does not replace it.
        "CREATE TABLE IF NOT EXISTS _engine_plans (\n  generation bigserial PRIMARY KEY,\n  fingerprint text NOT NULL UNIQUE,\n  provisioned_at timestamptz NOT NULL DEFAULT now()\n)".into(),
        "CREATE TABLE IF NOT EXISTS _engine_tombstones (\n  id bigserial PRIMARY KEY,\n  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),\n  table_name text NOT NULL,\n  key jsonb NOT NULL,\n  buckets text[] NOT NULL,\n  created_at timestamptz NOT NULL DEFAULT now()\n)".into(),
        "CREATE INDEX IF NOT EXISTS _engine_tombstones_xid ON _engine_tombstones (xid, id)".into(),
        "CREATE INDEX IF NOT EXISTS _engine_tombstones_created ON _engine_tombstones (created_at)".into(),
        "CREATE TABLE IF NOT EXISTS _engine_clients (\n  user_id text NOT NULL,\n  client_id uuid NOT NULL,\n  last_mutation_id bigint NOT NULL DEFAULT 0,\n  last_xid xid8 NOT NULL DEFAULT '0',\n  created_at timestamptz NOT NULL DEFAULT now(),\n  updated_at timestamptz NOT NULL DEFAULT now(),\n  PRIMARY KEY (user_id, client_id)\n)".into(),
        "CREATE TABLE IF NOT EXISTS _engine_mutations (\n  user_id text NOT NULL,\n  client_id uuid NOT NULL,\n  mutation_id bigint NOT NULL,\n  client_mutation_id uuid NOT NULL,\n  name text NOT NULL,\n  status text NOT NULL,\n  result jsonb NOT NULL,\n  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),\n  applied_at timestamptz NOT NULL DEFAULT now(),\n  PRIMARY KEY (user_id, client_id, mutation_id)\n)".into(),
        // The transaction that last advanced a client's sequence, and the one of each
        // mutation: a pull reports the last mutation below its horizon.
        "ALTER TABLE _engine_clients ADD COLUMN IF NOT EXISTS last_xid xid8 NOT NULL DEFAULT '0'".into(),
        "ALTER TABLE _engine_mutations ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT pg_current_xact_id()".into(),
        // When the client's last record was made: a record is stamped no earlier, so that a
        // client's records grow old in the order of their ids, and collection removes the oldest
        // ids first.
        "ALTER TABLE _engine_clients ADD COLUMN IF NOT EXISTS recorded_at timestamptz NOT NULL DEFAULT '-infinity'".into(),
        // How far collection removed the client's records (every one up to this id); unknown
        // (null) for a client from before it was noted, whose first kept record then tells.
        "ALTER TABLE _engine_clients ADD COLUMN IF NOT EXISTS collected_to bigint".into(),
        "ALTER TABLE _engine_clients ALTER COLUMN collected_to SET DEFAULT 0".into(),
        "CREATE UNIQUE INDEX IF NOT EXISTS _engine_mutations_client_mutation ON _engine_mutations (user_id, client_id, client_mutation_id)".into(),
        // Collection finds the records and clients past their retention by these.
        "CREATE INDEX IF NOT EXISTS _engine_mutations_applied ON _engine_mutations (applied_at)".into(),
        "CREATE INDEX IF NOT EXISTS _engine_clients_updated ON _engine_clients (updated_at)".into(),
        // The bucket sets pull cursors name by digest (too many buckets to write out), and when
        // a cursor last named each: sets unused for the tombstone retention are collected.
        "CREATE TABLE IF NOT EXISTS _engine_bucket_sets (\n  digest text PRIMARY KEY,\n  buckets text[] NOT NULL,\n  used_at timestamptz NOT NULL DEFAULT now(),\n  user_id text,\n  bytes integer NOT NULL DEFAULT 0\n)".into(),
        "CREATE INDEX IF NOT EXISTS _engine_bucket_sets_used ON _engine_bucket_sets (used_at)".into(),
        // Whose set each is, and the bytes of its keys: a user's sets are bounded, the ones
        // named least recently going first. Sets stored before have no user.
        "ALTER TABLE _engine_bucket_sets ADD COLUMN IF NOT EXISTS user_id text".into(),
        "ALTER TABLE _engine_bucket_sets ADD COLUMN IF NOT EXISTS bytes integer NOT NULL DEFAULT 0".into(),
        "CREATE INDEX IF NOT EXISTS _engine_bucket_sets_user ON _engine_bucket_sets (user_id, used_at)".into(),
        // Raised by a mutation's record when the client's sequence is not where the mutation
        // expected it, so the whole statement (and an insert sent with it) is undone.
        "CREATE OR REPLACE FUNCTION _engine_sequence_moved(client uuid, expected bigint) RETURNS text\nLANGUAGE plpgsql AS $$\nBEGIN\n  RAISE EXCEPTION 'the sequence of client % is not at %', client, expected USING ERRCODE = 'EN409';\nEND\n$$".into(),
        // Raised by a mutation's record when a write permission the mutation assumed, or a row
        // it required without reading it, does not hold in the record's snapshot: the mutation
        // is undone and checked again.
        "CREATE OR REPLACE FUNCTION _engine_unconfirmed() RETURNS text\nLANGUAGE plpgsql AS $$\nBEGIN\n  RAISE EXCEPTION 'a write permission the mutation assumed does not hold' USING ERRCODE = 'EN403';\nEND\n$$".into(),
        // Percent-encoding exactly as `BucketKey::new` does it: bytes outside A-Z a-z 0-9 - . _ ~
        // become %XX in uppercase hex. This and `_engine_bucket_key` are PL/pgSQL, whose plans a
        // session keeps: the stamp trigger calls them for every row an update or delete writes,
        // and a SQL function with a subquery is planned again at every call (ten times the cost).
        "CREATE OR REPLACE FUNCTION _engine_percent_encode(value text) RETURNS text\nLANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$\nDECLARE\n  bytes bytea;\n  encoded text := '';\n  b integer;\nBEGIN\n  IF value ~ '^[A-Za-z0-9._~-]*$' THEN\n    RETURN value;\n  END IF;\n  bytes := convert_to(value, 'UTF8');\n  FOR i IN 0 .. octet_length(bytes) - 1 LOOP\n    b := get_byte(bytes, i);\n    IF b BETWEEN 48 AND 57 OR b BETWEEN 65 AND 90 OR b BETWEEN 97 AND 122 OR b IN (45, 46, 95, 126) THEN\n      encoded := encoded || chr(b);\n    ELSE\n      encoded := encoded || '%' || upper(lpad(to_hex(b), 2, '0'));\n    END IF;\n  END LOOP;\n  RETURN encoded;\nEND\n$$".into(),
        // Background jobs: enqueued by mutations (in their transaction) or by the app, run by
        // workers that lease them with `FOR UPDATE SKIP LOCKED`. `attempts` is also the lease's
        // fencing token: a worker whose lease ran out cannot finish the job another one took.
        "CREATE TABLE IF NOT EXISTS _engine_jobs (\n  id bigserial PRIMARY KEY,\n  name text NOT NULL,\n  payload jsonb NOT NULL,\n  state text NOT NULL DEFAULT 'queued',\n  run_at timestamptz NOT NULL DEFAULT now(),\n  attempts integer NOT NULL DEFAULT 0,\n  leased_until timestamptz,\n  last_error text,\n  user_id text,\n  created_at timestamptz NOT NULL DEFAULT now(),\n  finished_at timestamptz\n)".into(),
        "CREATE INDEX IF NOT EXISTS _engine_jobs_due ON _engine_jobs (name, run_at, id) WHERE state = 'queued'".into(),
        "CREATE INDEX IF NOT EXISTS _engine_jobs_leased ON _engine_jobs (leased_until) WHERE state = 'running'".into(),
        "CREATE INDEX IF NOT EXISTS _engine_jobs_finished ON _engine_jobs (finished_at) WHERE finished_at IS NOT NULL".into(),
        // Workers listening on `_engine_jobs` hear of new jobs when their transaction commits.
        "CREATE OR REPLACE FUNCTION _engine_jobs_notify() RETURNS trigger\nLANGUAGE plpgsql AS $$\nBEGIN\n  PERFORM pg_notify('_engine_jobs', '');\n  RETURN NULL;\nEND\n$$".into(),
        "CREATE OR REPLACE TRIGGER _engine_jobs_notify AFTER INSERT ON _engine_jobs FOR EACH STATEMENT EXECUTE FUNCTION _engine_jobs_notify()".into(),
        "CREATE OR REPLACE FUNCTION _engine_bucket_key(rule text, params text[]) RETURNS text\nLANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$\nDECLARE\n  key text := rule;\n  p text;\nBEGIN\n  FOREACH p IN ARRAY params LOOP\n    IF p IS NOT NULL THEN\n      key := key || '/' || _engine_percent_encode(p);\n    END IF;\n  END LOOP;\n  RETURN key;\nEND\n$$".into(),
    ]
}

/// Who last wrote the blob key a row's blob column holds, through a mutation; and the record of
/// uploads (`blob/ledger.rs`).
fn blob_refs() -> Vec<String> {
    vec![
        "CREATE TABLE IF NOT EXISTS _engine_blob_refs (\n  table_name text NOT NULL,\n  row_key jsonb NOT NULL,\n  column_name text NOT NULL,\n  blob_key text NOT NULL,\n  writer text NOT NULL,\n  PRIMARY KEY (table_name, row_key, column_name)\n)".into(),
        "CREATE INDEX IF NOT EXISTS _engine_blob_refs_key ON _engine_blob_refs (blob_key)".into(),
        "CREATE TABLE IF NOT EXISTS _engine_blobs (\n  blob_key text NOT NULL,\n  uploader text NOT NULL,\n  size bigint NOT NULL,\n  stored boolean NOT NULL DEFAULT false,\n  ticket text,\n  expires_at bigint NOT NULL DEFAULT 0,\n  receiving_until bigint,\n  unused_since bigint,\n  PRIMARY KEY (blob_key, uploader)\n)".into(),
        "CREATE INDEX IF NOT EXISTS _engine_blobs_uploader ON _engine_blobs (uploader)".into(),
    ]
}

fn column_definition(column: &engine_kernel::ColumnMeta) -> String {
    let mut def = format!("{} {}", ident(column.name), column.sql_type.postgres());
    if !column.nullable {
        def.push_str(" NOT NULL");
    }
    if column.sql_type.is_crdt() {
        def.push_str(" DEFAULT '\\x0000'::bytea");
    }
    def
}

fn user_table(table: &TableMeta) -> Vec<Step> {
    let name = ident(table.name);
    let mut columns: Vec<String> = table.columns.iter().map(|c| format!("  {}", column_definition(c))).collect();
    columns
        .push(format!("  PRIMARY KEY ({})", table.primary_key.iter().map(|k| ident(k)).collect::<Vec<_>>().join(", ")));
    let mut plan = vec![Step::new(
        format!("CREATE TABLE IF NOT EXISTS {name} (\n{}\n)", columns.join(",\n")),
        Object::Table { table: table.name.into(), columns: table.columns.iter().map(|c| c.name.into()).collect() },
    )];
    for column in table.columns {
        plan.push(Step::new(
            format!("ALTER TABLE {name} ADD COLUMN IF NOT EXISTS {}", column_definition(column)),
            Object::Column {
                table: table.name.into(),
                column: column.name.into(),
                required: !column.nullable && !column.sql_type.is_crdt(),
            },
        ));
    }
    plan
}

/// The change-tracking columns, trigger and indexes of a synced table.
fn tracking(table: &TableMeta, selections: &[RuleSelection]) -> Vec<Step> {
    tracking_sql(table, selections).iter().map(|sql| Step::parse(sql)).collect()
}

fn tracking_sql(table: &TableMeta, selections: &[RuleSelection]) -> Vec<String> {
    let name = ident(table.name);
    let mut plan = vec![format!(
        "ALTER TABLE {name} ADD COLUMN IF NOT EXISTS _engine_xid xid8 NOT NULL DEFAULT pg_current_xact_id()"
    )];
    if table.merge == MergePolicy::Field {
        plan.push(format!(
            "ALTER TABLE {name} ADD COLUMN IF NOT EXISTS _engine_hlc jsonb NOT NULL DEFAULT '{{}}'::jsonb"
        ));
    }
    plan.push(trigger_function_sql(table, selections));
    let function = ident(&trigger_function(table.name));
    // A row is stamped by its column's default when inserted as the engine inserts it; the stamp
    // trigger runs only where the stamp is not the writing transaction's (an update, or an insert
    // that names an old stamp), which spares a trigger call per inserted row.
    for (trigger, timing, condition) in [
        ("_engine_stamp", "BEFORE INSERT OR UPDATE", " WHEN (NEW._engine_xid IS DISTINCT FROM pg_current_xact_id())"),
        ("_engine_tombstone", "AFTER UPDATE OR DELETE", ""),
    ] {
        plan.push(format!(
            "CREATE OR REPLACE TRIGGER {trigger} {timing} ON {name} FOR EACH ROW{condition} EXECUTE FUNCTION {function}()"
        ));
    }
    let key: Vec<String> = table.key_columns().map(|c| collated(ident(c.name), c.sql_type)).collect();
    plan.push(format!(
        "CREATE INDEX IF NOT EXISTS {} ON {name} (_engine_xid, {})",
        ident(&index_name(table.name, "xid", &[])),
        key.join(", ")
    ));
    let mut scopes: Vec<&[&str]> = Vec::new();
    for s in selections {
        let columns = s.scope_columns();
        if !scopes.contains(&columns) {
            scopes.push(columns);
        }
    }
    for columns in scopes {
        let mut parts: Vec<String> = columns.iter().map(|c| ident(c)).collect();
        parts.push("_engine_xid".into());
        parts.extend(key.iter().cloned());
        plan.push(format!(
            "CREATE INDEX IF NOT EXISTS {} ON {name} ({})",
            ident(&index_name(table.name, "scope", columns)),
            parts.join(", ")
        ));
    }
    plan
}

/// The trigger function of a synced table: before a write whose stamp is not the writing
/// transaction's id (an update, or an insert that names an old stamp; other inserts get it from
/// the column's default) it stamps the row with it; after an update or delete it records the
/// buckets the row left.
fn trigger_function_sql(table: &TableMeta, selections: &[RuleSelection]) -> String {
    let keys = |record: &str| -> String {
        let items: Vec<String> = selections.iter().map(|s| bucket_key_of(record, s)).collect();
        format!("array_remove(ARRAY[\n      {}\n    ]::text[], NULL)", items.join(",\n      "))
    };
    let live = |record: &str| live(record, table).unwrap_or_else(|| "true".into());
    let key_json = table
        .key_columns()
        .map(|c| format!("{}, {}", literal(c.name), wire_json("OLD", c)))
        .collect::<Vec<_>>()
        .join(", ");
    let same_key = table
        .primary_key
        .iter()
        .map(|k| format!("OLD.{k} IS NOT DISTINCT FROM NEW.{k}", k = ident(k)))
        .collect::<Vec<_>>()
        .join(" AND ");
    format!(
        "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
  old_keys text[] := '{{}}';
  new_keys text[] := '{{}}';
  left_keys text[];
BEGIN
  IF TG_WHEN = 'BEFORE' THEN
    NEW._engine_xid := pg_current_xact_id();
    RETURN NEW;
  END IF;
  IF {old_live} THEN
    old_keys := {old_keys};
  END IF;
  IF TG_OP = 'UPDATE' AND {new_live} AND {same_key} THEN
    new_keys := {new_keys};
  END IF;
  SELECT coalesce(array_agg(DISTINCT k ORDER BY k), '{{}}') INTO left_keys FROM unnest(old_keys) AS k WHERE NOT k = ANY(new_keys);
  IF cardinality(left_keys) > 0 THEN
    INSERT INTO _engine_tombstones (table_name, key, buckets) VALUES ({table}, jsonb_build_object({key_json}), left_keys);
  END IF;
  RETURN NULL;
END
$body$",
        function = ident(&trigger_function(table.name)),
        old_live = live("OLD"),
        new_live = live("NEW"),
        old_keys = keys("OLD"),
        new_keys = keys("NEW"),
        table = literal(table.name),
    )
}

/// The columns membership queries filter on, per table.
fn membership_indexes(app: &App) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut rules: Vec<_> = app.sync_rules().rules.iter().collect();
    rules.sort_by_key(|r| r.name);
    for rule in rules {
        if let Some(engine_kernel::rules::Membership::Table { table, filters }) = rule.membership {
            let columns: Vec<&str> = filters.iter().map(|f| f.column).collect();
            if !columns.is_empty() && !out.iter().any(|(t, c)| *t == table && *c == columns) {
                out.push((table, columns));
            }
        }
    }
    out
}

/// A stable fingerprint of a plan (FNV-1a over its text).
fn fingerprint(plan: &[Step]) -> String {
    let hash = plan
        .iter()
        .flat_map(|s| s.sql.bytes().chain(std::iter::once(0)))
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}
