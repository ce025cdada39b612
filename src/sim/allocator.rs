//! A model of `DeviceCachingAllocator` (one device): pools of cached blocks
//! searched best-fit by (stream, size, address), splitting and merging,
//! `max_split_size` and `max_non_split_rounding`, the garbage-collection
//! threshold, the OOM retry sequence, and expandable segments mapped page by
//! page into one virtual range per (pool, stream).
//!
//! Owns the block layout and the events it would record; takes requests one
//! at a time and never reads files or traces. Addresses of new segments are
//! the model's own (cudaMalloc's choices are the driver's): first fit in a
//! virtual address space that reuses released ranges, growing up or down
//! ([`AddressOrder`]), since best fit breaks ties by address.

use super::config::SimConfig;
use crate::model::policy::{
    MIN_BLOCK_SIZE, ROUND_LARGE, SMALL_BUFFER, allocation_size_with, is_small, oversize_refuses,
    round_size, should_split,
};
use crate::model::{Block, BlockState, Segment, SegmentType, StackId};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What the allocator would write into its trace ring buffer.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum SimAction {
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Alloc,
    FreeRequested,
    FreeCompleted,
    Oom,
}

impl SimAction {
    pub fn name(self) -> &'static str {
        match self {
            SimAction::SegmentAlloc => "segment_alloc",
            SimAction::SegmentFree => "segment_free",
            SimAction::SegmentMap => "segment_map",
            SimAction::SegmentUnmap => "segment_unmap",
            SimAction::Alloc => "alloc",
            SimAction::FreeRequested => "free_requested",
            SimAction::FreeCompleted => "free_completed",
            SimAction::Oom => "oom",
        }
    }
    /// Whether the event changes reserved memory (a cudaMalloc/cudaFree or a
    /// page mapping).
    pub fn is_segment_event(self) -> bool {
        matches!(
            self,
            SimAction::SegmentAlloc
                | SimAction::SegmentFree
                | SimAction::SegmentMap
                | SimAction::SegmentUnmap
        )
    }
}

/// One recorded-style event. Sizes follow PyTorch's trace: requested bytes
/// for alloc/free, segment or mapped bytes for segment events, the rounded
/// request for `oom`.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimEvent {
    pub action: SimAction,
    pub addr: u64,
    pub size: u64,
    pub stream: i64,
    /// Only on `oom`: device bytes the model had left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_free: Option<u64>,
}

/// A request the model could not serve, after every retry.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct OomInfo {
    pub requested: u64,
    pub rounded: u64,
    /// Bytes it tried to obtain from the device (segment size, or the
    /// request when mapping expandable pages).
    pub alloc_size: u64,
    /// Reserved bytes after the retries flushed the cache.
    pub reserved: u64,
    pub capacity: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// `index` is the position in the segments given; `address` names the
    /// segment for people.
    #[error("initial state: segment at {address:#x}: {msg}")]
    BadInitial {
        index: usize,
        address: u64,
        msg: String,
    },
    #[error("no live block at address {addr:#x}")]
    UnknownAddress { addr: u64 },
    #[error("block at {addr:#x} is {state}, not {wanted}")]
    WrongState {
        addr: u64,
        state: &'static str,
        wanted: &'static str,
    },
}

/// Which way the device's virtual-address allocator hands out new ranges.
/// cudaMalloc's choice is the driver's, not the caching allocator's, but
/// best fit breaks ties by address, so the order matters: traces recorded
/// on Linux show new segments below the older ones, on Windows above.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum AddressOrder {
    /// The lowest free range that fits, from its start.
    #[default]
    Up,
    /// The highest free range that fits, from its end.
    Down,
}

/// Figures of the model's state at one moment.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    pub reserved: u64,
    /// Block bytes of allocated blocks.
    pub allocated: u64,
    /// Requested bytes of allocated blocks.
    pub requested: u64,
    /// Block bytes freed by the program but not yet reusable.
    pub pending: u64,
    /// Cached (free, mapped) bytes.
    pub inactive: u64,
    pub largest_free: u64,
    pub free_blocks: u64,
}

/// Running totals of what the model asked of the device.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// cudaMalloc calls plus page mappings (`num_device_alloc`).
    pub device_allocs: u64,
    /// cudaFree calls plus page unmappings (`num_device_free`).
    pub device_frees: u64,
    /// Full cache flushes before a retry (`num_alloc_retries`).
    pub alloc_retries: u64,
    pub ooms: u64,
}

type BlockId = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Free,
    Allocated,
    Pending,
}

impl St {
    fn name(self) -> &'static str {
        match self {
            St::Free => "free",
            St::Allocated => "allocated",
            St::Pending => "pending free",
        }
    }
}

#[derive(Debug, Clone)]
struct Blk {
    addr: u64,
    size: u64,
    requested: u64,
    stream: i64,
    pool: usize,
    state: St,
    /// False only for the unmapped ranges of an expandable reservation.
    mapped: bool,
    /// Index into `reservations` for expandable blocks.
    res: Option<usize>,
    prev: Option<BlockId>,
    next: Option<BlockId>,
    /// Pool search count when the block was cached (GC age).
    gc_base: u64,
}

/// Streams compare as unsigned pointers, as in `BlockComparatorSize`.
fn sk(stream: i64) -> u64 {
    stream as u64
}

#[derive(Debug, Clone)]
struct Pool {
    pool_id: (i64, i64),
    small: bool,
    /// Free mapped blocks by (stream, size, address).
    free: BTreeSet<(u64, u64, u64, BlockId)>,
    /// Unmapped expandable ranges by (stream, address).
    unmapped: BTreeSet<(u64, u64, BlockId)>,
    /// The keys in `free` a cache flush acts on: whole segments and blocks
    /// of expandable segments. A flush at each OOM that walked every free
    /// block cost the trace length times the free blocks.
    flushable: BTreeSet<(u64, u64, u64, BlockId)>,
    /// `get_free_blocks_call_count` (only counted while GC is active).
    searches: u64,
}

#[derive(Debug, Clone)]
struct Reservation {
    base: u64,
    size: u64,
    page: u64,
}

#[derive(Debug, Clone)]
struct SegInfo {
    size: u64,
    /// Made by the model (not part of the initial state).
    created: bool,
}

/// The caching allocator of one device.
#[derive(Debug, Clone)]
pub struct Simulator {
    cfg: SimConfig,
    capacity: Option<u64>,
    blocks: Vec<Option<Blk>>,
    spare: Vec<BlockId>,
    by_addr: BTreeMap<u64, BlockId>,
    /// Addresses of pending-free blocks: a cache flush completes them, and
    /// finding them by a walk over every block made each OOM cost the whole
    /// layout.
    pending: BTreeSet<u64>,
    pools: Vec<Pool>,
    pool_ix: BTreeMap<((i64, i64), bool), usize>,
    /// Non-expandable segments by start address.
    segs: BTreeMap<u64, SegInfo>,
    reservations: Vec<Option<Reservation>>,
    order: AddressOrder,
    /// Free virtual address ranges, start → end.
    va_free: BTreeMap<u64, u64>,
    /// Where the initial segments begin and end (2 MiB-aligned; the whole
    /// space without them). New segments go on the side the driver grows
    /// towards ([`AddressOrder`]) and between the initial segments; the
    /// other side is used only once nothing fits there, rather than fail
    /// with address space left.
    va_bottom: u64,
    va_top: u64,
    /// Address ranges of the initial segments and reservations.
    initial_extents: Vec<(u64, u64)>,
    free_sizes: BTreeMap<u64, u64>,
    fig: Figures,
    counters: Counters,
    events: Vec<SimEvent>,
    record_block_events: bool,
}

