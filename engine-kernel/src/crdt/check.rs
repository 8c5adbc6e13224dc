//! What an update from outside must be before `yrs` sees it.
//!
//! `yrs` trusts its peers: it sizes collections from counts read off the input, and it follows
//! the ids an update's items point at without asking whether they exist or what they are. A
//! hostile update can make it allocate without bound, panic, or touch memory it has freed (a
//! fuzzer found all three in yrs 0.28). So an update passes two checks first:
//!
//! - [`check_update`], of its encoding alone: every declared count or length fits in the bytes
//!   that remain, values nest at most [`MAX_ANY_DEPTH`] deep, tags are known, clocks stay within
//!   yrs's 32 bits. It allocates nothing; it mirrors yrs 0.28's `Update::decode`.
//! - [`check_merge`], of its items against the document it is merged into: it holds only what
//!   the engine's collaborative columns write (text in the root text `text`, entries of the root
//!   map `map`, deletions), every item's neighbours exist in the document or in the update, each
//!   replica's items continue where the document has them, and deletions cover only items that
//!   exist. An honest replica never writes anything else.

use std::collections::BTreeMap;

use super::{MAP_ROOT, TEXT_ROOT};

/// How deeply `Any` values may nest in an update (yrs decodes them recursively).
pub(super) const MAX_ANY_DEPTH: usize = 64;

/// Which collaborative column a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Document {
    /// A [`CrdtText`](super::CrdtText): string items in the root text.
    Text,
    /// A [`CrdtMap`](super::CrdtMap): values keyed in the root map.
    Map,
}

/// A block's id: the replica (client) that wrote it and its clock.
type Id = (u64, u64);

/// Where an item without neighbours says it goes.
#[derive(Debug)]
enum Parent<'a> {
    /// The root type of this name.
    Root(&'a str),
    /// A nested type, by the id of the item that holds it.
    Item,
    /// Read off the item's neighbours.
    OfNeighbours,
}

#[derive(Debug)]
struct Item<'a> {
    origin: Option<Id>,
    right_origin: Option<Id>,
    parent: Parent<'a>,
    key: bool,
    content: u8,
}

/// One block of an update: an id range, and the item when it is one (not a GC or skip range).
#[derive(Debug)]
struct Block<'a> {
    client: u64,
    clock: u64,
    len: u64,
    item: Option<Item<'a>>,
}

#[derive(Debug, Default)]
struct Decoded<'a> {
    blocks: Vec<Block<'a>>,
    /// Where each replica's blocks begin in the update.
    starts: Vec<Id>,
    /// Deleted ranges: (client, clock, length).
    deletes: Vec<(u64, u64, u64)>,
}

/// yrs keeps clocks in 32 bits and adds block lengths to them unchecked.
const MAX_CLOCK: u64 = u32::MAX as u64;

/// Walk a yrs v1 update without allocating, refusing it when a declared count or length
/// exceeds the bytes that remain, a value nests too deeply, a tag is unknown, or a clock would
/// leave yrs's 32 bits.
///
/// yrs sizes collections from counts read off the input before reading their elements, so a
/// few bytes can declare billions of entries; and it decodes nested values recursively. Every
/// element takes at least one byte, so a count larger than what remains is a lie, and refusing it
/// bounds yrs's allocations by the input's size.
pub fn check_update(bytes: &[u8]) -> Result<(), String> {
    read(bytes, false).map(drop)
}

