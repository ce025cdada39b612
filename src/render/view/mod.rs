//! `fragscope view`: the data the interactive page shows, as JSON, and the
//! page itself (page.html, view.css and the script's files in js/, embedded
//! at build time).
//!
//! Everything here lays out values the other commands already computed:
//! the replayed [`Series`] (downsampled by [`crate::timeline::downsample`]
//! into levels of detail), the [`Report`] (key moments, OOM diagnoses,
//! verdict, culprit rows) and the [`MomentState`]s of the key moments. No
//! figure is worked out again, here or in the page's script; byte counts
//! and percentages carry their text as the terminal prints them
//! ([`Style::bytes`], [`fmt_pct`]), and the script formats the numbers it
//! draws (axes, the cursor) by the same rule.
//!
//! Schema `fragscope.view/1`, described in docs/viewer.md.

pub mod bands;

use crate::analysis::report::{DeviceReport, Report};
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::model::{Block, BlockState, Segment, Snapshot, StackId, TraceEvent};
use crate::timeline::downsample::{downsample, downsample_series};
use crate::timeline::{Lifetime, MomentState, Origin, Sample, Series};
use bands::{Stacks, stream_text};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};

mod inputs;
mod zoom;
pub use inputs::{categories_data, ranks_data, trace_data};
pub use zoom::Zoom;

pub const VIEW_SCHEMA: &str = "fragscope.view/1";

/// A JSON object of `fields`, in their order, each value moved in: `json!`
/// serializes what it is given by reference, so an array built beforehand
/// would be copied whole into the document.
pub(crate) fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

const PAGE: &str = include_str!("page.html");
const CSS: &str = include_str!("view.css");
/// The page's script: one file a part of the page, joined in this order
/// into the body of one function (page.html wraps them): data.js first (the
/// data and the view's state every other file reads), main.js last (it
/// starts the page once everything is declared).
const SCRIPTS: [&str; 10] = [
    include_str!("js/data.js"),
    include_str!("js/format.js"),
    include_str!("js/tooltip.js"),
    include_str!("js/series.js"),
    include_str!("js/timeline.js"),
    include_str!("js/moments.js"),
    include_str!("js/segmap.js"),
    include_str!("js/bands.js"),
    include_str!("js/sites.js"),
    include_str!("js/main.js"),
];

/// How much series the data carries.
#[derive(Debug, Clone, Copy)]
pub struct Detail {
    /// Points of the coarsest level (the overview).
    pub overview: usize,
    /// Each finer level has this many times the points of the one before.
    pub factor: usize,
    /// Bytes of JSON the levels of all devices together may take (about);
    /// a finer level that would pass it is left out.
    pub budget: usize,
    /// At most this many levels (a served page asks for finer detail).
    pub max_levels: usize,
    /// Bytes of JSON the allocation bands of all devices may take (about).
    pub band_budget: usize,
    /// At most this many tiers of bands.
    pub max_band_tiers: usize,
}

impl Default for Detail {
    fn default() -> Detail {
        Detail {
            overview: 2000,
            factor: 8,
            budget: 24 << 20,
            max_levels: usize::MAX,
            band_budget: 6 << 20,
            max_band_tiers: usize::MAX,
        }
    }
}

/// About how many bytes of JSON one point of a level takes (nine numbers).
const BYTES_PER_POINT: usize = 110;

/// One device of the page.
pub struct DeviceView<'a> {
    pub report: &'a DeviceReport,
    /// The full replayed series.
    pub series: &'a Series,
    /// The state at each of `report.key_moments`, in their order.
    pub states: &'a [MomentState],
    /// Live bytes of each call site at the peak of allocated bytes, by the
    /// site's label (from the culprit rows of that moment).
    pub peak_by_site: HashMap<String, u64>,
    /// Every allocation of the replay, for the bands.
    pub lifetimes: &'a [Lifetime],
    /// What the OOM panel's what-if button shows: `table` (the text
    /// `simulate` prints), `request` (the server's path that answers it)
    /// or `how` (why there is none, or the command that prints it).
    pub what_if: Value,
}

/// The whole page's data.
pub struct View<'a> {
    pub snap: &'a Snapshot,
    pub report: &'a Report,
    pub devices: Vec<DeviceView<'a>>,
    /// Served: the page asks the server for states and finer detail.
    pub served: bool,
    pub detail: Detail,
    /// How sizes are written (`--bytes`), as in the terminal.
    pub style: Style,
}

