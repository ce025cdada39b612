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
use crate::model::{Action, Snapshot, StackId, TraceEvent};
use std::collections::HashMap;

/// One allocation's life in the replay, 48 bytes (a served page keeps
/// every allocation of a device for its zoomed windows, in the 20 bytes
/// each of [`Lifetimes`]).
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

impl<'a> Replayer<'a> {
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

    /// [`Replayer::lifetimes`], kept as [`Lifetimes`] (what a served page
    /// holds for its zoomed windows).
    pub fn kept_lifetimes(&self) -> Lifetimes<'a> {
        // At most a lifetime a block of the start and an allocation: room
        // for them at once, where growing would leave the old room behind.
        let older = (self.run.start.segs.iter())
            .map(|(_, s)| s.blocks.len())
            .sum::<usize>();
        let allocs = (self.run.trace.iter())
            .filter(|e| e.action == Action::Alloc)
            .count();
        let n = older + allocs;
        let mut out = Lifetimes {
            snap: self.snap,
            trace: self.run.trace,
            alloc: Vec::with_capacity(n),
            end: Vec::with_capacity(n),
            freed: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            whole: HashMap::default(),
        };
        self.each_lifetime(|i, l| out.set(i, l));
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
        for (i, e) in run.trace.iter().enumerate() {
            let _ = run.step(&mut l, i);
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

/// [`Replayer::lifetimes`] in 20 bytes a lifetime where a [`Lifetime`]
/// takes 48: its three events and block bytes, with its address,
/// requested size, stack and stream read back from the allocating event.
/// A lifetime those are not the event's of (one older than the trace,
/// whose block another event placed) is kept whole beside them.
pub struct Lifetimes<'a> {
    snap: &'a Snapshot,
    /// The device's trace, which the events index.
    trace: &'a [TraceEvent],
    alloc: Vec<u32>,
    end: Vec<u32>,
    freed: Vec<u32>,
    size: Vec<u64>,
    /// By index: the lifetimes not read back from their event.
    whole: HashMap<usize, Lifetime, foldhash::fast::RandomState>,
}

impl Lifetimes<'_> {
    pub fn len(&self) -> usize {
        self.alloc.len()
    }

    pub fn is_empty(&self) -> bool {
        self.alloc.is_empty()
    }

    /// Lifetime `i`, as [`Replayer::lifetimes`] has it.
    pub fn get(&self, i: usize) -> Lifetime {
        if let Some(l) = self.whole.get(&i) {
            return *l;
        }
        let e = &self.trace[self.alloc[i] as usize];
        Lifetime {
            address: e.addr(),
            size: self.size[i],
            requested: e.size,
            stream: self.snap.stream(e),
            frames: e.frames,
            alloc: self.alloc[i],
            end: self.end[i],
            freed: self.freed[i],
        }
    }

    /// The allocating event and the end of lifetime `i`, as
    /// [`Lifetime::alloc`] and [`Lifetime::end`] give them.
    pub fn events(&self, i: usize) -> (Option<u32>, Option<u32>) {
        (event(self.alloc[i]), event(self.end[i]))
    }

    /// The block bytes of lifetime `i`.
    pub fn size(&self, i: usize) -> u64 {
        self.size[i]
    }

    fn set(&mut self, i: usize, l: Lifetime) {
        if self.len() <= i {
            // A gap is filled by its own lifetime later.
            self.alloc.resize(i + 1, NO_EVENT);
            self.end.resize(i + 1, NO_EVENT);
            self.freed.resize(i + 1, NO_EVENT);
            self.size.resize(i + 1, 0);
        }
        (self.alloc[i], self.end[i]) = (l.alloc, l.end);
        (self.freed[i], self.size[i]) = (l.freed, l.size);
        let read_back = l
            .alloc()
            .and_then(|a| self.trace.get(a as usize))
            .is_some_and(|e| {
                e.addr() == l.address
                    && e.size == l.requested
                    && e.frames == l.frames
                    && self.snap.stream(e) == l.stream
            });
        if !read_back {
            self.whole.insert(i, l);
        }
    }
}
