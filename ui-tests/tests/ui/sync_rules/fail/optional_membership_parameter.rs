#[engine::sync_rules]
pub mod rules {
    use ui_tests::{ListMember, Note};

    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(Note::list_id == bucket.list_id),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: Option<String>,
    }

    /// The memberships of the actor's lists, so the membership table is selected.
    #[bucket(data(ListMember::owner_id == bucket.owner_id))]
    pub struct OwnedMembers {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
