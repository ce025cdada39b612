//! `fragscope report FILE -o report.html` (also `-o report.svg`, `-o
//! report.md`, `--markdown`). FILE may be a snapshot, a profiler trace or a
//! memory-timeline export; several files or a directory make a per-rank
//! report (one snapshot per rank).

use super::common::{Exit, Global, expand_inputs, print, print_error};
use crate::analysis::culprits::{self, GroupBy};
use crate::analysis::metrics::Metrics;
use crate::analysis::ranks::{self, RankRow, RanksReport};
use crate::analysis::report::{self, DeviceCulprits, DeviceInput, Report};
use crate::analysis::stats::FileStats;
use crate::core::style::Style;
use crate::input::{self, Content, Loaded};
use crate::model::Snapshot;
use crate::render::{charts, html, markdown};
use crate::sim::{self, SimConfig, SimReport};
use crate::timeline::Moment;
use rayon::prelude::*;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot, profiler trace or memory-timeline export (any supported
    /// form, `-` for stdin). Several files, or a directory of them, make a
    /// per-rank report (one snapshot per rank).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Output file(s): `.html` the full self-contained report, `.svg` a
    /// one-page summary image, `.md` Markdown. Repeat to write several.
    #[arg(short, long, value_name = "OUT")]
    pub output: Vec<String>,
    /// Print the Markdown summary on stdout (for a CI step summary).
    #[arg(long)]
    pub markdown: bool,
    /// Image link in the Markdown (default: the `.svg` written by this run).
    #[arg(long, value_name = "URL")]
    pub svg_link: Option<String>,
    /// Only this device (default: every device).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// Moment the segment map, gap histogram and call sites show (default:
    /// the first OOM, else the moment most reserved memory was free; for a
    /// profiler trace, the first OOM, else the peak of allocated bytes).
    #[arg(long, value_name = "MOMENT")]
    pub at: Option<Moment>,
    /// Leave out the what-if allocator model (reserved memory under other
    /// PYTORCH_CUDA_ALLOC_CONF settings), which replays the trace several
    /// times.
    #[arg(long)]
    pub no_what_if: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    Html,
    Svg,
    Markdown,
}

fn kind_of(path: &str) -> anyhow::Result<Out> {
    let l = path.to_ascii_lowercase();
    if l.ends_with(".html") || l.ends_with(".htm") {
        Ok(Out::Html)
    } else if l.ends_with(".svg") {
        Ok(Out::Svg)
    } else if l.ends_with(".md") || l.ends_with(".markdown") {
        Ok(Out::Markdown)
    } else {
        anyhow::bail!(
            "{path}: cannot tell the report format from the extension; use .html, .svg or .md"
        )
    }
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
pub fn device_culprits(st: &Style, snap: &Snapshot, inputs: &[DeviceInput]) -> Vec<DeviceCulprits> {
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
                summary: crate::render::culprits::summary(st, &a),
                rows: report::culprit_rows(snap, &a),
            }
        })
        .collect()
}

/// Replays, ranks culprits and assembles the report (shared with `plot`).
pub fn build_report(
    st: &Style,
    snap: &Snapshot,
    loaded: &Loaded,
    device: Option<i64>,
    at: Option<Moment>,
) -> anyhow::Result<Report> {
    build_report_with(st, snap, loaded, device, at, |_, _| {}, |_| {})
}

/// [`build_report`], handing each device's replayer and replay on as soon
/// as they are made (see [`report::gather_with`]).
pub fn build_report_with(
    st: &Style,
    snap: &Snapshot,
    loaded: &Loaded,
    device: Option<i64>,
    at: Option<Moment>,
    on_start: impl FnMut(i64, &crate::timeline::Replayer),
    on_replay: impl FnMut(&crate::timeline::DeviceReplay),
) -> anyhow::Result<Report> {
    let inputs = report::gather_with(snap, device, at, on_start, on_replay)
        .map_err(|e| anyhow::anyhow!("{}: {e}", loaded.name))?;
    let culprits = device_culprits(st, snap, &inputs);
    Ok(report::build(
        st,
        snap,
        &loaded.name,
        &super::stats::describe_format(st, loaded),
        inputs,
        culprits,
    ))
}

