//! `fragscope timeline FILE`

use super::common::{Exit, Global, print};
use crate::core::style::Style;
use crate::input;
use crate::input::profiler::TraceDevice;
use crate::model::Snapshot;
use crate::render::timeline as rt;
use crate::timeline::downsample::{Order, downsample_in};
use crate::timeline::trace::{trace_key_moments, trace_series};
use crate::timeline::{self, DeviceReplay, Moment, downsample::downsample_series};
use serde::Serialize;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, JSON, gzip/zstd, memory_viz HTML, `-` for
    /// stdin), profiler trace or memory-timeline export.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Only this device (default: every device with segments or a trace;
    /// with --at, the device with the longest trace).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// Print the full series as CSV, one row per event.
    #[arg(long, conflicts_with_all = ["json", "at"])]
    pub csv: bool,
    /// Print a versioned JSON object (schema fragscope.timeline/1): replay
    /// report, key moments and the full series.
    #[arg(long, conflicts_with = "at")]
    pub json: bool,
    /// With --csv/--json: at most N points per device; each bucket keeps its
    /// minimum and maximum, so peaks and dips survive.
    #[arg(long, value_name = "N")]
    pub max_points: Option<usize>,
    /// Print the stats and segment map at one moment: start, end, peak,
    /// peak-reserved, max-frag, min-gap, oom, oom:N, an event index, or
    /// t=MICROSECONDS (epoch µs, as time_us).
    #[arg(long, value_name = "MOMENT")]
    pub at: Option<Moment>,
    /// Most segments drawn in the segment map (--at).
    #[arg(long, default_value_t = 40, value_name = "N")]
    pub map_rows: usize,
}

pub const TIMELINE_SCHEMA: &str = "fragscope.timeline/1";

#[derive(Serialize)]
struct JsonDevice<'a> {
    device: i64,
    report: &'a timeline::ReplayReport,
    key_moments: Vec<timeline::KeyMoment>,
    /// True when `samples` was reduced with --max-points.
    downsampled: bool,
    samples: Samples<'a>,
}

/// A device's samples in the JSON: the downsampled points, or every sample
/// read from the compact series as it is written (never expanded whole).
enum Samples<'a> {
    Points(Vec<timeline::Sample>),
    Series(&'a timeline::Series),
}

impl Serialize for Samples<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            Samples::Points(v) => v.serialize(ser),
            Samples::Series(s) => crate::core::serial::Seq::new(s.iter()).serialize(ser),
        }
    }
}

#[derive(Serialize)]
struct JsonTimeline<'a, D: Serialize> {
    schema: &'static str,
    file: &'a str,
    devices: D,
}

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

fn moment_label(m: Moment) -> String {
    match m {
        Moment::Start => "start".into(),
        Moment::End => "end".into(),
        Moment::Event(i) => format!("event {i}"),
        Moment::TimeUs(t) => format!("t={t}"),
        Moment::PeakAllocated => "peak allocated".into(),
        Moment::PeakReserved => "peak reserved".into(),
        Moment::MaxFragmentation => "max fragmentation".into(),
        Moment::MinLargestGap => "smallest largest free gap under pressure".into(),
        Moment::Oom(k) => format!("oom #{}", k + 1),
    }
}

/// A profiler trace: its key moments and series, the snapshot columns it
/// has; `--at` has no segment layout to show.
fn run_trace(
    st: &Style,
    a: &Args,
    fmt: &str,
    tr: &crate::input::profiler::ProfilerTrace,
) -> anyhow::Result<Exit> {
    if a.at.is_some() {
        anyhow::bail!(
            "{}: --at: not measurable for a profiler trace: the state at a moment is a segment layout, which a trace does not record; `fragscope culprits --at MOMENT {}` shows the live bytes by operator there",
            a.file,
            a.file
        );
    }
    let devs = crate::analysis::report::trace::select(tr, a.device)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.file))?;
    let series: Vec<_> = devs.iter().map(|d| trace_series(d)).collect();
    let points = |s: &crate::timeline::Series| match a.max_points {
        Some(n) => downsample_in(&s.to_vec(), n, Order::LowThenHigh),
        None => s.to_vec(),
    };
    let moments =
        |(d, s): (&&TraceDevice, &crate::timeline::Series)| trace_key_moments(d, &tr.names, s);
    if a.csv {
        let s = devs.iter().zip(&series).map(|(d, s)| (&d.label, points(s)));
        let mut out = Vec::new();
        rt::write_csv(&mut out, s)?;
        print(std::str::from_utf8(&out)?)?;
    } else if a.json {
        let s: Vec<_> = devs
            .iter()
            .zip(&series)
            .map(|x| rt::TraceDeviceJson {
                device: x.0,
                samples: points(x.1),
                downsampled: a.max_points.is_some_and(|n| x.1.len() > n.max(2)),
                key_moments: moments(x),
            })
            .collect();
        print(&rt::trace_timeline_json(&a.file, &s))?;
    } else {
        let s: Vec<_> = devs
            .iter()
            .zip(&series)
            .map(|x| (*x.0, moments(x)))
            .collect();
        print(&rt::trace_timeline_text(st, &a.file, fmt, tr, &s))?;
    }
    Ok(Exit::Ok)
}

