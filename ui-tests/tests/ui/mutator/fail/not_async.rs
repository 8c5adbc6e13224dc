use engine::{MutatorCtx, Outcome, Result};
use ui_tests::NoArgs;

#[engine::mutator]
pub fn noop(_ctx: &mut MutatorCtx<'_>, _args: NoArgs) -> Result<Outcome> {
    Ok(Outcome::new())
}

fn main() {}
