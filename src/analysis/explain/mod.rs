//! `fragscope explain`: pasted out-of-memory text → figures → diagnosis.
//!
//! Owns reading the text people paste into tickets: OOM messages of every
//! PyTorch wording since 2019 (CUDA, HIP, XPU; with log prefixes, progress-bar
//! residue and terminal line wraps), `torch.cuda.memory_summary()` tables,
//! `torch.cuda.memory_stats()` dumps and pasted `memory_snapshot()` segment
//! dicts. It turns them into [`OomFigures`], runs the diagnosis shared with
//! `fragscope oom` ([`crate::analysis::advice::diagnose`]) and adds what only the text
//! tells: which release wrote it (so suggestions that release lacks are marked
//! as such), which listed process is this one, and figures that cannot all be
//! true. It must not read files or print.
//!
//! Parsing is by field, not by whole-message templates: each figure has its
//! own pattern, and whitespace between words is optional, because terminal
//! wraps cut words and numbers anywhere (`Memory Mana` / `gement`) and
//! continuation lines are joined without inserting anything.

use crate::analysis::advice::{Cause, Diagnosis, OomFigures, Suggestion, diagnose};
use crate::core::style::Style;
use regex::Regex;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::LazyLock;

mod reading;
mod stream;
pub use reading::{parse, parse_reader};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExplainError {
    #[error(
        "no out-of-memory message, memory_summary() table, memory_stats() dump or segment list found in the text"
    )]
    NothingRecognised,
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Cuda,
    Hip,
    Xpu,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cuda => "CUDA",
            Backend::Hip => "HIP (ROCm)",
            Backend::Xpu => "XPU",
        }
    }
}

/// Which release family wrote the message.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Wording {
    /// `(GPU 0; T total capacity; U already allocated; F free; C cached)`:
    /// PyTorch 1.0–1.3, where "cached" is reserved but unallocated memory.
    Cached,
    /// `…; R reserved in total by PyTorch)` without a hint: 1.4–1.9.
    ReservedInTotal,
    /// The same with the `max_split_size_mb` hint: 1.10–2.0.
    ReservedInTotalSplitHint,
    /// `GPU 0 has a total capacty of …` (sic): 2.1.
    Capacty,
    /// `GPU 0 has a total capacity of … of which … is free.`: 2.2 and later.
    Current,
    /// `Tried to allocate more than 1EB memory.`
    MoreThan1Eb,
    /// 2.15: `Allocation was preemptively rejected because it would exceed
    /// per_process_memory_fraction limit.`
    FractionRejection,
    /// `CUDA error: out of memory`: raised by the CUDA runtime (context
    /// creation, a library's workspace), not by the caching allocator.
    RuntimeError,
    /// "out of memory" with none of the known figures.
    Unrecognised,
}

impl Wording {
    pub fn releases(self) -> &'static str {
        match self {
            Wording::Cached => "PyTorch 1.0–1.3",
            Wording::ReservedInTotal => "PyTorch 1.4–1.9",
            Wording::ReservedInTotalSplitHint => "PyTorch 1.10–2.0",
            Wording::Capacty => "PyTorch 2.1",
            Wording::Current => "PyTorch 2.2 or later",
            Wording::MoreThan1Eb => "any release",
            Wording::FractionRejection => "PyTorch 2.15 or later",
            Wording::RuntimeError => "the CUDA runtime",
            Wording::Unrecognised => "an unknown release",
        }
    }
    /// False when the release predates `expandable_segments` (2.1).
    fn has_expandable_segments(self) -> bool {
        !matches!(
            self,
            Wording::Cached | Wording::ReservedInTotal | Wording::ReservedInTotalSplitHint
        )
    }
    /// False when the release predates `max_split_size_mb` (1.10).
    fn has_max_split(self) -> bool {
        !matches!(self, Wording::Cached | Wording::ReservedInTotal)
    }
}

/// The setting the message itself suggests.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Hint {
    /// `…try setting VAR=expandable_segments:True…`; VAR is
    /// `PYTORCH_CUDA_ALLOC_CONF`, or `PYTORCH_ALLOC_CONF` in the newest releases.
    ExpandableSegments {
        var: String,
    },
    MaxSplitSize,
    EmptyCache,
}

