//! `fragscope plot KIND FILE -o out.svg`

use super::common::{Exit, Global};
use crate::input;
use crate::render::charts::{self, Kind};
use crate::replay::Moment;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which chart.
    #[arg(value_enum, value_name = "KIND")]
    pub kind: PlotKind,
    /// Snapshot to read (any supported form, `-` for stdin).
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

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let (snap, loaded) = input::load_snapshot(&a.file, &g.load)?;
    let report = super::report::build_report(&snap, &loaded, a.device, a.at)?;
    let svg = charts::plot(a.kind.into(), &report, a.rows)?;
    crate::output::write_atomic(
        &a.output,
        svg.body.as_bytes(),
        std::slice::from_ref(&a.file),
    )?;
    Ok(Exit::Ok)
}
