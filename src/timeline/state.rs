//! The allocator layout of one device at one moment, built so that a
//! trace action costs a few binary searches over short vectors: segments in
//! a sorted vector by address ([`VecMap`], which remembers the last segment
//! found), each with its live blocks (allocated or pending-free) in a sorted
//! vector of addresses with the blocks out of line ([`SlabMap`]), and the free blocks kept only as a multiset of sizes
//! per pool class ([`GapSizes`], which answers the largest in O(1)). Free blocks are not stored: the allocator merges a freed
//! block with free neighbours at once, so a free block is always the whole
//! run between two live blocks (or a segment edge) — which the real
//! snapshots confirm (no two neighbouring inactive blocks in any of them).
//!
//! Owns the mechanics of one step (insert, remove, resize a block; add,
//! remove, grow, cut a segment) and the running totals. Which step a trace
//! event means, and in which direction, is decided in `forward`/`backward`.

use super::gaps::GapSizes;
use super::policy::SMALL_SIZE;
use super::series::Figures;
use super::sorted::{SlabMap, VecMap};
use super::{AnomalyKind, Origin};
use crate::model::*;
use std::sync::atomic::{AtomicUsize, Ordering};

mod mapping;

/// An anomaly found while applying one event.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    pub kind: AnomalyKind,
    pub msg: String,
}

