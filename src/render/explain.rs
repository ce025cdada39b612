//! Text and JSON of `fragscope explain`.

use crate::analysis::explain::{Explained, Explanation};
use crate::core::style::Style;

/// Schema of `fragscope explain --json`.
pub const EXPLAIN_SCHEMA: &str = "fragscope.explain/1";
/// Longest excerpt of a message quoted back.
const QUOTE: usize = 240;

fn quote(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > QUOTE {
        let cut: String = one.chars().take(QUOTE).collect();
        format!("{cut}…")
    } else {
        one
    }
}

pub fn text(st: &Style, e: &Explanation) -> String {
    let mut out = String::new();
    let n = e.items.len();
    for (i, it) in e.items.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        item(st, &mut out, e, it, i, n);
    }
    out
}

fn item(st: &Style, out: &mut String, e: &Explanation, it: &Explained, i: usize, n: usize) {
    match it.message.map(|k| &e.parsed.messages[k]) {
        Some(m) => {
            let which = if n > 1 {
                format!("Message {} of {n}", i + 1)
            } else {
                "Message".to_string()
            };
            out.push_str(&format!(
                "{which} (line {}):\n  {}\n",
                m.line,
                quote(&m.text)
            ));
        }
        None => {
            let mut what = Vec::new();
            if e.parsed.summary.is_some() {
                what.push("memory_summary() table");
            }
            if e.parsed.stats.is_some() {
                what.push("memory_stats() values");
            }
            if e.parsed.segments.is_some() {
                what.push("memory_snapshot() segments");
            }
            out.push_str(&format!("{} (no OOM message):\n", what.join(", ")));
        }
    }

    let f = &it.figures;
    let m = it.message.map(|k| &e.parsed.messages[k]);
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: Option<u64>| {
        if let Some(v) = v {
            rows.push((k.to_string(), st.bytes(v)));
        }
    };
    add("tried to allocate", f.alloc_size);
    add("requested", f.requested);
    add("device capacity", f.capacity);
    add("free on the device", f.device_free);
    add("memory fraction cap", f.fraction_limit);
    add("reserved by PyTorch", f.reserved);
    add("allocated to tensors", f.allocated);
    add("private pools (graphs)", f.private_pools);
    add(
        "reserved but unallocated",
        m.and_then(|m| m.reserved_unallocated),
    );
    add("largest free block", f.largest_free_gap);
    add("this process in all", f.process_memory);
    add("other processes", f.other_processes.filter(|&o| o > 0));
    if !rows.is_empty() {
        out.push_str("\nFigures read:\n");
        let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        for (k, v) in &rows {
            out.push_str(&format!("  {k:<w$}  {v:>12}\n"));
        }
    }

    let d = &it.diagnosis;
    out.push_str(&format!(
        "\nCause: {}\n  {}\n",
        d.cause.as_str(),
        d.headline
    ));
    for x in &d.details {
        out.push_str(&format!("  - {x}\n"));
    }
    if !d.inconsistencies.is_empty() {
        out.push_str("\nFigures that cannot all be true:\n");
        for x in &d.inconsistencies {
            out.push_str(&format!("  - {x}\n"));
        }
    }
    if !it.notes.is_empty() {
        out.push_str("\nNotes:\n");
        for x in &it.notes {
            out.push_str(&format!("  - {x}\n"));
        }
    }
    out.push_str("\nWhat to try:\n");
    let mut sorted: Vec<_> = d.suggestions.iter().collect();
    // Applicable first; otherwise the diagnosis's own order.
    sorted.sort_by_key(|s| !s.applies);
    for s in sorted {
        out.push_str(&format!(
            "  {} {}\n      {}\n",
            if s.applies { "try " } else { "skip" },
            s.what,
            s.why
        ));
    }
}

pub fn json(e: &Explanation) -> String {
    let v = serde_json::json!({
        "schema": EXPLAIN_SCHEMA,
        "parsed": e.parsed,
        "items": e.items,
    });
    serde_json::to_string_pretty(&v).expect("serialisable") + "\n"
}
