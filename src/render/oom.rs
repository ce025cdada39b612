//! Text of `fragscope oom`: one section per failed allocation, or what the
//! final state says when the file has no `oom` event.

use crate::analysis::advice::Diagnosis;
use crate::analysis::oom::{FinalStateFinding, GapSite, OomFinding, OomReport};
use crate::core::style::Style;

fn gap_line(st: &Style, g: &Option<GapSite>) -> String {
    match g {
        None => "none".into(),
        Some(g) => format!(
            "{} at {:#x}, in the {} segment at {:#x} ({}, stream {}{})",
            st.bytes(g.gap_size),
            g.gap_address,
            g.segment_type,
            g.segment_address,
            st.bytes(g.segment_size),
            if g.stream == 0 {
                "default".to_string()
            } else {
                format!("{:#x}", g.stream)
            },
            if g.pool_id == (0, 0) {
                String::new()
            } else {
                format!(", private pool ({}, {})", g.pool_id.0, g.pool_id.1)
            }
        ),
    }
}

fn diagnosis_text(d: &Diagnosis, out: &mut String) {
    out.push_str(&format!("  verdict: {}\n", d.headline));
    for x in &d.inconsistencies {
        out.push_str(&format!("  inconsistent figures: {x}\n"));
    }
    out.push_str("  what to try:\n");
    for s in &d.suggestions {
        out.push_str(&format!(
            "    [{}] {}: {}\n",
            if s.applies { "yes" } else { "no " },
            s.what,
            s.why
        ));
    }
}

fn oom_text(st: &Style, o: &OomFinding, n: usize, total: usize, out: &mut String) {
    out.push_str(&format!(
        "OOM {n} of {total}: device {}, trace event {}{}\n",
        o.device,
        o.event,
        o.time_us
            .map_or(String::new(), |t| format!(", time_us {t}"))
    ));
    out.push_str(&format!(
        "  request: {} after rounding ({} pool, stream {}); it needed {} of new device memory{}\n",
        st.bytes(o.rounded_request),
        o.pool,
        if o.stream == 0 {
            "default".to_string()
        } else {
            format!("{:#x}", o.stream)
        },
        st.bytes(o.new_memory_needed),
        if o.expandable_segments {
            " at most (expandable segments map pages; a free tail of the mapped range counts against it)"
        } else {
            " (the cudaMalloc of a new segment)"
        }
    ));
    let device = match (o.device_free, o.capacity) {
        (Some(f), Some(c)) => format!("{} free of {} total", st.bytes(f), st.bytes(c)),
        (Some(f), None) => format!(
            "{} free; total not recorded in snapshots (at least {} = reserved + free; --capacity tells the verdict more)",
            st.bytes(f),
            st.bytes(o.capacity_at_least.unwrap_or(f))
        ),
        (None, Some(c)) => format!("{} total; free memory not recorded", st.bytes(c)),
        (None, None) => "free memory and total not recorded".into(),
    };
    out.push_str(&format!("  device: {device}\n"));
    out.push_str(&format!(
        "  reserved by PyTorch: {}; live tensors: {} requested in {} of blocks; pending free: {}\n",
        st.bytes(o.reserved),
        st.bytes(o.allocated),
        st.bytes(o.active),
        st.bytes(o.pending_free)
    ));
    out.push_str(&format!(
        "  free inside reserved memory: {}\n",
        st.bytes(o.free_in_reserved)
    ));
    out.push_str(&format!(
        "  largest free block: {}\n",
        gap_line(st, &o.largest_free_gap)
    ));
    out.push_str(&format!(
        "  largest free block this request could use (same stream and pool): {}\n",
        gap_line(st, &o.largest_usable_gap)
    ));
    out.push_str(&format!(
        "  a free block of {} or more existed: {} ({} anywhere, {} usable by this request)\n",
        st.bytes(o.rounded_request),
        if o.usable_blocks_that_fit > 0 {
            "yes"
        } else {
            "no"
        },
        o.free_blocks_that_fit,
        o.usable_blocks_that_fit
    ));
    diagnosis_text(&o.diagnosis, out);
    if let Some(u) = &o.user_frame {
        out.push_str(&format!("  call site: {u}\n"));
    }
    if o.call_site.is_empty() {
        out.push_str("  stack: none recorded for this event\n");
    } else {
        out.push_str("  stack (innermost first):\n");
        for f in &o.call_site {
            out.push_str(&format!("    {f}\n"));
        }
    }
    if let Some(c) = &o.replay_caveat {
        out.push_str(&format!("  caveat: {c}\n"));
    }
}

fn final_text(st: &Style, f: &FinalStateFinding, out: &mut String) {
    out.push_str(&format!("device {} (final state):\n", f.device));
    for d in &f.diagnosis.details {
        out.push_str(&format!("  {d}\n"));
    }
    out.push_str(&format!(
        "  largest free block: {}\n",
        gap_line(st, &f.largest_free_gap)
    ));
    if f.looks_dumped_at_oom {
        diagnosis_text(&f.diagnosis, out);
    } else {
        out.push_str(&format!("  {}\n", f.diagnosis.headline));
    }
}

pub fn render(st: &Style, file: &str, r: &OomReport) -> String {
    let mut out = format!("{file}\n");
    for (i, o) in r.ooms.iter().enumerate() {
        out.push('\n');
        oom_text(st, o, i + 1, r.ooms.len(), &mut out);
    }
    if r.undiagnosed_ooms > 0 {
        out.push_str(&format!(
            "\n{} more oom event(s), not diagnosed one by one (the first {} of each device are)\n",
            r.undiagnosed_ooms,
            crate::analysis::oom::MAX_DIAGNOSED_OOMS
        ));
    }
    if r.ooms.is_empty() {
        out.push_str("no oom event in any device trace\n");
        for f in &r.final_state {
            out.push('\n');
            final_text(st, f, &mut out);
        }
    }
    out
}
