//! Every allocation of a device's trace as one interval of the forward
//! replay: the event that allocated the block (or the start, for a block
//! older than the trace), the event after which it stopped being allocated
//! (its `free_requested`, else its `free_completed`), and the block as the
//! replay placed it (rounded size, requested size, stack, stream).
//!
//! What memory_viz's "Active Memory Timeline" stacks as bands, read from
//! the same replay as the series: a band is live after event `e` exactly
//! when the replay counts its block in `active` after `e`.

use super::{Origin, Replayer};
use crate::model::{Action, StackId};
use std::collections::HashMap;

/// One allocation's life in the replay: 48 bytes, since a page holds one
/// for every allocation of a device while it draws the bands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lifetime {
    pub address: u64,
    /// Block bytes (the request rounded, or the whole free block when the
    /// remainder was too small to split off).
    pub size: u64,
    pub requested: u64,
    pub stream: i64,
    pub frames: StackId,
    /// The three events below, [`NO_EVENT`] for none.
    alloc: u32,
    end: u32,
    freed: u32,
}

/// No event: an event index is below the trace's length, which is below
/// `u32::MAX` as every index of a sample is.
const NO_EVENT: u32 = u32::MAX;

fn event(e: u32) -> Option<u32> {
    (e != NO_EVENT).then_some(e)
}

impl Lifetime {
    /// Allocated after event `e` (`-1`: the start)?
    pub fn live_after(&self, e: i64) -> bool {
        self.alloc().is_none_or(|a| i64::from(a) <= e)
            && self.end().is_none_or(|x| e < i64::from(x))
    }

    /// The allocating event; `None`: allocated before the trace.
    pub fn alloc(&self) -> Option<u32> {
        event(self.alloc)
    }

    /// The event after which the block is no longer allocated (pending
    /// free or free); `None`: still allocated at the end.
    pub fn end(&self) -> Option<u32> {
        event(self.end)
    }

    /// Its `free_completed`, when the trace has one.
    pub fn freed(&self) -> Option<u32> {
        event(self.freed)
    }
}

const _: () = assert!(std::mem::size_of::<Lifetime>() == 48);

impl Replayer<'_> {
    /// Every allocated block of the replay, in the order it was allocated
    /// (those older than the trace first, by address).
    pub fn lifetimes(&self) -> Vec<Lifetime> {
        let run = &self.run;
        let mut l = run.start.clone_unindexed();
        let mut out = Vec::new();
        // foldhash: a lookup an event; the map is never walked.
        let mut open: HashMap<u64, usize, foldhash::fast::RandomState> = HashMap::default();
        for (_, s) in l.segs.iter() {
            for (a, b) in s.blocks.iter() {
                if b.pending {
                    continue;
                }
                open.insert(*a, out.len());
                out.push(Lifetime {
                    address: *a,
                    size: b.size,
                    requested: b.requested,
                    frames: b.frames,
                    stream: s.stream,
                    alloc: NO_EVENT,
                    end: NO_EVENT,
                    freed: NO_EVENT,
                });
            }
        }
        let mut problems = std::collections::BTreeMap::new();
        for (i, e) in run.trace.iter().enumerate() {
            run.step(&mut l, i, &mut problems);
            let at = i as u32;
            match e.action {
                Action::Alloc => {
                    let placed = l
                        .seg_containing(e.addr())
                        .and_then(|sa| l.segs.get(&sa).map(|s| (s, s.blocks.get(&e.addr()))));
                    if let Some((s, Some(b))) = placed
                        && b.origin == Origin::Event(at)
                    {
                        open.insert(e.addr(), out.len());
                        out.push(Lifetime {
                            address: e.addr(),
                            size: b.size,
                            requested: b.requested,
                            frames: b.frames,
                            stream: s.stream,
                            alloc: at,
                            end: NO_EVENT,
                            freed: NO_EVENT,
                        });
                    }
                }
                Action::FreeRequested => {
                    if let Some(&k) = open.get(&e.addr())
                        && out[k].end == NO_EVENT
                    {
                        out[k].end = at;
                    }
                }
                Action::FreeCompleted => {
                    if let Some(k) = open.remove(&e.addr()) {
                        if out[k].end == NO_EVENT {
                            out[k].end = at;
                        }
                        out[k].freed = at;
                    }
                }
                _ => {}
            }
        }
        out
    }
}
