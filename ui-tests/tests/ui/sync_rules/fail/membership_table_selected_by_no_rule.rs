#[engine::sync_rules]
pub mod rules {
    use ui_tests::{ListMember, Note};

    /// Nobody selects the memberships: who removed whom would be written unseen.
    #[bucket(membership(ListMember::user_id == actor.user_id), data(Note::list_id == bucket.list_id))]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {}
