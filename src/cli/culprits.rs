//! `fragscope culprits FILE`: which live blocks pin fragmented memory.

use super::common::{Exit, Global, print};
use crate::analysis::culprits::{self, GroupBy, Options};
use crate::core::style::Style;
use crate::input;
use crate::model::Snapshot;
use crate::pipeline::{analyses, states};
use crate::render::culprits::{View, render_json, render_text};
use crate::timeline::Moment;

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

/// A profiler trace: live bytes by operator at the moment (default: the
/// peak of allocated bytes). Stranded bytes need a segment layout.
fn run_trace(
    st: &Style,
    a: &Args,
    tr: &crate::input::profiler::ProfilerTrace,
) -> anyhow::Result<Exit> {
    use crate::render::culprits as rp;
    let name =
        a.at.as_deref()
            .unwrap_or("peak")
            .trim()
            .to_ascii_lowercase();
    let moment: Moment = name
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--at: {e}"))?;
    if a.group_by.is_some() || a.request.is_some() || a.stack {
        anyhow::bail!(
            "{}: --group-by, --request and --stack: not measurable for a profiler trace: they need allocation stacks and the segment layout; a trace groups live bytes by operator",
            a.file
        );
    }
    let devs = crate::analysis::report::trace::select(tr, a.device)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.file))?;
    let mut found = Vec::new();
    let mut first_err = None;
    for d in devs {
        match d.resolve(moment) {
            Ok(at) => found.push((
                culprits::trace_culprits(d, &tr.names, &name, at),
                d.summary.first_time_us,
            )),
            Err(e) => {
                first_err.get_or_insert(format!("{}: {e}", d.label));
            }
        }
    }
    if let (true, Some(e)) = (found.is_empty(), first_err) {
        anyhow::bail!("{}: --at {name}: {e}", a.file);
    }
    if a.json {
        let all: Vec<_> = found.into_iter().map(|x| x.0).collect();
        print(&rp::trace_culprits_json(&a.file, &all))?;
    } else {
        let text: Vec<String> = found
            .iter()
            .map(|(c, t0)| rp::trace_culprits_text(st, c, *t0, a.top))
            .collect();
        print(&text.join("\n"))?;
    }
    Ok(Exit::Ok)
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let mut loaded = input::load(&a.file, &g.load)?;
    let snap = match std::mem::replace(
        &mut loaded.content,
        input::Content::Snapshot(Snapshot::default()),
    ) {
        input::Content::Snapshot(s) => s,
        input::Content::Profiler(t) => return run_trace(&g.style, &a, &t),
        input::Content::MemoryTimeline(_) => anyhow::bail!(
            "{}: not measurable for a memory-timeline export: it records tensor bytes by category, with no call sites and no segment layout; `fragscope stats {}` shows the live bytes by category at the peak",
            a.file,
            a.file
        ),
    };
    let at = a.at.clone().unwrap_or_else(|| "end".into());
    let moment: Moment = at
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--at: {e}"))?;
    let states = states(&snap, &a.file, moment, a.device)?;
    let opts = Options {
        request: a.request,
        group_by: a.group_by.map(GroupBy::from).unwrap_or_default(),
        top: a.top,
    };
    let results = analyses(&snap, &states, &opts);
    if results.is_empty() && !a.json {
        print("The snapshot holds no segments: nothing is reserved, so nothing is stranded.\n")?;
        return Ok(Exit::Ok);
    }
    let view = View {
        moment: at.trim().to_ascii_lowercase(),
        top: a.top,
        grouped: a.group_by.is_some(),
        stacks: a.stack,
    };
    if a.json {
        print(&render_json(&g.style, &a.file, &results, &snap, &view))?;
    } else {
        let text: Vec<String> = results
            .iter()
            .map(|r| render_text(&g.style, r, &snap, &view))
            .collect();
        print(&text.join("\n"))?;
    }
    Ok(Exit::Ok)
}
