//! A device's replayed series kept compact: about 10 bytes per moment
//! instead of the 112 of a [`Sample`], whose figures are read back exactly.
//!
//! Of a replayed sample, four figures follow from others and are not
//! stored: the event index (the position: `samples[0]` is the start,
//! `samples[i + 1]` the state after event `i`), `internal_free` (active −
//! allocated), `external_free` (inactive + pending) and `fragmentation`
//! (from the largest gap and the inactive bytes). The ten that remain (a
//! [`Row`]) are kept as a byte stream of differences from the row before,
//! because one event moves only a few of them: a header of ten bits saying
//! which figures changed and three a changed figure saying how many bytes
//! its change takes, then each change, zigzag-encoded, in that many bytes
//! (little-endian). The lengths are in the header rather than in each
//! byte (as in LEB128) so that neither writing nor reading a change
//! branches on its length, which no processor predicts. The differences are
//! taken against what the change of other figures predicts (an allocation
//! moves `active` by about what it moves `allocated`, and `inactive` by the
//! opposite; `reserved` is their sum with `pending`), so a typical event
//! costs a header of three bytes and three or four short changes.
//!
//! Every [`CHECKPOINT`] rows the stream restarts from zero (the row is
//! written whole) and its byte offset is kept aside, so sample `i` is
//! decoded from at most [`CHECKPOINT`] rows; reading in order, either way,
//! decodes each row about once.
//!
//! A sample that does not fit that form (one built by hand, with figures
//! that do not add up) turns the whole series into plain samples, so a
//! series always gives back exactly what was pushed.
//!
//! Owns only the storage; the figures come from `state`.

use super::{LayoutFigures, Sample};
use crate::model::fragmentation;

/// Rows from one restart of the stream to the next: `get` decodes at most
/// this many, and a restart costs a whole row (a few dozen bytes) and
/// its offset, under one byte per row at this spacing.
const CHECKPOINT: usize = 64;

/// The stored figures of a sample, by position in `Row::v`.
const TIME: usize = 0;
const ALLOCATED: usize = 1;
const ACTIVE: usize = 2;
const RESERVED: usize = 3;
const PENDING: usize = 4;
const INACTIVE: usize = 5;
const LARGEST_GAP: usize = 6;
const LARGEST_LARGE: usize = 7;
/// Free blocks, with [`TIMED`] set when the sample has a time.
const FREE_GAPS: usize = 8;
const LARGEST_SMALL: usize = 9;
const FIELDS: usize = 10;

const TIMED: u64 = 1 << 31;

/// Changes in a row of the stream, in the order of their mask bits: those
/// that change on most events first, so the mask usually fits one byte.
const D_TIME: usize = 0;
const D_ALLOCATED: usize = 1;
/// Of `active`, beyond the change of `allocated` (the rounding).
const D_ACTIVE: usize = 2;
const D_FREE_GAPS: usize = 3;
/// Of `inactive`, beyond the opposite of the change of `active`.
const D_INACTIVE: usize = 4;
const D_LARGEST_GAP: usize = 5;
/// Of the largest large request, beyond the change of the largest gap.
const D_LARGEST_LARGE: usize = 6;
/// Of `reserved`, beyond the changes of active, inactive and pending.
const D_RESERVED: usize = 7;
const D_PENDING: usize = 8;
const D_LARGEST_SMALL: usize = 9;

/// Bits of a row's header that say which figures changed; after them,
/// three a changed figure: its bytes, less one.
const HEADER_MASK_BITS: u32 = FIELDS as u32;
/// A header of at most five bytes and ten changes of at most eight.
const MAX_ROW_BYTES: usize = 5 + FIELDS * 8;
/// Room to write a row with a store of eight bytes a field, the last one
/// starting at most at byte `MAX_ROW_BYTES - 8`.
const ROW_BUF: usize = MAX_ROW_BYTES + 8;

/// The bytes of a row's header with changed-field mask `mask`.
#[inline(always)]
fn header_bytes(mask: u64) -> usize {
    (HEADER_MASK_BITS + 3 * mask.count_ones()).div_ceil(8) as usize
}

