//! Argument types that name neither `serde` nor `schemars`: the attribute derives both through
//! the engine, and serde's and schemars' field attributes still work.

use engine::{MutatorCtx, Outcome, Result};

/// Where a note goes.
#[engine::args]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    #[default]
    Top,
    Bottom,
}

/// Arguments of `place_note`.
#[engine::args]
#[derive(Debug, Clone, PartialEq)]
pub struct PlaceNote {
    pub id: String,
    /// Where to put it.
    #[serde(default)]
    pub placement: Placement,
    #[serde(rename = "listId")]
    #[schemars(length(min = 1))]
    pub list_id: String,
}

/// Move a note to the top or bottom of its list.
#[engine::mutator]
pub async fn place_note(_ctx: &mut MutatorCtx<'_>, args: PlaceNote) -> Result<Outcome> {
    Ok(Outcome::new().server_id(args.id))
}

fn main() {
    let app = engine::app! { tables: [], mutators: [place_note] };
    let contract = engine::contract(&app);
    let text = contract.to_string();
    assert!(text.contains("\"listId\""), "serde's rename reaches the schema: {text}");
    assert!(text.contains("Where to put it."), "doc comments reach the schema: {text}");

    let args: PlaceNote = engine::__private::serde_json::from_str(r#"{"id": "n1", "listId": "l1"}"#).unwrap();
    assert_eq!(args.placement, Placement::Top);
}
