#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember};

    /// Accepted through a column of another table.
    #[bucket(
        membership(ListMember::owner_id == actor.owner_id),
        data(List::id == bucket.list_id),
        invite(List::archived),
    )]
    pub struct Owned {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }

    /// Invitations without a membership table.
    #[bucket(data(List::owner_id == bucket.owner_id), invite(ListMember::accepted))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