impl Problem {
    pub fn new(kind: AnomalyKind, msg: String) -> Problem {
        Problem { kind, msg }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Live {
    pub size: u64,
    pub requested: u64,
    pub pending: bool,
    pub frames: StackId,
    pub origin: Origin,
    /// The size was inferred from a request (the block was allocated before
    /// the trace began), so it may still be widened.
    pub inferred: bool,
}

impl Live {
    fn allocated_bytes(&self) -> u64 {
        self.requested.min(self.size)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Seg {
    pub size: u64,
    pub stream: i64,
    pub kind: SegmentType,
    pub pool_id: Option<(i64, i64)>,
    pub is_expandable: Option<bool>,
    pub frames: StackId,
    pub blocks: SlabMap<Live>,
    /// Pool type guessed from the size (segment not in the final state).
    pub kind_inferred: bool,
}

impl Seg {
    pub fn expandable(&self) -> bool {
        self.is_expandable.unwrap_or(false)
    }
    fn class(&self) -> usize {
        if self.pool_id.is_some_and(|p| p != (0, 0)) {
            CLASS_PRIVATE
        } else if self.kind == SegmentType::Small {
            CLASS_SMALL
        } else {
            CLASS_LARGE
        }
    }
}

const CLASS_SMALL: usize = 0;
const CLASS_LARGE: usize = 1;
/// Private pools (CUDA graphs, MemPool) serve only their own allocations.
const CLASS_PRIVATE: usize = 2;

/// The running totals and the free-block index, kept apart from the
/// segments so one can be updated while the other is borrowed.
#[derive(Debug, Clone, Default, PartialEq)]
struct Index {
    /// Off while the trace is undone: only the forward replay reports
    /// figures, so the rebuild of the start skips the bookkeeping.
    on: bool,
    /// Free-block sizes per class, each with how many blocks have it.
    gaps: [GapSizes; 3],
    /// The largest of `gaps[c]`, kept apart because every sample reads it.
    max: [u64; 3],
    free_blocks: u64,
    reserved: u64,
    /// Requested bytes of allocated blocks.
    allocated: u64,
    /// Block bytes of allocated blocks.
    active: u64,
    pending: u64,
    /// Requested bytes of pending-free blocks (what `allocated` counted
    /// before their `free_requested`).
    pending_requested: u64,
    inactive: u64,
}

impl Index {
    fn add_gap(&mut self, class: usize, start: u64, end: u64) {
        if self.on && end > start {
            self.gaps[class].add(end - start);
            self.max[class] = self.max[class].max(end - start);
            self.free_blocks += 1;
            self.inactive += end - start;
        }
    }

    fn remove_gap(&mut self, class: usize, start: u64, end: u64) {
        if self.on && end > start {
            let size = end - start;
            let found = self.gaps[class].remove(size);
            debug_assert!(found, "gap index out of step at {start:#x}");
            if size == self.max[class] {
                self.max[class] = self.gaps[class].max();
            }
            self.free_blocks -= 1;
            self.inactive -= size;
        }
    }

    fn count_live(&mut self, b: &Live, add: bool) {
        if !self.on {
            return;
        }
        let (al, ac, pe, pr) = if b.pending {
            (0, 0, b.size, b.allocated_bytes())
        } else {
            (b.allocated_bytes(), b.size, 0, 0)
        };
        if add {
            self.allocated += al;
            self.active += ac;
            self.pending += pe;
            self.pending_requested += pr;
        } else {
            self.allocated -= al;
            self.active -= ac;
            self.pending -= pe;
            self.pending_requested -= pr;
        }
    }

    fn class_max(&self, c: usize) -> u64 {
        self.max[c]
    }
}

/// Regions of the address space with a remembered segment each.
const PAGES: usize = 1024;
/// 2 MiB: the smallest segment the allocator maps.
const PAGE_SHIFT: u32 = 21;

/// The segments by address, with the segment last found in each 2 MiB
/// region of the address space remembered (regions share entries modulo
/// [`PAGES`]): block events jump between segments, so one remembered
/// segment would mostly miss, and a miss costs a binary search.
#[derive(Debug)]
pub(crate) struct Segs {
    map: VecMap<Seg>,
    /// A slot of `map` per region; a guess, checked before use.
    pages: Box<[AtomicUsize]>,
}

impl Default for Segs {
    fn default() -> Self {
        Segs {
            map: VecMap::default(),
            pages: (0..PAGES).map(|_| AtomicUsize::new(0)).collect(),
        }
    }
}

impl Clone for Segs {
    fn clone(&self) -> Self {
        Segs {
            map: self.map.clone(),
            pages: self
                .pages
                .iter()
                .map(|p| AtomicUsize::new(p.load(Ordering::Relaxed)))
                .collect(),
        }
    }
}

impl std::ops::Deref for Segs {
    type Target = VecMap<Seg>;
    fn deref(&self) -> &VecMap<Seg> {
        &self.map
    }
}

impl std::ops::DerefMut for Segs {
    fn deref_mut(&mut self) -> &mut VecMap<Seg> {
        &mut self.map
    }
}

impl Segs {
    /// Start address of the segment holding `x`.
    #[inline]
    fn containing(&self, x: u64) -> Option<u64> {
        let memo = &self.pages[(x >> PAGE_SHIFT) as usize % PAGES];
        self.map.containing_via(x, memo, |a, s| x < a + s.size)
    }
}

/// A free block found by [`Layout::gap_at`]: `[start, end)`, and the position
/// among the segment's live blocks of a block inserted in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Gap {
    pub start: u64,
    pub end: u64,
    at: usize,
}

impl Gap {
    /// The same free block after the live block before it grew to `start`.
    pub fn from(self, start: u64) -> Gap {
        debug_assert!(self.start <= start && start <= self.end);
        Gap { start, ..self }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Layout {
    pub segs: Segs,
    idx: Index,
}

impl Layout {
    /// The same layout without the totals and the free-block index, for a
    /// replay that only wants the blocks (a moment's state).
    pub fn clone_unindexed(&self) -> Layout {
        Layout {
            segs: self.segs.clone(),
            idx: Index::default(),
        }
    }

    /// Starts (or stops) keeping the totals and the free-block index; starting
    /// builds them from the current layout.
    pub fn set_indexed(&mut self, on: bool) {
        self.idx = Index {
            on,
            ..Index::default()
        };
        if on {
            let addrs: Vec<u64> = self.segs.keys().copied().collect();
            for a in addrs {
                self.index_seg(a);
            }
        }
    }

    /// Builds the layout of the recorded segments of one device, without
    /// the index (see [`Layout::set_indexed`]). Inactive blocks are not
    /// read: they are the runs between live blocks.
    ///
    /// A file can contradict itself where no allocator could: segments that
    /// overlap or run past the end of the address space, live blocks that
    /// overlap, are empty or leave their segment. Every later step (and the
    /// promise that blocks tile their segments) assumes a layout an allocator
    /// could have, so such records are left out, each one returned as a
    /// problem; the final-state comparison then shows the difference too.
    pub fn from_segments<'a>(
        segs: impl IntoIterator<Item = &'a Segment>,
    ) -> (Layout, Vec<Problem>) {
        let mut l = Layout::default();
        let mut problems = Vec::new();
        let mut bad = |msg: String| {
            problems.push(Problem::new(
                AnomalyKind::InconsistentRecord,
                format!("recorded state: {msg}"),
            ))
        };
        let mut segs: Vec<&Segment> = segs.into_iter().collect();
        // Stable: of two records at one address the first one is kept.
        segs.sort_by_key(|s| s.address);
        let mut seg_end = 0u64;
        for (i, s) in segs.iter().enumerate() {
            let Some(end) = s.address.checked_add(s.total_size) else {
                bad(format!(
                    "the segment at {:#x} ({} bytes) runs past the end of the address space; left out",
                    s.address, s.total_size
                ));
                continue;
            };
            if i > 0 && s.address < seg_end {
                bad(format!(
                    "the segment at {:#x} ({} bytes) overlaps the one before it (ending at {seg_end:#x}); left out",
                    s.address, s.total_size
                ));
                continue;
            }
            seg_end = end;
            let mut live: Vec<&Block> = s
                .blocks
                .iter()
                .filter(|b| b.state != BlockState::Inactive)
                .collect();
            live.sort_by_key(|b| b.address);
            let mut blocks = SlabMap::default();
            let mut cur = s.address;
            for b in live {
                let inside = b.address >= cur
                    && b.size > 0
                    && b.address.checked_add(b.size).is_some_and(|e| e <= end);
                if !inside {
                    bad(format!(
                        "the {} block at {:#x} ({} bytes) {} in the segment at {:#x} ({} bytes); left out",
                        b.state.as_str(),
                        b.address,
                        b.size,
                        if b.size == 0 {
                            "is empty"
                        } else if b.address < cur && b.address >= s.address {
                            "overlaps the live block before it"
                        } else {
                            "lies outside its segment"
                        },
                        s.address,
                        s.total_size
                    ));
                    continue;
                }
                cur = b.address + b.size;
                blocks.insert(
                    b.address,
                    Live {
                        size: b.size,
                        requested: b.requested_or_size(),
                        pending: b.state == BlockState::ActivePendingFree,
                        frames: b.frames,
                        origin: Origin::OlderThanTrace,
                        inferred: false,
                    },
                );
            }
            let seg = Seg {
                size: s.total_size,
                stream: s.stream,
                kind: s.segment_type,
                pool_id: s.pool_id,
                is_expandable: s.is_expandable,
                frames: s.frames,
                blocks,
                kind_inferred: false,
            };
            l.insert_seg(s.address, seg);
        }
        (l, problems)
    }

    /// Start address of the segment holding `x`.
    pub fn seg_containing(&self, x: u64) -> Option<u64> {
        self.segs.containing(x)
    }

    /// Whether any segment intersects `[x, x + size)`.
    pub fn overlaps_any(&self, x: u64, size: u64) -> bool {
        self.seg_containing(x).is_some()
            || self
                .segs
                .first_at_or_after(x)
                .is_some_and(|a| a < x.saturating_add(size))
    }

    /// The free block holding `x`, as `[start, end)`, with the position a
    /// block at `x` takes among the segment's live blocks (for
    /// [`Layout::insert_live`], which then does not search again); `Err(start
    /// of the live block)` when `x` lies inside a live block.
    pub fn gap_at(&self, sa: u64, x: u64) -> Result<Gap, u64> {
        let seg = &self.segs[&sa];
        let (at, before, after) = seg.blocks.around_at(x);
        let mut g0 = sa;
        if let Some((a, b)) = before {
            if a + b.size > x {
                return Err(a);
            }
            g0 = a + b.size;
        }
        Ok(Gap {
            start: g0,
            end: after.unwrap_or(sa + seg.size),
            at,
        })
    }

    /// Block bytes of live blocks, pending ones included.
    pub fn active_and_pending(&self) -> u64 {
        self.idx.active + self.idx.pending
    }

    /// Requested bytes of live blocks, pending-free ones included: what
    /// PyTorch's memory_viz counts as allocated (until `free_completed`).
    pub fn allocated_incl_pending(&self) -> u64 {
        self.idx.allocated + self.idx.pending_requested
    }

    /// Puts a live block into the free block that holds it, as
    /// [`Layout::gap_at`] gave it (with nothing inserted or removed since).
    pub fn insert_live(&mut self, sa: u64, x: u64, b: Live, gap: Gap) {
        let seg = self.segs.get_mut(&sa).expect("segment");
        let class = seg.class();
        let Gap {
            start: g0,
            end: g1,
            at,
        } = gap;
        debug_assert!(g0 <= x && x + b.size <= g1);
        self.idx.remove_gap(class, g0, g1);
        self.idx.add_gap(class, g0, x);
        self.idx.add_gap(class, x + b.size, g1);
        self.idx.count_live(&b, true);
        seg.blocks.insert_at(at, x, b);
    }

    /// Removes the live block at `x`; its bytes merge with free neighbours.
    /// Returns it and the free block that now holds `x` (as
    /// [`Layout::gap_at`] would give it).
    pub fn remove_live(&mut self, sa: u64, x: u64) -> Option<(Live, Gap)> {
        let seg = self.segs.get_mut(&sa)?;
        let class = seg.class();
        let seg_end = sa + seg.size;
        let (b, before, after, at) = seg.blocks.remove_around(&x)?;
        let g0 = before.map_or(sa, |(a, p)| a + p.size);
        let g1 = after.unwrap_or(seg_end);
        self.idx.remove_gap(class, g0, x);
        self.idx.remove_gap(class, x + b.size, g1);
        self.idx.add_gap(class, g0, g1);
        self.idx.count_live(&b, false);
        Some((
            b,
            Gap {
                start: g0,
                end: g1,
                at,
            },
        ))
    }

    pub fn set_pending(&mut self, sa: u64, x: u64, pending: bool) {
        let b = self
            .segs
            .get_mut(&sa)
            .and_then(|s| s.blocks.get_mut(&x))
            .expect("live block");
        self.idx.count_live(b, false);
        b.pending = pending;
        self.idx.count_live(b, true);
    }

    /// Grows the live block at `x` to `new_size` into the free block after it.
    pub fn widen_live(&mut self, sa: u64, x: u64, new_size: u64) {
        let seg = self.segs.get_mut(&sa).expect("segment");
        let class = seg.class();
        let g1_default = sa + seg.size;
        let old = seg.blocks[&x].size;
        let end = x + old;
        let g1 = seg.blocks.first_at_or_after(end).unwrap_or(g1_default);
        debug_assert!(x + new_size <= g1 && new_size >= old);
        self.idx.remove_gap(class, end, g1);
        self.idx.add_gap(class, x + new_size, g1);
        let b = seg.blocks.get_mut(&x).expect("live block");
        self.idx.count_live(b, false);
        b.size = new_size;
        self.idx.count_live(b, true);
    }

    /// The live block that ends where `gap` (as [`Layout::gap_at`] gave it)
    /// begins, when it may be widened: its address and requested bytes.
    pub fn inferred_block_before(&self, sa: u64, gap: Gap) -> Option<(u64, u64)> {
        let seg = &self.segs[&sa];
        let (a, b) = seg.blocks.entry(gap.at.checked_sub(1)?);
        (a + b.size == gap.start && b.inferred).then_some((a, b.requested))
    }

    fn index_seg(&mut self, sa: u64) {
        let seg = &self.segs[&sa];
        let class = seg.class();
        if !self.idx.on {
            return;
        }
        self.idx.reserved += seg.size;
        let mut cur = sa;
        for (a, b) in &seg.blocks {
            self.idx.add_gap(class, cur, *a);
            self.idx.count_live(b, true);
            cur = a + b.size;
        }
        self.idx.add_gap(class, cur, sa + seg.size);
    }

    fn unindex_seg(&mut self, sa: u64) {
        let seg = &self.segs[&sa];
        let class = seg.class();
        if !self.idx.on {
            return;
        }
        self.idx.reserved -= seg.size;
        let mut cur = sa;
        for (a, b) in &seg.blocks {
            self.idx.remove_gap(class, cur, *a);
            self.idx.count_live(b, false);
            cur = a + b.size;
        }
        self.idx.remove_gap(class, cur, sa + seg.size);
    }

    pub fn insert_seg(&mut self, sa: u64, seg: Seg) {
        self.segs.insert(sa, seg);
        self.index_seg(sa);
    }

    pub fn remove_seg(&mut self, sa: u64) -> Option<Seg> {
        if !self.segs.contains_key(&sa) {
            return None;
        }
        self.unindex_seg(sa);
        self.segs.remove(&sa)
    }

    /// Changes a segment's pool type (a guess corrected by an allocation).
    pub fn set_kind(&mut self, sa: u64, kind: SegmentType) {
        self.unindex_seg(sa);
        let s = self.segs.get_mut(&sa).expect("segment");
        s.kind = kind;
        s.kind_inferred = false;
        self.index_seg(sa);
    }

    #[cfg(test)]
    pub fn sample(&self, event: Option<u32>, time_us: Option<i64>) -> super::Sample {
        self.figures(time_us).sample(event)
    }

    /// The figures of the running totals: what a [`super::Sample`] holds, less
    /// what follows from them.
    #[inline]
    pub fn figures(&self, time_us: Option<i64>) -> Figures {
        let x = &self.idx;
        // One look-up per class for every sample (one per event).
        let max = [0, 1, 2].map(|c| x.class_max(c));
        Figures {
            time_us,
            allocated: x.allocated,
            active: x.active,
            reserved: x.reserved,
            pending: x.pending,
            inactive: x.inactive,
            largest_gap: max[0].max(max[1]).max(max[2]),
            free_gaps: x.free_blocks,
            largest_small: max[CLASS_SMALL].min(SMALL_SIZE),
            largest_large: max[CLASS_LARGE],
        }
    }

    /// The layout as snapshot records (blocks tiling each segment).
    pub fn to_segments(&self, device: i64) -> Vec<Segment> {
        self.segments(device).collect()
    }

    /// How many segments [`Layout::segments`] gives.
    pub fn segment_count(&self) -> usize {
        self.segs.iter().len()
    }

    /// [`Layout::to_segments`] one segment at a time, in address order.
    pub fn segments(&self, device: i64) -> impl Iterator<Item = Segment> + '_ {
        self.segs.iter().map(move |(sa, s)| {
            // The tiles counted first: a state of many blocks is held whole
            // (the end's, a moment's), so no spare room in each segment.
            let (mut tiles, mut end) = (0, *sa);
            for (a, b) in &s.blocks {
                tiles += 1 + (*a > end) as usize;
                end = a + b.size;
            }
            let mut blocks = Vec::with_capacity(tiles + (sa + s.size > end) as usize);
            let mut cur = *sa;
            let (mut alloc, mut active, mut req) = (0, 0, 0);
            let free = |a: u64, size: u64| Block {
                address: a,
                size,
                requested_size: None,
                state: BlockState::Inactive,
                frames: StackId::EMPTY,
            };
            for (a, b) in &s.blocks {
                if *a > cur {
                    blocks.push(free(cur, a - cur));
                }
                blocks.push(Block {
                    address: *a,
                    size: b.size,
                    requested_size: Some(b.requested),
                    state: if b.pending {
                        BlockState::ActivePendingFree
                    } else {
                        BlockState::ActiveAllocated
                    },
                    frames: b.frames,
                });
                active += b.size;
                req += b.requested;
                if !b.pending {
                    alloc += b.size;
                }
                cur = a + b.size;
            }
            if sa + s.size > cur {
                blocks.push(free(cur, sa + s.size - cur));
            }
            Segment {
                device,
                address: *sa,
                total_size: s.size,
                allocated_size: Some(alloc),
                active_size: Some(active),
                requested_size: Some(req),
                stream: s.stream,
                segment_type: s.kind,
                pool_id: s.pool_id,
                is_expandable: s.is_expandable,
                frames: s.frames,
                blocks,
            }
        })
    }

    /// The free block a best-fit search would pick (smallest adequate,
    /// lowest address among equals), ignoring streams.
    #[cfg(test)]
    pub fn best_fit(&self, small: bool, size: u64) -> Option<u64> {
        let want = if small { CLASS_SMALL } else { CLASS_LARGE };
        let mut best: Option<(u64, u64)> = None;
        for (sa, s) in self.segs.iter().filter(|(_, s)| s.class() == want) {
            let mut cur = *sa;
            let ends = s
                .blocks
                .iter()
                .map(|(a, b)| (*a, a + b.size))
                .chain(std::iter::once((sa + s.size, sa + s.size)));
            for (a, next) in ends {
                if a > cur && a - cur >= size && best.is_none_or(|b| (a - cur, cur) < b) {
                    best = Some((a - cur, cur));
                }
                cur = next;
            }
        }
        best.map(|b| b.1)
    }

    /// Checks the index against a rescan.
    #[cfg(test)]
    pub fn check(&self) -> Result<(), String> {
        let mut prev_end = 0;
        for (a, s) in self.segs.iter() {
            if *a < prev_end {
                return Err(format!("segment {a:#x} overlaps the one before it"));
            }
            prev_end = a + s.size;
            let mut cur = *a;
            for (x, b) in &s.blocks {
                if *x < cur {
                    return Err(format!("block at {x:#x} overlaps the one before it"));
                }
                cur = x + b.size;
            }
            if cur > a + s.size {
                return Err(format!("a block runs past the end of segment {a:#x}"));
            }
        }
        let mut fresh = Layout {
            segs: self.segs.clone(),
            idx: Index::default(),
        };
        fresh.set_indexed(self.idx.on);
        if fresh.idx != self.idx {
            return Err("running totals or the free-block index differ from a rescan".into());
        }
        let x = &self.idx;
        if x.active + x.pending + x.inactive != x.reserved {
            return Err("live + pending + free bytes differ from reserved".into());
        }
        Ok(())
    }
}
