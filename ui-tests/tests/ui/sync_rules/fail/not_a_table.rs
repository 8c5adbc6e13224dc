pub struct Folder;

impl Folder {
    #[allow(non_upper_case_globals)]
    pub const owner_id: engine::Column<Folder, String> = engine::Column::new("folders", "owner_id");
}

#[engine::sync_rules]
pub mod rules {
    use super::Folder;

    #[bucket(data(Folder::owner_id == bucket.owner_id))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

fn main() {}
