//! One row per trace event, as `fragscope events` lists them: the event as
//! recorded (action, address, size, stream, call site) with the running
//! figures after it.
//!
//! Owns: choosing the events of a range and a call-site filter, and pairing
//! each with its figures. For a snapshot those are the replay's samples
//! ([`crate::timeline::DeviceReplay::samples`], the figures `timeline` prints:
//! `samples[i + 1]` after event `i`); for a profiler trace the trace's own
//! series ([`crate::timeline::trace::trace_series`]). A call site is the
//! one every command names ([`crate::analysis::frames::call_site`]; the operator for
//! a profiler trace). Rows are handed to a callback one at a time and never
//! collected, so a listing of millions of events holds no more than the
//! model and the replay's compact series. Formatting is `render::events`.

use crate::analysis::frames::{FrameFacts, frame_label};
use crate::input::profiler::{ProfilerTrace, TraceDevice};
use crate::model::{Action, Snapshot, StackId};
use crate::timeline::DeviceReplay;
use serde::Serialize;
use std::collections::HashMap;
use std::io;

/// Which events to list: indices `from..to` (`to` exclusive, clamped to the
/// trace's length; `None` = to the end), and only those whose call site
/// holds `grep`.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub from: usize,
    pub to: Option<usize>,
    /// Case-sensitive substring of the call site, or of the
    /// `file:line:function` of any frame of the event's stack that PyTorch's
    /// viewer shows (for a profiler trace: of the operator, the outermost
    /// operator or the Python function).
    pub grep: Option<String>,
}

impl Selection {
    /// The index range this selection lists in a trace of `n` events.
    pub fn range(&self, n: usize) -> (usize, usize) {
        let to = self.to.unwrap_or(n).min(n);
        (self.from.min(to), to)
    }
}

/// One listed event.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Row<'a> {
    /// Trace index (0-based); `None` for a profiler trace's
    /// `[OutOfMemory]` record, which is not one of its memory events.
    pub event: Option<usize>,
    pub time_us: Option<i64>,
    pub action: &'a str,
    /// `None` for an `oom` (PyTorch records no address for it) and for
    /// 2021 profiler traces (no `Addr`).
    pub address: Option<u64>,
    /// Bytes as recorded: the request of an `alloc` or `oom`, the block of
    /// a free, the segment of a segment event (profiler: `|Bytes|`).
    pub size: u64,
    /// `None` for profiler traces, which record no stream.
    pub stream: Option<i64>,
    /// After the event: requested bytes of live blocks (snapshot), `Total
    /// Allocated` (profiler).
    pub allocated: u64,
    /// After the event: bytes of the device's segments (snapshot), `Total
    /// Reserved` (profiler; `None` for CPU memory and the 2021 schema).
    pub reserved: Option<u64>,
    /// An `oom` event's free device memory (`device_free`) as PyTorch
    /// recorded it.
    pub device_free: Option<u64>,
    pub call_site: &'a str,
}

impl Row<'_> {
    pub fn is_oom(&self) -> bool {
        self.action == "oom"
    }
}

/// A call site's label and whether it passes `--grep`.
#[derive(Clone)]
struct Site {
    label: String,
    keep: bool,
}

/// The events of one snapshot device with their replayed figures.
pub struct SnapshotEvents<'a> {
    snap: &'a Snapshot,
    replay: &'a DeviceReplay,
    from: usize,
    to: usize,
    /// By stack id, for the stacks of the listed range.
    sites: Vec<Option<Site>>,
}

impl<'a> SnapshotEvents<'a> {
    pub fn new(snap: &'a Snapshot, replay: &'a DeviceReplay, sel: &Selection) -> Self {
        let trace = snap.trace_of(replay.device);
        let (from, to) = sel.range(trace.len());
        let mut sites: Vec<Option<Site>> = vec![None; snap.stacks.len()];
        let facts = FrameFacts::new(snap);
        for e in &trace[from..to] {
            let slot = &mut sites[e.frames.0 as usize];
            if slot.is_none() {
                *slot = Some(stack_site(&facts, e.frames, sel.grep.as_deref()));
            }
        }
        SnapshotEvents {
            snap,
            replay,
            from,
            to,
            sites,
        }
    }

    /// The listed index range (`to` exclusive) and the trace's length.
    pub fn range(&self) -> (usize, usize, usize) {
        (
            self.from,
            self.to,
            self.snap.trace_of(self.replay.device).len(),
        )
    }

