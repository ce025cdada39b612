//! `fragscope synth --events N --seed S [--shape SHAPE] -o FILE`: a
//! synthetic snapshot of a training or serving run, written as PyTorch's
//! `_dump_snapshot` writes one.

use super::common::{Exit, Global, print};
use crate::synth::{Shape, SynthOptions, generate_with_progress, write_pickle};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace entries the snapshot keeps for each busy device (the ring
    /// buffer's max_entries); about 150 bytes of pickle each.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub events: u64,
    /// What the recorded run looks like: narrow (a training run, ~55 call
    /// sites), many-sites (400+ stacks of 30-300 frames), fragmented (a
    /// server: thousands of segments and live blocks), expandable
    /// (expandable_segments with map/unmap), multi-device (8 devices, 1-2
    /// busy).
    #[arg(long, value_enum, default_value_t = Shape::Narrow, value_name = "SHAPE")]
    pub shape: Shape,
    /// Devices of a multi-device run [default: 8].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub devices: Option<u32>,
    /// Of those, how many train; the others are light, a few events a step
    /// [default: 2].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub busy_devices: Option<u32>,
    /// Picks the model, the batch shapes and the timings; the same seed and
    /// event count always give the same bytes.
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Device memory the modelled allocator may reserve (e.g. 80GiB, 24GiB).
    #[arg(long, value_name = "SIZE", value_parser = super::parse_size_arg, default_value = "80GiB")]
    pub capacity: u64,
    /// Where to write the pickle (`-` = stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: String,
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let st = &g.style;
    if a.shape != Shape::MultiDevice && (a.devices.is_some() || a.busy_devices.is_some()) {
        anyhow::bail!(
            "--devices and --busy-devices apply to --shape multi-device only, not {}",
            a.shape.name()
        );
    }
    let defaults = SynthOptions::default();
    let devices = a.devices.unwrap_or(defaults.devices);
    let busy_devices = a.busy_devices.unwrap_or(defaults.busy_devices.min(devices));
    if busy_devices > devices {
        anyhow::bail!("--busy-devices {busy_devices} is more than --devices {devices}");
    }
    let opts = SynthOptions {
        events: a.events,
        seed: a.seed,
        capacity: a.capacity,
        shape: a.shape,
        devices,
        busy_devices,
    };
    let bar = g.progress.then(|| {
        let b = indicatif::ProgressBar::new(opts.events);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} {bar:40} {human_pos}/{human_len} events, {eta} left",
            )
            .expect("a valid template"),
        );
        b.set_message("simulating");
        b
    });
    let s = generate_with_progress(&opts, |done, target| {
        if let Some(b) = &bar {
            b.set_length(target);
            b.set_position(done);
        }
    });
    if let Some(b) = &bar {
        b.set_message("writing");
        b.tick();
    }
    let mut written = 0;
    crate::cli::output::write_atomic_with(&a.output, &[], |w| {
        written = write_pickle(&s, w)?;
        Ok(())
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if a.output != "-" {
        let programs: Vec<&str> = match s.devices.iter().position(|d| !d.busy) {
            // The light devices of a multi-device run are summed up once.
            Some(i) => vec![s.devices[0].program.as_str(), s.devices[i].program.as_str()],
            None => vec![s.devices[0].program.as_str()],
        };
        let devices = if s.devices.len() > 1 {
            format!(
                " on {} devices ({} busy)",
                s.devices.len(),
                s.devices.iter().filter(|d| d.busy).count()
            )
        } else {
            String::new()
        };
        print(&format!(
            "{}: {} ({written} bytes), {} trace events of {} recorded{devices}, {} segments, {} stacks; \
             {}{}\n",
            a.output,
            st.bytes(written),
            s.event_count(),
            s.recorded(),
            s.segment_count(),
            s.pool.stacks.len(),
            programs.join("; "),
            if s.ended_in_oom {
                "; the run ended in an out-of-memory error"
            } else {
                ""
            }
        ))?;
    }
    Ok(Exit::Ok)
}
