//! What one device's trace holds, counted in one pass over its entries:
//! how many of each action, the first and last time, the frees of blocks
//! the trace never saw allocated, and its out-of-memory entries.
//!
//! `stats` needs no more of a trace than this. The input stage can count a
//! large pickle's entries as it decodes them and keep none
//! ([`crate::input::LoadOptions::tally_traces`]); every other reader counts
//! a kept trace with [`TraceTally::of`]. Both go through [`Tallier`], so a
//! file's figures are the same either way.

use super::{Action, Snapshot, TraceEvent};

/// The actions PyTorch names, each with its own counter.
const KNOWN: [Action; 10] = [
    Action::Alloc,
    Action::FreeRequested,
    Action::FreeCompleted,
    Action::SegmentAlloc,
    Action::SegmentFree,
    Action::SegmentMap,
    Action::SegmentUnmap,
    Action::Snapshot,
    Action::Oom,
    Action::Annotate,
];

fn known_slot(a: &Action) -> Option<usize> {
    Some(match a {
        Action::Alloc => 0,
        Action::FreeRequested => 1,
        Action::FreeCompleted => 2,
        Action::SegmentAlloc => 3,
        Action::SegmentFree => 4,
        Action::SegmentMap => 5,
        Action::SegmentUnmap => 6,
        Action::Snapshot => 7,
        Action::Oom => 8,
        Action::Annotate => 9,
        Action::Other(_) => return None,
    })
}

/// An `oom` entry of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct OomEntry {
    /// Its index in the trace.
    pub index: u64,
    pub size: u64,
    pub device_free: Option<u64>,
    pub time_us: Option<i64>,
}

/// One trace, counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceTally {
    pub events: u64,
    /// Count per action: PyTorch's in their fixed order, then the file's
    /// own in the order first seen; none with a count of 0.
    pub actions: Vec<(Action, u64)>,
    pub first_time_us: Option<i64>,
    pub last_time_us: Option<i64>,
    /// Frees whose allocation is not in the trace (it happened earlier).
    pub frees_without_alloc: u64,
    /// Every `oom` entry, in order; empty from [`TraceTally::counts_of`].
    pub ooms: Vec<OomEntry>,
}

impl TraceTally {
    /// The tally of a kept trace.
    pub fn of(snap: &Snapshot, trace: &[TraceEvent]) -> TraceTally {
        let mut t = Tallier::default();
        for e in trace {
            t.add(e, || snap.device_free(e));
        }
        t.finish()
    }

    /// [`TraceTally::of`] without the list of `oom` entries (`ooms` is
    /// empty; `actions` counts them): what a trace's coverage needs. A
    /// program that catches its OOMs may record one at most events, 40
    /// bytes each in the list.
    pub fn counts_of(trace: &[TraceEvent]) -> TraceTally {
        let mut t = Tallier {
            counts_only: true,
            ..Tallier::default()
        };
        for e in trace {
            t.add(e, || None);
        }
        t.finish()
    }

    /// The tally of every trace of a snapshot, in `device_traces` order.
    pub fn of_snapshot(snap: &Snapshot) -> Vec<TraceTally> {
        snap.traces()
            .iter()
            .map(|t| TraceTally::of(snap, t))
            .collect()
    }
}

/// Counts a trace's entries as they come.
#[derive(Default)]
pub struct Tallier {
    events: u64,
    known: [u64; KNOWN.len()],
    others: Vec<(Action, u64)>,
    first: Option<i64>,
    last: Option<i64>,
    frees_without_alloc: u64,
    ooms: Vec<OomEntry>,
    /// Addresses allocated and not yet freed.
    live: crate::core::table::U64Set,
    /// `oom` entries are counted, not listed ([`TraceTally::counts_of`]).
    counts_only: bool,
}

