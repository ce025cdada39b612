//! The [`Report`] of a snapshot: every finding `fragscope report` and
//! `fragscope plot` show, gathered once from a snapshot and its replay
//! ([`build`]; each device's layout is a [`Replayed`] detail).
//!
//! Owns: which moment each device is shown at (the first out-of-memory
//! event, else the moment most reserved memory sat free), each OOM diagnosed by
//! [`crate::analysis::oom`] as `fragscope oom` does, the verdict sentences, and the data
//! quality notes, and turning a culprit [`Analysis`] into the per-site rows
//! the charts and tables show ([`culprit_rows`]). It does not replay (that is
//! [`crate::timeline`]), does not rank culprits (that is [`crate::analysis::culprits`];
//! the caller passes its summary and rows as [`DeviceCulprits`]), does not
//! run the what-if model (the caller attaches [`crate::sim`] reports and
//! their answers, [`Report::add_what_if`]), and does no formatting beyond
//! the sentences of the verdict; the lines other findings state stay typed
//! ([`VerdictLine`]) and are worded by the renderers.
//!
//! Output is deterministic: the file is named by its base name only, series
//! are downsampled to a fixed number of points, every list has a stable
//! order with explicit tie-breakers.

use super::{
    DeviceDetail, DeviceReport, OomFinding, PeakInclPending, REPORT_POINTS, Replayed, Report,
    ReportDetail, VerdictLine, base_name, moment_name,
};
use crate::analysis::culprits::{self, Analysis};
use crate::analysis::frames::{CallSite, FrameFacts, frame_label};
use crate::analysis::stats::{StateStats, consistency_warnings, snapshot_trace_coverage};
use crate::core::style::Style;
use crate::model::OomMark;
use crate::model::*;
use crate::timeline::downsample::{Downsampler, Order};
use crate::timeline::{
    DeviceReplay, KeyMoment, KeyMomentsFold, Moment, MomentState, ReplayReport, Sample,
};
use std::collections::HashMap;

/// One call site and the memory it holds at the shown moment.
#[derive(Debug, Clone, PartialEq)]
pub struct CulpritRow {
    pub device: i64,
    /// The call site's label, as `fragscope culprits` prints it
    /// (`model.py:88 (forward)`).
    pub site: String,
    /// Requested bytes of the site's live blocks (block bytes when no
    /// request size is recorded).
    pub live_bytes: u64,
    /// Free bytes the site's blocks strand, by the scoring rule of
    /// [`crate::analysis::culprits`] (`docs/culprits.md`).
    pub stranded_bytes: u64,
    /// Addresses of the site's live blocks (outlined on the segment map).
    pub blocks: Vec<u64>,
    /// The allocation stack of the site's first-ranked block, innermost
    /// first, the frames PyTorch's viewer shows, one `file:line:function` a
    /// line.
    pub stack: Vec<String>,
}

/// The culprit analysis of one device at the report's moment: the summary
/// `fragscope culprits` states for the same moment, and its rows by call
/// site ([`culprit_rows`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceCulprits {
    pub device: i64,
    pub summary: culprits::Summary,
    pub rows: Vec<CulpritRow>,
}

/// What the replay says about one device, ready to report.
#[derive(Debug, Clone)]
pub struct DeviceInput {
    pub replay: DeviceReplay,
    pub key_moments: Vec<KeyMoment>,
    /// The state the segment map and the gap histogram show.
    pub moment: MomentState,
    /// How that moment was chosen, e.g. `first out-of-memory event`.
    pub moment_label: String,
    /// The chart's points and the peaks, where the gathering found them in
    /// its one read of `replay.samples`; with `None` (as
    /// [`DeviceInput::new`] leaves it) [`build`] reads them.
    read: Option<SeriesRead>,
    /// The diagnosed OOMs, where the gathering found them in the replay
    /// that found the moment; with `None` [`build`] replays for them.
    ooms: Option<Vec<OomFinding>>,
}

