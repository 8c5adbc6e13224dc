#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, Note::list_id == bucket.list_id, ListMember::list_id == bucket.list_id),
        write(Note),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }

    /// Held through memberships of its own: the receiver cannot be checked.
    #[bucket(
        membership(ListMember::owner_id == actor.owner_id),
        data(Note::owner_id == bucket.owner_id && Note::list_id == bucket.list_id),
        accept(Shared),
    )]
    pub struct Mine {
        #[param(actor.owner_id)]
        pub owner_id: String,
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {}
