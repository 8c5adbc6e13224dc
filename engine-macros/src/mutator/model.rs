//! The typed model of a mutator declaration.

use proc_macro2::Span;

use super::args::MutatorArgs;
use crate::support::doc_text;

/// A mutator declaration.
pub(crate) struct Mutator {
    /// The function, as written.
    pub(crate) item: syn::ItemFn,
    /// The wire name and the span of whatever chose it.
    pub(crate) name: String,
    pub(crate) name_span: Span,
    /// The function's doc comment.
    pub(crate) description: String,
}

impl Mutator {
    pub(crate) fn build(item: syn::ItemFn, args: MutatorArgs) -> Self {
        let (name, name_span) = match &args.name {
            Some(name) => (name.as_ref().clone(), name.span()),
            None => (item.sig.ident.to_string().trim_start_matches("r#").to_owned(), item.sig.ident.span()),
        };
        let description = doc_text(&item.attrs);
        Mutator { item, name, name_span, description }
    }

    /// The type of the `args` parameter, when the signature has one.
    pub(crate) fn args_type(&self) -> Option<&syn::Type> {
        match self.item.sig.inputs.iter().nth(1) {
            Some(syn::FnArg::Typed(pat)) => Some(&pat.ty),
            _ => None,
        }
    }
}
