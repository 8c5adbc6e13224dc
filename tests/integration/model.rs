//! The notes model as the macros generate it: rows in their wire form, typed bucket keys, and
//! the app's checks.

use engine::{Bucket, CrdtText, ErrorCode, Table};
use example_notes::{List, ListMember, Note, rules};
use serde_json::json;

fn note() -> Note {
    Note {
        id: "n1".into(),
        owner_id: "alice".into(),
        list_id: "l1".into(),
        title: "milk".into(),
        done: false,
        position: 3,
        body: CrdtText::from_text("two litres"),
        image: None,
        deleted_at: None,
    }
}

#[test]
fn a_row_travels_as_its_sql_columns_and_comes_back() {
    let original = note();
    let row = serde_json::to_value(&original).unwrap();
    let object = row.as_object().unwrap();
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    let mut expected = vec!["body", "deleted_at", "done", "id", "image", "list_id", "owner_id", "position", "title"];
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    assert_eq!(row["deleted_at"], serde_json::Value::Null);
    assert!(row["body"].is_string(), "a CRDT column travels as base64");
    let back: Note = serde_json::from_value(row).unwrap();
    assert_eq!(back, original);
    assert_eq!(back.body.text().unwrap(), "two litres");
}

#[test]
fn a_bad_row_is_refused_with_the_column_named() {
    let mut row = serde_json::to_value(note()).unwrap();
    row["position"] = json!("third");
    let err = Note::from_row(row.as_object().unwrap().clone()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ValidationFailed);
    assert!(err.to_string().contains("notes.position"), "{err}");
    let missing = json!({"id": "l1", "owner_id": "a", "title": "t"});
    let err = List::from_row(missing.as_object().unwrap().clone()).unwrap_err();
    assert!(err.to_string().contains("lacks column `archived`"), "{err}");
    let nullable_absent =
        json!({"id": "n", "owner_id": "a", "list_id": "l", "title": "t", "done": true, "position": 1, "body": "AAA="});
    let parsed = Note::from_row(nullable_absent.as_object().unwrap().clone()).unwrap();
    assert_eq!(parsed.deleted_at, None);
}

#[test]
fn composite_keys_are_tuples_in_field_order() {
    let member = ListMember {
        list_id: "l1".into(),
        user_id: "bob".into(),
        owner_id: "alice".into(),
        role: "editor".into(),
        accepted: false,
        invited_by: "alice".into(),
        title: "t".into(),
    };
    assert_eq!(member.key(), ("l1".to_owned(), "bob".to_owned()));
    assert_eq!(
        serde_json::Value::Object(ListMember::key_row(&member.key())),
        json!({"list_id": "l1", "user_id": "bob"})
    );
}

#[test]
fn buckets_are_typed_keys_namespaced_by_rule() {
    assert_eq!(rules::Own { owner_id: "alice".into() }.key().as_str(), "own/alice");
    assert_eq!(rules::Shared { list_id: "alice".into() }.key().as_str(), "shared/alice");
    assert_ne!(rules::Own { owner_id: "x".into() }.key(), rules::Shared { list_id: "x".into() }.key());
}

#[test]
fn the_app_registers_everything_once() {
    let app = example_notes::app();
    let names: Vec<&str> = app.mutators().iter().map(|m| m.name()).collect();
    assert_eq!(
        names,
        [
            "create_list",
            "rename_list",
            "share_list",
            "accept_list",
            "unshare_list",
            "leave_list",
            "add_note",
            "update_note",
            "edit_note_body",
            "set_note_image",
            "move_note",
            "delete_note",
            "purge_note"
        ]
    );
    assert!(["lists", "list_members", "notes"].iter().all(|t| app.is_synced(t)));
    assert_eq!(app.sync_rules().rules.len(), 4);
}

#[test]
fn the_builder_refuses_what_the_macro_refuses_at_compile_time() {
    let err = engine::App::builder().table::<List>().table::<List>().build().unwrap_err();
    assert!(err.to_string().contains("two tables are named `lists`"), "{err}");
    let err = engine::App::builder()
        .mutator::<example_notes::mutators::add_note>()
        .mutator::<example_notes::mutators::add_note>()
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("two mutators are named `add_note`"), "{err}");
    let err = engine::App::builder().table::<List>().sync_rules(&rules::SYNC_RULES).build().unwrap_err();
    assert!(err.to_string().contains("selects from `list_members`"), "{err}");
}
