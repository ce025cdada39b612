//! `fragscope diff BEFORE AFTER`: two runs side by side.

use super::common::{Exit, Global, print, warn};
use crate::pipeline::diff_of;

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
    let (r, warnings) = diff_of(&g.load, (&a.before, &a.after), a.device, a.top)?;
    warnings.iter().for_each(|w| warn(w));
    if a.json {
        print(&crate::render::diff::json(&r))?;
    } else {
        print(&crate::render::diff::text(&g.style, &r))?;
    }
    Ok(Exit::Ok)
}
