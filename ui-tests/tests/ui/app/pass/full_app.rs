use engine::{MutatorCtx, Outcome, Result};
use ui_tests::{List, ListMember, NoArgs, Note};

#[engine::sync_rules]
pub mod rules {
    use ui_tests::{List, Note};

    #[bucket(data(List::owner_id == bucket.owner_id, Note::owner_id == bucket.owner_id))]
    pub struct Own {
        #[param(actor.owner_id)]
        pub owner_id: String,
    }
}

mod mutators {
    use super::*;

    #[engine::mutator]
    pub async fn noop(_ctx: &mut MutatorCtx<'_>, _args: NoArgs) -> Result<Outcome> {
        Ok(Outcome::new())
    }
}

fn main() {
    let app = engine::app! {
        tables: [List, Note, ListMember],
        mutators: [mutators::noop],
        sync_rules: rules,
    };
    assert_eq!(app.tables().len(), 3);
    assert!(app.is_synced("notes"));
    assert!(!app.is_synced("list_members"), "no rule selects list_members: it is server-only");
    assert!(app.mutator("noop").is_some());
    assert_eq!(app.table("lists").unwrap().struct_name, "List");
}
