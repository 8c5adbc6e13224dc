//! Reading a contract back: the tables and sync rules of its `x-engine` section as an [`App`],
//! for tools that provision a database without the app's code (`engine migrate`).
//!
//! The macros check a compiled app; a contract is only text, so everything they would have
//! refused is checked here: names resolve, keys and special columns exist, and every selection
//! scopes every bucket parameter (the no-leak rule). Row schemas and mutators are not carried
//! over: an app read from a contract provisions and describes storage, it does not serve.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::app::{App, TableDef};
use crate::column::{ColumnMeta, SqlType};
use crate::error::{Error, Result};
use crate::rules::{
    Accept, Claim, ConstFilter, ConstValue, FilterValue, Membership, MembershipFilter, ParamMeta, ParamSource, RowTerm,
    RuleMeta, ScopeEq, Selection, SyncRules, WriteAlternative, WriteRule,
};
use crate::table::{MergePolicy, TableMeta};
use crate::wire::PROTOCOL_VERSION;

/// The tables and sync rules of the contract `doc` (the JSON of `GET /engine/contract`).
///
/// The metadata is allocated once and lives for the rest of the process, as a compiled app's
/// does; read a contract once per run, not per request.
///
/// ```
/// # use engine_kernel::{App, contract, contract::app_from_contract};
/// let doc = contract(&App::builder().build().unwrap());
/// let app = app_from_contract(&doc).unwrap();
/// assert!(app.tables().is_empty());
/// assert!(app_from_contract(&serde_json::json!({"openapi": "3.1.0"})).is_err());
/// ```
///
/// # Errors
/// [`Error::InvalidApp`] naming what does not fit: no `x-engine` section, another protocol
/// version, an unknown column type or claim, a name that does not resolve, a selection that
/// leaves a bucket parameter unscoped.
pub fn app_from_contract(doc: &Value) -> Result<App> {
    let engine = doc.get("x-engine").ok_or_else(|| invalid("the document has no `x-engine` section"))?;
    let version = engine.get("version").and_then(Value::as_str).unwrap_or("none");
    if version != PROTOCOL_VERSION {
        return Err(invalid(format!(
            "the contract speaks protocol version {version}; this engine speaks {PROTOCOL_VERSION}"
        )));
    }
    let tables: BTreeMap<String, Value> = section(engine, "tables")?;
    let rules: BTreeMap<String, Value> = section(engine, "syncRules")?;
    let server_only: Vec<String> = match engine.get("serverOnly") {
        None => Vec::new(),
        Some(value) => parse(value.clone(), "`serverOnly`")?,
    };

    let mut builder = App::builder();
    let mut metas: Vec<&'static TableMeta> = Vec::new();
    for (name, table) in tables {
        let table: ContractTable = parse(table, &format!("table `{name}`"))?;
        let meta = table_meta(&name, table)?;
        metas.push(meta);
        builder = builder.table_def(TableDef::from_meta(meta));
    }
    let mut built = Vec::new();
    for (name, rule) in rules {
        let rule: ContractRule = parse(rule, &format!("sync rule `{name}`"))?;
        built.push(rule_meta(&name, rule, &metas)?);
    }
    let server_only: Vec<&'static str> = server_only.iter().map(|t| leak(t)).collect();
    builder.sync_rules(&SyncRules { rules: leak_slice(built), server_only: leak_slice(server_only) }).build()
}

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidApp(message.into())
}

fn section<T: serde::de::DeserializeOwned + Default>(engine: &Value, key: &str) -> Result<T> {
    match engine.get(key) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(value) => parse(value.clone(), &format!("`x-engine.{key}`")),
    }
}

fn parse<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T> {
    serde_json::from_value(value).map_err(|e| invalid(format!("{what} in the contract: {e}")))
}

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