/// One entry of the NVML process list of the message.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct ProcessUse {
    /// `None` for "this process".
    pub pid: Option<u64>,
    pub bytes: u64,
    /// Stated ("this process has …") or inferred (see [`OomMessage::self_inferred`]).
    pub this_process: bool,
}

/// One out-of-memory message and the figures it states.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct OomMessage {
    /// 1-based line of the text where the message starts.
    pub line: usize,
    /// The message, continuation lines joined.
    pub text: String,
    pub backend: Option<Backend>,
    pub wording: Wording,
    pub device: Option<i64>,
    /// "Tried to allocate": the size the allocator asked the driver for.
    pub tried: Option<u64>,
    /// 2.15 "Requested size".
    pub requested: Option<u64>,
    pub capacity: Option<u64>,
    pub free: Option<u64>,
    /// Bytes in tensors: "already allocated" (≤ 2.0), or "allocated by
    /// PyTorch" minus private pools (≥ 2.1, whose figure includes them).
    pub allocated: Option<u64>,
    /// "with X allocated in private pools (e.g., CUDA Graphs)": free bytes
    /// cached in private pools.
    pub private_pools: Option<u64>,
    /// "cached" (1.0–1.3) or "reserved by PyTorch but unallocated" (≥ 2.1).
    pub reserved_unallocated: Option<u64>,
    /// Stated ("reserved in total by PyTorch") or derived: allocated +
    /// private pools + reserved-but-unallocated.
    pub reserved: Option<u64>,
    /// "X allowed;": the cap of a per-process memory fraction.
    pub allowed: Option<u64>,
    pub processes: Vec<ProcessUse>,
    /// True when no "this process" entry exists and one `Process N` entry was
    /// taken to be this process (see [`SELF_MARGIN`]).
    pub self_inferred: bool,
    pub hint: Option<Hint>,
}

/// A listed process whose usage exceeds PyTorch's reserved memory by at most
/// this much (the CUDA context, cuBLAS/NCCL workspaces) is taken to be this
/// process when the message has no "this process" entry: inside containers
/// NVML reports host pids, so PyTorch cannot recognise its own.
pub const SELF_MARGIN: u64 = 2 << 30;
/// Two-decimal figures are off by up to half a unit in the last place.
const ROUNDING: f64 = 0.005;

impl OomMessage {
    pub fn this_process(&self) -> Option<u64> {
        self.processes
            .iter()
            .find(|p| p.this_process)
            .map(|p| p.bytes)
    }

    /// Memory of the other listed processes; `None` when the message lists
    /// none (NVML unavailable, or an older wording).
    pub fn other_processes(&self) -> Option<u64> {
        if self.processes.is_empty() {
            return None;
        }
        Some(
            self.processes
                .iter()
                .filter(|p| !p.this_process)
                .map(|p| p.bytes)
                .sum(),
        )
    }

    pub fn figures(&self) -> OomFigures {
        OomFigures {
            requested: self.requested,
            alloc_size: self.tried,
            capacity: self.capacity,
            device_free: self.free,
            reserved: self.reserved,
            allocated: self.allocated,
            process_memory: self.this_process(),
            other_processes: self.other_processes(),
            fraction_limit: self.allowed,
            private_pools: self.private_pools,
            ..Default::default()
        }
    }
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    All,
    Large,
    Small,
}

/// One row of a `memory_summary()` table. Sizes are bytes (the table floors
/// them to its unit, so each is a lower bound within one unit); counts are
/// counts. A cell cut off by the paste is `None`.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct SummaryRow {
    pub metric: String,
    pub pool: Pool,
    pub cur: Option<u64>,
    pub peak: Option<u64>,
    pub total_allocated: Option<u64>,
    pub total_freed: Option<u64>,
}

#[derive(Serialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct MemorySummary {
    pub device: Option<i64>,
    pub ooms: Option<u64>,
    pub alloc_retries: Option<u64>,
    pub rows: Vec<SummaryRow>,
    /// The paste ends inside the table.
    pub truncated: bool,
}

impl MemorySummary {
    pub fn row(&self, metric: &str, pool: Pool) -> Option<&SummaryRow> {
        self.rows
            .iter()
            .find(|r| r.metric == metric && r.pool == pool)
    }
    pub fn cur(&self, metric: &str) -> Option<u64> {
        self.row(metric, Pool::All).and_then(|r| r.cur)
    }
}

