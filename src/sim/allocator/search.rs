//! A block for a request: best fit in the free pools, a new segment when
//! none fits, and the virtual address space new segments are placed in.

use super::start::initial_free_ranges;
use super::*;

impl Simulator {
    pub(super) fn get_free_block(
        &mut self,
        pool: usize,
        stream: i64,
        size: u64,
    ) -> Option<(BlockId, ordered::FreePos)> {
        if self.gc_active() {
            self.pools[pool].searches += 1;
        }
        let s = sk(stream);
        // (size, address, block) of this stream's blocks, best fit first.
        let mut it = self.pools[pool].free.from(s, size);
        let mut cur = it.next()?;
        let mut at = it.last_at();
        if self.blk(cur.2).res.is_some() {
            if self.cfg.expandable_segments {
                // Best fit counts what a block at the mapped frontier could
                // grow into, so blocks that cannot grow are preferred.
                while let Some(next) = it.next() {
                    if self.blk(cur.2).res.is_none()
                        || self.expandable_size(next.2) >= self.expandable_size(cur.2)
                    {
                        break;
                    }
                    (cur, at) = (next, it.last_at());
                }
            } else {
                cur = it.find(|n| self.blk(n.2).res.is_none())?;
                at = it.last_at();
            }
        }
        self.split_probe = self.split_probe.max(cur.0);
        if oversize_refuses(
            cur.0,
            size,
            self.cfg.max_split(),
            self.cfg.max_non_split_rounding,
        ) {
            return None;
        }
        // Left in the cache for `alloc_found_block`, which takes it out.
        Some((cur.2, at))
    }

    pub(super) fn expandable_size(&self, id: BlockId) -> u64 {
        let b = self.blk(id);
        b.size
            + b.next
                .map(|n| self.blk(n))
                .filter(|n| !n.mapped)
                .map_or(0, |n| n.size)
    }

    pub(super) fn alloc_block(
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
        self.device_memory(SimAction::SegmentAlloc, addr, alloc_size, stream);
        Some(id)
    }

    pub(super) fn fits(&self, bytes: u64) -> bool {
        self.capacity
            .is_none_or(|c| self.fig.reserved.saturating_add(bytes) <= c)
    }

    /// A virtual range for a new segment or reservation, first fit in the
    /// configured order; `None` when the model's address space (2^47 bytes,
    /// more than any device) has no room, which the caller answers as an
    /// OOM: only a damaged or hostile file asks for that much.
    pub(super) fn fresh_address(&mut self, size: u64) -> Option<u64> {
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
    pub(super) fn release_address(&mut self, addr: u64, size: u64) {
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
}
