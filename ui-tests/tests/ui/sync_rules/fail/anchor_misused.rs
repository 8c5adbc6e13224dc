#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    /// An anchor on a bucket without a membership table.
    #[bucket(data(Note::owner_id == bucket.owner_id), anchor(List::owner_id == bucket.owner_id))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }

    /// Anchors that name no one row of a selected table.
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(Note::list_id == bucket.list_id && Note::owner_id == bucket.owner_id, ListMember::list_id == bucket.list_id && ListMember::owner_id == bucket.owner_id),
        anchor(List::id == bucket.list_id && Note::title == "x"),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
        #[param(ListMember::owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
