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

//!
//! Its parts: [`start`] (a simulator started from recorded segments),
//! [`search`] (a block for a request: the free pools, new segments, the
//! virtual address space), [`expandable`] (reservations mapped and unmapped
//! page by page), [`release`] (cached blocks given back to the device),
//! [`blocks`] (splitting, merging and the block table's bookkeeping),
//! [`layout`] (the layout as snapshot segments) and [`invariants`] (the
//! structural checks of the property tests).

mod addrs;
mod blocks;
mod expandable;
mod ids;
mod invariants;
mod layout;
mod ordered;
mod release;
mod search;
mod start;

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

/// Where the model keeps a block it placed ([`Simulator::malloc_slot`]): a
/// hint that spares a lookup by address while the block stays there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(u32);

impl Slot {
    /// No hint: the block is looked up by its address.
    pub const UNKNOWN: Slot = Slot(u32::MAX);
}

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
    free: ordered::FreeIndex,
    /// Unmapped expandable ranges by (stream, address).
    unmapped: BTreeSet<(u64, u64, BlockId)>,
    /// The blocks in `free` a cache flush acts on: whole segments and
    /// blocks of expandable segments. A flush at each OOM that walked every
    /// free block cost the trace length times the free blocks; a flush
    /// sorts them into `free`'s order, so the index itself is hashed (an
    /// ordered set cost a second ordered update per cached segment).
    flushable: ids::IdSet,
    /// `get_free_blocks_call_count` (only counted while GC is active).
    searches: u64,
}

impl Pool {
    /// The largest size in `free`.
    fn largest_free(&self) -> u64 {
        self.free.largest()
    }
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
    /// The blocks by address, kept once asked for ([`addrs`]).
    by_addr: addrs::AddrIndex,
    /// Pending-free blocks: a cache flush completes them (in address
    /// order), and finding them by a walk over every block made each OOM
    /// cost the whole layout.
    pending: ids::IdSet,
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
    /// The largest cached block's size, and whether it is known: once the
    /// block it was taken from leaves the cache, it is only a bound (found
    /// again from the pools when asked, unless a block at least that large
    /// enters the cache first, as a block merged with the largest one
    /// does). A count of blocks per size, kept for this alone, cost two
    /// ordered-map updates every time a block entered or left the cache.
    largest_free: std::cell::Cell<(u64, bool)>,
    fig: Figures,
    counters: Counters,
    events: Vec<SimEvent>,
    record_block_events: bool,
    /// See [`Simulator::split_probe`].
    split_probe: u64,
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
            by_addr: Default::default(),
            pending: Default::default(),
            pools: Vec::new(),
            pool_ix: BTreeMap::new(),
            segs: BTreeMap::new(),
            reservations: Vec::new(),
            order: AddressOrder::Up,
            va_free: BTreeMap::from([(VA_MIN, VA_MAX)]),
            va_bottom: VA_MIN,
            va_top: VA_MAX,
            initial_extents: Vec::new(),
            largest_free: std::cell::Cell::new((0, true)),
            fig: Figures::default(),
            counters: Counters::default(),
            events: Vec::new(),
            record_block_events: true,
            split_probe: 0,
        };
        // The default pools first, so their indexes are stable: `pool`
        // answers them without a lookup.
        let made = (s.pool((0, 0), false), s.pool((0, 0), true));
        debug_assert_eq!(made, (0, 1));
        s
    }
}

