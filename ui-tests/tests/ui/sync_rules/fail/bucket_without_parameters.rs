#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List};
    #[bucket(data(List::archived == false))]
    pub struct Everything {}
}

fn main() {}
