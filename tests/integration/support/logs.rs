//! The server's log lines, captured in-process: a `tracing` subscriber that writes to memory,
//! the default of the test's thread while its guard lives (a `#[tokio::test]` runs the server's
//! tasks on that thread).

use std::sync::{Arc, Mutex, Once};

use tracing::subscriber::Interest;
use tracing::{Event, Id, Metadata, Subscriber, span};

/// What was logged while the guard of [`Logs::capture`] lived.
#[derive(Clone, Default)]
pub(crate) struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Capture the events of this thread at `info` and above until the guard is dropped.
    pub(crate) fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, scoped(subscriber))
    }

    /// Every line so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The lines that contain every one of `words`.
    pub(crate) fn lines_with(&self, words: &[&str]) -> Vec<String> {
        self.text().lines().filter(|line| words.iter().all(|w| line.contains(w))).map(str::to_owned).collect()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Make `subscriber` the default of this thread while the guard lives.
///
/// `tracing` caches per call site whether any subscriber wants it. A call site first reached on
/// another test's thread while this one installs its subscriber can be cached as wanted by
/// nobody, and its events would then never reach this subscriber. A global subscriber that wants
/// every call site "sometimes" (and records nothing) keeps each call site asking its thread's
/// subscriber on every event.
pub(crate) fn scoped(subscriber: impl Subscriber + Send + Sync + 'static) -> tracing::subscriber::DefaultGuard {
    keep_call_sites_asking();
    tracing::subscriber::set_default(subscriber)
}

/// Install the global subscriber of [`scoped`] once per test process; every test database calls
/// it, so it is in place before the servers' call sites are first reached.
pub(crate) fn keep_call_sites_asking() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another global subscriber (none is installed by these tests) would serve as well.
        let _ = tracing::subscriber::set_global_default(AskEveryTime);
    });
}

/// Wants every call site sometimes and no event: see [`scoped`].
struct AskEveryTime;

impl Subscriber for AskEveryTime {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