/// What the report reads off a device's series besides its moments.
#[derive(Debug, Clone)]
struct SeriesRead {
    /// The series cut to [`REPORT_POINTS`] for the charts.
    points: Vec<Sample>,
    peaks: Peaks,
}

/// [`SeriesRead`] folded a sample at a time.
struct SeriesReader {
    peaks: PeaksFold,
    points: Downsampler,
}

impl SeriesReader {
    fn new(samples: &crate::timeline::Series) -> Self {
        SeriesReader {
            peaks: PeaksFold::default(),
            points: Downsampler::new(samples.len(), REPORT_POINTS, Order::ReservedFirst),
        }
    }

    #[inline]
    fn add(&mut self, s: Sample) {
        self.peaks.add(&s);
        self.points.push(s);
    }

    fn finish(self) -> SeriesRead {
        SeriesRead {
            points: self.points.finish(),
            peaks: self.peaks.finish(),
        }
    }

    fn read(samples: &crate::timeline::Series) -> SeriesRead {
        let mut r = SeriesReader::new(samples);
        samples.iter().for_each(|s| r.add(s));
        r.finish()
    }
}

impl DeviceInput {
    /// A device's input from its replay, key moments and moment.
    pub fn new(
        replay: DeviceReplay,
        key_moments: Vec<KeyMoment>,
        moment: MomentState,
        moment_label: String,
    ) -> DeviceInput {
        DeviceInput {
            replay,
            key_moments,
            moment,
            moment_label,
            read: None,
            ooms: None,
        }
    }
}

impl Report {
    /// Adds the what-if model's answer for `device` to the verdict, after
    /// the device's last out-of-memory line (at the end without one).
    pub fn add_what_if(&mut self, device: i64, answer: crate::analysis::what_if::ExpandableAnswer) {
        let at = self
            .verdict
            .iter()
            .rposition(|v| matches!(v, VerdictLine::Oom { device: d, .. } if *d == device))
            .map_or(self.verdict.len(), |i| i + 1);
        self.verdict
            .insert(at, VerdictLine::WhatIf { device, answer });
    }
}

/// The moment shown when the user names none: the first out-of-memory event
/// of the device, else the sample where the most reserved memory sat free
/// in the cache (reserved − allocated − pending free: blocks still waiting
/// on a stream are about to be free anyway; earliest on ties), which
/// `cached` was fed every sample of the series to find.
fn default_moment(
    snap: &Snapshot,
    device: i64,
    samples: &crate::timeline::Series,
    cached: MostCached,
) -> (Option<usize>, String) {
    if let Some(i) = snap
        .trace_of(device)
        .iter()
        .position(|e| e.action == Action::Oom)
    {
        return (Some(i), "first out-of-memory event".into());
    }
    match cached.best {
        Some(s) if samples.len() > 1 => (
            s.event.map(|e| e as usize),
            "most reserved memory free in the cache".into(),
        ),
        // No trace events: the one state there is.
        _ => (
            samples.last().and_then(|s| s.event.map(|e| e as usize)),
            "no trace recorded".into(),
        ),
    }
}

/// The first sample with the most reserved memory free in the cache,
/// folded a sample at a time.
#[derive(Default)]
struct MostCached {
    best: Option<Sample>,
}

impl MostCached {
    fn cached(s: &Sample) -> u64 {
        s.reserved_bytes()
            .saturating_sub(s.allocated)
            .saturating_sub(s.lay().pending_free)
    }

    #[inline]
    fn add(&mut self, s: &Sample) {
        if self.best.is_none_or(|b| Self::cached(s) > Self::cached(&b)) {
            self.best = Some(*s);
        }
    }
}

/// Replays every device (or one) and picks its moment: `at` when given,
/// else [`default_moment`]. Errors name the device and the moment.
pub fn gather(
    st: &Style,
    snap: &Snapshot,
    device: Option<i64>,
    at: Option<Moment>,
) -> Result<Vec<DeviceInput>, String> {
    gather_with(st, snap, device, at, |_, _| {}, |_| {})
}

