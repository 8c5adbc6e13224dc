//! The grammar of `#[bucket(...)]` and `#[param(...)]`:
//!
//! ```text
//! #[engine::sync_rules( server_only(<Table>, …)? )]
//! #[bucket( name = "…"?, membership(<conditions> | raw("<sql>", reads(<Table>, …)?))?, data(<selection>, …),
//!           write(<Table> | <Table>: <membership condition> || …, …)?,
//!           accept(<Bucket> | open(<Bucket>), …)?, leave?, invite(<Table::column>)?, while(<Bucket>)?,
//!           anchor(<Table::column == bucket.param && …>)? )]
//! #[param( actor.user_id | actor.owner_id | actor.claims.<name> | Table::column | membership.<column> )]
//! ```
//!
//! Conditions and selections are Rust expressions (`Note::list_id == bucket.list_id && …`), parsed
//! here as they are written; what they may contain is the lint's business.

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitStr, Token};

/// The parsed `#[bucket(...)]` attribute.
#[derive(Default)]
pub(crate) struct BucketArgs {
    pub(crate) name: Option<LitStr>,
    pub(crate) membership: Option<(Ident, MembershipArg)>,
    pub(crate) data: Option<(Ident, Vec<Expr>)>,
    /// `write(Table, Table: condition, …)`.
    pub(crate) write: Option<(Ident, Vec<WriteArg>)>,
    /// `accept(Bucket, open(Bucket), …)`.
    pub(crate) accept: Option<(Ident, Vec<AcceptArg>)>,
    /// `leave`.
    pub(crate) leave: Option<Ident>,
    /// `invite(Member::accepted)`: memberships are invitations until their member accepts.
    pub(crate) invite: Option<(Ident, syn::ExprPath)>,
    /// `while(Bucket)`: held through another bucket's membership.
    pub(crate) held_while: Option<(Ident, Ident)>,
    /// `anchor(Table::column == bucket.param && …)`: the row a bucket belongs to.
    pub(crate) anchor: Option<(Ident, Expr)>,
}

/// The parsed `#[engine::sync_rules(...)]` attribute.
#[derive(Default)]
pub(crate) struct ModuleArgs {
    /// `server_only(Table, …)`.
    pub(crate) server_only: Vec<syn::Path>,
}

impl Parse for ModuleArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = ModuleArgs::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key != "server_only" {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown argument `{key}`: `#[engine::sync_rules]` takes `server_only(Table, …)`"),
                ));
            }
            let content;
            syn::parenthesized!(content in input);
            args.server_only.extend(Punctuated::<syn::Path, Token![,]>::parse_terminated(&content)?);
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(args)
    }
}

/// `Table` or `Table: condition` in `write(...)`.
pub(crate) struct WriteArg {
    pub(crate) table: syn::Path,
    pub(crate) condition: Option<Expr>,
}

impl Parse for WriteArg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let table: syn::Path = input.parse()?;
        if !input.peek(Token![:]) {
            return Ok(WriteArg { table, condition: None });
        }
        input.parse::<Token![:]>()?;
        Ok(WriteArg { table, condition: Some(input.parse()?) })
    }
}

/// `Bucket` or `open(Bucket)` in `accept(...)`.
pub(crate) struct AcceptArg {
    pub(crate) bucket: Ident,
    /// `open(...)`: any holder of `bucket` may put rows in, not only the receiver's teammates.
    pub(crate) open: bool,
}

impl Parse for AcceptArg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let first: Ident = input.parse()?;
        if first != "open" || !input.peek(syn::token::Paren) {
            return Ok(AcceptArg { bucket: first, open: false });
        }
        let content;
        syn::parenthesized!(content in input);
        Ok(AcceptArg { bucket: content.parse()?, open: true })
    }
}

/// What `membership(...)` holds.
pub(crate) enum MembershipArg {
    /// `raw("…")` or `raw("…", reads(Table, …))`.
    Raw { keyword: Ident, sql: LitStr, reads: Vec<syn::Path> },
    /// Conditions on a membership table.
    Conditions(Expr),
}

