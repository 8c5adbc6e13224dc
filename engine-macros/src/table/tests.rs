//! Expansion snapshots of representative tables, and the model's reading of attributes.

use quote::quote;

fn expand(args: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
    let tokens = super::table_inner(args, item);
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
    prettyplease::unparse(&file)
}

#[test]
fn field_table_with_composite_roles() {
    insta::assert_snapshot!(expand(
        quote!(merge = "field"),
        quote! {
            /// A note in a list.
            pub struct Note {
                #[engine(primary_key)]
                pub id: String,
                #[engine(owner)]
                pub owner_id: String,
                /// Shown as the note's heading.
                pub title: String,
                pub body: engine::CrdtText,
                #[engine(soft_delete, rename = "deleted_at")]
                pub removed: Option<engine::Timestamp>,
            }
        }
    ));
}

#[test]
fn lww_table_with_composite_key() {
    insta::assert_snapshot!(expand(
        quote!(),
        quote! {
            pub struct ListMember {
                #[engine(primary_key)]
                pub list_id: String,
                #[engine(primary_key)]
                pub user_id: String,
                pub role: String,
            }
        }
    ));
}
