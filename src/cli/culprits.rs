//! `fragscope culprits FILE`: which live blocks pin fragmented memory.

use super::common::{Exit, Global, print};
use crate::analysis::culprits::GroupBy;
use crate::input;
use crate::pipeline::{CulpritsOptions, culprits_of};
use crate::render::culprits::{View, findings_json, findings_text};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, JSON, gzip/zstd, memory_viz HTML, `-` for
    /// stdin), or a profiler trace (live bytes by operator; stranded bytes
    /// need a snapshot).
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Moment to analyse: end, start, peak, peak-reserved, max-frag, min-gap,
    /// oom, oom:N, an event index, or t=MICROSECONDS (default: end; for a
    /// profiler trace, peak).
    #[arg(long, value_name = "MOMENT")]
    pub at: Option<String>,
    /// Only this device (default: every device with segments).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// How many rows each list shows.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// Rank groups of blocks instead of single blocks.
    #[arg(long, value_enum, value_name = "KEY")]
    pub group_by: Option<GroupArg>,
    /// Count as stranded only free gaps smaller than this request (default:
    /// the failed request at an OOM moment, else every free byte of a segment
    /// that holds a live block).
    #[arg(long, value_name = "SIZE", value_parser = super::parse_size_arg)]
    pub request: Option<u64>,
    /// Print a versioned JSON object (schema fragscope.culprits/1).
    #[arg(long)]
    pub json: bool,
    /// Print the allocation stack of every culprit listed.
    #[arg(long)]
    pub stack: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupArg {
    Site,
    Stack,
    Segment,
}

impl From<GroupArg> for GroupBy {
    fn from(g: GroupArg) -> GroupBy {
        match g {
            GroupArg::Site => GroupBy::Site,
            GroupArg::Stack => GroupBy::Stack,
            GroupArg::Segment => GroupBy::Segment,
        }
    }
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let opts = CulpritsOptions {
        at: a.at.clone(),
        device: a.device,
        top: a.top,
        group_by: a.group_by.map(GroupBy::from),
        request: a.request,
        stack: a.stack,
    };
    let found = culprits_of(input::load(&a.file, &g.load)?, &opts)?;
    let view = View {
        moment: a.at.as_deref().unwrap_or("end").trim().to_ascii_lowercase(),
        top: a.top,
        grouped: a.group_by.is_some(),
        stacks: a.stack,
    };
    if a.json {
        print(&findings_json(&g.style, &a.file, &found, &view))?;
    } else {
        print(&findings_text(&g.style, &found, &view))?;
    }
    Ok(Exit::Ok)
}
