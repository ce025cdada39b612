//! Text and CSV of `fragscope timeline`: the key-moment table with the
//! replay report, the full series as CSV, and the state at one moment.

use super::stats::{NA, opt_bytes};
use super::stats::{STAT_HEADER, stat_cells};
use super::table::{align_numbers, new_table};
use crate::analysis::findings::{ReplayedDevice, Timeline, TraceTimeline};
use crate::analysis::report::trace::heading as device_name;
use crate::analysis::stats::StateStats;
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::model::memtimeline::{Category, CategorySample, MemoryTimeline};
use crate::model::profiler::{MISSING_FIGURES, ProfilerTrace, TraceDevice};
use crate::timeline::{DeviceReplay, KeyMoment, Moment, MomentState, Origin, ReplayReport, Sample};
use serde::Serialize;

/// Seconds since `t0`, or `-` without a time.
pub fn fmt_time(t: Option<i64>, t0: Option<i64>) -> String {
    match (t, t0) {
        (Some(t), Some(t0)) => format!("+{:.3} s", (t - t0) as f64 / 1e6),
        _ => "-".into(),
    }
}

pub fn first_time(samples: &[Sample]) -> Option<i64> {
    samples.iter().find_map(|s| s.time_us)
}

pub fn report_lines(r: &ReplayReport) -> String {
    let mut out = String::new();
    if r.anomalies.is_empty() {
        out.push_str("anomalies: none\n");
    } else {
        out.push_str("anomalies (each counted once per event; the replay went on):\n");
        for a in &r.anomalies {
            out.push_str(&format!(
                "  {:?}: {} event(s), e.g. {}\n",
                a.kind, a.count, a.example
            ));
        }
    }
    if let Some(d) = &r.final_state_diff {
        out.push_str(&format!("final state differs from the recording: {d}\n"));
    }
    if !r.inferences.is_empty() {
        out.push_str("inferred rather than read:\n");
        for i in &r.inferences {
            out.push_str(&format!("  - {i}\n"));
        }
    }
    out
}

/// The columns of a key-moment table that every input has (a figure it
/// cannot give is "n/a").
const MOMENT_COLUMNS: [&str; 11] = [
    "moment",
    "event",
    "time",
    "allocated",
    "reserved",
    "free internal",
    "free external",
    "pending free",
    "largest gap",
    "gaps",
    "fragmentation",
];

/// The [`MOMENT_COLUMNS`] cells of one key moment, times after `t0`.
fn moment_cells(st: &Style, k: &KeyMoment, t0: Option<i64>) -> Vec<String> {
    let s = &k.sample;
    let mut row = vec![
        k.label.clone(),
        k.at.map_or("-".into(), |a| a.to_string()),
        fmt_time(s.time_us, t0),
        st.bytes(s.allocated),
        opt_bytes(st, s.reserved),
    ];
    let na = || NA.to_string();
    match &s.layout {
        Some(l) => row.extend([
            st.bytes(l.internal_free),
            opt_bytes(st, s.external_free),
            st.bytes(l.pending_free),
            st.bytes(l.largest_free_gap),
            l.free_gaps.to_string(),
            fmt_pct(l.fragmentation),
        ]),
        None => row.extend([na(), opt_bytes(st, s.external_free), na(), na(), na(), na()]),
    }
    row
}

/// `device D: E events, C replayed cleanly; …`: how a device's replay went.
pub fn replay_line(device: i64, rep: &ReplayReport) -> String {
    format!(
        "device {device}: {} events, {} replayed cleanly; {}",
        rep.events,
        rep.clean_events,
        if rep.final_state_matches {
            "the replay reproduces the recorded final state exactly"
        } else {
            "the replay does NOT reproduce the recorded final state"
        }
    )
}

/// The OOMs a device's table of key moments shows (the text form).
const OOM_MOMENTS_LISTED: usize = 20;

