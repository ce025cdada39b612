//! Expandable segments: one virtual reservation per (pool, stream), pages
//! mapped into it as requests need them and unmapped when released.

use super::*;

impl Simulator {
    pub(super) fn reservation_size(&self, page: u64) -> u64 {
        // 9/8 of device memory, as cudaGetDeviceProperties would give; the
        // capacity stands in for the device size.
        let dev = self
            .capacity
            .map_or(UNKNOWN_DEVICE_RESERVATION, |c| c.saturating_add(c / 8));
        dev.div_ceil(page).max(1).saturating_mul(page)
    }

    pub(super) fn allocatable(&self, id: Option<BlockId>) -> bool {
        id.is_some_and(|i| self.blk(i).state == St::Free)
    }

    pub(super) fn find_expandable_block(
        &mut self,
        pool: usize,
        stream: i64,
        size: u64,
    ) -> Option<BlockId> {
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

    pub(super) fn try_allocate_expandable_block(
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
    pub(super) fn map_block(&mut self, id: BlockId, size: u64) -> bool {
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
        self.device_memory(SimAction::SegmentMap, addr, mapped, stream);
        true
    }

    /// The whole pages inside a block of an expandable reservation, as the
    /// reservation's page numbers `begin..end` (empty when it holds none).
    pub(super) fn whole_pages(&self, id: BlockId) -> (u64, u64) {
        let b = self.blk(id);
        let r = b.res.expect("expandable");
        let Reservation { base, page, .. } = *self.res(r);
        let begin = (b.addr - base).div_ceil(page);
        let end = (b.addr + b.size - base) / page;
        (begin, end)
    }

    /// Unmaps the whole pages inside a free mapped block.
    pub(super) fn unmap_block(&mut self, id: BlockId) {
        let r = self.blk(id).res.expect("expandable");
        let Reservation { base, page, .. } = *self.res(r);
        let (addr, size, stream, pool) = {
            let b = self.blk(id);
            (b.addr, b.size, b.stream, b.pool)
        };
        let (begin, end) = self.whole_pages(id);
        if begin >= end {
            return;
        }
        let uaddr = base + begin * page;
        let usize_ = (end - begin) * page;
        self.remove_free(id);
        let before = uaddr - addr;
        if before > 0 {
            let b = self.mapped_free(addr, before, stream, pool, r);
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
            let a = self.mapped_free(uaddr + usize_, after, stream, pool, r);
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
            self.by_addr.remove(addr);
            self.free_slot(id);
            let rsize = self.res(r).size;
            self.release_address(addr, rsize);
            self.reservations[r] = None;
        } else {
            let key = (sk(stream), b.addr, id);
            self.pools[pool].unmapped.insert(key);
        }
        self.device_memory(SimAction::SegmentUnmap, uaddr, usize_, stream);
    }

    /// A new free block of `size` mapped bytes at `addr` in reservation
    /// `r`, not yet linked to its neighbours.
    fn mapped_free(&mut self, addr: u64, size: u64, stream: i64, pool: usize, r: usize) -> BlockId {
        self.alloc_slot(Blk {
            mapped: true,
            ..Blk::unmapped(addr, size, stream, pool, r)
        })
    }
}
