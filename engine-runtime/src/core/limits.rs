//! The bounds on what one actor's requests may ask of a store (`docs/design.md` §14, store
//! bounds), each answered with an error that names it.

/// Bounds on what one actor's requests may ask of a store, each answered with an error that
/// names it (`docs/protocol.md` lists where).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreLimits {
    /// The most mutations one push holds (default 1,000): past it, the push is refused whole
    /// with `413 too_many_mutations`.
    pub mutations_per_push: usize,
    /// The most buckets synced for one actor (default 10,000): past it, a pull is refused with
    /// `413 payload_too_large`, which names both numbers.
    pub buckets_per_actor: usize,
    /// The most bytes of a primary-key value or of a value that becomes a bucket parameter
    /// (default 512): past it, the write is rejected `validation_failed`.
    pub key_bytes: usize,
    /// The most bytes of a row's JSON (default 1 MiB; see [`StoreLimits::table_row_bytes`]):
    /// past it, the write is rejected `validation_failed`.
    pub row_bytes: usize,
    /// The deepest nesting of a mutation's arguments (default 64): past it, the mutation is
    /// rejected `validation_failed`.
    pub args_depth: usize,
    /// The most row data a pull page carries, in bytes (default 4 MiB): a page that would carry
    /// more ends early with `hasMore`. A page always takes at least one entry.
    pub page_bytes: usize,
    /// Row bounds of single tables, in place of `row_bytes`.
    pub table_row_bytes: Vec<(String, usize)>,
    /// The most bytes of bucket keys an actor's stored bucket sets hold (default 16 MiB): past
    /// it, the sets its cursors named least recently are deleted, and a cursor naming one of
    /// them starts afresh (`reset`).
    pub bucket_set_bytes: usize,
    /// The most pending invitations (`invite(...)`, `docs/design.md` §4) one member has of one
    /// rule (default 100): past it, a write that invites the member once more is rejected
    /// `forbidden`, which says so, until it accepts or declines some.
    pub pending_invitations: usize,
    /// The most rows of one table a bucket keeps from one bucket of another rule whose rows
    /// its `accept(open(Other))` lets in (`docs/design.md` §4), counting those that lie in
    /// both (default 100: the messages of one outbox in one inbox): past it, a write that puts
    /// one more there from a writer that does not hold the bucket is rejected `forbidden`, which
    /// says so, until some are deleted. Neither the bucket's holders' own writes nor a checked
    /// `accept(Other)` are bounded, and a pending invitation to the bucket of `Other` is
    /// counted by [`pending_invitations`](StoreLimits::pending_invitations) instead.
    pub accepted_rows: usize,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            mutations_per_push: 1_000,
            buckets_per_actor: 10_000,
            key_bytes: 512,
            row_bytes: 1024 * 1024,
            args_depth: 64,
            page_bytes: 4 * 1024 * 1024,
            table_row_bytes: Vec::new(),
            bucket_set_bytes: 16 * 1024 * 1024,
            pending_invitations: 100,
            accepted_rows: 100,
        }
    }
}

impl StoreLimits {
    /// These limits with at most `n` mutations per push.
    #[must_use]
    pub fn mutations_per_push(mut self, n: usize) -> Self {
        self.mutations_per_push = n.max(1);
        self
    }

    /// These limits with at most `n` buckets synced per actor.
    #[must_use]
    pub fn buckets_per_actor(mut self, n: usize) -> Self {
        self.buckets_per_actor = n.max(1);
        self
    }

    /// These limits with keys and bucket parameters of at most `bytes`.
    #[must_use]
    pub fn key_bytes(mut self, bytes: usize) -> Self {
        self.key_bytes = bytes.max(1);
        self
    }

    /// These limits with rows of at most `bytes` of JSON, in tables without a bound of their own.
    #[must_use]
    pub fn row_bytes(mut self, bytes: usize) -> Self {
        self.row_bytes = bytes.max(1);
        self
    }

    /// These limits with rows of table `table` of at most `bytes` of JSON.
    #[must_use]
    pub fn table_row_bytes(mut self, table: impl Into<String>, bytes: usize) -> Self {
        let table = table.into();
        self.table_row_bytes.retain(|(t, _)| *t != table);
        self.table_row_bytes.push((table, bytes.max(1)));
        self
    }

    /// These limits with arguments nested at most `depth` deep.
    #[must_use]
    pub fn args_depth(mut self, depth: usize) -> Self {
        self.args_depth = depth.max(1);
        self
    }

    /// These limits with pull pages of at most `bytes` of row data.
    #[must_use]
    pub fn page_bytes(mut self, bytes: usize) -> Self {
        self.page_bytes = bytes.max(1);
        self
    }

    /// These limits with at most `bytes` of bucket keys in an actor's stored bucket sets.
    #[must_use]
    pub fn bucket_set_bytes(mut self, bytes: usize) -> Self {
        self.bucket_set_bytes = bytes.max(1);
        self
    }

    /// These limits with at most `n` pending invitations per member of one rule.
    #[must_use]
    pub fn pending_invitations(mut self, n: usize) -> Self {
        self.pending_invitations = n.max(1);
        self
    }

    /// These limits with at most `n` rows of one table in a bucket from one bucket that its
    /// `accept(open(...))` lets rows in from.
    #[must_use]
    pub fn accepted_rows(mut self, n: usize) -> Self {
        self.accepted_rows = n.max(1);
        self
    }

    /// The row bound of `table`.
    pub fn row_bytes_of(&self, table: &str) -> usize {
        self.table_row_bytes.iter().find(|(t, _)| t == table).map_or(self.row_bytes, |(_, bytes)| *bytes)
    }
}
