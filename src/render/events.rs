//! The outputs of `fragscope events`: an aligned text table, CSV and a JSON
//! object (schema `fragscope.events/1`), written row by row to a writer.
//!
//! Unlike the other renderers these write instead of returning a `String`:
//! a listing has one line per trace event, and a trace of millions of events
//! must not be held as text. The text table's column widths come from a
//! first pass over the rows ([`Widths::see`]), so it stays aligned without
//! being buffered.

use super::table::{Tone, paint};
use super::timeline::fmt_time;
use crate::analysis::events::{DeviceEvents, Events, Listed, Row, Selection};
use crate::core::style::Style;
use serde_json::json;
use std::io::{self, Write};

pub const EVENTS_SCHEMA: &str = "fragscope.events/1";

const HEADER: [&str; 9] = [
    "event",
    "time",
    "action",
    "address",
    "size",
    "stream",
    "allocated",
    "reserved",
    "call site",
];

/// Column widths of the text table, from the rows it will hold.
#[derive(Debug, Clone)]
pub struct Widths {
    t0: Option<i64>,
    max_event: usize,
    /// Largest |time − t0| in µs, and whether any is negative.
    max_dt: i64,
    negative_dt: bool,
    action: usize,
    max_address: u64,
    /// Largest of size, allocated, reserved.
    max_bytes: u64,
    stream: usize,
}

impl Widths {
    /// Times print as seconds since `t0` (the trace's first time), as in
    /// `timeline`.
    pub fn new(t0: Option<i64>) -> Widths {
        Widths {
            t0,
            max_event: 0,
            max_dt: 0,
            negative_dt: false,
            action: 0,
            max_address: 0,
            max_bytes: 0,
            stream: 0,
        }
    }

    /// Takes a row into account.
    pub fn see(&mut self, r: &Row) {
        self.max_event = self.max_event.max(r.event.unwrap_or(0));
        if let (Some(t), Some(t0)) = (r.time_us, self.t0) {
            let dt = t.saturating_sub(t0);
            self.negative_dt |= dt < 0;
            self.max_dt = self.max_dt.max(dt.saturating_abs());
        }
        self.action = self.action.max(r.action.chars().count());
        self.max_address = self.max_address.max(r.address.unwrap_or(0));
        self.max_bytes = self
            .max_bytes
            .max(r.size)
            .max(r.allocated)
            .max(r.reserved.unwrap_or(0));
        if let Some(s) = r.stream {
            self.stream = self.stream.max(s.to_string().len());
        }
    }

    /// The widths, once every row has been seen.
    pub fn columns(&self, st: &Style) -> Columns {
        Columns {
            t0: self.t0,
            c: self.cols(st),
        }
    }

    fn cols(&self, st: &Style) -> [usize; 8] {
        let bytes = if self.max_bytes < 1024 {
            st.bytes(self.max_bytes).len()
        } else {
            // `1023.99 MiB` is the widest binary figure below 1 PiB.
            st.bytes(self.max_bytes).len().max(11)
        };
        let time = fmt_time(Some(self.max_dt), Some(0)).len() + usize::from(self.negative_dt);
        [
            self.max_event.to_string().len(),
            time,
            self.action,
            format!("{:#x}", self.max_address).len(),
            bytes,
            self.stream.max(1),
            bytes,
            bytes,
        ]
        .into_iter()
        .zip(HEADER)
        .map(|(w, h)| w.max(h.len()))
        .collect::<Vec<_>>()
        .try_into()
        .expect("eight columns")
    }
}

/// The text table's layout: column widths and the time origin.
#[derive(Debug, Clone, Copy)]
pub struct Columns {
    t0: Option<i64>,
    c: [usize; 8],
}

/// The header line of the text table.
pub fn text_header(w: &mut dyn Write, cols: &Columns) -> io::Result<()> {
    let action = format!("{:<w$}", HEADER[2], w = cols.c[2]);
    let [h0, h1, _, h3, h4, h5, h6, h7, h8] = HEADER;
    text_line(w, cols, [h0, h1, &action, h3, h4, h5, h6, h7], h8, "")
}

