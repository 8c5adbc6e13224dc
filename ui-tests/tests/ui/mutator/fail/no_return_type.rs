use engine::MutatorCtx;
use ui_tests::NoArgs;

#[engine::mutator]
pub async fn noop(_ctx: &mut MutatorCtx<'_>, _args: NoArgs) {}

fn main() {}
