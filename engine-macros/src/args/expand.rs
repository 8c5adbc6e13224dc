//! The code `#[engine::args]` generates: the item under the three derives, each pointed at the
//! engine's copy of its crate.
//!
//! The derives are named by their public paths (`engine::serde`, `engine::schemars`), not through
//! `engine::__private` like the rest of the generated code: rustc quotes a derive's path in every
//! error that derive's code causes (a field type that is not serializable), and the user should
//! read a path they could have written.

use proc_macro2::TokenStream;
use quote::quote;

pub(crate) fn expand(item: &syn::DeriveInput) -> TokenStream {
    quote! {
        #[derive(::engine::serde::Serialize, ::engine::serde::Deserialize, ::engine::schemars::JsonSchema)]
        #[serde(crate = "::engine::__private::serde")]
        #[schemars(crate = "::engine::__private::schemars")]
        #item
    }
}

/// What is emitted when the declaration has errors: the item as written.
pub(crate) fn fallback(item: &syn::DeriveInput) -> TokenStream {
    quote!(#item)
}
