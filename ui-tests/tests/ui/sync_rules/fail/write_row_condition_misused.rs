#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, Note::list_id == bucket.list_id, ListMember::list_id == bucket.list_id),
        write(
            Note: row.title == 1.5 || row.title > "a",
        ),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }

    /// A claim bucket: row conditions only.
    #[bucket(data(Note::owner_id == bucket.owner_id), write(Note: row.done == false && ListMember::role == "owner"))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
