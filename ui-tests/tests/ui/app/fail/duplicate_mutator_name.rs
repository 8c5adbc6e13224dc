use engine::{MutatorCtx, Outcome, Result};
use ui_tests::{List, NoArgs};

#[engine::mutator]
async fn archive(_ctx: &mut MutatorCtx<'_>, _args: NoArgs) -> Result<Outcome> {
    Ok(Outcome::new())
}

#[engine::mutator(name = "archive")]
async fn archive_all(_ctx: &mut MutatorCtx<'_>, _args: NoArgs) -> Result<Outcome> {
    Ok(Outcome::new())
}

fn main() {
    let _app = engine::app! {
        tables: [List],
        mutators: [archive, archive_all],
    };
}
