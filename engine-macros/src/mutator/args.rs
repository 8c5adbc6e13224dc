//! The arguments of `#[engine::mutator(...)]`.

use darling::FromMeta;
use darling::util::SpannedValue;
use proc_macro2::TokenStream;

/// `#[engine::mutator(name = "…")]`.
#[derive(Debug, Default, FromMeta)]
pub(crate) struct MutatorArgs {
    /// The wire name, when it differs from the function's.
    pub(crate) name: Option<SpannedValue<String>>,
}

impl MutatorArgs {
    pub(crate) fn parse(args: TokenStream) -> darling::Result<Self> {
        let items = darling::ast::NestedMeta::parse_meta_list(args)?;
        MutatorArgs::from_list(&items)
    }
}
