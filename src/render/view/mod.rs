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
//! Schema `fragscope.view/2`, described in docs/viewer.md.

pub mod bands;

use crate::analysis::report::{DeviceReport, Report};
use crate::core::serial::Seq;
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::model::{BlockState, Snapshot, StackId};
use crate::timeline::downsample::{Downsampler, Order, downsample_series_levels};
use crate::timeline::{KeyMoment, MomentState, Sample, Series};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};
use state::{Place, block_stack};
use std::collections::{BTreeSet, HashMap};
use std::sync::mpsc::Receiver;

mod inputs;
mod state;
mod zoom;
pub use inputs::{categories_data, ranks_data, trace_data};
pub use state::{KeptStacks, PageStacks, StackTexts, StateJson};
pub use zoom::Zoom;

pub const VIEW_SCHEMA: &str = "fragscope.view/2";

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
    /// Its key moments' states, its bands and its call sites' bytes at the
    /// peak, made as the device is written and dropped after: a device's
    /// states can take tens of MiB, and a page of several devices held all
    /// of them at once. It is given the bands' tiers, none chosen yet.
    pub parts: Box<dyn Fn(bands::Chosen) -> DeviceParts + Send + Sync + 'a>,
    /// What the OOM panel's what-if button shows: `table` (the text
    /// `simulate` prints), `request` (the server's path that answers it)
    /// or `how` (why there is none, or the command that prints it).
    pub what_if: Value,
}

/// What a device's part of the page is made of beside its report.
pub struct DeviceParts {
    /// The state at each of `report.key_moments`, in their order.
    pub states: Vec<MomentState>,
    /// Live bytes of each call site at the peak of allocated bytes, by the
    /// site's label (from the culprit rows of that moment).
    pub peak_by_site: HashMap<String, u64>,
    /// The allocations the bands draw.
    pub bands: bands::Chosen,
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
/// with their segment maps, call sites and OOMs, and the verdict. It is
/// serialized as it is written: the levels, bands and segment maps, most
/// of a written page, are never held as a `serde_json::Value`.
pub struct Data<'v, 'a>(pub &'v View<'a>);

impl Serialize for Data<'_, '_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        let sty = &v.style;
        let budget = v.detail.budget / v.devices.len().max(1);
        // The one list every stack index of the document names, written
        // after the devices that name them.
        let stacks = PageStacks::new(v.snap);
        let mut m = ser.serialize_map(Some(8))?;
        m.serialize_entry("schema", VIEW_SCHEMA)?;
        m.serialize_entry("file", &v.report.file)?;
        m.serialize_entry("format", &v.report.format)?;
        m.serialize_entry("served", &v.served)?;
        m.serialize_entry("exact_bytes", &sty.exact_bytes)?;
        m.serialize_entry("verdict", &crate::render::verdict::lines(sty, v.report))?;
        m.serialize_entry("quality", &v.report.quality)?;
        let stacks = &stacks;
        // Each device's parts (a replay of its trace) are made on another
        // thread, the next device's while this one is written (the first
        // device's while its levels are): at most one device ahead, so
        // two devices' parts at once.
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel(0);
            s.spawn(move || {
                for d in &v.devices {
                    let bands = device_bands(&v.detail, v.devices.len(), d.series.len());
                    if tx.send((d.parts)(bands)).is_err() {
                        break;
                    }
                }
            });
            m.serialize_entry("devices", &devices(v, budget, stacks, &rx))
        })?;
        m.serialize_entry("stacks", stacks)?;
        m.end()
    }
}

/// The devices of [`Data`], each one's parts from `made`.
fn devices<'v, 'a>(
    v: &'v View<'a>,
    budget: usize,
    stacks: &'v PageStacks<'a>,
    made: &'v Receiver<DeviceParts>,
) -> Seq<impl ExactSizeIterator<Item = DeviceJson<'v, 'a>>> {
    Seq::new(v.devices.iter().map(move |d| DeviceJson {
        v,
        d,
        budget,
        stacks,
        made,
    }))
}

