//! Expansion snapshot of the notes app's rules, and unit tests of the lint's helpers.

use quote::quote;

#[test]
fn notes_rules() {
    let tokens = super::sync_rules_inner(
        quote!(server_only(Audit)),
        quote! {
            pub mod rules {
                use super::{List, ListMember, Note};

                /// Everything the actor owns.
                #[bucket(
                    data(
                        List::owner_id == bucket.owner_id,
                        Note::owner_id == bucket.owner_id && Note::done == false,
                    ),
                    write(List),
                    accept(open(Shared)),
                )]
                pub struct Own {
                    #[param(actor.owner_id)]
                    pub owner_id: String,
                }

                /// Lists shared with the actor.
                #[bucket(
                    membership(ListMember::user_id == actor.user_id && ListMember::role == "editor"),
                    data(bucket.list_id == Note::list_id, ListMember::list_id == bucket.list_id),
                    write(Note: ListMember::role == "editor"),
                    leave,
                )]
                pub struct Shared {
                    #[param(ListMember::list_id)]
                    pub list_id: String,
                }

                #[bucket(name = "team", membership(raw("SELECT team_id FROM teams WHERE member = $user_id")), data(Doc::team_id == bucket.team_id))]
                pub struct TeamDocs {
                    #[param(membership.team_id)]
                    pub team_id: i64,
                }
            }
        },
    );
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
    insta::assert_snapshot!(prettyplease::unparse(&file));
}
