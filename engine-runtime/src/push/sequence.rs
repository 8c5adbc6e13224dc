//! What the checked path does with a mutation (`docs/design.md` §5, the table of the checked
//! path's decision): the client's sequence, read under its lock, against the mutation's id and
//! whether its `clientMutationId` was recorded. No I/O: every row of that table has a unit test.

/// The client's sequence, locked and read with what its records say of one mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sequence {
    /// The last mutation id applied.
    pub(crate) last: u64,
    /// Whether a mutation with this client mutation id was recorded.
    pub(crate) seen: bool,
    /// How far the client's records were collected.
    pub(crate) collected: CollectedRecords,
}

/// How far a client's records were collected (`Retention::mutations`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CollectedRecords {
    /// Every record up to this mutation id, as collection noted it (0: none).
    UpTo(u64),
    /// Not noted (a client from before collection noted it): the records before the first kept
    /// one (none: no record is).
    Before(Option<u64>),
}

/// What the checked path does with a mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A replay of a mutation whose record was collected: `duplicate`, without its outcome.
    CollectedDuplicate,
    /// Answer from the mutation's record: a replay.
    Replay,
    /// The same mutation again under the next id: answer from its record, move the record to
    /// the new id and advance the sequence.
    Renumber,
    /// The next mutation, never recorded: run the mutator.
    Apply,
    /// Refuse with `mutation_out_of_order`: the id is ahead of the sequence, or another
    /// mutation's (the client's store was copied or restored from a backup).
    OutOfOrder,
}

impl Sequence {
    /// The mutation id up to which the client's records were collected.
    pub(crate) fn collected_up_to(&self) -> u64 {
        match self.collected {
            CollectedRecords::UpTo(collected) => collected,
            CollectedRecords::Before(kept) => kept.map_or(self.last, |kept| kept.saturating_sub(1)),
        }
    }

    /// Whether mutation `id`, behind the sequence, is one whose record was collected.
    fn collected(&self, id: u64) -> bool {
        id <= self.last && id <= self.collected_up_to()
    }

    /// What to do with mutation `id`.
    pub(crate) fn decide(&self, id: u64) -> Decision {
        match (id, self.seen) {
            // Ids start at 1: no mutation was ever applied as 0, so none is confirmed as one.
            (0, _) => Decision::OutOfOrder,
            // Applied once, before the retention of mutation records (`docs/protocol.md#post-syncpush`).
            (id, false) if self.collected(id) => Decision::CollectedDuplicate,
            (id, false) if id <= self.last => Decision::OutOfOrder,
            (id, true) if id <= self.last => Decision::Replay,
            (id, _) if id > self.last + 1 => Decision::OutOfOrder,
            (_, true) => Decision::Renumber,
            (_, false) => Decision::Apply,
        }
    }
}

/// Whether the push takes the next path for mutation `id`: it is next as far as the push knows
/// (the push has not read the sequence, or `id` follows the last it answered).
pub(crate) fn is_next(last_answered: Option<u64>, id: u64) -> bool {
    last_answered.is_none_or(|last| id == last + 1)
}

/// Whether a rejection of mutation `id` finds the sequence at `last` already at or past it: a
/// concurrent push of the client recorded it first, and the rejection answers as that did.
pub(crate) fn recorded_meanwhile(last: u64, id: u64) -> bool {
    last >= id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(last: u64, seen: bool, collected: CollectedRecords) -> Sequence {
        Sequence { last, seen, collected }
    }

    const NONE: CollectedRecords = CollectedRecords::UpTo(0);

    /// `docs/design.md` §5's table, row by row: (last, seen, collected, mutation id, decision).
    #[test]
    fn the_checked_path_decides_each_row_of_the_table() {
        use CollectedRecords::{Before, UpTo};
        use Decision::*;
        let rows = [
            // At or below the sequence, never recorded, at or below how far records were
            // collected: a replay from before the records' retention.
            (10, false, UpTo(8), 7, CollectedDuplicate),
            (10, false, UpTo(8), 8, CollectedDuplicate),
            (10, false, Before(Some(6)), 5, CollectedDuplicate),
            (10, false, Before(None), 10, CollectedDuplicate),
            // At or below, never recorded, kept: the id is another mutation's.
            (10, false, UpTo(8), 9, OutOfOrder),
            (10, false, NONE, 10, OutOfOrder),
            (10, false, Before(Some(6)), 6, OutOfOrder),
            // At or below, recorded: a replay.
            (10, true, NONE, 10, Replay),
            (10, true, UpTo(8), 3, Replay),
            // Next, recorded under another id: renumbered.
            (10, true, NONE, 11, Renumber),
            (10, true, UpTo(10), 11, Renumber),
            // Next, never recorded: applied.
            (10, false, NONE, 11, Apply),
            (0, false, NONE, 1, Apply),
            (10, false, UpTo(10), 11, Apply),
            // Ahead of the sequence.
            (10, false, NONE, 12, OutOfOrder),
            (10, true, NONE, 12, OutOfOrder),
            (0, false, NONE, 2, OutOfOrder),
            // No mutation has id 0, whatever the records say.
            (0, false, NONE, 0, OutOfOrder),
            (0, false, Before(None), 0, OutOfOrder),
            (10, false, UpTo(8), 0, OutOfOrder),
            (10, true, NONE, 0, OutOfOrder),
        ];
        for (last, seen, collected, id, decision) in rows {
            assert_eq!(
                sequence(last, seen, collected).decide(id),
                decision,
                "last {last}, seen {seen}, {collected:?}, mutation {id}"
            );
        }
    }

    #[test]
    fn collection_noted_or_read_from_the_first_kept_record() {
        assert_eq!(sequence(10, false, CollectedRecords::UpTo(4)).collected_up_to(), 4);
        assert_eq!(sequence(10, false, CollectedRecords::Before(Some(6))).collected_up_to(), 5);
        assert_eq!(sequence(10, false, CollectedRecords::Before(Some(0))).collected_up_to(), 0);
        assert_eq!(sequence(10, false, CollectedRecords::Before(None)).collected_up_to(), 10, "no record is kept");
    }

    #[test]
    fn the_next_path_is_for_the_mutation_after_the_last_answered() {
        assert!(is_next(None, 7), "the push has not read the sequence");
        assert!(is_next(Some(6), 7));
        assert!(!is_next(Some(6), 6), "a replay");
        assert!(!is_next(Some(6), 9), "a gap");
    }

    #[test]
    fn a_rejection_answers_as_a_concurrent_push_recorded() {
        assert!(recorded_meanwhile(7, 7));
        assert!(recorded_meanwhile(8, 7));
        assert!(!recorded_meanwhile(6, 7));
    }
}
