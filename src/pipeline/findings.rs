//! The findings of the inspecting commands from one loaded input, whatever
//! its kind (`analysis::findings`): `stats`, `culprits`, `timeline` and
//! `events`, and `diff` of two inputs. The kind of input chooses the path
//! here, so that each command only renders what it gets back.

use super::{analyses, describe_format, load_measured, same_kind, states};
use crate::analysis::culprits::{self, GroupBy, Options};
use crate::analysis::diff::{DiffInput, DiffReport, call_sites, diff, segment_diff, trace_sites};
use crate::analysis::events::Events;
use crate::analysis::findings::{Culprits, ReplayedDevice, Stats, Timeline, TraceTimeline};
use crate::analysis::report::trace::select;
use crate::core::style::Style;
use crate::input::{Content, LoadOptions, Loaded};
use crate::model::Snapshot;
use crate::model::profiler::{ProfilerTrace, TraceDevice};
use crate::timeline::downsample::{Order, downsample_categories, downsample_in, downsample_series};
use crate::timeline::trace::{trace_key_moments, trace_series};
use crate::timeline::{self, KeyMomentsFold, Moment};

/// `stats`: a snapshot's figures with its final segments, or the summary
/// of a profiler trace or memory-timeline export.
pub fn stats_of(st: &Style, l: Loaded) -> Stats {
    let format = describe_format(st, &l);
    let file = l.name;
    match l.content {
        Content::Snapshot(s) => {
            let fs = match &l.tallies {
                Some(t) => crate::analysis::stats::file_stats_with(&s, t, &file, format),
                None => crate::analysis::stats::file_stats(&s, &file, format),
            };
            Stats::Snapshot(Box::new(fs), s.segments)
        }
        Content::Profiler(t) => Stats::Trace {
            file,
            format,
            trace: Box::new(t),
        },
        Content::MemoryTimeline(t) => Stats::Categories {
            file,
            format,
            timeline: t,
        },
    }
}

/// What `culprits` is asked.
pub struct CulpritsOptions {
    /// The moment as the user named it (default: `end` for a snapshot, the
    /// `peak` of a profiler trace).
    pub at: Option<String>,
    pub device: Option<i64>,
    pub top: usize,
    pub group_by: Option<GroupBy>,
    pub request: Option<u64>,
    pub stack: bool,
}

/// `culprits`: the blocks that strand free memory at the moment (a
/// snapshot), or the live bytes by operator there (a profiler trace).
pub fn culprits_of(l: Loaded, o: &CulpritsOptions) -> anyhow::Result<Culprits> {
    let file = l.name;
    let snap = match l.content {
        Content::Snapshot(s) => s,
        Content::Profiler(t) => return trace_culprits(&file, &t, o).map(Culprits::Trace),
        Content::MemoryTimeline(_) => anyhow::bail!(
            "{file}: not measurable for a memory-timeline export: it records tensor bytes by category, with no call sites and no segment layout; `fragscope stats {file}` shows the live bytes by category at the peak"
        ),
    };
    let at = o.at.clone().unwrap_or_else(|| "end".into());
    let moment: Moment = at
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--at: {e}"))?;
    let states = states(&snap, &file, moment, o.device)?;
    let opts = Options {
        request: o.request,
        group_by: o.group_by.unwrap_or_default(),
        top: o.top,
    };
    let analyses = analyses(&snap, &states, &opts);
    Ok(Culprits::Snapshot {
        snap: Box::new(snap),
        analyses,
    })
}

/// Live bytes by operator on each device of a profiler trace, with its
/// first time. Stranded bytes need a segment layout.
fn trace_culprits(
    file: &str,
    tr: &ProfilerTrace,
    o: &CulpritsOptions,
) -> anyhow::Result<Vec<(culprits::TraceCulprits, Option<i64>)>> {
    let name =
        o.at.as_deref()
            .unwrap_or("peak")
            .trim()
            .to_ascii_lowercase();
    let moment: Moment = name
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--at: {e}"))?;
    if o.group_by.is_some() || o.request.is_some() || o.stack {
        anyhow::bail!(
            "{file}: --group-by, --request and --stack: not measurable for a profiler trace: they need allocation stacks and the segment layout; a trace groups live bytes by operator"
        );
    }
    let devs = select(tr, o.device).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    let mut found = Vec::new();
    let mut first_err = None;
    for d in devs {
        match timeline::trace::resolve(d, moment) {
            Ok(at) => found.push((
                culprits::trace_culprits(d, &tr.names, &name, at),
                d.summary.first_time_us,
            )),
            Err(e) => {
                first_err.get_or_insert(format!("{}: {e}", d.label));
            }
        }
    }
    if let (true, Some(e)) = (found.is_empty(), first_err) {
        anyhow::bail!("{file}: --at {name}: {e}");
    }
    Ok(found)
}

/// What `timeline` is asked, and what its output shows.
pub struct TimelineOptions {
    pub device: Option<i64>,
    pub at: Option<Moment>,
    pub max_points: Option<usize>,
    /// The output lists the samples (CSV, JSON).
    pub samples: bool,
    /// The output lists the key moments (text, JSON).
    pub key_moments: bool,
}

