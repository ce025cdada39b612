//! The report's verdict: the plain-words summary, most important first,
//! as sentences and the typed lines other findings state (worded by
//! `render::verdict`).

use super::report::{Report, ReportDetail, moment_text};
use crate::analysis::culprits;
use crate::core::style::Style;
use crate::core::text::upper_first;
use crate::core::units::fmt_pct;
use crate::model::profiler::BEFORE_TRACE;

/// What every output on a trace says about the figures it lacks.
pub const NO_LAYOUT: &str = "a profiler trace records allocated and reserved totals but no segment or block layout, so free gaps, the largest free gap, fragmentation and stranded bytes are not measurable for it; record a memory snapshot (torch.cuda.memory._record_memory_history + _dump_snapshot) for those";

/// One line of the verdict: a sentence written here, or the finding of
/// another stage, kept typed for the renderer to word.
#[derive(Debug, Clone, PartialEq)]
pub enum VerdictLine {
    Text(String),
    /// An out-of-memory event of `device`, diagnosed (the what-if answer
    /// for the device follows its last one).
    Oom {
        device: i64,
        text: String,
    },
    /// The culprits of the main device at the moment `at` (in words).
    Culprits {
        device: i64,
        at: String,
        summary: culprits::Summary,
    },
    /// The what-if model's answer for `device`.
    WhatIf {
        device: i64,
        answer: crate::analysis::what_if::ExpandableAnswer,
    },
}

/// The summary in words: every OOM's diagnosis, then, for a snapshot,
/// where the memory sat at the worst moment and the top call site; for a
/// profiler trace, its peaks, the free memory in its cache and the
/// operator holding the most.
pub fn verdict(st: &Style, r: &Report) -> Vec<VerdictLine> {
    match &r.detail {
        ReportDetail::Snapshot { .. } => snapshot_verdict(st, r),
        ReportDetail::Trace { no_gpu, .. } => {
            let mut v = oom_lines(r);
            v.extend(
                trace_verdict(st, r, no_gpu.as_ref())
                    .into_iter()
                    .map(VerdictLine::Text),
            );
            v
        }
    }
}

/// Out-of-memory events the verdict names per device; the device's own
/// section lists each one diagnosed.
const VERDICT_OOMS: usize = 5;

/// One line per out-of-memory event of every device, diagnosed: the first
/// [`VERDICT_OOMS`] of a device, then how many more (a program that catches
/// its OOMs may record one at most events).
fn oom_lines(r: &Report) -> Vec<VerdictLine> {
    let mut v = Vec::new();
    for d in &r.devices {
        let name = match d.traced_detail() {
            Some(t) => t.label.clone(),
            None => format!("Device {}", d.device),
        };
        for o in d.ooms.iter().take(VERDICT_OOMS) {
            v.push(VerdictLine::Oom {
                device: d.device,
                text: format!(
                    "{name}: out of memory at {}. {}.",
                    moment_text(Some(o.mark.event), o.mark.time_us, d.first_time_us),
                    upper_first(&o.diagnosis.headline),
                ),
            });
        }
        if d.ooms.len() > VERDICT_OOMS {
            v.push(VerdictLine::Oom {
                device: d.device,
                text: format!(
                    "{name}: the device's section diagnoses {} more out-of-memory events.",
                    d.ooms.len() - VERDICT_OOMS
                ),
            });
        }
    }
    v
}

