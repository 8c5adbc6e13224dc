#[engine::args]
pub fn args() {}

fn main() {}
