//! Text and JSON rendering of `fragscope culprits`. Takes finished
//! [`Analysis`] values and the snapshot (for stacks); computes nothing but
//! shares and labels, and returns strings.

use super::stats::opt_bytes;
use super::table::{align_numbers, new_table};
use crate::analysis::culprits::{
    self, Analysis, BlockFinding, Counterfactual, GroupBy, NO_STRANDED, Summary, TraceCulprits,
    Whence,
};
use crate::analysis::findings::Culprits;
use crate::analysis::frames::{CallSite, filtered, frame_label};
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::model::{BlockState, Snapshot, StackId};
use crate::timeline::Origin;
use serde::Serialize;
use serde_json::json;

pub const JSON_SCHEMA: &str = "fragscope.culprits/1";

/// What the command line asked to see.
#[derive(Debug, Clone)]
pub struct View {
    /// How the moment was named (`end`, `oom`, `1234`).
    pub moment: String,
    pub top: usize,
    /// Show the group table instead of the block table.
    pub grouped: bool,
    pub stacks: bool,
}

fn share(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 / total as f64
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn fmt_duration_us(us: i64) -> String {
    let a = us.unsigned_abs() as f64;
    if a < 1e3 {
        format!("{us} µs")
    } else if a < 1e6 {
        format!("{:.1} ms", us as f64 / 1e3)
    } else {
        format!("{:.1} s", us as f64 / 1e6)
    }
}

pub fn fmt_age(b: &BlockFinding) -> String {
    match (b.origin, b.age_events, b.age_us) {
        (Origin::OlderThanTrace, _, _) => "older than trace".into(),
        (Origin::Event(_), Some(n), Some(us)) => {
            format!("{}, {}", plural(n, "event", "events"), fmt_duration_us(us))
        }
        (Origin::Event(_), Some(n), None) => plural(n, "event", "events"),
        (Origin::Event(i), None, _) => format!("from event {i}"),
    }
}

fn fmt_segment(st: &Style, addr: u64, size: u64) -> String {
    format!("{addr:#x} ({})", st.bytes(size))
}

fn moment_line(a: &Analysis, moment: &str) -> String {
    let at = match a.at {
        Some(i) => format!("after event {i}"),
        // No trace events: the recorded state is the only one known.
        None if moment == "end" => {
            return format!("device {} in the recorded state (no trace)", a.device);
        }
        None => "before the first event".into(),
    };
    format!("device {} at {moment} ({at})", a.device)
}

fn target_line(st: &Style, a: &Analysis) -> String {
    match (a.target, a.target_source) {
        (Some(t), Some("failed_request")) => format!(
            "Stranded = free gaps smaller than the failed request of {}, in segments that hold a live block.",
            st.bytes(t)
        ),
        (Some(t), _) => format!(
            "Stranded = free gaps smaller than the {} request, in segments that hold a live block.",
            st.bytes(t)
        ),
        (None, _) => "Stranded = free bytes in segments that hold a live block (they cannot be released; pass --request SIZE to count only gaps too small for SIZE).".into(),
    }
}

fn counterfactual_clause(st: &Style, c: &Counterfactual, target: Option<u64>) -> String {
    let (after, before) = (c.largest_gap_after, c.largest_gap_before);
    let mut s = if after == before {
        format!("the largest gap would still be {}", st.bytes(before))
    } else {
        let (a, b) = st.bytes_pair(after, before);
        let mut s = format!("the largest gap would be {a} instead of {b}");
        if st.below_display_precision(after, before) {
            s.push_str(&format!(
                " (a negligible {})",
                st.delta(after as i128 - before as i128)
            ));
        }
        s
    };
    if let (Some(t), Some(false), Some(after)) =
        (target, c.request_fits_before, c.request_fits_after)
    {
        s.push_str(&format!(
            ", so the {} request {}",
            st.bytes(t),
            if after {
                "would fit"
            } else {
                "would still not fit"
            }
        ));
    }
    s
}

/// The plain-words sentence about the top group.
pub fn summary(st: &Style, s: &Summary) -> String {
    let (n, whence, stranded, segments, without, target) = match s {
        Summary::NothingStranded => {
            return "No live block strands free memory at this moment.".into();
        }
        Summary::OnlyPendingFrees { stranded } => {
            return format!(
                "Only blocks waiting on cross-stream frees strand memory ({}); see below.",
                st.bytes(*stranded)
            );
        }
        Summary::Top {
            blocks,
            whence,
            stranded,
            segments,
            without,
            target,
        } => (*blocks, whence, *stranded, *segments, without, *target),
    };
    let blocks = plural(n, "block", "blocks");
    let verb = if n == 1 { "strands" } else { "strand" };
    let whence = match whence {
        Whence::NoStack => "with no recorded stack".into(),
        Whence::Site(l) => format!("from {l}"),
        Whence::Stack(l) => format!("with {l}"),
        Whence::Segment(l) => format!("in {l}"),
    };
    let mut s = format!("{blocks} {whence} {verb} {}", st.bytes(stranded));
    if let Some(segments) = segments {
        s.push_str(&format!(
            " across {}",
            plural(segments, "segment", "segments")
        ));
    }
    if let Some(c) = without {
        s.push_str(if n == 1 {
            "; without it "
        } else {
            "; without them "
        });
        s.push_str(&counterfactual_clause(st, c, target));
    }
    s.push('.');
    s
}

fn stack_lines(snap: &Snapshot, stack: StackId) -> Vec<String> {
    filtered(snap, stack)
        .into_iter()
        .map(|f| frame_label(snap, f, true))
        .collect()
}

fn site_cell(c: &CallSite) -> String {
    c.label()
}

fn size_cells(st: &Style, b: &BlockFinding) -> [String; 2] {
    [
        b.requested
            .map(|b| st.bytes(b))
            .unwrap_or_else(|| "?".into()),
        st.bytes(b.size),
    ]
}

fn block_table(st: &Style, a: &Analysis, idx: &[usize]) -> String {
    let mut t = new_table(
        st,
        &[
            "rank",
            "call site",
            "requested",
            "rounded",
            "segment",
            "stranded",
            "age",
            "share",
        ],
    );
    for &i in idx {
        let b = &a.blocks[i];
        let [req, size] = size_cells(st, b);
        t.add_row(vec![
            b.rank.map(|r| r.to_string()).unwrap_or_default(),
            site_cell(&b.call_site),
            req,
            size,
            fmt_segment(st, b.segment, b.segment_size),
            st.bytes(b.stranded),
            fmt_age(b),
            fmt_pct(share(b.stranded, a.total_stranded)),
        ]);
    }
    align_numbers(&mut t, 2);
    if let Some(c) = t.column_mut(1) {
        c.set_cell_alignment(comfy_table::CellAlignment::Left);
    }
    t.to_string()
}

fn group_table(st: &Style, a: &Analysis, top: usize) -> String {
    let mut t = new_table(
        st,
        &[
            "rank",
            "group",
            "blocks",
            "requested",
            "rounded",
            "segments",
            "stranded",
            "share",
        ],
    );
    for (i, g) in a.groups.iter().take(top).enumerate() {
        t.add_row(vec![
            (i + 1).to_string(),
            g.label.clone(),
            g.blocks.len().to_string(),
            st.bytes(g.requested),
            st.bytes(g.size),
            g.segments.to_string(),
            st.bytes(g.stranded),
            fmt_pct(share(g.stranded, a.total_stranded)),
        ]);
    }
    align_numbers(&mut t, 2);
    t.to_string()
}

fn more(shown: usize, total: usize) -> String {
    if total > shown {
        format!("  … and {} more (raise --top)\n", total - shown)
    } else {
        String::new()
    }
}

/// The text report of one device: the moment and its figures, the culprits
/// (blocks or groups) with their stacks, then the other findings, each
/// section only when it has something to show.
pub fn render_text(st: &Style, a: &Analysis, snap: &Snapshot, v: &View) -> String {
    let mut out = String::new();
    push_heading(&mut out, st, a, v);
    if v.grouped {
        push_groups(&mut out, st, a, v);
    } else {
        push_culprits(&mut out, st, a, v);
    }
    if v.stacks {
        push_stacks(&mut out, st, a, snap, v);
    }
    push_long_lived_small(&mut out, st, a, v);
    push_almost_empty(&mut out, st, a, v);
    push_rounding_waste(&mut out, st, a, v);
    push_pending_free(&mut out, st, a, v);
    for n in &a.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// The moment, the plain-words summary, the free bytes and what counts as
/// stranded.
fn push_heading(out: &mut String, st: &Style, a: &Analysis, v: &View) {
    out.push_str(&moment_line(a, &v.moment));
    out.push('\n');
    out.push_str(&summary(st, &culprits::summary(a)));
    out.push('\n');
    out.push_str(&format!(
        "Stranded: {} of {} free ({} reserved in {}); largest free gap {}.\n",
        st.bytes(a.total_stranded),
        st.bytes(a.free),
        st.bytes(a.reserved),
        plural(a.segments, "segment", "segments"),
        st.bytes(a.largest_gap),
    ));
    out.push_str(&target_line(st, a));
    out.push('\n');
}

/// The group table (`--group-by`).
fn push_groups(out: &mut String, st: &Style, a: &Analysis, v: &View) {
    out.push_str(&format!(
        "\nCulprits grouped by {}:\n",
        match a.group_by {
            GroupBy::Site => "call site",
            GroupBy::Stack => "stack",
            GroupBy::Segment => "segment",
        }
    ));
    if !a.groups.is_empty() {
        out.push_str(&group_table(st, a, v.top));
        out.push('\n');
        out.push_str(&more(v.top.min(a.groups.len()), a.groups.len()));
    }
}

/// The block table of the ranked culprits, and what removing the top ones
/// would change.
fn push_culprits(out: &mut String, st: &Style, a: &Analysis, v: &View) {
    let culprits = a.culprits as usize;
    if culprits == 0 {
        return;
    }
    out.push_str("\nCulprits (live blocks ranked by the free bytes they strand):\n");
    let idx: Vec<usize> = (0..culprits.min(v.top)).collect();
    out.push_str(&block_table(st, a, &idx));
    out.push('\n');
    out.push_str(&more(idx.len(), culprits));
    if let Some(c) = a
        .without_top_culprits
        .as_ref()
        .filter(|c| c.removed_blocks > 1)
    {
        out.push_str(&format!(
            "Without these {}, {}.\n",
            plural(c.removed_blocks, "block", "blocks"),
            counterfactual_clause(st, c, a.target)
        ));
    }
}

/// The allocation stack of each group or culprit shown (`--stack`).
fn push_stacks(out: &mut String, st: &Style, a: &Analysis, snap: &Snapshot, v: &View) {
    out.push_str("\nAllocation stacks (innermost first, filtered like PyTorch's viewer):\n");
    if v.grouped {
        for (i, g) in a.groups.iter().take(v.top).enumerate() {
            let b = &a.blocks[g.blocks[0]];
            out.push_str(&format!("#{} {}\n", i + 1, g.label));
            push_stack(out, snap, b.stack);
        }
    } else {
        for b in a.ranked().take(v.top) {
            out.push_str(&format!(
                "#{} {} ({} at {:#x})\n",
                b.rank.unwrap_or(0),
                b.call_site.label(),
                st.bytes(b.size),
                b.address
            ));
            push_stack(out, snap, b.stack);
        }
    }
}

fn push_long_lived_small(out: &mut String, st: &Style, a: &Analysis, v: &View) {
    if a.long_lived_small.is_empty() {
        return;
    }
    out.push_str(&format!(
        "\nLong-lived small blocks in large segments (at most 1/{} of the segment; older than the trace or alive for at least half of it):\n",
        crate::analysis::culprits::SMALL_BLOCK_FACTOR
    ));
    let idx: Vec<usize> = a.long_lived_small.iter().take(v.top).copied().collect();
    out.push_str(&block_table(st, a, &idx));
    out.push('\n');
    out.push_str(&more(idx.len(), a.long_lived_small.len()));
}

/// Almost-empty segments and the blocks that keep them.
fn push_almost_empty(out: &mut String, st: &Style, a: &Analysis, v: &View) {
    if a.almost_empty.is_empty() {
        return;
    }
    out.push_str(&format!(
        "\nAlmost-empty segments (live blocks fill less than 1/{}), and what keeps them:\n",
        crate::analysis::culprits::ALMOST_EMPTY_DIVISOR
    ));
    let mut t = new_table(st, &["segment", "type", "live", "free", "kept by"]);
    for s in a.almost_empty.iter().take(v.top) {
        let mut keepers: Vec<String> = s
            .kept_by
            .iter()
            .take(3)
            .map(|&i| {
                let b = &a.blocks[i];
                let pending = if b.state == BlockState::ActivePendingFree {
                    ", pending free"
                } else {
                    ""
                };
                format!("{} ({}{pending})", b.call_site.label(), st.bytes(b.size))
            })
            .collect();
        if s.kept_by.len() > 3 {
            keepers.push(format!("and {} more", s.kept_by.len() - 3));
        }
        t.add_row(vec![
            fmt_segment(st, s.address, s.total_size),
            s.segment_type.as_str().to_string(),
            st.bytes(s.live),
            st.bytes(s.free),
            keepers.join("; "),
        ]);
    }
    align_numbers(&mut t, 2);
    if let Some(c) = t.column_mut(4) {
        c.set_cell_alignment(comfy_table::CellAlignment::Left);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    out.push_str(&more(v.top.min(a.almost_empty.len()), a.almost_empty.len()));
}

/// Internal fragmentation by call site.
fn push_rounding_waste(out: &mut String, st: &Style, a: &Analysis, v: &View) {
    if a.rounding_waste.is_empty() {
        return;
    }
    out.push_str("\nRounding waste by call site (internal fragmentation: rounded − requested):\n");
    let mut t = new_table(
        st,
        &["call site", "blocks", "requested", "rounded", "waste"],
    );
    for w in a.rounding_waste.iter().take(v.top) {
        t.add_row(vec![
            w.call_site.label(),
            w.blocks.to_string(),
            st.bytes(w.requested),
            st.bytes(w.size),
            st.bytes(w.waste),
        ]);
    }
    align_numbers(&mut t, 1);
    out.push_str(&t.to_string());
    out.push('\n');
    out.push_str(&more(
        v.top.min(a.rounding_waste.len()),
        a.rounding_waste.len(),
    ));
}

/// Blocks freed by the program but waiting on another stream, and what to
/// do about them.
fn push_pending_free(out: &mut String, st: &Style, a: &Analysis, v: &View) {
    if a.pending_free.is_empty() {
        return;
    }
    let bytes: u64 = a.pending_free.iter().map(|&i| a.blocks[i].size).sum();
    out.push_str(&format!(
        "\n{} ({}) freed by the program but waiting on another stream (active_pending_free):\n",
        plural(a.pending_free.len() as u64, "block", "blocks"),
        st.bytes(bytes)
    ));
    let mut t = new_table(
        st,
        &["call site", "rounded", "segment", "stream", "stranded"],
    );
    for &i in a.pending_free.iter().take(v.top) {
        let b = &a.blocks[i];
        t.add_row(vec![
            b.call_site.label(),
            st.bytes(b.size),
            fmt_segment(st, b.segment, b.segment_size),
            if b.stream == 0 {
                "default".into()
            } else {
                format!("{:#x}", b.stream)
            },
            st.bytes(b.stranded),
        ]);
    }
    align_numbers(&mut t, 1);
    out.push_str(&t.to_string());
    out.push('\n');
    out.push_str(&more(v.top.min(a.pending_free.len()), a.pending_free.len()));
    out.push_str(
        "  These return to the cache only when the other stream's recorded events complete \
         (record_stream); synchronise that stream, or keep the tensor alive until its work \
         is done instead of calling record_stream.\n",
    );
}

fn push_stack(out: &mut String, snap: &Snapshot, stack: StackId) {
    let lines = stack_lines(snap, stack);
    if lines.is_empty() {
        out.push_str("    (no stack recorded)\n");
    }
    for l in lines {
        out.push_str(&format!("    {l}\n"));
    }
}

#[derive(Serialize)]
struct JsonBlock<'a> {
    #[serde(flatten)]
    block: &'a BlockFinding,
    call_site_label: String,
    share: f64,
    /// Filtered like the viewer, innermost first, `file:line:name`.
    stack: Vec<String>,
}

#[derive(Serialize)]
struct JsonGroup<'a> {
    label: &'a str,
    call_site: &'a CallSite,
    blocks: usize,
    addresses: Vec<u64>,
    stranded: u64,
    size: u64,
    requested: u64,
    segments: u64,
    share: f64,
}

#[derive(Serialize)]
struct JsonAlmostEmpty<'a> {
    #[serde(flatten)]
    segment: &'a crate::analysis::culprits::AlmostEmptySegment,
    kept_by_addresses: Vec<u64>,
    kept_by_sites: Vec<String>,
}

