#[engine::sync_rules]
pub mod rules {
    pub struct Own {
        pub owner_id: String,
    }
}

fn main() {}
