//! A text map of segments in the spirit of `_memory_viz stats`: each segment of
//! at least one 20 MiB page is a row of page cells. A cell shows the live
//! block that fills most of it (a–z, cycling), a digit 0–9 for the tenths of
//! the page that live blocks fill when several share it (`*` when full), and a
//! space when it is free. Rows are sorted by (size, live bytes).

use crate::core::style::Style;
use crate::model::*;

pub const PAGE: u64 = 20 << 20;
/// Rows longer than this many cells are drawn with larger cells (a whole
/// number of pages each), and say so.
pub const MAX_CELLS: u64 = 100;

pub fn segment_map<'a>(
    st: &Style,
    segs: impl IntoIterator<Item = &'a Segment>,
    max_rows: usize,
) -> String {
    let live = |s: &Segment| -> u64 {
        s.blocks
            .iter()
            .filter(|b| b.state == BlockState::ActiveAllocated)
            .fold(0u64, |a, b| {
                a.saturating_add(b.requested_or_size().min(b.size))
            })
    };
    // Only the rows drawn are sorted, each key (a walk of the segment's
    // blocks) computed once rather than at every comparison.
    let mut keyed: Vec<((u64, u64, u64), &Segment)> = segs
        .into_iter()
        .filter(|s| s.total_size >= PAGE)
        .map(|s| ((s.total_size, live(s), s.address), s))
        .collect();
    keyed.sort_by_key(|&(k, _)| k);
    let big: Vec<&Segment> = keyed.into_iter().map(|(_, s)| s).collect();
    let mut out = String::new();
    out.push_str(&format!(
        "Segments of at least {} (one cell per {} page; a-z a live block, 0-9 tenths filled by several, * full, space free):\n",
        st.bytes(PAGE),
        st.bytes(PAGE)
    ));
    let skip = big.len().saturating_sub(max_rows);
    if skip > 0 {
        out.push_str(&format!("  ({skip} smaller segments not drawn)\n"));
    }
    for s in big.iter().skip(skip) {
        let per_cell = s.total_size.div_ceil(PAGE).div_ceil(MAX_CELLS).max(1);
        let cell = PAGE.saturating_mul(per_cell);
        let pages = s.total_size.div_ceil(cell) as usize;
        let mut cells = vec![' '; pages];
        let mut frac = vec![0f64; pages];
        let mut allocated = 0u64;
        let mut internal = 0u64;
        let mut external = 0u64;
        let mut i = 0usize;
        for b in &s.blocks {
            if b.state != BlockState::ActiveAllocated {
                external = external.saturating_add(b.size);
                continue;
            }
            let req = b.requested_or_size().min(b.size);
            allocated = allocated.saturating_add(req);
            internal = internal.saturating_add(b.size - req);
            let start = b.address.saturating_sub(s.address);
            let end = start.saturating_add(req);
            if req == 0 {
                continue;
            }
            let first = (start / cell) as usize;
            let last = ((end - 1) / cell) as usize;
            let letter = (b'a' + (i % 26) as u8) as char;
            i += 1;
            for j in first..=last.min(pages - 1) {
                let lo = start.max((j as u64).saturating_mul(cell));
                let hi = end.min((j as u64 + 1).saturating_mul(cell));
                frac[j] += (hi - lo) as f64 / cell as f64;
                cells[j] = if cells[j] == ' ' {
                    letter
                } else {
                    let t = ((frac[j] * 10.0) as usize).min(10);
                    b"0123456789*"[t] as char
                };
            }
        }
        let body: String = cells.into_iter().collect();
        let mut stream = if s.stream != 0 {
            format!(", stream {:#x}", s.stream)
        } else {
            String::new()
        };
        if per_cell > 1 {
            stream.push_str(&format!(" (1 cell = {})", st.bytes(cell)));
        }
        let free = external.saturating_add(internal);
        let internal_pct = if free > 0 {
            internal as f64 * 100.0 / free as f64
        } else {
            0.0
        };
        out.push_str(&format!(
            "[{body}] {} total, {} allocated, {} free ({internal_pct:.0}% internal){stream}\n",
            st.bytes(s.total_size),
            st.bytes(allocated),
            st.bytes(free),
        ));
    }
    out
}
