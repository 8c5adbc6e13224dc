use engine::{MutatorCtx, Result};
use ui_tests::NoArgs;

#[engine::mutator]
pub async fn noop(_ctx: &mut MutatorCtx<'_>, _args: NoArgs) -> Result<String> {
    Ok(String::new())
}

fn main() {}
