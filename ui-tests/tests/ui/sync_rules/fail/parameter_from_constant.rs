#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List};
    #[bucket(data(List::owner_id == bucket.owner_id))]
    pub struct Alice {
        #[param("alice")]
        pub owner_id: String,
    }
}

fn main() {}