/// What expandable segments of one reservation share: (pool, stream,
/// small pool).
type ReservationKey = ((i64, i64), i64, bool);

/// Virtual range of one expandable reservation when the device size is
/// unknown.
const UNKNOWN_DEVICE_RESERVATION: u64 = 1 << 40;
/// The virtual address space the model hands out (2 MiB-aligned ranges).
const VA_MIN: u64 = 2 << 20;
const VA_MAX: u64 = 1 << 47;

impl Simulator {
    /// An empty allocator. `capacity` = bytes the device lets this process
    /// reserve; `None` = unlimited.
    pub fn new(cfg: SimConfig, capacity: Option<u64>) -> Simulator {
        let mut s = Simulator {
            cfg,
            capacity,
            blocks: Vec::new(),
            spare: Vec::new(),
            by_addr: BTreeMap::new(),
            pending: BTreeSet::new(),
            pools: Vec::new(),
            pool_ix: BTreeMap::new(),
            segs: BTreeMap::new(),
            reservations: Vec::new(),
            order: AddressOrder::Up,
            va_free: BTreeMap::from([(VA_MIN, VA_MAX)]),
            va_bottom: VA_MIN,
            va_top: VA_MAX,
            initial_extents: Vec::new(),
            free_sizes: BTreeMap::new(),
            fig: Figures::default(),
            counters: Counters::default(),
            events: Vec::new(),
            record_block_events: true,
        };
        // The default pool first, so its index is stable.
        s.pool((0, 0), false);
        s.pool((0, 0), true);
        s
    }

    /// Starts from recorded segments (one device): `active_allocated` and
    /// `active_pending_free` blocks are live, `inactive` ones cached.
    /// Expandable segments of one (pool, stream, size class) share a
    /// virtual reservation starting at the lowest of them, except where the
    /// file shows two: another segment lies between them, or one ends where
    /// the next begins (a reservation reports each contiguous mapped run as
    /// one segment, so touching runs belong to different reservations).
    pub fn with_initial(
        cfg: SimConfig,
        capacity: Option<u64>,
        segments: &[Segment],
    ) -> Result<Simulator, SimError> {
        let mut s = Simulator::new(cfg, capacity);
        let mut order: Vec<usize> = (0..segments.len()).collect();
        order.sort_by_key(|&i| (segments[i].address, i));
        let mut groups: BTreeMap<ReservationKey, Vec<usize>> = BTreeMap::new();
        let mut top = 0u64;
        let mut extents: Vec<(u64, u64)> = Vec::new();
        for &i in &order {
            let seg = &segments[i];
            let bad = |msg: String| SimError::BadInitial {
                index: i,
                address: seg.address,
                msg,
            };
            if seg.total_size == 0 {
                return Err(bad("empty segment".into()));
            }
            if let Some(b) = seg
                .blocks
                .iter()
                .zip(seg.blocks.iter().skip(1))
                .find(|(a, b)| a.address + a.size != b.address)
            {
                return Err(bad(format!(
                    "blocks at {:#x} and {:#x} are not contiguous",
                    b.0.address, b.1.address
                )));
            }
            if !seg.blocks.is_empty() {
                let sum: u64 = seg.blocks.iter().map(|b| b.size).sum();
                if sum != seg.total_size || seg.blocks[0].address != seg.address {
                    return Err(bad(format!(
                        "blocks cover {sum} bytes from {:#x}, the segment {} bytes from {:#x}",
                        seg.blocks[0].address, seg.total_size, seg.address
                    )));
                }
            }
            if seg.address < top {
                return Err(bad(format!(
                    "overlaps an earlier segment (which ends at {top:#x})"
                )));
            }
            top = top.max(seg.end());
            let small = seg.segment_type == SegmentType::Small;
            if seg.expandable() {
                groups
                    .entry((seg.pool(), seg.stream, small))
                    .or_default()
                    .push(i);
                continue;
            }
            let pool = s.pool(seg.pool(), small);
            extents.push((seg.address, seg.end()));
            s.segs.insert(
                seg.address,
                SegInfo {
                    size: seg.total_size,
                    created: false,
                },
            );
            s.fig.reserved += seg.total_size;
            s.place_blocks(seg, pool, None, seg.stream)?;
        }
        // Position of each segment in address order.
        let mut rank = vec![0usize; segments.len()];
        for (k, &i) in order.iter().enumerate() {
            rank[i] = k;
        }
        let mut runs: Vec<(ReservationKey, Vec<usize>)> = Vec::new();
        for (key, idx) in groups {
            let mut run: Vec<usize> = Vec::new();
            for i in idx {
                if let Some(&p) = run.last()
                    && (rank[i] > rank[p] + 1 || segments[p].end() == segments[i].address)
                {
                    runs.push((key, std::mem::take(&mut run)));
                }
                run.push(i);
            }
            runs.push((key, run));
        }
        for ((pool_id, stream, small), idx) in runs {
            let page = if small {
                SMALL_BUFFER
            } else {
                s.cfg.large_segment_size
            };
            let base = segments[idx[0]].address;
            let end = idx.iter().map(|&i| segments[i].end()).max().unwrap_or(base);
            // A reservation is one contiguous virtual range; only its own
            // segments lie inside it (the runs above), and it stops short of
            // the next segment.
            let limit = order
                .iter()
                .map(|&j| segments[j].address)
                .find(|&a| a >= end)
                .unwrap_or(u64::MAX);
            let needed = (end - base).div_ceil(page).max(1).saturating_mul(page);
            let room = (limit - base) / page * page;
            let size = s.reservation_size(page).min(room).max(needed);
            top = top.max(base.saturating_add(size));
            extents.push((base, base.saturating_add(size)));
            let pool = s.pool(pool_id, small);
            let r = s.reservations.len();
            s.reservations.push(Some(Reservation { base, size, page }));
            let mut cursor = base;
            let mut last: Option<BlockId> = None;
            for &i in &idx {
                let seg = &segments[i];
                if !(seg.address - base).is_multiple_of(page)
                    || !seg.total_size.is_multiple_of(page)
                {
                    return Err(SimError::BadInitial {
                        index: i,
                        address: seg.address,
                        msg: format!(
                            "expandable segment is not aligned to {page}-byte pages from {base:#x}"
                        ),
                    });
                }
                if seg.address > cursor {
                    let gap = s.new_unmapped(cursor, seg.address - cursor, stream, pool, r);
                    s.link(last, gap);
                    last = Some(gap);
                }
                s.fig.reserved += seg.total_size;
                let first = s.place_blocks(seg, pool, Some(r), stream)?;
                s.link(last, first.0);
                last = Some(first.1);
                cursor = seg.end();
            }
            if cursor < base + size {
                let tail = s.new_unmapped(cursor, base + size - cursor, stream, pool, r);
                s.link(last, tail);
            }
        }
        (s.va_free, s.va_bottom, s.va_top) = initial_free_ranges(&extents);
        s.initial_extents = extents;
        Ok(s)
    }

