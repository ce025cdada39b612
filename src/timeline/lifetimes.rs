//! Every allocation of a device's trace as one interval of the forward
//! replay: the event that allocated the block (or the start, for a block
//! older than the trace), the event after which it stopped being allocated
//! (its `free_requested`, else its `free_completed`), and the block as the
//! replay placed it (rounded size, requested size, stack, stream).
//!
//! What memory_viz's "Active Memory Timeline" stacks as bands, read from
//! the same replay as the series: a band is live after event `e` exactly
//! when the replay counts its block in `active` after `e`.

use super::checkpoints::MomentsAt;
use super::{MomentState, Origin, Replayer};
use crate::model::{Action, StackId};
use std::collections::HashMap;

/// One allocation's life in the replay: 48 bytes, since a served page
/// keeps one for every allocation of a device (for its zoomed windows).
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

/// The lifetimes not yet whole, by address: (index, lifetime).
type Open = HashMap<u64, (usize, Lifetime), foldhash::fast::RandomState>;

impl Replayer<'_> {
    /// Every allocated block of the replay, in the order it was allocated
    /// (those older than the trace first, by address).
    pub fn lifetimes(&self) -> Vec<Lifetime> {
        let mut out = Vec::new();
        self.each_lifetime(|i, l| {
            // Every index below the count comes once: a gap is filled by
            // its own lifetime later.
            if out.len() <= i {
                out.resize(i + 1, l);
            }
            out[i] = l;
        });
        out
    }

    /// [`Replayer::lifetimes`] one at a time, with its index there, each as
    /// soon as it is known whole (its `free_completed`, its address
    /// allocated again, or the end of the trace), in no set order: only the
    /// blocks allocated at the time are held.
    pub fn each_lifetime(&self, done: impl FnMut(usize, Lifetime)) {
        self.each_lifetime_and_states_at(&[], done);
    }

    /// [`Replayer::each_lifetime`], and the states at `ats` as
    /// [`Replayer::states_at`] gives them, from the one forward replay:
    /// what a written page makes of a device.
    pub fn each_lifetime_and_states_at(
        &self,
        ats: &[Option<usize>],
        mut done: impl FnMut(usize, Lifetime),
    ) -> Vec<MomentState> {
        let run = &self.run;
        let mut states = MomentsAt::new(ats, run.trace.len());
        let mut l = run.start.clone_unindexed();
        states.take(run, &l, self.device, 0);
        let mut made = 0;
        // foldhash: a lookup an event; the map is walked once, at the end.
        let mut open: Open = HashMap::default();
        // A new lifetime at `a`: the one there before, if still open, is
        // whole.
        let mut open_at =
            |open: &mut Open, a: u64, life: Lifetime, done: &mut dyn FnMut(usize, Lifetime)| {
                if let Some((k, old)) = open.insert(a, (made, life)) {
                    done(k, old);
                }
                made += 1;
            };
        for (_, s) in l.segs.iter() {
            for (a, b) in s.blocks.iter() {
                if b.pending {
                    continue;
                }
                let life = Lifetime {
                    address: *a,
                    size: b.size,
                    requested: b.requested,
                    frames: b.frames,
                    stream: s.stream,
                    alloc: NO_EVENT,
                    end: NO_EVENT,
                    freed: NO_EVENT,
                };
                open_at(&mut open, *a, life, &mut done);
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
                        let life = Lifetime {
                            address: e.addr(),
                            size: b.size,
                            requested: b.requested,
                            frames: b.frames,
                            stream: s.stream,
                            alloc: at,
                            end: NO_EVENT,
                            freed: NO_EVENT,
                        };
                        open_at(&mut open, e.addr(), life, &mut done);
                    }
                }
                Action::FreeRequested => {
                    if let Some((_, life)) = open.get_mut(&e.addr())
                        && life.end == NO_EVENT
                    {
                        life.end = at;
                    }
                }
                Action::FreeCompleted => {
                    if let Some((k, mut life)) = open.remove(&e.addr()) {
                        if life.end == NO_EVENT {
                            life.end = at;
                        }
                        life.freed = at;
                        done(k, life);
                    }
                }
                _ => {}
            }
            states.take(run, &l, self.device, i + 1);
        }
        for (_, (k, life)) in open {
            done(k, life);
        }
        states.finish()
    }
}
