//! `fragscope view FILE`: the interactive page, served on the loopback
//! interface (`/` the page, `/api/...` its data), or written as one
//! self-contained file with `-o page.html` (`-o data.json`: the data alone).
//!
//! The figures are the report's: the snapshot is replayed and its report
//! built as `fragscope report` builds it; the page only lays them out. The
//! server answers from the loaded file alone: a request names a device and
//! an event, never a path.

use super::common::{Exit, Global};
use crate::analysis::culprits::{self, GroupBy};
use crate::analysis::report::{self, DeviceReport, Report};
use crate::core::style::Style;
use crate::input::{self, Content};
use crate::model::Snapshot;
use crate::pipeline::{self, AnyReport};
use crate::render::view::{self as rv, Detail, DeviceView, View};
use crate::timeline::checkpoints::{self, Checkpoints};
use crate::timeline::{self, Replayer, Series};
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::sync::mpsc::Receiver;

mod serve;
use serve::{Scratch, serve, snapshot_api, text};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, JSON, gzip/zstd, memory_viz HTML, `-` for
    /// stdin).
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Write one self-contained page (`.html`: script, styles and data
    /// inline, no network) or the page's data (`.json`) instead of serving.
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<String>,
    /// Port to serve on (default: a free one).
    #[arg(long, value_name = "P", default_value_t = 0)]
    pub port: u16,
    /// Address to serve on. The default is 127.0.0.1, reachable from this
    /// machine only; any other address serves the file's data to whoever
    /// can reach it, so it must be named here.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Do not open a browser (none is opened without a display either).
    #[arg(long)]
    pub no_open: bool,
    /// Only this device (default: every device).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// Points of the timeline's overview; finer levels of detail have 8
    /// times as many each, as far as the page's size budget allows.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub max_points: usize,
}

/// Everything the page shows, computed once.
struct Loaded<'a> {
    style: Style,
    report: Report,
    series: HashMap<i64, Series>,
    /// Each device's series cut into buckets, for zoomed windows (served
    /// only: a written page asks for none).
    zooms: HashMap<i64, rv::Zoom>,
    /// Every allocation's interval, for the bands' windows the server
    /// answers (served only: a written page makes each device's as it
    /// writes it, [`device_parts`]).
    lifetimes: HashMap<i64, timeline::Lifetimes<'a>>,
    /// Each device's state checkpoints, served only: a scrub is one of
    /// them and a few thousand events of replay.
    checkpoints: HashMap<i64, Checkpoints<'a>>,
    /// What each device's what-if button shows (see [`what_if`]).
    what_if: HashMap<i64, serde_json::Value>,
    /// Written only: the first device's parts, made on another thread from
    /// the report's own replay of it ([`Early`]), and where they arrive.
    early: Option<(i64, Mutex<Receiver<rv::DeviceParts>>)>,
}

/// Where a written page's first device's parts are made while the report
/// and the page go on: the scope that outlives the writing, and the
/// page's detail (its bands' budget).
#[derive(Clone, Copy)]
struct Early<'s, 'a> {
    scope: &'s std::thread::Scope<'s, 'a>,
    detail: Detail,
}

/// What the OOM panel's what-if button of each device shows. Served, the
/// server runs the model when asked (`/api/whatif`); written, the page
/// carries the table where `report` would run the model (a device with
/// allocations in its trace) and has an OOM to ask about, else it says
/// how to get it. `tables` are those made beside the report ([`table_devices`]).
fn what_if(
    sty: &Style,
    file: &str,
    snap: &Snapshot,
    report: &Report,
    served: bool,
    mut tables: HashMap<i64, Result<String, String>>,
) -> HashMap<i64, serde_json::Value> {
    let simulable = crate::sim::trace::simulable_devices(snap);
    report
        .devices
        .iter()
        .map(|d| {
            let dev = d.device;
            let v = if !simulable.contains(&dev) {
                serde_json::json!({"how": format!(
                    "device {dev} has no allocations in its trace: the what-if model has nothing to replay"
                )})
            } else if served {
                serde_json::json!({"request": format!("/api/whatif?device={dev}")})
            } else if d.ooms.is_empty() {
                serde_json::json!({"how": format!("fragscope simulate {file} --device {dev}")})
            } else {
                let table = tables.remove(&dev);
                match table.unwrap_or_else(|| what_if_table(sty, file, snap, dev)) {
                    Ok(t) => serde_json::json!({"table": t}),
                    Err(e) => serde_json::json!({"how": e}),
                }
            };
            (dev, v)
        })
        .collect()
}