fn leak_slice<T>(items: Vec<T>) -> &'static [T] {
    Box::leak(items.into_boxed_slice())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContractTable {
    columns: Vec<ContractColumn>,
    primary_key: Vec<String>,
    #[serde(default)]
    merge: MergePolicy,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    soft_delete: Option<String>,
    #[serde(default)]
    description: String,
}

#[derive(Deserialize)]
struct ContractColumn {
    name: String,
    #[serde(rename = "type")]
    sql_type: String,
    nullable: bool,
    #[serde(default)]
    blob: bool,
    #[serde(default)]
    description: String,
}

#[derive(Deserialize)]
struct ContractRule {
    #[serde(default)]
    description: String,
    parameters: Vec<ContractParam>,
    #[serde(default)]
    membership: Option<ContractMembership>,
    data: Vec<ContractSelection>,
    /// Per table, alternatives of membership-column equalities and row comparisons.
    #[serde(default)]
    write: BTreeMap<String, Vec<ContractAlternative>>,
    #[serde(default)]
    accept: Vec<ContractAccept>,
    #[serde(default)]
    leave: bool,
    #[serde(default)]
    invite: Option<String>,
    #[serde(default, rename = "while")]
    held_while: Option<String>,
    #[serde(default)]
    anchor: Option<ContractAnchor>,
}

/// `{"table": …, "scope": [{"column": …, "param": …}]}`.
#[derive(Deserialize)]
struct ContractAnchor {
    table: String,
    scope: Vec<ContractScope>,
}

/// One alternative of a write permission: `{"member": [...], "row": [...]}`, or, as contracts
/// before row terms wrote it, the membership equalities alone.
#[derive(Deserialize)]
#[serde(untagged)]
enum ContractAlternative {
    Terms {
        #[serde(default)]
        member: Vec<ContractConstFilter>,
        #[serde(default)]
        row: Vec<ContractRowTerm>,
    },
    Members(Vec<ContractConstFilter>),
}

/// `{"column": …, "op": "==" | "!=", "value": …}`, or `"claim": "actor.user_id"` for `"value"`.
#[derive(Deserialize)]
struct ContractRowTerm {
    column: String,
    op: String,
    #[serde(default)]
    claim: Option<String>,
    #[serde(default)]
    value: Option<Value>,
}

#[derive(Deserialize)]
struct ContractAccept {
    rule: String,
    #[serde(default)]
    open: bool,
}

#[derive(Deserialize)]
struct ContractConstFilter {
    column: String,
    value: Value,
}

#[derive(Deserialize)]
struct ContractParam {
    name: String,
    #[serde(rename = "type")]
    sql_type: String,
    source: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ContractMembership {
    Table {
        table: String,
        filters: Vec<ContractMembershipFilter>,
    },
    Raw {
        sql: String,
        #[serde(default)]
        reads: Vec<String>,
    },
}

#[derive(Deserialize)]
struct ContractMembershipFilter {
    column: String,
    #[serde(default)]
    claim: Option<String>,
    #[serde(default)]
    value: Option<Value>,
}

#[derive(Deserialize)]
struct ContractSelection {
    table: String,
    scope: Vec<ContractScope>,
    #[serde(default)]
    filters: Vec<ContractConst>,
}

#[derive(Deserialize)]
struct ContractScope {
    column: String,
    param: String,
}

#[derive(Deserialize)]
struct ContractConst {
    column: String,
    value: Value,
}

fn sql_type(name: &str, what: &str) -> Result<SqlType> {
    SqlType::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = SqlType::ALL.iter().map(|t| t.name()).collect();
        invalid(format!("{what} has type `{name}`, which is none of {}", known.join(", ")))
    })
}

