#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List};
    #[bucket(
        membership(raw("SELECT list_id FROM list_members WHERE user_id = $1")),
        data(List::id == bucket.list_id),
    )]
    pub struct Shared {
        #[param(membership.list_id)]
        pub list_id: String,
    }
}

fn main() {}
