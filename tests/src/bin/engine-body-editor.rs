//! A Rust client of the notes app that edits a note's collaborative body, for the tests that
//! check the TypeScript client's CRDT helpers against the Rust client's (`yjs` and `yrs`).
//!
//! Usage: `engine-body-editor <server url> <token> <note id> [<at> <text>]` — pulls, inserts
//! `text` at character `at` of the note's body when given, syncs, and prints the body's text.

use engine::client::{BearerToken, Client, StoreLocation};
use example_notes::Note;
use example_notes::mutators::{EditNoteBody, edit_note_body};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, token, id, edit) = match args.as_slice() {
        [url, token, id] => (url, token, id, None),
        [url, token, id, at, text] => (url, token, id, Some((at.parse::<u32>().expect("a position"), text))),
        _ => {
            eprintln!("usage: engine-body-editor <server url> <token> <note id> [<at> <text>]");
            std::process::exit(2);
        }
    };
    let client = Client::builder(url)
        .app(example_notes::app())
        .auth(BearerToken::new(token))
        .store(StoreLocation::Memory)
        .background(false)
        .build()
        .await
        .expect("the client builds");
    client.pull().await.expect("a pull");
    let note = client.get::<Note>(id).await.expect("the store").expect("the note");
    if let Some((at, text)) = edit {
        let update = note.body.clone().insert(at, text).expect("an edit");
        client.mutate::<edit_note_body>(EditNoteBody { id: id.clone(), update }).await.expect("queued");
        client.sync().await.expect("a sync");
        assert_eq!(client.status().pending, 0, "the edit reached the server");
    }
    let note = client.get::<Note>(id).await.expect("the store").expect("the note");
    println!("{}", note.body.text().expect("the body's text"));
}
