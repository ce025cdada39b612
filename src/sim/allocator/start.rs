//! A simulator started from a snapshot's recorded segments: their blocks
//! placed as recorded, expandable segments grouped into reservations, and
//! the free virtual address space around them.

use super::*;

impl Simulator {
    /// Starts from recorded segments (one device): `active_allocated` and
    /// `active_pending_free` blocks are live, `inactive` ones cached.
    /// Expandable segments of one (pool, stream, size class) share a
    /// virtual reservation starting at the lowest of them, except where the
    /// file shows two: another segment lies between them, one ends where
    /// the next begins (a reservation reports each contiguous mapped run as
    /// one segment, so touching runs belong to different reservations), or
    /// the next does not start a whole number of pages above the first (a
    /// reservation maps pages only at page multiples from its base).
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
            check_recorded(i, seg, top)?;
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
        let large_page = s.cfg.large_segment_size;
        for (key, idx) in reservation_runs(segments, &order, groups, large_page) {
            let (base, size) = s.place_reservation(key, &idx, segments, &order)?;
            extents.push((base, base.saturating_add(size)));
        }
        (s.va_free, s.va_bottom, s.va_top) = initial_free_ranges(&extents);
        s.initial_extents = extents;
        Ok(s)
    }

    /// One reservation of recorded expandable segments (`idx`, in address
    /// order): its virtual range, its segments' blocks and the unmapped
    /// ranges between and after them. Its base and size.
    fn place_reservation(
        &mut self,
        (pool_id, stream, small): ReservationKey,
        idx: &[usize],
        segments: &[Segment],
        order: &[usize],
    ) -> Result<(u64, u64), SimError> {
        let s = self;
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
        let pool = s.pool(pool_id, small);
        let r = s.reservations.len();
        s.reservations.push(Some(Reservation { base, size, page }));
        let mut cursor = base;
        let mut last: Option<BlockId> = None;
        // Reservations start on 2 MiB (mapping granularity) boundaries and
        // map whole pages from there, so every run starts on a multiple of
        // the largest power of two dividing both.
        let grain = 1u64 << page.trailing_zeros().min(SMALL_BUFFER.trailing_zeros());
        for &i in idx {
            let seg = &segments[i];
            if !seg.address.is_multiple_of(grain) {
                return Err(SimError::BadInitial {
                    index: i,
                    address: seg.address,
                    msg: format!(
                        "expandable segment is not aligned to {grain} bytes \
                         (reservations start on 2 MiB boundaries and map {page}-byte pages)"
                    ),
                });
            }
            // The runs were cut where a segment is not whole pages above
            // the first.
            debug_assert!((seg.address - base).is_multiple_of(page));
            if !seg.total_size.is_multiple_of(page) {
                return Err(SimError::BadInitial {
                    index: i,
                    address: seg.address,
                    msg: format!(
                        "expandable segment of {} bytes is not aligned to {page}-byte pages",
                        seg.total_size
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
        Ok((base, size))
    }

    /// Builds the blocks of one recorded segment; returns (first, last).
    pub(super) fn place_blocks(
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
                    self.pending.insert(id);
                }
            }
            first.get_or_insert(id);
            last = Some(id);
        }
        Ok((first.expect("a block"), last.expect("a block")))
    }
}

/// Free virtual ranges around the initial segments (2 MiB-aligned): below
/// the first, the holes between them and above the last; and where the
/// first begins and the last ends (`VA_MIN` and `VA_MAX` without initial
/// segments).
pub(super) fn initial_free_ranges(extents: &[(u64, u64)]) -> (BTreeMap<u64, u64>, u64, u64) {
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

/// Refuses a recorded segment (`i`, the `seg` of the file) that is empty,
/// that holds a block of no bytes (PyTorch's smallest is 512: two blocks
/// would start at one address, which the model keeps one block each),
/// whose blocks are not contiguous or do not cover it, or that overlaps an
/// earlier one (which ends at `top`).
fn check_recorded(i: usize, seg: &Segment, top: u64) -> Result<(), SimError> {
    let bad = |msg: String| SimError::BadInitial {
        index: i,
        address: seg.address,
        msg,
    };
    if seg.total_size == 0 {
        return Err(bad("empty segment".into()));
    }
    if let Some(b) = seg.blocks.iter().find(|b| b.size == 0) {
        return Err(bad(format!("a block of 0 bytes at {:#x}", b.address)));
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
    Ok(())
}

/// The recorded expandable segments of each (pool, stream, size class)
/// cut into the reservations the file shows: a new one where another
/// segment lies between two, where one ends at the next's start, or where
/// the next is not a whole number of pages (`large_page` for the large
/// pool, 2 MiB for the small) above the first of the run. Reservations of
/// one stream and pool may follow one another with any gap between them
/// (the allocator reserves a new one when a request does not fit the
/// unmapped space of the others, and keeps it even if mapping then fails),
/// so such a gap tells them apart rather than making the layout invalid.
fn reservation_runs(
    segments: &[Segment],
    order: &[usize],
    groups: BTreeMap<ReservationKey, Vec<usize>>,
    large_page: u64,
) -> Vec<(ReservationKey, Vec<usize>)> {
    // Position of each segment in address order.
    let mut rank = vec![0usize; segments.len()];
    for (k, &i) in order.iter().enumerate() {
        rank[i] = k;
    }
    let mut runs: Vec<(ReservationKey, Vec<usize>)> = Vec::new();
    for (key, idx) in groups {
        let page = if key.2 { SMALL_BUFFER } else { large_page };
        let mut run: Vec<usize> = Vec::new();
        for i in idx {
            if let (Some(&first), Some(&p)) = (run.first(), run.last())
                && (rank[i] > rank[p] + 1
                    || segments[p].end() == segments[i].address
                    || !(segments[i].address - segments[first].address).is_multiple_of(page))
            {
                runs.push((key, std::mem::take(&mut run)));
            }
            run.push(i);
        }
        runs.push((key, run));
    }
    runs
}
