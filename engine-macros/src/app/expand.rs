//! The code `engine::app!` generates: compile-time checks, then the builder calls.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::args::AppArgs;

pub(crate) fn expand(args: &AppArgs) -> TokenStream {
    let mut checks = Vec::new();
    for (i, later) in args.mutators.iter().enumerate() {
        for earlier in &args.mutators[..i] {
            checks.push(quote_spanned! {later.span()=>
                ::core::assert!(
                    !::engine::__private::const_str_eq(
                        <#earlier as ::engine::__private::Mutator>::NAME,
                        <#later as ::engine::__private::Mutator>::NAME,
                    ),
                    "two mutators of this app have the same wire name: rename one with `#[engine::mutator(name = \"…\")]`"
                );
            });
        }
    }
    for (i, later) in args.tables.iter().enumerate() {
        for earlier in &args.tables[..i] {
            checks.push(quote_spanned! {later.span()=>
                ::core::assert!(
                    !::engine::__private::const_str_eq(
                        <#earlier as ::engine::__private::Table>::META.name,
                        <#later as ::engine::__private::Table>::META.name,
                    ),
                    "two tables of this app have the same SQL name: rename one with `#[engine::table(name = \"…\")]`"
                );
            });
        }
    }
    let tables = &args.tables;
    let table_names = quote!(&[#(<#tables as ::engine::__private::Table>::META.name,)*]);
    let rules = args.sync_rules.as_ref().map(|rules| {
        checks.push(quote_spanned! {rules.span()=>
            if let ::core::option::Option::Some(message) =
                ::engine::__private::const_first_unlisted(#rules::__ENGINE_RULE_TABLES, #table_names)
            {
                ::core::panic!("{}", message);
            }
        });
        quote!(.sync_rules(&#rules::SYNC_RULES))
    });
    let mutators = &args.mutators;
    quote! {
        {
            const _: () = {
                #(#checks)*
            };
            ::engine::__private::App::builder()
                #(.table::<#tables>())*
                #(.mutator::<#mutators>())*
                #rules
                .build()
                .expect("engine::app! checked the app at compile time")
        }
    }
}
