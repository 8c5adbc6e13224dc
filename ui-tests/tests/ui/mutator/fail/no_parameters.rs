use engine::{Outcome, Result};

#[engine::mutator]
pub async fn noop() -> Result<Outcome> {
    Ok(Outcome::new())
}

fn main() {}