/// `torch.cuda.memory_stats()` keys found in the text.
#[derive(Serialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryStats {
    pub values: BTreeMap<String, i64>,
}

impl MemoryStats {
    pub fn get(&self, k: &str) -> Option<i64> {
        self.values.get(k).copied()
    }
    fn bytes(&self, k: &str) -> Option<u64> {
        self.get(k).filter(|v| *v >= 0).map(|v| v as u64)
    }
}

/// Pasted `torch.cuda.memory_snapshot()` segment dicts.
#[derive(Serialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct SegmentsPaste {
    pub segments: u64,
    /// Σ `total_size`.
    pub reserved: u64,
    /// Σ `allocated_size`, when present.
    pub allocated: Option<u64>,
    pub blocks: u64,
    pub largest_inactive_block: Option<u64>,
}

/// Everything recognised in one text.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub messages: Vec<OomMessage>,
    pub summary: Option<MemorySummary>,
    pub stats: Option<MemoryStats>,
    pub segments: Option<SegmentsPaste>,
}

/// One diagnosis: a message (with any table, dump or segments pasted with
/// it) or, with no message, those alone.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Explained {
    /// Index into [`Parsed::messages`]; `None` when no message was pasted.
    pub message: Option<usize>,
    pub figures: OomFigures,
    pub diagnosis: Diagnosis,
    /// What the text adds: the release, this process, rounding, the table's
    /// own signs of fragmentation.
    pub notes: Vec<String>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Explanation {
    pub parsed: Parsed,
    pub items: Vec<Explained>,
}

impl Parsed {
    /// Figures of message `k` (or of the attachments alone), completed by
    /// the table, dump and segments, which describe the same moment when
    /// pasted together; the message wins where both give a figure.
    pub fn figures(&self, k: Option<usize>) -> OomFigures {
        let mut f = k.map(|k| self.messages[k].figures()).unwrap_or_default();
        if let Some(s) = &self.summary {
            f.reserved = f.reserved.or(s.cur("reserved_bytes"));
            f.allocated = f.allocated.or(s.cur("allocated_bytes"));
        }
        if let Some(s) = &self.stats {
            f.reserved = f.reserved.or(s.bytes("reserved_bytes.all.current"));
            f.allocated = f.allocated.or(s.bytes("allocated_bytes.all.current"));
            if f.max_split_size.is_none() {
                f.max_split_size = s.bytes("max_split_size");
            }
        }
        if let Some(g) = &self.segments {
            f.reserved = f.reserved.or(Some(g.reserved));
            f.allocated = f.allocated.or(g.allocated);
            f.largest_free_gap = f.largest_free_gap.or(g.largest_inactive_block);
        }
        f
    }
}

/// Parses the text and explains every message in it; table, dump and
/// segments go with the last message.
pub fn explain(st: &Style, text: &str) -> Result<Explanation, ExplainError> {
    parse(text).map(|p| explain_parsed(st, p))
}

/// Explains every message of a parsed text ([`parse`], [`parse_reader`]).
pub fn explain_parsed(st: &Style, parsed: Parsed) -> Explanation {
    let attachments =
        parsed.summary.is_some() || parsed.stats.is_some() || parsed.segments.is_some();
    let n = parsed.messages.len();
    let mut items = Vec::new();
    for k in 0..n {
        let figures = if k + 1 == n {
            parsed.figures(Some(k))
        } else {
            parsed.messages[k].figures()
        };
        items.push(explained(st, &parsed, Some(k), figures, k + 1 == n));
    }
    if n == 0 && attachments {
        let figures = parsed.figures(None);
        items.push(explained(st, &parsed, None, figures, true));
    }
    Explanation { parsed, items }
}

fn within_rounding(a: u64, b: u64) -> bool {
    let hi = a.max(b) as f64;
    (a as f64 - b as f64).abs() <= hi * ROUNDING * 2.0
}

