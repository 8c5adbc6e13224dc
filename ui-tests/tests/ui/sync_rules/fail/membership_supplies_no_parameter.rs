#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember};
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::owner_id == bucket.owner_id),
    )]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }

    /// The memberships of the actor's lists, so the membership table is selected.
    #[bucket(data(ListMember::owner_id == bucket.owner_id))]
    pub struct OwnedMembers {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