/// One device: headline, key-moment table, anomalies and inferences;
/// `more_ooms` OOMs left out of the table are counted under it.
pub fn device_text(
    st: &Style,
    r: &DeviceReplay,
    moments: &[KeyMoment],
    more_ooms: usize,
) -> String {
    let rep = &r.report;
    let mut out = if rep.events == 0 {
        format!(
            "device {}: no trace events: only the recorded state is known, so there is no peak and no out-of-memory event to show; {}\n",
            r.device,
            crate::timeline::RECORD_A_TRACE
        )
    } else {
        format!("{}\n", replay_line(r.device, rep))
    };
    let t0 = r.samples.iter().find_map(|s| s.time_us);
    let mut t = new_table(
        st,
        &[&MOMENT_COLUMNS[..], &["max small req", "max large req"]].concat(),
    );
    for k in moments {
        let l = k.sample.lay();
        let mut row = moment_cells(st, k, t0);
        row.push(st.bytes(l.largest_small_request));
        row.push(st.bytes(l.largest_large_request));
        t.add_row(row);
    }
    align_numbers(&mut t, 1);
    out.push_str(&t.to_string());
    out.push('\n');
    if more_ooms > 0 {
        out.push_str(&format!(
            "{more_ooms} more out-of-memory events (`--json` lists every one, `fragscope oom` explains each)\n"
        ));
    }
    let peak_allocated = moments
        .iter()
        .find(|k| k.label == "peak allocated")
        .map(|k| k.sample.allocated);
    out.push_str(&incl_pending_line(st, rep, peak_allocated));
    out.push('\n');
    out.push_str(&report_lines(rep));
    out
}

/// Where the peak of allocated bytes including pending frees
/// ([`ReplayReport::peak_allocated_incl_pending`]) was reached.
pub fn incl_pending_when(rep: &ReplayReport) -> String {
    match (rep.events, rep.peak_allocated_incl_pending_at) {
        (0, _) => "in the recorded state".into(),
        (_, None) => "at the start".into(),
        (_, Some(i)) => format!("after event {i}"),
    }
}

/// One line: allocated bytes counted as PyTorch's memory_viz counts them
/// (a block until its `free_completed`), beside fragscope's own peak
/// allocated (until `free_requested`) when one is shown.
pub fn incl_pending_line(st: &Style, rep: &ReplayReport, peak_allocated: Option<u64>) -> String {
    let what = if rep.events == 0 { "" } else { "peak " };
    let mut s = format!(
        "allocated incl. pending frees (a block counted until free_completed, as memory_viz does): {what}{} {}",
        st.bytes(rep.peak_allocated_incl_pending),
        incl_pending_when(rep)
    );
    if let Some(a) = peak_allocated.filter(|_| rep.events > 0) {
        s.push_str(&format!(
            "; allocated (until free_requested) peaks at {}",
            st.bytes(a)
        ));
    }
    s
}

pub const CSV_HEADER: &str = "device,event,time_us,allocated,active,reserved,internal_free,external_free,pending_free,largest_free_gap,free_gaps,fragmentation,largest_small_request,largest_large_request\n";

/// The series of several devices as CSV (`event` empty for the start).
pub fn csv<'a>(series: impl IntoIterator<Item = (i64, &'a [Sample])>) -> String {
    let mut out = Vec::new();
    write_csv(
        &mut out,
        series.into_iter().map(|(d, s)| (d, s.iter().copied())),
    )
    .expect("writing to memory");
    String::from_utf8(out).expect("CSV is text")
}

/// The series as CSV, written row by row as the samples come (one device
/// after the other), never held as text. The device is its number (a
/// snapshot's) or label (a trace's `cuda:0`); figures a sample lacks are
/// empty.
pub fn write_csv<D, S>(
    w: &mut dyn std::io::Write,
    series: impl IntoIterator<Item = (D, S)>,
) -> std::io::Result<()>
where
    D: std::fmt::Display,
    S: IntoIterator<Item = Sample>,
{
    w.write_all(CSV_HEADER.as_bytes())?;
    for (d, samples) in series {
        for s in samples {
            let (e, t) = (Opt(s.event.map(u64::from)), s.time_us);
            let t = t.map_or(String::new(), |t| t.to_string());
            let (r, x) = (Opt(s.reserved), Opt(s.external_free));
            match &s.layout {
                Some(l) => writeln!(
                    w,
                    "{d},{e},{t},{},{},{r},{},{x},{},{},{},{:.6},{},{}",
                    s.allocated,
                    s.active,
                    l.internal_free,
                    l.pending_free,
                    l.largest_free_gap,
                    l.free_gaps,
                    l.fragmentation,
                    l.largest_small_request,
                    l.largest_large_request
                )?,
                None => writeln!(w, "{d},{e},{t},{},{},{r},,{x},,,,,,", s.allocated, s.active)?,
            }
        }
    }
    Ok(())
}

/// An optional figure in a CSV cell: empty when absent.
struct Opt(Option<u64>);

impl std::fmt::Display for Opt {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => Ok(()),
        }
    }
}

