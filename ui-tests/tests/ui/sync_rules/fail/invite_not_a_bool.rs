#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember};

    /// Accepted through a text column.
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, ListMember::list_id == bucket.list_id),
        invite(ListMember::role),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {}
