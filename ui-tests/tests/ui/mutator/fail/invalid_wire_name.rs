use engine::{MutatorCtx, Outcome, Result};
use ui_tests::NoArgs;

#[engine::mutator(name = "add note")]
pub async fn add_note(_ctx: &mut MutatorCtx<'_>, _args: NoArgs) -> Result<Outcome> {
    Ok(Outcome::new())
}

fn main() {}