/// One row of the text table. An `oom` row ends with the free device
/// memory PyTorch recorded.
pub fn text_row(st: &Style, w: &mut dyn Write, cols: &Columns, r: &Row) -> io::Result<()> {
    let dash = || "-".to_string();
    let action = format!("{:<w$}", r.action, w = cols.c[2]);
    let action = if r.is_oom() {
        paint(st, &action, Tone::Bad)
    } else {
        action
    };
    let oom_note = match (r.is_oom(), r.device_free) {
        (true, Some(f)) => format!("  [out of memory; device free: {}]", st.bytes(f)),
        (true, None) => "  [out of memory]".to_string(),
        _ => String::new(),
    };
    let cells = [
        r.event.map_or_else(dash, |e| e.to_string()),
        fmt_time(r.time_us, cols.t0),
        action,
        r.address.map_or_else(dash, |a| format!("{a:#x}")),
        st.bytes(r.size),
        r.stream.map_or_else(dash, |s| s.to_string()),
        st.bytes(r.allocated),
        r.reserved.map_or_else(dash, |b| st.bytes(b)),
    ];
    let cells = cells.each_ref().map(String::as_str);
    text_line(w, cols, cells, r.call_site, &oom_note)
}

/// One line of the text table: eight columns right-aligned to their widths
/// but for the action (2), which comes padded (a painted one holds escape
/// codes that take no room), then the call site and `tail`.
fn text_line(
    w: &mut dyn Write,
    cols: &Columns,
    cells: [&str; 8],
    site: &str,
    tail: &str,
) -> io::Result<()> {
    let c = cols.c;
    writeln!(
        w,
        "{:>w0$}  {:>w1$}  {}  {:>w3$}  {:>w4$}  {:>w5$}  {:>w6$}  {:>w7$}  {}{tail}",
        cells[0],
        cells[1],
        cells[2],
        cells[3],
        cells[4],
        cells[5],
        cells[6],
        cells[7],
        site,
        w0 = c[0],
        w1 = c[1],
        w3 = c[3],
        w4 = c[4],
        w5 = c[5],
        w6 = c[6],
        w7 = c[7],
    )
}

pub const CSV_HEADER: &str =
    "device,event,time_us,action,address,size,stream,allocated,reserved,device_free,call_site\n";

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// "00" to "99", for two digits a division.
const PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends the decimal digits of `v` (an `i64`'s magnitude below its sign).
fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut d = [0u8; 20];
    let mut i = d.len();
    while v >= 100 {
        let p = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        d[i..i + 2].copy_from_slice(&PAIRS[p..p + 2]);
    }
    if v >= 10 {
        let p = v as usize * 2;
        i -= 2;
        d[i..i + 2].copy_from_slice(&PAIRS[p..p + 2]);
    } else {
        i -= 1;
        d[i] = b'0' + v as u8;
    }
    buf.extend_from_slice(&d[i..]);
}

fn push_i64(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    push_u64(buf, v.unsigned_abs());
}

/// A field and the comma after it; nothing for what the event lacks.
fn push_opt<T: Copy>(buf: &mut Vec<u8>, v: Option<T>, f: fn(&mut Vec<u8>, T)) {
    if let Some(x) = v {
        f(buf, x);
    }
    buf.push(b',');
}

/// One CSV row (exact integers; empty for what the event lacks), appended
/// to `buf`. Written by hand rather than through `format_args!`: a listing
/// has a row per trace event, and the formatting machinery was most of its
/// cost.
pub fn csv_row(buf: &mut Vec<u8>, device: &str, r: &Row) {
    buf.extend_from_slice(csv_field(device).as_bytes());
    buf.push(b',');
    push_opt(buf, r.event.map(|x| x as u64), push_u64);
    push_opt(buf, r.time_us, push_i64);
    buf.extend_from_slice(csv_field(r.action).as_bytes());
    buf.push(b',');
    push_opt(buf, r.address, push_u64);
    push_opt(buf, Some(r.size), push_u64);
    push_opt(buf, r.stream, push_i64);
    push_opt(buf, Some(r.allocated), push_u64);
    push_opt(buf, r.reserved, push_u64);
    push_opt(buf, r.device_free, push_u64);
    buf.extend_from_slice(csv_field(r.call_site).as_bytes());
    buf.push(b'\n');
}

/// The JSON object is written in pieces: [`json_start`], then per device
/// [`json_device_start`], its rows with [`json_row`] and
/// [`json_device_end`], then [`json_end`]. One event a line.
///
/// `head` holds the top-level fields besides `schema` and `devices`.
pub fn json_start(w: &mut dyn Write, head: &serde_json::Value) -> io::Result<()> {
    writeln!(
        w,
        "{{\"schema\":\"{EVENTS_SCHEMA}\"{}\"devices\":[",
        fields(head)?
    )
}

