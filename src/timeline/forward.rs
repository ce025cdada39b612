//! One trace event applied forward, as the allocator did it: what each
//! action means for the layout, with the rounding and split rules filling in
//! the block sizes the trace does not record. Anomalies are returned, after
//! the layout was brought as close to the event as it allows.

use super::policy::{LARGE_BUFFER, Policy, SMALL_BUFFER};
use super::state::{Layout, Live, Problem, Seg};
use super::{AnomalyKind, Origin};
use crate::model::*;
use std::collections::BTreeMap;

/// What both directions of the replay need to know about a device.
pub(crate) struct Ctx<'a> {
    pub policy: Policy,
    /// Final segments of the device by address: where a segment created in
    /// the trace survives to the end, its pool and type are read, not guessed.
    pub finals: BTreeMap<u64, &'a Segment>,
    /// Whether the file records `is_expandable` at all.
    pub has_expandable_key: bool,
    /// The snapshot, for its tables of the events' pools
    /// ([`Snapshot::pool_of`]).
    pub snap: &'a Snapshot,
}

impl<'a> Ctx<'a> {
    pub fn new(snap: &'a Snapshot, device: i64, trace: &[TraceEvent]) -> Ctx<'a> {
        let mut policy = Policy::from_settings(snap.allocator_settings.as_ref());
        let finals: BTreeMap<u64, &Segment> =
            snap.segments_of(device).map(|s| (s.address, s)).collect();
        // Old files have no allocator_settings; expandable segments still
        // show in the segments or the trace.
        if !policy.expandable
            && snap
                .allocator_settings
                .as_ref()
                .and_then(|s| s.expandable_segments())
                .is_none()
        {
            policy.expandable = finals.values().any(|s| s.expandable())
                || trace
                    .iter()
                    .any(|e| matches!(e.action, Action::SegmentMap | Action::SegmentUnmap));
        }
        Ctx {
            policy,
            has_expandable_key: snap.segments.iter().any(|s| s.is_expandable.is_some()),
            finals,
            snap,
        }
    }

    /// A segment created by a trace event: metadata from the final state when
    /// it is the same segment there, else guessed from its size.
    pub fn new_seg(&self, x: u64, size: u64, e: &TraceEvent, expandable: bool) -> Seg {
        let fin = self
            .finals
            .range(..=x)
            .next_back()
            .map(|(_, s)| *s)
            .filter(|s| {
                if expandable {
                    s.expandable() && x + size <= s.end()
                } else {
                    s.address == x && s.total_size == size
                }
            });
        let is_expandable = if expandable || self.has_expandable_key {
            Some(expandable)
        } else {
            None
        };
        match fin {
            Some(f) => Seg {
                size,
                stream: self.snap.stream(e),
                kind: f.segment_type,
                pool_id: f.pool_id,
                is_expandable: f.is_expandable.or(is_expandable),
                frames: if f.address == x { f.frames } else { e.frames },
                blocks: Default::default(),
                kind_inferred: false,
            },
            None => Seg {
                size,
                stream: self.snap.stream(e),
                kind: if expandable {
                    // Large pools map 20 MiB pages, the small pool 2 MiB ones.
                    if size.is_multiple_of(LARGE_BUFFER) {
                        SegmentType::Large
                    } else {
                        SegmentType::Small
                    }
                } else if size == SMALL_BUFFER {
                    SegmentType::Small
                } else {
                    SegmentType::Large
                },
                pool_id: self.snap.pool_of(e),
                is_expandable,
                frames: e.frames,
                blocks: Default::default(),
                kind_inferred: true,
            },
        }
    }
}

fn anomaly(kind: AnomalyKind, msg: String) -> Result<(), Problem> {
    Err(Problem::new(kind, msg))
}

/// An event naming memory that runs past the end of the address space: no
/// allocator wrote it, and no step can place it, so both directions skip it.
pub(crate) fn wraps(e: &TraceEvent) -> Result<(), Problem> {
    let names_memory = matches!(
        e.action,
        Action::Alloc
            | Action::FreeRequested
            | Action::FreeCompleted
            | Action::SegmentAlloc
            | Action::SegmentFree
            | Action::SegmentMap
            | Action::SegmentUnmap
    );
    if names_memory && e.addr().checked_add(e.size).is_none() {
        return anomaly(
            AnomalyKind::Other,
            format!(
                "an event of {} bytes at {:#x} runs past the end of the address space (skipped)",
                e.size,
                e.addr()
            ),
        );
    }
    Ok(())
}

pub(crate) fn step(l: &mut Layout, ctx: &Ctx, i: usize, e: &TraceEvent) -> Result<(), Problem> {
    wraps(e)?;
    let x = e.addr();
    match &e.action {
        Action::Alloc => alloc(l, ctx, i, e),
        Action::FreeRequested => {
            let Some(sa) = l.seg_containing(x) else {
                return anomaly(
                    AnomalyKind::FreeOfUnknownAddress,
                    format!("free_requested at {x:#x}, outside every segment"),
                );
            };
            match l.segs[&sa].blocks.get(&x) {
                None => anomaly(
                    AnomalyKind::FreeOfUnknownAddress,
                    format!("free_requested at {x:#x}: no live block starts there"),
                ),
                Some(b) if b.pending => anomaly(
                    AnomalyKind::Other,
                    format!("free_requested at {x:#x}: the block is already pending free"),
                ),
                Some(_) => {
                    l.set_pending(sa, x, true);
                    Ok(())
                }
            }
        }
        Action::FreeCompleted => {
            let removed = l.seg_containing(x).and_then(|sa| l.remove_live(sa, x));
            match removed {
                Some(_) => Ok(()),
                None => anomaly(
                    AnomalyKind::FreeOfUnknownAddress,
                    format!("free_completed at {x:#x}: no live block starts there"),
                ),
            }
        }
        Action::SegmentAlloc => add_segment(l, ctx, e),
        Action::SegmentFree => drop_segment(l, e, "segment_free"),
        Action::SegmentMap => {
            let fresh = ctx.new_seg(x, e.size, e, true);
            l.map_range(x, e.size, ctx.snap.stream(e), fresh)
        }
        Action::SegmentUnmap => l.unmap_range(x, e.size),
        Action::Snapshot => {
            let active = l.active_and_pending();
            if e.size != active {
                anomaly(
                    AnomalyKind::Other,
                    format!(
                        "snapshot marker records {} active bytes, the replayed state holds {active}",
                        e.size
                    ),
                )
            } else {
                Ok(())
            }
        }
        Action::Oom | Action::Annotate => Ok(()),
        Action::Other(_) => anomaly(AnomalyKind::UnknownAction, "unknown action".into()),
    }
}

/// `segment_alloc` forward, `segment_free` backward: a new, empty segment.
pub(crate) fn add_segment(l: &mut Layout, ctx: &Ctx, e: &TraceEvent) -> Result<(), Problem> {
    let (x, size) = (e.addr(), e.size);
    if size == 0 || l.overlaps_any(x, size) {
        return anomaly(
            AnomalyKind::SegmentMismatch,
            format!("a segment of {size} bytes at {x:#x} overlaps an existing segment"),
        );
    }
    let seg = ctx.new_seg(x, size, e, false);
    l.insert_seg(x, seg);
    Ok(())
}

/// `segment_free` forward, `segment_alloc` backward: the segment goes away,
/// which the allocator only does with segments that are entirely free.
pub(crate) fn drop_segment(l: &mut Layout, e: &TraceEvent, what: &str) -> Result<(), Problem> {
    let (x, size) = (e.addr(), e.size);
    let Some(seg) = l.segs.get(&x) else {
        return anomaly(
            AnomalyKind::SegmentMismatch,
            format!("{what} at {x:#x}: no segment starts there"),
        );
    };
    let (total, live) = (seg.size, seg.blocks.len());
    l.remove_seg(x);
    if total != size {
        return anomaly(
            AnomalyKind::SegmentMismatch,
            format!("{what} at {x:#x} of {size} bytes, but the segment has {total}"),
        );
    }
    if live > 0 {
        return anomaly(
            AnomalyKind::SegmentMismatch,
            format!("{what} at {x:#x} while {live} block(s) in it were live"),
        );
    }
    Ok(())
}

fn alloc(l: &mut Layout, ctx: &Ctx, i: usize, e: &TraceEvent) -> Result<(), Problem> {
    let x = e.addr();
    let Some(sa) = l.seg_containing(x) else {
        return anomaly(
            AnomalyKind::OverlappingAlloc,
            format!("alloc of {} bytes at {x:#x}, outside every segment", e.size),
        );
    };
    let gap = match l.gap_at(sa, x) {
        Ok(g) => g,
        Err(a) => {
            return anomaly(
                AnomalyKind::OverlappingAlloc,
                format!(
                    "alloc of {} bytes at {x:#x} overlaps the live block at {a:#x}",
                    e.size
                ),
            );
        }
    };
    let (g0, g1) = (gap.start, gap.end);
    let rounded = ctx.policy.round_size(e.size);
    let seg = &l.segs[&sa];
    if seg.kind_inferred && Policy::is_small(rounded) != (seg.kind == SegmentType::Small) {
        let kind = if Policy::is_small(rounded) {
            SegmentType::Small
        } else {
            SegmentType::Large
        };
        l.set_kind(sa, kind);
    }
    let seg = &l.segs[&sa];
    let mut problem = None;
    if x != g0 {
        problem = Some(Problem::new(
            AnomalyKind::OverlappingAlloc,
            format!(
                "alloc at {x:#x} starts inside a free block that begins at {g0:#x} (the allocator hands out the front of a free block)"
            ),
        ));
    }
    let avail = g1 - x;
    let size = if rounded > avail {
        problem = Some(Problem::new(
            AnomalyKind::OverlappingAlloc,
            format!(
                "alloc of {} bytes (rounded {rounded}) at {x:#x}: only {avail} bytes are free there",
                e.size
            ),
        ));
        avail
    } else if ctx
        .policy
        .should_split(seg.kind == SegmentType::Small, rounded, avail - rounded)
    {
        rounded
    } else {
        avail
    };
    if problem.is_none() && seg.stream != ctx.snap.stream(e) {
        // Streams never share cached blocks.
        problem = Some(Problem::new(
            AnomalyKind::Other,
            format!(
                "alloc at {x:#x} on stream {:#x} inside a segment of stream {:#x}",
                ctx.snap.stream(e),
                seg.stream
            ),
        ));
    }
    l.insert_live(
        sa,
        x,
        Live {
            size,
            requested: e.size,
            pending: false,
            frames: e.frames,
            origin: Origin::Event(i as u32),
            inferred: false,
        },
        gap,
    );
    problem.map_or(Ok(()), Err)
}
