//! The contract: one OpenAPI 3.1 document describing the wire protocol, the JSON Schema of every
//! table row and mutator argument, and an `x-engine` section with the app's tables, merge
//! policies, sync rules and mutators. `GET /engine/contract` serves it; `engine migrate` reads
//! it back with [`app_from_contract`].
//!
//! Output is deterministic: every object's keys are sorted, whatever order the generator or
//! serde_json's features produce.

mod read;

pub use read::app_from_contract;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::rules::{Claim, ConstFilter, FilterValue, Membership, ParamSource, RowTerm, RuleMeta, ScopeEq};
use crate::wire;

/// The OpenAPI 3.1 contract of `app`.
///
/// ```
/// # use engine_kernel::{App, contract};
/// let app = App::builder().build().unwrap();
/// let doc = contract(&app);
/// assert_eq!(doc["openapi"], "3.1.0");
/// assert!(doc["paths"]["/sync/pull"]["post"].is_object());
/// ```
pub fn contract(app: &App) -> Value {
    let mut generator =
        SchemaSettings::draft2020_12().with(|s| s.definitions_path = "/components/schemas".into()).into_generator();

    let pull_request = generator.subschema_for::<wire::PullRequest>().to_value();
    let pull_response = generator.subschema_for::<wire::PullResponse>().to_value();
    let push_request = generator.subschema_for::<wire::PushRequest>().to_value();
    let push_response = generator.subschema_for::<wire::PushResponse>().to_value();
    let problem = generator.subschema_for::<wire::Problem>().to_value();
    let client_frame = generator.subschema_for::<wire::ClientFrame>().to_value();
    let server_frame = generator.subschema_for::<wire::ServerFrame>().to_value();
    let poll_answer = generator.subschema_for::<wire::PollAnswer>().to_value();
    let edge_tickets = generator.subschema_for::<wire::EdgeTickets>().to_value();

    let mut tables = Map::new();
    for def in app.tables() {
        let meta = def.meta();
        let row = def.schema(&mut generator).to_value();
        let columns: Vec<Value> = meta
            .columns
            .iter()
            .map(|c| {
                let mut column = json!({"name": c.name, "type": c.sql_type.name(), "nullable": c.nullable});
                if c.blob {
                    column["blob"] = true.into();
                }
                if !c.description.is_empty() {
                    column["description"] = c.description.into();
                }
                column
            })
            .collect();
        let crdt: Vec<&str> = meta.crdt_columns().map(|c| c.name).collect();
        tables.insert(
            meta.name.to_owned(),
            json!({
                "columns": columns,
                "primaryKey": meta.primary_key,
                "merge": meta.merge.name(),
                "crdt": crdt,
                "owner": meta.owner,
                "softDelete": meta.soft_delete,
                "synced": app.is_synced(meta.name),
                "description": meta.description,
                "row": row,
            }),
        );
    }

    let mut mutators = Map::new();
    for def in app.mutators() {
        let args = def.args_schema(&mut generator).to_value();
        mutators.insert(def.name().to_owned(), json!({"args": args, "description": def.description()}));
    }

    let mut rules = Map::new();
    for rule in app.sync_rules().rules {
        rules.insert(rule.name.to_owned(), rule_json(rule));
    }

    let schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();

    let problem_response = |description: &str| json!({"description": description, "content": {"application/problem+json": {"schema": problem}}});
    let common_errors = |extra: &[(&str, &str)]| {
        let mut responses = Map::new();
        for (status, description) in [
            ("400", "malformed_request: the body is not the expected JSON"),
            ("401", "unauthenticated: no, bad or expired token"),
            ("413", "payload_too_large: the body is over the limit"),
            ("429", "rate_limited: over the per-actor rate; see Retry-After"),
            ("503", "retry_later: a transient condition; see Retry-After; nothing was recorded, unless the database stopped answering (a retry then answers an applied mutation from its record)"),
        ]
        .iter()
        .chain(extra)
        {
            responses.insert((*status).to_owned(), problem_response(description));
        }
        responses
    };
    let json_body = |schema: &Value| json!({"required": true, "content": {"application/json": {"schema": schema}}});
    let json_ok = |description: &str, schema: &Value| json!({"description": description, "content": {"application/json": {"schema": schema}}});

    let mut pull_responses = common_errors(&[("403", "forbidden: a requested bucket the actor does not hold")]);
    pull_responses.insert("200".into(), json_ok("changes since the cursor", &pull_response));
    let mut push_responses = common_errors(&[(
        "409",
        "mutation_out_of_order: the first mutationId skips ahead; the body carries lastMutationId",
    )]);
    push_responses.insert("200".into(), json_ok("one result per mutation", &push_response));

    let doc = json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "engine sync API",
            "version": wire::PROTOCOL_VERSION,
            "description": "Pull by cursor, idempotent push, realtime pings and presence for an offline-first app.",
        },
        "security": [{"bearer": []}],
        "paths": {
            "/sync/pull": {"post": {
                "operationId": "pull",
                "summary": "Rows of the actor's buckets changed since the cursor",
                "requestBody": json_body(&pull_request),
                "responses": pull_responses,
            }},
            "/sync/push": {"post": {
                "operationId": "push",
                "summary": "Apply queued mutations, each once",
                "requestBody": json_body(&push_request),
                "responses": push_responses,
            }},
            "/sync/stream": {"get": {
                "operationId": "stream",
                "summary": "WebSocket (subprotocol engine.v1): pings and presence",
                // The token may also come as the `bearer.` subprotocol or in the first frame.
                "security": [{"bearer": []}, {}],
                "parameters": [
                    {"name": "follow", "in": "query", "required": false, "schema": {"const": "subscription"},
                     "description": "`subscription`: follow nothing, and get no presence, until the first `subscribe`; absent: every bucket held"},
                ],
                "responses": {
                    "101": {"description": "switching to the WebSocket protocol"},
                    "400": problem_response("malformed_request: not a WebSocket upgrade, or a `follow` other than `subscription`"),
                    "401": problem_response("unauthenticated: a bad or expired token"),
                    "429": problem_response("rate_limited: over the per-actor rate, the actor's sockets, or the sockets waiting to authenticate from one address; see Retry-After"),
                },
                "x-engine-stream": {
                    "subprotocol": wire::STREAM_SUBPROTOCOL,
                    "clientFrames": client_frame,
                    "serverFrames": server_frame,
                },
            }},
            "/sync/poll": {"get": {
                "operationId": "poll",
                "summary": "The stream's pings and buckets_changed over plain HTTP, waiting for them",
                "parameters": [
                    {"name": "position", "in": "query", "required": false, "schema": {"type": "string"},
                     "description": "the position of the previous answer; none on the first poll, which is answered at once"},
                    {"name": "wait", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 0},
                     "description": "seconds to wait for a frame: 25 when absent, at most 30"},
                ],
                "responses": {
                    "200": json_ok("the frames since the position (buckets_changed alone after a reset), empty when the wait ran out, and the next position", &poll_answer),
                    "400": problem_response("malformed_request: the query is not `position` and `wait` seconds"),
                    "401": problem_response("unauthenticated: no, bad or expired token"),
                    "429": problem_response("rate_limited: over the per-actor rate, or the actor's polls waiting at once; see Retry-After"),
                    "503": problem_response("retry_later: a transient condition; see Retry-After"),
                },
            }},
            "/sync/edge-tickets": {"get": {
                "operationId": "edgeTickets",
                "summary": "Tickets for the edge relay, one per bucket the actor holds (on a server that relays to an edge)",
                "responses": {
                    "200": json_ok("the relay's URL and the tickets, all expiring together", &edge_tickets),
                    "401": problem_response("unauthenticated: no, bad or expired token"),
                    "404": problem_response("not_found: this server relays to no edge"),
                    "413": problem_response("payload_too_large: the actor holds more buckets than the server syncs for one actor"),
                    "429": problem_response("rate_limited: over the per-actor rate, or the actor's requests in progress; see Retry-After"),
                    "503": problem_response("retry_later: a transient condition; see Retry-After"),
                },
            }},
            "/engine/contract": {"get": {
                "operationId": "contract",
                "summary": "This document",
                "security": [],
                "responses": {"200": {"description": "the OpenAPI 3.1 contract", "content": {"application/json": {}}}},
            }},
            "/engine/stats": {"get": {
                "operationId": "stats",
                "summary": "Counts of buckets, clients, mutations, sockets, tombstones and jobs (admin only)",
                "responses": {
                    "200": {"description": "statistics", "content": {"application/json": {"schema": {"type": "object"}}}},
                    "401": problem_response("unauthenticated: no, bad or expired token"),
                    "403": problem_response("forbidden: the actor is not an admin"),
                    "429": problem_response("rate_limited: over the per-actor rate; see Retry-After"),
                    "503": problem_response("retry_later: a transient condition; see Retry-After"),
                },
            }},
            "/engine/metrics": {"get": {
                "operationId": "metrics",
                "summary": "The server's metrics in Prometheus' text format (admin only; on a server built with `prometheus(true)`)",
                "responses": {
                    "200": {"description": "the text exposition", "content": {"text/plain": {"schema": {"type": "string"}}}},
                    "401": problem_response("unauthenticated: no, bad or expired token"),
                    "403": problem_response("forbidden: the actor is not an admin"),
                    "404": problem_response("not_found: this server exports no metrics"),
                    "429": problem_response("rate_limited: over the per-actor rate; see Retry-After"),
                    "503": problem_response("retry_later: a transient condition; see Retry-After"),
                },
            }},
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
        },
        "x-engine": {
            "version": wire::PROTOCOL_VERSION,
            "tables": tables,
            "syncRules": rules,
            "serverOnly": app.sync_rules().server_only,
            "mutators": mutators,
        },
    });
    canonical(doc)
}

