//! `fragscope plot KIND FILE -o out.svg`

use super::common::{Exit, Global};
use crate::input;
use crate::pipeline::{AnyReport, ReportOptions};
use crate::render::charts::{self, Kind};
use crate::timeline::Moment;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which chart.
    #[arg(value_enum, value_name = "KIND")]
    pub kind: PlotKind,
    /// Snapshot to read (any supported form, `-` for stdin); for a profiler
    /// trace or a memory-timeline export, only `timeline`.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Where to write the SVG (`-` for stdout).
    #[arg(short, long, value_name = "OUT.svg")]
    pub output: String,
    /// Only this device (default: one panel per device).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// Moment of the segment map, the gap histogram and the call sites:
    /// start, end, peak, peak-reserved, max-frag, min-gap, oom, oom:N, an
    /// event index or t=MICROSECONDS (default: the first OOM, else the moment
    /// most reserved memory was free).
    #[arg(long, value_name = "MOMENT")]
    pub at: Option<Moment>,
    /// Most rows of the segment map (larger snapshots are drawn at a coarser scale).
    #[arg(long, default_value_t = 36, value_name = "N")]
    pub rows: usize,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotKind {
    /// Reserved, allocated, free-in-reserved and largest free gap over time.
    Timeline,
    /// Fragmentation ratio and number of free gaps over time.
    Fragmentation,
    /// Every segment to scale at one moment, blocks colored by state.
    #[value(alias = "segmap", alias = "segment-map")]
    Segments,
    /// Histogram of free-gap sizes at one moment, the failing request marked.
    Gaps,
    /// Live and stranded bytes of the top call sites.
    Sites,
}

impl From<PlotKind> for Kind {
    fn from(k: PlotKind) -> Kind {
        match k {
            PlotKind::Timeline => Kind::Timeline,
            PlotKind::Fragmentation => Kind::Fragmentation,
            PlotKind::Segments => Kind::Segments,
            PlotKind::Gaps => Kind::Gaps,
            PlotKind::Sites => Kind::Sites,
        }
    }
}

/// Why `kind` cannot be drawn for an input without a segment layout
/// (`None`: the timeline, which every input has).
fn needs_layout(kind: PlotKind) -> Option<&'static str> {
    match kind {
        PlotKind::Timeline => None,
        PlotKind::Fragmentation => Some("fragmentation needs the largest free gap"),
        PlotKind::Segments => Some("the segment map needs the segment layout"),
        PlotKind::Gaps => Some("the free-gap histogram needs the segment layout"),
        PlotKind::Sites => Some("stranded bytes by call site need the segment layout"),
    }
}

/// The charts an input without a segment layout cannot give, refused
/// before any work, in the words of its kind.
fn refuse_unmeasurable(a: &Args, content: &input::Content) -> anyhow::Result<()> {
    match content {
        input::Content::Snapshot(_) => {}
        input::Content::Profiler(_) => {
            if let Some(w) = needs_layout(a.kind) {
                anyhow::bail!(
                    "{}: not measurable for a profiler trace: {w}, which a trace does not record; `plot timeline` draws its allocated and reserved bytes",
                    a.file
                );
            }
        }
        input::Content::MemoryTimeline(_) => {
            if needs_layout(a.kind).is_some() || a.device.is_some() || a.at.is_some() {
                anyhow::bail!(
                    "{}: not measurable for a memory-timeline export: it records tensor bytes by category, with no allocator layout; `plot timeline` draws them",
                    a.file
                );
            }
        }
    }
    Ok(())
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let loaded = input::load(&a.file, &g.load)?;
    refuse_unmeasurable(&a, &loaded.content)?;
    let options = ReportOptions {
        device: a.device,
        at: a.at,
        what_if: false,
    };
    let svg = match crate::pipeline::report(&g.style, &loaded, &options)? {
        AnyReport::Report(r) => {
            if r.is_trace() && r.devices.is_empty() {
                anyhow::bail!("{}: no device has memory events", a.file);
            }
            charts::plot(a.kind.into(), &r, a.rows)?.body
        }
        AnyReport::Categories(r) => charts::categories(&r)?.body,
    };
    crate::cli::output::write_atomic(&a.output, svg.as_bytes(), std::slice::from_ref(&a.file))?;
    Ok(Exit::Ok)
}
