//! The typed model of a sync-rules module. Conditions are recorded as written, including the
//! shapes the lint refuses (OR, negation, raw SQL, client values), so that `validate` can point at
//! each one.

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Expr, Ident};

use super::args::{AcceptArg, BucketArgs, MembershipArg};
use crate::support::{Diagnostics, doc_text};

/// The module and its bucket definitions.
pub(crate) struct Rules {
    /// The module, with bucket structs stripped of `#[bucket]` and `#[param]`.
    pub(crate) item: syn::ItemMod,
    pub(crate) buckets: Vec<Bucket>,
    /// Whether some `#[bucket(...)]` could not be read (its bucket is missing).
    pub(crate) unreadable_buckets: bool,
    /// `server_only(Table, …)`: tables only server code writes.
    pub(crate) server_only: Vec<syn::Path>,
}

/// One bucket definition (one rule).
pub(crate) struct Bucket {
    /// The struct, stripped of `#[bucket]` and `#[param]`.
    pub(crate) ident: Ident,
    pub(crate) generics: syn::Generics,
    /// Whether the struct has named fields.
    pub(crate) named_fields: bool,
    /// The rule's name and the span of whatever chose it.
    pub(crate) name: String,
    pub(crate) name_span: Span,
    pub(crate) description: String,
    /// The `#[bucket]` attribute, for errors about what it lacks.
    pub(crate) attr_span: Span,
    pub(crate) params: Vec<Param>,
    pub(crate) membership: Option<Membership>,
    pub(crate) data: Option<(Ident, Vec<Selection>)>,
    /// `write(Table: …)`: which holders may write which tables.
    pub(crate) writes: Vec<Write>,
    /// `accept(Bucket, open(Bucket), …)`: the buckets whose holders may put rows into this one.
    pub(crate) accepts: Vec<AcceptArg>,
    /// `leave`: a holder may delete its own membership row.
    pub(crate) leave: Option<Ident>,
    /// `invite(Member::accepted)`: the keyword and the column a member accepts through.
    pub(crate) invite: Option<(Ident, ColumnRef)>,
    /// `while(Bucket)`: the bucket named, whose membership query this bucket is held through
    /// (copied into `membership` when that bucket has one and this one none).
    pub(crate) held_while: Option<Ident>,
    /// Whether `membership` is the `while(...)` bucket's, copied.
    pub(crate) inherits_membership: bool,
    /// Whether `invite` is the `while(...)` bucket's, copied with its membership.
    pub(crate) inherits_invite: bool,
    /// `anchor(...)`: the row a bucket belongs to, as a selection.
    pub(crate) anchor: Option<(Ident, Selection)>,
}

/// `Table` or `Table: Member::role == "editor" || …` in `write(...)`.
pub(crate) struct Write {
    /// The table written.
    pub(crate) table: syn::Path,
    /// The whole condition, as written; none for `write(Table)`, every holder.
    pub(crate) expr: Option<Expr>,
    /// Its alternatives (the operands of top-level `||`), each a conjunction; one empty
    /// conjunction without a condition.
    pub(crate) any_of: Vec<Vec<Condition>>,
}

impl Write {
    pub(crate) fn table_key(&self) -> String {
        self.table.to_token_stream().to_string()
    }

    /// `row.<column>` of a condition as the column of the table written, `Table::column`,
    /// spanned at the column's name so that an unknown column is reported there.
    pub(crate) fn row_column(&self, column: &Ident) -> ColumnRef {
        let table = &self.table;
        let path: syn::ExprPath = syn::parse_quote_spanned!(column.span()=> #table::#column);
        ColumnRef { path, table: self.table.clone() }
    }
}

/// A bucket parameter: one field.
pub(crate) struct Param {
    pub(crate) field: Ident,
    pub(crate) ty: syn::Type,
    /// The `#[param(...)]` expressions on the field (exactly one is valid).
    pub(crate) sources: Vec<(Expr, Source)>,
}

/// Where a parameter says its value comes from.
#[derive(Clone)]
pub(crate) enum Source {
    /// `actor.user_id`, `actor.owner_id`, `actor.claims.<name>`.
    Claim(Claim),
    /// `actor.<something else>`.
    UnknownActorField(Ident),
    /// `Table::column` of the membership table.
    Column(ColumnRef),
    /// `membership.<column>` of a raw membership query.
    RawColumn(Ident),
    /// Anything else: a value the actor does not vouch for.
    Other,
}

#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    UserId,
    OwnerId,
    Custom(String),
}

