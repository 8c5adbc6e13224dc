use engine::{MutatorCtx, Outcome, Result};
use ui_tests::NoArgs;

#[engine::mutator]
pub async fn noop(_ctx: &MutatorCtx<'_>, _args: NoArgs) -> Result<Outcome> {
    Ok(Outcome::new())
}

fn main() {}
