use engine::rules::{ConstValue, FilterValue, RowTerm};

#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    /// Lists shared with the actor: owners write memberships; editors too, but never an owner's.
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, Note::list_id == bucket.list_id, ListMember::list_id == bucket.list_id),
        write(
            ListMember: ListMember::role == "owner" || (ListMember::role == "editor" && row.role != "owner"),
            Note: row.done == false,
        ),
        leave,
        anchor(List::id == bucket.list_id),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }

    /// The actor's notes in the lists shared with it, for as long as they are.
    #[bucket(
        data(Note::owner_id == bucket.user_id && Note::list_id == bucket.list_id),
        write(Note: "archived" != row.title),
        accept(Shared),
        while(Shared),
    )]
    pub struct Mine {
        #[param(actor.user_id)]
        pub user_id: String,
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {
    let rules = &rules::SYNC_RULES;
    let shared = rules.rule("shared").unwrap();
    let members = shared.write_rule("list_members").unwrap();
    assert_eq!(members.any_of.len(), 2);
    assert!(members.any_of[0].row.is_empty());
    assert_eq!(members.any_of[1].member.len(), 1);
    assert_eq!(members.any_of[1].row, [RowTerm { column: "role", value: FilterValue::Const(ConstValue::Text("owner")), equal: false }]);
    assert!(members.reads_rows() && !members.is_unconditional());
    let notes = shared.write_rule("notes").unwrap();
    assert!(notes.any_of[0].member.is_empty());
    assert_eq!(notes.any_of[0].row, [RowTerm { column: "done", value: FilterValue::Const(ConstValue::Bool(false)), equal: true }]);
    assert_eq!(shared.held_while, None);
    let anchor = shared.anchor.unwrap();
    assert_eq!((anchor.table, anchor.scope[0].column, anchor.scope[0].param), ("lists", "id", "list_id"));

    let mine = rules.rule("mine").unwrap();
    assert_eq!(mine.held_while, Some("shared"));
    assert!(mine.anchor.is_none());
    assert!(matches!(mine.membership, Some(engine::rules::Membership::Table { table: "list_members", .. })));
    assert_eq!(mine.write_rule("notes").unwrap().any_of[0].row[0].describe(), "row.title != \"archived\"");
}
