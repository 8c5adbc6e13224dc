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
}

fn main() {}