/// One sync rule as the contract describes it (`x-engine.syncRules.<name>`): its parameters and
/// their sources, membership query, selections, write permissions (`{member, row}` per
/// alternative), `accept`, `leave`, `while` and, when set, `invite`. The client's offline evaluation of the write
/// rules reads the same description.
pub fn rule_json(rule: &RuleMeta) -> Value {
    let parameters: Vec<Value> = rule
        .parameters
        .iter()
        .map(|p| {
            let source = match p.source {
                ParamSource::Claim(claim) => claim.describe(),
                ParamSource::Membership { column } => format!("membership.{column}"),
            };
            json!({"name": p.name, "type": p.sql_type.name(), "source": source})
        })
        .collect();
    let membership = rule.membership.map(|m| match m {
        Membership::Table { table, filters } => json!({
            "table": table,
            "filters": filters.iter().map(|f| match f.value {
                FilterValue::Claim(claim) => json!({"column": f.column, "claim": claim_name(claim)}),
                FilterValue::Const(value) => json!({"column": f.column, "value": value.to_json()}),
            }).collect::<Vec<_>>(),
        }),
        Membership::Raw { sql, reads } => json!({"sql": sql, "reads": reads}),
    });
    let data: Vec<Value> = rule
        .data
        .iter()
        .map(|s| {
            json!({
                "table": s.table,
                "scope": scope_json(s.scope),
                "filters": constants_json(s.filters),
            })
        })
        .collect();
    let write: Map<String, Value> = rule
        .writes
        .iter()
        .map(|w| {
            let any_of: Vec<Value> = w
                .any_of
                .iter()
                .map(|alternative| {
                    json!({
                        "member": constants_json(alternative.member),
                        "row": alternative.row.iter().map(row_term_json).collect::<Vec<_>>(),
                    })
                })
                .collect();
            (w.table.to_owned(), Value::Array(any_of))
        })
        .collect();
    let mut rule_json = json!({
        "description": rule.description,
        "parameters": parameters,
        "membership": membership,
        "tables": rule.tables(),
        "data": data,
        "write": write,
        "accept": rule.accepts.iter().map(|a| json!({"rule": a.rule, "open": a.open})).collect::<Vec<_>>(),
        "leave": rule.leave,
        "while": rule.held_while,
        "anchor": rule.anchor.map(|a| json!({"table": a.table, "scope": scope_json(a.scope)})),
    });
    // Only a rule whose memberships are invitations says so: the others' descriptions stay
    // as they were.
    if let Some(column) = rule.invite {
        rule_json["invite"] = column.into();
    }
    rule_json
}

/// `column == bucket.param` equalities: `[{"column": …, "param": …}]`.
fn scope_json(scope: &[ScopeEq]) -> Vec<Value> {
    scope.iter().map(|e| json!({"column": e.column, "param": e.param})).collect()
}

/// A row term of a `write(...)` alternative: `{"column": …, "op": "==" | "!=", "value": …}`, or
/// with `"claim": "actor.user_id"` in place of `"value"`, as a membership filter writes a claim.
fn row_term_json(term: &RowTerm) -> Value {
    let mut json = json!({"column": term.column, "op": if term.equal { "==" } else { "!=" }});
    match term.value {
        FilterValue::Claim(claim) => json["claim"] = claim_name(claim).into(),
        FilterValue::Const(value) => json["value"] = value.to_json(),
    }
    json
}

/// `column == constant` equalities: `[{"column": …, "value": …}]`.
fn constants_json(filters: &[ConstFilter]) -> Vec<Value> {
    filters.iter().map(|f| json!({"column": f.column, "value": f.value.to_json()})).collect()
}

fn claim_name(claim: Claim) -> String {
    claim.describe()
}

/// `value` with every object's keys in sorted order.
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, canonical(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}
