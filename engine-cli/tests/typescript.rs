//! `engine gen` for the notes app: the TypeScript module committed in the TypeScript workspace
//! is what a fresh `engine gen examples/notes/contract.json` writes, byte for byte.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where the notes app's module is committed.
const NOTES_MODULE: &str = "clients/typescript/packages/notes/src/contract.gen.ts";

async fn generated() -> String {
    let contract = root().join("examples/notes/contract.json");
    let contract = engine_cli::load_contract(contract.to_str().expect("a UTF-8 path")).await.expect("the contract");
    engine_cli::typescript(&contract).expect("TypeScript for the notes contract")
}

#[tokio::test]
async fn the_committed_notes_module_is_what_gen_writes() {
    let fresh = generated().await;
    let path = root().join(NOTES_MODULE);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &fresh).expect("write the module");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        fresh == committed,
        "{NOTES_MODULE} is not what `engine gen examples/notes/contract.json` writes; run \
         `cargo run -p engine-cli -- gen examples/notes/contract.json --out {NOTES_MODULE}` \
         (or this test with UPDATE_SNAPSHOTS=1) and review the diff"
    );
}

#[tokio::test]
async fn the_module_is_the_same_every_time() {
    assert_eq!(generated().await, generated().await);
}

#[tokio::test]
async fn the_module_types_every_table_and_mutator_of_the_notes_app() {
    let module = generated().await;
    for declaration in [
        "export interface Note {",
        "export interface List {",
        "export interface ListMember {",
        "  deleted_at: string | null;",
        "  add_note: AddNoteArgs;",
        "export type PurgeNoteArgs = NoteId;",
        "export type ShareRole = \"editor\" | \"viewer\";",
        "  role: ShareRole;",
        "    addNote: (args: AddNoteArgs): R => client.mutate(\"add_note\", args),",
        "  shared: (params: BucketParams[\"shared\"]): string => bucketKey(\"shared\", [params.list_id]),",
        "export const protocolVersion = \"1\";",
    ] {
        assert!(module.contains(declaration), "the module lacks {declaration:?}:\n{module}");
    }
}

#[tokio::test]
async fn the_module_carries_what_the_client_evaluates_writes_with() {
    let module = generated().await;
    for declaration in [
        "  serverOnly: [],",
        "        filters: [{ claim: \"actor.user_id\", column: \"user_id\" }, { column: \"accepted\", value: true }],",
        "      invite: \"accepted\",",
        "        { filters: [], scope: [{ column: \"list_id\", param: \"list_id\" }], table: \"notes\" },",
        "          { member: [{ column: \"role\", value: \"editor\" }], row: [] },",
        "      write: { lists: [{ member: [], row: [] }] },",
        "      while: null,",
        "      leave: false,",
    ] {
        assert!(module.contains(declaration), "the module lacks {declaration:?}:\n{module}");
    }
}
