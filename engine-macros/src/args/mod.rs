//! `#[engine::args]`: a mutator's argument type, and every type its fields hold, gets the
//! `Serialize`, `Deserialize` and `JsonSchema` derives through the engine's own `serde` and
//! `schemars`, so the app names neither crate in its manifest and no version has to match.
//!
//! There is nothing to model: the item is a struct or an enum as written, checked and then
//! wrapped in the derives.

mod expand;
mod validate;

use proc_macro2::TokenStream;

use crate::support::Diagnostics;

pub(crate) fn args_inner(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Diagnostics::default();
    if !args.is_empty() {
        errors.spanned(&args, "`#[engine::args]` takes no arguments: write `#[engine::args]`");
    }
    let item = match syn::parse2::<syn::DeriveInput>(item.clone()) {
        Ok(item) => item,
        Err(_) => return errors.wrong_item(validate::WRONG_ITEM, item),
    };
    validate::validate(&item, &mut errors);
    errors.emit(|| expand::expand(&item), || expand::fallback(&item))
}

#[cfg(test)]
mod tests;
