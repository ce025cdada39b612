//! The stages run in order for a whole finding: load → timeline → analysis
//! (+ the what-if model). The one entry that the commands, the benchmarks,
//! the examples and the tests call; each command then renders what it gets
//! back. Nothing here reads a file itself (the loader does), prints or
//! writes: errors are returned for the command to show.

use crate::analysis::culprits::{self, Analysis, GroupBy, Options};
use crate::analysis::metrics::{Metrics, Source};
use crate::analysis::ranks::{self, RankRow, RanksReport};
use crate::analysis::report::{self, DeviceCulprits, DeviceInput, Report};
use crate::analysis::stats::FileStats;
use crate::core::style::Style;
use crate::input::{self, Content, LoadOptions, Loaded};
use crate::model::Snapshot;
use crate::sim::{self, SimConfig, SimReport};
use crate::timeline::{self, Moment, MomentState};
use rayon::prelude::*;

mod findings;
pub use findings::{
    CulpritsOptions, TimelineOptions, culprits_of, diff_of, events_of, stats_of, timeline_of,
};

/// The input's form, compression and size (`pickle protocol 4, gzip,
/// 1.20 MiB`), as the commands' headings name it.
pub fn describe_format(st: &Style, l: &Loaded) -> String {
    let c = match l.compression {
        input::Compression::None => "",
        input::Compression::Gzip => ", gzip",
        input::Compression::Zstd => ", zstd",
    };
    format!("{}{c}, {}", l.format, st.bytes(l.bytes))
}

/// The metrics of a snapshot, profiler trace or memory-timeline export and
/// the decoded input itself (`check` and `diff`).
pub fn load_measured(
    path: &str,
    load: &LoadOptions,
    device: Option<i64>,
) -> anyhow::Result<(Metrics, Content)> {
    let l = input::load(path, load)?;
    match l.content {
        Content::Snapshot(s) => {
            let m = Metrics::of_snapshot(&s, device).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            Ok((m, Content::Snapshot(s)))
        }
        Content::Profiler(t) => {
            let m = Metrics::of_trace(&t, device).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            Ok((m, Content::Profiler(t)))
        }
        Content::MemoryTimeline(t) => {
            if device.is_some() {
                anyhow::bail!(
                    "{path}: --device: a memory-timeline export holds one device's tensor bytes, with no device index to choose"
                );
            }
            Ok((Metrics::of_memory_timeline(&t), Content::MemoryTimeline(t)))
        }
    }
}

/// Two inputs compare only when both or neither are memory-timeline
/// exports: the category peaks of one have no counterpart in the
/// allocator figures of the other.
pub fn same_kind(a: (&str, &Metrics), b: (&str, &Metrics), what: &str) -> anyhow::Result<()> {
    let kind = |m: &Metrics| {
        if m.source == Source::MemoryTimeline {
            "a memory-timeline export"
        } else {
            "a snapshot or profiler trace"
        }
    };
    if (a.1.source == Source::MemoryTimeline) != (b.1.source == Source::MemoryTimeline) {
        anyhow::bail!(
            "{}: {what}: {} is {} and {} is {}; the per-category peaks of a memory-timeline export compare only with another export (export_memory_timeline(\"x.raw.json.gz\")), the allocator figures only with a snapshot or profiler trace",
            b.0,
            a.0,
            kind(a.1),
            b.0,
            kind(b.1)
        );
    }
    Ok(())
}

