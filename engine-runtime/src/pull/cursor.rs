//! The pull cursor (`docs/design.md` §3, `docs/protocol.md#cursor`): the buckets the client holds,
//! in groups that share a position, with each group's last row and tombstone delivered. The
//! bucket set travels with the cursor, so the server never records what a client holds.
//!
//! The text form is `base64url(JSON).base64url(tag)`, the tag an HMAC-SHA256 (128 bits) of the
//! JSON and its user under the database's key. A long bucket list is named by the digest of a
//! stored set ([`SetDigest`]), less the buckets it leaves out when those are few, and a cursor
//! holds at most [`MAX_GROUPS`] groups.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use base64::Engine as _;
use engine_kernel::BucketKey;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The cursor format's version.
const VERSION: u8 = 3;

/// The most groups a cursor holds; more are merged at the earlier position.
pub(crate) const MAX_GROUPS: usize = 16;

/// A group's bucket list is written out in the cursor up to this many bytes of keys.
const MAX_LISTED: usize = 512;

/// A cursor, opened and with its bucket sets looked up.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Cursor {
    pub(crate) groups: Vec<Group>,
    /// The version of each rule whose buckets the cursor holds, when it was written: a rule
    /// whose version differs now selects other rows than the client has.
    pub(crate) rules: BTreeMap<String, String>,
}

/// Buckets that share a position.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Group {
    /// The buckets, sorted.
    pub(crate) buckets: Vec<BucketKey>,
    /// Every row of a transaction below this id was delivered.
    pub(crate) rows: u64,
    /// The last tombstone delivered.
    pub(crate) tombstones: TombstonePosition,
    /// The walk delivering the rows from `rows` on, when one is under way.
    pub(crate) walk: Option<Walk>,
    /// The newest membership (the transaction that last wrote the oldest row giving a bucket)
    /// its buckets were known to be held through when the group started: a bucket held through
    /// a newer one than this and the tombstone position was granted again since.
    pub(crate) granted: u64,
}

/// A walk through a group's rows of the transactions from the group's `rows` up to `to`:
/// selection by selection (a table and one of its rule's selections), bucket by bucket, and in a bucket in the change
/// stream's order. Each step is an ordered index range scan, so a page costs what it delivers
/// plus one probe per bucket it passes, however many rows lie elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Walk {
    /// Rows of transactions below this id are delivered by the walk; the ones after, by the next.
    #[serde(rename = "o")]
    pub(crate) to: u64,
    /// The selection under way: every selection before it was delivered. None: none yet.
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    pub(crate) selection: Option<WalkSelection>,
    /// In that selection, the last row delivered: every bucket before its bucket was delivered.
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub(crate) point: Option<WalkPoint>,
}

/// One selection of a table, walked as one: its table, its rule and its place in the rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct WalkSelection {
    #[serde(rename = "t")]
    pub(crate) table: String,
    #[serde(rename = "r")]
    pub(crate) rule: String,
    #[serde(rename = "s")]
    pub(crate) selection: usize,
}

/// The last row a walk delivered in a selection: its bucket, transaction id and primary key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WalkPoint {
    #[serde(rename = "b")]
    pub(crate) bucket: BucketKey,
    #[serde(rename = "x")]
    pub(crate) xid: u64,
    #[serde(rename = "k")]
    pub(crate) key: Vec<Value>,
}

/// A position in the tombstone stream: everything up to it was delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct TombstonePosition {
    /// Transaction id.
    #[serde(rename = "x")]
    pub(crate) xid: u64,
    /// Tombstone id (0: before every tombstone of that transaction).
    #[serde(rename = "i")]
    pub(crate) id: i64,
}

impl TombstonePosition {
    /// Before every tombstone of transaction `xid`.
    pub(crate) fn at(xid: u64) -> Self {
        TombstonePosition { xid, id: 0 }
    }
}

