//! Blocks split on allocation and merged with free neighbours on free, and
//! the bookkeeping of the block table: slots, links, pools and the free
//! indexes.

use super::*;

impl Blk {
    /// A free, unmapped block of `size` bytes at `addr` in reservation `r`,
    /// not linked to its neighbours.
    pub(super) fn unmapped(addr: u64, size: u64, stream: i64, pool: usize, r: usize) -> Blk {
        Blk {
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
        }
    }
}

impl Simulator {
    /// Whether a cache flush acts on block `id` when it is cached (the
    /// pool's `flushable` index): a whole segment, which it releases, or a
    /// range of an expandable reservation holding a whole page, which it
    /// unmaps. Under memory pressure a flush comes at every retry, and most
    /// cached ranges of a reservation hold no whole page: kept out of the
    /// index, they cost a flush nothing. Whether a block is in it depends on
    /// its links, address and size, none of which change while it is cached
    /// but through [`Simulator::link`].
    pub(super) fn flushable(&self, id: BlockId) -> bool {
        let b = self.blk(id);
        if b.res.is_some() {
            let (begin, end) = self.whole_pages(id);
            begin < end
        } else {
            b.prev.is_none() && b.next.is_none()
        }
    }

    /// Allocates block `id` for a request of `size` rounded bytes (`orig`
    /// asked for), splitting off what it does not need: a block its pool
    /// caches `at` ([`Simulator::get_free_block`]) leaves the cache, its
    /// remainder taking its entry's place; a new one (`None`) is in no
    /// pool.
    pub(super) fn alloc_found_block(
        &mut self,
        id: BlockId,
        at: Option<ordered::FreePos>,
        size: u64,
        orig: u64,
    ) -> u64 {
        if at.is_some() {
            self.uncached(id);
        }
        let (bsize, small, pool) = {
            let b = self.blk(id);
            (b.size, self.pools[b.pool].small, b.pool)
        };
        self.split_probe = self.split_probe.max(size);
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
            // Neither block is cached (the one found was taken out of its
            // pool), so no flushable entry changes with the link.
            self.blk_mut(id).next = Some(rest);
            self.blk_mut(rest).prev = Some(id);
            self.blk_mut(id).size = size;
            match at {
                Some(at) => {
                    let (_, _, rsize, raddr) = self.cached(rest);
                    self.pools[pool].free.replace_at(at, rsize, raddr, rest);
                }
                None => self.insert_free(rest),
            }
        } else if let Some(at) = at {
            let was = self.pools[pool].free.remove_at(at);
            debug_assert_eq!(was, id, "the block found is the block taken");
        }
        let b = self.blk_mut(id);
        b.state = St::Allocated;
        b.requested = orig;
        let (addr, bsize, stream) = (b.addr, b.size, b.stream);
        self.fig.allocated += bsize;
        self.fig.requested += orig;
        if self.record_block_events {
            self.event(SimAction::Alloc, addr, orig, stream);
        }
        addr
    }

    pub(super) fn free_block(&mut self, id: BlockId) {
        let (addr, size, req, stream) = {
            let b = self.blk(id);
            (b.addr, b.size, b.requested, b.stream)
        };
        if self.record_block_events {
            self.event(SimAction::FreeCompleted, addr, req, stream);
        }
        self.fig.pending -= size;
        self.pending.remove(id);
        self.blk_mut(id).state = St::Free;
        // The merged block takes the place of a neighbour it absorbed.
        match self.merge_neighbours_at(id) {
            Some(at) => {
                let (pool, _, size, addr) = self.cached(id);
                self.pools[pool].free.replace_at(at, size, addr, id);
            }
            None => self.insert_free(id),
        }
    }

    /// Merges `id` (in no pool set) with free neighbours of equal mapping.
    pub(super) fn merge_neighbours(&mut self, id: BlockId) {
        if let Some(at) = self.merge_neighbours_at(id) {
            let pool = self.blk(id).pool;
            self.pools[pool].free.remove_at(at);
        }
    }

    /// [`Simulator::merge_neighbours`], but the last cached neighbour merged
    /// is left in its pool's index (out of the cache otherwise): where it
    /// is, for the caller to take it out or put another block there.
    fn merge_neighbours_at(&mut self, id: BlockId) -> Option<ordered::FreePos> {
        let mut left: Option<ordered::FreePos> = None;
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
                let (pool, stream, size, addr) = (s.pool, sk(s.stream), s.size, s.addr);
                if let Some(at) = left.take() {
                    self.pools[pool].free.remove_at(at);
                }
                left = self.pools[pool].free.find(stream, size, addr);
                debug_assert!(left.is_some(), "block {src} was not cached");
                self.uncached(src);
            } else {
                let key = (sk(s.stream), s.addr, src);
                let pool = s.pool;
                self.pools[pool].unmapped.remove(&key);
            }
            let s = self.blk(src).clone();
            if before {
                // `id` now starts where `src` did: its entry takes that one's place.
                let old = self.blk(id).addr;
                self.by_addr.remove(old);
                self.by_addr.insert(s.addr, id);
                let b = self.blk_mut(id);
                b.addr = s.addr;
                b.prev = s.prev;
                if let Some(p) = s.prev {
                    self.blk_mut(p).next = Some(id);
                }
            } else {
                self.by_addr.remove(s.addr);
                self.blk_mut(id).next = s.next;
                if let Some(n) = s.next {
                    self.blk_mut(n).prev = Some(id);
                }
            }
            self.blk_mut(id).size += s.size;
            self.free_slot(src);
        }
        left
    }

    // ---- bookkeeping ------------------------------------------------------

    pub(super) fn pool(&mut self, pool_id: (i64, i64), small: bool) -> usize {
        // The default pools are made first (`Simulator::new`).
        if pool_id == (0, 0) && self.pools.len() >= 2 {
            return small as usize;
        }
        if let Some(&i) = self.pool_ix.get(&(pool_id, small)) {
            return i;
        }
        let i = self.pools.len();
        self.pools.push(Pool {
            pool_id,
            small,
            free: Default::default(),
            unmapped: BTreeSet::new(),
            flushable: Default::default(),
            searches: 0,
        });
        self.pool_ix.insert((pool_id, small), i);
        i
    }

    pub(super) fn blk(&self, id: BlockId) -> &Blk {
        self.blocks[id].as_ref().expect("live block")
    }
    pub(super) fn blk_mut(&mut self, id: BlockId) -> &mut Blk {
        self.blocks[id].as_mut().expect("live block")
    }
    pub(super) fn res(&self, r: usize) -> &Reservation {
        self.reservations[r].as_ref().expect("live reservation")
    }

    pub(super) fn alloc_slot(&mut self, b: Blk) -> BlockId {
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

    pub(super) fn free_slot(&mut self, id: BlockId) {
        self.blocks[id] = None;
        self.spare.push(id);
    }

    pub(super) fn set_addr(&mut self, id: BlockId, addr: u64) {
        let old = self.blk(id).addr;
        self.by_addr.moved(id, old, addr);
        self.blk_mut(id).addr = addr;
    }

    pub(super) fn link(&mut self, a: Option<BlockId>, b: BlockId) {
        if let Some(a) = a {
            self.blk_mut(a).next = Some(b);
            self.refresh_flushable(a);
        }
        self.blk_mut(b).prev = a;
        self.refresh_flushable(b);
    }

    /// A cached block that gains a neighbour (a layout being loaded links
    /// each block after caching the one before) is no longer a whole segment.
    pub(super) fn refresh_flushable(&mut self, id: BlockId) {
        let b = self.blk(id);
        // Only free mapped blocks are cached.
        if b.state != St::Free || !b.mapped {
            return;
        }
        let (pool, stream, size, addr) = (b.pool, sk(b.stream), b.size, b.addr);
        let flushable = self.flushable(id);
        let p = &mut self.pools[pool];
        if !p.free.contains(stream, size, addr, id) {
            return;
        }
        if flushable {
            p.flushable.insert(id);
        } else {
            p.flushable.remove(id);
        }
    }

    pub(super) fn new_unmapped(
        &mut self,
        addr: u64,
        size: u64,
        stream: i64,
        pool: usize,
        r: usize,
    ) -> BlockId {
        let id = self.alloc_slot(Blk::unmapped(addr, size, stream, pool, r));
        self.pools[pool].unmapped.insert((sk(stream), addr, id));
        id
    }

    /// Device memory taken (`SegmentAlloc`, `SegmentMap`) or given back
    /// (`SegmentFree`, `SegmentUnmap`): the reserved figure, the counters
    /// and the event.
    pub(super) fn device_memory(&mut self, action: SimAction, addr: u64, size: u64, stream: i64) {
        if matches!(action, SimAction::SegmentAlloc | SimAction::SegmentMap) {
            self.fig.reserved += size;
            self.counters.device_allocs += 1;
        } else {
            self.fig.reserved -= size;
            self.counters.device_frees += 1;
        }
        self.event(action, addr, size, stream);
    }

    /// Records an event of no device-free figure.
    #[inline]
    pub(super) fn event(&mut self, action: SimAction, addr: u64, size: u64, stream: i64) {
        self.events.push(SimEvent {
            action,
            addr,
            size,
            stream,
            device_free: None,
        });
    }

    pub(super) fn insert_free(&mut self, id: BlockId) {
        let (pool, stream, size, addr) = self.cached(id);
        self.pools[pool].free.insert(stream, size, addr, id);
    }

    /// What caching block `id` changes besides its pool's index (which the
    /// caller updates); returns its (pool, stream key, size, address).
    fn cached(&mut self, id: BlockId) -> (usize, u64, u64, u64) {
        let b = self.blk(id);
        let (pool, stream, size, addr) = (b.pool, sk(b.stream), b.size, b.addr);
        debug_assert!(b.mapped && b.state == St::Free);
        let searches = self.pools[pool].searches;
        // Splits and merges take a block out of the set first; `link`
        // refreshes one that gains a neighbour while cached.
        let flushable = self.flushable(id);
        self.blk_mut(id).gc_base = searches;
        if flushable {
            self.pools[pool].flushable.insert(id);
        }
        // Every other cached block is at most the size kept, known or a
        // bound: a block at least that large is the largest.
        if size >= self.largest_free.get().0 {
            self.largest_free.set((size, true));
        }
        self.fig.inactive += size;
        self.fig.free_blocks += 1;
        (pool, stream, size, addr)
    }

    pub(super) fn remove_free(&mut self, id: BlockId) {
        let b = self.blk(id);
        let (pool, stream, size, addr) = (b.pool, sk(b.stream), b.size, b.addr);
        let was = self.pools[pool].free.remove(stream, size, addr);
        debug_assert!(was, "block {id} was not cached");
        self.uncached(id);
    }

    /// What taking block `id` out of the cache changes besides its pool's
    /// index (which the caller updates).
    fn uncached(&mut self, id: BlockId) {
        let b = self.blk(id);
        let (pool, size) = (b.pool, b.size);
        // In the flushable index only as `refresh_flushable` keeps it.
        let flushable = self.flushable(id);
        if flushable {
            self.pools[pool].flushable.remove(id);
        }
        if self.largest_free.get() == (size, true) {
            self.largest_free.set((size, false));
        }
        self.fig.inactive -= size;
        self.fig.free_blocks -= 1;
    }

    pub(super) fn live_at(&mut self, addr: u64) -> Result<BlockId, SimError> {
        match self.by_addr.get(addr, &self.blocks) {
            Some(id) if self.blk(id).mapped => Ok(id),
            _ => Err(SimError::UnknownAddress { addr }),
        }
    }
}