    /// Calls `f` with each listed row in trace order; the number listed.
    pub fn for_each(&self, mut f: impl FnMut(&Row) -> io::Result<()>) -> io::Result<usize> {
        let snap = self.snap;
        let trace = snap.trace_of(self.replay.device);
        let mut listed = 0;
        // samples[i + 1] holds after event i.
        let samples = self.replay.samples.iter().skip(self.from + 1);
        for (i, (e, s)) in trace[self.from..self.to].iter().zip(samples).enumerate() {
            let site = self.sites[e.frames.0 as usize]
                .as_ref()
                .expect("every stack of the range has its site");
            if !site.keep {
                continue;
            }
            let oom = e.action == Action::Oom;
            f(&Row {
                event: Some(self.from + i),
                time_us: e.time_us(),
                action: e.action.name(snap),
                address: (!oom).then_some(e.addr()),
                size: e.size,
                stream: Some(snap.stream(e)),
                allocated: s.allocated,
                reserved: s.reserved,
                device_free: if oom { snap.device_free(e) } else { None },
                call_site: &site.label,
            })?;
            listed += 1;
        }
        Ok(listed)
    }
}

fn stack_site(facts: &FrameFacts, stack: StackId, grep: Option<&str>) -> Site {
    let label = facts.call_site(stack).label();
    let keep = match grep {
        None => true,
        Some(g) => {
            label.contains(g)
                || (facts.filtered(stack).into_iter())
                    .any(|f| frame_label(facts.snap(), f, true).contains(g))
        }
    };
    Site { label, keep }
}

/// The memory events (and `[OutOfMemory]` records) of one profiler-trace
/// device with the trace's running totals.
pub struct TraceEvents<'a> {
    dev: &'a TraceDevice,
    from: usize,
    to: usize,
    /// By (operator, Python function) of the listed events.
    sites: HashMap<(Option<u32>, Option<u32>), Site>,
    /// The site of each OOM record, in `dev.ooms` order.
    oom_sites: Vec<Site>,
}

impl<'a> TraceEvents<'a> {
    pub fn new(tr: &'a ProfilerTrace, dev: &'a TraceDevice, sel: &Selection) -> Self {
        let (from, to) = sel.range(dev.events.len());
        let grep = sel.grep.as_deref();
        let passes = |names: &[Option<&str>]| {
            grep.is_none_or(|g| names.iter().flatten().any(|n| n.contains(g)))
        };
        let mut sites = HashMap::new();
        for e in &dev.events[from..to] {
            sites.entry((e.op, e.python)).or_insert_with(|| {
                let label = crate::input::profiler::chrome::op_label(&tr.names, e);
                let name = |i: Option<u32>| i.map(|i| tr.name(i));
                let keep = passes(&[Some(&label), name(e.top_op), name(e.python)]);
                Site { label, keep }
            });
        }
        let oom_sites = dev
            .ooms
            .iter()
            .map(|o| {
                let label = match (&o.op, &o.python) {
                    (Some(op), _) => op.clone(),
                    (None, Some(p)) => format!("python: {p}"),
                    (None, None) => "(outside any operator)".to_string(),
                };
                let keep = passes(&[Some(&label), o.python.as_deref()]);
                Site { label, keep }
            })
            .collect();
        TraceEvents {
            dev,
            from,
            to,
            sites,
            oom_sites,
        }
    }

    /// The listed index range (`to` exclusive) and the number of memory
    /// events.
    pub fn range(&self) -> (usize, usize, usize) {
        (self.from, self.to, self.dev.events.len())
    }

    /// Calls `f` with each listed row in trace order; the number listed. An
    /// `[OutOfMemory]` record comes after the memory events that precede it
    /// in the trace, and is listed when the next of those is in the range.
    pub fn for_each(&self, mut f: impl FnMut(&Row) -> io::Result<()>) -> io::Result<usize> {
        let d = self.dev;
        let n = d.events.len();
        let samples = crate::timeline::trace::trace_series(d);
        let mut listed = 0;
        let mut ooms = d.ooms.iter().zip(&self.oom_sites).peekable();
        for i in 0..=n {
            // OOM records before event i (or after the last one).
            let next = d.events.get(i).map(|e| e.index);
            while let Some((o, site)) = ooms.next_if(|(o, _)| next.is_none_or(|x| o.index < x)) {
                let in_range = (self.from..self.to).contains(&i) || (i == n && self.to == n);
                if !in_range || !site.keep {
                    continue;
                }
                let before = samples.at(i);
                f(&Row {
                    event: None,
                    time_us: Some(o.ts_us.floor() as i64),
                    action: "oom",
                    address: None,
                    size: o.bytes,
                    stream: None,
                    allocated: o.total_allocated.unwrap_or(before.allocated),
                    reserved: o.total_reserved.or(before.reserved),
                    device_free: None,
                    call_site: &site.label,
                })?;
                listed += 1;
            }
            if i < self.from || i >= self.to {
                continue;
            }
            let e = &d.events[i];
            let site = &self.sites[&(e.op, e.python)];
            if !site.keep {
                continue;
            }
            let s = samples.at(i + 1);
            f(&Row {
                event: Some(i),
                time_us: s.time_us,
                action: if e.bytes < 0 { "free" } else { "alloc" },
                address: e.addr,
                size: e.bytes.unsigned_abs(),
                stream: None,
                allocated: s.allocated,
                reserved: s.reserved,
                device_free: None,
                call_site: &site.label,
            })?;
            listed += 1;
        }
        Ok(listed)
    }
}

