//! Expansion snapshot of a representative mutator.

use quote::quote;

#[test]
fn renamed_mutator() {
    let tokens = super::mutator_inner(
        quote!(name = "notes.add"),
        quote! {
            /// Add a note to a list.
            pub async fn add_note(ctx: &mut engine::MutatorCtx<'_>, args: AddNote) -> engine::Result<engine::Outcome> {
                let id = ctx.new_id();
                Ok(engine::Outcome::new().server_id(id))
            }
        },
    );
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
    insta::assert_snapshot!(prettyplease::unparse(&file));
}

#[test]
fn plain_mutator() {
    let tokens = super::mutator_inner(
        quote!(),
        quote! {
            async fn purge_note(ctx: &mut MutatorCtx<'_>, args: PurgeNote) -> Result<Outcome> {
                ctx.purge::<Note>(&args.id).await?;
                Ok(Outcome::new())
            }
        },
    );
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
    insta::assert_snapshot!(prettyplease::unparse(&file));
}
