//! A notes client process for tests of durability across process exits: it opens a store, makes
//! mutations (the server may well be down), and exits without waiting for any of them to sync.
//!
//! Usage: `engine-test-client <server url> <store file> <token> <list id> <notes>` — creates the
//! list and adds that many notes to it, printing each note's id.

use engine::client::{BearerToken, Client, StoreLocation};
use example_notes::mutators::{AddNote, CreateList, add_note, create_list};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, store, token, list, notes] = args.as_slice() else {
        eprintln!("usage: engine-test-client <server url> <store file> <token> <list id> <notes>");
        std::process::exit(2);
    };
    let notes: usize = notes.parse().expect("a number of notes");
    let client = Client::builder(url)
        .app(example_notes::app())
        .auth(BearerToken::new(token))
        .store(StoreLocation::File(store.into()))
        .build()
        .await
        .expect("the client opens its store");
    client.mutate::<create_list>(CreateList { id: Some(list.clone()), title: "offline".into() }).await.expect("queued");
    for i in 0..notes {
        let queued = client
            .mutate::<add_note>(AddNote { id: None, list_id: list.clone(), title: format!("offline {i}") })
            .await
            .expect("queued");
        println!("{}", queued.outcome.server_id.expect("a note id"));
    }
    // Exit at once: what was queued must survive in the store.
    std::process::exit(0);
}
