use engine::{MutatorCtx, Outcome, Result};

#[engine::mutator]
pub async fn noop(_ctx: &mut MutatorCtx<'_>) -> Result<Outcome> {
    Ok(Outcome::new())
}

fn main() {}