fn explained(
    st: &Style,
    p: &Parsed,
    k: Option<usize>,
    f: OomFigures,
    with_attachments: bool,
) -> Explained {
    let mut d = diagnose(st, &f);
    let mut notes = Vec::new();
    if let Some(m) = k.map(|k| &p.messages[k]) {
        if !matches!(m.wording, Wording::RuntimeError | Wording::Unrecognised) {
            notes.push(format!(
                "wording of {}{}",
                m.wording.releases(),
                m.backend
                    .map(|b| format!(" ({} build)", b.as_str()))
                    .unwrap_or_default()
            ));
        }
        message_notes(st, m, &f, &mut d, &mut notes);
    }
    if with_attachments {
        if let Some(s) = &p.summary {
            summary_notes(st, s, &mut notes);
        }
        if let Some(s) = &p.stats {
            if let Some(n) = s.get("num_alloc_retries").filter(|n| *n > 0) {
                notes.push(format!(
                    "memory_stats: num_alloc_retries = {n}: the allocator freed its whole cache and retried that often"
                ));
            }
            if let Some(pk) = s.bytes("allocated_bytes.all.peak") {
                notes.push(format!(
                    "memory_stats: peak allocated {}, now {}",
                    st.bytes(pk),
                    f.allocated
                        .map(|b| st.bytes(b))
                        .unwrap_or_else(|| "unknown".into())
                ));
            }
        }
        if let Some(g) = &p.segments {
            notes.push(format!(
                "pasted segments: {} segment(s), {} reserved, {} block(s){}",
                g.segments,
                st.bytes(g.reserved),
                g.blocks,
                g.largest_inactive_block
                    .map(|b| format!(", largest free block {}", st.bytes(b)))
                    .unwrap_or_default()
            ));
        }
    }
    Explained {
        message: k,
        figures: f,
        diagnosis: d,
        notes,
    }
}

fn message_notes(
    st: &Style,
    m: &OomMessage,
    f: &OomFigures,
    d: &mut Diagnosis,
    notes: &mut Vec<String>,
) {
    if let Some(n) = wording_note(m.wording) {
        notes.push(n.into());
    }
    if m.self_inferred
        && let (Some(p), Some(r)) = (m.processes.iter().find(|p| p.this_process), f.reserved)
    {
        notes.push(format!(
            "process {} ({}) is taken to be this one: it holds PyTorch's reserved {} plus {} \
                 (CUDA context and libraries); inside containers NVML lists host pids, so the \
                 message cannot say \"this process\"",
            p.pid.map(|x| x.to_string()).unwrap_or_default(),
            st.bytes(p.bytes),
            st.bytes(r),
            st.bytes(p.bytes.saturating_sub(r))
        ));
    }
    if let (Some(need), Some(c)) = (f.alloc_size.or(f.requested), f.capacity)
        && need > c
        && !d.headline.contains("larger than the device")
    {
        d.details.push(format!(
                "the request ({}) is larger than the device's total capacity ({}): no allocator setting can make it fit",
                st.bytes(need),
                st.bytes(c)
            ));
    }
    if let (Some(c), Some(r)) = (f.capacity, f.reserved)
        && r > c
        && f.device_free == Some(0)
    {
        notes.push(
            "PyTorch holds more than the device has while the device reports 0 bytes free: \
                 typical of Windows, where the driver's system-memory fallback spills GPU \
                 allocations into shared host memory (and runs much slower)"
                .into(),
        );
    }
    if let (Some(c), Some(fr)) = (f.capacity, f.device_free)
        && fr > c
    {
        notes.push(
            "the driver reports more free memory than the device's capacity: its figures \
                 cannot be trusted here (seen with ROCm), so neither can a diagnosis built on them"
                .into(),
        );
    }
    if let (Some(lim), Some(r), Some(need)) = (f.fraction_limit, f.reserved, f.alloc_size) {
        if r + need > lim || within_rounding(r + need, lim) {
            notes.push(format!(
                "a per-process memory fraction caps PyTorch at {}; reserved {} plus the request {} \
                 reach it, at least within the message's rounding: the cap may be what refused the allocation",
                st.bytes(lim),
                st.bytes(r),
                st.bytes(need)
            ));
        } else {
            notes.push(format!(
                "a per-process memory fraction caps PyTorch at {} (set_per_process_memory_fraction or \
                 per_process_memory_fraction)",
                st.bytes(lim)
            ));
        }
    }
    if m.backend == Some(Backend::Xpu) {
        notes.push(
            "XPU build: its message suggests torch.xpu.empty_cache() rather than an allocator \
             setting; check that your release's XPU allocator accepts the settings below"
                .into(),
        );
    }
    release_limits(m, d);
}

