//! `GET /sync/poll` (`docs/protocol.md#get-syncpoll`): the stream's pings and `buckets_changed`
//! for clients that cannot hold a WebSocket (a proxy that refuses the upgrade), one HTTP request
//! at a time.
//!
//! The hub records every signal it delivers in a [`Journal`] (a bounded ring shared by the
//! process), numbered in order. A poll names the position its previous answer ended at and gets
//! what the journal recorded from there on for the actor's buckets, waiting up to its `wait`
//! for something to come; a ping recorded between two polls is found by the second. A position
//! the journal no longer holds, or never gave (another process's, a forged one), is answered
//! with a reset: `buckets_changed` and the position now. A waiting poll holds its place among
//! the actor's polls and nothing else: no database session, no request permit.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use engine_kernel::wire::{PollAnswer, ServerFrame};
use engine_kernel::{Actor, BucketKey};
use tokio::sync::watch;
use tokio::time::Instant;

use super::StreamState;
use crate::error::Error;
use crate::limits::{BUSY_RETRY_AFTER, WorkPermit};

/// How long a poll waits when it names no `wait` (at most
/// [`StreamLimits::longest_poll`](crate::limits::StreamLimits::longest_poll)).
pub(crate) const DEFAULT_POLL_WAIT: Duration = Duration::from_secs(25);

/// How many signals the journal keeps: a poll whose position is older is reset.
pub(crate) const JOURNAL_LEN: usize = 4096;

/// A signal as the journal keeps it.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    /// A bucket's ping, released by the hub.
    Ping(BucketKey),
    /// A change of the memberships of actors with this claim (`*`: every actor).
    Membership(String),
    /// Signals were lost: every poll past this is reset.
    Resync,
}

/// The signals of one process, in the order the hub delivered them, and the polls waiting on
/// them.
pub(crate) struct Journal {
    /// Set at random when the process starts, so that no position of another process, or of an
    /// earlier run of this one, is taken for one of this journal.
    epoch: u64,
    recorded: Mutex<Recorded>,
    /// The number of the next entry: what waiting polls watch.
    head: watch::Sender<u64>,
    /// The polls waiting now, by user.
    polls: Mutex<HashMap<String, usize>>,
}

#[derive(Default)]
struct Recorded {
    /// The number of `entries[0]`.
    first: u64,
    entries: VecDeque<Entry>,
}

/// What the journal holds for one poll from a position on.
#[derive(Debug, PartialEq)]
enum Read {
    /// The frames, and the position after the last entry read.
    Frames(Vec<ServerFrame>, u64),
    /// The position is not one the journal can continue from.
    Reset,
}

/// A poll's place among its actor's, given back when dropped.
pub(crate) struct Place<'a> {
    journal: &'a Journal,
    user: String,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut polls = self.journal.polls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = polls.get_mut(&self.user) {
            *count -= 1;
            if *count == 0 {
                polls.remove(&self.user);
            }
        }
    }
}

impl Journal {
    pub(crate) fn new() -> Journal {
        Journal {
            epoch: uuid::Uuid::new_v4().as_u64_pair().0,
            recorded: Mutex::default(),
            head: watch::Sender::new(0),
            polls: Mutex::default(),
        }
    }

