//! `fragscope events FILE`: one line per trace event with the running
//! figures after it, written as it goes.

use super::common::{Exit, Global, load_input};
use crate::analysis::events::Selection;
use crate::render::events::{Form, Listing, write_listing};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot with a trace (pickle, JSON, gzip/zstd, memory_viz HTML, `-`
    /// for stdin) or profiler trace.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Only this device (default: every device with trace events).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// First event listed (trace index, from 0; inclusive).
    #[arg(long, value_name = "E", default_value_t = 0)]
    pub from: usize,
    /// Stop before this event (exclusive; past the end lists to the end).
    #[arg(long, value_name = "E")]
    pub to: Option<usize>,
    /// Only events whose call site, or a frame of whose stack
    /// (file:line:function, as PyTorch's viewer shows them), holds SITE
    /// (case-sensitive substring). For a profiler trace: the operator, the
    /// top-level operator or the Python function.
    #[arg(long, value_name = "SITE")]
    pub grep: Option<String>,
    /// Print CSV, one row per event (exact byte counts).
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Print a versioned JSON object (schema fragscope.events/1), one event a
    /// line.
    #[arg(long)]
    pub json: bool,
    /// Write to this file instead of stdout (replaced atomically).
    #[arg(short, long, value_name = "PATH", default_value = "-")]
    pub output: String,
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    if let Some(to) = a.to
        && a.from >= to
    {
        anyhow::bail!(
            "--from {} --to {to}: nothing to list; --from must be below --to (events from..to, to exclusive)",
            a.from
        );
    }
    let form = if a.csv {
        Form::Csv
    } else if a.json {
        Form::Json
    } else {
        Form::Text
    };
    let bars = indicatif::MultiProgress::new();
    let loaded = load_input(&a.file, g, &bars)?;
    let format = crate::pipeline::describe_format(&g.style, &loaded);
    let events = crate::pipeline::events_of(loaded, a.device, a.from)?;
    let sel = Selection {
        from: a.from,
        to: a.to,
        grep: a.grep.clone(),
    };
    let listing = Listing {
        file: &a.file,
        format: &format,
        from: a.from,
        grep: a.grep.as_deref(),
        form,
    };
    crate::cli::output::write_atomic_with(&a.output, std::slice::from_ref(&a.file), |w| {
        write_listing(w, &g.style, listing, &events, &sel)
    })?;
    Ok(Exit::Ok)
}