/// Check `update` against the document whose state is `state` (its v1 encoding, as stored),
/// as the module documentation says. `state` is the engine's own encoding and is trusted to be
/// well formed.
pub(super) fn check_merge(state: &[u8], update: &[u8], document: Document) -> Result<(), String> {
    let state = read(state, true)?;
    let update = read(update, true)?;
    if let Some(block) = update.blocks.iter().find(|b| b.item.is_none()) {
        // Garbage-collected ranges come only from items inside a deleted nested type, which
        // these documents do not have (a deleted item of a root stays an item); skipped ranges
        // only from merging updates together.
        return Err(format!("replica {}'s range at {} is collected or skipped", block.client, block.clock));
    }
    // The items of the document and the update, by replica: what an item may be placed beside.
    let mut items: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    // Everything the document has, by replica: what a deletion may cover.
    let mut known: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    let mut ends: BTreeMap<u64, u64> = BTreeMap::new();
    for block in &state.blocks {
        let end = ends.entry(block.client).or_default();
        *end = (*end).max(block.clock + block.len);
    }
    for block in state.blocks.iter().chain(&update.blocks) {
        let range = (block.clock, block.clock + block.len);
        known.entry(block.client).or_default().push(range);
        if block.item.is_some() {
            items.entry(block.client).or_default().push(range);
        }
    }
    let exists = |(client, clock): Id| {
        items.get(&client).is_some_and(|ranges| ranges.iter().any(|&(from, to)| from <= clock && clock < to))
    };
    for (i, &(client, _)) in update.starts.iter().enumerate() {
        if update.starts[..i].iter().any(|&(other, _)| other == client) {
            return Err(format!("replica {client}'s items come in more than one run"));
        }
    }
    for &(client, clock) in &update.starts {
        let end = ends.get(&client).copied().unwrap_or(0);
        if clock > end {
            return Err(format!("replica {client}'s items start at {clock}, past the {end} the document has"));
        }
    }
    let (root, content) = match document {
        Document::Text => (TEXT_ROOT, [1, 4]),
        Document::Map => (MAP_ROOT, [1, 8]),
    };
    for block in &update.blocks {
        let Some(item) = &block.item else { continue };
        let at = (block.client, block.clock);
        if block.len == 0 {
            return Err(format!("item {at:?} is empty"));
        }
        if !content.contains(&item.content) {
            return Err(format!(
                "item {at:?} holds content of kind {}, which a {root} document never has",
                item.content
            ));
        }
        match item.parent {
            Parent::Root(name) if name == root => {}
            Parent::Root(name) => {
                return Err(format!("item {at:?} names the root `{name}`; the document has `{root}`"));
            }
            Parent::Item => return Err(format!("item {at:?} is inside a nested type; the document has none")),
            Parent::OfNeighbours => {}
        }
        if !matches!(item.parent, Parent::OfNeighbours) && item.key != (document == Document::Map) {
            return Err(format!("item {at:?} {} a key", if item.key { "has" } else { "lacks" }));
        }
        for neighbour in [item.origin, item.right_origin].into_iter().flatten() {
            if !exists(neighbour) {
                return Err(format!("item {at:?} is placed beside {neighbour:?}, which does not exist"));
            }
            // A neighbour existed before the item: of the same replica, it has an earlier clock.
            if neighbour.0 == block.client && neighbour.1 >= block.clock {
                return Err(format!("item {at:?} is placed beside {neighbour:?}, which comes after it"));
            }
        }
    }
    if let Some(at) = circular(&update.blocks, &state.blocks) {
        return Err(format!("item {at:?} is placed beside items that are placed beside it"));
    }
    for &(client, clock, len) in &update.deletes {
        let covered = known.get(&client).is_some_and(|ranges| {
            // Ranges of one replica are contiguous runs; walk the deletion across them.
            let mut at = clock;
            while at < clock + len {
                match ranges.iter().filter(|&&(from, to)| from <= at && at < to).map(|&(_, to)| to).max() {
                    Some(to) => at = to,
                    None => return false,
                }
            }
            true
        });
        if !covered {
            return Err(format!(
                "the update deletes {len} of replica {client}'s items from {clock}, which do not all exist"
            ));
        }
    }
    Ok(())
}

