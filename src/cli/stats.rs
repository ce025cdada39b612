//! `fragscope stats FILE...`

use super::common::{Exit, Global, expand_inputs, print, warn};
use crate::analysis::ranks;
use crate::analysis::stats::{FileStats, file_stats};
use crate::core::units::fmt_pct;
use crate::input::Content;
use crate::render::table::{Tone, align_numbers, fragmentation_tone, new_table, toned};
use comfy_table::Cell;
use rayon::prelude::*;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot files (pickle, JSON, gzip/zstd, memory_viz HTML, `-` for
    /// stdin) or directories of them (one file per rank).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Print a versioned JSON object (schema fragscope.stats/1) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Most segments drawn in the segment map.
    #[arg(long, default_value_t = 40, value_name = "N")]
    pub map_rows: usize,
}

pub enum One {
    Snapshot(Box<FileStats>, String),
    /// A profiler trace or memory timeline: its text and JSON, ready to print.
    Profiler {
        file: String,
        text: String,
        json: String,
    },
}

fn one(
    path: &str,
    g: &Global,
    map_rows: usize,
    bars: &indicatif::MultiProgress,
) -> anyhow::Result<One> {
    let l = super::common::load_input(path, g, bars)?;
    let fmt = crate::pipeline::describe_format(&g.style, &l);
    match &l.content {
        Content::Snapshot(s) => {
            let fs = file_stats(s, path, fmt);
            let map = crate::render::segmap::segment_map(&g.style, &s.segments, map_rows);
            Ok(One::Snapshot(Box::new(fs), map))
        }
        Content::Profiler(t) => Ok(One::Profiler {
            file: path.to_string(),
            text: crate::render::stats::trace_text(&g.style, path, &fmt, t),
            json: crate::render::stats::trace_json(path, &fmt, t),
        }),
        Content::MemoryTimeline(t) => Ok(One::Profiler {
            file: path.to_string(),
            text: crate::render::stats::timeline_text(&g.style, path, &fmt, t),
            json: crate::render::stats::timeline_json(path, &fmt, t),
        }),
    }
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let st = &g.style;
    let files = expand_inputs(&a.files)?;
    let bars = indicatif::MultiProgress::new();
    if files.len() == 1 {
        let (fs, map) = match one(&files[0], g, a.map_rows, &bars)? {
            One::Snapshot(fs, map) => (fs, map),
            One::Profiler { text, json, .. } => {
                print(if a.json { &json } else { &text })?;
                return Ok(Exit::Ok);
            }
        };
        for w in &fs.warnings {
            if !a.json {
                continue;
            }
            warn(&format!("{}: {w}", fs.file));
        }
        if a.json {
            print(&(serde_json::to_string_pretty(&*fs)? + "\n"))?;
        } else {
            print(&crate::render::stats::render(&g.style, &fs, &map))?;
        }
        return Ok(Exit::Ok);
    }
    // Several files: parsed in parallel, reported in the order given.
    let results: Vec<anyhow::Result<One>> = files
        .par_iter()
        .map(|f| one(f, g, a.map_rows, &bars))
        .collect();
    let mut ok = Vec::new();
    let mut failed = 0;
    for r in results {
        match r {
            Ok(One::Snapshot(fs, _)) => ok.push(*fs),
            Ok(One::Profiler { file, .. }) => warn(&format!(
                "{file}: a profiler trace or memory timeline, left out of the per-rank table; run stats on it alone"
            )),
            Err(e) => {
                failed += 1;
                super::common::print_error(&e, g.verbose);
            }
        }
    }
    let refs: Vec<&FileStats> = ok.iter().collect();
    let flags = ranks::outliers(&refs);
    if a.json {
        let v = serde_json::json!({
            "schema": "fragscope.stats-multi/1",
            "files": ok,
            "outliers": ok.iter().zip(&flags).filter_map(|(f, o)| o.as_ref().map(|w| serde_json::json!({"file": f.file, "why": w}))).collect::<Vec<_>>(),
            "unreadable": failed,
        });
        print(&(serde_json::to_string_pretty(&v)? + "\n"))?;
    } else {
        let mut t = new_table(
            st,
            &[
                &["file", "devices", "segments"][..],
                &crate::render::stats::STATE_COLUMNS,
                &["events", "OOMs", "outlier"],
            ]
            .concat(),
        );
        for (f, o) in ok.iter().zip(&flags) {
            let ooms = f.oom_events.len();
            t.add_row(vec![
                Cell::new(&f.file),
                Cell::new(f.devices.len()),
                Cell::new(f.totals.segments),
                Cell::new(st.bytes(f.totals.reserved_bytes)),
                Cell::new(st.bytes(f.totals.allocated_bytes)),
                Cell::new(st.bytes(f.totals.internal_free_bytes)),
                Cell::new(st.bytes(f.totals.external_free_bytes)),
                Cell::new(st.bytes(f.totals.largest_free_block_bytes)),
                toned(
                    fmt_pct(f.totals.fragmentation),
                    fragmentation_tone(f.totals.fragmentation),
                ),
                Cell::new(f.trace_events.iter().sum::<u64>()),
                if ooms > 0 {
                    toned(ooms, Tone::Bad)
                } else {
                    Cell::new(ooms)
                },
                toned(o.clone().unwrap_or_default(), Tone::Warn),
            ]);
        }
        align_numbers(&mut t, 1);
        print(&format!("{t}\n"))?;
        if flags.iter().any(|f| f.is_some()) {
            print(&format!(
                "outlier: reserved more than {:.0}% above the median, or fragmentation more than {:.2} above it\n",
                (ranks::OUTLIER_RESERVED_FACTOR - 1.0) * 100.0,
                ranks::OUTLIER_FRAGMENTATION_MARGIN
            ))?;
        }
    }
    Ok(if failed > 0 {
        Exit::SomeInputsFailed
    } else {
        Exit::Ok
    })
}
