//! `fragscope events FILE`: one line per trace event with the running
//! figures after it, written as it goes.

use super::common::{Exit, Global, load_input};
use crate::analysis::events::{Row, Selection, SnapshotEvents, TraceEvents};
use crate::core::style::Style;
use crate::input::Content;
use crate::input::profiler::ProfilerTrace;
use crate::model::Snapshot;
use crate::render::events as re;
use serde_json::json;
use std::io::{self, Write};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot with a trace (pickle, JSON, gzip/zstd, memory_viz HTML, `-`
    /// for stdin) or profiler trace.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Only this device (default: every device with trace events).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// First event listed (trace index, from 0; inclusive).
    #[arg(long, value_name = "E", default_value_t = 0)]
    pub from: usize,
    /// Stop before this event (exclusive; past the end lists to the end).
    #[arg(long, value_name = "E")]
    pub to: Option<usize>,
    /// Only events whose call site, or a frame of whose stack
    /// (file:line:function, as PyTorch's viewer shows them), holds SITE
    /// (case-sensitive substring). For a profiler trace: the operator, the
    /// top-level operator or the Python function.
    #[arg(long, value_name = "SITE")]
    pub grep: Option<String>,
    /// Print CSV, one row per event (exact byte counts).
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Print a versioned JSON object (schema fragscope.events/1), one event a
    /// line.
    #[arg(long)]
    pub json: bool,
    /// Write to this file instead of stdout (replaced atomically).
    #[arg(short, long, value_name = "PATH", default_value = "-")]
    pub output: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Csv,
    Json,
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    if let Some(to) = a.to
        && a.from >= to
    {
        anyhow::bail!(
            "--from {} --to {to}: nothing to list; --from must be below --to (events from..to, to exclusive)",
            a.from
        );
    }
    let format = if a.csv {
        Format::Csv
    } else if a.json {
        Format::Json
    } else {
        Format::Text
    };
    let bars = indicatif::MultiProgress::new();
    let loaded = load_input(&a.file, g, &bars)?;
    let fmt = crate::pipeline::describe_format(&g.style, &loaded);
    let sel = Selection {
        from: a.from,
        to: a.to,
        grep: a.grep.clone(),
    };
    let inputs = std::slice::from_ref(&a.file);
    let listing = Listing {
        st: &g.style,
        a: &a,
        fmt: &fmt,
        format,
    };
    match &loaded.content {
        Content::Snapshot(s) => {
            let devs = snapshot_devices(&a, s)?;
            crate::cli::output::write_atomic_with(&a.output, inputs, |w| {
                write_snapshot(w, listing, s, &devs, &sel)
            })?;
        }
        Content::Profiler(t) => {
            let devs: Vec<usize> = crate::analysis::report::trace::select(t, a.device)
                .map_err(|e| anyhow::anyhow!("{}: {e}", a.file))?
                .into_iter()
                .map(|d| {
                    t.devices
                        .iter()
                        .position(|x| std::ptr::eq(x, d))
                        .expect("a device of the trace")
                })
                .collect();
            check_from(
                &a,
                devs.iter()
                    .map(|&i| (t.devices[i].label.clone(), t.devices[i].events.len())),
            )?;
            crate::cli::output::write_atomic_with(&a.output, inputs, |w| {
                write_trace(w, listing, t, &devs, &sel)
            })?;
        }
        Content::MemoryTimeline(_) => anyhow::bail!(
            "{}: a memory-timeline export (export_memory_timeline) holds tensor bytes by category, not allocator events; `fragscope timeline {}` shows them over time",
            a.file,
            a.file
        ),
    }
    Ok(Exit::Ok)
}

/// What every device's listing shares: the style, the arguments, the
/// input's description and the form.
#[derive(Clone, Copy)]
struct Listing<'a> {
    st: &'a Style,
    a: &'a Args,
    fmt: &'a str,
    format: Format,
}