fn table_meta(name: &str, table: ContractTable) -> Result<&'static TableMeta> {
    let mut columns = Vec::with_capacity(table.columns.len());
    for (i, column) in table.columns.iter().enumerate() {
        let what = format!("column `{name}.{}`", column.name);
        if table.columns[..i].iter().any(|c| c.name == column.name) {
            return Err(invalid(format!("table `{name}` has two columns named `{}`", column.name)));
        }
        let column_name = leak(&column.name);
        columns.push(ColumnMeta {
            name: column_name,
            field: column_name,
            sql_type: sql_type(&column.sql_type, &what)?,
            nullable: column.nullable,
            blob: column.blob,
            description: leak(&column.description),
        });
    }
    let find = |role: &str, column: &str| -> Result<&ColumnMeta> {
        columns.iter().find(|c| c.name == column).ok_or_else(|| {
            invalid(format!("the {role} of table `{name}` is column `{column}`, which the table does not have"))
        })
    };
    if table.primary_key.is_empty() {
        return Err(invalid(format!("table `{name}` has no primary key")));
    }
    for key in &table.primary_key {
        let column = find("primary key", key)?;
        if column.nullable || column.sql_type.is_crdt() {
            return Err(invalid(format!("primary key column `{name}.{key}` must be a non-null scalar")));
        }
    }
    if let Some(owner) = &table.owner {
        find("owner", owner)?;
    }
    if let Some(deleted) = &table.soft_delete {
        let column = find("soft-delete column", deleted)?;
        if !(column.nullable && column.sql_type == SqlType::Timestamp) {
            return Err(invalid(format!("soft-delete column `{name}.{deleted}` must be a nullable timestamptz")));
        }
    }
    let primary_key: Vec<&'static str> = table
        .primary_key
        .iter()
        .map(|k| columns.iter().find(|c| c.name == k.as_str()).map(|c| c.name).expect("checked above"))
        .collect();
    let named =
        |wanted: &Option<String>| wanted.as_deref().and_then(|w| columns.iter().find(|c| c.name == w)).map(|c| c.name);
    let owner = named(&table.owner);
    let soft_delete = named(&table.soft_delete);
    let name = leak(name);
    Ok(Box::leak(Box::new(TableMeta {
        name,
        struct_name: name,
        description: leak(&table.description),
        primary_key: leak_slice(primary_key),
        owner,
        soft_delete,
        merge: table.merge,
        columns: leak_slice(columns),
    })))
}

fn const_value(value: &Value, what: &str) -> Result<ConstValue> {
    match value {
        Value::Bool(b) => Ok(ConstValue::Bool(*b)),
        Value::Number(n) => {
            n.as_i64().map(ConstValue::Int).ok_or_else(|| invalid(format!("{what}: {n} is not an integer")))
        }
        Value::String(s) => Ok(ConstValue::Text(leak(s))),
        other => Err(invalid(format!("{what}: {other} is not a boolean, integer or string constant"))),
    }
}

/// The claim or constant a membership filter or a row term compares `column` with: exactly one
/// of `claim` and `value`.
fn filter_value(claim: Option<&str>, value: Option<&Value>, column: &str, what: &str) -> Result<FilterValue> {
    match (claim, value) {
        (Some(claim), None) => Ok(FilterValue::Claim(
            Claim::parse(claim, leak).ok_or_else(|| invalid(format!("{what}: `{claim}` is not an actor claim")))?,
        )),
        (None, Some(value)) => Ok(FilterValue::Const(const_value(value, what)?)),
        _ => Err(invalid(format!("{what}: the comparison of `{column}` needs exactly one of `claim` and `value`"))),
    }
}