#[derive(Serialize)]
struct JsonDevice<'a> {
    device: i64,
    at: Option<usize>,
    time_us: Option<i64>,
    target: Option<u64>,
    target_source: Option<&'static str>,
    segments: u64,
    reserved: u64,
    free: u64,
    total_stranded: u64,
    largest_gap: u64,
    summary: String,
    culprit_count: u64,
    culprits: Vec<JsonBlock<'a>>,
    group_by: GroupBy,
    group_count: usize,
    groups: Vec<JsonGroup<'a>>,
    without_top_group: &'a Option<Counterfactual>,
    without_top_culprits: &'a Option<Counterfactual>,
    long_lived_small_count: usize,
    long_lived_small: Vec<JsonBlock<'a>>,
    almost_empty_count: usize,
    almost_empty: Vec<JsonAlmostEmpty<'a>>,
    rounding_waste_count: usize,
    rounding_waste: &'a [crate::analysis::culprits::RoundingWaste],
    pending_free_count: usize,
    pending_free: Vec<JsonBlock<'a>>,
    notes: &'a [String],
}

#[derive(Serialize)]
struct JsonReport<'a> {
    schema: &'static str,
    file: &'a str,
    moment: &'a str,
    top: usize,
    devices: Vec<JsonDevice<'a>>,
}