impl Tallier {
    /// Counts `e`; `device_free` reads its extras, asked of `oom` entries
    /// alone.
    #[inline]
    pub fn add(&mut self, e: &TraceEvent, device_free: impl FnOnce() -> Option<u64>) {
        match known_slot(&e.action) {
            Some(i) => self.known[i] += 1,
            None => match self.others.iter_mut().find(|(a, _)| *a == e.action) {
                Some((_, n)) => *n += 1,
                None => self.others.push((e.action, 1)),
            },
        }
        if let Some(t) = e.time_us() {
            self.first = Some(self.first.map_or(t, |f| f.min(t)));
            self.last = Some(self.last.map_or(t, |l| l.max(t)));
        }
        match e.action {
            Action::Alloc => {
                self.live.insert(e.addr);
            }
            Action::FreeRequested if self.live.insert(e.addr) => {
                self.frees_without_alloc += 1;
            }
            Action::FreeCompleted if !self.live.remove(e.addr) => {
                self.frees_without_alloc += 1;
            }
            Action::Oom if !self.counts_only => self.ooms.push(OomEntry {
                index: self.events,
                size: e.size,
                device_free: device_free(),
                time_us: e.time_us(),
            }),
            _ => {}
        }
        self.events += 1;
    }

    /// Entries counted so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    pub fn finish(self) -> TraceTally {
        let actions = KNOWN
            .into_iter()
            .zip(self.known)
            .filter(|&(_, n)| n > 0)
            .chain(self.others)
            .collect();
        TraceTally {
            events: self.events,
            actions,
            first_time_us: self.first,
            last_time_us: self.last,
            frees_without_alloc: self.frees_without_alloc,
            ooms: self.ooms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ActionName, StackId, StreamIdx};

    /// A 512-byte entry of `a` at `addr`, at time `t`.
    fn ev(a: Action, addr: u64, t: Option<i64>) -> TraceEvent {
        TraceEvent::new(a, addr, 512, StreamIdx::DEFAULT, StackId::EMPTY).with_time_us(t)
    }

    #[test]
    fn counts_actions_times_and_frees_of_blocks_never_allocated() {
        let trace = [
            ev(Action::FreeCompleted, 0x3000, Some(25)),
            ev(Action::Alloc, 0x3000, None),
            ev(Action::Other(ActionName::new(0)), 0, Some(-4)),
            ev(Action::FreeRequested, 0x3000, Some(90)),
            ev(Action::FreeRequested, 0x2000, None),
            ev(Action::Oom, 0, Some(7)),
            ev(Action::Other(ActionName::new(0)), 0, None),
        ];
        let mut t = Tallier::default();
        for e in &trace {
            t.add(e, || Some(99));
        }
        let t = t.finish();
        assert_eq!(t.events, 7);
        assert_eq!(
            t.actions,
            [
                (Action::Alloc, 1),
                (Action::FreeRequested, 2),
                (Action::FreeCompleted, 1),
                (Action::Oom, 1),
                (Action::Other(ActionName::new(0)), 2),
            ]
        );
        assert_eq!((t.first_time_us, t.last_time_us), (Some(-4), Some(90)));
        assert_eq!(t.frees_without_alloc, 2);
        assert_eq!(
            t.ooms,
            [OomEntry {
                index: 5,
                size: 512,
                device_free: Some(99),
                time_us: Some(7)
            }]
        );
        assert_eq!(Tallier::default().finish(), TraceTally::default());
    }

    #[test]
    fn counts_alone_list_no_oom_entry() {
        let trace = [
            ev(Action::Alloc, 0x3000, Some(3)),
            ev(Action::Oom, 0, Some(7)),
            ev(Action::FreeCompleted, 0x2000, None),
            ev(Action::Oom, 0, Some(9)),
        ];
        let snap = Snapshot::default();
        let listed = TraceTally::of(&snap, &trace);
        assert_eq!(listed.ooms.len(), 2);
        let counted = TraceTally::counts_of(&trace);
        assert!(counted.ooms.is_empty());
        assert!(counted.actions.contains(&(Action::Oom, 2)));
        assert_eq!(
            counted,
            TraceTally {
                ooms: Vec::new(),
                ..listed
            }
        );
    }
}
