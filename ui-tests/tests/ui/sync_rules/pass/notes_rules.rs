use engine::rules::{Claim, Membership, ParamSource};
use engine::{Bucket, BucketKey};

#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    /// Everything the actor owns.
    #[bucket(data(
        List::owner_id == bucket.owner_id,
        bucket.owner_id == Note::owner_id,
        (ListMember::owner_id == bucket.owner_id),
    ))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }

    /// Lists shared with the actor as an editor.
    #[bucket(
        membership(ListMember::user_id == actor.user_id && ListMember::role == "editor"),
        data(List::id == bucket.list_id, Note::list_id == bucket.list_id && Note::done == false),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {
    let rules = &rules::SYNC_RULES;
    assert_eq!(rules.rules.len(), 2);
    assert_eq!(rules.tables(), ["lists", "notes", "list_members"]);
    let own = rules.rule("own").unwrap();
    assert_eq!(own.description, "Everything the actor owns.");
    assert_eq!(own.parameters[0].source, ParamSource::Claim(Claim::OwnerId));
    let shared = rules.rule("shared").unwrap();
    assert!(matches!(shared.membership, Some(Membership::Table { table: "list_members", filters }) if filters.len() == 2));
    assert_eq!(shared.data[1].filters.len(), 1);
    let key: BucketKey = rules::Shared { list_id: "a/b".into() }.into();
    assert_eq!(key.as_str(), "shared/a%2Fb");
    assert_eq!(<rules::Own as Bucket>::RULE, "own");
}
