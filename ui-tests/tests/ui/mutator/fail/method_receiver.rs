use engine::{MutatorCtx, Outcome, Result};

pub struct Service;

impl Service {
    #[engine::mutator]
    pub async fn noop(&self, _ctx: &mut MutatorCtx<'_>) -> Result<Outcome> {
        Ok(Outcome::new())
    }
}

fn main() {}
