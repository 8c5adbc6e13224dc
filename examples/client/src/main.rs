//! `TOKEN=$(cargo run -q -p example-notes -- token --user alice) cargo run -p example-client` adds a note to alice's groceries list on the notes server.
//!
//! Start the server first (`cargo run -p example-notes`). The client keeps its copy in
//! `notes.db`, so a second run starts from what the first one pulled.
//!
//! Environment: `TOKEN` (required), `SERVER_URL` (default `http://127.0.0.1:8787`), `STORE` (the
//! SQLite file, default `notes.db`), `TITLE` (the note's title, default `Oat milk`).

use engine::client::StoreLocation;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let Ok(token) = std::env::var("TOKEN") else {
        eprintln!("example-client: set TOKEN, e.g. TOKEN=$(cargo run -q -p example-notes -- token --user alice)");
        return std::process::ExitCode::FAILURE;
    };
    let server_url = std::env::var("SERVER_URL").unwrap_or_else(|_| "http://127.0.0.1:8787".into());
    let store = StoreLocation::File(std::env::var("STORE").unwrap_or_else(|_| "notes.db".into()).into());
    let title = std::env::var("TITLE").unwrap_or_else(|_| "Oat milk".into());
    match example_client::add_to_groceries(&server_url, token, store, &title).await {
        Ok(groceries) => {
            println!("shown at once: {:?}", titles(&groceries.shown_at_once));
            println!("confirmed:     {:?}", titles(&groceries.confirmed));
            println!("{:?}", groceries.status); // connected, syncing, pending, quarantined, last error
            std::process::ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("example-client: {}", engine::error::chain(&err));
            std::process::ExitCode::FAILURE
        }
    }
}

fn titles(notes: &[example_notes::Note]) -> Vec<&str> {
    notes.iter().map(|note| note.title.as_str()).collect()
}
