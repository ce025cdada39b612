//! Cached blocks given back to the device: whole segments released on an
//! OOM retry, on `empty_cache` and by the garbage-collection threshold.

use super::*;

impl Simulator {
    /// cudaFree of a cached block that is a whole segment.
    pub(super) fn release_block(&mut self, id: BlockId) {
        let (addr, size, stream) = {
            let b = self.blk(id);
            debug_assert!(b.prev.is_none() && b.next.is_none() && b.res.is_none());
            (b.addr, b.size, b.stream)
        };
        self.remove_free(id);
        self.by_addr.remove(addr);
        self.free_slot(id);
        self.segs.remove(&addr);
        self.release_address(addr, size);
        self.device_memory(SimAction::SegmentFree, addr, size, stream);
    }

    pub(super) fn is_whole_segment(&self, id: BlockId) -> bool {
        let b = self.blk(id);
        b.prev.is_none() && b.next.is_none() && b.res.is_none()
    }

    /// Only with `max_split_size`: free one cached oversize segment big enough
    /// for the request, or the largest ones until enough is released.
    pub(super) fn release_available_cached_blocks(
        &mut self,
        pool: usize,
        stream: i64,
        size: u64,
    ) -> bool {
        let Some(max_split) = self.cfg.max_split_size else {
            return false;
        };
        let s = sk(stream);
        let key = size.max(max_split);
        // (size, address, block) of this stream's blocks.
        let hit = self.pools[pool].free.from(s, key).next();
        match hit {
            Some(h) if self.blk(h.2).res.is_none() => {
                if !self.is_whole_segment(h.2) {
                    return false;
                }
                self.release_block(h.2);
                true
            }
            _ => {
                let below: Vec<(u64, u64, BlockId)> = self.pools[pool]
                    .free
                    .below(s, key)
                    .take_while(|b| b.0 >= max_split)
                    .collect();
                let mut released = 0u64;
                for b in below {
                    if released >= key {
                        break;
                    }
                    if self.blk(b.2).res.is_none() && self.is_whole_segment(b.2) {
                        released += b.0;
                        self.release_block(b.2);
                    }
                }
                released >= key
            }
        }
    }

    /// `release_cached_blocks`: complete pending frees, then cudaFree every
    /// cached whole segment (large pool, then small) and unmap the free
    /// pages of expandable segments.
    pub(super) fn release_cached_blocks(&mut self) {
        let mut pending: Vec<(u64, BlockId)> =
            self.pending.iter().map(|i| (self.blk(i).addr, i)).collect();
        pending.sort_unstable();
        let pending: Vec<BlockId> = pending
            .into_iter()
            .map(|(_, i)| i)
            .filter(|&i| self.blk(i).state == St::Pending)
            .collect();
        for id in pending {
            self.free_block(id);
        }
        for small in [false, true] {
            let pool = self.pool_ix[&((0, 0), small)];
            // In `free`'s order: (stream, size, address), of the blocks the
            // flush acts on (the `flushable` index holds no other).
            let mut cached: Vec<(u64, u64, u64, BlockId)> = self.pools[pool]
                .flushable
                .iter()
                .map(|id| {
                    let b = self.blk(id);
                    (sk(b.stream), b.size, b.addr, id)
                })
                .collect();
            cached.sort_unstable();
            let cached = cached.into_iter().map(|k| k.3);
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
    pub(super) fn garbage_collect(&mut self) {
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
        for b in self.pools[pool].free.iter() {
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
}
