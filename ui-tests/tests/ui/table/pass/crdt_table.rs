use engine::{MergePolicy, Table};

/// A collaborative document: keys, owner and soft delete are bookkeeping, the rest is CRDT.
#[engine::table(merge = "crdt")]
pub struct Document {
    #[engine(primary_key)]
    pub id: String,
    #[engine(owner)]
    pub owner_id: String,
    pub body: engine::CrdtText,
    pub props: engine::CrdtMap,
    #[engine(soft_delete)]
    pub deleted_at: Option<engine::Timestamp>,
}

fn main() {
    assert_eq!(Document::META.name, "documents");
    assert_eq!(Document::META.merge, MergePolicy::Crdt);
    assert_eq!(Document::META.description, "A collaborative document: keys, owner and soft delete are bookkeeping, the rest is CRDT.");
}