/// The figures of a replayed state that a [`Sample`] is made of (the
/// others follow from them): what the replay hands the series, so that a
/// row is built without making the sample and checking it adds up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Figures {
    pub time_us: Option<i64>,
    pub allocated: u64,
    pub active: u64,
    pub reserved: u64,
    pub pending: u64,
    /// Bytes of inactive blocks.
    pub inactive: u64,
    pub largest_gap: u64,
    pub free_gaps: u64,
    pub largest_small: u64,
    pub largest_large: u64,
}

impl Figures {
    /// The sample of these figures after `event` (`None`: the start).
    #[inline]
    pub fn sample(&self, event: Option<u32>) -> Sample {
        Sample {
            event,
            time_us: self.time_us,
            allocated: self.allocated,
            active: self.active,
            reserved: Some(self.reserved),
            external_free: Some(self.inactive.wrapping_add(self.pending)),
            layout: Some(LayoutFigures {
                internal_free: self.active.wrapping_sub(self.allocated),
                pending_free: self.pending,
                largest_free_gap: self.largest_gap,
                free_gaps: self.free_gaps,
                fragmentation: fragmentation(self.largest_gap, self.inactive),
                largest_small_request: self.largest_small,
                largest_large_request: self.largest_large,
            }),
        }
    }

    /// The row of these figures, when the series' form holds them:
    /// `Row::of(&self.sample(..), pos)` wherever that is `Some`, without
    /// the round trip (the derived figures are derived the same way).
    #[inline]
    fn row(&self, pos: usize) -> Option<Row> {
        let fits = self.free_gaps < TIMED
            && self.largest_small <= u64::from(u32::MAX)
            && self.inactive.checked_add(self.pending).is_some()
            && pos.checked_sub(1).is_none_or(|e| u32::try_from(e).is_ok());
        if !fits {
            return None;
        }
        let mut v = [0; FIELDS];
        v[TIME] = self.time_us.unwrap_or(0) as u64;
        v[ALLOCATED] = self.allocated;
        v[ACTIVE] = self.active;
        v[RESERVED] = self.reserved;
        v[PENDING] = self.pending;
        v[INACTIVE] = self.inactive;
        v[LARGEST_GAP] = self.largest_gap;
        v[LARGEST_LARGE] = self.largest_large;
        v[FREE_GAPS] = self.free_gaps | if self.time_us.is_some() { TIMED } else { 0 };
        v[LARGEST_SMALL] = self.largest_small;
        Some(Row { v })
    }
}

/// Figures as stored, the time as the bits of an `i64` (0 when untimed).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Row {
    v: [u64; FIELDS],
}

impl Row {
    /// The row of `s` when `s` is sample number `pos` of a replay.
    fn of(s: &Sample, pos: usize) -> Option<Row> {
        let event = match pos.checked_sub(1) {
            None => None,
            Some(e) => Some(u32::try_from(e).ok()?),
        };
        // A sample without a layout (or a reserved figure) is kept plain.
        let (l, reserved, external) = (s.layout?, s.reserved?, s.external_free?);
        let r = Figures {
            time_us: s.time_us,
            allocated: s.allocated,
            active: s.active,
            reserved,
            pending: l.pending_free,
            inactive: external.checked_sub(l.pending_free)?,
            largest_gap: l.largest_free_gap,
            free_gaps: l.free_gaps,
            largest_small: l.largest_small_request,
            largest_large: l.largest_large_request,
        }
        .row(pos)?;
        // Bitwise, so a NaN or a rounding difference falls back too.
        let same = |a: &Sample, b: &LayoutFigures| {
            let x = a.lay();
            (x.internal_free, x.fragmentation.to_bits())
                == (b.internal_free, b.fragmentation.to_bits())
        };
        let back = r.sample(pos);
        (back.event == event && back.event == s.event && same(&back, &l)).then_some(r)
    }

