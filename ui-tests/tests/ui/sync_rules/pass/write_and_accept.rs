use engine::rules::{Accept, ConstValue};

#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    /// The actor's own notes; a holder of a shared list may put one here.
    #[bucket(data(Note::owner_id == bucket.owner_id), accept(open(Shared)))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }

    /// Lists shared with the actor; owners and editors write notes, owners the list.
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, Note::list_id == bucket.list_id, ListMember::list_id == bucket.list_id),
        write(
            Note: ListMember::role == "owner" || (ListMember::role == "editor" && ListMember::owner_id == "x"),
            List: ListMember::role == "owner",
            ListMember,
        ),
        leave,
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {
    let rules = &rules::SYNC_RULES;
    let own = rules.rule("own").unwrap();
    assert_eq!(own.accepts, [Accept { rule: "shared", open: true }]);
    assert!(own.writes.is_empty() && !own.leave);
    let shared = rules.rule("shared").unwrap();
    let notes = shared.write_rule("notes").unwrap();
    assert_eq!(notes.any_of.len(), 2);
    assert_eq!(notes.any_of[1].member.len(), 2);
    assert_eq!(notes.any_of[0].member[0].column, "role");
    assert_eq!(notes.any_of[0].member[0].value, ConstValue::Text("owner"));
    assert!(notes.any_of.iter().all(|alternative| alternative.row.is_empty()));
    assert_eq!(shared.write_rule("lists").unwrap().any_of.len(), 1);
    let members = shared.write_rule("list_members").unwrap();
    assert!(members.is_unconditional() && !notes.is_unconditional());
    assert!(shared.leave);
}