/// The devices `events` lists: a snapshot's, each replayed in turn, or a
/// profiler trace's.
pub enum Events {
    Snapshot {
        snap: Box<Snapshot>,
        devices: Vec<i64>,
    },
    Trace {
        trace: Box<ProfilerTrace>,
        /// Indices in the trace's devices.
        devices: Vec<usize>,
    },
}

/// Whose events a listing holds: a snapshot device with its replay's
/// report, or a trace device.
pub enum Listed<'a> {
    Snapshot {
        device: i64,
        report: &'a crate::timeline::ReplayReport,
    },
    Trace(&'a TraceDevice),
}

enum Rows<'a> {
    Snapshot(SnapshotEvents<'a>),
    Trace(TraceEvents<'a>),
}

/// One device's listing, as a renderer writes it.
pub struct DeviceEvents<'a> {
    pub listed: Listed<'a>,
    /// The time origin of the text table.
    pub t0: Option<i64>,
    /// The events asked for and the trace's length, as `range` gives them.
    pub range: (usize, usize, usize),
    rows: Rows<'a>,
}

impl DeviceEvents<'_> {
    /// The device's name: its number, or a trace's label (`cuda:0`).
    pub fn label(&self) -> String {
        match &self.listed {
            Listed::Snapshot { device, .. } => device.to_string(),
            Listed::Trace(d) => d.label.clone(),
        }
    }

    /// Calls `f` with each listed row in trace order; the number listed.
    pub fn for_each(&self, f: &mut dyn FnMut(&Row) -> io::Result<()>) -> io::Result<usize> {
        match &self.rows {
            Rows::Snapshot(ev) => ev.for_each(f),
            Rows::Trace(ev) => ev.for_each(f),
        }
    }
}