fn json_block<'a>(a: &'a Analysis, snap: &Snapshot, i: usize) -> JsonBlock<'a> {
    let b = &a.blocks[i];
    JsonBlock {
        block: b,
        call_site_label: b.call_site.label(),
        share: share(b.stranded, a.total_stranded),
        stack: stack_lines(snap, b.stack),
    }
}

/// `fragscope culprits --json` (schema `fragscope.culprits/1`): every list
/// cut to `top` entries, with a count of the whole.
pub fn render_json(
    st: &Style,
    file: &str,
    analyses: &[Analysis],
    snap: &Snapshot,
    v: &View,
) -> String {
    let devices = analyses
        .iter()
        .map(|a| {
            let top = v.top;
            JsonDevice {
                device: a.device,
                at: a.at,
                time_us: a.time_us,
                target: a.target,
                target_source: a.target_source,
                segments: a.segments,
                reserved: a.reserved,
                free: a.free,
                total_stranded: a.total_stranded,
                largest_gap: a.largest_gap,
                summary: summary(st, &culprits::summary(a)),
                culprit_count: a.culprits,
                culprits: (0..(a.culprits as usize).min(top))
                    .map(|i| json_block(a, snap, i))
                    .collect(),
                group_by: a.group_by,
                group_count: a.groups.len(),
                groups: a
                    .groups
                    .iter()
                    .take(top)
                    .map(|g| JsonGroup {
                        label: &g.label,
                        call_site: &g.call_site,
                        blocks: g.blocks.len(),
                        addresses: g.blocks.iter().map(|&i| a.blocks[i].address).collect(),
                        stranded: g.stranded,
                        size: g.size,
                        requested: g.requested,
                        segments: g.segments,
                        share: share(g.stranded, a.total_stranded),
                    })
                    .collect(),
                without_top_group: &a.without_top_group,
                without_top_culprits: &a.without_top_culprits,
                long_lived_small_count: a.long_lived_small.len(),
                long_lived_small: a
                    .long_lived_small
                    .iter()
                    .take(top)
                    .map(|&i| json_block(a, snap, i))
                    .collect(),
                almost_empty_count: a.almost_empty.len(),
                almost_empty: a
                    .almost_empty
                    .iter()
                    .take(top)
                    .map(|s| JsonAlmostEmpty {
                        segment: s,
                        kept_by_addresses: s.kept_by.iter().map(|&i| a.blocks[i].address).collect(),
                        kept_by_sites: s
                            .kept_by
                            .iter()
                            .map(|&i| a.blocks[i].call_site.label())
                            .collect(),
                    })
                    .collect(),
                rounding_waste_count: a.rounding_waste.len(),
                rounding_waste: &a.rounding_waste[..a.rounding_waste.len().min(top)],
                pending_free_count: a.pending_free.len(),
                pending_free: a
                    .pending_free
                    .iter()
                    .take(top)
                    .map(|&i| json_block(a, snap, i))
                    .collect(),
                notes: &a.notes,
            }
        })
        .collect();
    let r = JsonReport {
        schema: JSON_SCHEMA,
        file,
        moment: &v.moment,
        top: v.top,
        devices,
    };
    serde_json::to_string_pretty(&r).expect("culprits JSON always serialises") + "\n"
}

