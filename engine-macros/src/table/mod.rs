//! `#[engine::table]`: a struct with named fields becomes a table: metadata, the row's serde
//! and JSON Schema, typed column handles, and compile-time checks of every column's role.

mod args;
mod expand;
mod model;
mod validate;

use proc_macro2::TokenStream;

use crate::support::Diagnostics;

pub(crate) fn table_inner(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Diagnostics::default();
    let args = errors.handle(args::TableArgs::parse(args)).unwrap_or_default();
    let item = match syn::parse2::<syn::ItemStruct>(item.clone()) {
        Ok(item) => item,
        Err(_) => return errors.wrong_item("`#[engine::table]` goes on a struct with named fields, one per column: write `struct Name { field: Type, … }`", item),
    };
    let model = model::Table::build(item, args, &mut errors);
    validate::validate(&model, &mut errors);
    errors.emit(|| expand::expand(&model), || expand::fallback(&model))
}

#[cfg(test)]
mod tests;
