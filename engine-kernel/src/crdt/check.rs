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
//!   exist. An honest replica never writes anything else. Two bounds keep `yrs`'s own work
//!   linear too: at most [`MAX_UPDATE_REPLICAS`] replicas, and no run longer than
//!   [`MAX_CONTINUATIONS`] of items that `yrs` would join one by one. The check's own work is
//!   linear up to a logarithm (every lookup goes through an index).

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

/// The most replicas (yrs clients) whose items one update may carry. An edit carries one; the
/// whole state of a document, sent as a new row's first value, carries one per replica that
/// ever wrote it (a [`CrdtText`](super::CrdtText) edit is a replica of its own). The check's
/// and `yrs`'s work per replica is small (80,000 replicas of one item, 1 MB, merge in about
/// 0.1 s); the bound keeps it so whatever they cost.
pub const MAX_UPDATE_REPLICAS: usize = 4096;

/// The longest run of continuations an update may carry: items of one replica, each placed
/// right after the one before it in the replica's run and holding the same kind of text or
/// values. `yrs` joins such items into one as it integrates them, copying the content joined so
/// far into the item before at each step, so a run costs the square of its length (110,000
/// one-character items took 15 s). Honest encoders (yrs, Yjs) join them before they encode; a
/// run they leave apart comes of a concurrent edit between two of its items.
pub const MAX_CONTINUATIONS: usize = 256;

/// Check `update` against the document whose state is `state` (its v1 encoding, as stored),
/// as the module documentation says. `state` is the engine's own encoding and is trusted to be
/// well formed.
///
/// The work is linear in the sizes of `state` and `update`, up to a logarithm: every lookup of
/// an id goes through a [`Ranges`] index, never a scan. An update of a few hundred kilobytes
/// of one-character items made the old scans quadratic (seconds of CPU for one mutation).
pub(super) fn check_merge(state: &[u8], update: &[u8], document: Document) -> Result<(), String> {
    check_merge_counting(state, update, document, &mut Steps::default())
}

/// [`check_merge`], counting its steps in `steps`.
pub(super) fn check_merge_counting(
    state: &[u8],
    update: &[u8],
    document: Document,
    steps: &mut Steps,
) -> Result<(), String> {
    let state = read(state, true)?;
    let update = read(update, true)?;
    steps.add(state.blocks.len() + update.blocks.len() + update.deletes.len());
    if update.starts.len() > MAX_UPDATE_REPLICAS {
        return Err(format!(
            "the update carries items of {} replicas; an update carries at most {MAX_UPDATE_REPLICAS}",
            update.starts.len()
        ));
    }
    if let Some(block) = update.blocks.iter().find(|b| b.item.is_none()) {
        // Garbage-collected ranges come only from items inside a deleted nested type, which
        // these documents do not have (a deleted item of a root stays an item); skipped ranges
        // only from merging updates together.
        return Err(format!("replica {}'s range at {} is collected or skipped", block.client, block.clock));
    }
    let mut seen = std::collections::BTreeSet::new();
    for &(client, _) in &update.starts {
        if !seen.insert(client) {
            return Err(format!("replica {client}'s items come in more than one run"));
        }
    }
    // The items of the document and of the update: what an item may be placed beside.
    let state_items = Ranges::of(state.blocks.iter().filter(|b| b.item.is_some()));
    let update_items = Ranges::of(update.blocks.iter());
    // Everything the document has, and with the update: where each replica's clock stands,
    // and what a deletion may cover.
    let state_all = Ranges::of(state.blocks.iter());
    let known = Ranges::of(state.blocks.iter().chain(&update.blocks));
    for &(client, clock) in &update.starts {
        let end = state_all.end(client);
        if clock > end {
            return Err(format!("replica {client}'s items start at {clock}, past the {end} the document has"));
        }
    }
    let (root, content) = match document {
        Document::Text => (TEXT_ROOT, [1, 4]),
        Document::Map => (MAP_ROOT, [1, 8]),
    };
    let mut run = 0;
    for pair in update.blocks.windows(2) {
        run = if continues(&pair[0], &pair[1]) { run + 1 } else { 0 };
        if run > MAX_CONTINUATIONS {
            let at = (pair[1].client, pair[1].clock);
            return Err(format!(
                "item {at:?} ends a run of more than {MAX_CONTINUATIONS} items each placed right after the one before, which a replica writes as one item"
            ));
        }
    }
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
            if !state_items.contains(neighbour, steps) && !update_items.contains(neighbour, steps) {
                return Err(format!("item {at:?} is placed beside {neighbour:?}, which does not exist"));
            }
            // A neighbour existed before the item: of the same replica, it has an earlier clock.
            if neighbour.0 == block.client && neighbour.1 >= block.clock {
                return Err(format!("item {at:?} is placed beside {neighbour:?}, which comes after it"));
            }
        }
    }
    if let Some(at) = circular(&update.blocks, &state_items, steps) {
        return Err(format!("item {at:?} is placed beside items that are placed beside it"));
    }
    for &(client, clock, len) in &update.deletes {
        if !known.covers(client, clock, len, steps) {
            return Err(format!(
                "the update deletes {len} of replica {client}'s items from {clock}, which do not all exist"
            ));
        }
    }
    Ok(())
}