/// Runs the what-if model on every device of the report with allocations
/// in its trace, and adds its answer to the verdict after the device's OOM
/// lines. A device the model cannot run is named in the data-quality notes.
pub fn attach_what_if(st: &Style, r: &mut Report, snap: &Snapshot) {
    let devices: Vec<i64> = r.devices.iter().map(|d| d.device).collect();
    let runs = what_if_runs(snap, &devices);
    attach_what_if_runs(st, r, runs);
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
/// rebuilt: each device's model starts on another thread as soon as that
/// start is rebuilt, while the report goes on (the series, the moment,
/// the culprits), and is summed up once the replay's report is known.
/// The same answer as [`build_report`] then [`attach_what_if`].
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
    enum Handoff {
        Start(i64, Vec<crate::model::Segment>),
        Replay(i64, Box<crate::timeline::ReplayReport>),
    }
    let simulable = sim::trace::simulable_devices(snap);
    let configs = what_if_configs(snap);
    let (r, what_if) = std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel::<Handoff>();
        let configs = &configs;
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
                        out.push(runs.map(|r| sim::report_of(input, r)).map_err(|e| {
                            format!("device {d}: the what-if model could not run: {e}")
                        }));
                    }
                }
            }
            out
        });
        let (tx_start, tx_replay) = (tx.clone(), tx);
        let simulable = &simulable;
        // The receiver lives until every handoff is sent.
        let r = build_report_with(
            st,
            snap,
            loaded,
            device,
            at,
            move |d, replayer| {
                if simulable.contains(&d) {
                    let _ = tx_start.send(Handoff::Start(d, replayer.state_at(None).segments));
                }
            },
            move |replay| {
                if simulable.contains(&replay.device) {
                    let _ = tx_replay.send(Handoff::Replay(
                        replay.device,
                        Box::new(replay.report.clone()),
                    ));
                }
            },
        );
        let w = worker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (r, w)
    });
    let mut r = r?;
    attach_what_if_runs(st, &mut r, what_if);
    Ok(r)
}

/// Adds the answers of [`what_if_runs`] to the report.
pub fn attach_what_if_runs(st: &Style, r: &mut Report, results: Vec<Result<SimReport, String>>) {
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
        let Some(answer) = crate::render::simulate::expandable_answer(st, w) else {
            continue;
        };
        let prefix = format!("Device {}: out of memory", w.device);
        let at = r
            .verdict
            .iter()
            .rposition(|v| v.starts_with(&prefix))
            .map_or(r.verdict.len(), |i| i + 1);
        r.verdict
            .insert(at, format!("What-if model, device {}: {answer}", w.device));
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
pub fn rank_input(path: &str, g: &Global) -> anyhow::Result<RankInput> {
    let l = input::load(path, &g.load)?;
    let fmt = super::stats::describe_format(&g.style, &l);
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

/// The outlier rule of `stats` on several files, in words.
pub fn outlier_rule() -> String {
    format!(
        "reserved at the end more than {:.0}% above the median, or fragmentation at the end more than {:.2} above it; needs 3 ranks or more",
        (super::stats::OUTLIER_RESERVED_FACTOR - 1.0) * 100.0,
        super::stats::OUTLIER_FRAGMENTATION_MARGIN
    )
}

/// Reads every rank in parallel (rayon) and builds the per-rank report;
/// the result does not depend on the number of threads. Also returns the
/// number of unreadable files (each error already printed).
pub fn ranks_report(files: &[String], g: &Global) -> (RanksReport, usize) {
    let labels = ranks::labels(files);
    let read: Vec<anyhow::Result<RankInput>> = files.par_iter().map(|f| rank_input(f, g)).collect();
    let mut stats: Vec<(String, FileStats, Metrics)> = Vec::new();
    let mut left_out = Vec::new();
    let mut failed = 0;
    for ((path, label), r) in files.iter().zip(&labels).zip(read) {
        match r {
            Ok(RankInput::Snapshot(fs, m)) => stats.push((label.clone(), *fs, *m)),
            Ok(RankInput::LeftOut(why)) => left_out.push(format!("{label}: {why}")),
            Err(e) => {
                failed += 1;
                print_error(&e, g.verbose);
                left_out.push(format!(
                    "{label}: unreadable ({})",
                    format!("{e:#}").replace(path.as_str(), label)
                ));
            }
        }
    }
    let refs: Vec<&FileStats> = stats.iter().map(|x| &x.1).collect();
    let flags = super::stats::outliers(&refs);
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
        ranks::build(&g.style, rows, left_out, outlier_rule()),
        failed,
    )
}

type Render<'a> = Box<dyn Fn() -> anyhow::Result<String> + 'a>;
/// Markdown, given the link to the summary image.
type RenderMd<'a> = Box<dyn Fn(Option<&str>) -> String + 'a>;

/// The three renderings of one report; each is made only when asked for.
struct Forms<'a> {
    html: Render<'a>,
    svg: Render<'a>,
    md: RenderMd<'a>,
}