/// A device's replay as [`gather_with`] hands it on: the replay, the
/// replayer that made it (shared, so that another thread may replay
/// from the same start while the report goes on) and its key moments.
pub struct ReplayMade<'r, 'a> {
    pub replay: &'r DeviceReplay,
    pub replayer: &'r std::sync::Arc<crate::timeline::Replayer<'a>>,
    pub key_moments: &'r [KeyMoment],
}

/// [`gather`], handing `on_start` each device's replayer as soon as it has
/// rebuilt the start, and `on_replay` its replay and key moments once
/// made, so later stages (the what-if model's start state, a page's
/// bands) reuse them instead of replaying the trace again, and may start
/// while the rest is gathered.
pub fn gather_with<'a>(
    st: &Style,
    snap: &'a Snapshot,
    device: Option<i64>,
    at: Option<Moment>,
    mut on_start: impl FnMut(i64, &crate::timeline::Replayer),
    mut on_replay: impl FnMut(ReplayMade<'_, 'a>),
) -> Result<Vec<DeviceInput>, String> {
    let devices: Vec<i64> = match device {
        Some(d) => {
            if !snap.devices().contains(&d) {
                return Err(format!(
                    "device {d} has no segments and no trace events (devices: {})",
                    list_devices(snap)
                ));
            }
            vec![d]
        }
        None => snap.devices(),
    };
    let mut out = Vec::new();
    for d in devices {
        // One rebuild of the start serves the series and the moment.
        let replayer = std::sync::Arc::new(crate::timeline::Replayer::new(snap, d));
        on_start(d, &replayer);
        let replay = replayer.replay();
        // One read of the series serves the key moments, the default
        // moment, the peaks and the chart's points.
        let samples = &replay.samples;
        let mut moments = KeyMomentsFold::new(samples);
        let mut cached = MostCached::default();
        let mut reader = SeriesReader::new(samples);
        for (i, s) in samples.iter().enumerate() {
            moments.add(i, &s);
            cached.add(&s);
            reader.add(s);
        }
        // The OOMs it diagnoses, no more: a program that catches its OOMs
        // and goes on may record one at most events.
        let key_moments =
            replay.key_moments_first(snap, &moments, crate::analysis::oom::MAX_DIAGNOSED_OOMS);
        on_replay(ReplayMade {
            replay: &replay,
            replayer: &replayer,
            key_moments: &key_moments,
        });
        let (at, label) = match at {
            Some(m) => (
                replay.resolve(snap, m).map_err(|e| {
                    if e.contains(&format!("device {d}")) {
                        e
                    } else {
                        format!("device {d}: {e}")
                    }
                })?,
                moment_name(m),
            ),
            None => default_moment(snap, d, samples, cached),
        };
        let (moment, ooms) = moment_and_ooms(st, snap, &replayer, &replay, at);
        out.push(DeviceInput {
            replay,
            key_moments,
            moment,
            moment_label: label,
            read: Some(reader.finish()),
            ooms: Some(ooms),
        });
    }
    Ok(out)
}

