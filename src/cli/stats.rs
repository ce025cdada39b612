//! `fragscope stats FILE...`

use super::common::{Exit, Global, expand_inputs, print, warn};
use super::output::write_atomic_with;
use crate::analysis::findings::Stats;
use crate::analysis::ranks;
use crate::analysis::stats::FileStats;
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

fn one(path: &str, g: &Global, bars: &indicatif::MultiProgress) -> anyhow::Result<Stats> {
    let l = super::common::load_input(path, g, bars)?;
    Ok(crate::pipeline::stats_of(&g.style, l))
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    // Its figures need only each trace's counts: a large pickle's entries
    // are counted as they are decoded, never kept.
    let g = &Global {
        load: crate::input::LoadOptions {
            tally_traces: true,
            ..g.load
        },
        ..g.clone()
    };
    let st = &g.style;
    let files = expand_inputs(&a.files)?;
    let bars = indicatif::MultiProgress::new();
    if files.len() == 1 {
        let s = one(&files[0], g, &bars)?;
        if a.json {
            s.warnings().for_each(|w| warn(&w));
            write_atomic_with("-", &[], |w| crate::render::stats::write_json_of(w, &s))?;
        } else {
            print(&crate::render::stats::text_of(st, &s, a.map_rows))?;
        }
        return Ok(Exit::Ok);
    }
    // Several files: parsed in parallel, reported in the order given.
    let results: Vec<anyhow::Result<Result<FileStats, String>>> = files
        .par_iter()
        .map(|f| one(f, g, &bars).map(|s| s.file_stats()))
        .collect();
    let mut ok = Vec::new();
    let mut failed = 0;
    for r in results {
        match r {
            Ok(Ok(fs)) => ok.push(fs),
            Ok(Err(file)) => warn(&format!(
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
        write_atomic_with("-", &[], |w| {
            crate::render::stats::write_files_json(w, &ok, &flags, failed)
        })?;
    } else {
        print(&crate::render::stats::files_text(st, &ok, &flags))?;
    }
    Ok(if failed > 0 {
        Exit::SomeInputsFailed
    } else {
        Exit::Ok
    })
}
