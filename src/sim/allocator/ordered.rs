//! The ordered set the pools keep their cached blocks in: the operations of
//! a `BTreeSet` the model uses (insert, remove, the first key at or after
//! one, the keys before one backwards), over keys kept sorted in chunks of
//! at most [`CAP`] beside the largest key of each chunk.
//!
//! A request costs two or three updates of a pool's set, and a run makes
//! one per request of the trace. A B-tree walks four or five nodes of
//! eleven keys each for one update; here one binary search over the
//! chunks' largest keys (contiguous) and one in a chunk find the place, and
//! an update moves at most a chunk's keys along, about three times fewer
//! instructions on the pools of thousands of blocks that fragmented runs
//! keep.

/// The most keys a chunk holds: a full one is split in two halves.
const CAP: usize = 32;
/// A chunk left with fewer keys is merged into a neighbour that has room.
const LOW: usize = CAP / 4;

/// Keys of 128 bits (one comparison each) with a value each, ascending.
#[derive(Debug, Clone)]
pub(super) struct ChunkedMap<V> {
    /// Chunk after chunk; no chunk is empty.
    chunks: Vec<Chunk<V>>,
    /// The last (largest) key of each chunk.
    maxes: Vec<u128>,
    len: usize,
}

#[derive(Debug, Clone)]
struct Chunk<V> {
    keys: Vec<u128>,
    vals: Vec<V>,
}

impl<V: Copy> Chunk<V> {
    fn with(keys: &[u128], vals: &[V]) -> Chunk<V> {
        let mut c = Chunk {
            keys: Vec::with_capacity(CAP + 1),
            vals: Vec::with_capacity(CAP + 1),
        };
        c.keys.extend_from_slice(keys);
        c.vals.extend_from_slice(vals);
        c
    }
    fn last(&self) -> u128 {
        self.keys[self.keys.len() - 1]
    }
    fn append(&mut self, o: &Chunk<V>) {
        self.keys.extend_from_slice(&o.keys);
        self.vals.extend_from_slice(&o.vals);
    }
}

impl<V> Default for ChunkedMap<V> {
    fn default() -> Self {
        ChunkedMap {
            chunks: Vec::new(),
            maxes: Vec::new(),
            len: 0,
        }
    }
}

