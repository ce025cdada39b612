//! State checkpoints: one device's layout saved every `every` events of one
//! forward replay, so the state after any event is a saved layout and
//! fewer than `every` events of replay, instead of a replay from the start.
//!
//! Memory is bounded: the layouts saved together stay within a budget of
//! bytes (estimated from their segments and live blocks). When a replay
//! would pass it, every other checkpoint is dropped and the interval
//! doubles, so a trace of any length keeps at most about `budget` bytes,
//! and the interval is as short as the budget allows. The states are those
//! [`super::state_at`] gives, by construction: the same start, the same
//! steps.

use super::state::{Layout, Live, Seg};
use super::{MomentState, Replayer, Run};
use crate::model::Snapshot;

/// The interval of a replay, at least: finer saves more clones than it
/// saves replay.
pub const MIN_EVERY: usize = 4096;
/// At most about this many checkpoints at first (then fewer if the budget
/// says so).
const MAX_COUNT: usize = 512;
/// Bytes the saved layouts of one device may take together (about).
pub const DEFAULT_BUDGET: usize = 256 << 20;
/// The least [`budget_for`] gives a device: a few checkpoints even on a
/// small input.
const MIN_BUDGET: usize = 2 << 20;

/// The budget of each of `devices` devices' checkpoints for an input of
/// `input_bytes`: a sixteenth of the input shared among them, within
/// [`MIN_BUDGET`] and [`DEFAULT_BUDGET`] each. The layouts' resident
/// memory is about one and a half times their estimated bytes (the
/// allocator's own, and the room of the layouts dropped as the interval
/// doubles), about a tenth of the input; the server holds the model (about
/// half the input on a long trace) beside them. The interval this leaves
/// is the layout's size over the input's bytes an event, whatever the
/// trace's length.
pub fn budget_for(input_bytes: u64, devices: usize) -> usize {
    let share = input_bytes / 16 / devices.max(1) as u64;
    usize::try_from(share)
        .unwrap_or(usize::MAX)
        .clamp(MIN_BUDGET, DEFAULT_BUDGET)
}

/// A layout replayed to a moment, kept for the next one
/// ([`Checkpoints::state_at_in`]): the number of events replayed into it.
#[derive(Default)]
pub struct Scratch(Option<(usize, Layout)>);

/// A device's saved layouts, by the number of events replayed into each.
pub struct Checkpoints<'a> {
    replayer: Replayer<'a>,
    every: usize,
    /// `(events replayed, layout)`, ascending; the first is the start.
    saved: Vec<(usize, Layout)>,
    /// Estimated bytes of `saved`.
    bytes: usize,
}

/// Estimated bytes of a layout's segments and live blocks.
fn layout_bytes(l: &Layout) -> usize {
    let per_seg = std::mem::size_of::<Seg>() + 16;
    let per_block = std::mem::size_of::<Live>() + 16;
    l.segs
        .values()
        .map(|s| per_seg + s.blocks.len() * per_block)
        .sum()
}

impl<'a> Checkpoints<'a> {
    /// Replays `device` once and keeps its checkpoints within
    /// [`DEFAULT_BUDGET`].
    pub fn new(snap: &'a Snapshot, device: i64) -> Checkpoints<'a> {
        Checkpoints::with_budget(snap, device, DEFAULT_BUDGET, MIN_EVERY)
    }

    /// Replays `device` once, saving its layout every `min_every` events at
    /// least (more apart on a long trace) within `budget` bytes.
    pub fn with_budget(
        snap: &'a Snapshot,
        device: i64,
        budget: usize,
        min_every: usize,
    ) -> Checkpoints<'a> {
        let replayer = Replayer::new(snap, device);
        let run = &replayer.run;
        let n = run.trace.len();
        let mut every = min_every.max(1).max(n.div_ceil(MAX_COUNT));
        let mut l = run.start.clone_unindexed();
        let mut bytes = layout_bytes(&l);
        let mut saved = vec![(0, l.clone())];
        for i in 0..n {
            if i > 0 && i % every == 0 {
                let b = layout_bytes(&l);
                if bytes + b > budget {
                    // Thin out: keep the checkpoints on the doubled interval.
                    every *= 2;
                    saved.retain(|(done, _)| done % every == 0);
                    bytes = saved.iter().map(|(_, l)| layout_bytes(l)).sum();
                }
                if i % every == 0 && bytes + b <= budget {
                    saved.push((i, l.clone()));
                    bytes += b;
                }
            }
            let _ = run.step(&mut l, i);
        }
        Checkpoints {
            replayer,
            every,
            saved,
            bytes,
        }
    }

