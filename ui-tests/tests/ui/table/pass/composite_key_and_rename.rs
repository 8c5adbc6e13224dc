use engine::Table;

#[engine::table(name = "memberships")]
pub struct Membership {
    #[engine(primary_key)]
    pub team_id: i64,
    #[engine(primary_key, rename = "member")]
    pub user_id: String,
    pub r#type: String,
}

fn main() {
    let row = Membership { team_id: 7, user_id: "ann".into(), r#type: "admin".into() };
    assert_eq!(Membership::META.name, "memberships");
    assert_eq!(Membership::META.primary_key, ["team_id", "member"]);
    let key: (i64, String) = row.key();
    assert_eq!(key, (7, "ann".to_owned()));
    let json = serde_json::to_value(&row).unwrap();
    assert_eq!(json, serde_json::json!({"team_id": 7, "member": "ann", "type": "admin"}));
    let back: Membership = serde_json::from_value(json).unwrap();
    assert_eq!(back.user_id, "ann");
    assert_eq!(Membership::user_id.name(), "member");
}
