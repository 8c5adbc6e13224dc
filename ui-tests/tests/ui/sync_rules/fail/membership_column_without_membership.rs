#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember};
    #[bucket(data(List::id == bucket.list_id))]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {}
