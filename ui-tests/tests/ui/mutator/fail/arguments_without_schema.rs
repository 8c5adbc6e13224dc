use engine::{MutatorCtx, Outcome, Result};

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Args {
    pub id: String,
}

#[engine::mutator]
pub async fn noop(_ctx: &mut MutatorCtx<'_>, _args: Args) -> Result<Outcome> {
    Ok(Outcome::new())
}

fn main() {}
