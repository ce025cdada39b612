//! The simulated layout as snapshot segments, for the reports that draw or
//! measure it.

use super::*;

impl Simulator {
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
        self.segment_runs(|addr, ids| out.push(mk(addr, ids)));
        out.sort_by_key(|s| s.address);
        out
    }

    /// The total size of each segment [`Simulator::segments`] gives, in no
    /// particular order, without building their blocks.
    pub fn segment_sizes(&self) -> Vec<u64> {
        let mut out = Vec::new();
        self.segment_runs(|_, ids| out.push(ids.iter().map(|&i| self.blk(i).size).sum()));
        out
    }

    /// Each segment's first address and its blocks in address order: one
    /// per cudaMalloc segment, one per contiguous mapped run of an
    /// expandable reservation.
    fn segment_runs(&self, mut f: impl FnMut(u64, &[BlockId])) {
        let built;
        let index = match self.by_addr.kept() {
            Some(m) => m,
            None => {
                built = super::addrs::of_blocks(&self.blocks);
                &built
            }
        };
        for &addr in self.segs.keys() {
            let mut ids = Vec::new();
            let mut cur = index.get(&addr).copied();
            while let Some(i) = cur {
                ids.push(i);
                cur = self.blk(i).next;
            }
            f(addr, &ids);
        }
        for r in self.reservations.iter().flatten() {
            let mut cur = index.get(&r.base).copied();
            let mut run: Vec<BlockId> = Vec::new();
            while let Some(i) = cur {
                if self.blk(i).mapped {
                    run.push(i);
                } else if !run.is_empty() {
                    f(self.blk(run[0]).addr, &run);
                    run.clear();
                }
                cur = self.blk(i).next;
            }
            if !run.is_empty() {
                f(self.blk(run[0]).addr, &run);
            }
        }
    }
}