impl Claim {
    /// The claim as written in a rule: `actor.user_id`, `actor.claims.org`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Claim::UserId => "actor.user_id".to_owned(),
            Claim::OwnerId => "actor.owner_id".to_owned(),
            Claim::Custom(name) => format!("actor.claims.{name}"),
        }
    }

    pub(crate) fn is_text(&self) -> bool {
        matches!(self, Claim::UserId | Claim::OwnerId)
    }
}

/// `Table::column`, as written.
#[derive(Clone)]
pub(crate) struct ColumnRef {
    /// The whole path expression.
    pub(crate) path: syn::ExprPath,
    /// The path of the table type (all but the last segment).
    pub(crate) table: syn::Path,
}

impl ColumnRef {
    /// The table path as text, to compare tables.
    pub(crate) fn table_key(&self) -> String {
        self.table.to_token_stream().to_string()
    }
}

/// The membership query of a bucket.
#[derive(Clone)]
pub(crate) enum Membership {
    /// `raw("…", reads(Table, …))`: the SQL, and the app's tables it reads.
    Raw {
        keyword: Ident,
        sql: syn::LitStr,
        reads: Vec<syn::Path>,
    },
    Conditions {
        expr: Expr,
        conditions: Vec<Condition>,
    },
}

/// One data selection.
pub(crate) struct Selection {
    pub(crate) expr: Expr,
    pub(crate) conditions: Vec<Condition>,
}

/// One leaf of a top-level `&&` chain.
#[derive(Clone)]
#[allow(clippy::large_enum_variant)] // built once per condition at compile time; size is irrelevant
pub(crate) enum Condition {
    /// `left == right`.
    Eq { expr: Expr, left: Operand, right: Operand },
    /// `a || b`.
    Or(Expr),
    /// `!a` or `a != b`.
    Not(Expr),
    /// A call or macro: raw SQL or a function the lint cannot see through.
    Raw(Expr),
    /// Any other shape (`<`, a method call, a bare value …).
    Other(Expr),
}

/// One side of an equality.
#[derive(Clone)]
pub(crate) enum Operand {
    Column(ColumnRef),
    /// `row.<column>`: the row a `write(...)` condition is asked about.
    Row,
    BucketParam(Ident),
    Actor(Source),
    Literal(Literal),
    Other,
}

/// What a row term of a `write(...)` condition compares the row written with.
#[derive(Clone)]
pub(crate) enum Compared {
    /// A constant: `row.role != "owner"`.
    Literal(Literal),
    /// Something of the actor's: `row.author_id == actor.user_id` (valid when a claim).
    Actor(Source),
}

/// A constant.
#[derive(Clone)]
pub(crate) enum Literal {
    Bool(bool),
    Int(i64),
    Text(String),
    /// A literal of another kind (float, byte string, …) or an integer out of range.
    Unsupported,
}

impl Rules {
    pub(crate) fn build(mut item: syn::ItemMod, server_only: Vec<syn::Path>, errors: &mut Diagnostics) -> Self {
        let mut buckets = Vec::new();
        let mut unreadable_buckets = false;
        match &mut item.content {
            Some((_, items)) => {
                for it in items.iter_mut() {
                    if let syn::Item::Struct(s) = it
                        && let Some(index) = s.attrs.iter().position(|a| a.path().is_ident("bucket"))
                    {
                        let attr = s.attrs.remove(index);
                        match Bucket::build(s, &attr, errors) {
                            Some(bucket) => buckets.push(bucket),
                            None => unreadable_buckets = true,
                        }
                    }
                }
            }
            None => errors
                .spanned(&item, "write the bucket definitions inside the module: `mod rules { … }`, not `mod rules;`"),
        }
        // A bucket held `while(Other)` is held through `Other`'s membership query.
        #[allow(clippy::type_complexity)] // one list of each bucket's membership and invitations
        let memberships: Vec<(Ident, Option<Membership>, Option<(Ident, ColumnRef)>)> =
            buckets.iter().map(|b| (b.ident.clone(), b.membership.clone(), b.invite.clone())).collect();
        for bucket in &mut buckets {
            let Some(source) = &bucket.held_while else { continue };
            if bucket.membership.is_none()
                && let Some((_, membership @ Some(Membership::Conditions { .. }), invite)) =
                    memberships.iter().find(|(ident, ..)| ident == source)
            {
                bucket.membership = membership.clone();
                bucket.inherits_membership = true;
                // Held through the other's memberships, it is held through accepted ones only.
                if bucket.invite.is_none() && invite.is_some() {
                    bucket.invite = invite.clone();
                    bucket.inherits_invite = true;
                }
            }
        }
        Rules { item, buckets, unreadable_buckets, server_only }
    }
}