    /// Builds the blocks of one recorded segment; returns (first, last).
    fn place_blocks(
        &mut self,
        seg: &Segment,
        pool: usize,
        res: Option<usize>,
        stream: i64,
    ) -> Result<(BlockId, BlockId), SimError> {
        let whole = [Block {
            address: seg.address,
            size: seg.total_size,
            requested_size: None,
            state: BlockState::Inactive,
            frames: StackId::EMPTY,
        }];
        let blocks: &[Block] = if seg.blocks.is_empty() {
            &whole
        } else {
            &seg.blocks
        };
        let mut first = None;
        let mut last: Option<BlockId> = None;
        for b in blocks {
            let state = match b.state {
                BlockState::ActiveAllocated => St::Allocated,
                BlockState::ActivePendingFree => St::Pending,
                BlockState::Inactive => St::Free,
            };
            // Neighbouring cached blocks are one block in the allocator.
            if state == St::Free
                && let Some(l) = last
                && self.blk(l).state == St::Free
            {
                self.remove_free(l);
                self.blk_mut(l).size += b.size;
                self.insert_free(l);
                continue;
            }
            let id = self.alloc_slot(Blk {
                addr: b.address,
                size: b.size,
                requested: b.requested_or_size().min(b.size),
                stream,
                pool,
                state,
                mapped: true,
                res,
                prev: None,
                next: None,
                gc_base: 0,
            });
            self.link(last, id);
            match state {
                St::Free => self.insert_free(id),
                St::Allocated => {
                    self.fig.allocated += b.size;
                    self.fig.requested += self.blk(id).requested;
                }
                St::Pending => {
                    self.fig.pending += b.size;
                    self.pending.insert(b.address);
                }
            }
            first.get_or_insert(id);
            last = Some(id);
        }
        Ok((first.expect("a block"), last.expect("a block")))
    }

    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }
    pub fn capacity(&self) -> Option<u64> {
        self.capacity
    }
    pub fn figures(&self) -> Figures {
        let mut f = self.fig;
        f.largest_free = self.free_sizes.keys().next_back().copied().unwrap_or(0);
        f
    }
    pub fn counters(&self) -> Counters {
        self.counters
    }
    /// Events recorded since the last [`Simulator::take_events`].
    pub fn events(&self) -> &[SimEvent] {
        &self.events
    }
    pub fn take_events(&mut self) -> Vec<SimEvent> {
        std::mem::take(&mut self.events)
    }
    /// Whether alloc/free events are recorded (segment and OOM events always are).
    pub fn set_record_block_events(&mut self, on: bool) {
        self.record_block_events = on;
    }

    // ---- requests -------------------------------------------------------

    /// `malloc(orig_size, stream)` in the default pool.
    pub fn malloc(&mut self, size: u64, stream: i64) -> Result<u64, OomInfo> {
        self.malloc_in(size, stream, (0, 0))
    }

    /// `malloc` in a pool (`(0, 0)` = default; others are private pools).
    /// Returns the block address.
    pub fn malloc_in(
        &mut self,
        orig: u64,
        stream: i64,
        pool_id: (i64, i64),
    ) -> Result<u64, OomInfo> {
        let size = round_size(orig, &self.cfg.roundup_power2_divisions);
        let pool = self.pool(pool_id, is_small(size));
        let alloc_size = allocation_size_with(size, self.cfg.large_segment_size);
        let mut found = self.get_free_block(pool, stream, size);
        if found.is_none() {
            if self.gc_active() {
                self.garbage_collect();
            }
            found = self.alloc_block(pool, stream, size, alloc_size, false);
            if found.is_none() && self.release_available_cached_blocks(pool, stream, size) {
                found = self.alloc_block(pool, stream, size, alloc_size, false);
            }
            if found.is_none() {
                self.release_cached_blocks();
                found = self.alloc_block(pool, stream, size, alloc_size, true);
            }
        }
        let Some(id) = found else {
            self.counters.ooms += 1;
            let reserved = self.fig.reserved;
            self.events.push(SimEvent {
                action: SimAction::Oom,
                addr: 0,
                size,
                stream,
                device_free: Some(
                    self.capacity
                        .map_or(u64::MAX, |c| c.saturating_sub(reserved)),
                ),
            });
            return Err(OomInfo {
                requested: orig,
                rounded: size,
                alloc_size: if self.cfg.expandable_segments {
                    size
                } else {
                    alloc_size
                },
                reserved,
                capacity: self.capacity,
            });
        };
        Ok(self.alloc_found_block(id, size, orig))
    }

    /// The program frees a block (`free_requested`); it stays unusable
    /// until [`Simulator::free_completed`].
    pub fn free_requested(&mut self, addr: u64) -> Result<(), SimError> {
        let id = self.live_at(addr)?;
        let b = self.blk(id);
        if b.state != St::Allocated {
            return Err(SimError::WrongState {
                addr,
                state: b.state.name(),
                wanted: "allocated",
            });
        }
        let (size, req, stream) = (b.size, b.requested, b.stream);
        self.blk_mut(id).state = St::Pending;
        self.pending.insert(addr);
        self.fig.allocated -= size;
        self.fig.requested -= req;
        self.fig.pending += size;
        if self.record_block_events {
            self.events.push(SimEvent {
                action: SimAction::FreeRequested,
                addr,
                size: req,
                stream,
                device_free: None,
            });
        }
        Ok(())
    }

    /// The block's stream events completed: it returns to its pool, merged
    /// with free neighbours. Returns false when it had already been
    /// returned (a cache flush synchronises pending frees).
    pub fn free_completed(&mut self, addr: u64) -> Result<bool, SimError> {
        let id = self.live_at(addr)?;
        match self.blk(id).state {
            St::Allocated => {
                self.free_requested(addr)?;
            }
            St::Pending => {}
            St::Free => return Ok(false),
        }
        self.free_block(id);
        Ok(true)
    }

    /// `free`: request and completion at once (no cross-stream use).
    pub fn free(&mut self, addr: u64) -> Result<(), SimError> {
        self.free_requested(addr)?;
        self.free_completed(addr).map(|_| ())
    }

    /// `empty_cache()`: the same flush as the last OOM retry.
    pub fn empty_cache(&mut self) {
        self.release_cached_blocks();
    }

    // ---- the allocator's internals ----------------------------------------

    fn gc_active(&self) -> bool {
        self.cfg.memory_fraction.is_some() && self.cfg.garbage_collection_threshold > 0.0
    }

    fn allowed_max(&self) -> Option<u64> {
        match (self.cfg.memory_fraction, self.capacity) {
            (Some(f), Some(c)) => Some((c as f64 * f) as u64),
            _ => None,
        }
    }

    fn get_free_block(&mut self, pool: usize, stream: i64, size: u64) -> Option<BlockId> {
        if self.gc_active() {
            self.pools[pool].searches += 1;
        }
        let s = sk(stream);
        let mut it = self.pools[pool].free.range((s, size, 0, 0)..);
        let mut cur = *it.next()?;
        if cur.0 != s {
            return None;
        }
        if self.blk(cur.3).res.is_some() {
            if self.cfg.expandable_segments {
                // Best fit counts what a block at the mapped frontier could
                // grow into, so blocks that cannot grow are preferred.
                for next in it {
                    if next.0 != s
                        || self.blk(cur.3).res.is_none()
                        || self.expandable_size(next.3) >= self.expandable_size(cur.3)
                    {
                        break;
                    }
                    cur = *next;
                }
            } else {
                cur = *it.find(|n| n.0 != s || self.blk(n.3).res.is_none())?;
                if cur.0 != s {
                    return None;
                }
            }
        }
        if oversize_refuses(
            cur.1,
            size,
            self.cfg.max_split(),
            self.cfg.max_non_split_rounding,
        ) {
            return None;
        }
        self.remove_free(cur.3);
        Some(cur.3)
    }

    fn expandable_size(&self, id: BlockId) -> u64 {
        let b = self.blk(id);
        b.size
            + b.next
                .map(|n| self.blk(n))
                .filter(|n| !n.mapped)
                .map_or(0, |n| n.size)
    }

    fn alloc_block(
        &mut self,
        pool: usize,
        stream: i64,
        size: u64,
        alloc_size: u64,
        retry: bool,
    ) -> Option<BlockId> {
        if retry {
            self.counters.alloc_retries += 1;
        }
        if let Some(max) = self.allowed_max()
            && self.fig.reserved.saturating_add(alloc_size) > max
        {
            return None;
        }
        if self.cfg.expandable_segments {
            return self.try_allocate_expandable_block(pool, stream, size);
        }
        if !self.fits(alloc_size) {
            return None;
        }
        let addr = self.fresh_address(alloc_size)?;
        let id = self.alloc_slot(Blk {
            addr,
            size: alloc_size,
            requested: 0,
            stream,
            pool,
            state: St::Free,
            mapped: true,
            res: None,
            prev: None,
            next: None,
            gc_base: 0,
        });
        self.segs.insert(
            addr,
            SegInfo {
                size: alloc_size,
                created: true,
            },
        );
        self.fig.reserved += alloc_size;
        self.counters.device_allocs += 1;
        self.events.push(SimEvent {
            action: SimAction::SegmentAlloc,
            addr,
            size: alloc_size,
            stream,
            device_free: None,
        });
        Some(id)
    }

    fn fits(&self, bytes: u64) -> bool {
        self.capacity
            .is_none_or(|c| self.fig.reserved.saturating_add(bytes) <= c)
    }

    /// A virtual range for a new segment or reservation, first fit in the
    /// configured order; `None` when the model's address space (2^47 bytes,
    /// more than any device) has no room, which the caller answers as an
    /// OOM: only a damaged or hostile file asks for that much.
    fn fresh_address(&mut self, size: u64) -> Option<u64> {
        let len = size.checked_next_multiple_of(ROUND_LARGE)?;
        let (bottom, top) = (self.va_bottom, self.va_top);
        // Lowest fit at or above `from`, or highest fit below `to`; each as
        // (range start, range end, placement).
        let up = |from: u64| {
            self.va_free
                .iter()
                .map(|(&a, &b)| (a, b, a.max(from)))
                .find(|&(_, b, lo)| b > lo && b - lo >= len)
        };
        let down = |to: u64| {
            self.va_free
                .range(..to)
                .rev()
                .map(|(&a, &b)| (a, b, b.min(to)))
                .find(|&(a, _, hi)| hi - a >= len)
                .map(|(a, b, hi)| (a, b, hi - len))
        };
        let hit = match self.order {
            AddressOrder::Up => up(bottom).or_else(|| down(bottom)),
            AddressOrder::Down => down(top).or_else(|| up(top)),
        };
        let (a, b, at) = hit?;
        self.va_free.remove(&a);
        if at > a {
            self.va_free.insert(a, at);
        }
        if at + len < b {
            self.va_free.insert(at + len, b);
        }
        Some(at)
    }

    /// Returns a released segment's range to the free address space.
    fn release_address(&mut self, addr: u64, size: u64) {
        let mut lo = addr;
        let mut hi = addr + size.div_ceil(ROUND_LARGE) * ROUND_LARGE;
        if let Some((&a, &b)) = self.va_free.range(..lo).next_back()
            && b == lo
        {
            self.va_free.remove(&a);
            lo = a;
        }
        if let Some(&b) = self.va_free.get(&hi) {
            self.va_free.remove(&hi);
            hi = b;
        }
        self.va_free.insert(lo, hi);
    }

    /// Sets where new segments go (see [`AddressOrder`]). Only before the
    /// first request: it lays out the free address space around the
    /// initial segments.
    pub fn set_address_order(&mut self, order: AddressOrder) {
        debug_assert!(self.counters.device_allocs == 0 && self.events.is_empty());
        self.order = order;
        (self.va_free, self.va_bottom, self.va_top) = initial_free_ranges(&self.initial_extents);
    }

    fn reservation_size(&self, page: u64) -> u64 {
        // 9/8 of device memory, as cudaGetDeviceProperties would give; the
        // capacity stands in for the device size.
        let dev = self
            .capacity
            .map_or(UNKNOWN_DEVICE_RESERVATION, |c| c.saturating_add(c / 8));
        dev.div_ceil(page).max(1).saturating_mul(page)
    }

    fn allocatable(&self, id: Option<BlockId>) -> bool {
        id.is_some_and(|i| self.blk(i).state == St::Free)
    }

    fn find_expandable_block(&mut self, pool: usize, stream: i64, size: u64) -> Option<BlockId> {
        let s = sk(stream);
        let cands: Vec<BlockId> = self.pools[pool]
            .unmapped
            .range((s, 0, 0)..)
            .take_while(|u| u.0 == s)
            .map(|u| u.2)
            .collect();
        for u in cands {
            let mut c = u;
            let prev = self.blk(u).prev;
            if self.allocatable(prev) && self.blk(prev.unwrap()).mapped {
                c = prev.unwrap();
            }
            let mut bytes = 0u64;
            let mut b = Some(c);
            while bytes < size && self.allocatable(b) {
                let id = b.unwrap();
                bytes += self.blk(id).size;
                b = self.blk(id).next;
            }
            if bytes >= size {
                return Some(c);
            }
        }
        let page = if self.pools[pool].small {
            SMALL_BUFFER
        } else {
            self.cfg.large_segment_size
        };
        let rsize = self
            .reservation_size(page)
            .max(size.checked_next_multiple_of(page)?);
        let base = self.fresh_address(rsize)?;
        let r = self.reservations.len();
        self.reservations.push(Some(Reservation {
            base,
            size: rsize,
            page,
        }));
        Some(self.new_unmapped(base, rsize, stream, pool, r))
    }

    fn try_allocate_expandable_block(
        &mut self,
        pool: usize,
        stream: i64,
        size: u64,
    ) -> Option<BlockId> {
        let mut cand = self.find_expandable_block(pool, stream, size)?;
        if !self.blk(cand).mapped {
            let want = self.blk(cand).size.min(size);
            if !self.map_block(cand, want) {
                return None;
            }
        }
        while self.blk(cand).size < size {
            let remaining = size - self.blk(cand).size;
            let next = self.blk(cand).next.expect("address space was checked");
            let want = remaining.min(self.blk(next).size);
            if !self.map_block(next, want) {
                return None;
            }
            cand = next;
        }
        self.remove_free(cand);
        Some(cand)
    }

    /// Maps whole pages at the start of an unmapped range.
    fn map_block(&mut self, id: BlockId, size: u64) -> bool {
        let r = self.blk(id).res.expect("expandable");
        let page = self.res(r).page;
        let mapped = size.div_ceil(page) * page;
        debug_assert!(mapped <= self.blk(id).size);
        if !self.fits(mapped) {
            return false;
        }
        let (addr, total, stream, pool) = {
            let b = self.blk(id);
            (b.addr, b.size, b.stream, b.pool)
        };
        self.pools[pool].unmapped.remove(&(sk(stream), addr, id));
        if mapped < total {
            let rest = self.new_unmapped(addr + mapped, total - mapped, stream, pool, r);
            let next = self.blk(id).next;
            self.blk_mut(rest).next = next;
            if let Some(n) = next {
                self.blk_mut(n).prev = Some(rest);
            }
            self.link(Some(id), rest);
            self.blk_mut(id).size = mapped;
        }
        self.blk_mut(id).mapped = true;
        self.merge_neighbours(id);
        self.insert_free(id);
        self.fig.reserved += mapped;
        self.counters.device_allocs += 1;
        self.events.push(SimEvent {
            action: SimAction::SegmentMap,
            addr,
            size: mapped,
            stream,
            device_free: None,
        });
        true
    }

    /// Unmaps the whole pages inside a free mapped block.
    fn unmap_block(&mut self, id: BlockId) {
        let r = self.blk(id).res.expect("expandable");
        let Reservation { base, page, .. } = *self.res(r);
        let (addr, size, stream, pool) = {
            let b = self.blk(id);
            (b.addr, b.size, b.stream, b.pool)
        };
        let begin = (addr - base).div_ceil(page);
        let end = (addr + size - base) / page;
        if begin >= end {
            return;
        }
        let uaddr = base + begin * page;
        let usize_ = (end - begin) * page;
        self.remove_free(id);
        let before = uaddr - addr;
        if before > 0 {
            let b = self.alloc_slot(Blk {
                addr,
                size: before,
                requested: 0,
                stream,
                pool,
                state: St::Free,
                mapped: true,
                res: Some(r),
                prev: None,
                next: None,
                gc_base: 0,
            });
            let prev = self.blk(id).prev;
            self.blk_mut(b).prev = prev;
            if let Some(p) = prev {
                self.blk_mut(p).next = Some(b);
            }
            self.link(Some(b), id);
            self.insert_free(b);
        }
        let after = size - before - usize_;
        if after > 0 {
            let a = self.alloc_slot(Blk {
                addr: uaddr + usize_,
                size: after,
                requested: 0,
                stream,
                pool,
                state: St::Free,
                mapped: true,
                res: Some(r),
                prev: None,
                next: None,
                gc_base: 0,
            });
            let next = self.blk(id).next;
            self.blk_mut(a).next = next;
            if let Some(n) = next {
                self.blk_mut(n).prev = Some(a);
            }
            self.link(Some(id), a);
            self.insert_free(a);
        }
        self.set_addr(id, uaddr);
        {
            let b = self.blk_mut(id);
            b.size = usize_;
            b.mapped = false;
        }
        self.merge_neighbours(id);
        let b = self.blk(id);
        if b.prev.is_none() && b.next.is_none() {
            // A reservation with nothing mapped is released without a trace event.
            let addr = b.addr;
            self.by_addr.remove(&addr);
            self.free_slot(id);
            let rsize = self.res(r).size;
            self.release_address(addr, rsize);
            self.reservations[r] = None;
        } else {
            let key = (sk(stream), b.addr, id);
            self.pools[pool].unmapped.insert(key);
        }
        self.fig.reserved -= usize_;
        self.counters.device_frees += 1;
        self.events.push(SimEvent {
            action: SimAction::SegmentUnmap,
            addr: uaddr,
            size: usize_,
            stream,
            device_free: None,
        });
    }

    /// cudaFree of a cached block that is a whole segment.
    fn release_block(&mut self, id: BlockId) {
        let (addr, size, stream) = {
            let b = self.blk(id);
            debug_assert!(b.prev.is_none() && b.next.is_none() && b.res.is_none());
            (b.addr, b.size, b.stream)
        };
        self.remove_free(id);
        self.by_addr.remove(&addr);
        self.free_slot(id);
        self.segs.remove(&addr);
        self.release_address(addr, size);
        self.fig.reserved -= size;
        self.counters.device_frees += 1;
        self.events.push(SimEvent {
            action: SimAction::SegmentFree,
            addr,
            size,
            stream,
            device_free: None,
        });
    }

    fn is_whole_segment(&self, id: BlockId) -> bool {
        let b = self.blk(id);
        b.prev.is_none() && b.next.is_none() && b.res.is_none()
    }

    /// Only with `max_split_size`: free one cached oversize segment big enough
    /// for the request, or the largest ones until enough is released.
    fn release_available_cached_blocks(&mut self, pool: usize, stream: i64, size: u64) -> bool {
        let Some(max_split) = self.cfg.max_split_size else {
            return false;
        };
        let s = sk(stream);
        let key = size.max(max_split);
        let hit = self.pools[pool]
            .free
            .range((s, key, 0, 0)..)
            .next()
            .copied();
        match hit {
            Some(h) if h.0 == s && self.blk(h.3).res.is_none() => {
                if !self.is_whole_segment(h.3) {
                    return false;
                }
                self.release_block(h.3);
                true
            }
            _ => {
                let below: Vec<(u64, u64, u64, BlockId)> = self.pools[pool]
                    .free
                    .range(..(s, key, 0, 0))
                    .rev()
                    .take_while(|b| b.0 == s && b.1 >= max_split)
                    .copied()
                    .collect();
                let mut released = 0u64;
                for b in below {
                    if released >= key {
                        break;
                    }
                    if self.blk(b.3).res.is_none() && self.is_whole_segment(b.3) {
                        released += b.1;
                        self.release_block(b.3);
                    }
                }
                released >= key
            }
        }
    }

    /// `release_cached_blocks`: complete pending frees, then cudaFree every
    /// cached whole segment (large pool, then small) and unmap the free
    /// pages of expandable segments.
    fn release_cached_blocks(&mut self) {
        let pending: Vec<BlockId> = self
            .pending
            .iter()
            .filter_map(|a| self.by_addr.get(a).copied())
            .filter(|&i| self.blk(i).state == St::Pending)
            .collect();
        for id in pending {
            self.free_block(id);
        }
        for small in [false, true] {
            let pool = self.pool_ix[&((0, 0), small)];
            let cached: Vec<BlockId> = self.pools[pool].flushable.iter().map(|b| b.3).collect();
            let mut to_unmap = Vec::new();
            for id in cached {
                if self.blk(id).res.is_some() {
                    to_unmap.push(id);
                } else if self.is_whole_segment(id) {
                    self.release_block(id);
                }
            }
            for id in to_unmap {
                self.unmap_block(id);
            }
        }
    }

    /// GC (memory fraction and threshold set): release cached whole large
    /// segments at least as old as the average until the overshoot is gone.
    fn garbage_collect(&mut self) {
        let Some(allowed) = self.allowed_max() else {
            return;
        };
        let threshold = (self.cfg.garbage_collection_threshold * allowed as f64) as u64;
        if self.fig.reserved <= threshold {
            return;
        }
        let target = self.fig.reserved - threshold;
        let pool = self.pool_ix[&((0, 0), false)];
        let searches = self.pools[pool].searches;
        let age = |s: &Self, id: BlockId| searches - s.blk(id).gc_base;
        let mut total_age = 0u64;
        let mut freeable = 0u64;
        for b in &self.pools[pool].free {
            let blk = self.blk(b.3);
            if blk.prev.is_none() && blk.next.is_none() {
                total_age += age(self, b.3);
                freeable += 1;
            }
        }
        let mut reclaimed = 0u64;
        let mut freed_one = true;
        while reclaimed < target && freed_one && freeable > 0 {
            let threshold_age = total_age as f64 / freeable as f64;
            freed_one = false;
            let cached: Vec<BlockId> = self.pools[pool].free.iter().map(|b| b.3).collect();
            for id in cached {
                if self.is_whole_segment(id) && age(self, id) as f64 >= threshold_age {
                    freed_one = true;
                    reclaimed += self.blk(id).size;
                    total_age -= age(self, id);
                    freeable -= 1;
                    self.release_block(id);
                }
            }
        }
    }

    fn alloc_found_block(&mut self, id: BlockId, size: u64, orig: u64) -> u64 {
        let (bsize, small) = {
            let b = self.blk(id);
            (b.size, self.pools[b.pool].small)
        };
        if should_split(
            bsize,
            size,
            small,
            self.cfg.expandable_segments,
            self.cfg.max_split(),
        ) {
            let b = self.blk(id).clone();
            let rest = self.alloc_slot(Blk {
                addr: b.addr + size,
                size: bsize - size,
                requested: 0,
                prev: None,
                next: None,
                state: St::Free,
                ..b
            });
            self.blk_mut(rest).next = b.next;
            if let Some(n) = b.next {
                self.blk_mut(n).prev = Some(rest);
            }
            self.link(Some(id), rest);
            self.blk_mut(id).size = size;
            self.insert_free(rest);
        }
        let b = self.blk_mut(id);
        b.state = St::Allocated;
        b.requested = orig;
        let (addr, bsize, stream) = (b.addr, b.size, b.stream);
        self.fig.allocated += bsize;
        self.fig.requested += orig;
        if self.record_block_events {
            self.events.push(SimEvent {
                action: SimAction::Alloc,
                addr,
                size: orig,
                stream,
                device_free: None,
            });
        }
        addr
    }

    fn free_block(&mut self, id: BlockId) {
        let (addr, size, req, stream) = {
            let b = self.blk(id);
            (b.addr, b.size, b.requested, b.stream)
        };
        if self.record_block_events {
            self.events.push(SimEvent {
                action: SimAction::FreeCompleted,
                addr,
                size: req,
                stream,
                device_free: None,
            });
        }
        self.fig.pending -= size;
        self.pending.remove(&addr);
        self.blk_mut(id).state = St::Free;
        self.merge_neighbours(id);
        self.insert_free(id);
    }

    /// Merges `id` (in no pool set) with free neighbours of equal mapping.
    fn merge_neighbours(&mut self, id: BlockId) {
        for before in [true, false] {
            let b = self.blk(id);
            let Some(src) = (if before { b.prev } else { b.next }) else {
                continue;
            };
            let s = self.blk(src);
            if s.state != St::Free || s.mapped != b.mapped {
                continue;
            }
            if s.mapped {
                self.remove_free(src);
            } else {
                let key = (sk(s.stream), s.addr, src);
                let pool = s.pool;
                self.pools[pool].unmapped.remove(&key);
            }
            let s = self.blk(src).clone();
            self.by_addr.remove(&s.addr);
            if before {
                let old = self.blk(id).addr;
                self.by_addr.remove(&old);
                self.by_addr.insert(s.addr, id);
                let b = self.blk_mut(id);
                b.addr = s.addr;
                b.prev = s.prev;
                if let Some(p) = s.prev {
                    self.blk_mut(p).next = Some(id);
                }
            } else {
                self.blk_mut(id).next = s.next;
                if let Some(n) = s.next {
                    self.blk_mut(n).prev = Some(id);
                }
            }
            self.blk_mut(id).size += s.size;
            self.free_slot(src);
        }
    }

    // ---- bookkeeping ------------------------------------------------------

    fn pool(&mut self, pool_id: (i64, i64), small: bool) -> usize {
        if let Some(&i) = self.pool_ix.get(&(pool_id, small)) {
            return i;
        }
        let i = self.pools.len();
        self.pools.push(Pool {
            pool_id,
            small,
            free: BTreeSet::new(),
            unmapped: BTreeSet::new(),
            flushable: BTreeSet::new(),
            searches: 0,
        });
        self.pool_ix.insert((pool_id, small), i);
        i
    }

    fn blk(&self, id: BlockId) -> &Blk {
        self.blocks[id].as_ref().expect("live block")
    }
    fn blk_mut(&mut self, id: BlockId) -> &mut Blk {
        self.blocks[id].as_mut().expect("live block")
    }
    fn res(&self, r: usize) -> &Reservation {
        self.reservations[r].as_ref().expect("live reservation")
    }

    fn alloc_slot(&mut self, b: Blk) -> BlockId {
        let addr = b.addr;
        let id = if let Some(i) = self.spare.pop() {
            self.blocks[i] = Some(b);
            i
        } else {
            self.blocks.push(Some(b));
            self.blocks.len() - 1
        };
        self.by_addr.insert(addr, id);
        id
    }

    fn free_slot(&mut self, id: BlockId) {
        self.blocks[id] = None;
        self.spare.push(id);
    }

    fn set_addr(&mut self, id: BlockId, addr: u64) {
        let old = self.blk(id).addr;
        if self.by_addr.get(&old) == Some(&id) {
            self.by_addr.remove(&old);
        }
        self.blk_mut(id).addr = addr;
        self.by_addr.insert(addr, id);
    }

    fn link(&mut self, a: Option<BlockId>, b: BlockId) {
        if let Some(a) = a {
            self.blk_mut(a).next = Some(b);
            self.refresh_flushable(a);
        }
        self.blk_mut(b).prev = a;
        self.refresh_flushable(b);
    }

    /// A cached block that gains a neighbour (a layout being loaded links
    /// each block after caching the one before) is no longer a whole segment.
    fn refresh_flushable(&mut self, id: BlockId) {
        let b = self.blk(id);
        let key = (sk(b.stream), b.size, b.addr, id);
        let flushable = b.res.is_some() || (b.prev.is_none() && b.next.is_none());
        let pool = b.pool;
        let p = &mut self.pools[pool];
        if !p.free.contains(&key) {
            return;
        }
        if flushable {
            p.flushable.insert(key);
        } else {
            p.flushable.remove(&key);
        }
    }

    fn new_unmapped(
        &mut self,
        addr: u64,
        size: u64,
        stream: i64,
        pool: usize,
        r: usize,
    ) -> BlockId {
        let id = self.alloc_slot(Blk {
            addr,
            size,
            requested: 0,
            stream,
            pool,
            state: St::Free,
            mapped: false,
            res: Some(r),
            prev: None,
            next: None,
            gc_base: 0,
        });
        self.pools[pool].unmapped.insert((sk(stream), addr, id));
        id
    }

    fn insert_free(&mut self, id: BlockId) {
        let b = self.blk(id);
        let (pool, key, size) = (b.pool, (sk(b.stream), b.size, b.addr, id), b.size);
        debug_assert!(b.mapped && b.state == St::Free);
        let searches = self.pools[pool].searches;
        // Splits and merges take a block out of the set first; `link`
        // refreshes one that gains a neighbour while cached.
        let flushable = b.res.is_some() || (b.prev.is_none() && b.next.is_none());
        self.blk_mut(id).gc_base = searches;
        self.pools[pool].free.insert(key);
        if flushable {
            self.pools[pool].flushable.insert(key);
        }
        *self.free_sizes.entry(size).or_default() += 1;
        self.fig.inactive += size;
        self.fig.free_blocks += 1;
    }

    fn remove_free(&mut self, id: BlockId) {
        let b = self.blk(id);
        let (pool, key, size) = (b.pool, (sk(b.stream), b.size, b.addr, id), b.size);
        let was = self.pools[pool].free.remove(&key);
        debug_assert!(was, "block {id} was not cached");
        self.pools[pool].flushable.remove(&key);
        if let Some(c) = self.free_sizes.get_mut(&size) {
            *c -= 1;
            if *c == 0 {
                self.free_sizes.remove(&size);
            }
        }
        self.fig.inactive -= size;
        self.fig.free_blocks -= 1;
    }

    fn live_at(&self, addr: u64) -> Result<BlockId, SimError> {
        match self.by_addr.get(&addr) {
            Some(&id) if self.blk(id).mapped => Ok(id),
            _ => Err(SimError::UnknownAddress { addr }),
        }
    }

    // ---- views ------------------------------------------------------------

    /// The layout as snapshot segments (device 0): one per cudaMalloc
    /// segment, one per contiguous mapped run of an expandable reservation;
    /// sorted by address.
    pub fn segments(&self) -> Vec<Segment> {
        let mut out = Vec::new();
        let mk = |addr: u64, ids: &[BlockId]| {
            let first = self.blk(ids[0]);
            let pool = &self.pools[first.pool];
            let blocks: Vec<Block> = ids
                .iter()
                .map(|&i| {
                    let b = self.blk(i);
                    Block {
                        address: b.addr,
                        size: b.size,
                        requested_size: Some(if b.state == St::Free { 0 } else { b.requested }),
                        state: match b.state {
                            St::Free => BlockState::Inactive,
                            St::Allocated => BlockState::ActiveAllocated,
                            St::Pending => BlockState::ActivePendingFree,
                        },
                        frames: StackId::EMPTY,
                    }
                })
                .collect();
            let sum = |f: &dyn Fn(&Block) -> bool| -> u64 {
                blocks.iter().filter(|b| f(b)).map(|b| b.size).sum()
            };
            Segment {
                device: 0,
                address: addr,
                total_size: blocks.iter().map(|b| b.size).sum(),
                allocated_size: Some(sum(&|b| b.state == BlockState::ActiveAllocated)),
                active_size: Some(sum(&|b| b.state != BlockState::Inactive)),
                requested_size: Some(
                    blocks
                        .iter()
                        .filter(|b| b.state != BlockState::Inactive)
                        .filter_map(|b| b.requested_size)
                        .sum(),
                ),
                stream: first.stream,
                segment_type: if pool.small {
                    SegmentType::Small
                } else {
                    SegmentType::Large
                },
                pool_id: Some(pool.pool_id),
                is_expandable: Some(first.res.is_some()),
                frames: StackId::EMPTY,
                blocks,
            }
        };
        for &addr in self.segs.keys() {
            let mut ids = Vec::new();
            let mut cur = self.by_addr.get(&addr).copied();
            while let Some(i) = cur {
                ids.push(i);
                cur = self.blk(i).next;
            }
            out.push(mk(addr, &ids));
        }
        for r in self.reservations.iter().flatten() {
            let mut cur = self.by_addr.get(&r.base).copied();
            let mut run: Vec<BlockId> = Vec::new();
            while let Some(i) = cur {
                if self.blk(i).mapped {
                    run.push(i);
                } else if !run.is_empty() {
                    out.push(mk(self.blk(run[0]).addr, &run));
                    run.clear();
                }
                cur = self.blk(i).next;
            }
            if !run.is_empty() {
                out.push(mk(self.blk(run[0]).addr, &run));
            }
        }
        out.sort_by_key(|s| s.address);
        out
    }

    /// Checks every structural invariant of the layout; the first broken one
    /// is described. Used by the property tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut reserved = 0u64;
        let mut fig = Figures::default();
        let mut seen = 0usize;
        let mut end = 0u64;
        for (&addr, &id) in &self.by_addr {
            let b = self.blocks[id]
                .as_ref()
                .ok_or(format!("address {addr:#x} names a dropped block"))?;
            if b.addr != addr {
                return Err(format!(
                    "block {id} is indexed at {addr:#x} but starts at {:#x}",
                    b.addr
                ));
            }
            if addr < end {
                return Err(format!("block at {addr:#x} overlaps its predecessor"));
            }
            end = addr + b.size;
            if b.size == 0 || !b.size.is_multiple_of(MIN_BLOCK_SIZE) {
                return Err(format!("block at {addr:#x} has size {}", b.size));
            }
            if let Some(p) = b.prev {
                let pb = self.blk(p);
                if pb.next != Some(id) || pb.addr + pb.size != addr {
                    return Err(format!("block at {addr:#x}: broken prev link"));
                }
                if pb.state == St::Free && b.state == St::Free && pb.mapped == b.mapped {
                    return Err(format!(
                        "free blocks at {:#x} and {addr:#x} were not merged",
                        pb.addr
                    ));
                }
            }
            if let Some(n) = b.next {
                let nb = self.blk(n);
                if nb.prev != Some(id) || addr + b.size != nb.addr {
                    return Err(format!("block at {addr:#x}: broken next link"));
                }
            }
            let pool = &self.pools[b.pool];
            let in_free = pool.free.contains(&(sk(b.stream), b.size, b.addr, id));
            let in_unmapped = pool.unmapped.contains(&(sk(b.stream), b.addr, id));
            if !b.mapped {
                if !in_unmapped || b.state != St::Free {
                    return Err(format!("unmapped range at {addr:#x} is not in its pool"));
                }
                let r = b.res.and_then(|r| self.reservations[r].as_ref());
                let r = r.ok_or(format!("unmapped range at {addr:#x} has no reservation"))?;
                if !(addr - r.base).is_multiple_of(r.page) || !b.size.is_multiple_of(r.page) {
                    return Err(format!("unmapped range at {addr:#x} is not page-aligned"));
                }
                seen += 1;
                continue;
            }
            reserved += b.size;
            match b.state {
                St::Free => {
                    if !in_free {
                        return Err(format!("cached block at {addr:#x} is not in its pool"));
                    }
                    fig.inactive += b.size;
                    fig.free_blocks += 1;
                }
                St::Allocated => {
                    if in_free {
                        return Err(format!("allocated block at {addr:#x} is in the free pool"));
                    }
                    if b.requested > b.size {
                        return Err(format!("block at {addr:#x} is smaller than its request"));
                    }
                    fig.allocated += b.size;
                    fig.requested += b.requested;
                }
                St::Pending => {
                    if in_free {
                        return Err(format!("pending block at {addr:#x} is in the free pool"));
                    }
                    fig.pending += b.size;
                }
            }
            let small = pool.small;
            if b.res.is_none() && b.prev.is_none() {
                let seg = self
                    .segs
                    .get(&addr)
                    .ok_or(format!("segment head at {addr:#x} is not a known segment"))?;
                let mut total = 0;
                let mut cur = Some(id);
                while let Some(i) = cur {
                    total += self.blk(i).size;
                    cur = self.blk(i).next;
                }
                if total != seg.size {
                    return Err(format!(
                        "segment at {addr:#x}: blocks sum to {total}, not {}",
                        seg.size
                    ));
                }
                // Recorded initial segments are taken as they are.
                if seg.created && small && seg.size != SMALL_BUFFER {
                    return Err(format!("small segment at {addr:#x} of {} bytes", seg.size));
                }
                if seg.created && !small && !seg.size.is_multiple_of(ROUND_LARGE) {
                    return Err(format!("large segment at {addr:#x} of {} bytes", seg.size));
                }
            }
            if let Some(r) = b.res {
                let r = self.reservations[r]
                    .as_ref()
                    .ok_or(format!("block at {addr:#x} in a released reservation"))?;
                if addr < r.base || addr + b.size > r.base + r.size {
                    return Err(format!("block at {addr:#x} is outside its reservation"));
                }
            }
            seen += 1;
        }
        let pooled: usize = self
            .pools
            .iter()
            .map(|p| p.free.len() + p.unmapped.len())
            .sum();
        let live_free = self
            .by_addr
            .values()
            .filter(|&&i| self.blk(i).state == St::Free)
            .count();
        if pooled != live_free {
            return Err(format!(
                "{pooled} pooled entries for {live_free} free blocks"
            ));
        }
        if seen != self.blocks.iter().flatten().count() {
            return Err("a live block is missing from the address index".into());
        }
        if reserved != self.fig.reserved {
            return Err(format!(
                "reserved {} but blocks add up to {reserved}",
                self.fig.reserved
            ));
        }
        let segs: u64 = self.segs.values().map(|s| s.size).sum();
        let mapped_exp: u64 = self
            .by_addr
            .values()
            .map(|&i| self.blk(i))
            .filter(|b| b.mapped && b.res.is_some())
            .map(|b| b.size)
            .sum();
        if segs + mapped_exp != reserved {
            return Err("segments and mapped pages do not add up to reserved".into());
        }
        if fig.allocated + fig.pending + fig.inactive != reserved {
            return Err("allocated + pending + cached != reserved".into());
        }
        let f = self.fig;
        if (
            f.allocated,
            f.requested,
            f.pending,
            f.inactive,
            f.free_blocks,
        ) != (
            fig.allocated,
            fig.requested,
            fig.pending,
            fig.inactive,
            fig.free_blocks,
        ) {
            return Err(format!(
                "running figures {f:?} differ from the layout's {fig:?}"
            ));
        }
        let sizes: u64 = self.free_sizes.iter().map(|(s, n)| s * n).sum();
        if sizes != fig.inactive {
            return Err("free-size index out of step".into());
        }
        for (i, p) in self.pools.iter().enumerate() {
            let want: BTreeSet<_> = p
                .free
                .iter()
                .filter(|k| {
                    let b = self.blk(k.3);
                    b.res.is_some() || (b.prev.is_none() && b.next.is_none())
                })
                .copied()
                .collect();
            if want != p.flushable {
                return Err(format!("pool {i}: the flushable index is out of step"));
            }
        }
        Ok(())
    }
}

/// Free virtual ranges around the initial segments (2 MiB-aligned): below
/// the first, the holes between them and above the last; and where the
/// first begins and the last ends (`VA_MIN` and `VA_MAX` without initial
/// segments).
fn initial_free_ranges(extents: &[(u64, u64)]) -> (BTreeMap<u64, u64>, u64, u64) {
    let mut ext = extents.to_vec();
    ext.sort_unstable();
    let mut out = BTreeMap::new();
    if ext.is_empty() {
        out.insert(VA_MIN, VA_MAX);
        return (out, VA_MIN, VA_MAX);
    }
    let mut cursor = VA_MIN;
    for &(a, b) in &ext {
        let lo = cursor.div_ceil(ROUND_LARGE) * ROUND_LARGE;
        let hi = a / ROUND_LARGE * ROUND_LARGE;
        if hi > lo {
            out.insert(lo, hi);
        }
        cursor = cursor.max(b);
    }
    let top = cursor.div_ceil(ROUND_LARGE) * ROUND_LARGE;
    if top < VA_MAX {
        out.insert(top, VA_MAX);
    }
    let bottom = (ext[0].0 / ROUND_LARGE * ROUND_LARGE).max(VA_MIN);
    (out, bottom, top.min(VA_MAX))
}
