//! Tables the ui cases name in their sync rules and mutators: a small copy of the notes model,
//! so each case is one mistake and nothing else.

/// A list.
#[engine::table]
#[derive(Debug)]
pub struct List {
    #[engine(primary_key)]
    pub id: String,
    #[engine(owner)]
    pub owner_id: String,
    pub title: String,
    pub archived: bool,
    pub rank: i64,
}

/// A membership of a list.
#[engine::table]
#[derive(Debug)]
pub struct ListMember {
    #[engine(primary_key)]
    pub list_id: String,
    #[engine(primary_key)]
    pub user_id: String,
    #[engine(owner)]
    pub owner_id: String,
    pub role: String,
    /// Whether the member accepted the membership (an invitation until then).
    pub accepted: bool,
}

/// A note in a list.
#[engine::table(merge = "field")]
#[derive(Debug)]
pub struct Note {
    #[engine(primary_key)]
    pub id: String,
    #[engine(owner)]
    pub owner_id: String,
    pub list_id: String,
    pub title: String,
    pub done: bool,
    pub body: engine::CrdtText,
    #[engine(soft_delete)]
    pub deleted_at: Option<engine::Timestamp>,
}

/// Arguments with nothing in them.
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}