impl Bucket {
    fn build(item: &mut syn::ItemStruct, attr: &syn::Attribute, errors: &mut Diagnostics) -> Option<Self> {
        let args = match &attr.meta {
            syn::Meta::List(list) => errors.handle(list.parse_args::<BucketArgs>()),
            _ => {
                errors.spanned(attr, "a bucket needs its data: `#[bucket(data(Table::column == bucket.param, …))]`");
                None
            }
        };
        let Some(args) = args else {
            // The fields' `#[param]` attributes must go even so: they are not attributes of Rust's.
            for field in item.fields.iter_mut() {
                field.attrs.retain(|a| !a.path().is_ident("param"));
            }
            return None;
        };
        let (name, name_span) = match &args.name {
            Some(name) => (name.value(), name.span()),
            None => (heck::ToSnakeCase::to_snake_case(item.ident.to_string().as_str()), item.ident.span()),
        };
        let mut params = Vec::new();
        for field in item.fields.iter_mut() {
            let mut sources = Vec::new();
            let mut kept = Vec::new();
            for attr in field.attrs.drain(..) {
                if attr.path().is_ident("param") {
                    match attr.parse_args::<Expr>() {
                        Ok(expr) => {
                            let source = Source::of(&expr);
                            sources.push((expr, source));
                        }
                        Err(e) => errors.push(e),
                    }
                } else {
                    kept.push(attr);
                }
            }
            field.attrs = kept;
            if let Some(ident) = &field.ident {
                params.push(Param { field: ident.clone(), ty: field.ty.clone(), sources });
            }
        }
        let membership = args.membership.map(|(_, arg)| match arg {
            MembershipArg::Raw { keyword, sql, reads } => Membership::Raw { keyword, sql, reads },
            MembershipArg::Conditions(expr) => {
                let conditions = Condition::flatten(&expr);
                Membership::Conditions { expr, conditions }
            }
        });
        let data = args.data.map(|(keyword, exprs)| {
            let selections =
                exprs.into_iter().map(|expr| Selection { conditions: Condition::flatten(&expr), expr }).collect();
            (keyword, selections)
        });
        let writes = args.write.map_or_else(Vec::new, |(_, writes)| {
            writes
                .into_iter()
                .map(|super::args::WriteArg { table, condition: expr }| {
                    let any_of = match &expr {
                        Some(expr) => Condition::alternatives(expr).into_iter().map(Condition::flatten).collect(),
                        None => vec![Vec::new()],
                    };
                    Write { table, expr, any_of }
                })
                .collect()
        });
        let accepts = args.accept.map_or_else(Vec::new, |(_, accepts)| accepts);
        Some(Bucket {
            ident: item.ident.clone(),
            generics: item.generics.clone(),
            named_fields: matches!(item.fields, syn::Fields::Named(_)),
            name,
            name_span,
            description: doc_text(&item.attrs),
            attr_span: attr.span(),
            params,
            membership,
            data,
            writes,
            accepts,
            leave: args.leave,
            invite: args.invite.and_then(|(keyword, path)| match Operand::of(&syn::Expr::Path(path.clone())) {
                Operand::Column(column) => Some((keyword, column)),
                _ => {
                    errors.spanned(
                        &path,
                        "`invite(...)` names a column of the membership table as `Table::column`: `invite(Member::accepted)`",
                    );
                    None
                }
            }),
            held_while: args.held_while.map(|(_, source)| source),
            inherits_membership: false,
            inherits_invite: false,
            anchor: args
                .anchor
                .map(|(keyword, expr)| (keyword, Selection { conditions: Condition::flatten(&expr), expr })),
        })
    }

    pub(crate) fn param(&self, name: &Ident) -> Option<&Param> {
        self.params.iter().find(|p| p.field == *name)
    }

    pub(crate) fn selections(&self) -> &[Selection] {
        self.data.as_ref().map_or(&[], |(_, s)| s.as_slice())
    }