/// The devices whose what-if tables a written page carries, made beside
/// the report from its own replay ([`pipeline::what_if_beside`]): each
/// device (of `device`, when given) with allocations and an OOM in its
/// trace. [`what_if`] shows those of the devices whose OOMs the report
/// diagnoses.
fn table_devices(snap: &Snapshot, device: Option<i64>) -> Vec<i64> {
    crate::sim::trace::simulable_devices(snap)
        .into_iter()
        .filter(|&d| device.is_none_or(|x| x == d))
        .filter(|&d| (snap.trace_of(d).iter()).any(|e| e.action == crate::model::Action::Oom))
        .collect()
}

/// The table `fragscope simulate FILE --device D` prints.
fn what_if_table(sty: &Style, file: &str, snap: &Snapshot, device: i64) -> Result<String, String> {
    super::simulate::default_sweep(snap, device, None)
        .map(|r| crate::render::simulate::render(sty, file, &r))
        .map_err(|e| format!("device {device}: the what-if model could not run: {e}"))
}

fn culprit_options() -> culprits::Options {
    culprits::Options {
        request: None,
        group_by: GroupBy::Site,
        top: 10,
    }
}

/// A device's key moments' states (in their order), its allocations and
/// its call sites' bytes at the peak of allocated bytes: served, each state
/// a checkpoint and a short replay; written, one replay to the last of them
/// (a written page steps through those states only, and the checkpoints
/// would cost up to 256 MiB a device). Made as the device is written.
fn device_parts(
    snap: &Snapshot,
    v: &Loaded,
    d: &DeviceReport,
    bands: rv::bands::Chosen,
) -> rv::DeviceParts {
    if let Some((dev, made)) = &v.early
        && *dev == d.device
    {
        let made = made.lock().unwrap_or_else(|e| e.into_inner());
        return made.recv().expect("the first device's parts");
    }
    match v.checkpoints.get(&d.device) {
        Some(cp) => {
            let states = (d.key_moments.iter())
                .map(|k| cp.state_at(k.at))
                .collect::<Vec<_>>();
            rv::DeviceParts {
                peak_by_site: peak_by_site(snap, &d.key_moments, &states),
                states,
                bands: bands.of_all(&v.lifetimes[&d.device]),
            }
        }
        None => written_parts(snap, &Replayer::new(snap, d.device), &d.key_moments, bands),
    }
}

/// A written page's parts of a device, from one replay of its trace.
fn written_parts(
    snap: &Snapshot,
    replayer: &Replayer,
    key_moments: &[timeline::KeyMoment],
    mut bands: rv::bands::Chosen,
) -> rv::DeviceParts {
    let ats: Vec<Option<usize>> = key_moments.iter().map(|k| k.at).collect();
    // One allocation at a time: the page holds only its bands'.
    let states = replayer.each_lifetime_and_states_at(&ats, |i, l| bands.add(i, &l));
    rv::DeviceParts {
        peak_by_site: peak_by_site(snap, key_moments, &states),
        states,
        bands,
    }
}

/// The call sites' live bytes at the peak of allocated bytes.
fn peak_by_site(
    snap: &Snapshot,
    key_moments: &[timeline::KeyMoment],
    states: &[timeline::MomentState],
) -> HashMap<String, u64> {
    key_moments
        .iter()
        .position(|k| k.label == "peak allocated")
        .map(|i| {
            let a = culprits::analyze(snap, &states[i], &culprit_options());
            report::culprit_sites(snap, &a)
                .into_iter()
                .map(|r| (r.site, r.live_bytes))
                .collect()
        })
        .unwrap_or_default()
}

