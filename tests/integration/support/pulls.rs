//! Pulls straight from a store, page after page.

use engine::Actor;
use engine::server::Storage;
use engine::wire::{PullRequest, PullResponse};

/// Every page of `actor`'s pull as `client` from `cursor`, in pages of `limit`, until `hasMore`
/// is false.
pub(crate) async fn pull_pages(
    storage: &dyn Storage,
    actor: &Actor,
    client: uuid::Uuid,
    cursor: Option<String>,
    limit: u32,
) -> Vec<PullResponse> {
    let mut pages = Vec::new();
    let mut cursor = cursor;
    loop {
        let request =
            PullRequest { client_id: client, cursor, buckets: None, limit: Some(limit), ..Default::default() };
        let page = storage.pull(actor, &request).await.unwrap().response().unwrap();
        cursor = Some(page.cursor.clone());
        let more = page.has_more;
        pages.push(page);
        if !more {
            return pages;
        }
        assert!(pages.len() < 1000, "pagination does not end");
    }
}