impl Group {
    /// A group of buckets the client has just started to hold: every row from the beginning,
    /// and tombstones from now on only (the client holds nothing older of these buckets).
    pub(crate) fn fresh(buckets: Vec<BucketKey>, horizon: u64) -> Self {
        Group { buckets, rows: 0, tombstones: TombstonePosition::at(horizon), walk: None, granted: 0 }
    }

    /// Whether the group has everything below `horizon`.
    pub(crate) fn is_caught_up(&self, horizon: u64) -> bool {
        self.walk.is_none() && self.rows >= horizon && self.tombstones >= TombstonePosition::at(horizon)
    }
}

/// Why a cursor could not be read.
#[derive(Debug)]
pub(crate) struct Undecodable;

/// The key that signs cursors: one per database, so every instance of a server accepts the
/// cursors of the others.
#[derive(Clone)]
pub(crate) struct CursorKey(Vec<u8>);

impl CursorKey {
    pub(crate) fn new(secret: &[u8]) -> Self {
        CursorKey(secret.to_vec())
    }

    /// The tag of `payload` written for `user`.
    fn tag(&self, user: &str, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(user.as_bytes());
        mac.update(&[0]);
        mac.update(payload);
        mac
    }
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

/// The name of a stored bucket set: the first 128 bits of the SHA-256 of its user and its keys,
/// in hex. The user is part of the name, so that each user's sets are its own: what one user
/// stores or loses to its bound never touches another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct SetDigest(String);

impl SetDigest {
    /// The digest of `user`'s set `buckets` (sorted).
    pub(crate) fn of(user: &str, buckets: &[BucketKey]) -> Self {
        let mut hash = Sha256::new();
        hash.update(user.as_bytes());
        hash.update(b"\0");
        Self::digest(hash, buckets)
    }

    /// The digest of `buckets` as sets stored without a user were named (before sets were
    /// each user's own); cursors naming them still open.
    pub(crate) fn shared(buckets: &[BucketKey]) -> Self {
        Self::digest(Sha256::new(), buckets)
    }