    /// The interval between checkpoints (in events), as it ended up.
    pub fn every(&self) -> usize {
        self.every
    }

    /// How many layouts are saved (the start included).
    pub fn len(&self) -> usize {
        self.saved.len()
    }

    /// Always false: the start is saved.
    pub fn is_empty(&self) -> bool {
        self.saved.is_empty()
    }

    /// Estimated bytes the saved layouts take.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The replayer the checkpoints were made with.
    pub fn replayer(&self) -> &Replayer<'a> {
        &self.replayer
    }

    /// What [`super::state_at`] returns: the nearest checkpoint at or before
    /// the moment, replayed up to it.
    pub fn state_at(&self, at: Option<usize>) -> MomentState {
        self.state_at_in(&mut Scratch::default(), at)
    }

    /// [`Checkpoints::state_at`], replayed in `scratch`: from the layout
    /// the last call left there when the moment is at or after it and no
    /// checkpoint is nearer (a scrub that steps forward replays the events
    /// stepped over), else from a copy of the nearest checkpoint.
    pub fn state_at_in(&self, scratch: &mut Scratch, at: Option<usize>) -> MomentState {
        let run = &self.replayer.run;
        let upto = at.map_or(0, |a| (a + 1).min(run.trace.len()));
        let k = self.saved.partition_point(|(done, _)| *done <= upto) - 1;
        let (done, saved) = &self.saved[k];
        let reuse = matches!(&scratch.0, Some((d, _)) if *done <= *d && *d <= upto);
        if !reuse {
            scratch.0 = Some((*done, saved.clone()));
        }
        let (d, l) = scratch.0.as_mut().expect("set above");
        for i in *d..upto {
            let _ = run.step(l, i);
        }
        *d = upto;
        super::moment_state(run, l, self.replayer.device, at)
    }
}

impl Replayer<'_> {
    /// The states at `ats` (in their order), as [`Replayer::state_at`]
    /// gives them, from one forward replay and with no checkpoint: what a
    /// written page needs (its key moments), in the memory of one layout
    /// and the states returned.
    pub fn states_at(&self, ats: &[Option<usize>]) -> Vec<MomentState> {
        let run = &self.run;
        let mut states = MomentsAt::new(ats, run.trace.len());
        let mut l = run.start.clone_unindexed();
        states.take(run, &l, self.device, 0);
        for e in 0..states.last() {
            let _ = run.step(&mut l, e);
            states.take(run, &l, self.device, e + 1);
        }
        states.finish()
    }
}

/// The events replayed at moment `at` of a trace of `len` events.
fn upto(at: Option<usize>, len: usize) -> usize {
    at.map_or(0, |a| (a + 1).min(len))
}

/// The states a forward replay takes on its way: those at `ats`, each once
/// the replay has done its events.
pub(super) struct MomentsAt<'a> {
    ats: &'a [Option<usize>],
    /// Indices into `ats` by the events each needs done, fewest first.
    order: Vec<usize>,
    next: usize,
    len: usize,
    out: Vec<Option<MomentState>>,
}

impl<'a> MomentsAt<'a> {
    pub(super) fn new(ats: &'a [Option<usize>], len: usize) -> Self {
        let mut order: Vec<usize> = (0..ats.len()).collect();
        order.sort_by_key(|&i| upto(ats[i], len));
        MomentsAt {
            ats,
            order,
            next: 0,
            len,
            out: vec![None; ats.len()],
        }
    }

    /// The states due once `done` events are replayed into `l`.
    pub(super) fn take(&mut self, run: &Run, l: &Layout, device: i64, done: usize) {
        while let Some(&i) = self.order.get(self.next)
            && upto(self.ats[i], self.len) <= done
        {
            self.out[i] = Some(super::moment_state(run, l, device, self.ats[i]));
            self.next += 1;
        }
    }

    /// The events replayed at the last of the moments.
    pub(super) fn last(&self) -> usize {
        self.order
            .last()
            .map_or(0, |&i| upto(self.ats[i], self.len))
    }

    pub(super) fn finish(self) -> Vec<MomentState> {
        self.out.into_iter().flatten().collect()
    }
}
