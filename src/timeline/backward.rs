//! The state before the first trace event, rebuilt by undoing the trace from
//! the recorded final segments (the ring buffer dropped whatever came
//! earlier). Blocks freed in the trace but allocated before it come back
//! with a size inferred from their request:
//!
//! * the request is rounded as the allocator rounds it;
//! * in the large pool (without expandable segments) a free block of 1 MiB
//!   or less is never split off, so when the rounded block would leave such
//!   a sliver before the next live block, the block took it whole;
//! * for the same reason, a sliver that appears between such an inferred
//!   block and a block or allocation found later (earlier in time) belongs to
//!   the inferred block, which is widened.
//!
//! Owns only the undo direction; the forward replay re-derives every block it
//! sees allocated, so inferred sizes matter only for blocks older than the
//! trace.

use super::forward::{Ctx, add_segment, drop_segment};
use super::policy::{LARGE_BUFFER, SMALL_SIZE};
use super::state::{Gap, Layout, Live, Problem};
use super::{AnomalyKind, Origin};
use crate::model::*;
use std::collections::BTreeMap;

/// Unsplit large blocks keep at most this much beyond their rounded size
/// (oversize blocks: `max_non_split_rounding`, 20 MiB by default).
fn max_unsplit_slack(ctx: &Ctx, rounded: u64) -> u64 {
    match ctx.policy.max_split_size {
        Some(m) if rounded >= m => LARGE_BUFFER,
        _ => SMALL_SIZE,
    }
}

fn widenable(l: &Layout, ctx: &Ctx, sa: u64) -> bool {
    l.segs[&sa].kind == SegmentType::Large && !ctx.policy.expandable
}

/// Widens the inferred block that ends where `gap`, the free block holding
/// `x`, begins, up to `x`, when the rules allow a block to hold that much;
/// returns the free block that then holds `x`.
fn widen_up_to(l: &mut Layout, ctx: &Ctx, sa: u64, x: u64, gap: Gap) -> Gap {
    if gap.start >= x || !widenable(l, ctx, sa) {
        return gap;
    }
    let Some((p, requested)) = l.inferred_block_before(sa, gap) else {
        return gap;
    };
    let rounded = ctx.policy.round_size(requested);
    let new_size = x - p;
    if new_size.saturating_sub(rounded) <= max_unsplit_slack(ctx, rounded) {
        l.widen_live(sa, p, new_size);
        return gap.from(x);
    }
    gap
}

fn record(problems: &mut BTreeMap<usize, Problem>, i: usize, r: Result<(), Problem>) {
    if let Err(mut p) = r {
        p.msg = format!("rebuilding the start: {}", p.msg);
        problems.entry(i).or_insert(p);
    }
}

/// Undoes `trace` from `end` (the recorded final layout), recording the
/// anomalies it meets by event index.
pub(crate) fn start_state(
    ctx: &Ctx,
    mut l: Layout,
    trace: &[TraceEvent],
    problems: &mut BTreeMap<usize, Problem>,
) -> Layout {
    for (i, e) in trace.iter().enumerate().rev() {
        let x = e.addr();
        if let Err(p) = super::forward::wraps(e) {
            record(problems, i, Err(p));
            continue;
        }
        let r = match e.action {
            Action::Alloc => {
                let removed = l
                    .seg_containing(x)
                    .and_then(|sa| Some((sa, l.remove_live(sa, x)?.1)));
                match removed {
                    Some((sa, gap)) => {
                        widen_up_to(&mut l, ctx, sa, x, gap);
                        Ok(())
                    }
                    None => Err(Problem::new(
                        AnomalyKind::Other,
                        format!(
                            "alloc at {x:#x}: the block is neither live at the end nor freed later in the trace"
                        ),
                    )),
                }
            }
            Action::FreeRequested => {
                match l
                    .seg_containing(x)
                    .filter(|sa| l.segs[sa].blocks.contains_key(&x))
                {
                    Some(sa) => {
                        l.set_pending(sa, x, false);
                        Ok(())
                    }
                    None => Err(Problem::new(
                        AnomalyKind::FreeOfUnknownAddress,
                        format!(
                            "free_requested at {x:#x}: no block there is pending or freed later in the trace"
                        ),
                    )),
                }
            }
            Action::FreeCompleted => unfree(&mut l, ctx, e),
            Action::SegmentAlloc => drop_segment(&mut l, e, "segment_alloc (undone)"),
            Action::SegmentFree => add_segment(&mut l, ctx, e),
            Action::SegmentMap => l.unmap_range(x, e.size),
            Action::SegmentUnmap => {
                let fresh = ctx.new_seg(x, e.size, e, true);
                l.map_range(x, e.size, ctx.snap.stream(e), fresh)
            }
            _ => Ok(()),
        };
        record(problems, i, r);
    }
    l
}

/// Brings back the block a `free_completed` released, pending: if its
/// `free_requested` is in the trace, undoing it makes the block allocated;
/// if its `alloc` is, undoing that removes it, so only blocks freed before
/// the trace began keep the state, which is then the right one.
fn unfree(l: &mut Layout, ctx: &Ctx, e: &TraceEvent) -> Result<(), Problem> {
    let x = e.addr();
    let Some(sa) = l.seg_containing(x) else {
        return Err(Problem::new(
            AnomalyKind::FreeOfUnknownAddress,
            format!("free_completed at {x:#x}, outside every segment"),
        ));
    };
    let gap = match l.gap_at(sa, x) {
        Ok(g) => g,
        Err(a) => {
            return Err(Problem::new(
                AnomalyKind::FreeOfUnknownAddress,
                format!(
                    "free_completed at {x:#x}: the address lies in the block at {a:#x}, live at that point"
                ),
            ));
        }
    };
    let gap = widen_up_to(l, ctx, sa, x, gap);
    let g1 = gap.end;
    let rounded = ctx.policy.round_size(e.size);
    let avail = g1 - x;
    let mut problem = Ok(());
    let size = if rounded > avail {
        problem = Err(Problem::new(
            AnomalyKind::FreeOfUnknownAddress,
            format!(
                "free_completed at {x:#x} of {} bytes (rounded {rounded}): only {avail} bytes are free there",
                e.size
            ),
        ));
        avail
    } else if widenable(l, ctx, sa) && avail - rounded <= max_unsplit_slack(ctx, rounded) {
        avail
    } else {
        rounded
    };
    l.insert_live(
        sa,
        x,
        Live {
            size,
            requested: e.size,
            pending: true,
            // The free's stack says where the block was freed, not where it
            // was allocated; culprits would name the wrong call site.
            frames: StackId::EMPTY,
            origin: Origin::OlderThanTrace,
            inferred: true,
        },
        gap,
    );
    problem
}