    #[inline]
    fn sample(&self, pos: usize) -> Sample {
        let v = &self.v;
        Sample {
            event: pos.checked_sub(1).map(|e| e as u32),
            time_us: (v[FREE_GAPS] & TIMED != 0).then_some(v[TIME] as i64),
            allocated: v[ALLOCATED],
            active: v[ACTIVE],
            reserved: Some(v[RESERVED]),
            external_free: Some(v[INACTIVE] + v[PENDING]),
            layout: Some(LayoutFigures {
                internal_free: v[ACTIVE].wrapping_sub(v[ALLOCATED]),
                pending_free: v[PENDING],
                largest_free_gap: v[LARGEST_GAP],
                free_gaps: v[FREE_GAPS] & !TIMED,
                fragmentation: fragmentation(v[LARGEST_GAP], v[INACTIVE]),
                largest_small_request: v[LARGEST_SMALL],
                largest_large_request: v[LARGEST_LARGE],
            }),
        }
    }

    /// The changes from `prev` to `self`, in mask order (wrapping, so any
    /// pair of rows has them).
    #[inline]
    fn changes(&self, prev: &Row) -> [u64; FIELDS] {
        let d = |f: usize| self.v[f].wrapping_sub(prev.v[f]);
        let (active, inactive, pending) = (d(ACTIVE), d(INACTIVE), d(PENDING));
        let mut c = [0; FIELDS];
        c[D_TIME] = d(TIME);
        c[D_ALLOCATED] = d(ALLOCATED);
        c[D_ACTIVE] = active.wrapping_sub(d(ALLOCATED));
        c[D_FREE_GAPS] = d(FREE_GAPS);
        c[D_INACTIVE] = inactive.wrapping_add(active);
        c[D_LARGEST_GAP] = d(LARGEST_GAP);
        c[D_LARGEST_LARGE] = d(LARGEST_LARGE).wrapping_sub(d(LARGEST_GAP));
        c[D_RESERVED] = d(RESERVED)
            .wrapping_sub(active)
            .wrapping_sub(inactive)
            .wrapping_sub(pending);
        c[D_PENDING] = pending;
        c[D_LARGEST_SMALL] = d(LARGEST_SMALL);
        c
    }

    /// Moves `self` by `changes` (the inverse of [`Row::changes`]).
    #[inline(always)]
    fn apply(&mut self, c: &[u64; FIELDS]) {
        let v = &mut self.v;
        let active = c[D_ALLOCATED].wrapping_add(c[D_ACTIVE]);
        let inactive = c[D_INACTIVE].wrapping_sub(active);
        let gap = c[D_LARGEST_GAP];
        let reserved = c[D_RESERVED]
            .wrapping_add(active)
            .wrapping_add(inactive)
            .wrapping_add(c[D_PENDING]);
        v[TIME] = v[TIME].wrapping_add(c[D_TIME]);
        v[ALLOCATED] = v[ALLOCATED].wrapping_add(c[D_ALLOCATED]);
        v[ACTIVE] = v[ACTIVE].wrapping_add(active);
        v[RESERVED] = v[RESERVED].wrapping_add(reserved);
        v[PENDING] = v[PENDING].wrapping_add(c[D_PENDING]);
        v[INACTIVE] = v[INACTIVE].wrapping_add(inactive);
        v[LARGEST_GAP] = v[LARGEST_GAP].wrapping_add(gap);
        v[LARGEST_LARGE] = v[LARGEST_LARGE].wrapping_add(c[D_LARGEST_LARGE].wrapping_add(gap));
        v[FREE_GAPS] = v[FREE_GAPS].wrapping_add(c[D_FREE_GAPS]);
        v[LARGEST_SMALL] = v[LARGEST_SMALL].wrapping_add(c[D_LARGEST_SMALL]);
    }