    /// Whether every data condition is an equality the lint accepts, naming known parameters:
    /// when not, the errors about it already say what is wrong, and errors about what follows
    /// from it would only repeat them.
    pub(crate) fn data_is_well_formed(&self) -> bool {
        let conditions_valid = self.selections().iter().flat_map(|s| &s.conditions).all(|c| match c.as_scope() {
            Some((_, param)) => self.param(param).is_some(),
            None => c.as_const().is_some_and(|(_, literal, _)| !matches!(literal, Literal::Unsupported)),
        });
        let selections_scoped = self.selections().iter().all(|s| s.conditions.iter().any(|c| c.as_scope().is_some()));
        conditions_valid && selections_scoped
    }
}

impl Param {
    /// The one source of a valid parameter.
    pub(crate) fn source(&self) -> Option<&Source> {
        match self.sources.as_slice() {
            [(_, source)] => Some(source),
            _ => None,
        }
    }
}

impl Source {
    fn of(expr: &Expr) -> Source {
        match Operand::of(expr) {
            Operand::Actor(source) => source,
            Operand::Column(column) => Source::Column(column),
            _ => match expr {
                Expr::Field(f) if is_ident(&f.base, "membership") => match &f.member {
                    syn::Member::Named(column) => Source::RawColumn(column.clone()),
                    syn::Member::Unnamed(_) => Source::Other,
                },
                _ => Source::Other,
            },
        }
    }
}

impl Condition {
    /// The operands of `expr`'s top-level `||` chain.
    fn alternatives(expr: &Expr) -> Vec<&Expr> {
        match expr {
            Expr::Paren(p) => Condition::alternatives(&p.expr),
            Expr::Group(g) => Condition::alternatives(&g.expr),
            Expr::Binary(b) if matches!(b.op, syn::BinOp::Or(_)) => {
                let mut out = Condition::alternatives(&b.left);
                out.extend(Condition::alternatives(&b.right));
                out
            }
            other => vec![other],
        }
    }

    /// The leaves of `expr`'s top-level `&&` chain.
    fn flatten(expr: &Expr) -> Vec<Condition> {
        let mut out = Vec::new();
        Condition::flatten_into(expr, &mut out);
        out
    }