    fn recorded(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Record `entry`, forgetting the oldest past [`JOURNAL_LEN`], and wake the waiting polls.
    pub(crate) fn record(&self, entry: Entry) {
        let next = {
            let mut recorded = self.recorded();
            recorded.entries.push_back(entry);
            if recorded.entries.len() > JOURNAL_LEN {
                recorded.entries.pop_front();
                recorded.first += 1;
            }
            recorded.first + recorded.entries.len() as u64
        };
        self.head.send_replace(next);
    }

    /// The position of entry `number` of this journal, as the wire carries it.
    fn position(&self, number: u64) -> String {
        format!("{:016x}.{number}", self.epoch)
    }

    /// The entry number `position` names, when it is one this journal gave; whether it still
    /// holds what follows is for [`Journal::read`] to say.
    fn number(&self, position: &str) -> Option<u64> {
        let (epoch, number) = position.split_once('.')?;
        let epoch = u64::from_str_radix(epoch, 16).ok()?;
        (epoch == self.epoch).then_some(())?;
        number.parse().ok()
    }

    /// The frames for an actor holding `held` with membership `claims` in the entries from
    /// `from` on: a bucket's ping once, `buckets_changed` first when a membership of the actor
    /// changed. A position before the oldest entry kept, or past the newest, is a reset.
    fn read(&self, from: u64, held: &BTreeSet<BucketKey>, claims: &[String]) -> Read {
        let recorded = self.recorded();
        let end = recorded.first + recorded.entries.len() as u64;
        if from < recorded.first || from > end {
            return Read::Reset;
        }
        let mut changed = false;
        let mut pinged = BTreeSet::new();
        for entry in recorded.entries.iter().skip((from - recorded.first) as usize) {
            match entry {
                Entry::Ping(bucket) if held.contains(bucket) => {
                    pinged.insert(bucket.clone());
                }
                Entry::Ping(_) => {}
                Entry::Membership(claim) => changed |= claim == "*" || claims.contains(claim),
                Entry::Resync => return Read::Reset,
            }
        }
        let changed = changed.then_some(ServerFrame::BucketsChanged);
        let frames = changed.into_iter().chain(pinged.into_iter().map(|bucket| ServerFrame::Ping { bucket })).collect();
        Read::Frames(frames, end)
    }

    /// A place for a poll of `user`, refused when the user has `limit` polls waiting.
    fn admit(&self, user: &str, limit: usize) -> Result<Place<'_>, Error> {
        let mut polls = self.polls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = polls.entry(user.to_owned()).or_default();
        if *count >= limit {
            let detail = format!("an actor has at most {limit} polls waiting on one server instance");
            return Err(Error::Busy { detail, retry_after: BUSY_RETRY_AFTER });
        }
        *count += 1;
        Ok(Place { journal: self, user: user.to_owned() })
    }
}