    /// Appends the row as changes from `prev` to `out`.
    #[inline]
    fn encode(&self, prev: &Row, out: &mut Vec<u8>) {
        let c = self.changes(prev);
        let mut mask = 0u64;
        for (k, x) in c.iter().enumerate() {
            mask |= u64::from(*x != 0) << k;
        }
        // Each change as many bytes as it needs, stored as a word (the
        // bytes past it written over by the next): no branch on its
        // length, which follows no pattern a processor could predict.
        let mut buf = [0u8; ROW_BUF];
        let (mut header, mut bits) = (mask, HEADER_MASK_BITS);
        let mut p = header_bytes(mask);
        let mut m = mask;
        while m != 0 {
            let k = m.trailing_zeros() as usize;
            m &= m - 1;
            // Zigzag: small changes either way take few bytes.
            let x = c[k];
            let z = (x << 1) ^ (((x as i64) >> 63) as u64);
            let len = (64 - u64::from((z | 1).leading_zeros())).div_ceil(8);
            header |= (len - 1) << bits;
            bits += 3;
            buf[p..p + 8].copy_from_slice(&z.to_le_bytes());
            p += len as usize;
        }
        // The header's bytes are still zeros, the first changes after them.
        let first = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
        buf[..8].copy_from_slice(&(first | header).to_le_bytes());
        // A copy of a fixed length, then the length set: a copy of the
        // row's own length is a call that branches on it.
        let at = out.len();
        out.extend_from_slice(&buf);
        out.truncate(at + p);
    }

    /// Moves `self` to the row written at `*pos` after it, and `*pos`
    /// past that row.
    #[inline(always)]
    fn advance(&mut self, bytes: &[u8], pos: &mut usize) {
        // Eight bytes from `at`, zeros past the end of the stream.
        let word = |at: usize| match bytes.get(at..at + 8) {
            Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")),
            None => {
                let rest = bytes.get(at..).unwrap_or_default();
                let mut w = [0u8; 8];
                w[..rest.len()].copy_from_slice(rest);
                u64::from_le_bytes(w)
            }
        };
        let header = word(*pos);
        let mut mask = header & ((1 << HEADER_MASK_BITS) - 1);
        let mut lens = header >> HEADER_MASK_BITS;
        let mut p = *pos + header_bytes(mask);
        let mut c = [0u64; FIELDS];
        while mask != 0 {
            let k = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let n = (lens & 7) as usize + 1;
            lens >>= 3;
            let z = word(p) & (u64::MAX >> (64 - 8 * n));
            p += n;
            c[k] = (z >> 1) ^ (z & 1).wrapping_neg();
        }
        *pos = p;
        self.apply(&c);
    }
}

/// The delta-encoded rows (see the module doc).
#[derive(Debug, Clone, Default)]
struct Packed {
    bytes: Vec<u8>,
    /// Byte offset of row `k * CHECKPOINT`, where the stream restarts.
    checkpoints: Vec<usize>,
    len: usize,
    /// The last row pushed, which the next is written against.
    last: Row,
}

impl Packed {
    fn with_capacity(n: usize) -> Packed {
        Packed {
            // A replayed row averages well under 16 bytes; the rest of a
            // reservation is never touched.
            bytes: Vec::with_capacity(n.saturating_mul(16)),
            checkpoints: Vec::with_capacity(n.div_ceil(CHECKPOINT)),
            ..Packed::default()
        }
    }

    #[inline]
    fn push(&mut self, r: Row) {
        let prev = if self.len.is_multiple_of(CHECKPOINT) {
            self.checkpoints.push(self.bytes.len());
            Row::default()
        } else {
            self.last
        };
        r.encode(&prev, &mut self.bytes);
        self.last = r;
        self.len += 1;
    }

    /// Row `i < len`: decoded from the checkpoint before it.
    fn row(&self, i: usize) -> Row {
        if i + 1 == self.len {
            return self.last;
        }
        let mut pos = self.checkpoints[i / CHECKPOINT];
        let mut r = Row::default();
        for _ in 0..=i % CHECKPOINT {
            r.advance(&self.bytes, &mut pos);
        }
        r
    }

    /// Rows at ascending indices `at` (each below `len`), each as
    /// [`Packed::row`] gives it: a row in the block of the one before it
    /// is decoded on from that one, not from the block's start again.
    fn rows_ascending(&self, at: &[usize], mut f: impl FnMut(usize, Row)) {
        // The row before `next`, and where `next`'s bytes start.
        let mut next = 0;
        let mut pos = 0;
        let mut r = Row::default();
        for &i in at {
            if i + 1 == self.len {
                f(i, self.last);
                continue;
            }
            let same_block = next > 0 && next <= i + 1 && (next - 1) / CHECKPOINT == i / CHECKPOINT;
            if !same_block {
                next = i - i % CHECKPOINT;
                pos = self.checkpoints[i / CHECKPOINT];
                r = Row::default();
            }
            for _ in next..=i {
                r.advance(&self.bytes, &mut pos);
            }
            next = i + 1;
            f(i, r);
        }
    }