    fn digest(mut hash: Sha256, buckets: &[BucketKey]) -> Self {
        for bucket in buckets {
            hash.update(bucket.as_str().as_bytes());
            hash.update(b"\n");
        }
        let digest = hash.finalize();
        SetDigest(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
    }

    /// A digest as the database holds it.
    pub(crate) fn from_stored(text: String) -> Self {
        SetDigest(text)
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    fn is_well_formed(&self) -> bool {
        self.0.len() == 32 && self.0.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }
}

/// A cursor's JSON.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    v: u8,
    g: Vec<WrittenGroup>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    r: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WrittenGroup {
    /// The buckets, written out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    b: Option<Vec<BucketKey>>,
    /// Or the digest of their stored set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<SetDigest>,
    /// With `s`: the buckets of the stored set the group leaves out (a subset pull's parked
    /// group, a group that lost buckets), written out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    x: Option<Vec<BucketKey>>,
    r: u64,
    t: TombstonePosition,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    w: Option<Walk>,
    #[serde(default, skip_serializing_if = "is_zero")]
    m: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A cursor whose tag checked out, before the bucket sets it names are looked up.
#[derive(Debug)]
pub(crate) struct Opened(Written);

impl Opened {
    /// The stored bucket sets the cursor names.
    pub(crate) fn stored_sets(&self) -> impl Iterator<Item = &SetDigest> {
        self.0.g.iter().filter_map(|g| g.s.as_ref())
    }

    /// The cursor, with each stored set from `lookup`; a set it does not find makes the cursor
    /// [`Undecodable`].
    pub(crate) fn resolve(
        self,
        mut lookup: impl FnMut(&SetDigest) -> Option<Vec<BucketKey>>,
    ) -> Result<Cursor, Undecodable> {
        let mut groups = Vec::with_capacity(self.0.g.len());
        for group in self.0.g {
            let buckets = match (group.b, group.s, group.x) {
                (Some(buckets), None, None) => buckets,
                (None, Some(digest), None) => lookup(&digest).ok_or(Undecodable)?,
                (None, Some(digest), Some(left_out)) => {
                    let set = lookup(&digest).ok_or(Undecodable)?;
                    let set_len = set.len();
                    let left_out: std::collections::BTreeSet<BucketKey> = left_out.into_iter().collect();
                    let buckets: Vec<BucketKey> = set.into_iter().filter(|b| !left_out.contains(b)).collect();
                    // Each bucket left out is one of the set's, and some are left in.
                    if buckets.is_empty() || buckets.len() + left_out.len() != set_len {
                        return Err(Undecodable);
                    }
                    buckets
                }
                _ => return Err(Undecodable),
            };
            groups.push(Group { buckets, rows: group.r, tombstones: group.t, walk: group.w, granted: group.m });
        }
        Ok(Cursor { groups, rules: self.0.r })
    }
}

impl Cursor {
    pub(crate) fn new(groups: Vec<Group>, rules: BTreeMap<String, String>) -> Self {
        Cursor { groups, rules }
    }

    /// Open the text form of a cursor written for `user` under `key`: anything else (another
    /// user's cursor, a changed one, garbage) is [`Undecodable`].
    pub(crate) fn open(text: &str, key: &CursorKey, user: &str) -> Result<Opened, Undecodable> {
        let (payload, tag) = text.split_once('.').ok_or(Undecodable)?;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let tag = engine.decode(tag).map_err(|_| Undecodable)?;
        if tag.len() != 16 {
            return Err(Undecodable);
        }
        key.tag(user, payload.as_bytes()).verify_truncated_left(&tag).map_err(|_| Undecodable)?;
        let json = engine.decode(payload).map_err(|_| Undecodable)?;
        let written: Written = serde_json::from_slice(&json).map_err(|_| Undecodable)?;
        let well_formed = written.g.iter().all(|g| {
            g.b.as_ref().is_none_or(|b| !b.is_empty())
                && g.s.as_ref().is_none_or(SetDigest::is_well_formed)
                && g.x.as_ref().is_none_or(|x| !x.is_empty() && x.len() <= MAX_LISTED)
                && g.t.id >= 0
                && g.w
                    .as_ref()
                    .and_then(|w| w.point.as_ref())
                    .is_none_or(|p| p.key.iter().all(|v| !v.is_array() && !v.is_object()))
        });
        if written.v != VERSION || !well_formed || written.g.len() > MAX_GROUPS {
            return Err(Undecodable);
        }
        Ok(Opened(written))
    }

    /// The text form of the cursor for `user` under `key`, with the sets it names by digest.
    ///
    /// A group whose buckets are too many to write out is named by a set of `known` (the sets
    /// the pull's own cursor named) when it is one, or one of them less a few buckets: so a
    /// group a pull did not change, or parked, or took buckets out of, stores nothing. Only a
    /// group that is none of these is a new set, to be stored before the cursor is handed out.
    pub(crate) fn seal(&self, key: &CursorKey, user: &str, known: &HashMap<SetDigest, Arc<Vec<BucketKey>>>) -> Sealed {
        let mut named = Vec::new();
        let mut new = Vec::new();
        let groups = self
            .groups
            .iter()
            .map(|group| {
                let (r, t, w, m) = (group.rows, group.tombstones, group.walk.clone(), group.granted);
                if listed(&group.buckets) <= MAX_LISTED {
                    return WrittenGroup { b: Some(group.buckets.clone()), s: None, x: None, r, t, w, m };
                }
                let digest = SetDigest::of(user, &group.buckets);
                if known.contains_key(&digest) {
                    named.push(digest.clone());
                    return WrittenGroup { b: None, s: Some(digest), x: None, r, t, w, m };
                }
                let base = known
                    .iter()
                    .filter_map(|(digest, set)| Some((digest, left_out(set, &group.buckets)?)))
                    .min_by_key(|(digest, out)| (listed(out), (*digest).clone()));
                if let Some((digest, out)) = base {
                    named.push(digest.clone());
                    return WrittenGroup { b: None, s: Some(digest.clone()), x: Some(out), r, t, w, m };
                }
                named.push(digest.clone());
                new.push((digest.clone(), group.buckets.clone()));
                WrittenGroup { b: None, s: Some(digest), x: None, r, t, w, m }
            })
            .collect();
        let json =
            serde_json::to_vec(&Written { v: VERSION, g: groups, r: self.rules.clone() }).expect("a cursor serializes");
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let payload = engine.encode(json);
        let tag = key.tag(user, payload.as_bytes()).finalize().into_bytes();
        named.sort();
        named.dedup();
        Sealed { text: format!("{payload}.{}", engine.encode(&tag[..16])), named, new }
    }

    /// Every bucket of the cursor.
    pub(crate) fn buckets(&self) -> impl Iterator<Item = &BucketKey> {
        self.groups.iter().flat_map(|g| g.buckets.iter())
    }
}

/// A sealed cursor.
#[derive(Debug)]
pub(crate) struct Sealed {
    /// The text form.
    pub(crate) text: String,
    /// Every stored set it names, the new ones included.
    pub(crate) named: Vec<SetDigest>,
    /// The sets it names that were not known: to be stored before the cursor is handed out.
    pub(crate) new: Vec<(SetDigest, Vec<BucketKey>)>,
}

/// The bytes `buckets` take written out in a cursor's JSON.
fn listed(buckets: &[BucketKey]) -> usize {
    buckets.iter().map(|b| b.as_str().len() + 3).sum()
}

/// The buckets of `set` that `group` leaves out, when `group` lies in `set` and they can be
/// written out (both sorted); `None` otherwise.
fn left_out(set: &[BucketKey], group: &[BucketKey]) -> Option<Vec<BucketKey>> {
    // Every left-out bucket is written out, in at least 4 bytes.
    if set.len() < group.len() || set.len() - group.len() > MAX_LISTED / 4 {
        return None;
    }
    let mut out = Vec::new();
    let mut rest = group.iter().peekable();
    for bucket in set {
        match rest.peek() {
            Some(&next) if next == bucket => {
                rest.next();
            }
            _ => out.push(bucket.clone()),
        }
    }
    (rest.next().is_none() && !out.is_empty() && listed(&out) <= MAX_LISTED).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_caught_up_when_both_streams_reached_the_horizon_and_no_walk_is_under_way() {
        let mut group = Group { rows: 12, ..Group::fresh(vec![BucketKey::new("own", &["a"])], 12) };
        assert!(group.is_caught_up(11) && group.is_caught_up(12) && !group.is_caught_up(13));
        group.tombstones = TombstonePosition { xid: 12, id: 3 };
        assert!(group.is_caught_up(12) && !group.is_caught_up(13));
        group.walk = Some(Walk { to: 12, selection: None, point: None });
        assert!(!group.is_caught_up(12));
        assert!(TombstonePosition { xid: 5, id: 7 } > TombstonePosition::at(5));
    }

    fn key() -> CursorKey {
        CursorKey::new(b"a key of the database")
    }

    fn open(text: &str, user: &str) -> Result<Cursor, Undecodable> {
        Cursor::open(text, &key(), user)?.resolve(|_| None)
    }

    #[test]
    fn round_trips_and_refuses_anything_else() {
        let cursor = Cursor::new(
            vec![Group::fresh(vec![BucketKey::new("own", &["a"])], 42)],
            BTreeMap::from([("own".into(), "v1".into())]),
        );
        let sealed = cursor.seal(&key(), "alice", &HashMap::new());
        let text = sealed.text;
        assert!(sealed.new.is_empty() && sealed.named.is_empty(), "a short bucket list is written out");
        assert_eq!(open(&text, "alice").unwrap(), cursor);
        assert!(open(&text, "bob").is_err(), "another user's cursor does not open");
        assert!(Cursor::open(&text, &CursorKey::new(b"another database"), "alice").is_err());
        for bad in ["", "!!!", "e30", "eyJ2IjoyLCJnIjpbXX0", "bnVsbA", "e30.AAAA", ".", "a.b.c"] {
            assert!(open(bad, "alice").is_err(), "{bad:?}");
        }
        // The payload changed under the same tag.
        let (payload, tag) = text.split_once('.').unwrap();
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let json = String::from_utf8(engine.decode(payload).unwrap()).unwrap().replace("\"x\":42", "\"x\":1");
        assert!(open(&format!("{}.{tag}", engine.encode(json)), "alice").is_err(), "a changed position");
    }

    #[test]
    fn a_long_bucket_list_is_stored_and_named_by_its_digest() {
        let buckets: Vec<BucketKey> =
            (0..10_000).map(|i| BucketKey::new("shared", &[format!("list-{i:05}")])).collect();
        let cursor = Cursor::new(vec![Group::fresh(buckets.clone(), 7)], BTreeMap::new());
        let sealed = cursor.seal(&key(), "alice", &HashMap::new());
        let text = sealed.text;
        assert!(text.len() < 1024, "{} bytes", text.len());
        let digest = SetDigest::of("alice", &buckets);
        assert_eq!(sealed.new, vec![(digest.clone(), buckets.clone())]);
        assert_eq!(sealed.named, vec![digest.clone()]);
        assert_ne!(digest, SetDigest::of("bob", &buckets), "a set is its user's");
        let opened = Cursor::open(&text, &key(), "alice").unwrap();
        assert_eq!(opened.stored_sets().collect::<Vec<_>>(), vec![&digest]);
        let resolved = opened.resolve(|d| (d == &digest).then(|| buckets.clone())).unwrap();
        assert_eq!(resolved, cursor);
        assert!(open(&text, "alice").is_err(), "a set that is not found makes no cursor");

        // Sealed again with the set known, it stores nothing.
        let known = HashMap::from([(digest.clone(), Arc::new(buckets.clone()))]);
        let again = cursor.seal(&key(), "alice", &known);
        assert!(again.new.is_empty());
        assert_eq!(again.named, vec![digest.clone()]);
    }

    #[test]
    fn a_group_that_leaves_a_few_buckets_of_a_known_set_out_names_that_set() {
        let buckets: Vec<BucketKey> = (0..100).map(|i| BucketKey::new("shared", &[format!("list-{i:05}")])).collect();
        let digest = SetDigest::of("alice", &buckets);
        let known = HashMap::from([(digest.clone(), Arc::new(buckets.clone()))]);
        // A subset pull of ten buckets: the rest is parked, the ten walked apart.
        let (asked, parked): (Vec<BucketKey>, Vec<BucketKey>) =
            buckets.iter().cloned().partition(|b| b.as_str().ends_with('7'));
        let cursor =
            Cursor::new(vec![Group::fresh(parked.clone(), 7), Group::fresh(asked.clone(), 9)], BTreeMap::new());
        let sealed = cursor.seal(&key(), "alice", &known);
        assert!(sealed.new.is_empty(), "nothing stored: {:?}", sealed.new);
        assert_eq!(sealed.named, vec![digest.clone()]);
        let resolved =
            Cursor::open(&sealed.text, &key(), "alice").unwrap().resolve(|d| (d == &digest).then(|| buckets.clone()));
        assert_eq!(resolved.unwrap(), cursor);

        // Too many left out to write: a new set.
        let half: Vec<BucketKey> = buckets[..50].to_vec();
        let sealed = Cursor::new(vec![Group::fresh(half.clone(), 7)], BTreeMap::new()).seal(&key(), "alice", &known);
        assert_eq!(sealed.new, vec![(SetDigest::of("alice", &half), half)]);
        // A bucket the known set lacks: a new set too.
        let mut more = buckets.clone();
        more.push(BucketKey::new("shared", &["zz"]));
        let sealed = Cursor::new(vec![Group::fresh(more.clone(), 7)], BTreeMap::new()).seal(&key(), "alice", &known);
        assert_eq!(sealed.new.len(), 1);
    }
}
