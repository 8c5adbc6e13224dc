#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember};

    /// Lists shared with the actor, by raw SQL over `list_members`.
    #[bucket(
        membership(raw("SELECT list_id FROM list_members WHERE user_id = $user_id", reads(ListMember))),
        data(List::id == bucket.list_id, ListMember::list_id == bucket.list_id),
        write(List, ListMember),
    )]
    pub struct Shared {
        #[param(membership.list_id)]
        pub list_id: String,
    }
}

fn main() {}