fn load<'s, 'a>(
    sty: &Style,
    snap: &'a Snapshot,
    l: &input::Loaded,
    device: Option<i64>,
    (name, served): (&str, bool),
    early: Option<Early<'s, 'a>>,
) -> anyhow::Result<Loaded<'a>> {
    let mut series = HashMap::new();
    let mut first = None;
    // The devices of the page, as the report lists them.
    let page_devices = device.map_or_else(|| snap.devices().len(), |_| 1);
    // Served, the checkpoints are one more replay of each device: made on
    // another thread while the report is built.
    // Written, the what-if tables' runs start from the report's replay of
    // each device with an OOM, beside the report.
    let tables_of = if served {
        Vec::new()
    } else {
        table_devices(snap, device)
    };
    let sweep = super::simulate::default_configs(snap);
    let ((report, checkpoints), runs) =
        pipeline::what_if_beside(snap, &tables_of, &sweep, |feed| {
            // Served, the checkpoints are one more replay of each device: made
            // on another thread while the report is built.
            std::thread::scope(|s| {
                let cps = s.spawn(|| {
                    let of: Vec<i64> = (snap.devices().into_iter())
                        .filter(|d| served && device.is_none_or(|x| x == *d))
                        .collect();
                    let budget = checkpoints::budget_for(l.bytes, of.len());
                    // Each device's allocations next, on the same thread.
                    (of.into_iter())
                        .map(|d| {
                            let cp =
                                Checkpoints::with_budget(snap, d, budget, checkpoints::MIN_EVERY);
                            let lives = cp.replayer().kept_lifetimes();
                            (d, (cp, lives))
                        })
                        .collect::<HashMap<_, _>>()
                });
                let report = pipeline::build_report_with(
                    sty,
                    snap,
                    l,
                    device,
                    None,
                    |d, replayer| feed.start(d, replayer),
                    |r| {
                        feed.replayed(&r);
                        let d = r.replay.device;
                        // The first device's parts start now, from the report's
                        // replayer, while the report and the page's start go on.
                        if let Some(e) = early
                            && first.is_none()
                        {
                            let len = r.replay.samples.len();
                            let bands = rv::device_bands(&e.detail, page_devices, len);
                            let (replayer, key_moments) =
                                (r.replayer.clone(), r.key_moments.to_vec());
                            let (tx, rx) = std::sync::mpsc::channel();
                            e.scope.spawn(move || {
                                let _ =
                                    tx.send(written_parts(snap, &replayer, &key_moments, bands));
                            });
                            first = Some((d, Mutex::new(rx)));
                        }
                    },
                    // Each device's series, taken from the report once it is
                    // done with it: the page draws it whole.
                    |d, s| {
                        series.insert(d, s);
                    },
                );
                let cps = cps.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                (report, cps)
            })
        });
    let tables = (runs.into_iter())
        .map(|(d, r)| (d, r.map(|r| crate::render::simulate::render(sty, name, &r))))
        .collect();
    let report = report?;
    debug_assert!(first.is_none() || report.devices.len() == page_devices);
    // The what-if runs are over (their tables made beside the report)
    // before the states and bands of any device but the first are made:
    // the runs' memory is given back before theirs is taken.
    let what_if = what_if(sty, name, snap, &report, served, tables);
    // What the runs and the report's threads freed, given back before the
    // page's states and levels are made.
    crate::core::alloc::give_back_free();
    let (checkpoints, lifetimes) = (checkpoints.into_iter())
        .map(|(d, (cp, lives))| ((d, cp), (d, lives)))
        .unzip();
    Ok(Loaded {
        style: *sty,
        report,
        lifetimes,
        // Served only: a written page carries its levels and asks nothing.
        zooms: (series.iter())
            .filter(|_| served)
            .map(|(d, s)| (*d, rv::Zoom::new(s)))
            .collect(),
        series,
        checkpoints,
        what_if,
        early: first,
    })
}

/// What the page's data is made of ([`rv::Data`] serializes it).
fn view<'v>(snap: &'v Snapshot, v: &'v Loaded, served: bool, detail: Detail) -> View<'v> {
    let devices = v
        .report
        .devices
        .iter()
        .map(|d| DeviceView {
            report: d,
            series: &v.series[&d.device],
            parts: Box::new(move |bands| device_parts(snap, v, d, bands)),
            what_if: v.what_if.get(&d.device).cloned().unwrap_or_default(),
        })
        .collect();
    View {
        snap,
        report: &v.report,
        devices,
        served,
        detail,
        style: v.style,
    }
}

