#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember};

    /// Lists shared with the actor, by raw SQL naming something that is no table.
    #[bucket(
        membership(raw("SELECT list_id FROM list_members WHERE user_id = $user_id", reads(ListMember, String))),
        data(List::id == bucket.list_id),
    )]
    pub struct Shared {
        #[param(membership.list_id)]
        pub list_id: String,
    }
}

fn main() {}