/// One poll of `actor` from `position` (none on a client's first poll: a reset), waiting up to
/// `wait` (at most [`StreamLimits::longest_poll`](crate::limits::StreamLimits::longest_poll)) for a frame, and no longer than until `gone` resolves (the
/// client went away) or the server begins to drain. `work` is the request's permit, given back
/// once the actor's buckets are read.
pub(crate) async fn poll(
    state: &StreamState,
    actor: &Actor,
    position: Option<&str>,
    wait: Duration,
    work: Option<WorkPermit>,
    gone: impl Future<Output = ()>,
) -> Result<PollAnswer, Error> {
    let journal = &state.hub.journal;
    // Answered at once, a poll to a draining server would come straight back to it.
    if *state.draining.borrow() {
        let detail = "the server is restarting: poll again".into();
        return Err(Error::RetryLater { detail, retry_after: BUSY_RETRY_AFTER });
    }
    let _place = journal.admit(&actor.user_id, state.stream_limits.polls_per_actor)?;
    let mut head = journal.head.subscribe();
    // Taken before the buckets are read: a membership changed meanwhile is read as changed.
    let start = *head.borrow_and_update();
    let held = state.storage.held_buckets(actor).await?;
    drop(work);
    let claims = super::claims(actor);
    let reset = || PollAnswer { position: journal.position(start), frames: vec![ServerFrame::BucketsChanged] };
    let Some(mut from) = position.and_then(|position| journal.number(position)) else {
        return Ok(reset());
    };
    let deadline = Instant::now() + wait.min(state.stream_limits.longest_poll);
    let mut draining = state.draining.subscribe();
    let drain = async { draining.wait_for(|draining| *draining).await.map(drop) };
    tokio::pin!(gone, drain);
    loop {
        head.borrow_and_update();
        match journal.read(from, &held, &claims) {
            Read::Reset => return Ok(reset()),
            Read::Frames(frames, end) => {
                from = end;
                if !frames.is_empty() {
                    return Ok(PollAnswer { position: journal.position(from), frames });
                }
            }
        }
        tokio::select! {
            recorded = head.changed() => if recorded.is_err() { break },
            () = tokio::time::sleep_until(deadline) => break,
            _ = &mut drain => break,
            // Nobody reads the answer: only the place is given back.
            () = &mut gone => break,
        }
    }
    Ok(PollAnswer { position: journal.position(from), frames: Vec::new() })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use engine_kernel::BucketKey;
    use engine_kernel::wire::ServerFrame;

    use super::{Entry, JOURNAL_LEN, Journal, Read};

    fn bucket(name: &str) -> BucketKey {
        BucketKey::parse(&format!("own/{name}")).unwrap()
    }

    /// A poll reads the pings of the buckets its actor holds from its position on, each once,
    /// with `buckets_changed` first when a membership of its actor changed; nothing of others.
    #[test]
    fn a_poll_reads_its_actors_frames_from_its_position() {
        let journal = Journal::new();
        let held: BTreeSet<BucketKey> = [bucket("alice")].into();
        let claims = vec!["user_id=alice".to_owned()];
        journal.record(Entry::Ping(bucket("alice")));
        journal.record(Entry::Ping(bucket("bob")));
        journal.record(Entry::Ping(bucket("alice")));
        assert_eq!(
            journal.read(0, &held, &claims),
            Read::Frames(vec![ServerFrame::Ping { bucket: bucket("alice") }], 3)
        );
        assert_eq!(journal.read(3, &held, &claims), Read::Frames(vec![], 3));
        journal.record(Entry::Membership("user_id=bob".into()));
        assert_eq!(journal.read(3, &held, &claims), Read::Frames(vec![], 4), "bob's memberships are not alice's");
        journal.record(Entry::Ping(bucket("alice")));
        journal.record(Entry::Membership("user_id=alice".into()));
        assert_eq!(
            journal.read(4, &held, &claims),
            Read::Frames(vec![ServerFrame::BucketsChanged, ServerFrame::Ping { bucket: bucket("alice") }], 6)
        );
        journal.record(Entry::Membership("*".into()));
        assert_eq!(journal.read(6, &held, &claims), Read::Frames(vec![ServerFrame::BucketsChanged], 7));
        journal.record(Entry::Resync);
        assert_eq!(journal.read(6, &held, &claims), Read::Reset, "lost signals reset every poll before them");
    }

    /// A position the journal did not give (another epoch, a number past its end, not a
    /// position at all) or no longer holds is no position: the poll is reset.
    #[test]
    fn a_position_not_of_this_journal_or_forgotten_is_a_reset() {
        let (journal, other) = (Journal::new(), Journal::new());
        let (held, claims) = (BTreeSet::new(), Vec::new());
        journal.record(Entry::Ping(bucket("alice")));
        assert_eq!(journal.number(&journal.position(1)), Some(1));
        assert_eq!(journal.number(&other.position(1)), None);
        for forged in
            ["", ".", "1", "zz.1", &format!("{:016x}.-1", journal.epoch), &format!("{:016x}.x", journal.epoch)]
        {
            assert_eq!(journal.number(forged), None, "{forged:?}");
        }
        assert_eq!(journal.read(2, &held, &claims), Read::Reset, "past the end");
        for _ in 0..JOURNAL_LEN {
            journal.record(Entry::Ping(bucket("bob")));
        }
        assert_eq!(journal.read(0, &held, &claims), Read::Reset, "forgotten");
        assert!(matches!(journal.read(1, &held, &claims), Read::Frames(..)));
    }

    /// An actor's polls are bounded; a place is given back when its poll ends.
    #[test]
    fn an_actors_polls_are_bounded() {
        let journal = Journal::new();
        let first = journal.admit("alice", 2).unwrap();
        let _second = journal.admit("alice", 2).unwrap();
        assert!(journal.admit("alice", 2).is_err());
        assert!(journal.admit("bob", 2).is_ok(), "bob's polls are his own");
        drop(first);
        assert!(journal.admit("alice", 2).is_ok());
    }
}