fn column_of(tables: &[&'static TableMeta], table: &str, column: &str, what: &str) -> Result<&'static ColumnMeta> {
    let meta = tables
        .iter()
        .find(|t| t.name == table)
        .ok_or_else(|| invalid(format!("{what} reads table `{table}`, which the contract does not list")))?;
    meta.column(column).ok_or_else(|| invalid(format!("{what} reads column `{table}.{column}`, which does not exist")))
}

fn rule_meta(name: &str, rule: ContractRule, tables: &[&'static TableMeta]) -> Result<RuleMeta> {
    let what = format!("sync rule `{name}`");
    let membership = match &rule.membership {
        None => None,
        Some(ContractMembership::Raw { sql, reads }) => {
            let mut tables_read = Vec::new();
            for read in reads {
                let Some(table) = tables.iter().find(|t| t.name == read) else {
                    return Err(invalid(format!("the raw membership of {what} reads `{read}`, which is no table")));
                };
                tables_read.push(table.name);
            }
            Some(Membership::Raw { sql: leak(sql), reads: leak_slice(tables_read) })
        }
        Some(ContractMembership::Table { table, filters }) => {
            let mut out = Vec::new();
            for filter in filters {
                let column = column_of(tables, table, &filter.column, &format!("the membership of {what}"))?;
                let value = filter_value(filter.claim.as_deref(), filter.value.as_ref(), &filter.column, &what)?;
                out.push(MembershipFilter { column: column.name, value });
            }
            if !out.iter().any(|f| matches!(f.value, FilterValue::Claim(_))) {
                return Err(invalid(format!("{what}: the membership query compares no column with an actor claim")));
            }
            let table = tables.iter().find(|t| t.name == table).expect("column_of found it").name;
            Some(Membership::Table { table, filters: leak_slice(out) })
        }
    };

    let mut parameters = Vec::new();
    for (i, param) in rule.parameters.iter().enumerate() {
        if rule.parameters[..i].iter().any(|p| p.name == param.name) {
            return Err(invalid(format!("{what} has two parameters named `{}`", param.name)));
        }
        let sql_type = sql_type(&param.sql_type, &format!("parameter `{}` of {what}", param.name))?;
        let source = match param.source.strip_prefix("membership.") {
            Some(column) => {
                match &rule.membership {
                    None => {
                        return Err(invalid(format!(
                            "{what}: parameter `{}` comes from a membership query the rule does not have",
                            param.name
                        )));
                    }
                    Some(ContractMembership::Table { table, .. }) => {
                        column_of(tables, table, column, &format!("parameter `{}` of {what}", param.name))?;
                    }
                    Some(ContractMembership::Raw { .. }) => {}
                }
                ParamSource::Membership { column: leak(column) }
            }
            None => ParamSource::Claim(Claim::parse(&param.source, leak).ok_or_else(|| {
                invalid(format!(
                    "{what}: parameter `{}` comes from `{}`, which is no actor claim or membership column",
                    param.name, param.source
                ))
            })?),
        };
        parameters.push(ParamMeta { name: leak(&param.name), sql_type, source });
    }
    if parameters.is_empty() {
        return Err(invalid(format!("{what} has no parameters")));
    }

    let mut data = Vec::new();
    for selection in &rule.data {
        let where_ = format!("{what}'s selection from `{}`", selection.table);
        // The no-leak rule: a selection that leaves a parameter open would serve rows of every
        // value of it.
        let scope = scope_of(tables, &selection.table, &selection.scope, &parameters, &where_)?;
        let mut filters = Vec::new();
        for filter in &selection.filters {
            let column = column_of(tables, &selection.table, &filter.column, &where_)?;
            filters.push(ConstFilter { column: column.name, value: const_value(&filter.value, &where_)? });
        }
        let table = tables.iter().find(|t| t.name == selection.table).expect("column_of found it").name;
        data.push(Selection { table, scope: leak_slice(scope), filters: leak_slice(filters) });
    }
    if data.is_empty() {
        return Err(invalid(format!("{what} selects nothing")));
    }
    let mut writes = Vec::new();
    for (table, any_of) in &rule.write {
        let where_ = format!("{what}'s write permission on `{table}`");
        let Some(selected) = data.iter().find(|s| s.table == table) else {
            return Err(invalid(format!("{where_}: the rule does not select `{table}`")));
        };
        let members = match membership {
            Some(Membership::Table { table: members, .. }) => Some(members),
            _ => None,
        };
        let mut alternatives = Vec::new();
        for alternative in any_of {
            let (members_of, row_of) = match alternative {
                ContractAlternative::Terms { member, row } => (member.as_slice(), row.as_slice()),
                ContractAlternative::Members(member) => (member.as_slice(), &[][..]),
            };
            let mut member = Vec::new();
            for filter in members_of {
                let Some(members) = members else {
                    return Err(invalid(format!("{where_}: the rule has no membership table")));
                };
                let column = column_of(tables, members, &filter.column, &where_)?;
                member.push(ConstFilter { column: column.name, value: const_value(&filter.value, &where_)? });
            }
            let mut row = Vec::new();
            for term in row_of {
                let column = column_of(tables, table, &term.column, &where_)?;
                let equal = match term.op.as_str() {
                    "==" => true,
                    "!=" => false,
                    other => return Err(invalid(format!("{where_}: `{other}` is not `==` or `!=`"))),
                };
                let value = filter_value(term.claim.as_deref(), term.value.as_ref(), &term.column, &where_)?;
                row.push(RowTerm { column: column.name, value, equal });
            }
            alternatives.push(WriteAlternative { member: leak_slice(member), row: leak_slice(row) });
        }
        writes.push(WriteRule { table: selected.table, any_of: leak_slice(alternatives) });
    }
    // An invitation column is a column of the membership table, which the membership query
    // requires to be true.
    let invite = match (&rule.invite, membership) {
        (None, _) => None,
        (Some(column), Some(Membership::Table { table, filters })) => {
            let column = column_of(tables, table, column, &format!("the invitations of {what}"))?;
            let accepted = |f: &MembershipFilter| {
                f.column == column.name && matches!(f.value, FilterValue::Const(ConstValue::Bool(true)))
            };
            if !filters.iter().any(accepted) {
                return Err(invalid(format!(
                    "{what}: the membership query does not require the invitation column `{}` to be true",
                    column.name
                )));
            }
            Some(column.name)
        }
        (Some(_), _) => return Err(invalid(format!("{what}: invitations need a membership table"))),
    };
    let accepts: Vec<Accept> = rule.accept.iter().map(|a| Accept { rule: leak(&a.rule), open: a.open }).collect();
    let anchor = match &rule.anchor {
        None => None,
        Some(anchor) => {
            let where_ = format!("{what}'s anchor in `{}`", anchor.table);
            let scope = scope_of(tables, &anchor.table, &anchor.scope, &parameters, &where_)?;
            let table = tables.iter().find(|t| t.name == anchor.table).expect("scope_of found it").name;
            Some(Selection { table, scope: leak_slice(scope), filters: &[] })
        }
    };
    Ok(RuleMeta {
        name: leak(name),
        description: leak(&rule.description),
        parameters: leak_slice(parameters),
        membership,
        data: leak_slice(data),
        writes: leak_slice(writes),
        accepts: leak_slice(accepts),
        leave: rule.leave,
        invite,
        held_while: rule.held_while.as_deref().map(leak),
        anchor,
    })
}

/// The equalities of `scope` on `table`'s columns, each with a parameter, every parameter
/// compared: as a selection and an anchor scope a bucket.
fn scope_of(
    tables: &[&'static TableMeta],
    table: &str,
    scope: &[ContractScope],
    parameters: &[ParamMeta],
    where_: &str,
) -> Result<Vec<ScopeEq>> {
    let mut out = Vec::new();
    for eq in scope {
        let column = column_of(tables, table, &eq.column, where_)?;
        let param = parameters
            .iter()
            .find(|p| p.name == eq.param)
            .ok_or_else(|| invalid(format!("{where_} compares with `bucket.{}`, which is no parameter", eq.param)))?;
        out.push(ScopeEq { column: column.name, param: param.name });
    }
    for param in parameters {
        if !out.iter().any(|s| s.param == param.name) {
            return Err(invalid(format!("{where_} does not scope parameter `{}`", param.name)));
        }
    }
    Ok(out)
}