impl Parse for BucketArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = BucketArgs::default();
        while !input.is_empty() {
            let key: Ident = input.call(syn::ext::IdentExt::parse_any)?;
            let duplicate = || syn::Error::new(key.span(), format!("`{key}` is given twice"));
            match key.to_string().as_str() {
                "name" => {
                    input.parse::<Token![=]>()?;
                    if args.name.replace(input.parse()?).is_some() {
                        return Err(duplicate());
                    }
                }
                "membership" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let arg = if content.peek(Ident)
                        && content.peek2(syn::token::Paren)
                        && content.fork().parse::<Ident>()? == "raw"
                    {
                        let keyword: Ident = content.parse()?;
                        let inner;
                        syn::parenthesized!(inner in content);
                        let sql: LitStr = inner.parse()?;
                        let mut reads = Vec::new();
                        if !inner.is_empty() {
                            inner.parse::<Token![,]>()?;
                            let word: Ident = inner.parse()?;
                            if word != "reads" {
                                return Err(syn::Error::new(
                                    word.span(),
                                    "after the SQL, `raw(...)` takes `reads(Table, …)`: the app's tables the query reads",
                                ));
                            }
                            let tables;
                            syn::parenthesized!(tables in inner);
                            reads.extend(Punctuated::<syn::Path, Token![,]>::parse_terminated(&tables)?);
                            if inner.peek(Token![,]) {
                                inner.parse::<Token![,]>()?;
                            }
                            if !inner.is_empty() {
                                return Err(inner.error("`raw(\"…\", reads(Table, …))` ends after `reads(...)`"));
                            }
                        }
                        MembershipArg::Raw { keyword, sql, reads }
                    } else {
                        MembershipArg::Conditions(content.parse()?)
                    };
                    if !content.is_empty() {
                        return Err(content
                            .error("`membership(...)` holds one condition (join several with `&&`) or `raw(\"…\")`"));
                    }
                    if args.membership.replace((key.clone(), arg)).is_some() {
                        return Err(duplicate());
                    }
                }
                "data" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let selections = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
                    if args.data.replace((key.clone(), selections.into_iter().collect())).is_some() {
                        return Err(duplicate());
                    }
                }
                "write" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let writes = Punctuated::<WriteArg, Token![,]>::parse_terminated(&content)?;
                    let writes = writes.into_iter().collect();
                    if args.write.replace((key.clone(), writes)).is_some() {
                        return Err(duplicate());
                    }
                }
                "accept" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let buckets = Punctuated::<AcceptArg, Token![,]>::parse_terminated(&content)?;
                    if args.accept.replace((key.clone(), buckets.into_iter().collect())).is_some() {
                        return Err(duplicate());
                    }
                }
                "leave" => {
                    if args.leave.replace(key.clone()).is_some() {
                        return Err(duplicate());
                    }
                }
                "invite" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let column: syn::ExprPath = content.parse()?;
                    if !content.is_empty() {
                        return Err(content.error(
                            "`invite(...)` names one boolean column of the membership table: `invite(Member::accepted)`",
                        ));
                    }
                    if args.invite.replace((key.clone(), column)).is_some() {
                        return Err(duplicate());
                    }
                }
                "anchor" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let expr: Expr = content.parse()?;
                    if !content.is_empty() {
                        return Err(content.error(
                            "`anchor(...)` holds one condition: `anchor(Team::id == bucket.team_id)`, joined by `&&`",
                        ));
                    }
                    if args.anchor.replace((key.clone(), expr)).is_some() {
                        return Err(duplicate());
                    }
                }
                "while" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let source: Ident = content.parse()?;
                    if !content.is_empty() {
                        return Err(content.error("`while(...)` names one bucket: `while(TeamBoard)`"));
                    }
                    if args.held_while.replace((key.clone(), source)).is_some() {
                        return Err(duplicate());
                    }
                }
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown bucket argument `{other}`: a bucket takes `name = \"…\"`, `membership(…)`, `data(…)`, `write(…)`, `accept(…)`, `leave`, `invite(…)`, `while(…)` and `anchor(…)`"
                        ),
                    ));
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(args)
    }
}
