//! The command line: raw arguments → validated options → library calls →
//! exit code. Nothing here computes figures; each command module calls the
//! library and hands strings/bytes to [`out`].
//!
//! Exit codes (docs/exit-codes.md): 0 success, 1 a `check` rule failed,
//! 2 an input or option could not be used (also when any of several inputs
//! was unreadable). A closed stdout (broken pipe) exits 0.

pub mod check;
pub mod common;
pub mod completions;
pub mod convert;
pub mod culprits;
pub mod diff;
pub mod events;
pub mod explain;
pub mod flamegraph;
pub mod man;
pub mod oom;
pub mod output;
pub mod plot;
pub mod report;
pub mod simulate;
pub mod stats;
pub mod synth;
pub mod timeline;
pub mod view;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use common::{Exit, Global};

#[derive(Parser, Debug)]
#[command(
    name = "fragscope",
    version,
    about = "Where did my GPU memory go? Offline analysis of PyTorch CUDA memory snapshots.",
    long_about = "fragscope reads PyTorch memory snapshots (torch.cuda.memory._dump_snapshot pickles of \
every version, the same data as JSON, memory_viz HTML pages) and profiler traces, rebuilds the \
allocator's segment/block timeline, measures fragmentation and explains out-of-memory errors.",
    after_help = "Examples:\n  fragscope stats snapshot.pickle\n  fragscope oom snapshot.pickle\n  fragscope report snapshot.pickle -o report.html",
    propagate_version = true,
    infer_subcommands = false
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct GlobalArgs {
    /// When to color terminal output (NO_COLOR is honoured under auto).
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Print exact byte counts instead of KiB/MiB/GiB.
    #[arg(long, global = true)]
    pub bytes: bool,
    /// Largest input accepted, after decompression (e.g. 16GiB, 512MiB).
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size_arg, default_value = "16GiB")]
    pub max_input_size: u64,
    /// On errors, print the full chain of causes.
    #[arg(long, short, global = true)]
    pub verbose: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

