//! Memberships that are invitations until their member accepts them, and the bucket the
//! invitee reads its pending invitations in.

#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember, Note};

    /// The actor's own memberships, accepted or not: where an invitation shows.
    #[bucket(data(ListMember::user_id == bucket.user_id), accept(open(Shared)))]
    pub struct Invitations {
        #[param(actor.user_id)]
        pub user_id: String,
    }

    #[bucket(
        membership(ListMember::user_id == actor.user_id),
        data(List::id == bucket.list_id, ListMember::list_id == bucket.list_id),
        write(ListMember: ListMember::role == "owner"),
        leave,
        invite(ListMember::accepted),
    )]
    pub struct Shared {
        #[param(ListMember::list_id)]
        pub list_id: String,
    }

    /// Held while `Shared` is: through accepted memberships only.
    #[bucket(data(Note::list_id == bucket.list_id && Note::owner_id == bucket.owner_id), while(Shared))]
    pub struct Mine {
        #[param(actor.owner_id)]
        pub owner_id: String,
        #[param(ListMember::list_id)]
        pub list_id: String,
    }
}

fn main() {
    let shared = rules::SYNC_RULES.rules.iter().find(|rule| rule.name == "shared").unwrap();
    assert_eq!(shared.invite, Some("accepted"));
    let mine = rules::SYNC_RULES.rules.iter().find(|rule| rule.name == "mine").unwrap();
    assert_eq!(mine.invite, Some("accepted"), "held through accepted memberships only");
}
