//! The structural invariants of the layout, checked by the property tests.

use super::*;

impl Simulator {
    /// Checks every structural invariant of the layout; the first broken one
    /// is described. Used by the property tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut reserved = 0u64;
        let mut fig = Figures::default();
        let mut seen = 0usize;
        let mut end = 0u64;
        // Every live block at its address; the index, where kept, holds
        // exactly those entries.
        let index = super::addrs::of_blocks(&self.blocks);
        if let Some(kept) = self.by_addr.kept()
            && *kept != index
        {
            return Err("the address index differs from the blocks' addresses".into());
        }
        let mut by_addr: Vec<(u64, BlockId)> = index.iter().map(|(&a, &i)| (a, i)).collect();
        by_addr.sort_unstable();
        for (addr, id) in by_addr {
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
            self.check_block(addr, id, b, &mut fig, &mut reserved)?;
            seen += 1;
        }
        let pooled: usize = self
            .pools
            .iter()
            .map(|p| p.free.len() + p.unmapped.len())
            .sum();
        let live_free = index
            .values()
            .filter(|&&i| self.blk(i).state == St::Free)
            .count();
        if pooled != live_free {
            return Err(format!(
                "{pooled} pooled entries for {live_free} free blocks"
            ));
        }
        if seen != self.blocks.iter().flatten().count() {
            return Err("two live blocks start at one address".into());
        }
        if reserved != self.fig.reserved {
            return Err(format!(
                "reserved {} but blocks add up to {reserved}",
                self.fig.reserved
            ));
        }
        let segs: u64 = self.segs.values().map(|s| s.size).sum();
        let mapped_exp: u64 = index
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
        let largest = index
            .values()
            .map(|&i| self.blk(i))
            .filter(|b| b.mapped && b.state == St::Free)
            .map(|b| b.size)
            .max()
            .unwrap_or(0);
        // Kept as known, it is the largest; as a bound, at least that.
        match self.largest_free.get() {
            (l, true) if l != largest => {
                return Err(format!(
                    "largest cached block {l} but the layout's is {largest}"
                ));
            }
            (l, false) if l < largest => {
                return Err(format!(
                    "largest cached block at most {l} but the layout's is {largest}"
                ));
            }
            _ => {}
        }
        // Read without keeping it, so that a bound stays one for the steps
        // after this check.
        if self.pools_largest_free() != largest {
            return Err(format!(
                "the pools' largest cached block is {} but the layout's is {largest}",
                self.pools_largest_free()
            ));
        }
        for (i, p) in self.pools.iter().enumerate() {
            let want: BTreeSet<BlockId> = p
                .free
                .iter()
                .map(|k| k.3)
                .filter(|&id| self.flushable(id))
                .collect();
            if want != p.flushable.iter().collect() {
                return Err(format!("pool {i}: the flushable index is out of step"));
            }
        }
        Ok(())
    }

    /// The invariants of the block at `addr` (`id`): indexed where it
    /// starts, linked to its neighbours, merged with free ones, in its pool
    /// as its state says, inside its reservation (`b`, its
    /// entry, already found indexed where it starts); its bytes added to
    /// the figures `fig` and `reserved` of the layout.
    fn check_block(
        &self,
        addr: u64,
        id: BlockId,
        b: &Blk,
        fig: &mut Figures,
        reserved: &mut u64,
    ) -> Result<(), String> {
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
        let in_free = pool.free.contains(sk(b.stream), b.size, b.addr, id);
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
            return Ok(());
        }
        *reserved += b.size;
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
        if b.res.is_none() && b.prev.is_none() {
            self.check_segment_head(addr, id, pool.small)?;
        }
        if let Some(r) = b.res {
            let r = self.reservations[r]
                .as_ref()
                .ok_or(format!("block at {addr:#x} in a released reservation"))?;
            if addr < r.base || addr + b.size > r.base + r.size {
                return Err(format!("block at {addr:#x} is outside its reservation"));
            }
        }
        Ok(())
    }

    /// The invariants of a segment whose first block is `id` at `addr`:
    /// a known segment, its blocks summing to its size, of a size the
    /// allocator would create.
    fn check_segment_head(&self, addr: u64, id: BlockId, small: bool) -> Result<(), String> {
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
        Ok(())
    }
}
