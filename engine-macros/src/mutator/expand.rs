//! The code `#[engine::mutator]` generates.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::model::Mutator;

/// The function, and beside it the mutator type of the same name.
pub(crate) fn expand(mutator: &Mutator) -> TokenStream {
    let item = &mutator.item;
    let ident = &item.sig.ident;
    let vis = &item.vis;
    let (name, description) = (&mutator.name, &mutator.description);
    let args = mutator.args_type().expect("validated: two parameters");
    let output_span = match &item.sig.output {
        syn::ReturnType::Type(_, ty) => ty.span(),
        syn::ReturnType::Default => ident.span(),
    };
    // The call carries the return type's span, so a wrong return type or a future that is not
    // `Send` is reported there; the local function names the requirement without the engine's
    // internals.
    let callee = syn::Ident::new(&ident.to_string(), output_span);
    let run = quote_spanned! {output_span=>
        fn mutator_future<'a, F>(future: F) -> __engine::BoxFuture<'a, __engine::Result<__engine::Outcome>>
        where
            F: ::core::future::Future<Output = __engine::Result<__engine::Outcome>> + ::core::marker::Send + 'a,
        {
            ::std::boxed::Box::pin(future)
        }
        mutator_future(#callee(ctx, args))
    };
    // A local function whose bound reports arguments that are not `MutatorArgs` in the
    // engine's words, on the user's type.
    let args_check = quote_spanned! {args.span()=>
        fn arguments<A: __engine::MutatorArgs>() {}
        arguments::<#args>();
    };
    let doc = format!(" The mutator `{name}`, declared by the function of the same name.");
    quote! {
        #item

        #[doc = #doc]
        #[allow(non_camel_case_types)]
        #vis struct #ident {
            _private: (),
        }

        const _: () = {
            use ::engine::__private as __engine;

            impl __engine::Mutator for #ident {
                const NAME: &'static str = #name;
                const DESCRIPTION: &'static str = #description;
                type Args = #args;

                fn run<'a, 'c>(
                    ctx: &'a mut __engine::MutatorCtx<'c>,
                    args: Self::Args,
                ) -> __engine::BoxFuture<'a, __engine::Result<__engine::Outcome>> {
                    #run
                }
            }

            #[allow(dead_code)]
            fn checks() {
                #args_check
            }
        };
    }
}

/// What is emitted when the declaration has errors: the function alone.
pub(crate) fn fallback(mutator: &Mutator) -> TokenStream {
    let item = &mutator.item;
    quote!(#item)
}