/// The devices listed: those with trace events, or the one `--device` names.
fn snapshot_devices(a: &Args, s: &Snapshot) -> anyhow::Result<Vec<i64>> {
    let with_events: Vec<i64> = (s.traces().iter().enumerate())
        .filter(|(_, t)| !t.is_empty())
        .map(|(d, _)| d as i64)
        .collect();
    if with_events.is_empty() {
        anyhow::bail!(
            "{}: no trace events to list: {}, so it holds only the allocator's state when it was taken (its segments); record the events with torch.cuda.memory._record_memory_history() before the run",
            a.file,
            if s.device_traces.is_none() {
                "the file has no device_traces"
            } else {
                "its device_traces are empty"
            }
        );
    }
    let devs = match a.device {
        None => with_events,
        Some(d) if with_events.contains(&d) => vec![d],
        Some(d) => anyhow::bail!(
            "{}: device {d} has no trace events (devices with some: {})",
            a.file,
            with_events
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    check_from(
        a,
        devs.iter().map(|&d| (d.to_string(), s.trace_of(d).len())),
    )?;
    Ok(devs)
}

/// `--from` past the end of every listed device's trace lists nothing:
/// refused, naming the longest trace.
fn check_from(a: &Args, devs: impl Iterator<Item = (String, usize)>) -> anyhow::Result<()> {
    let longest = devs.max_by_key(|(_, n)| *n);
    match longest {
        Some((d, n)) if a.from >= n => anyhow::bail!(
            "{}: --from {}: past the end of device {d}'s trace ({n} events, numbered from 0)",
            a.file,
            a.from
        ),
        _ => Ok(()),
    }
}

/// What the text output says about the listing of one device.
fn range_line(
    asked: usize,
    (from, to, n): (usize, usize, usize),
    listed: usize,
    grep: Option<&str>,
) -> String {
    let mut s = format!("{listed} of {n} events listed");
    if asked >= n {
        s.push_str(&format!(" (the trace ends before event {asked})"));
    } else if (from, to) != (0, n) {
        s.push_str(&format!(" (events {from} to {})", to.saturating_sub(1)));
    }
    if let Some(g) = grep {
        s.push_str(&format!(", call site or a frame holding {g:?}"));
    }
    s
}

/// A listing's `for_each`: hands each row to the callback, returns the
/// number listed.
type ForEach<'a> = dyn Fn(&mut dyn FnMut(&Row) -> io::Result<()>) -> io::Result<usize> + 'a;

/// One device's text: the table (widths from a first pass over the rows),
/// then how many were listed.
fn text_device(
    st: &Style,
    w: &mut dyn Write,
    t0: Option<i64>,
    asked: usize,
    (from, to, n): (usize, usize, usize),
    grep: Option<&str>,
    each: &ForEach,
) -> io::Result<()> {
    let mut widths = re::Widths::new(t0);
    let listed = each(&mut |r| {
        widths.see(r);
        Ok(())
    })?;
    if listed > 0 {
        let cols = widths.columns(st);
        re::text_header(w, &cols)?;
        each(&mut |r| re::text_row(st, w, &cols, r))?;
    }
    writeln!(w, "{}", range_line(asked, (from, to, n), listed, grep))
}

/// What comes before the rows: the file and what its figures mean (text),
/// the CSV header, or the JSON object's opening with the input's kind.
fn head(
    w: &mut dyn Write,
    a: &Args,
    fmt: &str,
    format: Format,
    kind: &str,
    legend: &str,
) -> io::Result<()> {
    match format {
        Format::Text => writeln!(w, "{} ({fmt})\n{legend}", a.file),
        Format::Csv => w.write_all(re::CSV_HEADER.as_bytes()),
        Format::Json => re::json_start(w, &json!({"file": a.file, "kind": kind, "grep": a.grep})),
    }
}

fn write_snapshot(
    w: &mut dyn Write,
    l: Listing,
    s: &Snapshot,
    devs: &[i64],
    sel: &Selection,
) -> io::Result<()> {
    let Listing { a, fmt, format, .. } = l;
    head(
        w,
        a,
        fmt,
        format,
        "snapshot",
        "allocated: requested bytes of live blocks after the event; reserved: bytes of the device's segments after it (the replayed figures of `fragscope timeline`)",
    )?;
    for (k, &d) in devs.iter().enumerate() {
        // One device's replay at a time: its compact series is all that is
        // held besides the model.
        let r = crate::timeline::replay_device(s, d);
        let ev = SnapshotEvents::new(s, &r, sel);
        let (from, to, n) = ev.range();
        if format == Format::Text {
            let rep = &r.report;
            writeln!(w, "\n{}", crate::render::timeline::replay_line(d, rep))?;
            if !rep.final_state_matches || !rep.anomalies.is_empty() {
                w.write_all(crate::render::timeline::report_lines(rep).as_bytes())?;
            }
        }
        let device = Device {
            label: &d.to_string(),
            first: k == 0,
            t0: s.trace_of(d).iter().find_map(|e| e.time_us()),
            range: (from, to, n),
        };
        let json_head = || {
            json!({
                "device": d,
                "trace_events": n,
                "from": from,
                "to": to,
                "report": r.report,
            })
        };
        write_rows(w, l, device, json_head, &|f| ev.for_each(f))?;
    }
    foot(w, format)
}

fn write_trace(
    w: &mut dyn Write,
    l: Listing,
    t: &ProfilerTrace,
    devs: &[usize],
    sel: &Selection,
) -> io::Result<()> {
    let Listing { a, fmt, format, .. } = l;
    head(
        w,
        a,
        fmt,
        format,
        "profiler_trace",
        "allocated: Total Allocated after the event (block bytes); reserved: Total Reserved (`-` where the trace records none); a profiler trace records no stream",
    )?;
    for (k, &i) in devs.iter().enumerate() {
        let d = &t.devices[i];
        let ev = TraceEvents::new(t, d, sel);
        let (from, to, n) = ev.range();
        if format == Format::Text {
            writeln!(
                w,
                "\n{}{}: {n} memory events, {} out-of-memory record(s)",
                d.label,
                d.name.as_ref().map_or(String::new(), |x| format!(" ({x})")),
                d.ooms.len()
            )?;
        }
        let device = Device {
            label: &d.label,
            first: k == 0,
            t0: d
                .events
                .first()
                .map(|e| crate::model::profiler::time_of(e.ts_us)),
            range: (from, to, n),
        };
        let json_head = || {
            json!({
                "device": d.label,
                "trace_events": n,
                "from": from,
                "to": to,
            })
        };
        write_rows(w, l, device, json_head, &|f| ev.for_each(f))?;
    }
    foot(w, format)
}

/// One listed device, as its rows are written.
struct Device<'a> {
    /// The device column of the CSV.
    label: &'a str,
    /// The first device of the JSON array.
    first: bool,
    /// The time origin of the text table.
    t0: Option<i64>,
    /// The events asked for and the trace's length, as `range` gives them.
    range: (usize, usize, usize),
}

/// One device's rows in the chosen form, after the heading the caller
/// wrote: the text table and how many were listed, CSV rows, or the JSON
/// device object (its fields from `json_head`, then one event a line).
fn write_rows(
    w: &mut dyn Write,
    l: Listing,
    d: Device,
    json_head: impl FnOnce() -> serde_json::Value,
    each: &ForEach,
) -> io::Result<()> {
    match l.format {
        Format::Text => text_device(l.st, w, d.t0, l.a.from, d.range, l.a.grep.as_deref(), each),
        Format::Csv => each(&mut |row| re::csv_row(w, d.label, row)).map(|_| ()),
        Format::Json => {
            re::json_device_start(w, &json_head(), d.first)?;
            let mut first = true;
            let listed = each(&mut |row| {
                re::json_row(w, row, first)?;
                first = false;
                Ok(())
            })?;
            re::json_device_end(w, listed)
        }
    }
}

/// What comes after every device: the JSON object's end.
fn foot(w: &mut dyn Write, format: Format) -> io::Result<()> {
    if format == Format::Json {
        re::json_end(w)?;
    }
    Ok(())
}