/// Whether `next` continues `block`, as `yrs` joins items: the same replica, its clock where
/// `block` ends, placed right after `block`'s last character with the same right neighbour,
/// and holding text (4) or values (8) as `block` does, which `yrs` joins by copying. Deleted
/// content (1) is joined by adding lengths, at no cost.
fn continues(block: &Block<'_>, next: &Block<'_>) -> bool {
    let (Some(item), Some(next_item)) = (&block.item, &next.item) else { return false };
    let last = (block.client, (block.clock + block.len).saturating_sub(1));
    next.client == block.client
        && next.clock == block.clock + block.len
        && next_item.origin == Some(last)
        && next_item.right_origin == item.right_origin
        && next_item.content == item.content
        && matches!(item.content, 4 | 8)
}

/// How many steps a check took: blocks and deletions walked, and one per halving of an index
/// lookup. A test holds it to the update's size.
#[derive(Debug, Default)]
pub(super) struct Steps(pub(super) u64);

impl Steps {
    fn add(&mut self, n: usize) {
        self.0 = self.0.saturating_add(n as u64);
    }

    /// A binary search over `len` entries.
    fn search(&mut self, len: usize) {
        self.add(1 + len.checked_ilog2().unwrap_or(0) as usize);
    }
}

/// Id ranges by replica: per replica, disjoint ranges of clocks `[from, to)` in order, adjacent
/// ones joined. A lookup is a binary search.
#[derive(Debug, Default)]
struct Ranges(BTreeMap<u64, Vec<(u64, u64)>>);

impl Ranges {
    fn of<'b, 'a: 'b>(blocks: impl Iterator<Item = &'b Block<'a>>) -> Ranges {
        let mut by_client: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for block in blocks {
            by_client.entry(block.client).or_default().push((block.clock, block.clock + block.len));
        }
        for ranges in by_client.values_mut() {
            ranges.sort_unstable();
            let mut joined: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
            for &(from, to) in ranges.iter() {
                match joined.last_mut() {
                    Some(last) if from <= last.1 => last.1 = last.1.max(to),
                    _ => joined.push((from, to)),
                }
            }
            *ranges = joined;
        }
        Ranges(by_client)
    }

    /// The range of `client` that holds `clock`.
    fn holding(&self, (client, clock): Id, steps: &mut Steps) -> Option<(u64, u64)> {
        let ranges = self.0.get(&client)?;
        steps.search(ranges.len());
        let after = ranges.partition_point(|&(from, _)| from <= clock);
        let &(from, to) = ranges.get(after.checked_sub(1)?)?;
        (from <= clock && clock < to).then_some((from, to))
    }

    fn contains(&self, id: Id, steps: &mut Steps) -> bool {
        self.holding(id, steps).is_some()
    }

    /// Whether `len` ids of `client` from `clock` are all here; a deletion of none names a
    /// replica that must be here.
    fn covers(&self, client: u64, clock: u64, len: u64, steps: &mut Steps) -> bool {
        if len == 0 {
            return self.0.contains_key(&client);
        }
        self.holding((client, clock), steps).is_some_and(|(_, to)| clock + len <= to)
    }

    /// The end of `client`'s last range, 0 when it has none.
    fn end(&self, client: u64) -> u64 {
        self.0.get(&client).and_then(|r| r.last()).map_or(0, |&(_, to)| to)
    }
}

