use engine::{MutatorCtx, Outcome, Result};
use ui_tests::NoArgs;

use std::rc::Rc;

#[engine::mutator]
pub async fn noop(ctx: &mut MutatorCtx<'_>, _args: NoArgs) -> Result<Outcome> {
    let shared = Rc::new(ctx.new_id());
    ctx.get::<ui_tests::List>(&shared).await?;
    Ok(Outcome::new().server_id(shared.to_string()))
}

fn main() {}
