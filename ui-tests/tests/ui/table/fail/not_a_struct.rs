#[engine::table]
pub enum Status {
    Open,
    Closed,
}

fn main() {}
