//! `fragscope diff BEFORE AFTER`: two runs side by side.

use super::common::{Exit, Global, print, warn};
use crate::analysis::diff::{DiffInput, call_sites, diff, segment_diff, trace_sites};
use crate::input::Content;
use crate::pipeline::{load_measured, same_kind};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The earlier run (snapshot, profiler trace, or memory-timeline export
    /// against another export; `-` for stdin).
    #[arg(value_name = "BEFORE")]
    pub before: String,
    /// The later run; may be the same file as BEFORE with --device A,B.
    #[arg(value_name = "AFTER")]
    pub after: String,
    /// Compare one device: N for both files, or A,B for device A of BEFORE
    /// against device B of AFTER (default: every device; each figure is the
    /// worst device's).
    #[arg(long, value_name = "N|A,B", value_parser = parse_devices)]
    pub device: Option<(i64, i64)>,
    /// Call sites and culprits listed (0 = all).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// Print a versioned JSON object (schema fragscope.diff/1) instead of tables.
    #[arg(long)]
    pub json: bool,
}

fn parse_devices(s: &str) -> Result<(i64, i64), String> {
    let num = |x: &str| {
        x.trim()
            .parse::<i64>()
            .map_err(|_| format!("expected a device number or A,B, found {s:?}"))
    };
    match s.split_once(',') {
        Some((a, b)) => Ok((num(a)?, num(b)?)),
        None => num(s).map(|d| (d, d)),
    }
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    if a.before == "-" && a.after == "-" {
        anyhow::bail!("-: stdin can be only one of BEFORE and AFTER");
    }
    let (db, da) = match a.device {
        Some((x, y)) => (Some(x), Some(y)),
        None => (None, None),
    };
    // Each run's call sites are read from its trace, which is then dropped
    // (the segment comparison reads the final states only): the two traces
    // are never held at once. A warning waits until both files are read.
    let sites = |c: &mut Content, d| {
        let x = match &*c {
            Content::Snapshot(s) => {
                let (v, bad) = call_sites(s, d);
                (Some(v), bad)
            }
            Content::Profiler(t) if t.cpu_only() => (None, 0),
            Content::Profiler(t) => (trace_sites(t, d), 0),
            Content::MemoryTimeline(_) => (None, 0),
        };
        if let Content::Snapshot(s) = c {
            s.device_traces = None;
        }
        x
    };
    let (mb, mut sb) = load_measured(&a.before, &g.load, db)?;
    let (xb, bad_b) = sites(&mut sb, db);
    let (ma, mut sa) = load_measured(&a.after, &g.load, da)?;
    same_kind((&a.before, &mb), (&a.after, &ma), "AFTER")?;
    let (xa, bad_a) = sites(&mut sa, da);
    for (file, bad) in [(&a.before, bad_b), (&a.after, bad_a)] {
        if bad > 0 {
            warn(&format!(
                "{file}: {bad} call site(s) free more in the trace than the final state explains; their peaks are lower bounds"
            ));
        }
    }
    let mut r = diff(
        &DiffInput {
            file: &a.before,
            device: db,
            metrics: &mb,
            sites: xb.as_deref(),
        },
        &DiffInput {
            file: &a.after,
            device: da,
            metrics: &ma,
            sites: xa.as_deref(),
        },
        a.top,
    );
    match (&sb, &sa) {
        (Content::Snapshot(x), Content::Snapshot(y)) => {
            r.segments = Some(segment_diff(x, db, y, da, a.top));
        }
        _ => r.notes.push(
            "segments are compared only between two snapshots: a profiler trace records no segment layout"
                .into(),
        ),
    }
    if a.json {
        print(&crate::render::diff::json(&r))?;
    } else {
        print(&crate::render::diff::text(&g.style, &r))?;
    }
    Ok(Exit::Ok)
}
