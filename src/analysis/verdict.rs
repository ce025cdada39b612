//! The report's verdict: the plain-words summary, most important first,
//! as sentences and the typed lines other findings state (worded by
//! `render::verdict`).

use super::report::{Report, moment_text};
use crate::analysis::culprits;
use crate::core::style::Style;
use crate::core::text::upper_first;
use crate::core::units::fmt_pct;

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

/// The summary in words: every OOM's diagnosis, else where the memory sat
/// at the worst moment, then the top call site.
pub fn verdict(st: &Style, r: &Report) -> Vec<VerdictLine> {
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
    for d in &r.devices {
        for o in &d.ooms {
            v.push(VerdictLine::Oom {
                device: d.device,
                text: format!(
                    "Device {}: out of memory at {}. {}.",
                    d.device,
                    moment_text(Some(o.mark.event), o.mark.time_us, d.first_time_us),
                    upper_first(&o.diagnosis.headline),
                ),
            });
        }
    }
    if !any_oom {
        if untraced.len() < r.devices.len() {
            v.push(VerdictLine::Text(
                "No out-of-memory event was recorded.".into(),
            ));
        }
        if let Some(d) = r.main_device() {
            let s = &d.moment_stats;
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
    if let Some(d) = r.main_device() {
        if d.traced() {
            v.push(VerdictLine::Text(format!(
                "Peak on device {}: {} reserved, {} allocated.",
                d.device,
                st.bytes(d.peak_reserved.reserved_bytes()),
                st.bytes(d.peak_allocated.allocated)
            )));
        } else {
            v.push(VerdictLine::Text(format!(
                "Recorded state of device {}: {} reserved, {} allocated.",
                d.device,
                st.bytes(d.end.reserved_bytes()),
                st.bytes(d.end.allocated)
            )));
        }
        if let Some(summary) = &d.culprit_summary {
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