/// The allocator state of each device at `moment` (every device with
/// segments, or `device`). `end` comes straight from the snapshot's final
/// segments; every other moment from the replay.
pub fn states(
    snap: &Snapshot,
    file: &str,
    moment: Moment,
    device: Option<i64>,
) -> anyhow::Result<Vec<MomentState>> {
    let known = snap.devices();
    let devices: Vec<i64> = match device {
        Some(d) if known.contains(&d) => vec![d],
        Some(d) => anyhow::bail!(
            "{file}: --device {d}: no segments or trace events for that device (devices present: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        None => known
            .into_iter()
            .filter(|&d| snap.segments_of(d).next().is_some() || moment != Moment::End)
            .collect(),
    };
    if moment == Moment::End {
        return Ok(devices
            .into_iter()
            .map(|d| culprits::final_state(snap, d))
            .collect());
    }
    let mut out = Vec::new();
    let mut first_err = None;
    for d in devices {
        let r = timeline::replay_device(snap, d);
        match r.resolve(snap, moment) {
            Ok(at) => out.push(timeline::state_at(snap, d, at)),
            Err(e) => {
                first_err.get_or_insert(format!("device {d}: {e}"));
            }
        }
    }
    match (out.is_empty(), first_err) {
        (true, Some(e)) => anyhow::bail!("{file}: {e}"),
        _ => Ok(out),
    }
}

/// The culprit analysis of each of `states`.
pub fn analyses(snap: &Snapshot, states: &[MomentState], opts: &Options) -> Vec<Analysis> {
    states
        .iter()
        .map(|s| culprits::analyze(snap, s, opts))
        .collect()
}

/// Settings the report's what-if chart tries besides the recorded ones
/// (`fragscope simulate` tries more).
pub const WHAT_IF_CONFIGS: &[&str] = &[
    "expandable_segments:True",
    "max_split_size_mb:256",
    "roundup_power2_divisions:4",
];

/// The culprit analysis of each device at its report moment: what
/// `fragscope culprits --at MOMENT` computes, grouped by call site, with
/// its summary sentence.
pub fn device_culprits(snap: &Snapshot, inputs: &[DeviceInput]) -> Vec<DeviceCulprits> {
    let opts = culprits::Options {
        request: None,
        group_by: GroupBy::Site,
        top: 10,
    };
    inputs
        .iter()
        .map(|i| {
            let a = culprits::analyze(snap, &i.moment, &opts);
            DeviceCulprits {
                device: i.replay.device,
                summary: culprits::summary(&a),
                rows: report::culprit_rows(snap, &a),
            }
        })
        .collect()
}

/// What a report is made of: the one [`Report`] of a snapshot or a
/// profiler trace, or the per-category [`report::trace::CategoryReport`]
/// of a memory-timeline export (series per tensor category, no allocator
/// events).
pub enum AnyReport {
    Report(Box<Report>),
    Categories(Box<report::trace::CategoryReport>),
}

/// What one input's report shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReportOptions {
    /// Only this device.
    pub device: Option<i64>,
    /// The moment of the segment map and the call sites (a trace's
    /// operator table).
    pub at: Option<Moment>,
    /// Run the what-if model on a snapshot's devices.
    pub what_if: bool,
}

/// Load → report: the one choice of how an input becomes a report. The
/// options a memory-timeline export cannot take are the caller's to
/// refuse, in its own words.
pub fn report(st: &Style, l: &Loaded, o: &ReportOptions) -> anyhow::Result<AnyReport> {
    let fmt = describe_format(st, l);
    Ok(match &l.content {
        Content::Snapshot(snap) => AnyReport::Report(Box::new(build_report_what_if(
            st, snap, l, o.device, o.at, !o.what_if,
        )?)),
        Content::Profiler(t) => AnyReport::Report(Box::new(
            Report::of_trace(st, t, &l.name, &fmt, o.device, o.at)
                .map_err(|e| anyhow::anyhow!("{}: {e}", l.name))?,
        )),
        Content::MemoryTimeline(t) => AnyReport::Categories(Box::new(
            report::trace::build_categories(st, t, &l.name, &fmt),
        )),
    })
}

/// Replays, ranks culprits and assembles the report (shared with `plot`).
pub fn build_report(
    st: &Style,
    snap: &Snapshot,
    loaded: &Loaded,
    device: Option<i64>,
    at: Option<Moment>,
) -> anyhow::Result<Report> {
    build_report_with(st, snap, loaded, device, at, |_, _| {}, |_| {}, |_, _| {})
}

/// [`build_report`], handing each device's replayer and replay on as soon
/// as they are made (see [`report::gather_with`]), and its whole series
/// once the report is done with it (see [`report::build_keeping`]).
#[allow(clippy::too_many_arguments)] // the report's inputs, then its three hand-offs in order
pub fn build_report_with<'a>(
    st: &Style,
    snap: &'a Snapshot,
    loaded: &Loaded,
    device: Option<i64>,
    at: Option<Moment>,
    on_start: impl FnMut(i64, &crate::timeline::Replayer),
    on_replay: impl FnMut(report::ReplayMade<'_, 'a>),
    keep_series: impl FnMut(i64, crate::timeline::Series),
) -> anyhow::Result<Report> {
    let inputs = report::gather_with(st, snap, device, at, on_start, on_replay)
        .map_err(|e| anyhow::anyhow!("{}: {e}", loaded.name))?;
    let culprits = device_culprits(snap, &inputs);
    Ok(report::build_keeping(
        st,
        snap,
        &loaded.name,
        &describe_format(st, loaded),
        inputs,
        culprits,
        keep_series,
    ))
}