/// `fragscope culprits` on a trace: live bytes by operator at the moment,
/// in the snapshot output's units, and why stranded bytes are missing.
pub fn trace_culprits_text(
    st: &Style,
    c: &TraceCulprits,
    first_time_us: Option<i64>,
    top: usize,
) -> String {
    let at = match c.at {
        Some(i) => format!(
            "after event {i}, {}",
            super::timeline::fmt_time(c.time_us, first_time_us)
        ),
        None => "before the first event".into(),
    };
    let mut out = format!("{} at {} ({at})\n", c.device, c.moment);
    out.push_str(&format!(
        "Live: {} allocated, {} reserved, {} free external (reserved − allocated).\n",
        st.bytes(c.allocated),
        opt_bytes(st, c.reserved),
        opt_bytes(st, c.external_free)
    ));
    out.push_str(&format!(
        "{}.\n",
        crate::core::text::upper_first(NO_STRANDED)
    ));
    match &c.live_by_op {
        None => out.push_str(
            "Live bytes by operator: not measurable for this trace: its memory events carry no address (2021 schema), so allocations cannot be paired with their frees.\n",
        ),
        Some(v) if v.is_empty() => out.push_str("No live allocation at this moment.\n"),
        Some(v) => {
            out.push_str("Live bytes by operator (the call site of a trace):\n");
            let mut t = new_table(st, &["rank", "operator", "live", "share", "allocations"]);
            for (i, s) in v.iter().take(top).enumerate() {
                t.add_row(vec![
                    (i + 1).to_string(),
                    s.op.clone(),
                    st.bytes(s.bytes),
                    if c.allocated > 0 {
                        fmt_pct(s.bytes as f64 / c.allocated as f64)
                    } else {
                        String::new()
                    },
                    if s.events == 0 {
                        "-".into()
                    } else {
                        s.events.to_string()
                    },
                ]);
            }
            align_numbers(&mut t, 2);
            out.push_str(&format!("{t}\n"));
            out.push_str(&more(top.min(v.len()), v.len()));
        }
    }
    out
}