impl Simulator {
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }
    pub fn capacity(&self) -> Option<u64> {
        self.capacity
    }
    #[inline]
    pub fn figures(&self) -> Figures {
        let mut f = self.fig;
        f.largest_free = self.largest_free();
        f
    }

    /// The size of the largest cached block (0 with none).
    #[inline]
    fn largest_free(&self) -> u64 {
        match self.largest_free.get() {
            (l, true) => l,
            _ => self.find_largest_free(),
        }
    }

    /// [`Simulator::largest_free`] once the block it was taken from left
    /// the cache: found again from the pools, and kept.
    #[cold]
    fn find_largest_free(&self) -> u64 {
        let l = self.pools_largest_free();
        self.largest_free.set((l, true));
        l
    }

    /// The largest cached block's size, from the pools.
    pub(super) fn pools_largest_free(&self) -> u64 {
        self.pools
            .iter()
            .map(|p| p.largest_free())
            .max()
            .unwrap_or(0)
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
    /// Takes the events recorded since the last call, keeping the room
    /// they took for the next ones.
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, SimEvent> {
        self.events.drain(..)
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
        self.malloc_slot(orig, stream, pool_id)
            .map(|(addr, _)| addr)
    }

    /// [`Simulator::malloc_in`], also telling where the block is kept, for
    /// [`Simulator::free_requested_at`] and [`Simulator::free_completed_at`].
    pub fn malloc_slot(
        &mut self,
        orig: u64,
        stream: i64,
        pool_id: (i64, i64),
    ) -> Result<(u64, Slot), OomInfo> {
        let size = round_size(orig, &self.cfg.roundup_power2_divisions);
        let pool = self.pool(pool_id, is_small(size));
        let alloc_size = allocation_size_with(size, self.cfg.large_segment_size);
        // A cached block comes with where its pool keeps it.
        let mut found = self
            .get_free_block(pool, stream, size)
            .map(|(id, at)| (id, Some(at)));
        if found.is_none() {
            if self.gc_active() {
                self.garbage_collect();
            }
            let fresh = |id| (id, None);
            found = self
                .alloc_block(pool, stream, size, alloc_size, false)
                .map(fresh);
            if found.is_none() {
                // The oversize release below depends on max_split_size.
                self.split_probe = u64::MAX;
            }
            if found.is_none() && self.release_available_cached_blocks(pool, stream, size) {
                found = self
                    .alloc_block(pool, stream, size, alloc_size, false)
                    .map(fresh);
            }
            if found.is_none() {
                self.release_cached_blocks();
                found = self
                    .alloc_block(pool, stream, size, alloc_size, true)
                    .map(fresh);
            }
        }
        let Some((id, at)) = found else {
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
        Ok((self.alloc_found_block(id, at, size, orig), Slot(id as u32)))
    }

    /// The live block at `addr`, found from `slot` when the block is still
    /// kept there, else by its address: the same block either way, since
    /// every live block is indexed at its address.
    #[inline]
    fn live_at_slot(&mut self, addr: u64, slot: Slot) -> Result<BlockId, SimError> {
        match self.blocks.get(slot.0 as usize) {
            Some(Some(b)) if b.addr == addr && b.mapped => Ok(slot.0 as usize),
            _ => self.live_at(addr),
        }
    }

    /// The program frees a block (`free_requested`); it stays unusable
    /// until [`Simulator::free_completed`].
    pub fn free_requested(&mut self, addr: u64) -> Result<(), SimError> {
        self.free_requested_at(addr, Slot::UNKNOWN)
    }

    /// [`Simulator::free_requested`] of the block [`Simulator::malloc_slot`]
    /// placed at `addr` and `slot`.
    pub fn free_requested_at(&mut self, addr: u64, slot: Slot) -> Result<(), SimError> {
        let id = self.live_at_slot(addr, slot)?;
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
        self.pending.insert(id);
        self.fig.allocated -= size;
        self.fig.requested -= req;
        self.fig.pending += size;
        if self.record_block_events {
            self.event(SimAction::FreeRequested, addr, req, stream);
        }
        Ok(())
    }

    /// The block's stream events completed: it returns to its pool, merged
    /// with free neighbours. Returns false when it had already been
    /// returned (a cache flush synchronises pending frees).
    pub fn free_completed(&mut self, addr: u64) -> Result<bool, SimError> {
        self.free_completed_at(addr, Slot::UNKNOWN)
    }

    /// [`Simulator::free_completed`] of the block [`Simulator::malloc_slot`]
    /// placed at `addr` and `slot`.
    pub fn free_completed_at(&mut self, addr: u64, slot: Slot) -> Result<bool, SimError> {
        let id = self.live_at_slot(addr, slot)?;
        match self.blk(id).state {
            St::Allocated => {
                self.free_requested_at(addr, Slot(id as u32))?;
            }
            St::Pending => {}
            St::Free => return Ok(false),
        }
        self.free_block(id);
        Ok(true)
    }

    /// Where the model keeps each block in use (allocated or pending
    /// free), by address: for a caller that knows such blocks by their
    /// addresses alone (the start state's), so that it frees them with
    /// [`Simulator::free_completed_at`].
    pub fn slots(&self) -> std::collections::HashMap<u64, Slot, foldhash::fast::RandomState> {
        (self.blocks.iter().enumerate())
            .filter_map(|(id, b)| Some((id, b.as_ref()?)))
            .filter(|(_, b)| b.state != St::Free)
            .map(|(id, b)| (b.addr, Slot(id as u32)))
            .collect()
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

    /// The largest size this run has compared with `max_split_size` (a
    /// request's rounded size, or the cached block found for it), or
    /// `u64::MAX` once a cudaMalloc failed, where the release of oversize
    /// blocks depends on it. Those are the only places the setting (and
    /// `max_non_split_rounding`, which only acts on requests at or over it)
    /// enters, so a run under settings that differ only there, with both
    /// limits above this size, makes the same decisions at every step.
    pub fn split_probe(&self) -> u64 {
        self.split_probe
    }

    pub(super) fn gc_active(&self) -> bool {
        self.cfg.memory_fraction.is_some() && self.cfg.garbage_collection_threshold > 0.0
    }

    pub(super) fn allowed_max(&self) -> Option<u64> {
        match (self.cfg.memory_fraction, self.capacity) {
            (Some(f), Some(c)) => Some((c as f64 * f) as u64),
            _ => None,
        }
    }
}