fn snapshot_verdict(st: &Style, r: &Report) -> Vec<VerdictLine> {
    let mut v: Vec<VerdictLine> = Vec::new();
    if r.devices.is_empty() {
        v.push(VerdictLine::Text("The snapshot holds no segments and no trace events: nothing was allocated while it was recorded.".into()));
        return v;
    }
    let any_oom = r.devices.iter().any(|d| !d.ooms.is_empty());
    // Without a trace only the recorded state is known: said first, since
    // no peak or out-of-memory event can follow for those devices.
    let untraced: Vec<i64> = r
        .devices
        .iter()
        .filter(|d| !d.traced())
        .map(|d| d.device)
        .collect();
    if untraced.len() == r.devices.len() {
        v.push(VerdictLine::Text(format!(
            "No allocator trace was recorded in this snapshot, so only its recorded state is known: peaks over the run and out-of-memory events are not measurable; {}.",
            crate::timeline::RECORD_A_TRACE
        )));
    }
    v.extend(oom_lines(r));
    if !any_oom {
        if untraced.len() < r.devices.len() {
            v.push(VerdictLine::Text(
                "No out-of-memory event was recorded.".into(),
            ));
        }
        if let Some((d, x)) = r.main_device().and_then(|d| Some((d, d.replayed()?))) {
            let s = &x.moment_stats;
            let free = s.free_bytes();
            let at = if d.traced() {
                format!("at {} ({})", d.moment_text(), d.moment_label)
            } else {
                "in the recorded state".to_string()
            };
            if s.reserved_bytes > 0 {
                v.push(VerdictLine::Text(format!(
                    "Device {} {at}: {} of {} reserved ({}) sat free inside PyTorch's cache, in {} free gaps; the largest gap was {} (fragmentation {}).",
                    d.device,
                    st.bytes(free),
                    st.bytes(s.reserved_bytes),
                    fmt_pct(free as f64 / s.reserved_bytes as f64),
                    s.free_blocks,
                    st.bytes(s.largest_free_block_bytes),
                    fmt_pct(s.fragmentation)
                )));
            }
        }
    }
    if let Some((d, x)) = r.main_device().and_then(|d| Some((d, d.replayed()?))) {
        if d.traced() {
            v.push(VerdictLine::Text(format!(
                "Peak on device {}: {} reserved, {} allocated.",
                d.device,
                st.bytes(x.peak_reserved.reserved_bytes()),
                st.bytes(x.peak_allocated.allocated)
            )));
        } else {
            v.push(VerdictLine::Text(format!(
                "Recorded state of device {}: {} reserved, {} allocated.",
                d.device,
                st.bytes(x.end.reserved_bytes()),
                st.bytes(x.end.allocated)
            )));
        }
        if let Some(summary) = &x.culprit_summary {
            v.push(VerdictLine::Culprits {
                device: d.device,
                at: d.moment_text(),
                summary: summary.clone(),
            });
        }
    }
    // Some devices traced, others not: those others are said last.
    if untraced.len() < r.devices.len() {
        if let [d] = untraced[..] {
            v.push(VerdictLine::Text(format!(
                "Device {d}: no allocator trace was recorded, so only its recorded state is known (no peak, no out-of-memory event)."
            )));
        } else if !untraced.is_empty() {
            v.push(VerdictLine::Text(format!(
                "Devices {}: no allocator trace was recorded, so only their recorded states are known (no peaks, no out-of-memory events).",
                untraced
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    v
}

/// A profiler trace's summary in words, with the snapshot's wording for
/// the figures both have; `no_gpu`: the sentence that says its memory is
/// all CPU memory.
fn trace_verdict(st: &Style, r: &Report, no_gpu: Option<&String>) -> Vec<String> {
    let mut v = Vec::new();
    if r.devices.is_empty() {
        v.push("The trace holds no memory events for the devices asked for.".into());
        return v;
    }
    if let Some(n) = no_gpu {
        // Said first and once: it is why no GPU figure follows.
        v.push(upper_first(n) + ".");
    } else if !r.any_oom() {
        v.push("No out-of-memory event was recorded.".into());
    }
    let Some((d, t)) = r.main_device().and_then(|d| Some((d, d.traced_detail()?))) else {
        return v;
    };
    let s = &t.summary;
    let peak_alloc = s.peak_allocated.as_ref().map_or(0, |p| p.bytes);
    match &s.peak_reserved {
        Some(p) => v.push(format!(
            "Peak on {}: {} reserved, {} allocated.",
            t.label,
            st.bytes(p.bytes),
            st.bytes(peak_alloc)
        )),
        None if t.is_cpu => v.push(format!(
            "Peak on {}: {} allocated (CPU memory is not cached by an allocator, so it has no reserved figure).",
            t.label,
            st.bytes(peak_alloc)
        )),
        None => v.push(format!(
            "Peak on {}: {} allocated (reserved memory is not recorded in this trace).",
            t.label,
            st.bytes(peak_alloc)
        )),
    }
    if let Some(p) = &s.peak_external_free {
        let growth = if s.reserved_growth.is_empty() {
            "reserved memory did not grow during the trace".to_string()
        } else {
            format!(
                "reserved memory grew {} time{}, {} of them while the cache already held the allocation's bytes free (fragmentation, or free memory in another pool or stream)",
                s.reserved_growth.len(),
                if s.reserved_growth.len() == 1 {
                    ""
                } else {
                    "s"
                },
                s.growth_with_free_cache
            )
        };
        v.push(format!(
            "Free external (reserved − allocated: cached by PyTorch, in no live tensor) peaked at {} at {}; {growth}.",
            st.bytes(p.bytes),
            moment_text(
                p.event.map(|e| e as usize),
                p.time_us,
                d.first_time_us
            ),
        ));
    }
    if let Some(ops) = &t.live_by_op {
        let total = t.moment_sample.allocated;
        let share = |b: u64| {
            if total > 0 {
                format!(
                    " ({} of {} allocated)",
                    fmt_pct(b as f64 / total as f64),
                    st.bytes(total)
                )
            } else {
                String::new()
            }
        };
        let older = ops
            .iter()
            .find(|o| o.op == BEFORE_TRACE)
            .map_or(0, |o| o.bytes);
        let top = ops.iter().find(|o| o.op != BEFORE_TRACE);
        let mut s = format!("At {} ({})", d.moment_text(), d.moment_label);
        if older > 0 {
            s.push_str(&format!(
                ", {} was allocated before the trace began{}",
                st.bytes(older),
                share(older)
            ));
        }
        match top {
            Some(t) => s.push_str(&format!(
                "{} {} holds the most live memory of the trace's allocations: {}{}.",
                if older > 0 { "; of the rest," } else { "," },
                t.op,
                st.bytes(t.bytes),
                share(t.bytes)
            )),
            None => s.push_str("; no allocation of the trace is live."),
        }
        v.push(s);
    }
    if no_gpu.is_none() {
        v.push(upper_first(NO_LAYOUT) + ".");
    }
    v
}