/// `--at`: the stats and segment map of one moment.
pub fn moment_text(
    style: &Style,
    file: &str,
    label: &str,
    st: &MomentState,
    t0: Option<i64>,
    map: &str,
    report: &ReplayReport,
) -> String {
    let traced = report.events > 0;
    let mut out = if traced {
        format!(
            "{file}, device {}, {label}: {}\n",
            st.device,
            match st.at {
                None => "before the first trace event".to_string(),
                Some(i) => format!("after event {i} ({})", fmt_time(st.time_us, t0)),
            }
        )
    } else {
        // Every moment names the one state there is.
        format!(
            "{file}, device {}, {label}: the recorded state (no trace was recorded, so it is the only state known)\n",
            st.device
        )
    };
    let stats = StateStats::of(&st.segments);
    let mut t = new_table(style, &STAT_HEADER);
    t.add_row(stat_cells(style, &stats));
    align_numbers(&mut t, 0);
    out.push_str(&t.to_string());
    out.push('\n');
    let older = st
        .origins
        .values()
        .filter(|o| **o == Origin::OlderThanTrace)
        .count();
    if traced {
        out.push_str(&format!(
            "{} live block(s), {older} of them allocated before the trace began\n",
            st.origins.len()
        ));
    } else {
        out.push_str(&format!("{} live block(s)\n", st.origins.len()));
    }
    if let Some(r) = st.failed_request {
        out.push_str(&format!(
            "this event is an out-of-memory: {} (rounded) could not be placed\n",
            style.bytes(r)
        ));
    }
    if !report.final_state_matches || !report.anomalies.is_empty() {
        out.push_str(&report_lines(report));
    }
    out.push('\n');
    out.push_str(map);
    out
}

/// `fragscope timeline` on a profiler trace: the key-moment table of each
/// device (its moments given), with the snapshot timeline's columns.
pub fn trace_timeline_text(
    st: &Style,
    file: &str,
    format: &str,
    tr: &ProfilerTrace,
    devices: &[(&TraceDevice, Vec<KeyMoment>)],
) -> String {
    use crate::analysis::report::trace::NO_LAYOUT;
    let mut out = format!("{file} ({format})\n");
    out.push_str(&format!(
        "profiler trace: {} trace events, {} [memory] events, {} operators\n",
        tr.trace_events, tr.memory_events, tr.op_events
    ));
    if let Some(n) = tr.no_gpu_memory() {
        out.push_str(&format!("{n}\n"));
    }
    for (d, moments) in devices {
        let s = &d.summary;
        out.push_str(&format!(
            "\n{}: {} memory events, {} allocations, {} frees\n",
            device_name(st, d),
            s.events,
            s.allocations,
            s.frees
        ));
        let mut t = new_table(st, &[&MOMENT_COLUMNS[..], &["operator"]].concat());
        for k in moments {
            let mut row = moment_cells(st, k, s.first_time_us);
            row.push(k.op.clone().unwrap_or_else(|| "-".into()));
            t.add_row(row);
        }
        align_numbers(&mut t, 1);
        out.push_str(&format!("{t}\n"));
        if s.has_totals && !d.key.is_cpu() {
            if s.reserved_growth.is_empty() {
                out.push_str("reserved memory did not grow during the trace\n");
            } else {
                out.push_str(&format!(
                    "reserved memory grew {} times; {} of them ({}) while the cache already held at least the allocation's bytes free\n",
                    s.reserved_growth.len(),
                    s.growth_with_free_cache,
                    st.bytes(s.growth_with_free_cache_bytes)
                ));
            }
        }
    }
    out.push_str(&format!(
        "\nfree external = reserved − allocated. n/a: {NO_LAYOUT}.\n"
    ));
    for a in &tr.anomalies {
        out.push_str(&format!(
            "warning: {} × {} (e.g. {})\n",
            a.count, a.kind, a.example
        ));
    }
    out
}

