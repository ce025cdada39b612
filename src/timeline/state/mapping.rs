//! Pages mapped into and unmapped from expandable segments: a mapped run
//! grows, is trimmed, split, joined with its neighbour or removed.

use super::*;

impl Layout {
    /// Maps `[x, x + size)` into an expandable segment: the range joins the
    /// mapped run of the same stream that ends at `x` and the one that
    /// starts at its end, or becomes a run of its own (`fresh`).
    pub fn map_range(&mut self, x: u64, size: u64, stream: i64, fresh: Seg) -> Result<(), Problem> {
        if size == 0 {
            return Ok(());
        }
        if self.overlaps_any(x, size) {
            return Err(Problem::new(
                AnomalyKind::SegmentMismatch,
                format!("mapping {size} bytes at {x:#x} overlaps a mapped segment"),
            ));
        }
        let joins = |s: &Seg| s.expandable() && s.stream == stream;
        let left = self
            .segs
            .last_before(x)
            .filter(|(a, s)| *a + s.size == x && joins(s))
            .map(|(a, _)| a);
        let right = self
            .segs
            .get(&(x + size))
            .filter(|s| joins(s))
            .map(|_| x + size);
        if let (Some(l), None) = (left, right) {
            // The run grows at its end: only its last free range and the
            // reserved bytes change, not every block of it.
            self.resize_tail(l, size as i128);
            return Ok(());
        }
        let start = match left {
            Some(l) => {
                self.unindex_seg(l);
                self.segs.get_mut(&l).expect("segment").size += size;
                l
            }
            None => {
                self.segs.insert(x, fresh);
                x
            }
        };
        if let Some(r) = right {
            let same_kind = self.segs[&r].kind == self.segs[&start].kind
                || self.segs[&start].kind_inferred
                || self.segs[&r].kind_inferred;
            if same_kind {
                self.unindex_seg(r);
                let rs = self.segs.remove(&r).expect("segment");
                let s = self.segs.get_mut(&start).expect("segment");
                if s.kind_inferred && !rs.kind_inferred {
                    s.kind = rs.kind;
                    s.kind_inferred = false;
                }
                s.size += rs.size;
                s.blocks.extend(rs.blocks);
            }
        }
        // Both the grown run and `fresh` were left out of the index above.
        self.index_seg(start);
        Ok(())
    }

    /// Unmaps `[x, x + size)` from the expandable segment holding it,
    /// trimming, splitting or removing the mapped run.
    pub fn unmap_range(&mut self, x: u64, size: u64) -> Result<(), Problem> {
        if size == 0 {
            return Ok(());
        }
        let Some(sa) = self.seg_containing(x) else {
            return Err(Problem::new(
                AnomalyKind::SegmentMismatch,
                format!("unmapping {size} bytes at {x:#x}, outside every segment"),
            ));
        };
        let seg = &self.segs[&sa];
        let end = x + size;
        if end > sa + seg.size {
            return Err(Problem::new(
                AnomalyKind::SegmentMismatch,
                format!(
                    "unmapping {size} bytes at {x:#x} runs past the end of the segment at {sa:#x} ({} bytes)",
                    seg.size
                ),
            ));
        }
        if let Some((a, b)) = seg.blocks.last_before(end)
            && a + b.size > x
        {
            return Err(Problem::new(
                AnomalyKind::SegmentMismatch,
                format!("unmapping {size} bytes at {x:#x} would drop the live block at {a:#x}"),
            ));
        }
        if end == sa + seg.size && x > sa {
            // Trimmed at its end (the range holds no block, checked above):
            // only its last free range and the reserved bytes change.
            self.resize_tail(sa, -(size as i128));
            return Ok(());
        }
        self.unindex_seg(sa);
        let mut seg = self.segs.remove(&sa).expect("segment");
        let total = seg.size;
        let right_blocks = seg.blocks.split_off(end);
        if end < sa + total {
            let right = Seg {
                size: sa + total - end,
                blocks: right_blocks,
                ..seg.clone()
            };
            self.segs.insert(end, right);
            self.index_seg(end);
        }
        if x > sa {
            seg.size = x - sa;
            self.segs.insert(sa, seg);
            self.index_seg(sa);
        }
        Ok(())
    }

    /// Grows (or, `by` negative, shrinks) segment `sa` at its end, by a
    /// range no block lies in: the index changes as `unindex_seg` then
    /// `index_seg` around the resize would change it, in a few steps
    /// instead of one a block.
    fn resize_tail(&mut self, sa: u64, by: i128) {
        let seg = &self.segs[&sa];
        let (class, old_end) = (seg.class(), sa + seg.size);
        let new_end = (old_end as i128 + by) as u64;
        // Where the last block ends (the segment's start when it has none).
        let tail = seg
            .blocks
            .last_before(old_end)
            .map_or(sa, |(a, b)| a + b.size);
        debug_assert!(tail <= new_end, "a block lies in the range");
        if self.idx.on {
            self.idx.remove_gap(class, tail, old_end);
            self.idx.add_gap(class, tail, new_end);
            self.idx.reserved = (self.idx.reserved as i128 + by) as u64;
        }
        self.segs.get_mut(&sa).expect("segment").size = new_end - sa;
    }
}