/// An item of `blocks` that depends on itself: placed beside an item of the update that is (by
/// its neighbours or by coming later in its replica) placed beside it in turn. Neighbours in the
/// document (`state`) end a chain. Honest replicas write only items whose neighbours existed
/// before them, so their dependencies never go round.
fn circular(blocks: &[Block<'_>], state: &[Block<'_>]) -> Option<Id> {
    let in_state = |(client, clock): Id| {
        state.iter().any(|b| b.client == client && b.item.is_some() && b.clock <= clock && clock < b.clock + b.len)
    };
    let find = |(client, clock): Id| {
        blocks.iter().position(|b| b.client == client && b.clock <= clock && clock < b.clock + b.len)
    };
    // What each block waits for: its neighbours in the update, and the block before it in its
    // replica's run.
    let mut waits: Vec<Vec<usize>> = vec![Vec::new(); blocks.len()];
    for (i, block) in blocks.iter().enumerate() {
        if i > 0 && blocks[i - 1].client == block.client {
            waits[i].push(i - 1);
        }
        let Some(item) = &block.item else { continue };
        for neighbour in [item.origin, item.right_origin].into_iter().flatten() {
            if !in_state(neighbour)
                && let Some(j) = find(neighbour)
            {
                waits[i].push(j);
            }
        }
    }
    // Settle blocks whose waits are settled until nothing changes; what is left goes round.
    let mut settled = vec![false; blocks.len()];
    loop {
        let mut progressed = false;
        for i in 0..blocks.len() {
            if !settled[i] && waits[i].iter().all(|&j| settled[j]) {
                settled[i] = true;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    settled.iter().position(|s| !s).map(|i| (blocks[i].client, blocks[i].clock))
}

fn read(bytes: &[u8], keep: bool) -> Result<Decoded<'_>, String> {
    let mut walk = Walk { bytes, at: 0 };
    let mut decoded = Decoded::default();
    let clients = walk.count()?;
    for _ in 0..clients {
        let blocks = walk.count()?;
        let client = walk.var()?;
        let mut clock = walk.var()?;
        if keep {
            decoded.starts.push((client, clock));
        }
        for _ in 0..blocks {
            let (len, item) = walk.block()?;
            let end = clock.checked_add(len).filter(|&end| end <= MAX_CLOCK);
            let Some(end) = end else { return Err(format!("replica {client}'s clock passes {MAX_CLOCK}")) };
            if keep {
                decoded.blocks.push(Block { client, clock, len, item });
            }
            clock = end;
        }
    }
    // The delete set: per client, ranges of (clock, length).
    let clients = walk.count()?;
    for _ in 0..clients {
        let client = walk.var()?;
        let ranges = walk.count()?;
        for _ in 0..ranges {
            let clock = walk.var()?;
            let len = walk.var()?;
            if clock.checked_add(len).is_none_or(|end| end > MAX_CLOCK) {
                return Err(format!("a deletion of replica {client} passes clock {MAX_CLOCK}"));
            }
            if keep {
                decoded.deletes.push((client, clock, len));
            }
        }
    }
    Ok(decoded)
}

struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Walk<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.at).ok_or("ends early")?;
        self.at += 1;
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<(), String> {
        if n > self.remaining() {
            return Err(format!("declares {n} bytes where {} remain", self.remaining()));
        }
        self.at += n;
        Ok(())
    }

    /// A variable-length integer (7 bits a byte, at most 10 bytes).
    fn var(&mut self) -> Result<u64, String> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f).checked_shl(7 * i).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a variable-length integer runs over 10 bytes".into())
    }

    /// A count of elements that each take at least one byte.
    fn count(&mut self) -> Result<usize, String> {
        let n = self.var()?;
        match usize::try_from(n) {
            Ok(n) if n <= self.remaining() => Ok(n),
            _ => Err(format!("declares {n} elements where {} bytes remain", self.remaining())),
        }
    }

    fn buf(&mut self) -> Result<(), String> {
        let len = self.var()?;
        self.skip(usize::try_from(len).map_err(|_| "length out of range")?)
    }

    fn string(&mut self) -> Result<&'a str, String> {
        let len = usize::try_from(self.var()?).map_err(|_| "length out of range")?;
        let start = self.at;
        self.skip(len)?;
        std::str::from_utf8(&self.bytes[start..self.at]).map_err(|_| "a string is not UTF-8".into())
    }

    fn id(&mut self) -> Result<Id, String> {
        Ok((self.var()?, self.var()?))
    }

    /// One block: its length in clock ticks, and the item when it is one.
    fn block(&mut self) -> Result<(u64, Option<Item<'a>>), String> {
        const HAS_ORIGIN: u8 = 0b1000_0000;
        const HAS_RIGHT_ORIGIN: u8 = 0b0100_0000;
        const HAS_PARENT_SUB: u8 = 0b0010_0000;
        let info = self.byte()?;
        if let 0 | 10 = info {
            // GC and skip blocks: a length only.
            return Ok((self.var()?, None));
        }
        let origin = if info & HAS_ORIGIN != 0 { Some(self.id()?) } else { None };
        let right_origin = if info & HAS_RIGHT_ORIGIN != 0 { Some(self.id()?) } else { None };
        let mut parent = Parent::OfNeighbours;
        let mut key = false;
        if info & (HAS_ORIGIN | HAS_RIGHT_ORIGIN) == 0 {
            parent = if self.var()? == 1 {
                Parent::Root(self.string()?)
            } else {
                self.id()?;
                Parent::Item
            };
            if info & HAS_PARENT_SUB != 0 {
                self.string()?;
                key = true;
            }
        }
        let content = info & 0b1111;
        let len = match content {
            1 => self.var()?, // deleted: a length
            2 => {
                // JSON: yrs reads the declared count plus one strings.
                let n = self.count()?;
                for _ in 0..=n {
                    self.string()?;
                }
                n as u64
            }
            3 => self.buf().map(|()| 1)?,
            4 => self.string()?.encode_utf16().count() as u64,
            5 => self.string().map(|_| 1)?,
            6 => {
                self.string()?;
                self.string()?;
                1
            }
            7 => match self.byte()? {
                3 => self.string().map(|_| 1)?,
                0 | 1 | 2 | 4 | 5 | 6 | 9 | 15 => 1,
                other => return Err(format!("unknown type ref {other}")),
            },
            8 => {
                let n = self.count()?;
                for _ in 0..n {
                    self.any(0)?;
                }
                n as u64
            }
            9 => {
                self.string()?;
                self.any(0)?;
                1
            }
            other => return Err(format!("unknown content ref {other}")),
        };
        Ok((len, Some(Item { origin, right_origin, parent, key, content })))
    }

    fn any(&mut self, depth: usize) -> Result<(), String> {
        if depth > MAX_ANY_DEPTH {
            return Err(format!("values nest deeper than {MAX_ANY_DEPTH}"));
        }
        match self.byte()? {
            127 | 126 | 121 | 120 => Ok(()),
            125 => self.var().map(drop),
            124 => self.skip(4),
            123 | 122 => self.skip(8),
            119 => self.string().map(drop),
            118 => {
                let n = self.count()?;
                for _ in 0..n {
                    self.string()?;
                    self.any(depth + 1)?;
                }
                Ok(())
            }
            117 => {
                let n = self.count()?;
                for _ in 0..n {
                    self.any(depth + 1)?;
                }
                Ok(())
            }
            116 => self.buf(),
            other => Err(format!("unknown value tag {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crdt::{CrdtMap, CrdtText};

    fn text_update(root: &str, info: u8, head: &[u8]) -> Vec<u8> {
        // One replica (5) with one string item "x", then the given placement, then no deletions.
        let mut bytes = vec![1, 1, 5, 0, info];
        bytes.extend_from_slice(head);
        if info & 0b1100_0000 == 0 && head.is_empty() {
            bytes.push(1);
            bytes.push(root.len() as u8);
            bytes.extend_from_slice(root.as_bytes());
        }
        bytes.extend_from_slice(&[1, b'x', 0]);
        bytes
    }

    #[test]
    fn what_honest_replicas_send_passes() {
        let base = CrdtText::from_text("hello");
        let (mut a, mut b) = (base.clone(), base.clone());
        let insert = a.insert(5, " world").unwrap();
        let remove = b.remove(0, 1).unwrap();
        // b, not having seen the removal, writes beside the removed character.
        let mut c = base.clone();
        let beside = c.insert(1, "e").unwrap();
        let mut stored = base.state().to_vec();
        for update in [&insert[..], &remove[..], &beside[..], a.state()] {
            assert_eq!(check_merge(&stored, update, Document::Text), Ok(()));
            let mut doc = CrdtText::from_state_unchecked(stored);
            doc.merge(update).unwrap();
            stored = doc.state().to_vec();
        }
        let mut map = CrdtMap::new();
        let first = map.insert("k", "v").unwrap();
        let mut other = map.clone();
        let second = other.insert("k", "w").unwrap();
        assert_eq!(check_merge(CrdtMap::new().state(), &first, Document::Map), Ok(()));
        assert_eq!(check_merge(map.state(), &second, Document::Map), Ok(()));
        assert_eq!(check_merge(map.state(), other.state(), Document::Map), Ok(()));
    }

    #[test]
    fn what_no_honest_replica_sends_is_refused_with_the_reason() {
        let empty = CrdtText::new().state().to_vec();
        let refused = |update: &[u8], document| check_merge(&empty, update, document).unwrap_err();
        assert!(refused(&text_update("other", 4, &[]), Document::Text).contains("names the root `other`"));
        assert!(refused(&text_update("text", 4, &[]), Document::Map).contains("content of kind 4"));
        assert!(refused(&text_update("text", 4, &[0, 5, 0]), Document::Text).contains("nested type"));
        assert!(refused(&text_update("", 0x84, &[9, 9]), Document::Text).contains("beside (9, 9)"));
        let mut gap = text_update("text", 4, &[]);
        gap[3] = 3;
        assert!(refused(&gap, Document::Text).contains("start at 3"));
        let repeated = [2, 1, 5, 0, 4, 1, 4, b't', b'e', b'x', b't', 1, b'x', 1, 5, 1, 0x84, 5, 0, 1, b'y', 0];
        assert!(refused(&repeated, Document::Text).contains("more than one run"));
        let collected = [1, 1, 5, 0, 0, 3, 0];
        assert!(refused(&collected, Document::Text).contains("collected or skipped"));
        let deleting = [0, 1, 7, 1, 0, 3];
        assert!(refused(&deleting, Document::Text).contains("do not all exist"));
        let empty_item = [1, 1, 5, 0, 4, 1, 4, b't', b'e', b'x', b't', 0, 0];
        assert!(refused(&empty_item, Document::Text).contains("is empty"));
        let itself = [1, 1, 5, 0, 0x84, 5, 1, 4, b't', b'e', b'x', b't', 0];
        assert!(refused(&itself, Document::Text).contains("comes after it"));
        // Two replicas' items, each placed beside the other.
        let round = [2, 1, 6, 0, 0x84, 5, 0, 1, b'a', 1, 5, 0, 0x84, 6, 0, 1, b'b', 0];
        assert!(refused(&round, Document::Text).contains("placed beside items that are placed beside it"));
        let past = [1, 1, 5, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 2, 0];
        assert!(check_update(&past).unwrap_err().contains("passes"));
    }
}
