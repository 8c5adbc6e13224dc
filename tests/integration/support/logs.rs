//! The server's log lines, captured in-process: a `tracing` subscriber that writes to memory,
//! the default of the test's thread while its guard lives (a `#[tokio::test]` runs the server's
//! tasks on that thread).

use std::sync::{Arc, Mutex};

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
        (logs, tracing::subscriber::set_default(subscriber))
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