    /// Rows `first..` to the end of `first`'s checkpoint block, into `out`.
    fn block(&self, first: usize, out: &mut Vec<Row>) {
        out.clear();
        let end = (first + CHECKPOINT).min(self.len);
        let mut pos = self.checkpoints[first / CHECKPOINT];
        let mut r = Row::default();
        for _ in first..end {
            r.advance(&self.bytes, &mut pos);
            out.push(r);
        }
    }
}

#[derive(Debug, Clone)]
enum Store {
    Compact(Packed),
    Plain(Vec<Sample>),
}

/// The samples of one device's replay, in order (see [`super::DeviceReplay`]).
#[derive(Debug, Clone)]
pub struct Series {
    store: Store,
    /// The largest reserved figure pushed (0 for none): what the moments
    /// near the peak are measured against, known before any read.
    peak_reserved: u64,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            store: Store::Compact(Packed::default()),
            peak_reserved: 0,
        }
    }
}

impl Series {
    pub fn with_capacity(n: usize) -> Series {
        Series {
            store: Store::Compact(Packed::with_capacity(n)),
            peak_reserved: 0,
        }
    }

    /// A series kept as its samples, uncompressed: a profiler trace's, whose
    /// samples have no layout to encode.
    pub fn plain(v: Vec<Sample>) -> Series {
        Series {
            peak_reserved: v.iter().map(|s| s.reserved_bytes()).max().unwrap_or(0),
            store: Store::Plain(v),
        }
    }

    /// The largest reserved figure of the samples (0 for none; a sample
    /// without one counts as 0).
    pub fn peak_reserved(&self) -> u64 {
        self.peak_reserved
    }

