//! `fragscope oom FILE`

use super::common::{Exit, Global, print};
use crate::input;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, JSON, gzip/zstd, memory_viz HTML, `-` for stdin).
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Total memory of the device (e.g. 80GiB). Snapshots do not record it;
    /// with it the verdict can tell a full device from memory held outside
    /// PyTorch.
    #[arg(long, value_name = "SIZE", value_parser = super::parse_size_arg)]
    pub capacity: Option<u64>,
    /// Print a versioned JSON object (schema fragscope.oom/1).
    #[arg(long)]
    pub json: bool,
}

pub const OOM_SCHEMA: &str = "fragscope.oom/1";

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let (snap, _) = input::load_snapshot(&a.file, &g.load)?;
    let r = crate::analysis::oom::analyse(&g.style, &snap, a.capacity);
    if a.json {
        let v = serde_json::json!({
            "schema": OOM_SCHEMA,
            "file": a.file,
            "ooms": r.ooms,
            "final_state": r.final_state,
            "undiagnosed_ooms": r.undiagnosed_ooms,
        });
        print(&(serde_json::to_string_pretty(&v)? + "\n"))?;
    } else {
        print(&crate::render::oom::render(&g.style, &a.file, &r))?;
    }
    Ok(Exit::Ok)
}