    fn flatten_into(expr: &Expr, out: &mut Vec<Condition>) {
        match expr {
            Expr::Paren(p) => Condition::flatten_into(&p.expr, out),
            Expr::Group(g) => Condition::flatten_into(&g.expr, out),
            Expr::Binary(b) => match b.op {
                syn::BinOp::And(_) => {
                    Condition::flatten_into(&b.left, out);
                    Condition::flatten_into(&b.right, out);
                }
                syn::BinOp::Or(_) => out.push(Condition::Or(expr.clone())),
                syn::BinOp::Ne(_) => out.push(Condition::Not(expr.clone())),
                syn::BinOp::Eq(_) => out.push(Condition::Eq {
                    expr: expr.clone(),
                    left: Operand::of(&b.left),
                    right: Operand::of(&b.right),
                }),
                _ => out.push(Condition::Other(expr.clone())),
            },
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Not(_)) => out.push(Condition::Not(expr.clone())),
            Expr::Call(_) | Expr::Macro(_) | Expr::MethodCall(_) => out.push(Condition::Raw(expr.clone())),
            _ => out.push(Condition::Other(expr.clone())),
        }
    }

    pub(crate) fn expr(&self) -> &Expr {
        match self {
            Condition::Eq { expr, .. }
            | Condition::Or(expr)
            | Condition::Not(expr)
            | Condition::Raw(expr)
            | Condition::Other(expr) => expr,
        }
    }

    /// `column == bucket.param`, either way round.
    pub(crate) fn as_scope(&self) -> Option<(&ColumnRef, &Ident)> {
        match self {
            Condition::Eq { left: Operand::Column(c), right: Operand::BucketParam(p), .. }
            | Condition::Eq { left: Operand::BucketParam(p), right: Operand::Column(c), .. } => Some((c, p)),
            _ => None,
        }
    }

    /// `column == constant`, either way round.
    pub(crate) fn as_const(&self) -> Option<(&ColumnRef, &Literal, &Expr)> {
        match self {
            Condition::Eq { expr, left: Operand::Column(c), right: Operand::Literal(l) }
            | Condition::Eq { expr, left: Operand::Literal(l), right: Operand::Column(c) } => Some((c, l, expr)),
            _ => None,
        }
    }

    /// `row.column == value` or `row.column != value`, either way round, the value a constant
    /// or the actor's (`actor.user_id`): the column, the value, whether it is `==`, and the
    /// comparison.
    pub(crate) fn as_row_term(&self) -> Option<(&Ident, Compared, bool, &Expr)> {
        let (expr, left, right, equal) = match self {
            Condition::Eq { expr, left, right } => (expr, left.clone(), right.clone(), true),
            Condition::Not(expr @ Expr::Binary(b)) if matches!(b.op, syn::BinOp::Ne(_)) => {
                (expr, Operand::of(&b.left), Operand::of(&b.right), false)
            }
            _ => return None,
        };
        let Expr::Binary(b) = expr else { return None };
        let compared = |operand| match operand {
            Operand::Literal(literal) => Some(Compared::Literal(literal)),
            Operand::Actor(source) => Some(Compared::Actor(source)),
            _ => None,
        };
        match (left, right) {
            (Operand::Row, other) => Some((row_column(&b.left)?, compared(other)?, equal, expr)),
            (other, Operand::Row) => Some((row_column(&b.right)?, compared(other)?, equal, expr)),
            _ => None,
        }
    }

    /// `column == actor.<claim>`, either way round.
    pub(crate) fn as_claim(&self) -> Option<(&ColumnRef, &Claim)> {
        match self {
            Condition::Eq { left: Operand::Column(c), right: Operand::Actor(Source::Claim(claim)), .. }
            | Condition::Eq { left: Operand::Actor(Source::Claim(claim)), right: Operand::Column(c), .. } => {
                Some((c, claim))
            }
            _ => None,
        }
    }

    /// The columns the condition names.
    pub(crate) fn columns(&self) -> Vec<&ColumnRef> {
        match self {
            Condition::Eq { left, right, .. } => [left, right]
                .into_iter()
                .filter_map(|o| match o {
                    Operand::Column(c) => Some(c),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl Operand {
    fn of(expr: &Expr) -> Operand {
        match expr {
            Expr::Paren(p) => Operand::of(&p.expr),
            Expr::Group(g) => Operand::of(&g.expr),
            Expr::Path(p) if p.qself.is_none() && p.path.segments.len() >= 2 => {
                let mut table = p.path.clone();
                table.segments.pop();
                // A trailing `::` left by `pop` is not part of the table path.
                let segments: syn::punctuated::Punctuated<_, _> = table.segments.into_iter().collect();
                table.segments = segments;
                Operand::Column(ColumnRef { path: p.clone(), table })
            }
            Expr::Field(f) => match (&*f.base, &f.member) {
                (base, syn::Member::Named(name)) if is_ident(base, "bucket") => Operand::BucketParam(name.clone()),
                (base, syn::Member::Named(_)) if is_ident(base, "row") => Operand::Row,
                (base, syn::Member::Named(name)) if is_ident(base, "actor") => {
                    Operand::Actor(match name.to_string().as_str() {
                        "user_id" => Source::Claim(Claim::UserId),
                        "owner_id" => Source::Claim(Claim::OwnerId),
                        _ => Source::UnknownActorField(name.clone()),
                    })
                }
                (Expr::Field(inner), syn::Member::Named(name))
                    if is_ident(&inner.base, "actor")
                        && matches!(&inner.member, syn::Member::Named(m) if m == "claims") =>
                {
                    Operand::Actor(Source::Claim(Claim::Custom(name.to_string())))
                }
                _ => Operand::Other,
            },
            Expr::Lit(lit) => Operand::Literal(match &lit.lit {
                syn::Lit::Bool(b) => Literal::Bool(b.value),
                syn::Lit::Int(i) => i.base10_parse::<i64>().map_or(Literal::Unsupported, Literal::Int),
                syn::Lit::Str(s) => Literal::Text(s.value()),
                _ => Literal::Unsupported,
            }),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => match &*u.expr {
                Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => Operand::Literal(
                    i.base10_parse::<i64>().ok().and_then(i64::checked_neg).map_or(Literal::Unsupported, Literal::Int),
                ),
                _ => Operand::Other,
            },
            _ => Operand::Other,
        }
    }
}

/// The column of `row.<column>`, looking through parentheses.
fn row_column(expr: &Expr) -> Option<&Ident> {
    match expr {
        Expr::Paren(p) => row_column(&p.expr),
        Expr::Group(g) => row_column(&g.expr),
        Expr::Field(f) if is_ident(&f.base, "row") => match &f.member {
            syn::Member::Named(name) => Some(name),
            syn::Member::Unnamed(_) => None,
        },
        _ => None,
    }
}

fn is_ident(expr: &Expr, name: &str) -> bool {
    matches!(expr, Expr::Path(p) if p.qself.is_none() && p.path.is_ident(name))
}