fn write_forms(a: &Args, kinds: &[Out], inputs: &[String], f: &Forms) -> anyhow::Result<()> {
    let svg_link = a.svg_link.clone().or_else(|| {
        a.output
            .iter()
            .zip(kinds)
            .find(|(_, k)| **k == Out::Svg)
            .map(|(o, _)| report::base_name(o))
    });
    for (path, kind) in a.output.iter().zip(kinds) {
        let bytes = match kind {
            Out::Html => (f.html)()?.into_bytes(),
            Out::Svg => (f.svg)()?.into_bytes(),
            Out::Markdown => (f.md)(svg_link.as_deref()).into_bytes(),
        };
        crate::cli::output::write_atomic(path, &bytes, inputs)?;
    }
    if a.markdown {
        print(&(f.md)(svg_link.as_deref()))?;
    }
    Ok(())
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    if a.output.is_empty() && !a.markdown {
        anyhow::bail!(
            "say where the report goes: -o report.html, -o report.svg, -o report.md or --markdown"
        );
    }
    let kinds = a
        .output
        .iter()
        .map(|o| kind_of(o))
        .collect::<anyhow::Result<Vec<Out>>>()?;
    let files = expand_inputs(&a.files)?;
    if files.len() > 1 {
        if a.device.is_some() || a.at.is_some() {
            anyhow::bail!(
                "--device and --at choose what one file's report shows; a per-rank report of {} files takes neither",
                files.len()
            );
        }
        let (r, failed) = ranks_report(&files, g);
        write_forms(
            &a,
            &kinds,
            &files,
            &Forms {
                html: Box::new(|| Ok(crate::render::ranks::html(&g.style, &r)?)),
                svg: Box::new(|| Ok(crate::render::ranks::summary(&r)?.body)),
                md: Box::new(|l| crate::render::ranks::markdown(&g.style, &r, l)),
            },
        )?;
        return Ok(if failed > 0 {
            Exit::SomeInputsFailed
        } else {
            Exit::Ok
        });
    }
    let file = &files[0];
    let l = input::load(file, &g.load)?;
    let fmt = super::stats::describe_format(&g.style, &l);
    let inputs = std::slice::from_ref(file);
    match &l.content {
        Content::Snapshot(snap) => {
            let r = build_report_what_if(&g.style, snap, &l, a.device, a.at, a.no_what_if)?;
            write_forms(
                &a,
                &kinds,
                inputs,
                &Forms {
                    html: Box::new(|| Ok(html::html(&g.style, &r)?)),
                    svg: Box::new(|| Ok(charts::summary(&r)?.body)),
                    md: Box::new(|link| markdown::markdown(&g.style, &r, link)),
                },
            )?;
        }
        Content::Profiler(t) => {
            let r = crate::analysis::report::trace::build(&g.style, t, file, &fmt, a.device, a.at)
                .map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
            write_forms(
                &a,
                &kinds,
                inputs,
                &Forms {
                    html: Box::new(|| Ok(html::trace_html(&g.style, &r)?)),
                    svg: Box::new(|| Ok(charts::trace_summary(&r)?.body)),
                    md: Box::new(|link| markdown::trace_markdown(&g.style, &r, link)),
                },
            )?;
        }
        Content::MemoryTimeline(t) => {
            if a.device.is_some() || a.at.is_some() {
                anyhow::bail!(
                    "{file}: --device and --at: a memory-timeline export holds one device's tensor bytes by category and no allocator state to show at a moment"
                );
            }
            let r = crate::analysis::report::trace::build_categories(&g.style, t, file, &fmt);
            write_forms(
                &a,
                &kinds,
                inputs,
                &Forms {
                    html: Box::new(|| Ok(html::categories_html(&g.style, &r)?)),
                    svg: Box::new(|| Ok(charts::categories_summary(&r)?.body)),
                    md: Box::new(|link| markdown::categories_markdown(&g.style, &r, link)),
                },
            )?;
        }
    }
    Ok(Exit::Ok)
}