/// How much a page carries: a served page the overview of `max_points`
/// and one finer level (the server answers the rest as the page zooms
/// in), a written one every level and tier its budgets allow.
fn detail(served: bool, max_points: usize) -> Detail {
    Detail {
        overview: max_points,
        max_levels: if served { 2 } else { usize::MAX },
        max_band_tiers: if served { 2 } else { usize::MAX },
        ..Detail::default()
    }
}

/// A page's data: a snapshot's, serialized as it is written, or another
/// input's, made whole (it is small).
enum Doc<'v, 'a> {
    Snapshot(rv::Data<'v, 'a>),
    Value(&'v serde_json::Value),
}

impl Doc<'_, '_> {
    /// The page's title: the file's base name, as the data names it.
    fn title(&self) -> &str {
        match self {
            Doc::Snapshot(d) => &d.0.report.file,
            Doc::Value(v) => v["file"].as_str().unwrap_or("fragscope"),
        }
    }
}

impl serde::Serialize for Doc<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            Doc::Snapshot(d) => d.serialize(ser),
            Doc::Value(v) => v.serialize(ser),
        }
    }
}

/// What one file's page is made of.
enum Page<'a> {
    /// A snapshot: the report, series and states the page and the server's
    /// answers come from.
    Snapshot(&'a Snapshot, Box<Loaded<'a>>),
    /// A trace or memory-timeline export: the data as served (`true`) or
    /// written.
    Series(Box<dyn Fn(bool) -> serde_json::Value + 'a>),
}

/// A file's page: served, or written (`early` given: where the first
/// device's parts are made beside the report).
fn page_of<'s, 'a>(
    g: &'a Global,
    l: &'a input::Loaded,
    file: &'a str,
    device: Option<i64>,
    early: Option<Early<'s, 'a>>,
) -> anyhow::Result<Page<'a>> {
    let served = early.is_none();
    let sty = &g.style;
    Ok(match &l.content {
        Content::Snapshot(snap) => {
            // The file by its base name, as the rest of the page names it.
            let name = crate::analysis::report::base_name(file);
            let v = load(sty, snap, l, device, (&name, served), early)?;
            Page::Snapshot(snap, Box::new(v))
        }
        // A trace or a memory-timeline export: its report is the page.
        _ => match pipeline::report(
            sty,
            l,
            &pipeline::ReportOptions {
                device,
                ..Default::default()
            },
        )? {
            AnyReport::Report(r) => {
                Page::Series(Box::new(move |served| rv::trace_data(sty, &r, served)))
            }
            AnyReport::Categories(r) => {
                if device.is_some() {
                    anyhow::bail!(
                        "{file}: --device: a memory-timeline export holds one device's tensor bytes by category"
                    );
                }
                Page::Series(Box::new(move |served| rv::categories_data(sty, &r, served)))
            }
        },
    })
}

/// The data of `file`'s page as `-o` writes it, handed to `f`.
fn written_doc<R>(
    g: &Global,
    file: &str,
    device: Option<i64>,
    max_points: usize,
    f: impl FnOnce(&Doc) -> anyhow::Result<R>,
) -> anyhow::Result<R> {
    let l = input::load(file, &g.load)?;
    std::thread::scope(|scope| {
        let detail = detail(false, max_points);
        match page_of(g, &l, file, device, Some(Early { scope, detail }))? {
            Page::Snapshot(snap, v) => f(&Doc::Snapshot(rv::Data(&view(snap, &v, false, detail)))),
            Page::Series(doc) => f(&Doc::Value(&doc(false))),
        }
    })
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    if a.max_points < 2 {
        anyhow::bail!("--max-points: at least 2 points");
    }
    let addr = SocketAddr::new(a.bind.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)), a.port);
    if a.output.is_some() && (a.bind.is_some() || a.port != 0) {
        anyhow::bail!("-o writes a page and serves nothing: --bind and --port serve one");
    }
    if a.file != "-" && std::path::Path::new(&a.file).is_dir() {
        return run_ranks(&a, g, addr);
    }
    if let Some(out) = &a.output {
        written_doc(g, &a.file, a.device, a.max_points, |doc| {
            write_page(out, &a.file, doc)
        })?;
        return Ok(Exit::Ok);
    }
    let l = input::load(&a.file, &g.load)?;
    match page_of(g, &l, &a.file, a.device, None)? {
        Page::Snapshot(snap, v) => {
            let doc = Doc::Snapshot(rv::Data(&view(snap, &v, true, detail(true, a.max_points))));
            let name = crate::analysis::report::base_name(&a.file);
            let mut scratch = Scratch::default();
            serve(&a, addr, &doc, |path, q| {
                snapshot_api(snap, &v, &mut scratch, path, q, &name)
            })
        }
        // Nothing to ask for but the page and its data.
        Page::Series(doc) => serve(&a, addr, &Doc::Value(&doc(true)), |_, _| {
            text(404, "not found: this server serves / and /api/data")
        }),
    }
}

