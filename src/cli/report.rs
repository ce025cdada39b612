//! `fragscope report FILE -o report.html` (also `-o report.svg`, `-o
//! report.md`, `--markdown`). FILE may be a snapshot, a profiler trace or a
//! memory-timeline export; several files or a directory make a per-rank
//! report (one snapshot per rank).

use super::common::{Exit, Global, expand_inputs, print, print_error};
use crate::analysis::report;
use crate::input;
use crate::pipeline::{self, AnyReport};
use crate::render::{categories, charts, html, markdown};
use crate::timeline::Moment;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot, profiler trace or memory-timeline export (any supported
    /// form, `-` for stdin). Several files, or a directory of them, make a
    /// per-rank report (one snapshot per rank).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
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
    /// the first OOM, else the moment most reserved memory was free; for a
    /// profiler trace, the first OOM, else the peak of allocated bytes).
    #[arg(long, value_name = "MOMENT")]
    pub at: Option<Moment>,
    /// Leave out the what-if allocator model (reserved memory under other
    /// PYTORCH_CUDA_ALLOC_CONF settings), which replays the trace several
    /// times.
    #[arg(long)]
    pub no_what_if: bool,
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

type Render<'a> = Box<dyn Fn() -> anyhow::Result<String> + 'a>;
/// Markdown, given the link to the summary image.
type RenderMd<'a> = Box<dyn Fn(Option<&str>) -> String + 'a>;

/// The three renderings of one report; each is made only when asked for.
struct Forms<'a> {
    html: Render<'a>,
    svg: Render<'a>,
    md: RenderMd<'a>,
}

fn write_forms(a: &Args, kinds: &[Out], inputs: &[String], f: &Forms) -> anyhow::Result<()> {
    let svg_link = a.svg_link.clone().or_else(|| {
        a.output
            .iter()
            .zip(kinds)
            .find(|(_, k)| **k == Out::Svg)
            .map(|(o, _)| report::base_name(o))
    });
    for (path, kind) in a.output.iter().zip(kinds) {
        let bytes = match kind {
            Out::Html => (f.html)()?.into_bytes(),
            Out::Svg => (f.svg)()?.into_bytes(),
            Out::Markdown => (f.md)(svg_link.as_deref()).into_bytes(),
        };
        crate::cli::output::write_atomic(path, &bytes, inputs)?;
    }
    if a.markdown {
        print(&(f.md)(svg_link.as_deref()))?;
    }
    Ok(())
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
    let files = expand_inputs(&a.files)?;
    if files.len() > 1 {
        if a.device.is_some() || a.at.is_some() {
            anyhow::bail!(
                "--device and --at choose what one file's report shows; a per-rank report of {} files takes neither",
                files.len()
            );
        }
        let (r, failed) = pipeline::ranks_report(&g.style, &files, &g.load);
        for e in &failed {
            print_error(e, g.verbose);
        }
        write_forms(
            &a,
            &kinds,
            &files,
            &Forms {
                html: Box::new(|| Ok(crate::render::ranks::html(&g.style, &r)?)),
                svg: Box::new(|| Ok(crate::render::ranks::summary(&r)?.body)),
                md: Box::new(|l| crate::render::ranks::markdown(&g.style, &r, l)),
            },
        )?;
        return Ok(if !failed.is_empty() {
            Exit::SomeInputsFailed
        } else {
            Exit::Ok
        });
    }
    let file = &files[0];
    let l = input::load(file, &g.load)?;
    let inputs = std::slice::from_ref(file);
    let options = pipeline::ReportOptions {
        device: a.device,
        at: a.at,
        what_if: !a.no_what_if,
    };
    match pipeline::report(&g.style, &l, &options)? {
        AnyReport::Report(r) => write_forms(
            &a,
            &kinds,
            inputs,
            &Forms {
                html: Box::new(|| Ok(html::html(&g.style, &r)?)),
                svg: Box::new(|| Ok(charts::summary(&g.style, &r)?.body)),
                md: Box::new(|link| markdown::markdown(&g.style, &r, link)),
            },
        )?,
        AnyReport::Categories(r) => {
            if a.device.is_some() || a.at.is_some() {
                anyhow::bail!(
                    "{file}: --device and --at: a memory-timeline export holds one device's tensor bytes by category and no allocator state to show at a moment"
                );
            }
            write_forms(
                &a,
                &kinds,
                inputs,
                &Forms {
                    html: Box::new(|| Ok(categories::html(&g.style, &r)?)),
                    svg: Box::new(|| Ok(charts::categories_summary(&r)?.body)),
                    md: Box::new(|link| categories::markdown(&g.style, &r, link)),
                },
            )?;
        }
    }
    Ok(Exit::Ok)
}
