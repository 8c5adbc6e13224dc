use engine::rules::{Claim, Membership, ParamSource};
use engine::Bucket;

#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, ListMember};

    /// Lists of the actor's organisation, ranked.
    #[bucket(name = "org_rank", data(List::owner_id == bucket.org && List::rank == bucket.rank && List::archived == false))]
    pub struct OrgRank {
        #[param(actor.claims.org)]
        pub org: String,
        #[param(actor.claims.rank)]
        pub rank: i64,
    }

    /// Lists of the teams the actor belongs to, and those shared with it.
    #[bucket(
        membership(raw(
            "SELECT list_id FROM team_lists JOIN team_members USING (team_id) WHERE team_members.user_id = $user_id AND org = $claims.org UNION SELECT list_id FROM list_members WHERE user_id = $user_id",
            reads(ListMember),
        )),
        data(List::id == bucket.list_id),
    )]
    pub struct TeamList {
        #[param(membership.list_id)]
        pub list_id: String,
    }
}

fn main() {
    let rule = rules::SYNC_RULES.rule("org_rank").unwrap();
    assert_eq!(rule.parameters[1].source, ParamSource::Claim(Claim::Custom("rank")));
    assert_eq!(rule.data[0].scope.len(), 2);
    assert_eq!(rule.data[0].filters.len(), 1);
    assert!(matches!(
        rules::SYNC_RULES.rule("team_list").unwrap().membership,
        Some(Membership::Raw { reads: ["list_members"], .. })
    ));
    assert_eq!(rules::SYNC_RULES.raw_reader("list_members").map(|rule| rule.name), Some("team_list"));
    let key = rules::OrgRank { org: "acme".into(), rank: -3 }.key();
    assert_eq!(key.as_str(), "org_rank/acme/-3");
}