/// Writes the page (`.html`) or its data (`.json`), by the extension.
fn write_page(out: &str, file: &str, doc: &Doc) -> anyhow::Result<()> {
    let lower = out.to_ascii_lowercase();
    let json = lower.ends_with(".json");
    if !json && !lower.ends_with(".html") && !lower.ends_with(".htm") {
        anyhow::bail!(
            "{out}: cannot tell what to write from the extension; use .html (the page) or .json (its data)"
        );
    }
    // Written as it is serialized: the page is never held whole.
    super::output::write_atomic_with(out, std::slice::from_ref(&file.to_string()), |w| {
        if json {
            let mut out = crate::render::encode::Chunked::new(w);
            crate::render::pretty::to_writer(&mut out, doc)?;
            out.write_all(b"\n")?;
            out.finish()
        } else {
            rv::write_page(w, doc.title(), doc)
        }
    })?;
    Ok(())
}

/// `fragscope view DIR`: a directory of rank files opens on an overview of
/// the ranks, the per-rank table `fragscope stats DIR` prints (outliers
/// flagged by its rule). Served, a rank's own page is made when a row is
/// opened, by the row's index (`/rank?index=I`), never by a path from the
/// request; written, the page says which command opens a rank.
fn run_ranks(a: &Args, g: &Global, addr: SocketAddr) -> anyhow::Result<Exit> {
    if a.device.is_some() {
        anyhow::bail!(
            "{}: --device: a directory of ranks opens on all of them",
            a.file
        );
    }
    let files = super::common::expand_inputs(std::slice::from_ref(&a.file))?;
    // Unreadable files are named in the report's left-out lines.
    let (r, _) = pipeline::ranks_report(&g.style, &files, &g.load);
    // Each row's file: its label is the path less the directories all
    // files share.
    let labels = crate::analysis::ranks::labels(&files);
    let paths: Vec<&String> = r
        .rows
        .iter()
        .filter_map(|row| {
            labels
                .iter()
                .position(|l| *l == row.file)
                .map(|i| &files[i])
        })
        .collect();
    let name = crate::analysis::report::base_name(&a.file);
    let doc = rv::ranks_data(&g.style, &r, a.output.is_none(), &name);
    if let Some(out) = &a.output {
        write_page(out, &a.file, &Doc::Value(&doc))?;
        return Ok(Exit::Ok);
    }
    serve(a, addr, &Doc::Value(&doc), |path, q| {
        if path != "/rank" {
            return text(
                404,
                "not found: this server serves /, /api/data and /rank?index=I",
            );
        }
        let Some(i) = q
            .get("index")
            .and_then(|x| x.parse::<usize>().ok())
            .filter(|i| *i < paths.len())
        else {
            return text(400, &format!("/rank?index=I, I in 0..{}", paths.len()));
        };
        let page = written_doc(g, paths[i], None, a.max_points, |d| {
            let mut out = Vec::new();
            rv::write_page(&mut out, d.title(), d)?;
            Ok(out)
        });
        match page {
            Ok(p) => (200, "text/html; charset=utf-8", p),
            Err(e) => text(
                500,
                &format!("{e:#}").replace(paths[i].as_str(), &r.rows[i].file),
            ),
        }
    })
}
