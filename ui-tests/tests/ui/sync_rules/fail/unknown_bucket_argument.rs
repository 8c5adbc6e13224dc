#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List};
    #[bucket(params(owner_id = actor.owner_id), data(List::owner_id == bucket.owner_id))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
