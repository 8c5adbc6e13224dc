//! Expansion snapshot of the notes app's bundle.

use quote::quote;

#[test]
fn notes_app() {
    let tokens = super::app_inner(quote! {
        tables: [List, ListMember, Note],
        mutators: [create_list, add_note],
        sync_rules: rules,
    });
    let expr: syn::Expr = syn::parse2(tokens).expect("the expansion parses as an expression");
    let file: syn::File = syn::parse_quote!(fn app() -> engine::App { #expr });
    insta::assert_snapshot!(prettyplease::unparse(&file));
}