impl<V: Copy> ChunkedMap<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first chunk whose largest key is at least `k` (the number of
    /// chunks when none is).
    #[inline]
    fn chunk_at(&self, k: u128) -> usize {
        self.maxes.partition_point(|&m| m < k)
    }

    pub fn get(&self, k: u128) -> Option<V> {
        let ch = self.chunks.get(self.chunk_at(k))?;
        ch.keys.binary_search(&k).ok().map(|i| ch.vals[i])
    }

    /// The largest key, read from the chunks' largest keys alone.
    #[inline]
    pub fn last_key(&self) -> Option<u128> {
        self.maxes.last().copied()
    }

    /// The largest key and its value.
    #[cfg(test)]
    pub fn last(&self) -> Option<(u128, V)> {
        let ch = self.chunks.last()?;
        Some((ch.last(), ch.vals[ch.vals.len() - 1]))
    }

    /// Adds `k` with `v`; false (and nothing changed) when `k` was there.
    pub fn insert(&mut self, k: u128, v: V) -> bool {
        if self.chunks.is_empty() {
            self.chunks.push(Chunk::with(&[k], &[v]));
            self.maxes.push(k);
            self.len = 1;
            return true;
        }
        // Past every key: the last chunk takes it.
        let c = self.chunk_at(k).min(self.chunks.len() - 1);
        let ch = &mut self.chunks[c];
        let pos = match ch.keys.binary_search(&k) {
            Ok(_) => return false,
            Err(p) => p,
        };
        ch.keys.insert(pos, k);
        ch.vals.insert(pos, v);
        if pos + 1 == ch.keys.len() {
            self.maxes[c] = k;
        }
        self.len += 1;
        if ch.keys.len() > CAP {
            let tail = Chunk::with(&ch.keys[CAP / 2..], &ch.vals[CAP / 2..]);
            ch.keys.truncate(CAP / 2);
            ch.vals.truncate(CAP / 2);
            self.maxes[c] = ch.last();
            self.maxes.insert(c + 1, tail.last());
            self.chunks.insert(c + 1, tail);
        }
        true
    }

    /// Takes `k` out, with its value.
    pub fn remove(&mut self, k: u128) -> Option<V> {
        let at = self.find(k)?;
        Some(self.remove_at(at))
    }

    /// Where `k` is.
    pub fn find(&self, k: u128) -> Option<Pos> {
        let c = self.chunk_at(k);
        let pos = self.chunks.get(c)?.keys.binary_search(&k).ok()?;
        Some(Pos { c, pos })
    }

    /// Takes out the entry at `at` (from an iterator of this map, with no
    /// change since), returning its value.
    pub fn remove_at(&mut self, at: Pos) -> V {
        let Pos { c, pos } = at;
        let ch = &mut self.chunks[c];
        ch.keys.remove(pos);
        let v = ch.vals.remove(pos);
        self.len -= 1;
        let left = ch.keys.len();
        if left == 0 {
            self.chunks.remove(c);
            self.maxes.remove(c);
        } else {
            if pos == left {
                self.maxes[c] = ch.last();
            }
            if left < LOW {
                self.merge_small(c);
            }
        }
        v
    }

    /// Takes out the entry at `at` (as [`ChunkedMap::remove_at`]) and adds
    /// `k` with `v` (which must not be there): in one move within the
    /// chunk when `k` belongs there, as a split block's remainder or a
    /// block merged with its neighbour mostly does.
    pub fn replace_at(&mut self, at: Pos, k: u128, v: V) {
        let Pos { c, pos } = at;
        let last = self.chunks.len() - 1;
        let ch = &mut self.chunks[c];
        let old = ch.keys[pos];
        debug_assert_ne!(old, k);
        let n = ch.keys.len();
        if k < old {
            if c > 0 && self.maxes[c - 1] >= k {
                self.remove_at(at);
                self.insert(k, v);
                return;
            }
            // k's place is among the keys before `pos`: those after it
            // move one along, onto the entry taken out.
            let p = ch.keys[..pos].partition_point(|&x| x < k);
            ch.keys.copy_within(p..pos, p + 1);
            ch.vals.copy_within(p..pos, p + 1);
            ch.keys[p] = k;
            ch.vals[p] = v;
        } else {
            if k > self.maxes[c] && c < last {
                self.remove_at(at);
                self.insert(k, v);
                return;
            }
            // k's place is among the keys after `pos`: those before it
            // move one back, onto the entry taken out.
            let p = pos + 1 + ch.keys[pos + 1..].partition_point(|&x| x < k);
            ch.keys.copy_within(pos + 1..p, pos);
            ch.vals.copy_within(pos + 1..p, pos);
            ch.keys[p - 1] = k;
            ch.vals[p - 1] = v;
        }
        self.maxes[c] = ch.keys[n - 1];
    }

    /// Chunk `c` is small: moves it into a neighbour with room for it.
    fn merge_small(&mut self, c: usize) {
        let n = self.chunks[c].keys.len();
        if c + 1 < self.chunks.len() && self.chunks[c + 1].keys.len() + n <= CAP {
            let next = self.chunks.remove(c + 1);
            self.chunks[c].append(&next);
            self.maxes.remove(c);
        } else if c > 0 && self.chunks[c - 1].keys.len() + n <= CAP {
            let cur = self.chunks.remove(c);
            self.chunks[c - 1].append(&cur);
            self.maxes.remove(c - 1);
        }
    }

    /// Where the first key at or after `k` is, or would be: its chunk
    /// (the number of chunks past every key) and its place in it.
    fn lower_bound(&self, k: u128) -> Pos {
        let c = self.chunk_at(k);
        let pos = self
            .chunks
            .get(c)
            .map_or(0, |ch| ch.keys.partition_point(|&x| x < k));
        Pos { c, pos }
    }

    /// The entries at or after `k`, ascending.
    pub fn range_from(&self, k: u128) -> Forward<'_, V> {
        let Pos { c, pos } = self.lower_bound(k);
        Forward {
            chunks: &self.chunks,
            c,
            pos,
        }
    }

    /// The entries before `k`, descending.
    pub fn range_below(&self, k: u128) -> Backward<'_, V> {
        let Pos { c, pos: end } = self.lower_bound(k);
        Backward {
            chunks: &self.chunks,
            c,
            end,
        }
    }

    /// Every entry, ascending.
    pub fn iter(&self) -> Forward<'_, V> {
        Forward {
            chunks: &self.chunks,
            c: 0,
            pos: 0,
        }
    }
}