/// Runs the what-if model on every device of the report with allocations
/// in its trace, and adds its answer to the verdict after the device's OOM
/// lines. A device the model cannot run is named in the data-quality notes.
pub fn attach_what_if(r: &mut Report, snap: &Snapshot) {
    let devices: Vec<i64> = r.devices.iter().map(|d| d.device).collect();
    let runs = what_if_runs(snap, &devices);
    attach_what_if_runs(r, runs);
}

/// The what-if model of each of `devices` it can run; it needs only the
/// snapshot, so it may run while the rest of the report is built.
pub fn what_if_runs(snap: &Snapshot, devices: &[i64]) -> Vec<Result<SimReport, String>> {
    let simulable = sim::trace::simulable_devices(snap);
    let configs = what_if_configs(snap);
    devices
        .iter()
        .filter(|d| simulable.contains(d))
        .map(|&d| what_if_run(snap, d, &configs, sim::start_state(snap, d)))
        .collect()
}

/// The settings the what-if model tries on `snap`: [`WHAT_IF_CONFIGS`]
/// less the recorded ones, which run anyway (trying them twice adds
/// nothing).
pub fn what_if_configs(snap: &Snapshot) -> Vec<SimConfig> {
    let recorded = match &snap.allocator_settings {
        Some(s) => SimConfig::from_settings(s).ok(),
        None => Some(SimConfig::default()),
    };
    WHAT_IF_CONFIGS
        .iter()
        .map(|s| SimConfig::parse(s).expect("built-in configurations parse"))
        .filter(|c| Some(c) != recorded.as_ref())
        .collect()
}

fn what_if_run(
    snap: &Snapshot,
    d: i64,
    configs: &[SimConfig],
    start: sim::StartState,
) -> Result<SimReport, String> {
    sim::simulate_from(snap, d, configs, None, start)
        .map_err(|e| format!("device {d}: the what-if model could not run: {e}"))
}

/// Builds the report and, unless `no_what_if`, runs the what-if model of
/// each device it can run from the start state the report's own replay
/// rebuilt ([`what_if_beside`]), and sums it up in the report. The same
/// answer as [`build_report`] then [`attach_what_if`].
pub fn build_report_what_if(
    st: &Style,
    snap: &Snapshot,
    loaded: &Loaded,
    device: Option<i64>,
    at: Option<Moment>,
    no_what_if: bool,
) -> anyhow::Result<Report> {
    if no_what_if {
        return build_report(st, snap, loaded, device, at);
    }
    let simulable = sim::trace::simulable_devices(snap);
    let (r, what_if) = what_if_beside(snap, &simulable, &what_if_configs(snap), |feed| {
        build_report_with(
            st,
            snap,
            loaded,
            device,
            at,
            |d, replayer| feed.start(d, replayer),
            |r| feed.replayed(&r),
            |_, _| {},
        )
    });
    let mut r = r?;
    attach_what_if_runs(&mut r, what_if.into_iter().map(|(_, w)| w).collect());
    Ok(r)
}

/// A device's what-if model, or why it could not run.
pub type DeviceWhatIf = (i64, Result<SimReport, String>);

/// Where a report's replay hands each device on to [`what_if_beside`]'s
/// model: its start once rebuilt, then its replay's report.
pub struct WhatIfFeed<'d> {
    tx: std::sync::mpsc::Sender<Handoff>,
    devices: &'d [i64],
}

enum Handoff {
    Start(i64, Vec<crate::model::Segment>),
    Replay(i64, Box<crate::timeline::ReplayReport>),
}

impl WhatIfFeed<'_> {
    /// A device's start is rebuilt: its model starts.
    pub fn start(&self, d: i64, replayer: &crate::timeline::Replayer) {
        if self.devices.contains(&d) {
            // The receiver lives until every handoff is sent.
            let _ = self
                .tx
                .send(Handoff::Start(d, replayer.state_at(None).segments));
        }
    }

    /// A device's replay is made: its model is summed up.
    pub fn replayed(&self, r: &report::ReplayMade) {
        let d = r.replay.device;
        if self.devices.contains(&d) {
            let _ = (self.tx).send(Handoff::Replay(d, Box::new(r.replay.report.clone())));
        }
    }
}

