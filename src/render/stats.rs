//! Text rendering of `fragscope stats`.

use super::table::{align_numbers, fragmentation_tone, new_table, toned};
use crate::analysis::stats::{FileStats, StateStats};
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use comfy_table::Cell;

pub fn stat_cells(st: &Style, s: &StateStats) -> Vec<Cell> {
    vec![
        Cell::new(s.segments),
        Cell::new(s.blocks),
        Cell::new(st.bytes(s.reserved_bytes)),
        Cell::new(st.bytes(s.allocated_bytes)),
        Cell::new(st.bytes(s.internal_free_bytes)),
        Cell::new(st.bytes(s.external_free_bytes)),
        Cell::new(st.bytes(s.pending_free_bytes)),
        Cell::new(st.bytes(s.largest_free_block_bytes)),
        Cell::new(s.free_blocks),
        toned(
            fmt_pct(s.fragmentation),
            fragmentation_tone(s.fragmentation),
        ),
    ]
}

pub const STAT_HEADER: [&str; 10] = [
    "segments",
    "blocks",
    "reserved",
    "allocated",
    "free internal",
    "free external",
    "pending free",
    "largest free",
    "free blocks",
    "fragmentation",
];

pub fn render(st: &Style, fs: &FileStats, segmap: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!("{} ({})\n", fs.file, fs.format));
    let mut h = vec!["device"];
    h.extend(STAT_HEADER);
    let mut t = new_table(st, &h);
    for d in &fs.devices {
        let mut row = vec![Cell::new(d.device)];
        row.extend(stat_cells(st, &d.stats));
        t.add_row(row);
    }
    if fs.devices.len() > 1 {
        let mut row = vec![Cell::new("all")];
        row.extend(stat_cells(st, &fs.totals));
        t.add_row(row);
    }
    align_numbers(&mut t, 1);
    out.push_str(&t.to_string());
    out.push('\n');

    let any_pools = fs.devices.iter().any(|d| d.pools.len() > 1);
    if any_pools {
        out.push_str("\nBy pool and stream:\n");
        let mut h = vec!["device", "pool", "stream", "type"];
        h.extend(STAT_HEADER);
        let mut t = new_table(st, &h);
        for d in &fs.devices {
            for p in &d.pools {
                let mut row = vec![
                    Cell::new(d.device),
                    Cell::new(format!("({}, {})", p.pool_id.0, p.pool_id.1)),
                    Cell::new(if p.stream == 0 {
                        "default".into()
                    } else {
                        format!("{:#x}", p.stream)
                    }),
                    Cell::new(p.segment_type),
                ];
                row.extend(stat_cells(st, &p.stats));
                t.add_row(row);
            }
        }
        align_numbers(&mut t, 4);
        out.push_str(&t.to_string());
        out.push('\n');
    }

    out.push_str("\nTrace:\n");
    if fs.trace_coverage.is_empty() {
        out.push_str(
            "  no device_traces in this file (recorded without history, or a bare segment list)\n",
        );
    } else {
        let mut t = new_table(
            st,
            &["device", "events", "actions", "time span", "coverage"],
        );
        for c in &fs.trace_coverage {
            let actions = c
                .actions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ");
            let span = match (c.first_time_us, c.last_time_us) {
                // In f64: a hostile file's times may be i64::MIN and i64::MAX.
                (Some(a), Some(b)) => format!("{:.3} s", (b as f64 - a as f64) / 1e6),
                _ => "no time_us".into(),
            };
            let cov = if c.events == 0 {
                "empty".to_string()
            } else if c.single_entry {
                "1 entry (recorded with enabled=\"state\"?)".to_string()
            } else if c.starts_mid_run {
                format!(
                    "starts mid-run: {} frees of blocks allocated before the first entry (ring buffer full, or recording started late)",
                    c.frees_without_alloc
                )
            } else {
                "complete from the first allocation".to_string()
            };
            t.add_row(vec![
                Cell::new(c.device),
                Cell::new(c.events),
                Cell::new(if actions.is_empty() {
                    "-".into()
                } else {
                    actions
                }),
                Cell::new(span),
                Cell::new(cov),
            ]);
        }
        out.push_str(&t.to_string());
        out.push('\n');
    }
    if !fs.oom_events.is_empty() {
        out.push_str("\nOut-of-memory events:\n");
        for o in &fs.oom_events {
            out.push_str(&format!(
                "  device {} event #{}: tried {} with {} free on the device\n",
                o.device,
                o.index,
                st.bytes(o.size),
                o.device_free
                    .map(|b| st.bytes(b))
                    .unwrap_or_else(|| "unknown".into())
            ));
        }
    }
    if let Some(c) = &fs.allocator_conf
        && !c.is_empty()
    {
        out.push_str(&format!("\nPYTORCH_CUDA_ALLOC_CONF: {c}\n"));
    }
    out.push('\n');
    out.push_str(segmap);
    out.push_str(&format!(
        "segments: {}\ntotal_reserved: {}\ntotal_allocated: {}\ntotal_free: {} ({} internal, {} external)\n",
        fs.totals.segments,
        st.bytes(fs.totals.reserved_bytes),
        st.bytes(fs.totals.allocated_bytes),
        st.bytes(fs.totals.free_bytes()),
        st.bytes(fs.totals.internal_free_bytes),
        st.bytes(fs.totals.external_free_bytes),
    ));
    for w in &fs.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}
