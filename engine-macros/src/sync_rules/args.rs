//! The grammar of `#[bucket(...)]` and `#[param(...)]`:
//!
//! ```text
//! #[bucket( name = "…"?, membership(<conditions> | raw("<sql>"))?, data(<selection>, …),
//!           write(<Table>: <membership condition> || …, …)?, accept(<Bucket>, …)? )]
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
    /// `write(Table: condition, …)`.
    pub(crate) write: Option<(Ident, Vec<(syn::Path, Expr)>)>,
    /// `accept(Bucket, …)`.
    pub(crate) accept: Option<(Ident, Vec<Ident>)>,
}

/// `Table: condition` in `write(...)`.
struct WriteArg {
    table: syn::Path,
    condition: Expr,
}

impl Parse for WriteArg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let table: syn::Path = input.parse()?;
        input.parse::<Token![:]>()?;
        Ok(WriteArg { table, condition: input.parse()? })
    }
}

/// What `membership(...)` holds.
pub(crate) enum MembershipArg {
    /// `raw("…")`.
    Raw { keyword: Ident, sql: LitStr },
    /// Conditions on a membership table.
    Conditions(Expr),
}

impl Parse for BucketArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = BucketArgs::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
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
                        let sql;
                        syn::parenthesized!(sql in content);
                        let sql: LitStr = sql.parse()?;
                        MembershipArg::Raw { keyword, sql }
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
                    let writes = writes.into_iter().map(|w| (w.table, w.condition)).collect();
                    if args.write.replace((key.clone(), writes)).is_some() {
                        return Err(duplicate());
                    }
                }
                "accept" => {
                    let content;
                    syn::parenthesized!(content in input);
                    let buckets = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                    if args.accept.replace((key.clone(), buckets.into_iter().collect())).is_some() {
                        return Err(duplicate());
                    }
                }
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown bucket argument `{other}`: a bucket takes `name = \"…\"`, `membership(…)`, `data(…)`, `write(…)` and `accept(…)`"
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
