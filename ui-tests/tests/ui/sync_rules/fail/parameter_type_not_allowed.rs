#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List};
    #[bucket(data(List::rank == bucket.rank))]
    pub struct Ranked {
        #[param(actor.claims.rank)]
        pub rank: f64,
    }
}

fn main() {}