/// The data API's document: every device's levels of detail, key moments
/// with their segment maps, call sites and OOMs, and the verdict.
pub fn data(v: &View) -> Value {
    let sty = &v.style;
    let per_device = v.detail.budget / v.devices.len().max(1);
    let per_device_bands = v.detail.band_budget / v.devices.len().max(1);
    let devices: Vec<Value> = v
        .devices
        .iter()
        .map(|d| device(v, d, (per_device, per_device_bands)))
        .collect();
    object([
        ("schema", json!(VIEW_SCHEMA)),
        ("file", json!(v.report.file)),
        ("format", json!(v.report.format)),
        ("served", json!(v.served)),
        ("exact_bytes", json!(sty.exact_bytes)),
        (
            "verdict",
            json!(crate::render::verdict::lines(sty, v.report)),
        ),
        ("quality", json!(v.report.quality)),
        ("devices", Value::Array(devices)),
    ])
}

fn device(v: &View, d: &DeviceView, (budget, band_budget): (usize, usize)) -> Value {
    let sty = &v.style;
    let verdict = crate::render::verdict::lines(sty, v.report);
    let r = d.report;
    let moments: Vec<Value> = r
        .key_moments
        .iter()
        .zip(d.states)
        .map(|(k, st)| {
            object([
                ("label", json!(k.label)),
                ("event", json!(event_num(k.at))),
                ("when", json!(r.when(k.at, k.sample.time_us))),
                ("figures", figures(sty, &k.sample)),
                ("state", state(sty, v.snap, st)),
            ])
        })
        .collect();
    let ooms: Vec<Value> = r
        .ooms
        .iter()
        .map(|o| {
            let when = crate::analysis::report::moment_text(
                Some(o.mark.event),
                o.mark.time_us,
                r.first_time_us,
            );
            let prefix = format!("Device {}: out of memory at {when}.", r.device);
            json!({
                "event": o.mark.event,
                "request": o.mark.request,
                "request_text": sty.bytes(o.mark.request),
                "largest_gap_text": o.mark.largest_gap.map(|b| sty.bytes(b)),
                "device_free_text": o.mark.device_free.map(|b| sty.bytes(b)),
                "verdict": verdict.iter().filter(|l| l.starts_with(&prefix)).collect::<Vec<_>>(),
                "headline": o.diagnosis.headline,
                "details": o.diagnosis.details,
                "suggestions": o.diagnosis.suggestions.iter().map(|s| json!({
                    "what": s.what, "applies": s.applies, "why": s.why,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let places = site_places(v.snap, d);
    let sites: Vec<Value> = v
        .report
        .culprits_of(r.device)
        .map(|c| {
            let peak = d.peak_by_site.get(&c.site).copied();
            let at: Vec<&String> = places.get(&c.site).map_or(vec![], |p| p.iter().collect());
            json!({
                "site": c.site,
                "live": c.live_bytes,
                "live_text": sty.bytes(c.live_bytes),
                "peak": peak,
                "peak_text": peak.map(|b| sty.bytes(b)),
                "stranded": c.stranded_bytes,
                "stranded_text": sty.bytes(c.stranded_bytes),
                "stack": c.stack,
                "places": at,
            })
        })
        .collect();
    object([
        ("device", json!(r.device)),
        ("events", json!(r.events)),
        ("traced", json!(r.traced())),
        ("first_time_us", json!(r.first_time_us)),
        ("sites_moment", json!(r.moment_label)),
        ("sites_when", json!(r.moment_text())),
        ("levels", Value::Array(levels(d.series, v.detail, budget))),
        (
            "bands",
            bands::tiers(
                v.snap,
                d.series,
                d.lifetimes,
                band_budget,
                v.detail.max_band_tiers,
            ),
        ),
        ("key_moments", Value::Array(moments)),
        ("ooms", Value::Array(ooms)),
        ("sites", Value::Array(sites)),
        ("what_if", d.what_if.clone()),
    ])
}

/// `-1` for the start, else the event index.
fn event_num(at: Option<usize>) -> i64 {
    at.map_or(-1, |a| a as i64)
}

/// A sample's figures with their text.
fn figures(sty: &Style, s: &Sample) -> Value {
    json!({
        "reserved": s.reserved,
        "allocated": s.allocated,
        "free": s.external_free,
        "largest_gap": s.lay().largest_free_gap,
        "gaps": s.lay().free_gaps,
        "fragmentation": s.lay().fragmentation,
        "reserved_text": sty.bytes(s.reserved_bytes()),
        "allocated_text": sty.bytes(s.allocated),
        "free_text": sty.bytes(s.external_bytes()),
        "largest_gap_text": sty.bytes(s.lay().largest_free_gap),
        "fragmentation_text": fmt_pct(s.lay().fragmentation),
    })
}

/// The series at increasing detail: `overview` points, then `factor` times
/// more each level, up to the whole series or until `budget` bytes.
/// Each level is the min/max-per-bucket downsampling `timeline --max-points`
/// prints, so no peak is lowered at any level.
pub fn levels(series: &Series, detail: Detail, budget: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut points = detail.overview.max(2);
    let mut used = 0;
    loop {
        let full = series.len() <= points;
        let n = series.len().min(points);
        if !out.is_empty()
            && (used + n * BYTES_PER_POINT > budget || out.len() >= detail.max_levels)
        {
            break;
        }
        let samples = if full {
            series.to_vec()
        } else {
            downsample_series(series, points)
        };
        used += samples.len() * BYTES_PER_POINT;
        out.push(columns(&samples, full));
        if full {
            break;
        }
        points = points.saturating_mul(detail.factor.max(2));
    }
    out
}

/// The samples of events `from..=to` (`-1` = the start) at about `points`
/// points: what the page asks for when zoomed in.
pub fn window(series: &Series, from: i64, to: i64, points: usize) -> Value {
    let n = series.len() as i64;
    // Sample k holds after event k − 1.
    let lo = (from + 1).clamp(0, n - 1) as usize;
    let hi = (to + 1).clamp(0, n - 1) as usize;
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    let len = hi - lo + 1;
    let points = points.max(2);
    let mut samples = series.iter().skip(lo).take(len);
    if len <= points {
        return columns(&samples.collect::<Vec<_>>(), true);
    }
    // Buckets as one downsampling of the whole window makes them, read a
    // whole number of buckets at a time: a window of millions of events is
    // never held as samples.
    let per = len.div_ceil(points / 2);
    let chunk = per * (65_536 / per).max(1);
    let mut out = Vec::with_capacity(points + 2);
    loop {
        let part: Vec<Sample> = samples.by_ref().take(chunk).collect();
        if part.is_empty() {
            break;
        }
        out.extend(downsample(&part, 2 * part.len().div_ceil(per)));
    }
    let full = false;
    let samples = out;
    columns(&samples, full)
}

/// One level as columns (event, time, figures), `full` when it holds every
/// sample.
fn columns(samples: &[Sample], full: bool) -> Value {
    let col = |f: &dyn Fn(&Sample) -> Value| Value::Array(samples.iter().map(f).collect());
    object([
        ("points", json!(samples.len())),
        ("full", json!(full)),
        ("event", col(&|s| json!(s.event.map_or(-1, i64::from)))),
        ("time_us", col(&|s| json!(s.time_us))),
        ("reserved", col(&|s| json!(s.reserved_bytes()))),
        ("allocated", col(&|s| json!(s.allocated))),
        ("active", col(&|s| json!(s.active))),
        ("free", col(&|s| json!(s.external_bytes()))),
        ("largest_gap", col(&|s| json!(s.lay().largest_free_gap))),
        ("gaps", col(&|s| json!(s.lay().free_gaps))),
        (
            "fragmentation",
            col(&|s| json!((s.lay().fragmentation * 1e4).round() / 1e4)),
        ),
    ])
}

/// The stack a block of a moment is shown with: its own, else the stack
/// of the event that allocated it (as `culprits` reads it); none for a free
/// block.
fn block_stack(b: &Block, origin: Option<Origin>, trace: &[TraceEvent]) -> StackId {
    if b.state == BlockState::Inactive {
        StackId::EMPTY
    } else if b.frames != StackId::EMPTY {
        b.frames
    } else {
        match origin {
            Some(Origin::Event(i)) => trace.get(i as usize).map_or(StackId::EMPTY, |e| e.frames),
            _ => StackId::EMPTY,
        }
    }
}

/// Where a segment's memory comes from, as the pool/stream filter names it.
fn place(s: &Segment) -> String {
    let kind = if s.segment_type == crate::model::SegmentType::Small {
        "small"
    } else {
        "large"
    };
    let pool = match s.pool() {
        (0, 0) => format!("{kind} pool"),
        (a, b) => format!("private pool ({a}, {b}), {kind}"),
    };
    format!("{pool} · stream {}", stream_text(s.stream))
}

/// The places ([`place`]) each call site holds live blocks in at the
/// moment of the call-site table (its key moment's state, else the
/// report's segments).
fn site_places(snap: &Snapshot, d: &DeviceView) -> HashMap<String, BTreeSet<String>> {
    let r = d.report;
    let trace = snap.trace_of(r.device);
    let st = r
        .key_moments
        .iter()
        .zip(d.states)
        .find(|(k, _)| k.at == r.moment_at)
        .map(|(_, st)| st);
    let report_segments = r.replayed().map_or(&[][..], |x| &x.segments);
    let segments = st.map_or(report_segments, |st| &st.segments[..]);
    let mut out: HashMap<String, BTreeSet<String>> = HashMap::new();
    for s in segments {
        for b in &s.blocks {
            let origin = st.and_then(|st| st.origins.get(&b.address).copied());
            if b.state != BlockState::Inactive {
                let id = block_stack(b, origin, trace);
                let site = crate::analysis::frames::call_site(snap, id).label();
                out.entry(site).or_default().insert(place(s));
            }
        }
    }
    out
}

/// The segment map of one moment: segments by address, each with its
/// blocks (offset in the segment, size, requested size, state, stack), the
/// distinct stacks the blocks name (call site and the frames the viewer
/// shows), and where the largest free block is.
pub fn state(sty: &Style, snap: &Snapshot, st: &MomentState) -> Value {
    let trace = snap.trace_of(st.device);
    let mut stacks = Stacks::default();
    let gap = crate::timeline::largest_free_gap_segment(st).map(|(s, b)| (s.address, b.address));
    let mut largest_gap = Value::Null;
    let mut segments = Vec::with_capacity(st.segments.len());
    for (si, s) in st.segments.iter().enumerate() {
        let blocks: Vec<Value> = s
            .blocks
            .iter()
            .enumerate()
            .map(|(bi, b)| {
                let live = b.state != BlockState::Inactive;
                let origin = st.origins.get(&b.address).copied();
                if gap == Some((s.address, b.address)) {
                    largest_gap = json!([si, bi]);
                }
                let code = match b.state {
                    BlockState::ActiveAllocated => 0,
                    BlockState::ActivePendingFree => 1,
                    BlockState::Inactive => 2,
                };
                let born = match origin {
                    Some(Origin::Event(i)) if live => json!(i),
                    _ => Value::Null,
                };
                json!([
                    b.address - s.address,
                    b.size,
                    if live {
                        json!(b.requested_size)
                    } else {
                        Value::Null
                    },
                    code,
                    stacks.of(snap, block_stack(b, origin, trace)),
                    born,
                ])
            })
            .collect();
        segments.push(object([
            ("address", json!(format!("{:#x}", s.address))),
            ("size", json!(s.total_size)),
            // As `stats` prints a stream (a pointer may pass 2^53, which
            // a JavaScript number cannot hold).
            ("stream", json!(stream_text(s.stream))),
            ("pool", json!(format!("{:?}", s.pool()))),
            ("place", json!(place(s))),
            (
                "small",
                json!(s.segment_type == crate::model::SegmentType::Small),
            ),
            ("expandable", json!(s.expandable())),
            ("blocks", Value::Array(blocks)),
        ]));
    }
    object([
        ("device", json!(st.device)),
        ("event", json!(event_num(st.at))),
        ("time_us", json!(st.time_us)),
        ("failed_request", json!(st.failed_request)),
        (
            "failed_request_text",
            json!(st.failed_request.map(|b| sty.bytes(b))),
        ),
        ("largest_gap", largest_gap),
        ("segments", Value::Array(segments)),
        ("stacks", stacks.into_value()),
    ])
}

/// The self-contained page: styles, script and `data` inline.
pub fn page(data: &Value) -> String {
    let mut out = Vec::new();
    write_page(&mut out, data).expect("writing to memory");
    String::from_utf8(out).expect("the page is UTF-8")
}

/// [`page`] written to `w` as it is made, the data serialized straight
/// into it: the page is never held whole.
pub fn write_page(w: &mut dyn std::io::Write, data: &Value) -> std::io::Result<()> {
    let title = data["file"].as_str().unwrap_or("fragscope");
    let page = PAGE
        .replacen("{{TITLE}}", &html_escape(title), 1)
        .replacen("{{STYLE}}", CSS, 1)
        .replacen("{{SCRIPT}}", &SCRIPTS.join("\n"), 1);
    let Some((head, tail)) = page.split_once("{{DATA}}") else {
        return w.write_all(page.as_bytes());
    };
    w.write_all(head.as_bytes())?;
    // `<` can only stand inside a JSON string, where `\u003c` means the
    // same: no `</script>` or `<!--` can then end the data's element.
    serde_json::to_writer(NoLessThan(&mut *w), data)?;
    w.write_all(tail.as_bytes())
}

/// Writes `<` as `\u003c`, everything else as it comes.
struct NoLessThan<'w>(&'w mut dyn std::io::Write);

impl std::io::Write for NoLessThan<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for (i, part) in buf.split(|&b| b == b'<').enumerate() {
            if i > 0 {
                self.0.write_all(b"\\u003c")?;
            }
            self.0.write_all(part)?;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
