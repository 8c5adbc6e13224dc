//! `#[engine::sync_rules]`: a module of bucket definitions becomes the app's sync rules. Each
//! `#[bucket(...)]` struct is one rule: its fields are the bucket's parameters (so the struct is a
//! typed bucket key), `#[param(...)]` says where each comes from, and `data(...)` lists the table
//! selections the bucket holds.
//!
//! The no-leak lint lives in `validate`: every selection must be scoped by equality to a bucket
//! parameter, and every parameter must come from the actor (a claim, or a membership query
//! filtered by a claim), never from the client.

mod args;
mod expand;
mod model;
mod validate;

use proc_macro2::TokenStream;

use crate::support::Diagnostics;

pub(crate) fn sync_rules_inner(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Diagnostics::default();
    let module_args: args::ModuleArgs = errors.handle(syn::parse2(args)).unwrap_or_default();
    let item = match syn::parse2::<syn::ItemMod>(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            return errors.wrong_item(
                "`#[engine::sync_rules]` goes on a module of `#[bucket(...)]` structs: `mod rules { … }`",
                item,
            );
        }
    };
    let rules = model::Rules::build(item, module_args.server_only, &mut errors);
    validate::validate(&rules, &mut errors);
    errors.emit(|| expand::expand(&rules), || expand::fallback(&rules))
}

#[cfg(test)]
mod tests;
