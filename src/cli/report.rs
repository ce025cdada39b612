//! `fragscope report FILE -o report.html` (also `-o report.svg`, `-o
//! report.md`, `--markdown`).

use super::common::{Exit, Global, print};
use crate::input::{self, Loaded};
use crate::model::Snapshot;
use crate::render::{charts, html, markdown};
use crate::replay::Moment;
use crate::report::{self, Report};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot to read (any supported form, `-` for stdin).
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Output file(s): `.html` the full self-contained report, `.svg` a
    /// one-page summary image, `.md` Markdown. Repeat to write several.
    #[arg(short, long, value_name = "OUT")]
    pub output: Vec<String>,
    /// Print the Markdown summary on stdout (for a CI step summary).
    #[arg(long)]
    pub markdown: bool,
    /// Image link in the Markdown (default: the `.svg` written by this run).
    #[arg(long, value_name = "URL")]
    pub svg_link: Option<String>,
    /// Only this device (default: every device).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// Moment the segment map, gap histogram and call sites show (default:
    /// the first OOM, else the moment most reserved memory was free).
    #[arg(long, value_name = "MOMENT")]
    pub at: Option<Moment>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    Html,
    Svg,
    Markdown,
}

fn kind_of(path: &str) -> anyhow::Result<Out> {
    let l = path.to_ascii_lowercase();
    if l.ends_with(".html") || l.ends_with(".htm") {
        Ok(Out::Html)
    } else if l.ends_with(".svg") {
        Ok(Out::Svg)
    } else if l.ends_with(".md") || l.ends_with(".markdown") {
        Ok(Out::Markdown)
    } else {
        anyhow::bail!(
            "{path}: cannot tell the report format from the extension; use .html, .svg or .md"
        )
    }
}

/// Replays, ranks call sites and assembles the report (shared with `plot`).
pub fn build_report(
    snap: &Snapshot,
    loaded: &Loaded,
    device: Option<i64>,
    at: Option<Moment>,
) -> anyhow::Result<Report> {
    let inputs =
        report::gather(snap, device, at).map_err(|e| anyhow::anyhow!("{}: {e}", loaded.name))?;
    let mut culprits = Vec::new();
    for i in &inputs {
        culprits.extend(report::sites_at(snap, i.replay.device, &i.moment.segments));
    }
    Ok(report::build(
        snap,
        &loaded.name,
        &super::stats::describe_format(loaded),
        inputs,
        culprits,
    ))
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    if a.output.is_empty() && !a.markdown {
        anyhow::bail!(
            "say where the report goes: -o report.html, -o report.svg, -o report.md or --markdown"
        );
    }
    let kinds = a
        .output
        .iter()
        .map(|o| kind_of(o))
        .collect::<anyhow::Result<Vec<Out>>>()?;
    let (snap, loaded) = input::load_snapshot(&a.file, &g.load)?;
    let r = build_report(&snap, &loaded, a.device, a.at)?;
    let svg_link = a.svg_link.clone().or_else(|| {
        a.output
            .iter()
            .zip(&kinds)
            .find(|(_, k)| **k == Out::Svg)
            .map(|(o, _)| report::base_name(o))
    });
    let inputs = std::slice::from_ref(&a.file);
    for (path, kind) in a.output.iter().zip(&kinds) {
        let bytes = match kind {
            Out::Html => html::html(&r)?.into_bytes(),
            Out::Svg => charts::summary(&r)?.body.into_bytes(),
            Out::Markdown => markdown::markdown(&r, svg_link.as_deref()).into_bytes(),
        };
        crate::output::write_atomic(path, &bytes, inputs)?;
    }
    if a.markdown {
        print(&markdown::markdown(&r, svg_link.as_deref()))?;
    }
    Ok(Exit::Ok)
}
