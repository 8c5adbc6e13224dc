//! Expansion snapshot of an argument struct.

use quote::quote;

#[test]
fn argument_struct() {
    let tokens = super::args_inner(
        quote!(),
        quote! {
            /// Arguments of `rename_list`.
            #[derive(Debug, Clone)]
            pub struct RenameList {
                pub id: String,
                #[serde(default)]
                pub title: Option<String>,
            }
        },
    );
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
    insta::assert_snapshot!(prettyplease::unparse(&file));
}