/// Where an entry is: its chunk and its place in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pos {
    c: usize,
    pos: usize,
}

/// [`ChunkedMap::range_from`].
pub(super) struct Forward<'a, V> {
    chunks: &'a [Chunk<V>],
    c: usize,
    pos: usize,
}

impl<V> Forward<'_, V> {
    const EMPTY: Self = Forward {
        chunks: &[],
        c: 0,
        pos: 0,
    };

    /// Where the entry `next` returned last is.
    fn last_at(&self) -> Pos {
        debug_assert!(self.pos > 0, "an entry was returned");
        Pos {
            c: self.c,
            pos: self.pos - 1,
        }
    }
}

impl<V: Copy> Iterator for Forward<'_, V> {
    type Item = (u128, V);
    #[inline]
    fn next(&mut self) -> Option<(u128, V)> {
        loop {
            let ch = self.chunks.get(self.c)?;
            if let Some(&k) = ch.keys.get(self.pos) {
                let v = ch.vals[self.pos];
                self.pos += 1;
                return Some((k, v));
            }
            self.c += 1;
            self.pos = 0;
        }
    }
}

/// [`ChunkedMap::range_below`]: chunk `c`'s entries before `end`, then the
/// chunks before it.
pub(super) struct Backward<'a, V> {
    chunks: &'a [Chunk<V>],
    c: usize,
    end: usize,
}

impl<V> Backward<'_, V> {
    const EMPTY: Self = Backward {
        chunks: &[],
        c: 0,
        end: 0,
    };
}

impl<V: Copy> Iterator for Backward<'_, V> {
    type Item = (u128, V);
    #[inline]
    fn next(&mut self) -> Option<(u128, V)> {
        loop {
            if self.end > 0 {
                self.end -= 1;
                let ch = &self.chunks[self.c];
                return Some((ch.keys[self.end], ch.vals[self.end]));
            }
            self.c = self.c.checked_sub(1)?;
            self.end = self.chunks[self.c].keys.len();
        }
    }
}

/// A pool's cached blocks in the order of PyTorch's `BlockComparatorSize`
/// (stream as an unsigned number, size, address): one map a stream, keyed
/// by size and address.
///
/// A pool mostly sees one or two streams, but a program may use hundreds
/// (a stream per communicator, per pipeline stage, per request): a stream
/// is found by a scan of the streams' numbers alone, contiguous.
#[derive(Debug, Clone, Default)]
pub(super) struct FreeIndex {
    /// The streams, ascending.
    ids: Vec<u64>,
    /// Each stream's map.
    maps: Vec<ChunkedMap<BlockId>>,
}

type BlockId = usize;

/// [`FreeIndex::from`]: (size, address, block), ascending.
pub(super) struct FreeCursor<'a> {
    stream: usize,
    it: Forward<'a, BlockId>,
}