/// `timeline`: every device's series and key moments, or one device's
/// state at `--at`.
pub fn timeline_of(l: Loaded, o: &TimelineOptions) -> anyhow::Result<Timeline> {
    let file = l.name;
    let snap = match l.content {
        Content::Snapshot(s) => s,
        Content::Profiler(t) => return trace_timeline(&file, t, o),
        Content::MemoryTimeline(t) => {
            if o.at.is_some() || o.device.is_some() {
                anyhow::bail!(
                    "{file}: --at and --device: a memory-timeline export holds one device's tensor bytes by category, with no allocator state to show at a moment"
                );
            }
            let points = o.max_points.map(|n| downsample_categories(&t.samples, n));
            return Ok(Timeline::Categories {
                timeline: t,
                points,
            });
        }
    };
    if let Some(m) = o.at {
        let Some(d) = o.device.or_else(|| device_for(&snap, m)) else {
            anyhow::bail!("{file}: no segments and no trace events");
        };
        devices(&snap, Some(d)).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        let r = timeline::replay_device(&snap, d);
        let at = r
            .resolve(&snap, m)
            .map_err(|e| anyhow::anyhow!("{file}: --at: {e}"))?;
        return Ok(Timeline::Moment {
            moment: m,
            state: timeline::state_at(&snap, d, at),
            t0: r.samples.iter().find_map(|s| s.time_us),
            report: r.report,
        });
    }
    let devs = devices(&snap, o.device).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    let replays = devs.iter().map(|&d| {
        let replay = timeline::replay_device(&snap, d);
        ReplayedDevice {
            key_moments: o.key_moments.then(|| {
                let f = KeyMomentsFold::read(&replay.samples);
                replay.key_moments_at(&snap, &f, usize::MAX)
            }),
            points: o.max_points.map(|n| downsample_series(&replay.samples, n)),
            downsampled: o
                .max_points
                .is_some_and(|n| replay.samples.len() > n.max(2)),
            replay,
        }
    });
    Ok(Timeline::Replays(replays.collect()))
}

