//! `fragscope timeline FILE`

use super::common::{Exit, Global};
use crate::input;
use crate::pipeline::{TimelineOptions, describe_format, timeline_of};
use crate::render::timeline::{Form, write_timeline};
use crate::timeline::Moment;

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

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let form = if a.csv {
        Form::Csv
    } else if a.json {
        Form::Json
    } else {
        Form::Text
    };
    let opts = TimelineOptions {
        device: a.device,
        at: a.at,
        max_points: a.max_points,
        samples: form != Form::Text,
        key_moments: form != Form::Csv,
    };
    let loaded = input::load(&a.file, &g.load)?;
    let format = describe_format(&g.style, &loaded);
    let t = timeline_of(loaded, &opts)?;
    crate::cli::output::write_atomic_with("-", &[], |w| {
        write_timeline(w, &g.style, (&a.file, &format), &t, form, a.map_rows)
    })?;
    Ok(Exit::Ok)
}
