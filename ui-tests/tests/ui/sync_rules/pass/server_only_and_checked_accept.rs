//! A membership table only server code writes, and a bucket that accepts rows from teammates of
//! its own actor.

#[engine::sync_rules(server_only(ListMember))]
pub mod rules {
    use ui_tests::{ListMember, Note};

    /// The lists the actor is a member of, by memberships server code writes.
    #[bucket(membership(ListMember::user_id == actor.user_id), data(Note::list_id == bucket.list_id), write(Note))]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }

    /// Notes assigned to the actor by a member of a list the actor is in too.
    #[bucket(data(Note::title == bucket.user_id), accept(Shared))]
    pub struct Assigned {
        #[param(actor.user_id)]
        pub user_id: String,
    }
}

fn main() {
    let rules = &rules::SYNC_RULES;
    assert_eq!(rules.server_only, ["list_members"]);
    assert!(rules.is_server_only("list_members"));
    let assigned = rules.rule("assigned").unwrap();
    assert!(!assigned.accepts[0].open);
    assert!(assigned.writes.is_empty(), "read-only: nothing is writable that no `write(...)` names");
}