pub fn trace_culprits_json(file: &str, all: &[TraceCulprits]) -> String {
    let v = json!({
        "schema": "fragscope.trace-culprits/1",
        "file": file,
        "kind": "profiler_trace",
        "devices": all,
    });
    serde_json::to_string_pretty(&v).expect("serialisable") + "\n"
}

/// `fragscope culprits`, whatever the input: each device's text.
pub fn findings_text(st: &Style, c: &Culprits, v: &View) -> String {
    let text: Vec<String> = match c {
        Culprits::Snapshot { analyses, .. } if analyses.is_empty() => {
            return "The snapshot holds no segments: nothing is reserved, so nothing is stranded.\n"
                .into();
        }
        Culprits::Snapshot { snap, analyses } => (analyses.iter())
            .map(|r| render_text(st, r, snap, v))
            .collect(),
        Culprits::Trace(found) => (found.iter())
            .map(|(c, t0)| trace_culprits_text(st, c, *t0, v.top))
            .collect(),
    };
    text.join("\n")
}

/// `fragscope culprits --json`, whatever the input.
pub fn findings_json(st: &Style, file: &str, c: &Culprits, v: &View) -> String {
    match c {
        Culprits::Snapshot { snap, analyses } => render_json(st, file, analyses, snap, v),
        Culprits::Trace(found) => {
            let all: Vec<_> = found.iter().map(|x| x.0.clone()).collect();
            trace_culprits_json(file, &all)
        }
    }
}