/// A memory-timeline export: live bytes by category over time.
fn run_categories(
    st: &Style,
    a: &Args,
    fmt: &str,
    tl: &crate::input::profiler::MemoryTimeline,
) -> anyhow::Result<Exit> {
    if a.at.is_some() || a.device.is_some() {
        anyhow::bail!(
            "{}: --at and --device: a memory-timeline export holds one device's tensor bytes by category, with no allocator state to show at a moment",
            a.file
        );
    }
    let samples = match a.max_points {
        Some(n) => crate::timeline::downsample::downsample_categories(&tl.samples, n),
        None => tl.samples.clone(),
    };
    if a.csv {
        print(&crate::render::timeline::categories_timeline_csv(&samples))?;
    } else if a.json {
        let down = samples.len() < tl.samples.len();
        print(&crate::render::timeline::categories_timeline_json(
            &a.file, tl, &samples, down,
        ))?;
    } else {
        print(&crate::render::timeline::categories_timeline_text(
            st, &a.file, fmt, tl,
        ))?;
    }
    Ok(Exit::Ok)
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let mut loaded = input::load(&a.file, &g.load)?;
    let fmt = crate::pipeline::describe_format(&g.style, &loaded);
    let snap = match std::mem::replace(
        &mut loaded.content,
        input::Content::Snapshot(Snapshot::default()),
    ) {
        input::Content::Snapshot(s) => s,
        input::Content::Profiler(t) => return run_trace(&g.style, &a, &fmt, &t),
        input::Content::MemoryTimeline(t) => return run_categories(&g.style, &a, &fmt, &t),
    };
    if let Some(m) = a.at {
        let Some(d) = a.device.or_else(|| device_for(&snap, m)) else {
            anyhow::bail!("{}: no segments and no trace events", a.file);
        };
        devices(&snap, Some(d)).map_err(|e| anyhow::anyhow!("{}: {e}", a.file))?;
        let r = timeline::replay_device(&snap, d);
        let at = r
            .resolve(&snap, m)
            .map_err(|e| anyhow::anyhow!("{}: --at: {e}", a.file))?;
        let st = timeline::state_at(&snap, d, at);
        let map = crate::render::segmap::segment_map(&g.style, &st.segments, a.map_rows);
        print(&rt::moment_text(
            &g.style,
            &a.file,
            &moment_label(m),
            &st,
            r.samples.iter().find_map(|s| s.time_us),
            &map,
            &r.report,
        ))?;
        return Ok(Exit::Ok);
    }
    let devs = devices(&snap, a.device).map_err(|e| anyhow::anyhow!("{}: {e}", a.file))?;
    let replays: Vec<DeviceReplay> = devs
        .iter()
        .map(|d| timeline::replay_device(&snap, *d))
        .collect();
    if a.csv {
        // Written row by row: the full series of a long trace is never
        // held as text, nor expanded into samples.
        crate::cli::output::write_atomic_with("-", &[], |w| match a.max_points {
            Some(n) => rt::write_csv(
                w,
                replays
                    .iter()
                    .map(|r| (r.device, downsample_series(&r.samples, n))),
            ),
            None => rt::write_csv(w, replays.iter().map(|r| (r.device, r.samples.iter()))),
        })?;
    } else if a.json {
        let devices = replays.iter().map(|r| JsonDevice {
            device: r.device,
            report: &r.report,
            key_moments: r.key_moments(&snap),
            downsampled: a.max_points.is_some_and(|n| r.samples.len() > n.max(2)),
            samples: match a.max_points {
                Some(n) => Samples::Points(downsample_series(&r.samples, n)),
                None => Samples::Series(&r.samples),
            },
        });
        let doc = JsonTimeline {
            schema: TIMELINE_SCHEMA,
            file: &a.file,
            devices: crate::core::serial::Seq::new(devices),
        };
        crate::cli::output::write_atomic_with("-", &[], |w| {
            let mut w = crate::render::encode::Chunked::new(w);
            serde_json::to_writer_pretty(&mut w, &doc).map_err(std::io::Error::from)?;
            std::io::Write::write_all(&mut w, b"\n")?;
            w.finish()
        })?;
    } else {
        let mut out = format!(
            "{} ({})\n",
            a.file,
            crate::pipeline::describe_format(&g.style, &loaded)
        );
        if replays.is_empty() {
            out.push_str("no segments and no trace events\n");
        }
        for r in &replays {
            out.push('\n');
            out.push_str(&rt::device_text(&g.style, r, &r.key_moments(&snap)));
        }
        print(&out)?;
    }
    Ok(Exit::Ok)
}
