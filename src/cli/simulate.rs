//! `fragscope simulate FILE [--conf SPEC]... [--capacity SIZE]`

use super::common::{Exit, Global, print, print_json, warn};
use crate::input;
use crate::sim::{self, SimConfig};
use anyhow::Context;
use serde::Serialize;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot with a trace (`_record_memory_history(enabled="all")`).
    #[arg(value_name = "FILE")]
    pub file: String,
    /// A configuration to try, in PYTORCH_CUDA_ALLOC_CONF syntax, from
    /// PyTorch's defaults (repeatable). Without any: expandable segments,
    /// max_split_size_mb 64/128/256/512, roundup_power2_divisions 4/8/16.
    #[arg(long = "conf", value_name = "SPEC")]
    pub confs: Vec<String>,
    /// Device memory the allocator may reserve (e.g. 80GiB). Default: what a
    /// recorded OOM implies, else unlimited.
    #[arg(long, value_name = "SIZE", value_parser = super::parse_size_arg)]
    pub capacity: Option<u64>,
    /// Device to replay (default: the first with an OOM, else the busiest).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// Print a versioned JSON object (schema fragscope.simulate/1).
    #[arg(long)]
    pub json: bool,
    /// Also write a chart of reserved bytes over the trace per configuration.
    #[arg(long, value_name = "FILE.svg")]
    pub svg: Option<String>,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    file: &'a str,
    #[serde(flatten)]
    report: &'a sim::SimReport,
}

/// The model of `device` under the settings `simulate` tries when none is
/// given (the recorded ones and the default sweep from them); `fragscope
/// view` shows the same table.
pub fn default_sweep(
    snap: &crate::model::Snapshot,
    device: i64,
    capacity: Option<u64>,
) -> Result<sim::SimReport, sim::SimError> {
    sim::simulate_device(snap, device, &default_configs(snap), capacity)
}

/// The settings [`default_sweep`] tries besides the recorded ones.
pub fn default_configs(snap: &crate::model::Snapshot) -> Vec<SimConfig> {
    let (recorded, _, _) = sim::run::recorded_config(snap);
    sim::default_sweep(&recorded)
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let configs: Vec<SimConfig> = a
        .confs
        .iter()
        .map(|s| SimConfig::parse(s))
        .collect::<Result<_, _>>()
        .context("--conf")?;
    let (snap, _) = input::load_snapshot(&a.file, &g.load)?;
    let devices = sim::trace::simulable_devices(&snap);
    let device = match a.device {
        Some(d) if devices.contains(&d) => d,
        Some(d) => anyhow::bail!(
            "{}: device {d} has no allocations in its trace (devices with some: {})",
            a.file,
            if devices.is_empty() {
                "none".to_string()
            } else {
                devices
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        None => sim::trace::default_device(&snap).ok_or_else(|| {
            anyhow::anyhow!(
                "{}: no device trace holds allocations; record one with torch.cuda.memory._record_memory_history(enabled=\"all\")",
                a.file
            )
        })?,
    };
    let report = if configs.is_empty() {
        default_sweep(&snap, device, a.capacity)
    } else {
        sim::simulate_device(&snap, device, &configs, a.capacity)
    }
    .with_context(|| format!("{}: device {device}", a.file))?;
    if devices.len() > 1 && a.device.is_none() && !a.json {
        warn(&format!(
            "{}: replaying device {device}; devices with allocations: {} (choose with --device)",
            a.file,
            devices
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(path) = &a.svg {
        let title = format!("reserved over the trace, device {device} (model)");
        crate::cli::output::write_atomic(
            path,
            crate::render::simulate::chart_svg(&title, &report).as_bytes(),
            std::slice::from_ref(&a.file),
        )?;
    }
    if a.json {
        let j = JsonOut {
            file: &a.file,
            report: &report,
        };
        print_json(&j)?;
    } else {
        print(&crate::render::simulate::render(&g.style, &a.file, &report))?;
    }
    Ok(Exit::Ok)
}