/// The bands of one of a page's `devices` devices whose series has `len`
/// samples, none chosen yet: its share of the page's band budget.
pub fn device_bands(detail: &Detail, devices: usize, len: usize) -> bands::Chosen {
    let budget = detail.band_budget / devices.max(1);
    bands::Chosen::new(len, budget, detail.max_band_tiers)
}

/// One device of [`Data`]; `budget` is its levels' bytes.
struct DeviceJson<'v, 'a> {
    v: &'v View<'a>,
    d: &'v DeviceView<'a>,
    budget: usize,
    stacks: &'v PageStacks<'a>,
    /// Where the device's parts come from: another thread makes them, in
    /// the devices' order.
    made: &'v Receiver<DeviceParts>,
}

impl Serialize for DeviceJson<'_, '_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (v, d, budget) = (self.v, self.d, self.budget);
        let sty = &v.style;
        let r = d.report;
        let mut m = ser.serialize_map(Some(12))?;
        m.serialize_entry("device", &r.device)?;
        m.serialize_entry("events", &r.events)?;
        m.serialize_entry("traced", &r.traced())?;
        m.serialize_entry("first_time_us", &r.first_time_us)?;
        m.serialize_entry("sites_moment", &r.moment_label)?;
        m.serialize_entry("sites_when", &r.moment_text())?;
        m.serialize_entry(
            "levels",
            &Levels {
                series: d.series,
                detail: v.detail,
                budget,
            },
        )?;
        // Made while the levels (each made whole in its turn) are written.
        let DeviceParts {
            states,
            peak_by_site,
            bands,
        } = self.made.recv().expect("a device's parts, made in order");
        m.serialize_entry(
            "bands",
            &bands::Tiers {
                stacks: self.stacks,
                series: d.series,
                chosen: bands,
            },
        )?;
        let moments = r.key_moments.iter().zip(&states).map(|(k, st)| MomentJson {
            sty,
            snap: v.snap,
            r,
            k,
            st,
            stacks: self.stacks,
        });
        m.serialize_entry("key_moments", &Seq::new(moments))?;
        m.serialize_entry("ooms", &ooms(v, d))?;
        m.serialize_entry("sites", &sites(v, d, &states, &peak_by_site))?;
        m.serialize_entry("what_if", &d.what_if)?;
        m.end()
    }
}

/// One key moment: its label, event, when, figures and segment map.
struct MomentJson<'a> {
    sty: &'a Style,
    snap: &'a Snapshot,
    r: &'a DeviceReport,
    k: &'a KeyMoment,
    st: &'a MomentState,
    stacks: &'a PageStacks<'a>,
}

impl Serialize for MomentJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let k = self.k;
        let mut m = ser.serialize_map(Some(5))?;
        m.serialize_entry("label", &k.label)?;
        m.serialize_entry("event", &event_num(k.at))?;
        m.serialize_entry("when", &self.r.when(k.at, k.sample.time_us))?;
        m.serialize_entry("figures", &figures(self.sty, &k.sample))?;
        m.serialize_entry(
            "state",
            &StateJson {
                style: self.sty,
                snap: self.snap,
                state: self.st,
                stacks: KeptStacks::Page(self.stacks),
            },
        )?;
        m.end()
    }
}

/// A device's OOMs with the report's diagnosis of each.
fn ooms(v: &View, d: &DeviceView) -> Vec<Value> {
    let sty = &v.style;
    let verdict = crate::render::verdict::lines(sty, v.report);
    let r = d.report;
    r.ooms
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
        .collect()
}

