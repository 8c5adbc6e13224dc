use engine::Table;

type Id = String;
type When = engine::Timestamp;
mod ty {
    pub type Count = i64;
}

#[engine::table]
pub struct Event {
    #[engine(primary_key)]
    pub id: Id,
    pub count: ty::Count,
    pub at: Option<When>,
}

fn main() {
    assert_eq!(Event::META.columns[1].sql_type, engine::column::SqlType::BigInt);
    assert!(Event::META.columns[2].nullable);
}
