use engine::{Mutator, MutatorCtx, Outcome, Result};
use ui_tests::{List, NoArgs};

/// Archive every list of the actor.
#[engine::mutator(name = "lists.archive_all")]
pub async fn archive_all(ctx: &mut MutatorCtx<'_>, _args: NoArgs) -> Result<Outcome> {
    let owner = ctx.actor().owner_id.clone();
    for list in ctx.select(List::owner_id.eq(owner)).await? {
        ctx.update::<List>(&list.id, [List::archived.set(true)]).await?;
    }
    Ok(Outcome::new())
}

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Rename {
    pub id: String,
    pub title: String,
}

#[engine::mutator]
async fn rename<'x>(ctx: &'x mut MutatorCtx<'_>, args: Rename) -> engine::Result<engine::Outcome> {
    ctx.update::<List>(&args.id, [List::title.set(args.title)]).await?;
    Ok(Outcome::new().server_id(args.id))
}

fn main() {
    assert_eq!(<archive_all as Mutator>::NAME, "lists.archive_all");
    assert_eq!(<archive_all as Mutator>::DESCRIPTION, "Archive every list of the actor.");
    assert_eq!(<rename as Mutator>::NAME, "rename");
    // The function itself stays callable.
    let _ = rename;
}
