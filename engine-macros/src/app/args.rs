//! The grammar of `engine::app!`:
//!
//! ```text
//! engine::app! {
//!     tables: [Path, …],
//!     mutators: [path, …],     // optional
//!     sync_rules: module_path, // optional
//! }
//! ```

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, Path, Token};

pub(crate) struct AppArgs {
    pub(crate) tables: Vec<Path>,
    pub(crate) mutators: Vec<Path>,
    pub(crate) sync_rules: Option<Path>,
}

impl Parse for AppArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut tables = None;
        let mut mutators = None;
        let mut sync_rules = None;
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            input.parse::<Token![:]>()?;
            let duplicate = || syn::Error::new(key.span(), format!("`{key}` is given twice"));
            match key.to_string().as_str() {
                "tables" => {
                    if tables.replace(list(input)?).is_some() {
                        return Err(duplicate());
                    }
                }
                "mutators" => {
                    if mutators.replace(list(input)?).is_some() {
                        return Err(duplicate());
                    }
                }
                "sync_rules" => {
                    if sync_rules.replace(input.parse::<Path>()?).is_some() {
                        return Err(duplicate());
                    }
                }
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown part `{other}` of an app: write `tables: [...]`, `mutators: [...]` and `sync_rules: <module>`"
                        ),
                    ));
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        let tables = tables.ok_or_else(|| {
            syn::Error::new(proc_macro2::Span::call_site(), "an app lists its tables: `tables: [Note, …]`")
        })?;
        Ok(AppArgs { tables, mutators: mutators.unwrap_or_default(), sync_rules })
    }
}

fn list(input: ParseStream<'_>) -> syn::Result<Vec<Path>> {
    let content;
    syn::bracketed!(content in input);
    Ok(Punctuated::<Path, Token![,]>::parse_terminated(&content)?.into_iter().collect())
}