/// Runs `body`, which builds a report and hands each device's start and
/// replay to the feed it is given, and beside it, on another thread, the
/// what-if model of each of `devices` under its recorded settings and
/// `configs`: each device's model starts as soon as the report's replay
/// has rebuilt its start, while the report goes on (the series, the
/// moment, the culprits), and is summed up once that replay's report is
/// known. The answers are those of [`sim::simulate_device`], by device in
/// the order handed on, without replaying any trace again.
pub fn what_if_beside<'d, R>(
    snap: &Snapshot,
    devices: &'d [i64],
    configs: &[SimConfig],
    body: impl FnOnce(WhatIfFeed<'d>) -> R,
) -> (R, Vec<DeviceWhatIf>) {
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel::<Handoff>();
        let worker = s.spawn(move || {
            let mut out = Vec::new();
            let mut running = None;
            for m in rx {
                match m {
                    Handoff::Start(d, segments) => {
                        let start = sim::start_state_unreported(segments);
                        let input = sim::run::prepare_from(snap, d, None, start);
                        let runs = sim::run_configs(&input, configs);
                        running = Some((d, input, runs));
                    }
                    Handoff::Replay(d, report) => {
                        let Some((rd, mut input, runs)) = running.take() else {
                            continue;
                        };
                        debug_assert_eq!(rd, d, "a device's replay follows its start");
                        let segments = std::mem::take(&mut input.start.segments);
                        input.set_start(snap, sim::start_state_from(snap, d, segments, &report));
                        let r = runs.map(|r| sim::report_of(input, r)).map_err(|e| {
                            format!("device {d}: the what-if model could not run: {e}")
                        });
                        out.push((d, r));
                    }
                }
            }
            out
        });
        let r = body(WhatIfFeed { tx, devices });
        let w = worker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (r, w)
    })
}

/// Adds the answers of [`what_if_runs`] to the report.
pub fn attach_what_if_runs(r: &mut Report, results: Vec<Result<SimReport, String>>) {
    let mut runs: Vec<SimReport> = Vec::new();
    for w in results {
        match w {
            Ok(w) => runs.push(w),
            Err(e) => r.quality.push(e),
        }
    }
    for w in &runs {
        if w.recorded_ooms.is_empty() {
            continue;
        }
        if let Some(answer) = crate::analysis::what_if::expandable_answer(w) {
            r.add_what_if(w.device, answer);
        }
    }
    r.what_if = runs;
}

/// One rank, read and measured.
pub enum RankInput {
    Snapshot(Box<FileStats>, Box<Metrics>),
    /// Not a snapshot: why it is left out of the table.
    LeftOut(String),
}

/// Reads one rank file: `stats` figures and the replayed metrics.
pub fn rank_input(st: &Style, path: &str, load: &LoadOptions) -> anyhow::Result<RankInput> {
    let l = input::load(path, load)?;
    let fmt = describe_format(st, &l);
    Ok(match &l.content {
        Content::Snapshot(s) => RankInput::Snapshot(
            Box::new(crate::analysis::stats::file_stats(s, path, fmt)),
            Box::new(Metrics::of_snapshot(s, None).map_err(|e| anyhow::anyhow!("{path}: {e}"))?),
        ),
        Content::Profiler(_) => RankInput::LeftOut(
            "a profiler trace: ranks are compared by their final segments, which a trace does not record".into(),
        ),
        Content::MemoryTimeline(_) => RankInput::LeftOut(
            "a memory-timeline export: it records tensor bytes by category, not the allocator".into(),
        ),
    })
}

/// Reads every rank in parallel (rayon) and builds the per-rank report;
/// the result does not depend on the number of threads. Also returns the
/// errors of the unreadable files, in the order of `files` (each is named
/// in the report's left-out list too).
pub fn ranks_report(
    st: &Style,
    files: &[String],
    load: &LoadOptions,
) -> (RanksReport, Vec<anyhow::Error>) {
    let labels = ranks::labels(files);
    let read: Vec<anyhow::Result<RankInput>> =
        files.par_iter().map(|f| rank_input(st, f, load)).collect();
    let mut stats: Vec<(String, FileStats, Metrics)> = Vec::new();
    let mut left_out = Vec::new();
    let mut failed = Vec::new();
    for ((path, label), r) in files.iter().zip(&labels).zip(read) {
        match r {
            Ok(RankInput::Snapshot(fs, m)) => stats.push((label.clone(), *fs, *m)),
            Ok(RankInput::LeftOut(why)) => left_out.push(format!("{label}: {why}")),
            Err(e) => {
                left_out.push(format!(
                    "{label}: unreadable ({})",
                    format!("{e:#}").replace(path.as_str(), label)
                ));
                failed.push(e);
            }
        }
    }
    let refs: Vec<&FileStats> = stats.iter().map(|x| &x.1).collect();
    let flags = ranks::outliers(&refs);
    let rows: Vec<RankRow> = stats
        .iter()
        .zip(flags)
        .map(|((label, fs, m), flag)| {
            let mut row = ranks::row(label.clone(), fs, m);
            row.outlier = flag;
            row
        })
        .collect();
    (
        ranks::build(st, rows, left_out, ranks::outlier_rule()),
        failed,
    )
}