/// `fragscope timeline --json` on a trace (schema `fragscope.timeline/1`,
/// `kind: profiler_trace`), written to `w` as it is serialized.
pub fn write_trace_timeline_json(
    w: &mut dyn std::io::Write,
    file: &str,
    tr: &ProfilerTrace,
    devices: &[TraceTimeline],
) -> std::io::Result<()> {
    use crate::core::serial::Seq;
    #[derive(Serialize)]
    struct Doc<'a, D> {
        schema: &'static str,
        file: &'a str,
        kind: &'static str,
        devices: D,
        not_measurable: Vec<Missing>,
    }
    #[derive(Serialize)]
    struct Device<'a, K> {
        device: &'a str,
        summary: &'a crate::model::profiler::DeviceSummary,
        key_moments: K,
        downsampled: bool,
        samples: &'a [Sample],
    }
    /// A key moment as the trace's document has always written it: `op`
    /// present, `null` where no operator ran.
    #[derive(Serialize)]
    struct Moment<'a> {
        label: &'a str,
        at: Option<usize>,
        sample: &'a Sample,
        op: &'a Option<String>,
    }
    #[derive(Serialize)]
    struct Missing {
        figure: &'static str,
        why: &'static str,
    }
    let devices = devices.iter().map(|d| Device {
        device: &tr.devices[d.device].label,
        summary: &tr.devices[d.device].summary,
        key_moments: Seq::new(d.key_moments.iter().map(|k| Moment {
            label: &k.label,
            at: k.at,
            sample: &k.sample,
            op: &k.op,
        })),
        downsampled: d.downsampled,
        samples: &d.samples,
    });
    let doc = Doc {
        schema: TIMELINE_SCHEMA,
        file,
        kind: "profiler_trace",
        devices: Seq::new(devices),
        not_measurable: (MISSING_FIGURES.iter())
            .map(|&(figure, why)| Missing { figure, why })
            .collect(),
    };
    let mut w = super::encode::Chunked::new(w);
    super::pretty::to_writer(&mut w, &doc).map_err(std::io::Error::from)?;
    std::io::Write::write_all(&mut w, b"\n")?;
    w.finish()
}

/// `fragscope timeline` on a memory-timeline export: live bytes by
/// category at the start, the peak and the end.
pub fn categories_timeline_text(
    st: &Style,
    file: &str,
    format: &str,
    tl: &MemoryTimeline,
) -> String {
    use crate::analysis::report::trace::NO_ALLOCATOR;
    let mut out = format!("{file} ({format})\n");
    out.push_str(&format!(
        "memory timeline: {} rows, {} time steps\n",
        tl.rows,
        tl.samples.len()
    ));
    let start = tl.first_time_us();
    let mut h = vec!["moment", "time", "total"];
    h.extend(Category::ALL.iter().map(|c| c.as_str()));
    let mut t = new_table(st, &h);
    let mut row = |label: &str, s: &crate::model::memtimeline::CategorySample| {
        let mut r = vec![
            label.to_string(),
            match s.time_us {
                None => "before profiling".into(),
                t => super::timeline::fmt_time(t, start),
            },
            st.bytes(s.total()),
        ];
        r.extend(Category::ALL.iter().map(|&c| st.bytes(s.get(c))));
        t.add_row(r);
    };
    if let Some(first) = tl.samples.first() {
        row("start", &first);
    }
    if let Some(p) = tl.peak {
        row("peak", &tl.samples.at(p.sample));
    }
    if let Some(end) = tl.end() {
        row("end", &end);
    }
    align_numbers(&mut t, 1);
    out.push_str(&format!("{t}\n"));
    out.push_str(&format!("note: {NO_ALLOCATOR}.\n"));
    out
}

/// A memory-timeline export's samples as CSV, a row at a time.
pub fn write_categories_csv(
    w: &mut dyn std::io::Write,
    samples: impl Iterator<Item = CategorySample>,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = super::encode::Chunked::new(w);
    let mut head = String::from("time_us,total");
    for c in Category::ALL {
        head.push(',');
        head.push_str(&c.as_str().replace(' ', "_"));
    }
    head.push('\n');
    o.write_all(head.as_bytes())?;
    for s in samples {
        if let Some(t) = s.time_us {
            write!(o, "{t}")?;
        }
        write!(o, ",{}", s.total())?;
        for c in Category::ALL {
            write!(o, ",{}", s.get(c))?;
        }
        o.write_all(b"\n")?;
    }
    o.finish()
}