impl Iterator for FreeCursor<'_> {
    type Item = (u64, u64, BlockId);
    #[inline]
    fn next(&mut self) -> Option<(u64, u64, BlockId)> {
        self.it.next().map(entry)
    }
}

impl FreeCursor<'_> {
    /// Where the block `next` returned last is, for [`FreeIndex::remove_at`].
    pub fn last_at(&self) -> FreePos {
        FreePos {
            stream: self.stream,
            pos: self.it.last_at(),
        }
    }
}

/// Where a cached block is in its pool's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FreePos {
    stream: usize,
    pos: Pos,
}

#[inline]
fn key(size: u64, addr: u64) -> u128 {
    ((size as u128) << 64) | addr as u128
}

#[inline]
fn entry((k, id): (u128, BlockId)) -> (u64, u64, BlockId) {
    ((k >> 64) as u64, k as u64, id)
}

impl FreeIndex {
    pub fn len(&self) -> usize {
        self.maps.iter().map(|m| m.len()).sum()
    }

    /// The place of stream `s` in `ids`: `Ok` where it is, `Err` where it
    /// would go. A scan: most requests name the first stream or the
    /// first few, which a binary search would reach last.
    #[inline]
    fn search(&self, s: u64) -> Result<usize, usize> {
        match self.ids.iter().position(|&x| x >= s) {
            Some(i) if self.ids[i] == s => Ok(i),
            Some(i) => Err(i),
            None => Err(self.ids.len()),
        }
    }

    /// The place of stream `s`'s map in `maps`.
    #[inline]
    fn stream_ix(&self, s: u64) -> Option<usize> {
        self.search(s).ok()
    }

    #[inline]
    fn stream(&self, s: u64) -> Option<&ChunkedMap<BlockId>> {
        self.stream_ix(s).map(|i| &self.maps[i])
    }

    /// Adds block `id`; false when its key was there.
    pub fn insert(&mut self, s: u64, size: u64, addr: u64, id: BlockId) -> bool {
        let i = match self.search(s) {
            Ok(i) => i,
            Err(i) => {
                self.ids.insert(i, s);
                self.maps.insert(i, ChunkedMap::default());
                i
            }
        };
        self.maps[i].insert(key(size, addr), id)
    }

    /// Takes the block at (stream, size, address) out; false when none was.
    pub fn remove(&mut self, s: u64, size: u64, addr: u64) -> bool {
        self.stream_ix(s)
            .is_some_and(|i| self.maps[i].remove(key(size, addr)).is_some())
    }

    pub fn contains(&self, s: u64, size: u64, addr: u64, id: BlockId) -> bool {
        self.stream(s)
            .and_then(|m| m.get(key(size, addr)))
            .is_some_and(|x| x == id)
    }

