//! The report: every finding `fragscope report` and `fragscope plot` show,
//! gathered once from a snapshot and its replay into plain data that the
//! renderers ([`crate::render::charts`], [`crate::render::html`],
//! [`crate::render::markdown`]) lay out.
//!
//! Owns: which moment each device is shown at (the first out-of-memory
//! event, else the moment most reserved memory sat free), the verdict
//! sentences (each OOM diagnosed by [`crate::oom`], as `fragscope oom` does),
//! and the data quality notes. It does not replay (that is [`crate::replay`]), does not
//! rank culprits (the caller passes [`CulpritRow`]s; [`sites_at`] is the
//! simple per-call-site grouping used until a richer ranking is wired in),
//! and does no formatting beyond the sentences of the verdict.
//!
//! Output is deterministic: the file is named by its base name only, series
//! are downsampled to a fixed number of points, every list has a stable
//! order with explicit tie-breakers.

use crate::advice::Diagnosis;
use crate::model::*;
use crate::render::svg::timeline::OomMark;
use crate::replay::downsample::downsample;
use crate::replay::{DeviceReplay, KeyMoment, Moment, MomentState, ReplayReport, Sample};
use crate::stats::{StateStats, TraceCoverage, consistency_warnings, trace_coverage};
use crate::units::{fmt_bytes, fmt_pct};
use std::collections::BTreeMap;

/// One call site and the memory it holds at the shown moment.
#[derive(Debug, Clone, PartialEq)]
pub struct CulpritRow {
    pub device: i64,
    /// Short label, e.g. `model.py:88 in forward`.
    pub site: String,
    /// Requested bytes of the site's live blocks.
    pub live_bytes: u64,
    /// Free bytes the site keeps from being released or reused.
    pub stranded_bytes: u64,
    /// Addresses of the site's live blocks (outlined on the segment map).
    pub blocks: Vec<u64>,
    /// The call stack, innermost first, one `file:line in function` a line.
    pub stack: Vec<String>,
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
}

#[derive(Debug, Clone)]
pub struct OomFinding {
    pub mark: OomMark,
    pub diagnosis: Diagnosis,
}

#[derive(Debug, Clone)]
pub struct DeviceReport {
    pub device: i64,
    pub events: usize,
    /// Epoch µs of the first event, when events carry times.
    pub first_time_us: Option<i64>,
    /// The replayed series, downsampled (min/max per bucket).
    pub samples: Vec<Sample>,
    pub peak_reserved: Sample,
    pub peak_allocated: Sample,
    pub end: Sample,
    pub key_moments: Vec<KeyMoment>,
    pub ooms: Vec<OomFinding>,
    pub moment_label: String,
    /// Event after which the shown state holds (`None` = start).
    pub moment_at: Option<usize>,
    pub moment_time_us: Option<i64>,
    pub segments: Vec<Segment>,
    pub moment_stats: StateStats,
    pub failed_request: Option<u64>,
    pub replay_report: ReplayReport,
}

impl DeviceReport {
    /// Sizes of the free blocks at the shown moment.
    pub fn gaps(&self) -> Vec<u64> {
        self.segments
            .iter()
            .flat_map(|s| s.blocks.iter())
            .filter(|b| b.state == BlockState::Inactive)
            .map(|b| b.size)
            .collect()
    }

    /// `event 421, t=1.234 s`, `start of the trace`, or `the recorded
    /// state` when there is no trace.
    pub fn moment_text(&self) -> String {
        if self.events == 0 {
            return "the recorded state".into();
        }
        moment_text(self.moment_at, self.moment_time_us, self.first_time_us)
    }
}

pub fn moment_text(at: Option<usize>, time_us: Option<i64>, origin: Option<i64>) -> String {
    match (at, time_us, origin) {
        (None, _, _) => "start of the trace".into(),
        (Some(i), Some(t), Some(o)) => format!("event {i}, t={:.3} s", (t - o) as f64 / 1e6),
        (Some(i), _, _) => format!("event {i}"),
    }
}