pub fn parse_size_arg(s: &str) -> Result<u64, String> {
    crate::core::units::parse_size(s)
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Figures of the final allocator state, per device and pool: reserved,
    /// allocated, free (internal/external), largest free block, fragmentation.
    #[command(
        after_help = "Examples:\n  fragscope stats snapshot.pickle\n  fragscope stats --json snapshot.pickle\n  fragscope stats ranks/   # one row per rank file"
    )]
    Stats(stats::Args),
    /// Re-encode a snapshot as JSON (PyTorch's schema) or fragscope's compact MessagePack.
    #[command(
        after_help = "Examples:\n  fragscope convert snapshot.pickle -o snapshot.json\n  fragscope convert snapshot.pickle -o snapshot.msgpack"
    )]
    Convert(convert::Args),
    /// Which live blocks pin fragmented memory: ranked by the free bytes they
    /// strand, with their call sites, and the largest gap without them.
    #[command(
        after_help = "Examples:\n  fragscope culprits snapshot.pickle\n  fragscope culprits --at oom --stack snapshot.pickle\n  fragscope culprits --group-by segment --top 5 --json snapshot.pickle"
    )]
    Culprits(culprits::Args),
    /// Live memory (or stranded free memory) by allocation stack, as a
    /// flamegraph SVG.
    #[command(
        after_help = "Examples:\n  fragscope flamegraph snapshot.pickle -o mem.svg\n  fragscope flamegraph snapshot.pickle -o stranded.svg --weight stranded --at oom"
    )]
    Flamegraph(flamegraph::Args),
    /// CI gate: fail (exit 1) when a rule on fragmentation, peaks, free gaps
    /// or OOMs does not hold, alone or against a baseline run; exit 2 when an
    /// input or the config cannot be used. Rules come from flags and the
    /// [check] table of ./fragscope.toml (see docs/ci.md).
    #[command(
        after_help = "Examples:\n  fragscope check run.pickle --max-fragmentation 0.5 --max-peak-reserved 40GiB\n  fragscope check run.pickle --baseline ci/baseline.pickle --max-regression peak_reserved=5%\n  fragscope check run.pickle --format github\n  fragscope check run.pickle --format junit -o fragscope.xml"
    )]
    Check(check::Args),
    /// Two runs side by side: peaks, end state, fragmentation, free gaps,
    /// waste and OOMs with their changes; the call sites that moved most;
    /// culprits new or gone.
    #[command(
        after_help = "Examples:\n  fragscope diff before.pickle after.pickle\n  fragscope diff --json before.pickle after.pickle\n  fragscope diff --device 1,2 run.pickle run.pickle   # two devices of one file"
    )]
    Diff(diff::Args),
    /// Explain a pasted out-of-memory message, memory_summary() table or
    /// memory_stats() dump: fragmentation, capacity or other processes, and
    /// what to try.
    #[command(
        after_help = "Examples:\n  fragscope explain 'CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has ...'\n  fragscope explain train.log\n  pbpaste | fragscope explain"
    )]
    Explain(explain::Args),
    /// What-if allocator replay: the recorded allocations under other
    /// PYTORCH_CUDA_ALLOC_CONF settings (a model, with its fidelity shown).
    #[command(
        after_help = "Examples:\n  fragscope simulate snapshot.pickle\n  fragscope simulate snapshot.pickle --conf expandable_segments:True --conf max_split_size_mb:256\n  fragscope simulate snapshot.pickle --capacity 80GiB --svg reserved.svg\n  fragscope simulate snapshot.pickle --json"
    )]
    Simulate(simulate::Args),
    /// Draw one chart as SVG: memory timeline, fragmentation over time,
    /// segment map, free-gap histogram or top call sites.
    #[command(
        after_help = "Examples:\n  fragscope plot timeline snapshot.pickle -o timeline.svg\n  fragscope plot segments snapshot.pickle --at oom -o segments.svg\n  fragscope plot gaps snapshot.pickle --device 1 --at peak -o gaps.svg"
    )]
    Plot(plot::Args),
    /// A self-contained report for a bug ticket: verdict, key moments, every
    /// chart, culprits, allocator settings and data quality, as HTML (no
    /// script, no network), a one-page SVG, or Markdown.
    #[command(
        after_help = "Examples:\n  fragscope report snapshot.pickle -o report.html\n  fragscope report snapshot.pickle -o summary.svg -o summary.md\n  fragscope report snapshot.pickle --markdown >> \"$GITHUB_STEP_SUMMARY\""
    )]
    Report(report::Args),
    /// Replay the allocator trace: key moments (peaks, worst fragmentation,
    /// OOMs) with reserved, allocated, free and largest free gap at each; the
    /// full series as CSV/JSON; or the state at one moment.
    #[command(
        after_help = "Examples:\n  fragscope timeline snapshot.pickle\n  fragscope timeline --csv --max-points 2000 snapshot.pickle > series.csv\n  fragscope timeline --at peak snapshot.pickle\n  fragscope timeline --at oom:1 --device 1 snapshot.pickle"
    )]
    Timeline(timeline::Args),
    /// One line per trace event: index, time, action, address, size,
    /// stream, allocated and reserved after it (the replayed figures of
    /// `timeline`) and call site; an `oom` line with the free device memory.
    /// Written as it goes, so any trace length fits.
    #[command(
        after_help = "Examples:\n  fragscope events snapshot.pickle | less -S\n  fragscope events --device 1 --from 400 --to 430 snapshot.pickle\n  fragscope events --grep model.py --csv snapshot.pickle > model-events.csv\n  fragscope events --json -o events.json trace.json.gz"
    )]
    Events(events::Args),
    /// Explain each out-of-memory event of a snapshot: the request, the
    /// allocator's state at that moment, a verdict (fragmentation, capacity,
    /// other processes) and what to try.
    #[command(
        after_help = "Examples:\n  fragscope oom snapshot.pickle\n  fragscope oom --capacity 80GiB snapshot.pickle\n  fragscope oom --json snapshot.pickle"
    )]
    Oom(oom::Args),
    /// Write a synthetic snapshot of a training or serving run (allocations
    /// driven through the allocator model, pickled as PyTorch writes one):
    /// fixtures and benchmarks of any size, in five shapes.
    #[command(
        after_help = "Examples:\n  fragscope synth --events 100000 --seed 1 -o small.pickle\n  fragscope synth --events 5000000 --seed 7 -o /tmp/1gb.pickle\n  fragscope synth --events 200000 --capacity 24GiB -o tight.pickle\n  fragscope synth --shape fragmented --events 1000000 -o serving.pickle\n  fragscope synth --shape multi-device --devices 8 --busy-devices 1 -o ranks.pickle"
    )]
    Synth(synth::Args),
    /// The interactive viewer: memory timeline, segment map at any event,
    /// call sites and OOM verdicts in a browser, served on 127.0.0.1 (the
    /// URL is the first line printed), or one self-contained page with -o.
    #[command(
        after_help = "Examples:\n  fragscope view snapshot.pickle\n  fragscope view snapshot.pickle --no-open --port 8080\n  fragscope view snapshot.pickle -o page.html"
    )]
    View(view::Args),
    /// Shell completion script for bash, zsh, fish, elvish or PowerShell,
    /// on stdout.
    #[command(
        after_help = "Examples:\n  fragscope completions bash > ~/.local/share/bash-completion/completions/fragscope\n  fragscope completions zsh > \"${fpath[1]}/_fragscope\"\n  fragscope completions fish > ~/.config/fish/completions/fragscope.fish"
    )]
    Completions(completions::Args),
    /// The manual page (roff), every command included, on stdout or to a file.
    #[command(
        after_help = "Examples:\n  fragscope man | man -l -\n  fragscope man -o ~/.local/share/man/man1/fragscope.1"
    )]
    Man(man::Args),
}

/// Parses arguments, runs, returns the process exit code.
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let g = Global::from_args(&cli.global);
    let result = match cli.command {
        Command::Stats(a) => stats::run(a, &g),
        Command::Convert(a) => convert::run(a, &g),
        Command::Culprits(a) => culprits::run(a, &g),
        Command::Flamegraph(a) => flamegraph::run(a, &g),
        Command::Check(a) => check::run(a, &g),
        Command::Diff(a) => diff::run(a, &g),
        Command::Explain(a) => explain::run(a, &g),
        Command::Simulate(a) => simulate::run(a, &g),
        Command::Plot(a) => plot::run(a, &g),
        Command::Report(a) => report::run(a, &g),
        Command::Timeline(a) => timeline::run(a, &g),
        Command::Events(a) => events::run(a, &g),
        Command::View(a) => view::run(a, &g),
        Command::Oom(a) => oom::run(a, &g),
        Command::Completions(a) => completions::run(a, &g),
        Command::Man(a) => man::run(a, &g),
        Command::Synth(a) => synth::run(a, &g),
    };
    match result {
        Ok(exit) => exit.code(),
        Err(e) => {
            if common::is_broken_pipe(&e) {
                return 0;
            }
            common::print_error(&e, g.verbose);
            2
        }
    }
}
