//! The fast path's cache of frames lists: the stack each list of memo
//! references was taken as, found again by the list's bytes, and the
//! word-at-a-time byte helpers that cache needs.

use crate::core::hash::FX;
use std::hash::BuildHasher;

/// Frames lists read before, by their bytes: the stack each was taken as
/// and the generation ([`Vm::f_gen`]) it was read in. [`FRAMES_SETS`] sets
/// of [`FRAMES_WAYS`], a set chosen by the bytes where a list starts, so a
/// list is found before its end is known; a way compared costs one byte
/// (is there an APPENDS where the way's list ends?) unless it matches.
///
/// Lists of many call sites start with the same innermost frames, so the
/// same bytes, and land in one set: hence many ways. A set is filled in
/// turn and looked at first where it was last hit and just after: the
/// same call site again, or the next of a cycle of them in the order they
/// were first read, as a training step repeats its stacks. (Keeping each
/// set's ways in order of use instead, the largest real file found 3 020
/// of its 14 299 lists at the 14th way: a cycle of 14 stacks.)
///
/// Behind it, a list missed there is looked for by a hash of all its
/// bytes ([`DEEP_SETS`] sets of [`DEEP_WAYS`], filled in turn), found at
/// the cost of reading it to its end: on a file whose call sites share
/// their innermost frames by the hundred (the OOM file among the real
/// ones), one set's ways cannot hold them all.
pub(super) struct FramesCache {
    slots: Vec<FramesSlot>,
    /// Per set: the way filled next, and the way last hit or filled.
    next: Vec<u8>,
    last: Vec<u8>,
    /// Empty until a list is cached there (most files never miss).
    deep: Vec<DeepSlot>,
    deep_next: Vec<u8>,
    hasher: foldhash::fast::FixedState,
    /// Counted lists ([`Cached`]) whose ways were filled anew, and those of
    /// them never found again: a file whose stacks are all new fills the
    /// cache in vain, and pushes out the lists that recur.
    evicted: u32,
    wasted: u32,
    /// Lists offered to [`FramesCache::admit`].
    offered: u32,
}

#[derive(Clone)]
struct FramesSlot {
    bytes: Box<[u8]>,
    /// [`tail_word`] of `bytes`: the lists of a set share their first 32
    /// bytes and most differ in their last 8, so most misses are told
    /// without comparing all of them.
    tail: u64,
    /// [`NO_STACK`]: the way is empty.
    stack: u32,
    generation: u32,
    /// Found again since it was cached (or cached as found again).
    hit: bool,
    /// Counted towards [`FramesCache::admit`] when its way is filled anew.
    counted: bool,
}

/// How a list came to be cached ([`FramesCache::insert`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Cached {
    /// Read the first time, admitted ([`FramesCache::admit`]).
    Read,
    /// Found in the deep cache: a list that recurs.
    Deep,
    /// A list of frames written out ([`super::fresh`]), not counted.
    Fresh,
}

#[derive(Clone)]
struct DeepSlot {
    bytes: Box<[u8]>,
    hash: u64,
    /// [`NO_STACK`]: the way is empty.
    stack: u32,
    generation: u32,
}

const FRAMES_SETS: usize = 64;
const FRAMES_WAYS: usize = 32;
const DEEP_SETS: usize = 256;
const DEEP_WAYS: usize = 8;
const NO_STACK: u32 = u32::MAX;
/// Once [`WARM`] counted lists' ways were filled anew and more than three
/// in four of them had never been found again, a list is admitted one time
/// in [`SAMPLED`]; both counts are halved when the first reaches
/// [`WASTE_WINDOW`].
const SAMPLED: u32 = 16;
const WARM: u32 = 256;
const WASTE_WINDOW: u32 = 1024;

/// The deep cache's set for a list's hash.
pub(super) fn deep_set(hash: u64) -> usize {
    (hash >> 56) as usize % DEEP_SETS
}

impl FramesCache {
    pub(super) fn new() -> FramesCache {
        let empty = FramesSlot {
            bytes: Box::default(),
            tail: 0,
            stack: NO_STACK,
            generation: 0,
            hit: false,
            counted: false,
        };
        FramesCache {
            slots: vec![empty; FRAMES_SETS * FRAMES_WAYS],
            next: vec![0; FRAMES_SETS],
            last: vec![0; FRAMES_SETS],
            deep: Vec::new(),
            deep_next: Vec::new(),
            hasher: foldhash::fast::FixedState::default(),
            evicted: 0,
            wasted: 0,
            offered: 0,
        }
    }

    /// The stack of the list of references that starts at `b[from]` and
    /// the end of its APPENDS, when it was read before in `generation`.
    #[inline]
    pub(super) fn find(
        &mut self,
        b: &[u8],
        from: usize,
        set: usize,
        generation: u32,
    ) -> Option<(u32, usize)> {
        let ways = &self.slots[set * FRAMES_WAYS..][..FRAMES_WAYS];
        let is = |w: usize| {
            let slot = &ways[w];
            let n = slot.bytes.len();
            slot.generation == generation
                && slot.stack != NO_STACK
                && b.get(from + n) == Some(&b'e')
                && tail_word(&b[from..from + n]) == slot.tail
                && b[from..from + n] == *slot.bytes
        };
        let last = self.last[set] as usize;
        let after = (last + 1) % FRAMES_WAYS;
        let w = if is(last) {
            last
        } else if is(after) {
            after
        } else {
            (0..FRAMES_WAYS).find(|&w| w != last && w != after && is(w))?
        };
        self.last[set] = w as u8;
        let slot = &mut self.slots[set * FRAMES_WAYS + w];
        slot.hit = true;
        Some((slot.stack, from + slot.bytes.len() + 1))
    }