/// An object's fields without its braces, each followed by a comma (`,`
/// alone for an empty object).
fn fields(v: &serde_json::Value) -> io::Result<String> {
    let s = serde_json::to_string(v)?;
    let inner = s
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .ok_or_else(|| io::Error::other("the head of a JSON object must be an object"))?;
    Ok(if inner.is_empty() {
        ",".into()
    } else {
        format!(",{inner},")
    })
}

/// `head` is the device object's fields before `events`; `first` says
/// whether this is the first device.
pub fn json_device_start(
    w: &mut dyn Write,
    head: &serde_json::Value,
    first: bool,
) -> io::Result<()> {
    let f = fields(head)?;
    writeln!(
        w,
        "{}{{{}\"events\":[",
        if first { "" } else { "," },
        &f[1..]
    )
}

pub fn json_row(w: &mut dyn Write, r: &Row, first: bool) -> io::Result<()> {
    if !first {
        w.write_all(b",\n")?;
    }
    serde_json::to_writer(&mut *w, r)?;
    Ok(())
}

/// Closes a device's `events` with the number listed.
pub fn json_device_end(w: &mut dyn Write, listed: usize) -> io::Result<()> {
    let nl = if listed > 0 { "\n" } else { "" };
    writeln!(w, "{nl}],\"listed\":{listed}}}")
}

pub fn json_end(w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "]}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(event: usize, action: &'a str, site: &'a str) -> Row<'a> {
        Row {
            event: Some(event),
            time_us: Some(1_000_000 + event as i64 * 250_000),
            action,
            address: Some(0x7f00_0000_0000 + event as u64 * 512),
            size: 512,
            stream: Some(0),
            allocated: 512 * event as u64,
            reserved: Some(2 << 20),
            device_free: None,
            call_site: site,
        }
    }

    #[test]
    fn text_rows_are_aligned_under_the_header() {
        let rows = [
            row(0, "segment_alloc", "(no stack recorded)"),
            row(9, "alloc", "model.py:10 (forward)"),
            Row {
                event: Some(12),
                action: "oom",
                address: None,
                size: 3 << 30,
                device_free: Some(91 << 20),
                ..row(12, "oom", "train.py:3 (step)")
            },
        ];
        let mut w = Widths::new(Some(1_000_000));
        rows.iter().for_each(|r| w.see(r));
        let c = w.columns(&Style::default());
        let mut out = Vec::new();
        text_header(&mut out, &c).unwrap();
        for r in &rows {
            text_row(&Style::default(), &mut out, &c, r).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines[0].find("call site").unwrap();
        for l in &lines[1..] {
            assert_eq!(l[..at].chars().count(), at, "{text}");
            assert!(l[..at].ends_with("  "), "{text}");
        }
        assert!(lines[3].ends_with("train.py:3 (step)  [out of memory; device free: 91.00 MiB]"));
        assert!(lines[3].contains(" - "), "an oom has no address: {text}");
        assert!(lines[2].contains("+2.250 s"), "{text}");
    }

    #[test]
    fn integers_print_as_to_string_does() {
        for v in [
            0,
            1,
            -1,
            9,
            10,
            -10,
            99,
            100,
            101,
            12_345,
            1_250_000,
            i64::MAX,
            i64::MIN,
        ] {
            let mut b = Vec::new();
            push_i64(&mut b, v);
            assert_eq!(String::from_utf8(b).unwrap(), v.to_string());
        }
        let mut b = Vec::new();
        push_u64(&mut b, u64::MAX);
        assert_eq!(String::from_utf8(b).unwrap(), u64::MAX.to_string());
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let mut out = Vec::new();
        csv_row(&mut out, "0", &row(1, "alloc", "f(a, b) (native)"));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "0,1,1250000,alloc,139637976728064,512,0,512,2097152,,\"f(a, b) (native)\"\n"
        );
    }

    #[test]
    fn the_json_pieces_make_one_object() {
        let mut out = Vec::new();
        json_start(&mut out, &serde_json::json!({"file": "a \"b\".pickle"})).unwrap();
        for (k, n) in [(0, 2usize), (1, 0)] {
            json_device_start(&mut out, &serde_json::json!({"device": k}), k == 0).unwrap();
            for i in 0..n {
                json_row(&mut out, &row(i, "alloc", "x"), i == 0).unwrap();
            }
            json_device_end(&mut out, n).unwrap();
        }
        json_end(&mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["schema"], EVENTS_SCHEMA);
        assert_eq!(v["file"], "a \"b\".pickle");
        assert_eq!(v["devices"][0]["events"][1]["event"], 1);
        assert_eq!(v["devices"][0]["listed"], 2);
        assert_eq!(v["devices"][1]["events"].as_array().unwrap().len(), 0);
        // One event a line.
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().filter(|l| l.contains("\"action\"")).count(), 2);
    }
}

