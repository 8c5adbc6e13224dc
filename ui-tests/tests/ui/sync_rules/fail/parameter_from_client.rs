#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List};
    #[bucket(data(List::id == bucket.list_id))]
    pub struct Picked {
        #[param(request.list_id)]
        pub list_id: String,
    }
}

fn main() {}