    /// Whether a list just read, which neither cache held, is to be cached
    /// (in both): always, until most lists cached were pushed out without
    /// being found again in either cache (a file that names a new stack at
    /// nearly every entry); then one time in [`SAMPLED`], which still
    /// catches the lists that recur, and as those are found again the
    /// cache fills as before. What is found is the same either way: a list
    /// not cached is read and its stack looked up.
    pub(super) fn admit(&mut self) -> bool {
        self.offered = self.offered.wrapping_add(1);
        self.evicted < WARM
            || self.wasted / 3 <= self.evicted / 4
            || self.offered.is_multiple_of(SAMPLED)
    }

    /// Caches a list (its references, without the APPENDS) in `set`.
    pub(super) fn insert(
        &mut self,
        set: usize,
        bytes: &[u8],
        stack: u32,
        generation: u32,
        how: Cached,
    ) {
        let w = self.next[set] as usize;
        self.next[set] = ((w + 1) % FRAMES_WAYS) as u8;
        self.last[set] = w as u8;
        let old = &self.slots[set * FRAMES_WAYS + w];
        if old.stack != NO_STACK && old.counted {
            self.evicted += 1;
            self.wasted += !old.hit as u32;
            if self.evicted == WASTE_WINDOW {
                self.evicted /= 2;
                self.wasted /= 2;
            }
        }
        self.slots[set * FRAMES_WAYS + w] = FramesSlot {
            tail: tail_word(bytes),
            bytes: bytes.into(),
            stack,
            generation,
            hit: how == Cached::Deep,
            counted: how != Cached::Fresh,
        };
    }

    /// The stack of a list missed by [`FramesCache::find`], by all its
    /// bytes; else the hash to cache it under.
    #[inline]
    pub(super) fn find_deep(&self, bytes: &[u8], generation: u32) -> Result<u32, u64> {
        let hash = self.hasher.hash_one(bytes);
        let set = deep_set(hash);
        self.deep
            .get(set * DEEP_WAYS..(set + 1) * DEEP_WAYS)
            .unwrap_or_default()
            .iter()
            .find(|d| {
                d.hash == hash
                    && d.generation == generation
                    && d.stack != NO_STACK
                    && *d.bytes == *bytes
            })
            .map(|d| d.stack)
            .ok_or(hash)
    }

    pub(super) fn insert_deep(&mut self, bytes: &[u8], hash: u64, stack: u32, generation: u32) {
        if self.deep.is_empty() {
            let empty = DeepSlot {
                bytes: Box::default(),
                hash: 0,
                stack: NO_STACK,
                generation: 0,
            };
            self.deep = vec![empty; DEEP_SETS * DEEP_WAYS];
            self.deep_next = vec![0; DEEP_SETS];
        }
        let set = deep_set(hash);
        let w = self.deep_next[set] as usize;
        self.deep_next[set] = ((w + 1) % DEEP_WAYS) as u8;
        self.deep[set * DEEP_WAYS + w] = DeepSlot {
            bytes: bytes.into(),
            stack,
            generation,
            hash,
        };
    }

    /// Forgets every list (when generations wrap around).
    pub(super) fn clear(&mut self) {
        self.slots.iter_mut().for_each(|c| c.stack = NO_STACK);
        self.deep.iter_mut().for_each(|c| c.stack = NO_STACK);
    }
}

/// The last 8 bytes of `b` (all of a shorter one) as a number.
#[inline]
pub(super) fn tail_word(b: &[u8]) -> u64 {
    match b.len().checked_sub(8) {
        Some(k) => u64::from_le_bytes(b[k..].try_into().expect("8 bytes")),
        None => le_word(b),
    }
}

/// `b`, of at most 8 bytes, as a little-endian number (zeros above it).
#[inline]
pub(super) fn le_word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(w)
}

/// The set of the fast path's frames cache for a list whose items start
/// at `b[0]`: its first 32 bytes (several references; a shorter list adds
/// the bytes after it, which only costs a miss where they differ). `None`
/// near the end of the input.
#[inline]
pub(super) fn frames_set(b: &[u8]) -> Option<usize> {
    let w: &[u8; 32] = b.get(..32)?.try_into().ok()?;
    let word = |k: usize| u64::from_le_bytes(w[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
    let h = (word(0) ^ word(1).rotate_left(17) ^ word(2).rotate_left(31) ^ word(3).rotate_left(47))
        .wrapping_mul(FX);
    Some((h >> 57) as usize % FRAMES_SETS)
}

/// Where a run of BINGET/LONG_BINGET opcodes starting at `b[i]` ends.
/// Eight bytes at a time while they are four BINGETs (most references of
/// a small memo), one opcode at a time otherwise.
#[inline]
pub(super) fn references_end(b: &[u8], mut i: usize) -> usize {
    const MASK: u64 = 0x00ff_00ff_00ff_00ff;
    const GETS: u64 = 0x0068_0068_0068_0068;
    loop {
        if let Some(w) = b.get(i..i + 8)
            && u64::from_le_bytes(w.try_into().expect("8 bytes")) & MASK == GETS
        {
            i += 8;
            continue;
        }
        match b.get(i) {
            Some(b'h') => i += 2,
            Some(b'j') => i += 5,
            _ => return i,
        }
    }
}
