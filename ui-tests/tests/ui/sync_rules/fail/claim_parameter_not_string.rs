#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List};
    #[bucket(data(List::rank == bucket.owner_id))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: i64,
    }
}

fn main() {}
