//! The notes app's Rust client, as the README shows it: a durable local copy of the actor's
//! lists and notes that shows a write at once and confirms it with the server.

use engine::client::{BearerToken, Client, Result, Status, StoreLocation};
use example_notes::mutators::{AddNote, CreateList, add_note, create_list};
use example_notes::{List, Note};

/// The list the example writes to.
pub const GROCERIES: &str = "groceries";

/// What a session saw of the groceries list.
#[derive(Debug)]
pub struct Groceries {
    /// The notes as the local store showed them right after the write, before the server had
    /// it.
    pub shown_at_once: Vec<Note>,
    /// The notes once the server confirmed the write.
    pub confirmed: Vec<Note>,
    /// The client's status at the end.
    pub status: Status,
}

/// Add a note titled `title` to the groceries list (creating the list when the actor has none)
/// through the notes server at `server_url`, as the actor of `token`, keeping the local copy in
/// `store`.
pub async fn add_to_groceries(server_url: &str, token: String, store: StoreLocation, title: &str) -> Result<Groceries> {
    let client = Client::builder(server_url)
        .app(example_notes::app())
        .auth(BearerToken::new(token)) // asked afresh on every request and reconnection
        .store(store)
        .build()
        .await?;
    // What the server holds already: the list, if an earlier session made it.
    client.pull().await?;
    if client.collection::<List>().get(&GROCERIES.to_owned()).await?.is_none() {
        let list = CreateList { id: Some(GROCERIES.into()), title: "Groceries".into() };
        client.mutate::<create_list>(list).await?;
    }
    let note = AddNote { id: None, list_id: GROCERIES.into(), title: title.into() };
    client.mutate::<add_note>(note).await?;
    // At once, then each time these rows differ: the note shows before the server has it.
    let mut groceries = client.collection::<Note>().live(Note::list_id.eq(GROCERIES));
    let shown_at_once = groceries.next().await?;
    client.sync().await?;
    let confirmed = client.collection::<Note>().filter(Note::list_id.eq(GROCERIES)).await?;
    let status = client.status();
    client.close();
    Ok(Groceries { shown_at_once, confirmed, status })
}