    pub fn len(&self) -> usize {
        match &self.store {
            Store::Compact(p) => p.len,
            Store::Plain(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the samples are kept in the compact form (every replayed
    /// series is; only samples that do not add up turn it plain).
    pub fn is_compact(&self) -> bool {
        matches!(self.store, Store::Compact(_))
    }

    /// Appends a sample (the event index it carries is the position's).
    pub fn push(&mut self, s: Sample) {
        self.peak_reserved = self.peak_reserved.max(s.reserved_bytes());
        let plain = match &mut self.store {
            Store::Compact(p) => match Row::of(&s, p.len) {
                Some(r) => return p.push(r),
                None => None,
            },
            Store::Plain(v) => Some(v),
        };
        match plain {
            Some(v) => v.push(s),
            None => {
                let mut plain: Vec<Sample> = Vec::with_capacity(self.len() + 1);
                plain.extend(self.iter());
                plain.push(s);
                self.store = Store::Plain(plain);
            }
        }
    }

    /// Appends the sample of `f` as the next one (the event index is the
    /// position's): the same as `push(f.sample(..))`, quicker.
    #[inline]
    pub(crate) fn push_figures(&mut self, f: &Figures) {
        let pos = self.len();
        if let Store::Compact(p) = &mut self.store
            && let Some(r) = f.row(pos)
        {
            self.peak_reserved = self.peak_reserved.max(f.reserved);
            return p.push(r);
        }
        self.push(f.sample(pos.checked_sub(1).map(|e| e as u32)));
    }

    /// Sample `i`, decoded from at most [`CHECKPOINT`] rows; reading many in
    /// order is quicker with [`Series::iter`].
    pub fn get(&self, i: usize) -> Option<Sample> {
        match &self.store {
            Store::Compact(p) => (i < p.len).then(|| p.row(i).sample(i)),
            Store::Plain(v) => v.get(i).copied(),
        }
    }

    /// Samples `at` (ascending, each below [`Series::len`]), as
    /// [`Series::at`] gives each: a block of rows is decoded once for all
    /// the samples in it, where each sample decoded it from its start.
    pub fn at_ascending(&self, at: &[usize]) -> Vec<Sample> {
        debug_assert!(at.is_sorted());
        match &self.store {
            Store::Compact(p) => {
                let mut out = Vec::with_capacity(at.len());
                p.rows_ascending(at, |i, r| out.push(r.sample(i)));
                out
            }
            Store::Plain(v) => at.iter().map(|&i| v[i]).collect(),
        }
    }

    /// Sample `i`; panics past the end, as indexing a slice does.
    pub fn at(&self, i: usize) -> Sample {
        let n = self.len();
        self.get(i)
            .unwrap_or_else(|| panic!("sample {i} of a series of {n}"))
    }

    pub fn first(&self) -> Option<Sample> {
        self.get(0)
    }

    pub fn last(&self) -> Option<Sample> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            series: self,
            front: 0,
            back: self.len(),
            pos: 0,
            prev: Row::default(),
            block: Vec::new(),
            block_start: 0,
        }
    }

    pub fn to_vec(&self) -> Vec<Sample> {
        self.iter().collect()
    }

    /// Bytes the samples take (not counting spare capacity).
    pub fn heap_bytes(&self) -> usize {
        match &self.store {
            Store::Compact(p) => p.bytes.len() + p.checkpoints.len() * std::mem::size_of::<usize>(),
            Store::Plain(v) => v.len() * std::mem::size_of::<Sample>(),
        }
    }
}

impl PartialEq for Series {
    fn eq(&self, o: &Series) -> bool {
        self.len() == o.len() && self.iter().eq(o.iter())
    }
}

impl From<Vec<Sample>> for Series {
    fn from(v: Vec<Sample>) -> Series {
        v.into_iter().collect()
    }
}

impl FromIterator<Sample> for Series {
    fn from_iter<I: IntoIterator<Item = Sample>>(it: I) -> Series {
        let it = it.into_iter();
        let mut s = Series::with_capacity(it.size_hint().0);
        for x in it {
            s.push(x);
        }
        s
    }
}

/// The samples of a [`Series`], by value. Forwards, each row is decoded
/// from the one before; backwards, a checkpoint block at a time.
#[derive(Clone)]
pub struct Iter<'a> {
    series: &'a Series,
    front: usize,
    back: usize,
    /// Where row `front` starts in the stream, and row `front - 1`.
    pos: usize,
    prev: Row,
    /// Decoded rows `block_start..` of the block `back` last fell in.
    block: Vec<Row>,
    block_start: usize,
}

impl Iterator for Iter<'_> {
    type Item = Sample;
    #[inline]
    fn next(&mut self) -> Option<Sample> {
        if self.front >= self.back {
            return None;
        }
        let i = self.front;
        self.front += 1;
        match &self.series.store {
            Store::Compact(p) => {
                if i.is_multiple_of(CHECKPOINT) {
                    self.prev = Row::default();
                }
                self.prev.advance(&p.bytes, &mut self.pos);
                Some(self.prev.sample(i))
            }
            Store::Plain(v) => v.get(i).copied(),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
    /// Jumps to the checkpoint before sample `front + n` instead of
    /// decoding every row on the way (`skip` calls this).
    fn nth(&mut self, n: usize) -> Option<Sample> {
        let target = self.front.saturating_add(n);
        if target >= self.back {
            self.front = self.back;
            return None;
        }
        let start = target - target % CHECKPOINT;
        if let Store::Compact(p) = &self.series.store
            && start > self.front
        {
            self.front = start;
            self.pos = p.checkpoints[start / CHECKPOINT];
            self.prev = Row::default();
        }
        if let Store::Plain(_) = &self.series.store {
            self.front = target;
        }
        while self.front < target {
            self.next();
        }
        self.next()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Sample> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        let i = self.back;
        match &self.series.store {
            Store::Compact(p) => {
                if self.block.is_empty() || i < self.block_start {
                    self.block_start = i - i % CHECKPOINT;
                    p.block(self.block_start, &mut self.block);
                }
                Some(self.block[i - self.block_start].sample(i))
            }
            Store::Plain(v) => v.get(i).copied(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Series {
    type Item = Sample;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests;