/// An item of `blocks` that depends on itself: placed beside an item of the update that is (by
/// its neighbours or by coming later in its replica) placed beside it in turn. Neighbours in the
/// document (`state_items`) end a chain. Honest replicas write only items whose neighbours
/// existed before them, so their dependencies never go round.
///
/// A topological sort (Kahn's): each block counts what it waits for, blocks that wait for
/// nothing are settled, and settling one releases those waiting for it. What is never settled
/// goes round, or waits for what does.
fn circular(blocks: &[Block<'_>], state_items: &Ranges, steps: &mut Steps) -> Option<Id> {
    // Each replica's blocks come in one run in clock order (checked before): the index of the
    // block holding an id is a binary search in its replica's run.
    let mut runs: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, block) in blocks.iter().enumerate() {
        runs.entry(block.client).or_default().push(i);
    }
    let find = |(client, clock): Id, steps: &mut Steps| -> Option<usize> {
        let run = runs.get(&client)?;
        steps.search(run.len());
        let after = run.partition_point(|&i| blocks[i].clock <= clock);
        let &i = run.get(after.checked_sub(1)?)?;
        (clock < blocks[i].clock + blocks[i].len).then_some(i)
    };
    // What each block waits for: the block before it in its replica's run, and its neighbours
    // in the update.
    let mut waiting = vec![0u32; blocks.len()];
    let mut released: Vec<Vec<usize>> = vec![Vec::new(); blocks.len()];
    for (i, block) in blocks.iter().enumerate() {
        steps.add(1);
        if i > 0 && blocks[i - 1].client == block.client {
            waiting[i] += 1;
            released[i - 1].push(i);
        }
        let Some(item) = &block.item else { continue };
        for neighbour in [item.origin, item.right_origin].into_iter().flatten() {
            if !state_items.contains(neighbour, steps)
                && let Some(j) = find(neighbour, steps)
            {
                waiting[i] += 1;
                released[j].push(i);
            }
        }
    }
    let mut ready: Vec<usize> = (0..blocks.len()).filter(|&i| waiting[i] == 0).collect();
    while let Some(j) = ready.pop() {
        steps.add(1 + released[j].len());
        for &i in &released[j] {
            waiting[i] -= 1;
            if waiting[i] == 0 {
                ready.push(i);
            }
        }
    }
    waiting.iter().position(|&w| w > 0).map(|i| (blocks[i].client, blocks[i].clock))
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

    /// `n` as yrs writes a variable-length integer.
    fn var(mut n: u64, out: &mut Vec<u8>) {
        while n >= 0x80 {
            out.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    /// An update of `items` one-character items of each of `replicas` replicas, each item placed
    /// after the one before it, except every `every`th, placed after the one before that: what
    /// no replica's own encoding writes (yrs joins such items into one), but what a hostile one
    /// may, a few bytes an item.
    fn chain_of_items(replicas: u64, items: u64) -> Vec<u8> {
        items_placed(replicas, items, 100)
    }

    fn items_placed(replicas: u64, items: u64, every: u64) -> Vec<u8> {
        let mut bytes = Vec::new();
        var(replicas, &mut bytes);
        for client in 1..=replicas {
            var(items, &mut bytes);
            var(client, &mut bytes);
            var(0, &mut bytes);
            bytes.extend_from_slice(&[4, 1, 4, b't', b'e', b'x', b't', 1, b'x']);
            for clock in 1..items {
                bytes.push(0x84);
                var(client, &mut bytes);
                var(if clock % every == 0 && clock >= 2 { clock - 2 } else { clock - 1 }, &mut bytes);
                bytes.extend_from_slice(&[1, b'x']);
            }
        }
        bytes.push(0);
        bytes
    }

    fn steps(update: &[u8]) -> u64 {
        let mut steps = Steps::default();
        check_merge_counting(CrdtText::new().state(), update, Document::Text, &mut steps).unwrap();
        steps.0
    }

    #[test]
    fn the_check_takes_steps_in_proportion_to_the_update() {
        // 40,000 and 160,000 items of one replica (about 200 KB and 900 KB), the shape that took
        // seconds when every lookup scanned the replica's items.
        let small = steps(&chain_of_items(1, 40_000));
        assert!(small <= 40 * 40_000, "{small} steps for 40,000 items");
        let large = steps(&chain_of_items(1, 160_000));
        assert!(large <= 40 * 160_000, "{large} steps for 160,000 items");
        // Four times the items: four times the steps and a little more for the searches' depth;
        // the scans took sixteen times as many.
        assert!(large <= small * 5, "four times the items, {large} steps against {small}");
        // The same items spread over many replicas.
        let spread = steps(&chain_of_items(1_000, 100));
        assert!(spread <= 40 * 100_000, "{spread} steps for 1,000 replicas of 100 items");
    }

    #[test]
    fn a_long_run_of_items_a_replica_writes_as_one_is_refused() {
        let empty = CrdtText::new().state().to_vec();
        // 257 items after the first, each continuing the one before.
        let refused = check_merge(&empty, &items_placed(1, 258, u64::MAX), Document::Text).unwrap_err();
        assert!(refused.contains("more than 256 items"), "{refused}");
        assert_eq!(check_merge(&empty, &items_placed(1, 257, u64::MAX), Document::Text), Ok(()));
        // What an honest replica sends holds no such run: typing joins into one item.
        let mut typed = CrdtText::new();
        let mut stored = typed.state().to_vec();
        for c in "a sentence typed one character at a time".chars() {
            let at = typed.text().unwrap().chars().count() as u32;
            let update = typed.insert(at, &c.to_string()).unwrap();
            assert_eq!(check_merge(&stored, &update, Document::Text), Ok(()));
            stored = typed.state().to_vec();
        }
        assert_eq!(check_merge(&empty, typed.state(), Document::Text), Ok(()));
        // A replica that keeps its id (as a Yjs document does) joins its keystrokes too.
        use yrs::{ReadTxn, Text, Transact};
        let doc = yrs::Doc::with_client_id(7);
        let text = doc.get_or_insert_text(crate::crdt::TEXT_ROOT);
        for (i, c) in "typed one transaction at a time".chars().enumerate() {
            text.insert(&mut doc.transact_mut(), i as u32, &c.to_string());
        }
        let state = doc.transact().encode_state_as_update_v1(&yrs::StateVector::default());
        assert_eq!(check_merge(&empty, &state, Document::Text), Ok(()));
    }

    #[test]
    fn an_update_of_too_many_replicas_is_refused() {
        let refused = check_merge(CrdtText::new().state(), &chain_of_items(4_097, 1), Document::Text).unwrap_err();
        assert!(refused.contains("4097 replicas") && refused.contains("at most 4096"), "{refused}");
        assert_eq!(check_merge(CrdtText::new().state(), &chain_of_items(4_096, 1), Document::Text), Ok(()));
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
