#[engine::table]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
    #[engine(soft_delete)]
    pub deleted_at: Option<engine::Timestamp>,
    #[engine(soft_delete)]
    pub archived_at: Option<engine::Timestamp>,
}

fn main() {}