/// A profiler trace's series and key moments; `--at` has no segment
/// layout to show.
fn trace_timeline(file: &str, tr: ProfilerTrace, o: &TimelineOptions) -> anyhow::Result<Timeline> {
    if o.at.is_some() {
        anyhow::bail!(
            "{file}: --at: not measurable for a profiler trace: the state at a moment is a segment layout, which a trace does not record; `fragscope culprits --at MOMENT {file}` shows the live bytes by operator there"
        );
    }
    let devs = select(&tr, o.device).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    let devices = devs
        .into_iter()
        .map(|d| {
            let s = trace_series(d);
            TraceTimeline {
                device: index_of(&tr, d),
                samples: match (o.samples, o.max_points) {
                    (false, _) => Vec::new(),
                    (true, Some(n)) => downsample_in(&s.to_vec(), n, Order::LowThenHigh),
                    (true, None) => s.to_vec(),
                },
                downsampled: o.max_points.is_some_and(|n| s.len() > n.max(2)),
                key_moments: if o.key_moments {
                    trace_key_moments(d, &tr.names, &s)
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    Ok(Timeline::Trace {
        trace: Box::new(tr),
        devices,
    })
}

/// The index of one of `tr`'s devices.
fn index_of(tr: &ProfilerTrace, d: &TraceDevice) -> usize {
    tr.devices
        .iter()
        .position(|x| std::ptr::eq(x, d))
        .expect("a device of the trace")
}

/// Every device of the snapshot, or the one `want` names if it has
/// segments or trace events.
fn devices(snap: &Snapshot, want: Option<i64>) -> anyhow::Result<Vec<i64>> {
    let all = snap.devices();
    match want {
        None => Ok(all),
        Some(d) if all.contains(&d) => Ok(vec![d]),
        Some(d) => anyhow::bail!(
            "device {d} has no segments and no trace events (devices here: {})",
            if all.is_empty() {
                "none".to_string()
            } else {
                all.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
    }
}

/// The device `--at` looks at when none is named: for `oom` the first device
/// with enough oom events, else the one with the longest trace.
fn device_for(snap: &Snapshot, m: Moment) -> Option<i64> {
    let devs = snap.devices();
    if let Moment::Oom(k) = m {
        let hit = devs.iter().copied().find(|d| {
            snap.trace_of(*d)
                .iter()
                .filter(|e| e.action == crate::model::Action::Oom)
                .count()
                > k
        });
        if hit.is_some() {
            return hit;
        }
    }
    // Longest trace; ties to the lowest device.
    devs.iter()
        .copied()
        .max_by_key(|d| (snap.trace_of(*d).len(), std::cmp::Reverse(*d)))
}

/// `diff`: two inputs measured and compared, with the warnings for the
/// command to show. The two inputs are loaded, measured and their call
/// sites read on a thread each; each run's trace is dropped once its call
/// sites are read (the segment comparison reads the final states only), so
/// the peak is at most the two inputs' models at once. An error of the
/// first input is reported before one of the second, as when they were
/// read one after the other. Both read from stdin (`-` twice) are read in
/// turn.
pub fn diff_of(
    load: &LoadOptions,
    (before, after): (&str, &str),
    device: Option<(i64, i64)>,
    top: usize,
) -> anyhow::Result<(DiffReport, Vec<String>)> {
    let (db, da) = match device {
        Some((x, y)) => (Some(x), Some(y)),
        None => (None, None),
    };
    let side = |path: &str, d: Option<i64>| {
        let (m, mut c) = load_measured(path, load, d)?;
        let x = match &c {
            Content::Snapshot(s) => {
                let (v, bad) = call_sites(s, d);
                (Some(v), bad)
            }
            Content::Profiler(t) if t.cpu_only() => (None, 0),
            Content::Profiler(t) => (trace_sites(t, d), 0),
            Content::MemoryTimeline(_) => (None, 0),
        };
        if let Content::Snapshot(s) = &mut c {
            s.device_traces = None;
        }
        anyhow::Ok((m, c, x))
    };
    let (b, a) = if before == "-" && after == "-" {
        (side(before, db), side(after, da))
    } else {
        std::thread::scope(|sc| {
            let a = sc.spawn(|| side(after, da));
            let b = side(before, db);
            (b, a.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        })
    };
    let (mb, sb, (xb, bad_b)) = b?;
    let (ma, sa, (xa, bad_a)) = a?;
    same_kind((before, &mb), (after, &ma), "AFTER")?;
    let warnings = [(before, bad_b), (after, bad_a)]
        .into_iter()
        .filter(|&(_, bad)| bad > 0)
        .map(|(file, bad)| format!(
            "{file}: {bad} call site(s) free more in the trace than the final state explains; their peaks are lower bounds"
        ))
        .collect();
    let input = |file, device, metrics, sites| DiffInput {
        file,
        device,
        metrics,
        sites,
    };
    let mut r = diff(
        &input(before, db, &mb, xb.as_deref()),
        &input(after, da, &ma, xa.as_deref()),
        top,
    );
    match (&sb, &sa) {
        (Content::Snapshot(x), Content::Snapshot(y)) => {
            r.segments = Some(segment_diff(x, db, y, da, top));
        }
        _ => r.notes.push(
            "segments are compared only between two snapshots: a profiler trace records no segment layout"
                .into(),
        ),
    }
    Ok((r, warnings))
}

/// `events`: the devices listed, those with trace events or the one
/// `device` names; `from` past the end of every one is refused.
pub fn events_of(l: Loaded, device: Option<i64>, from: usize) -> anyhow::Result<Events> {
    let file = l.name;
    match l.content {
        Content::Snapshot(s) => {
            let devices = snapshot_event_devices(&file, &s, device)?;
            let lens = devices
                .iter()
                .map(|&d| (d.to_string(), s.trace_of(d).len()));
            check_from(&file, from, lens)?;
            Ok(Events::Snapshot {
                snap: Box::new(s),
                devices,
            })
        }
        Content::Profiler(t) => {
            let devices: Vec<usize> = (select(&t, device)
                .map_err(|e| anyhow::anyhow!("{file}: {e}"))?)
            .into_iter()
            .map(|d| index_of(&t, d))
            .collect();
            let lens =
                (devices.iter()).map(|&i| (t.devices[i].label.clone(), t.devices[i].events.len()));
            check_from(&file, from, lens)?;
            Ok(Events::Trace {
                trace: Box::new(t),
                devices,
            })
        }
        Content::MemoryTimeline(_) => anyhow::bail!(
            "{file}: a memory-timeline export (export_memory_timeline) holds tensor bytes by category, not allocator events; `fragscope timeline {file}` shows them over time"
        ),
    }
}

/// A snapshot's devices with trace events, or the one `device` names.
fn snapshot_event_devices(
    file: &str,
    s: &Snapshot,
    device: Option<i64>,
) -> anyhow::Result<Vec<i64>> {
    let with_events: Vec<i64> = (s.traces().iter().enumerate())
        .filter(|(_, t)| !t.is_empty())
        .map(|(d, _)| d as i64)
        .collect();
    if with_events.is_empty() {
        anyhow::bail!(
            "{file}: no trace events to list: {}, so it holds only the allocator's state when it was taken (its segments); record the events with torch.cuda.memory._record_memory_history() before the run",
            if s.device_traces.is_none() {
                "the file has no device_traces"
            } else {
                "its device_traces are empty"
            }
        );
    }
    match device {
        None => Ok(with_events),
        Some(d) if with_events.contains(&d) => Ok(vec![d]),
        Some(d) => anyhow::bail!(
            "{file}: device {d} has no trace events (devices with some: {})",
            with_events
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `--from` past the end of every listed device's trace lists nothing:
/// refused, naming the longest trace.
fn check_from(
    file: &str,
    from: usize,
    devs: impl Iterator<Item = (String, usize)>,
) -> anyhow::Result<()> {
    match devs.max_by_key(|(_, n)| *n) {
        Some((d, n)) if from >= n => anyhow::bail!(
            "{file}: --from {from}: past the end of device {d}'s trace ({n} events, numbered from 0)"
        ),
        _ => Ok(()),
    }
}
