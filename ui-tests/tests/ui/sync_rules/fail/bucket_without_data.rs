#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List};
    #[bucket(name = "own")]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