/// A memory-timeline export's samples as JSON (schema
/// [`TIMELINE_SCHEMA`], kind `memory_timeline`), serialised into the writer
/// as it goes.
pub fn write_categories_json(
    w: &mut dyn std::io::Write,
    file: &str,
    tl: &MemoryTimeline,
    samples: impl ExactSizeIterator<Item = CategorySample>,
    downsampled: bool,
) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct Doc<'a, S> {
        schema: &'static str,
        file: &'a str,
        kind: &'static str,
        categories: Vec<&'static str>,
        peak: &'a Option<crate::model::memtimeline::CategoryPeak>,
        downsampled: bool,
        samples: S,
        not_measurable: &'static str,
    }
    let doc = Doc {
        schema: TIMELINE_SCHEMA,
        file,
        kind: "memory_timeline",
        categories: Category::ALL.iter().map(|c| c.as_str()).collect(),
        peak: &tl.peak,
        downsampled,
        samples: crate::core::serial::Seq::new(samples),
        not_measurable: crate::analysis::report::trace::NO_ALLOCATOR,
    };
    let mut w = super::encode::Chunked::new(w);
    super::pretty::to_writer(&mut w, &doc).map_err(std::io::Error::from)?;
    std::io::Write::write_all(&mut w, b"\n")?;
    w.finish()
}

/// The form of `fragscope timeline`'s output.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Text,
    Csv,
    Json,
}

/// `fragscope timeline`, whatever the input: the key-moment tables, the
/// series as CSV or JSON, or the state at one moment with its segment map
/// (`map_rows` segments at most). A snapshot's series is written row by
/// row from its compact form: never held as text, nor expanded.
pub fn write_timeline(
    w: &mut dyn std::io::Write,
    st: &Style,
    (file, format): (&str, &str),
    t: &Timeline,
    form: Form,
    map_rows: usize,
) -> std::io::Result<()> {
    match t {
        Timeline::Moment {
            moment,
            state,
            t0,
            report,
        } => {
            let map = super::segmap::segment_map(st, &state.segments, map_rows);
            let label = moment_label(*moment);
            w.write_all(moment_text(st, file, &label, state, *t0, &map, report).as_bytes())
        }
        Timeline::Replays(replays) => write_replays(w, st, (file, format), replays, form),
        Timeline::Trace { trace, devices } => {
            let device = |d: &TraceTimeline| &trace.devices[d.device];
            let out = match form {
                Form::Csv => {
                    let s = devices
                        .iter()
                        .map(|d| (&device(d).label, d.samples.iter().copied()));
                    return write_csv(w, s);
                }
                Form::Json => return write_trace_timeline_json(w, file, trace, devices),
                Form::Text => {
                    let s: Vec<_> = (devices.iter())
                        .map(|d| (device(d), d.key_moments.clone()))
                        .collect();
                    trace_timeline_text(st, file, format, trace, &s)
                }
            };
            w.write_all(out.as_bytes())
        }
        Timeline::Categories { timeline, points } => {
            let samples: Box<dyn ExactSizeIterator<Item = CategorySample>> = match points {
                Some(p) => Box::new(p.iter().copied()),
                None => Box::new(timeline.samples.iter()),
            };
            match form {
                Form::Csv => write_categories_csv(w, samples),
                Form::Json => {
                    let down = samples.len() < timeline.samples.len();
                    write_categories_json(w, file, timeline, samples, down)
                }
                Form::Text => {
                    let out = categories_timeline_text(st, file, format, timeline);
                    w.write_all(out.as_bytes())
                }
            }
        }
    }
}

/// How `--at` names its moment in the heading.
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

pub const TIMELINE_SCHEMA: &str = "fragscope.timeline/1";

/// A snapshot's replayed devices: text, CSV or JSON.
fn write_replays(
    w: &mut dyn std::io::Write,
    st: &Style,
    (file, format): (&str, &str),
    replays: &[ReplayedDevice],
    form: Form,
) -> std::io::Result<()> {
    match form {
        Form::Csv => write_csv(
            w,
            replays.iter().map(|r| {
                let s: Box<dyn Iterator<Item = Sample>> = match &r.points {
                    Some(p) => Box::new(p.iter().copied()),
                    None => Box::new(r.replay.samples.iter()),
                };
                (r.replay.device, s)
            }),
        ),
        Form::Json => super::timeline_json::write_replays_json(w, file, replays),
        Form::Text => {
            let mut out = format!("{file} ({format})\n");
            if replays.is_empty() {
                out.push_str("no segments and no trace events\n");
            }
            for r in replays {
                out.push('\n');
                // A program that catches its OOMs and goes on may record one
                // at most steps: the table shows the first few.
                let (moments, more) = match &r.key_moments {
                    Some(k) => (
                        k.iter_first(&r.replay.samples, OOM_MOMENTS_LISTED)
                            .collect(),
                        k.ooms().saturating_sub(OOM_MOMENTS_LISTED),
                    ),
                    None => (Vec::new(), 0),
                };
                out.push_str(&device_text(st, &r.replay, &moments, more));
            }
            w.write_all(out.as_bytes())
        }
    }
}
