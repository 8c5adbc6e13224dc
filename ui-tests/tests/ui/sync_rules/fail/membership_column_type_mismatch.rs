#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember};
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::rank == bucket.list_id),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: i64,
    }
}

fn main() {}
