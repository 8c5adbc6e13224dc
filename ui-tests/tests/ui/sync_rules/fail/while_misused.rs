#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, ListMember::list_id == bucket.list_id),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }

    /// Names a bucket that does not exist.
    #[bucket(data(Note::owner_id == bucket.owner_id), while(Nowhere))]
    pub struct Lost {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }

    /// Has a membership of its own.
    #[bucket(
        membership(ListMember::owner_id == actor.owner_id),
        data(Note::list_id == bucket.list_id),
        while(Shared),
    )]
    pub struct Twice {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }

    /// Held through a bucket without a membership table, and leaves through itself.
    #[bucket(data(Note::owner_id == bucket.owner_id), while(Lost))]
    pub struct Chained {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }

    /// A parameter `Shared` does not have.
    #[bucket(
        data(Note::owner_id == bucket.owner_id && Note::list_id == bucket.list_id && Note::title == bucket.role),
        while(Shared),
        leave,
    )]
    pub struct Other {
        #[param(actor.owner_id)]
        pub owner_id: String,
        #[param(ListMember::list_id)]
        pub list_id: String,
        #[param(ListMember::role)]
        pub role: String,
    }
}

fn main() {}
