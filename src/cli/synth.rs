//! `fragscope synth --events N --seed S -o FILE`: a synthetic snapshot of a
//! training run, written as PyTorch's `_dump_snapshot` writes one.

use super::common::{Exit, Global, print};
use crate::synth::{SynthOptions, generate_with_progress, write_pickle};
use crate::units::fmt_bytes;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace entries the snapshot keeps (the ring buffer's max_entries);
    /// about 200 bytes of pickle each.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub events: u64,
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
    let opts = SynthOptions {
        events: a.events,
        seed: a.seed,
        capacity: a.capacity,
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
    crate::output::write_atomic_with(&a.output, &[], |w| {
        written = write_pickle(&s, w)?;
        Ok(())
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if a.output != "-" {
        let m = &s.workload.shape;
        print(&format!(
            "{}: {} ({written} bytes), {} trace events of {} recorded, {} segments, {} stacks; \
             model: {} layers x {} hidden, batch {} x {}..{} tokens{}\n",
            a.output,
            fmt_bytes(written),
            s.events.len(),
            s.recorded,
            s.segments.len(),
            s.workload.pool.stacks.len(),
            m.layers,
            m.hidden,
            m.batch,
            m.seq_min,
            m.seq_max,
            if s.ended_in_oom {
                "; the run ended in an out-of-memory error"
            } else {
                ""
            }
        ))?;
    }
    Ok(Exit::Ok)
}
