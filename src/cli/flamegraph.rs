//! `fragscope flamegraph FILE -o mem.svg`: live or stranded memory by
//! allocation stack, drawn with inferno.

use super::common::{Exit, Global};
use crate::analysis::culprits::Options;
use crate::input;
use crate::render::flamegraph::{Weight, collapsed, svg};
use crate::timeline::Moment;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, JSON, gzip/zstd, memory_viz HTML, `-` for stdin).
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Output SVG path (`-` for stdout).
    #[arg(short, long, value_name = "OUT")]
    pub output: String,
    /// Moment to draw: end, start, peak, peak-reserved, max-frag, min-gap,
    /// oom, oom:N, an event index, or t=MICROSECONDS.
    #[arg(long, default_value = "end", value_name = "MOMENT")]
    pub at: String,
    /// Only this device (default: every device with segments, one root each).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// What a frame's width measures.
    #[arg(long, value_enum, default_value_t = WeightArg::Live)]
    pub weight: WeightArg,
    /// With --weight stranded: count only free gaps smaller than this request.
    #[arg(long, value_name = "SIZE", value_parser = super::parse_size_arg)]
    pub request: Option<u64>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightArg {
    /// Rounded bytes of live blocks.
    Live,
    /// Free bytes each live block strands (see `fragscope culprits`).
    Stranded,
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let moment: Moment =
        a.at.parse()
            .map_err(|e: String| anyhow::anyhow!("--at: {e}"))?;
    let (snap, _) = input::load_snapshot(&a.file, &g.load)?;
    let states = crate::pipeline::states(&snap, &a.file, moment, a.device)?;
    let opts = Options {
        request: a.request,
        ..Options::default()
    };
    let analyses = crate::pipeline::analyses(&snap, &states, &opts);
    let weight = match a.weight {
        WeightArg::Live => Weight::Live,
        WeightArg::Stranded => Weight::Stranded,
    };
    let lines = collapsed(&snap, &analyses, weight);
    let title = match weight {
        Weight::Live => "Live memory by allocation stack",
        Weight::Stranded => "Free memory stranded, by the stack of the block that strands it",
    };
    let devices: Vec<String> = analyses.iter().map(|x| x.device.to_string()).collect();
    let subtitle = format!(
        "at {}, device {}",
        a.at.trim().to_ascii_lowercase(),
        devices.join(", ")
    );
    let bytes = svg(&lines, title, &subtitle).map_err(|e| anyhow::anyhow!("{}: {e}", a.file))?;
    crate::cli::output::write_atomic(&a.output, &bytes, std::slice::from_ref(&a.file))?;
    Ok(Exit::Ok)
}