#[derive(Debug, Clone)]
pub struct Report {
    /// Base name of the input (never a full path).
    pub file: String,
    pub format: String,
    /// Plain-words summary, most important first.
    pub verdict: Vec<String>,
    pub devices: Vec<DeviceReport>,
    pub culprits: Vec<CulpritRow>,
    /// `allocator_settings` as (key, value) text; empty when not recorded.
    pub settings: Vec<(String, String)>,
    pub settings_recorded: bool,
    pub coverage: Vec<TraceCoverage>,
    /// Data-quality notes (replay anomalies, inconsistencies), each once.
    pub quality: Vec<String>,
}

impl Report {
    /// The device the one-page summary shows: the first with an OOM, else
    /// the one with the largest peak reserved (lowest ordinal on ties).
    pub fn main_device(&self) -> Option<&DeviceReport> {
        self.devices
            .iter()
            .find(|d| !d.ooms.is_empty())
            .or_else(|| {
                self.devices
                    .iter()
                    .fold(None, |b: Option<&DeviceReport>, d| match b {
                        Some(b) if b.peak_reserved.reserved >= d.peak_reserved.reserved => Some(b),
                        _ => Some(d),
                    })
            })
    }

    pub fn culprits_of(&self, device: i64) -> impl Iterator<Item = &CulpritRow> {
        self.culprits.iter().filter(move |c| c.device == device)
    }
}

/// Points kept per device series in reports.
pub const REPORT_POINTS: usize = 800;

/// `path/to/x.pickle` → `x.pickle`; stdin stays `-`.
pub fn base_name(path: &str) -> String {
    if path == "-" {
        return "-".into();
    }
    std::path::Path::new(path)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

/// The moment shown when the user names none: the first out-of-memory event
/// of the device, else the sample where the most reserved memory sat free
/// in the cache (reserved − allocated − pending free: blocks still waiting
/// on a stream are about to be free anyway; earliest on ties).
pub fn default_moment(snap: &Snapshot, device: i64, samples: &[Sample]) -> (Option<usize>, String) {
    if let Some(i) = snap
        .trace_of(device)
        .iter()
        .position(|e| e.action == Action::Oom)
    {
        return (Some(i), "first out-of-memory event".into());
    }
    let cached = |s: &Sample| {
        s.reserved
            .saturating_sub(s.allocated)
            .saturating_sub(s.pending_free)
    };
    let mut best: Option<&Sample> = None;
    for s in samples {
        if best.is_none_or(|b| cached(s) > cached(b)) {
            best = Some(s);
        }
    }
    match best {
        Some(s) if samples.len() > 1 => (
            s.event.map(|e| e as usize),
            "most reserved memory free in the cache".into(),
        ),
        _ => (
            samples.last().and_then(|s| s.event.map(|e| e as usize)),
            "final state".into(),
        ),
    }
}

/// Replays every device (or one) and picks its moment: `at` when given,
/// else [`default_moment`]. Errors name the device and the moment.
pub fn gather(
    snap: &Snapshot,
    device: Option<i64>,
    at: Option<Moment>,
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
        let replay = crate::replay::replay_device(snap, d);
        let key_moments = replay.key_moments(snap);
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
            None => default_moment(snap, d, &replay.samples),
        };
        let moment = crate::replay::state_at(snap, d, at);
        out.push(DeviceInput {
            replay,
            key_moments,
            moment,
            moment_label: label,
        });
    }
    Ok(out)
}

