#[engine::sync_rules]
pub mod rules {
    use ui_tests::List;

    #[bucket(data(List::owner_id == bucket.owner_id))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: Option<String>,
    }
}

fn main() {}
