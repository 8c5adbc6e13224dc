pub struct Position {
    pub index: u32,
}

#[engine::args]
pub struct MoveNote {
    pub id: String,
    pub to: Position,
}

fn main() {}
