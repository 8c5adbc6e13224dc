#[engine::table]
pub struct Tag<T> {
    #[engine(primary_key)]
    pub id: String,
    pub value: T,
}

fn main() {}
