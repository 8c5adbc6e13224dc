#[engine::table]
pub struct Reading {
    #[engine(primary_key)]
    pub value: f64,
}

fn main() {}
