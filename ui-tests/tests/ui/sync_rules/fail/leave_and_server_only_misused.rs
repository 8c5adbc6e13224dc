#[engine::sync_rules(server_only(Note))]
pub mod rules {
    use ui_tests::{ListMember, Note};

    /// `leave` needs a membership to leave; a server-only table is not written by clients.
    #[bucket(data(Note::owner_id == bucket.owner_id, ListMember::owner_id == bucket.owner_id), write(Note), leave)]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