    /// Stream `s`'s blocks of at least `size` bytes as (size, address,
    /// block), best fit first.
    pub fn from(&self, s: u64, size: u64) -> FreeCursor<'_> {
        match self.stream_ix(s) {
            Some(i) => FreeCursor {
                stream: i,
                it: self.maps[i].range_from(key(size, 0)),
            },
            None => FreeCursor {
                stream: 0,
                it: Forward::EMPTY,
            },
        }
    }

    /// Takes out the block a cursor of this index returned last (with no
    /// change since).
    pub fn remove_at(&mut self, at: FreePos) -> BlockId {
        self.maps[at.stream].remove_at(at.pos)
    }

    /// Where stream `s`'s block of `size` bytes at `addr` is (`None` when
    /// it is not cached).
    pub fn find(&self, s: u64, size: u64, addr: u64) -> Option<FreePos> {
        let stream = self.stream_ix(s)?;
        let pos = self.maps[stream].find(key(size, addr))?;
        Some(FreePos { stream, pos })
    }

    /// Takes out the block at `at` (with no change since it was found) and
    /// adds block `id`, of the same stream, in one move where it can.
    pub fn replace_at(&mut self, at: FreePos, size: u64, addr: u64, id: BlockId) {
        self.maps[at.stream].replace_at(at.pos, key(size, addr), id);
    }

    /// Stream `s`'s blocks of fewer than `size` bytes, largest first.
    pub fn below(&self, s: u64, size: u64) -> impl Iterator<Item = (u64, u64, BlockId)> + '_ {
        self.stream(s)
            .map_or(Backward::EMPTY, |m| m.range_below(key(size, 0)))
            .map(entry)
    }

    /// The largest size cached (0 with none).
    pub fn largest(&self) -> u64 {
        self.maps
            .iter()
            .filter_map(|m| m.last_key())
            .map(|k| (k >> 64) as u64)
            .max()
            .unwrap_or(0)
    }

    /// Every block as (stream, size, address, block), in the pool's order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, u64, BlockId)> + '_ {
        self.ids.iter().zip(&self.maps).flat_map(|(&s, m)| {
            m.iter().map(move |e| {
                let (size, addr, id) = entry(e);
                (s, size, addr, id)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn check(s: &ChunkedMap<u32>, b: &BTreeMap<u128, u32>) {
        assert_eq!(s.len(), b.len());
        assert!(s.iter().eq(b.iter().map(|(&k, &v)| (k, v))));
        assert_eq!(s.last(), b.last_key_value().map(|(&k, &v)| (k, v)));
        assert_eq!(s.last_key(), b.last_key_value().map(|(&k, _)| k));
        for (c, ch) in s.chunks.iter().enumerate() {
            assert!(!ch.keys.is_empty() && ch.keys.len() <= CAP);
            assert_eq!(ch.keys.len(), ch.vals.len());
            assert_eq!(s.maxes[c], ch.last());
        }
    }

    /// Random inserts and removes, keys drawn from small and wide ranges,
    /// against `BTreeMap`: the same answers, entries and ranges.
    #[test]
    fn answers_as_a_btree_map() {
        let mut next = crate::model::test_support::below(0x2545_f491_4f6c_dd1d);
        for round in 0..60 {
            let span = [3u64, 40, 1000, 1 << 40][round % 4];
            let ops = [50usize, 400, 3000][round % 3];
            let mut s = ChunkedMap::default();
            let mut b = BTreeMap::new();
            let key = |hi: u64, lo: u64| ((hi as u128) << 64) | lo as u128;
            for i in 0..ops {
                let k = key(next(3), next(span));
                // Grow for a while, then shrink, then mix.
                let grow = match next(3) {
                    0 => next(10) < 8,
                    1 => next(10) < 2,
                    _ => next(2) == 0,
                };
                if next(4) == 0 && !b.is_empty() {
                    // An entry found by a range or by its key, replaced by
                    // a key not there (either side of it).
                    let q = key(next(3), next(span));
                    let at = if next(2) == 0 {
                        s.find(q)
                    } else {
                        let mut it = s.range_from(q);
                        it.next().map(|_| it.last_at())
                    };
                    if let Some(at) = at {
                        let old = s.chunks[at.c].keys[at.pos];
                        let new = key(next(3), next(span));
                        if !b.contains_key(&new) {
                            let v = b.remove(&old).expect("the entry found");
                            b.insert(new, v + 1);
                            s.replace_at(at, new, v + 1);
                        } else if next(2) == 0 {
                            assert_eq!(s.remove_at(at), b.remove(&old).expect("there"));
                        }
                    }
                } else if grow {
                    let fresh = !b.contains_key(&k);
                    assert_eq!(s.insert(k, i as u32), fresh);
                    b.entry(k).or_insert(i as u32);
                } else {
                    let k = if next(2) == 0 {
                        b.keys()
                            .nth(next(b.len() as u64 + 1) as usize)
                            .copied()
                            .unwrap_or(k)
                    } else {
                        k
                    };
                    assert_eq!(s.remove(k), b.remove(&k));
                }
                let q = key(next(4), next(span + 1));
                assert_eq!(s.get(q), b.get(&q).copied());
                let want = |(&k, &v): (&u128, &u32)| (k, v);
                assert!(s.range_from(q).take(70).eq(b.range(q..).map(want).take(70)));
                assert!(
                    s.range_below(q)
                        .take(70)
                        .eq(b.range(..q).rev().map(want).take(70))
                );
            }
            check(&s, &b);
            assert!(s.range_from(0).eq(s.iter()));
            assert!(
                s.range_below(u128::MAX)
                    .eq(b.iter().rev().map(|(&k, &v)| (k, v)))
            );
            while let Some((&k, _)) = b.iter().next() {
                assert!(s.remove(k).is_some() && b.remove(&k).is_some());
            }
            check(&s, &b);
            assert!(s.chunks.is_empty() && s.is_empty());
        }
    }

    /// Random inserts, removes and replacements over a few streams or
    /// hundreds, against a `BTreeSet` of (stream, size, address, block):
    /// the same blocks in the same order, the same largest size, the same
    /// best fits.
    #[test]
    fn free_index_answers_as_a_btree_set() {
        use std::collections::BTreeSet;
        let mut next = crate::model::test_support::below(0x9e37_79b9_7f4a_7c15);
        for round in 0..40 {
            let streams = [1u64, 3, 9, 300][round % 4];
            let sizes = [4u64, 50, 1 << 30][round % 3];
            let mut f = FreeIndex::default();
            let mut b: BTreeSet<(u64, u64, u64, BlockId)> = BTreeSet::new();
            for i in 0..2000usize {
                // Streams as PyTorch numbers them: 0 and pointer values.
                let s = match next(streams) {
                    0 => 0,
                    n => 0x7f00_0000_0000 + 0x100 * n,
                };
                let (size, addr) = (1 + next(sizes), next(1 << 20) << 9);
                match next(5) {
                    0 | 1 => {
                        let fresh = !b.iter().any(|e| (e.0, e.1, e.2) == (s, size, addr));
                        assert_eq!(f.insert(s, size, addr, i), fresh);
                        if fresh {
                            b.insert((s, size, addr, i));
                        }
                    }
                    2 => {
                        // The best fit, taken out or replaced by its remainder.
                        let mut c = f.from(s, size);
                        let got = c.next();
                        let want = b.range((s, size, 0, 0)..).next().filter(|e| e.0 == s);
                        assert_eq!(got, want.map(|e| (e.1, e.2, e.3)));
                        if let Some(&(_, bs, ba, bid)) = want {
                            let at = c.last_at();
                            b.remove(&(s, bs, ba, bid));
                            let rest = (bs - size / 2, ba + 1);
                            let taken = b.iter().any(|e| (e.0, e.1, e.2) == (s, rest.0, rest.1));
                            if next(2) == 0 && rest.0 > 0 && rest.0 != bs && !taken {
                                f.replace_at(at, rest.0, rest.1, bid);
                                b.insert((s, rest.0, rest.1, bid));
                            } else {
                                assert_eq!(f.remove_at(at), bid);
                            }
                        }
                    }
                    _ => {
                        if let Some(&e) = b.iter().nth(next(b.len() as u64 + 1) as usize) {
                            let at = f.find(e.0, e.1, e.2).expect("cached");
                            assert_eq!(f.remove_at(at), e.3);
                            b.remove(&e);
                        } else {
                            assert!(!f.remove(s, size, addr));
                        }
                    }
                }
                assert_eq!(f.largest(), b.iter().map(|e| e.1).max().unwrap_or(0));
                assert_eq!(f.len(), b.len());
            }
            assert!(f.iter().eq(b.iter().copied()));
            for &(s, size, addr, id) in &b {
                assert!(f.contains(s, size, addr, id));
                assert!(f.remove(s, size, addr));
            }
            assert_eq!((f.len(), f.largest()), (0, 0));
        }
    }
}
