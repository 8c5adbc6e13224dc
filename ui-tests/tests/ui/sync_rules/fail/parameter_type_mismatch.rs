#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List};
    #[bucket(data(List::rank == bucket.owner_id))]
    pub struct Ranked {
        #[param(actor.claims.rank)]
        pub owner_id: String,
    }
}

fn main() {}
