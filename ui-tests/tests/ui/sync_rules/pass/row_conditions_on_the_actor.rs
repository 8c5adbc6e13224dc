use engine::rules::{Claim, FilterValue, RowTerm};

#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    /// Lists shared with the actor: members write their own notes; owners every membership but
    /// their own.
    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, Note::list_id == bucket.list_id, ListMember::list_id == bucket.list_id),
        write(
            Note: row.owner_id == actor.user_id,
            ListMember: ListMember::role == "owner" && actor.user_id != row.user_id,
            List: row.rank == actor.claims.rank,
        ),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {
    let shared = rules::SYNC_RULES.rule("shared").unwrap();
    let notes = shared.write_rule("notes").unwrap();
    assert_eq!(notes.any_of[0].row, [RowTerm { column: "owner_id", value: FilterValue::Claim(Claim::UserId), equal: true }]);
    assert!(notes.any_of[0].member.is_empty() && notes.reads_rows());
    let members = shared.write_rule("list_members").unwrap();
    assert_eq!(members.any_of[0].row[0].describe(), "row.user_id != actor.user_id");
    assert_eq!(members.any_of[0].member.len(), 1);
    assert_eq!(shared.write_rule("lists").unwrap().any_of[0].row[0].describe(), "row.rank == actor.claims.rank");
}