fn list_devices(snap: &Snapshot) -> String {
    let d = snap.devices();
    if d.is_empty() {
        "none".into()
    } else {
        d.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The first samples where reserved, allocated and the fragmentation ratio
/// peak (the first sample of an empty series: none).
#[derive(Debug, Clone, Default)]
pub struct Peaks {
    reserved: Sample,
    allocated: Sample,
    fragmentation: Sample,
}

/// [`Peaks`] folded a sample at a time.
#[derive(Default)]
struct PeaksFold {
    p: Option<Peaks>,
}

impl PeaksFold {
    #[inline]
    fn add(&mut self, s: &Sample) {
        let Some(p) = &mut self.p else {
            self.p = Some(Peaks {
                reserved: *s,
                allocated: *s,
                fragmentation: *s,
            });
            return;
        };
        if s.reserved > p.reserved.reserved {
            p.reserved = *s;
        }
        if s.allocated > p.allocated.allocated {
            p.allocated = *s;
        }
        if s.lay().fragmentation > p.fragmentation.lay().fragmentation {
            p.fragmentation = *s;
        }
    }

    fn finish(self) -> Peaks {
        self.p.unwrap_or_default()
    }
}

fn setting_text(s: &Setting) -> String {
    match s {
        Setting::None => "None".into(),
        Setting::Bool(b) => if *b { "True" } else { "False" }.into(),
        Setting::Int(i) => i.to_string(),
        Setting::Float(f) => f.to_string(),
        Setting::Str(s) if s.is_empty() => "(empty)".into(),
        Setting::Str(s) => s.clone(),
        Setting::List(l) => format!(
            "[{}]",
            l.iter().map(setting_text).collect::<Vec<_>>().join(", ")
        ),
        Setting::Map(m) => m
            .iter()
            .map(|(k, v)| format!("{k}: {}", setting_text(v)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Assembles the report from replayed devices and their culprit analyses.
pub fn build(
    st: &Style,
    snap: &Snapshot,
    file: &str,
    format: &str,
    inputs: Vec<DeviceInput>,
    culprits: Vec<DeviceCulprits>,
) -> Report {
    build_keeping(st, snap, file, format, inputs, culprits, |_, _| {})
}

/// [`build`], handing each device's whole series to `keep` once the report
/// is done with it (the report keeps its points only): a caller that draws
/// the series takes it rather than a copy of it.
pub fn build_keeping(
    st: &Style,
    snap: &Snapshot,
    file: &str,
    format: &str,
    inputs: Vec<DeviceInput>,
    culprits: Vec<DeviceCulprits>,
    mut keep: impl FnMut(i64, crate::timeline::Series),
) -> Report {
    let mut summaries: HashMap<i64, culprits::Summary> = HashMap::new();
    let mut rows = Vec::new();
    for c in culprits {
        summaries.insert(c.device, c.summary);
        rows.extend(c.rows);
    }
    let mut devices = Vec::new();
    let mut quality = Vec::new();
    for w in consistency_warnings(snap) {
        quality.push(w);
    }
    for mut inp in inputs {
        let d = inp.replay.device;
        let trace = snap.trace_of(d);
        let ooms = match inp.ooms.take() {
            Some(o) => o,
            None => oom_findings(st, snap, &inp),
        };
        let recorded_ooms = trace.iter().filter(|e| e.action == Action::Oom).count();
        if recorded_ooms > crate::analysis::oom::MAX_DIAGNOSED_OOMS {
            quality.push(format!(
                "device {d}: {recorded_ooms} oom events; the first {} are diagnosed and \
                 listed among the key moments",
                crate::analysis::oom::MAX_DIAGNOSED_OOMS
            ));
        }
        let rr = &inp.replay.report;
        replay_notes(d, rr, &mut quality);
        let moment_stats = StateStats::of(&inp.moment.segments);
        let read = inp
            .read
            .take()
            .unwrap_or_else(|| SeriesReader::read(&inp.replay.samples));
        let peaks = read.peaks;
        let peak_allocated_incl_pending = PeakInclPending {
            bytes: rr.peak_allocated_incl_pending,
            at: rr.peak_allocated_incl_pending_at,
            time_us: rr
                .peak_allocated_incl_pending_at
                .and_then(|i| trace.get(i))
                .and_then(|e| e.time_us()),
        };
        devices.push(DeviceReport {
            device: d,
            events: trace.len(),
            first_time_us: trace.iter().find_map(|e| e.time_us()),
            samples: read.points,
            key_moments: inp.key_moments,
            ooms,
            moment_label: inp.moment_label,
            moment_at: inp.moment.at,
            moment_time_us: inp.moment.time_us,
            detail: DeviceDetail::Replayed(Box::new(Replayed {
                peak_reserved: peaks.reserved,
                peak_allocated: peaks.allocated,
                peak_allocated_incl_pending,
                highest_fragmentation: peaks.fragmentation,
                end: inp.replay.end(),
                failed_request: inp.moment.failed_request,
                segments: inp.moment.segments,
                moment_stats,
                replay_report: inp.replay.report,
                culprit_summary: summaries.remove(&d),
            })),
        });
        keep(d, inp.replay.samples);
    }
    let (settings, settings_recorded) = match &snap.allocator_settings {
        Some(s) => (
            s.entries
                .iter()
                .map(|(k, v)| (k.clone(), setting_text(v)))
                .collect(),
            true,
        ),
        None => (Vec::new(), false),
    };
    let mut report = Report {
        file: base_name(file),
        format: format.to_string(),
        verdict: Vec::new(),
        devices,
        culprits: rows,
        quality,
        what_if: Vec::new(),
        detail: ReportDetail::Snapshot {
            settings,
            settings_recorded,
            coverage: snapshot_trace_coverage(snap),
        },
    };
    report.verdict = crate::analysis::verdict::verdict(st, &report);
    report
}

/// What the replay of device `d` found wrong with its trace, as
/// data-quality notes.
fn replay_notes(d: i64, rr: &ReplayReport, quality: &mut Vec<String>) {
    if rr.events > 0 && rr.clean_events < rr.events {
        quality.push(format!(
            "device {d}: {} of {} trace events replayed with an anomaly",
            rr.events - rr.clean_events,
            rr.events
        ));
    }
    for a in &rr.anomalies {
        quality.push(format!(
            "device {d}: {} × {:?}{}: {}",
            a.count,
            a.kind,
            a.first_event
                .map(|e| format!(" (first at event {e})"))
                .unwrap_or_default(),
            a.example
        ));
    }
    if rr.events > 0 && !rr.final_state_matches {
        quality.push(format!(
            "device {d}: replaying the trace forward does not reproduce the recorded final state{}",
            rr.final_state_diff
                .as_ref()
                .map(|x| format!(" ({x})"))
                .unwrap_or_default()
        ));
    }
    for i in &rr.inferences {
        quality.push(format!("device {d}: {i}"));
    }
}

/// The OOM events of a trace that the report diagnoses.
fn diagnosed_ooms(trace: &[TraceEvent]) -> Vec<usize> {
    (0..trace.len())
        .filter(|&i| trace[i].action == Action::Oom)
        .take(crate::analysis::oom::MAX_DIAGNOSED_OOMS)
        .collect()
}

/// The finding of OOM event `i` of device `state.device`, from the state
/// the replay reached there.
fn oom_finding(
    st: &Style,
    snap: &Snapshot,
    state: &MomentState,
    i: usize,
    report: &ReplayReport,
) -> Option<OomFinding> {
    let ev = &snap.trace_of(state.device)[i];
    let f = crate::analysis::oom::finding_at(st, snap, state, i, report, None)?;
    Some(OomFinding {
        mark: OomMark {
            event: i,
            time_us: ev.time_us(),
            request: ev.size,
            largest_gap: Some(f.largest_usable_gap.as_ref().map_or(0, |g| g.gap_size)),
            device_free: snap.device_free(ev),
        },
        diagnosis: f.diagnosis,
    })
}

/// Every diagnosed OOM of a device as `fragscope oom` diagnoses it
/// ([`crate::analysis::oom`]), so the report and the command phrase the same
/// moment identically, for an input gathered without them: one replay for
/// all (a file may hold an OOM per event); the shown moment's state serves
/// when it is that OOM.
fn oom_findings(st: &Style, snap: &Snapshot, inp: &DeviceInput) -> Vec<OomFinding> {
    let d = inp.replay.device;
    let ooms = diagnosed_ooms(snap.trace_of(d));
    let mut out = Vec::new();
    crate::timeline::for_each_state_at(snap, d, &ooms, |state| {
        let i = state.at.expect("an event");
        let state = if inp.moment.at == Some(i) {
            &inp.moment
        } else {
            &state
        };
        out.extend(oom_finding(st, snap, state, i, &inp.replay.report));
    });
    out
}

/// The state at the moment `at` and the diagnosed OOMs (as
/// [`oom_findings`] finds them), from one partial replay of `replayer`'s
/// start (the moment is often the first OOM).
fn moment_and_ooms(
    st: &Style,
    snap: &Snapshot,
    replayer: &crate::timeline::Replayer,
    replay: &DeviceReplay,
    at: Option<usize>,
) -> (MomentState, Vec<OomFinding>) {
    let ooms = diagnosed_ooms(snap.trace_of(replay.device));
    let mut events = ooms.clone();
    events.extend(at);
    events.sort_unstable();
    events.dedup();
    let mut moment = None;
    let mut findings = Vec::new();
    let mut k = 0;
    replayer.for_each_state_at(&events, |state| {
        let e = events[k];
        k += 1;
        if ooms.binary_search(&e).is_ok() {
            findings.extend(oom_finding(st, snap, &state, e, &replay.report));
        }
        if at == Some(e) {
            moment = Some(state);
        }
    });
    // The start (`at` none) is no event's state.
    let moment = moment.unwrap_or_else(|| replayer.state_at(at));
    (moment, findings)
}

/// The culprit analysis as rows by call site, for the report's tables and
/// charts. Only live (`active_allocated`) blocks count: a block waiting on a
/// cross-stream free holds no live tensor.
///
/// Order: the sites that strand bytes first, in the order of the analysis'
/// groups by site (stranded bytes, then the rank of their best block), so the
/// first row is the group the summary sentence names; then the sites that
/// strand nothing, by live bytes, then label.
pub fn culprit_rows(snap: &Snapshot, a: &Analysis) -> Vec<CulpritRow> {
    rows_of(snap, a, true)
}

/// [`culprit_rows`] with each row's `stack` left empty: the call sites
/// and their bytes alone, for a caller that shows no stack (a deep stack
/// is hundreds of labels a row).
pub fn culprit_sites(snap: &Snapshot, a: &Analysis) -> Vec<CulpritRow> {
    rows_of(snap, a, false)
}

fn rows_of(snap: &Snapshot, a: &Analysis, stacks: bool) -> Vec<CulpritRow> {
    struct Acc {
        site: CallSite,
        first: usize,
        live: u64,
        stranded: u64,
        blocks: Vec<(u64, u64)>,
        stack: StackId,
    }
    let mut index: HashMap<&CallSite, usize> = HashMap::new();
    let mut acc: Vec<Acc> = Vec::new();
    for (i, b) in a.blocks.iter().enumerate() {
        if b.state != BlockState::ActiveAllocated {
            continue;
        }
        let k = *index.entry(&b.call_site).or_insert_with(|| {
            acc.push(Acc {
                site: (*b.call_site).clone(),
                first: i,
                live: 0,
                stranded: 0,
                blocks: Vec::new(),
                stack: b.stack,
            });
            acc.len() - 1
        });
        let x = &mut acc[k];
        x.live += b.requested.unwrap_or(b.size).min(b.size);
        x.stranded += b.stranded;
        x.blocks.push((b.size, b.address));
    }
    let mut rows: Vec<(Acc, String)> = acc
        .into_iter()
        .map(|x| {
            let label = x.site.label();
            (x, label)
        })
        .collect();
    rows.sort_by(|(x, lx), (y, ly)| {
        (y.stranded > 0)
            .cmp(&(x.stranded > 0))
            .then(y.stranded.cmp(&x.stranded))
            .then(if x.stranded > 0 {
                x.first.cmp(&y.first)
            } else {
                y.live.cmp(&x.live).then(lx.cmp(ly))
            })
            .then(x.first.cmp(&y.first))
    });
    // Each frame's kind worked out once, however many rows' stacks hold it.
    let facts = FrameFacts::new(snap);
    rows.into_iter()
        .map(|(mut x, label)| {
            x.blocks.sort_by(|p, q| q.0.cmp(&p.0).then(p.1.cmp(&q.1)));
            CulpritRow {
                device: a.device,
                site: label,
                live_bytes: x.live,
                stranded_bytes: x.stranded,
                blocks: x.blocks.iter().map(|b| b.1).collect(),
                stack: match stacks {
                    true => (facts.filtered(x.stack).into_iter())
                        .map(|f| frame_label(snap, f, true))
                        .collect(),
                    false => Vec::new(),
                },
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;
