//! `#[engine::mutator]`: an `async fn(ctx, args)` becomes a registered mutator. The function is
//! kept as written (callable directly, e.g. in tests); beside it a type of the same name (in the
//! type namespace) implements `engine::Mutator`, which is what `engine::app!` and
//! `client.mutate::<add_note>(…)` name.

mod args;
mod expand;
mod model;
mod validate;

use proc_macro2::TokenStream;

use crate::support::Diagnostics;

pub(crate) fn mutator_inner(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Diagnostics::default();
    let args = errors.handle(args::MutatorArgs::parse(args)).unwrap_or_default();
    let item = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(item) => item,
        Err(_) => return errors.wrong_item("`#[engine::mutator]` goes on an `async fn(ctx: &mut engine::MutatorCtx<'_>, args: Args) -> engine::Result<engine::Outcome>`", item),
    };
    let model = model::Mutator::build(item, args);
    validate::validate(&model, &mut errors);
    errors.emit(|| expand::expand(&model), || expand::fallback(&model))
}

#[cfg(test)]
mod tests;
