#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, Note::list_id == bucket.list_id, ListMember::list_id == bucket.list_id),
        write(ListMember: ListMember::role == "owner" && row.user_id != actor.name),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {}
