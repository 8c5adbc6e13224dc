#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    /// The actor's own notes.
    #[bucket(data(Note::owner_id == bucket.owner_id), write(Note))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }

    /// Notes sent to the actor: only `open(Own)` can say anyone may send one.
    #[bucket(data(Note::title == bucket.user_id), accept(Own))]
    pub struct Inbox {
        #[param(actor.user_id)]
        pub user_id: String,
    }

    /// Lists shared with the actor: held through memberships, so no one receiver to check.
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, ListMember::list_id == bucket.list_id),
        accept(Watched),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }

    /// Lists the actor watches: the owner's id does not say who the receiver of a shared list is.
    #[bucket(data(List::owner_id == bucket.owner_id), accept(Shared))]
    pub struct Watched {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
