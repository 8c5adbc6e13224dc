//! Clients of the notes app for tests, and waiting for what they converge to.

use std::future::Future;
use std::time::Duration;

use engine::client::{BearerToken, Client, ClientBuilder, Reconnect, StoreLocation};

use super::TestServer;

/// A notes client of the server at `url` for `user`, syncing in the background with short
/// timings; `configure` may change the builder.
pub(crate) async fn notes_client(
    url: &str,
    user: &str,
    store: StoreLocation,
    configure: impl FnOnce(ClientBuilder) -> ClientBuilder,
) -> Client {
    let reconnect = Reconnect::default()
        .backoff(Duration::from_millis(50), Duration::from_millis(500))
        .stable_after(Duration::from_millis(500));
    let builder = Client::builder(url)
        .app(example_notes::app())
        .auth(BearerToken::new(TestServer::token(user)))
        .store(store)
        .pull_interval(Duration::from_secs(1))
        .reconnect(reconnect);
    configure(builder).build().await.expect("the client builds")
}

/// Wait until `check` holds, up to `within`; panics with `what` otherwise.
pub(crate) async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("not within {within:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