/// The moment as the user would name it on the command line.
pub fn moment_name(m: Moment) -> String {
    match m {
        Moment::Start => "start".into(),
        Moment::End => "end".into(),
        Moment::Event(n) => format!("after event {n}"),
        Moment::TimeUs(t) => format!("t={t} µs"),
        Moment::PeakAllocated => "peak allocated".into(),
        Moment::PeakReserved => "peak reserved".into(),
        Moment::MaxFragmentation => "highest fragmentation".into(),
        Moment::MinLargestGap => "smallest largest free gap".into(),
        Moment::Oom(n) => format!("out-of-memory event {}", n + 1),
    }
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

fn first_max(samples: &[Sample], key: impl Fn(&Sample) -> u64) -> Sample {
    let mut best: Option<&Sample> = None;
    for s in samples {
        if best.is_none_or(|b| key(s) > key(b)) {
            best = Some(s);
        }
    }
    best.copied().unwrap_or_default()
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

/// Assembles the report from replayed devices and ranked call sites.
pub fn build(
    snap: &Snapshot,
    file: &str,
    format: &str,
    inputs: Vec<DeviceInput>,
    culprits: Vec<CulpritRow>,
) -> Report {
    let mut devices = Vec::new();
    let mut quality = Vec::new();
    for w in consistency_warnings(snap) {
        quality.push(w);
    }
    for inp in inputs {
        let d = inp.replay.device;
        let trace = snap.trace_of(d);
        let samples = &inp.replay.samples;
        let ooms = oom_findings(snap, &inp);
        let rr = &inp.replay.report;
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
        let moment_stats = StateStats::of(&inp.moment.segments);
        devices.push(DeviceReport {
            device: d,
            events: trace.len(),
            first_time_us: trace.iter().find_map(|e| e.time_us),
            samples: downsample(samples, REPORT_POINTS),
            peak_reserved: first_max(samples, |s| s.reserved),
            peak_allocated: first_max(samples, |s| s.allocated),
            end: *inp.replay.end(),
            key_moments: inp.key_moments,
            ooms,
            moment_label: inp.moment_label,
            moment_at: inp.moment.at,
            moment_time_us: inp.moment.time_us,
            failed_request: inp.moment.failed_request,
            segments: inp.moment.segments,
            moment_stats,
            replay_report: inp.replay.report,
        });
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
        culprits,
        settings,
        settings_recorded,
        coverage: trace_coverage(snap),
        quality,
    };
    report.verdict = verdict(&report);
    report
}

/// Every OOM of a device as `fragscope oom` diagnoses it ([`crate::oom`]),
/// so the report and the command phrase the same moment identically. The
/// shown moment's state serves when it is that OOM; other OOMs are replayed.
fn oom_findings(snap: &Snapshot, inp: &DeviceInput) -> Vec<OomFinding> {
    let d = inp.replay.device;
    let mut out = Vec::new();
    for (i, ev) in snap.trace_of(d).iter().enumerate() {
        if ev.action != Action::Oom {
            continue;
        }
        let replayed;
        let state = if inp.moment.at == Some(i) {
            &inp.moment
        } else {
            replayed = crate::replay::state_at(snap, d, Some(i));
            &replayed
        };
        let Some(f) = crate::oom::finding_at(snap, state, i, &inp.replay.report, None) else {
            continue;
        };
        out.push(OomFinding {
            mark: OomMark {
                event: i,
                time_us: ev.time_us,
                request: ev.size,
                largest_gap: Some(f.largest_usable_gap.as_ref().map_or(0, |g| g.gap_size)),
                device_free: ev.device_free,
            },
            diagnosis: f.diagnosis,
        });
    }
    out
}

/// The summary in words: every OOM's diagnosis, else where the memory sat
/// at the worst moment, then the top call site.
pub fn verdict(r: &Report) -> Vec<String> {
    let mut v = Vec::new();
    if r.devices.is_empty() {
        v.push("The snapshot holds no segments and no trace events: nothing was allocated while it was recorded.".into());
        return v;
    }
    let any_oom = r.devices.iter().any(|d| !d.ooms.is_empty());
    for d in &r.devices {
        for o in &d.ooms {
            v.push(format!(
                "Device {}: out of memory at {}. {}.",
                d.device,
                moment_text(Some(o.mark.event), o.mark.time_us, d.first_time_us),
                upper_first(&o.diagnosis.headline),
            ));
        }
    }
    if !any_oom {
        v.push("No out-of-memory event was recorded.".into());
        if let Some(d) = r.main_device() {
            let s = &d.moment_stats;
            let free = s.free_bytes();
            if s.reserved_bytes > 0 {
                v.push(format!(
                    "Device {} at {} ({}): {} of {} reserved ({}) sat free inside PyTorch's cache, in {} free gaps; the largest gap was {} (fragmentation {}).",
                    d.device,
                    d.moment_text(),
                    d.moment_label,
                    fmt_bytes(free),
                    fmt_bytes(s.reserved_bytes),
                    fmt_pct(free as f64 / s.reserved_bytes as f64),
                    s.free_blocks,
                    fmt_bytes(s.largest_free_block_bytes),
                    fmt_pct(s.fragmentation)
                ));
            }
        }
    }
    if let Some(d) = r.main_device() {
        v.push(format!(
            "Peak on device {}: {} reserved, {} allocated.",
            d.device,
            fmt_bytes(d.peak_reserved.reserved),
            fmt_bytes(d.peak_allocated.allocated)
        ));
        let mut sites = r.culprits_of(d.device);
        if let Some(c) = sites.next() {
            if c.stack.is_empty() {
                v.push(format!(
                    "Blocks without a recorded stack (allocated before recording started, or recorded without context) hold the most: {} live, stranding {} of free memory.",
                    fmt_bytes(c.live_bytes),
                    fmt_bytes(c.stranded_bytes)
                ));
            }
            if let Some(c) = std::iter::once(c)
                .chain(sites)
                .find(|c| !c.stack.is_empty())
            {
                v.push(format!(
                    "Top call site: {} holds {} live and strands {} of free memory.",
                    c.site,
                    fmt_bytes(c.live_bytes),
                    fmt_bytes(c.stranded_bytes)
                ));
            }
        }
    }
    v
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// Frames that belong to PyTorch or the interpreter rather than user code.
fn is_internal(file: &str) -> bool {
    file.contains("/torch/")
        || file.contains("\\torch\\")
        || file.ends_with(".cpp")
        || file.ends_with(".h")
        || file.ends_with(".c")
        || file.starts_with('<')
        || file == "??"
        || file.is_empty()
}

fn short_path(p: &str) -> String {
    let parts: Vec<&str> = p.split(['/', '\\']).filter(|s| !s.is_empty()).collect();
    match parts.len() {
        0 => p.to_string(),
        1 => parts[0].to_string(),
        n => format!("{}/{}", parts[n - 2], parts[n - 1]),
    }
}

fn frame_line(snap: &Snapshot, f: FrameId) -> String {
    let f = snap.frame(f);
    format!(
        "{}:{} in {}",
        snap.str(f.filename),
        f.line,
        snap.str(f.name)
    )
}

/// The call site a stack is charged to: its innermost frame outside PyTorch
/// and C++ (the innermost frame when all are internal).
pub fn site_label(snap: &Snapshot, stack: StackId) -> String {
    let frames = snap.stack(stack);
    let pick = frames
        .iter()
        .find(|f| !is_internal(snap.str(snap.frame(**f).filename)))
        .or(frames.first());
    match pick {
        Some(f) => {
            let fr = snap.frame(*f);
            format!(
                "{}:{} in {}",
                short_path(snap.str(fr.filename)),
                fr.line,
                snap.str(fr.name)
            )
        }
        None => "<no stack recorded>".into(),
    }
}

/// Live bytes and stranded bytes per call site at one moment.
///
/// Stranded: the free bytes (inactive and pending-free) of every segment
/// that holds at least one live block, since `empty_cache` can only release
/// whole free segments; each segment's free bytes are split among the sites
/// holding live blocks in it, in proportion to their live bytes (the
/// remainder of the integer split goes to the largest holder). Sorted by
/// live + stranded bytes, then by site.
pub fn sites_at(snap: &Snapshot, device: i64, segments: &[Segment]) -> Vec<CulpritRow> {
    struct Acc {
        live: u64,
        stranded: u64,
        blocks: Vec<(u64, u64)>,
        stack: StackId,
        biggest: u64,
    }
    let mut by: BTreeMap<String, Acc> = BTreeMap::new();
    for seg in segments {
        let mut holders: BTreeMap<String, u64> = BTreeMap::new();
        let mut free = 0u64;
        for b in &seg.blocks {
            match b.state {
                BlockState::ActiveAllocated => {
                    let label = site_label(snap, b.frames);
                    let live = b.requested_or_size().min(b.size);
                    *holders.entry(label.clone()).or_default() += live;
                    let a = by.entry(label).or_insert(Acc {
                        live: 0,
                        stranded: 0,
                        blocks: Vec::new(),
                        stack: b.frames,
                        biggest: 0,
                    });
                    a.live += live;
                    a.blocks.push((b.size, b.address));
                    if b.size > a.biggest {
                        a.biggest = b.size;
                        a.stack = b.frames;
                    }
                }
                BlockState::Inactive | BlockState::ActivePendingFree => free += b.size,
            }
        }
        let held: u64 = holders.values().sum();
        if free == 0 || holders.is_empty() {
            continue;
        }
        let mut given = 0u64;
        let mut largest: Option<(&String, u64)> = None;
        for (site, live) in &holders {
            let share = if held == 0 {
                free / holders.len() as u64
            } else {
                (free as u128 * *live as u128 / held as u128) as u64
            };
            given += share;
            by.get_mut(site).expect("holder is a site").stranded += share;
            if largest.is_none_or(|(_, l)| *live > l) {
                largest = Some((site, *live));
            }
        }
        if let Some((site, _)) = largest {
            by.get_mut(site).expect("holder is a site").stranded += free - given;
        }
    }
    let mut rows: Vec<CulpritRow> = by
        .into_iter()
        .map(|(site, mut a)| {
            a.blocks.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
            CulpritRow {
                device,
                site,
                live_bytes: a.live,
                stranded_bytes: a.stranded,
                blocks: a.blocks.iter().map(|b| b.1).collect(),
                stack: snap
                    .stack(a.stack)
                    .iter()
                    .map(|f| frame_line(snap, *f))
                    .collect(),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.live_bytes + b.stranded_bytes)
            .cmp(&(a.live_bytes + a.stranded_bytes))
            .then(a.site.cmp(&b.site))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap_with_frames() -> (Snapshot, StackId, StackId) {
        let mut i = Interner::new();
        let torch = i.string("/usr/lib/python3/site-packages/torch/nn/modules/linear.py");
        let user = i.string("/home/me/project/model.py");
        let fwd = i.string("forward");
        let other = i.string("train.py");
        let step = i.string("step");
        let f0 = i.frame(Frame {
            filename: torch,
            line: 125,
            name: fwd,
        });
        let f1 = i.frame(Frame {
            filename: user,
            line: 88,
            name: fwd,
        });
        let f2 = i.frame(Frame {
            filename: other,
            line: 12,
            name: step,
        });
        let a = i.stack(vec![f0, f1]);
        let b = i.stack(vec![f2]);
        let mut s = Snapshot::default();
        i.finish(&mut s);
        (s, a, b)
    }

    fn block(address: u64, size: u64, req: u64, state: BlockState, frames: StackId) -> Block {
        Block {
            address,
            size,
            requested_size: Some(req),
            state,
            frames,
        }
    }

    fn segment(address: u64, blocks: Vec<Block>) -> Segment {
        Segment {
            device: 0,
            address,
            total_size: blocks.iter().map(|b| b.size).sum(),
            allocated_size: None,
            active_size: None,
            requested_size: None,
            stream: 0,
            segment_type: SegmentType::Large,
            pool_id: None,
            is_expandable: None,
            frames: StackId::EMPTY,
            blocks,
        }
    }

    #[test]
    fn sites_skip_framework_frames_and_split_stranded_bytes() {
        let (snap, a, b) = snap_with_frames();
        assert_eq!(site_label(&snap, a), "project/model.py:88 in forward");
        assert_eq!(site_label(&snap, b), "train.py:12 in step");
        assert_eq!(site_label(&snap, StackId::EMPTY), "<no stack recorded>");
        let segs = vec![
            segment(
                0,
                vec![
                    block(0, 300, 300, BlockState::ActiveAllocated, a),
                    block(300, 100, 100, BlockState::ActiveAllocated, b),
                    block(400, 1001, 0, BlockState::Inactive, StackId::EMPTY),
                ],
            ),
            // Entirely free: releasable, strands nothing.
            segment(
                10_000,
                vec![block(10_000, 5000, 0, BlockState::Inactive, StackId::EMPTY)],
            ),
            segment(
                20_000,
                vec![
                    block(20_000, 512, 400, BlockState::ActiveAllocated, b),
                    block(
                        20_512,
                        488,
                        0,
                        BlockState::ActivePendingFree,
                        StackId::EMPTY,
                    ),
                ],
            ),
        ];
        let rows = sites_at(&snap, 0, &segs);
        assert_eq!(rows.len(), 2);
        let total_stranded: u64 = rows.iter().map(|r| r.stranded_bytes).sum();
        assert_eq!(total_stranded, 1001 + 488);
        let m = rows.iter().find(|r| r.site.contains("model.py")).unwrap();
        assert_eq!(m.live_bytes, 300);
        // 1001 × 300/400 = 750.75 → 750, plus the remainder of 1.
        assert_eq!(m.stranded_bytes, 751);
        assert_eq!(m.blocks, vec![0]);
        assert_eq!(m.stack.len(), 2);
        let t = rows.iter().find(|r| r.site.contains("train.py")).unwrap();
        assert_eq!(t.live_bytes, 500);
        assert_eq!(t.stranded_bytes, 250 + 488);
        assert_eq!(t.blocks, vec![20_000, 300]);
        assert!(rows[0].site.contains("train.py"));
    }

    #[test]
    fn default_moment_prefers_oom_then_most_free() {
        let mut snap = Snapshot::default();
        let ev = |action: Action| TraceEvent {
            action,
            addr: 0,
            size: 10,
            stream: 0,
            time_us: None,
            frames: StackId::EMPTY,
            device_free: None,
            compile_context: None,
            user_metadata: None,
            pool_id: None,
            category: None,
        };
        let s = |e: Option<u32>, reserved: u64, allocated: u64| Sample {
            event: e,
            reserved,
            allocated,
            ..Default::default()
        };
        let samples = [
            s(None, 100, 90),
            s(Some(0), 100, 10),
            s(Some(1), 200, 110),
            s(Some(2), 100, 50),
        ];
        snap.device_traces = Some(vec![vec![
            ev(Action::Alloc),
            ev(Action::FreeRequested),
            ev(Action::Alloc),
        ]]);
        // Free = 90 at event 0 and at event 1: the earliest wins.
        assert_eq!(default_moment(&snap, 0, &samples).0, Some(0));
        snap.device_traces = Some(vec![vec![
            ev(Action::Alloc),
            ev(Action::Oom),
            ev(Action::Alloc),
        ]]);
        let (at, label) = default_moment(&snap, 0, &samples);
        assert_eq!(at, Some(1));
        assert!(label.contains("out-of-memory"));
    }

    #[test]
    fn base_names_only() {
        assert_eq!(base_name("/home/me/runs/x.pickle"), "x.pickle");
        assert_eq!(base_name("x.pickle"), "x.pickle");
        assert_eq!(base_name("-"), "-");
    }
}