/// What the wording itself tells, whatever the figures.
fn wording_note(wording: Wording) -> Option<&'static str> {
    Some(match wording {
        Wording::Cached => {
            "in this wording \"cached\" is memory reserved but not allocated; reserved = already allocated + cached"
        }
        Wording::RuntimeError => {
            "\"CUDA error: out of memory\" comes from the CUDA runtime, not from PyTorch's caching allocator: \
             creating the CUDA context, a library workspace (cuBLAS, cuDNN, NCCL) or a kernel launch failed; \
             the allocator's figures are not in the message, so look at nvidia-smi and what else runs on the GPU"
        }
        Wording::MoreThan1Eb => {
            "a request of more than 1 EiB is a wrong size computation (an overflow or a negative \
             dimension), not a memory shortage"
        }
        Wording::FractionRejection => {
            "the allocator refused the request before asking the driver, because it would exceed \
             the per_process_memory_fraction cap (throw_on_cudamalloc_oom): raise the fraction or \
             reduce the peak"
        }
        Wording::Unrecognised => {
            "\"out of memory\" without the allocator's figures; paste the whole message, or the \
             output of torch.cuda.memory_summary() taken at the failure"
        }
        _ => return None,
    })
}

/// Suggestions the release that wrote the message does not have are marked
/// as not applying, and their variable is the one the message names.
fn release_limits(m: &OomMessage, d: &mut Diagnosis) {
    let var = match &m.hint {
        Some(Hint::ExpandableSegments { var }) => var.clone(),
        _ => "PYTORCH_CUDA_ALLOC_CONF".into(),
    };
    for s in &mut d.suggestions {
        if var != "PYTORCH_CUDA_ALLOC_CONF" {
            s.what = s.what.replace("PYTORCH_CUDA_ALLOC_CONF", &var);
        }
        let needs =
            if s.what.contains("expandable_segments") && !m.wording.has_expandable_segments() {
                Some("2.1")
            } else if s.what.contains("max_split_size_mb") && !m.wording.has_max_split() {
                Some("1.10")
            } else {
                None
            };
        if let Some(v) = needs {
            s.applies = false;
            s.why = format!(
                "needs PyTorch {v} or later, and this message is worded like {}: {}",
                m.wording.releases(),
                s.why
            );
        }
    }
    if d.cause == Cause::Fragmentation && !m.wording.has_expandable_segments() {
        d.suggestions.push(Suggestion {
            what: "upgrade PyTorch to 2.1 or later".into(),
            applies: true,
            why: "expandable_segments, the usual cure for fragmentation, exists from 2.1 on".into(),
        });
    }
}

fn summary_notes(st: &Style, s: &MemorySummary, notes: &mut Vec<String>) {
    let head = format!(
        "memory_summary{}",
        s.device
            .map(|d| format!(" (device {d})"))
            .unwrap_or_default()
    );
    if let Some(n) = s.ooms {
        notes.push(format!("{head}: {n} OOM(s) so far"));
    }
    if let Some(n) = s.alloc_retries.filter(|n| *n > 0) {
        notes.push(format!(
            "{head}: {n} cudaMalloc retries: the allocator freed its whole cache and retried that \
             often, a sign that cached memory was free but not in usable pieces"
        ));
    }
    if let (Some(nr), Some(r)) = (s.cur("inactive_split_bytes"), s.cur("reserved_bytes"))
        && r > 0
    {
        notes.push(format!(
                "{head}: non-releasable memory {} is {:.1}% of reserved {}: free pieces of split \
                 blocks, which cannot be returned to the driver while their segment holds a live tensor",
                st.bytes(nr),
                nr as f64 * 100.0 / r as f64,
                st.bytes(r)
            ));
    }
    if let (Some(a), Some(r)) = (s.cur("allocated_bytes"), s.cur("reserved_bytes"))
        && r > a
    {
        notes.push(format!(
            "{head}: reserved {} vs allocated {}: {} cached but unused",
            st.bytes(r),
            st.bytes(a),
            st.bytes(r - a)
        ));
    }
    if s.truncated {
        notes.push(format!(
            "{head}: the table is cut off; figures from the rows present"
        ));
    }
}

#[cfg(test)]
mod tests;