/// A device's call-site rows, as `culprits` ranks them.
fn sites(
    v: &View,
    d: &DeviceView,
    states: &[MomentState],
    peak_by_site: &HashMap<String, u64>,
) -> Vec<Value> {
    let sty = &v.style;
    let places = site_places(v.snap, d, states);
    v.report
        .culprits_of(d.report.device)
        .map(|c| {
            let peak = peak_by_site.get(&c.site).copied();
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
        .collect()
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
/// prints, so no peak is lowered at any level. Each level is made as it is
/// written, and dropped.
pub struct Levels<'a> {
    pub series: &'a Series,
    pub detail: Detail,
    pub budget: usize,
}

impl Serialize for Levels<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (series, detail) = (self.series, self.detail);
        let mut seq = ser.serialize_seq(None)?;
        let mut points = detail.overview.max(2);
        let (mut used, mut made) = (0, 0);
        // A level is carried while the bytes of its points and those before
        // stay within the budget. The levels sure to be from here (the
        // first by the bytes written so far, each after it as if every
        // level before had its most points) are cut from one read of the
        // series.
        loop {
            let (mut sure, mut most) = (Vec::new(), used);
            loop {
                let n = series.len().min(points);
                let k = made + sure.len();
                if k > 0 && (most + n * BYTES_PER_POINT > self.budget || k >= detail.max_levels) {
                    break;
                }
                sure.push(points);
                most += n * BYTES_PER_POINT;
                if series.len() <= points {
                    break;
                }
                points = points.saturating_mul(detail.factor.max(2));
            }
            if sure.is_empty() {
                break;
            }
            let mut cut: Vec<Points> = (sure.iter())
                .map(|&p| Points::with_capacity(series.len().min(p)))
                .collect();
            downsample_series_levels(series, &sure, |k, s| cut[k].push(&s));
            for (samples, &p) in cut.iter().zip(&sure) {
                used += samples.len() * BYTES_PER_POINT;
                made += 1;
                let full = series.len() <= p;
                seq.serialize_element(&Columns { samples, full })?;
                if full {
                    return seq.end();
                }
            }
        }
        seq.end()
    }
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
    // Each part fed to its downsampler a sample at a time, as `downsample`
    // of the part's samples feeds them: never held.
    for start in (0..len).step_by(chunk) {
        let part = chunk.min(len - start);
        let mut d = Downsampler::new(part, 2 * part.div_ceil(per), Order::ReservedFirst);
        samples.by_ref().take(part).for_each(|s| d.push(s));
        out.extend(d.finish());
    }
    let full = false;
    let samples = out;
    columns(&samples, full)
}

/// One level as columns (event, time, figures), `full` when it holds every
/// sample.
fn columns(samples: &[Sample], full: bool) -> Value {
    let mut points = Points::with_capacity(samples.len());
    samples.iter().for_each(|s| points.push(s));
    serde_json::to_value(Columns {
        samples: &points,
        full,
    })
    .expect("columns serialize")
}

/// A level's points, each the figures its columns write and no more: 69
/// bytes a point, where a [`Sample`] takes twice that, and a page's finest
/// level holds up to a hundred thousand points or more.
struct Points {
    /// The event, `u32::MAX` for the start (no event index reaches it).
    event: Vec<u32>,
    time_us: Vec<i64>,
    timed: Vec<bool>,
    /// reserved, allocated, active, free, largest gap, gaps.
    figures: Vec<[u64; 6]>,
    fragmentation: Vec<f64>,
}

impl Points {
    fn with_capacity(n: usize) -> Points {
        Points {
            event: Vec::with_capacity(n),
            time_us: Vec::with_capacity(n),
            timed: Vec::with_capacity(n),
            figures: Vec::with_capacity(n),
            fragmentation: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, s: &Sample) {
        let lay = s.lay();
        self.event.push(s.event.unwrap_or(u32::MAX));
        self.time_us.push(s.time_us.unwrap_or(0));
        self.timed.push(s.time_us.is_some());
        self.figures.push([
            s.reserved_bytes(),
            s.allocated,
            s.active,
            s.external_bytes(),
            lay.largest_free_gap,
            lay.free_gaps,
        ]);
        self.fragmentation.push(lay.fragmentation);
    }

    fn len(&self) -> usize {
        self.event.len()
    }

    /// Figure `k` of [`Points::figures`] of every point.
    fn figure(&self, k: usize) -> Seq<impl ExactSizeIterator<Item = u64> + '_> {
        Seq::new(self.figures.iter().map(move |f| f[k]))
    }
}

/// [`columns`], serialized as it is written.
struct Columns<'a> {
    samples: &'a Points,
    full: bool,
}