/// The form of `fragscope events`'s output.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Text,
    Csv,
    Json,
}

/// What every device's listing shares: the input, its description, what
/// was asked and the form.
#[derive(Clone, Copy)]
pub struct Listing<'a> {
    pub file: &'a str,
    /// The input's form, compression and size.
    pub format: &'a str,
    /// The first event asked for (`--from`).
    pub from: usize,
    pub grep: Option<&'a str>,
    pub form: Form,
}

/// `fragscope events`, whatever the input: the heading, then each
/// device's rows as they are read, then the end.
pub fn write_listing(
    w: &mut dyn Write,
    st: &Style,
    l: Listing,
    ev: &Events,
    sel: &Selection,
) -> io::Result<()> {
    let (kind, legend) = match ev {
        Events::Snapshot { .. } => (
            "snapshot",
            "allocated: requested bytes of live blocks after the event; reserved: bytes of the device's segments after it (the replayed figures of `fragscope timeline`)",
        ),
        Events::Trace { .. } => (
            "profiler_trace",
            "allocated: Total Allocated after the event (block bytes); reserved: Total Reserved (`-` where the trace records none); a profiler trace records no stream",
        ),
    };
    match l.form {
        Form::Text => writeln!(w, "{} ({})\n{legend}", l.file, l.format)?,
        Form::Csv => w.write_all(CSV_HEADER.as_bytes())?,
        Form::Json => json_start(w, &json!({"file": l.file, "kind": kind, "grep": l.grep}))?,
    }
    let mut first = true;
    ev.each_device(sel, |d| {
        write_device(w, st, l, d, first)?;
        first = false;
        Ok(())
    })?;
    if l.form == Form::Json {
        json_end(w)?;
    }
    Ok(())
}

/// One device's heading (text) and rows in the chosen form: the text table
/// and how many were listed, CSV rows, or the JSON device object (then one
/// event a line).
fn write_device(
    w: &mut dyn Write,
    st: &Style,
    l: Listing,
    d: &DeviceEvents,
    first: bool,
) -> io::Result<()> {
    let (from, to, n) = d.range;
    match l.form {
        Form::Text => {
            match &d.listed {
                Listed::Snapshot { device, report } => {
                    writeln!(w, "\n{}", super::timeline::replay_line(*device, report))?;
                    if !report.final_state_matches || !report.anomalies.is_empty() {
                        w.write_all(super::timeline::report_lines(report).as_bytes())?;
                    }
                }
                Listed::Trace(t) => writeln!(
                    w,
                    "\n{}{}: {n} memory events, {} out-of-memory record(s)",
                    t.label,
                    t.name.as_ref().map_or(String::new(), |x| format!(" ({x})")),
                    t.ooms.len()
                )?,
            }
            text_device(st, w, l, d)
        }
        Form::Csv => {
            let label = d.label();
            let mut buf = Vec::with_capacity(1 << 16);
            d.for_each(&mut |row| {
                csv_row(&mut buf, &label, row);
                if buf.len() >= 1 << 16 {
                    w.write_all(&buf)?;
                    buf.clear();
                }
                Ok(())
            })?;
            w.write_all(&buf)
        }
        Form::Json => {
            let head = match &d.listed {
                Listed::Snapshot { device, report } => json!({
                    "device": device,
                    "trace_events": n,
                    "from": from,
                    "to": to,
                    "report": report,
                }),
                Listed::Trace(t) => json!({
                    "device": t.label,
                    "trace_events": n,
                    "from": from,
                    "to": to,
                }),
            };
            json_device_start(w, &head, first)?;
            let mut first_row = true;
            let listed = d.for_each(&mut |row| {
                json_row(w, row, first_row)?;
                first_row = false;
                Ok(())
            })?;
            json_device_end(w, listed)
        }
    }
}

/// One device's text: the table (widths from a first pass over the rows),
/// then how many were listed.
fn text_device(st: &Style, w: &mut dyn Write, l: Listing, d: &DeviceEvents) -> io::Result<()> {
    let mut widths = Widths::new(d.t0);
    let listed = d.for_each(&mut |r| {
        widths.see(r);
        Ok(())
    })?;
    if listed > 0 {
        let cols = widths.columns(st);
        text_header(w, &cols)?;
        d.for_each(&mut |r| text_row(st, w, &cols, r))?;
    }
    writeln!(w, "{}", range_line(l.from, d.range, listed, l.grep))
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