impl Events {
    /// Hands each listed device's events to `f`, in order. A snapshot's
    /// devices are replayed one at a time: the compact series of one is
    /// all that is held besides the model.
    pub fn each_device(
        &self,
        sel: &Selection,
        mut f: impl FnMut(&DeviceEvents) -> io::Result<()>,
    ) -> io::Result<()> {
        match self {
            Events::Snapshot { snap, devices } => {
                for &d in devices {
                    let r = crate::timeline::replay_device(snap, d);
                    let ev = SnapshotEvents::new(snap, &r, sel);
                    f(&DeviceEvents {
                        listed: Listed::Snapshot {
                            device: d,
                            report: &r.report,
                        },
                        t0: snap.trace_of(d).iter().find_map(|e| e.time_us()),
                        range: ev.range(),
                        rows: Rows::Snapshot(ev),
                    })?;
                }
            }
            Events::Trace { trace, devices } => {
                for &i in devices {
                    let d = &trace.devices[i];
                    let ev = TraceEvents::new(trace, d, sel);
                    f(&DeviceEvents {
                        listed: Listed::Trace(d),
                        t0: (d.events.first()).map(|e| crate::model::profiler::time_of(e.ts_us)),
                        range: ev.range(),
                        rows: Rows::Trace(ev),
                    })?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    /// A 2 MiB segment with one trace: segment_alloc, alloc, free_requested,
    /// free_completed, oom; the final state is the empty segment.
    fn snap() -> Snapshot {
        let mut i = Interner::new();
        let mut frame = |file: &str, line, name: &str| {
            let (filename, name) = (i.string(file).unwrap(), i.string(name).unwrap());
            i.frame(Frame {
                filename,
                line,
                name,
            })
        };
        let user = frame("/home/u/proj/model.py", 10, "forward");
        let torch = frame(
            "/x/site-packages/torch/nn/modules/linear.py",
            125,
            "forward",
        );
        let stack = i.stack(vec![torch, user]);
        let base = 1u64 << 32;
        let mib = 1u64 << 20;
        let t = |e: TraceEvent, us| e.with_time_us(Some(us));
        let trace = vec![
            t(
                TraceEvent::new(
                    Action::SegmentAlloc,
                    base,
                    2 * mib,
                    StreamIdx::DEFAULT,
                    StackId::EMPTY,
                ),
                100,
            ),
            t(
                TraceEvent::new(Action::Alloc, base, 1000, StreamIdx::DEFAULT, stack),
                200,
            ),
            t(
                TraceEvent::new(Action::FreeRequested, base, 1024, StreamIdx::DEFAULT, stack),
                300,
            ),
            t(
                TraceEvent::new(Action::FreeCompleted, base, 1024, StreamIdx::DEFAULT, stack),
                400,
            ),
            t(
                TraceEvent::new(Action::Oom, 0, 64 * mib, StreamIdx::DEFAULT, stack),
                500,
            )
            .with_extras(
                i.extras(EventExtras {
                    device_free: Some(3 * mib),
                    ..EventExtras::NONE
                })
                .unwrap(),
            ),
        ];
        let mut s = Snapshot {
            segments: vec![Segment {
                device: 0,
                address: base,
                total_size: 2 * mib,
                allocated_size: None,
                active_size: None,
                requested_size: None,
                stream: 0,
                segment_type: SegmentType::Small,
                pool_id: None,
                is_expandable: None,
                frames: StackId::EMPTY,
                blocks: vec![Block {
                    address: base,
                    size: 2 * mib,
                    requested_size: None,
                    state: BlockState::Inactive,
                    frames: StackId::EMPTY,
                }],
            }],
            device_traces: Some(vec![trace]),
            ..Snapshot::default()
        };
        i.finish(&mut s);
        s
    }

    fn rows(s: &Snapshot, sel: &Selection) -> Vec<(Option<usize>, String, u64, u64, String)> {
        let r = crate::timeline::replay_device(s, 0);
        let ev = SnapshotEvents::new(s, &r, sel);
        let mut out = Vec::new();
        let n = ev
            .for_each(|row| {
                out.push((
                    row.event,
                    row.action.to_string(),
                    row.allocated,
                    row.reserved.unwrap(),
                    row.call_site.to_string(),
                ));
                Ok(())
            })
            .unwrap();
        assert_eq!(n, out.len());
        out
    }

    #[test]
    fn each_row_carries_the_figures_after_its_event() {
        let s = snap();
        let mib = 1u64 << 20;
        let site = "model.py:10 (forward)";
        assert_eq!(
            rows(&s, &Selection::default()),
            vec![
                (
                    Some(0),
                    "segment_alloc".into(),
                    0,
                    2 * mib,
                    "(no stack recorded)".into()
                ),
                (Some(1), "alloc".into(), 1000, 2 * mib, site.into()),
                (Some(2), "free_requested".into(), 0, 2 * mib, site.into()),
                (Some(3), "free_completed".into(), 0, 2 * mib, site.into()),
                (Some(4), "oom".into(), 0, 2 * mib, site.into()),
            ]
        );
    }

    #[test]
    fn range_and_grep_select_rows() {
        let s = snap();
        let sel = |from, to, grep: Option<&str>| Selection {
            from,
            to,
            grep: grep.map(String::from),
        };
        let idx = |v: Vec<(Option<usize>, String, u64, u64, String)>| {
            v.into_iter().map(|r| r.0.unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(idx(rows(&s, &sel(1, Some(3), None))), vec![1, 2]);
        assert_eq!(idx(rows(&s, &sel(3, Some(99), None))), vec![3, 4]);
        // The call site's label, and any shown frame's file:line:function.
        assert_eq!(
            idx(rows(&s, &sel(0, None, Some("model.py:10")))),
            vec![1, 2, 3, 4]
        );
        assert_eq!(
            idx(rows(&s, &sel(0, None, Some("linear.py:125")))),
            vec![1, 2, 3, 4]
        );
        assert_eq!(idx(rows(&s, &sel(0, None, Some("no stack")))), vec![0]);
        // Case-sensitive.
        assert!(rows(&s, &sel(0, None, Some("MODEL.py"))).is_empty());
        assert_eq!(sel(7, None, None).range(5), (5, 5));
        assert_eq!(sel(2, Some(1), None).range(5), (1, 1));
    }

    #[test]
    fn an_oom_row_has_no_address_and_the_device_free_memory() {
        let s = snap();
        let r = crate::timeline::replay_device(&s, 0);
        let ev = SnapshotEvents::new(&s, &r, &Selection::default());
        let mut seen = Vec::new();
        ev.for_each(|row| {
            seen.push((row.is_oom(), row.address, row.device_free, row.size));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen[1], (false, Some(1 << 32), None, 1000));
        assert_eq!(seen[4], (true, None, Some(3 << 20), 64 << 20));
    }
}