impl Serialize for Columns<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let p = self.samples;
        let mut m = ser.serialize_map(Some(11))?;
        m.serialize_entry("points", &p.len())?;
        m.serialize_entry("full", &self.full)?;
        m.serialize_entry(
            "event",
            &Seq::new((p.event.iter()).map(|&e| if e == u32::MAX { -1 } else { i64::from(e) })),
        )?;
        m.serialize_entry(
            "time_us",
            &Seq::new((p.time_us.iter().zip(&p.timed)).map(|(&t, &timed)| timed.then_some(t))),
        )?;
        for (k, name) in [
            "reserved",
            "allocated",
            "active",
            "free",
            "largest_gap",
            "gaps",
        ]
        .into_iter()
        .enumerate()
        {
            m.serialize_entry(name, &p.figure(k))?;
        }
        m.serialize_entry(
            "fragmentation",
            &Seq::new((p.fragmentation.iter()).map(|f| (f * 1e4).round() / 1e4)),
        )?;
        m.end()
    }
}

/// The places ([`Place`]) each call site holds live blocks in at the
/// moment of the call-site table (its key moment's state, else the
/// report's segments).
fn site_places(
    snap: &Snapshot,
    d: &DeviceView,
    states: &[MomentState],
) -> HashMap<String, BTreeSet<String>> {
    let r = d.report;
    let trace = snap.trace_of(r.device);
    let st = r
        .key_moments
        .iter()
        .zip(states)
        .find(|(k, _)| k.at == r.moment_at)
        .map(|(_, st)| st);
    let report_segments = r.replayed().map_or(&[][..], |x| &x.segments);
    let segments = st.map_or(report_segments, |st| &st.segments[..]);
    let mut out: HashMap<String, BTreeSet<String>> = HashMap::new();
    // A site's label once a stack: live blocks by the thousand share a few
    // hundred stacks.
    let facts = crate::analysis::frames::FrameFacts::new(snap);
    let mut sites: HashMap<StackId, String> = HashMap::new();
    for s in segments {
        for b in &s.blocks {
            let origin = st.and_then(|st| st.origins.get(&b.address).copied());
            if b.state != BlockState::Inactive {
                let id = block_stack(b, origin, trace);
                let site = sites
                    .entry(id)
                    .or_insert_with(|| facts.call_site(id).label());
                out.entry(site.clone())
                    .or_default()
                    .insert(Place(s).to_string());
            }
        }
    }
    out
}

/// The self-contained page of `data` (its `file` the title): styles,
/// script and data inline.
pub fn page(data: &Value) -> String {
    let mut out = Vec::new();
    let title = data["file"].as_str().unwrap_or("fragscope");
    write_page(&mut out, title, data).expect("writing to memory");
    String::from_utf8(out).expect("the page is UTF-8")
}

/// [`page`] of any data, titled `title`, written to `w` as it is made, the
/// data serialized straight into it: neither is ever held whole.
pub fn write_page(
    w: &mut dyn std::io::Write,
    title: &str,
    data: &impl Serialize,
) -> std::io::Result<()> {
    write_page_with(w, title, |w| {
        let mut out = crate::render::encode::Chunked::new(w);
        serde_json::to_writer(&mut out, data)?;
        out.finish()
    })
}

/// The page's text before and after its data.
fn shell(title: &str) -> (String, String) {
    let page = PAGE
        .replacen("{{TITLE}}", &html_escape(title), 1)
        .replacen("{{STYLE}}", CSS, 1)
        .replacen("{{SCRIPT}}", &SCRIPTS.join("\n"), 1);
    match page.split_once("{{DATA}}") {
        Some((head, tail)) => (head.to_string(), tail.to_string()),
        None => (page, String::new()),
    }
}

/// The page around the data `data` writes.
fn write_page_with(
    w: &mut dyn std::io::Write,
    title: &str,
    data: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let (head, tail) = shell(title);
    w.write_all(head.as_bytes())?;
    // `<` can only stand inside a JSON string, where `\u003c` means the
    // same: no `</script>` or `<!--` can then end the data's element.
    data(&mut NoLessThan(&mut *w))?;
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
