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

const SIZE: &str = r"(\d+(?:\.\d+)?)\s*(bytes|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB|B)";

fn re(p: &str) -> Regex {
    Regex::new(&p.replace("{SIZE}", SIZE)).expect("valid pattern")
}

static ANSI: LazyLock<Regex> = LazyLock::new(|| re(r"\x1b\[[0-9;]*[A-Za-z]"));
static START: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(CUDA|HIP|XPU)\s*out\s*of\s*memory|CUDA\s*error:\s*out\s*of\s*memory")
});
static TRIED: LazyLock<Regex> = LazyLock::new(|| re(r"Tried\s*to\s*allocate\s*{SIZE}"));
static TRIED_EB: LazyLock<Regex> =
    LazyLock::new(|| re(r"Tried\s*to\s*allocate\s*more\s*than\s*1\s*EB"));
static DEVICE: LazyLock<Regex> =
    LazyLock::new(|| re(r"\(\s*GPU\s*(\d+)\s*;|GPU\s*(\d+)\s*has\s*a\s*total"));
static CAPACITY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"{SIZE}\s*total\s*capacity|total\s*capac(?:i)?ty\s*of\s*(\d+(?:\.\d+)?)\s*(bytes|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB|B)",
    )
});
static FREE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r";\s*{SIZE}\s*free\s*;|of\s*which\s*(\d+(?:\.\d+)?)\s*(bytes|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB|B)\s*is\s*free",
    )
});
static ALREADY: LazyLock<Regex> = LazyLock::new(|| re(r"{SIZE}\s*already\s*allocated"));
static CACHED: LazyLock<Regex> = LazyLock::new(|| re(r"{SIZE}\s*cached\s*\)"));
static RESERVED_TOTAL: LazyLock<Regex> =
    LazyLock::new(|| re(r"{SIZE}\s*reserved\s*in\s*total\s*by\s*PyTorch"));
static ALLOWED: LazyLock<Regex> = LazyLock::new(|| re(r"{SIZE}\s*allowed\s*;"));
static THIS_PROCESS: LazyLock<Regex> =
    LazyLock::new(|| re(r"this\s*process\s*has\s*{SIZE}\s*memory\s*in\s*use"));
static PROCESS: LazyLock<Regex> =
    LazyLock::new(|| re(r"Process\s*(\d+)\s*has\s*{SIZE}\s*memory\s*in\s*use"));
static BY_PYTORCH: LazyLock<Regex> =
    LazyLock::new(|| re(r"allocated\s*memory\s*{SIZE}\s*is\s*allocated\s*by\s*PyTorch"));
static PRIVATE: LazyLock<Regex> =
    LazyLock::new(|| re(r"with\s*{SIZE}\s*allocated\s*in\s*private\s*pools"));
static UNALLOCATED: LazyLock<Regex> =
    LazyLock::new(|| re(r"{SIZE}\s*is\s*reserved\s*by\s*PyTorch\s*but\s*unallocated"));
static REQUESTED: LazyLock<Regex> = LazyLock::new(|| {
    re(r"Requested\s*size\s*:\s*(\d+(?:\.\d+)?)\s*(bytes|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB|B)?")
});
static PREEMPTIVE: LazyLock<Regex> = LazyLock::new(|| re(r"preemptively\s*rejected"));
static HINT_EXPANDABLE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(PYTORCH_(?:CUDA_|HIP_|XPU_)?ALLOC_CONF)\s*=\s*expandable_segments"));
static HINT_SPLIT: LazyLock<Regex> = LazyLock::new(|| re(r"max_split_size_mb\s*to\s*avoid"));
static HINT_EMPTY: LazyLock<Regex> = LazyLock::new(|| re(r"`?empty_cache`?\s*to\s*release"));
/// A line that continues nothing: tables, tracebacks, section lines, log
/// records of their own.
static STOPPER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"^\s*(\|[=\-]{5}|\|\s*\S|Traceback|During handling|=====|File "|\d{4}-\d{2}-\d{2}[ T]|\[rank\d+\]|(WARNING|ERROR|INFO|DEBUG)\b)"#,
    )
});

static SUMMARY_ROW: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\|\s*(Allocated memory|Active memory|Requested memory|GPU reserved memory|Non-releasable memory|Allocations|Active allocs|GPU reserved segments|Non-releasable allocs|Oversize allocations|Oversize GPU segments|from large pool|from small pool)\s*\|(.*)$",
    )
});
static SUMMARY_DEVICE: LazyLock<Regex> = LazyLock::new(|| re(r"memory summary, device ID (\d+)"));
static SUMMARY_OOMS: LazyLock<Regex> = LazyLock::new(|| re(r"(?:CUDA|HIP|XPU) OOMs:\s*(\d+)"));
static SUMMARY_RETRIES: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:cudaMalloc|hipMalloc|Malloc) retries:\s*(\d+)"));
static CELL_SIZE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(\d+)\s*(B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|PiB)$"));
static CELL_COUNT: LazyLock<Regex> = LazyLock::new(|| re(r"^(\d+)\s*([KM]?)$"));
static STAT_KV: LazyLock<Regex> =
    LazyLock::new(|| re(r#"['"]([a-z_]+(?:\.[a-z0-9_]+){0,3})['"]\s*[,:]\s*(-?\d+)"#));
static SEG_TOTAL: LazyLock<Regex> = LazyLock::new(|| re(r#"['"]total_size['"]\s*:\s*(\d+)"#));
static SEG_ALLOCATED: LazyLock<Regex> =
    LazyLock::new(|| re(r#"['"]allocated_size['"]\s*:\s*(\d+)"#));
static BLOCK_DICT: LazyLock<Regex> = LazyLock::new(|| re(r"\{[^{}]*\}"));
static BLOCK_SIZE: LazyLock<Regex> = LazyLock::new(|| re(r#"['"]size['"]\s*:\s*(\d+)"#));
static BLOCK_STATE: LazyLock<Regex> = LazyLock::new(|| re(r#"['"]state['"]\s*:\s*['"](\w+)['"]"#));

fn unit(u: &str) -> f64 {
    let k: f64 = 1024.0;
    match u {
        "bytes" | "B" => 1.0,
        "KiB" | "KB" => k,
        "MiB" | "MB" => k * k,
        "GiB" | "GB" => k * k * k,
        "TiB" | "TB" => k * k * k * k,
        _ => k * k * k * k * k,
    }
}

/// PyTorch prints binary units in every wording (`MB` in old tables means
/// MiB): value × unit, rounded to a byte.
fn size(num: &str, u: &str) -> Option<u64> {
    let v: f64 = num.parse().ok()?;
    Some((v * unit(u)).round() as u64)
}

/// The first size captured by `r` (which may have several alternatives,
/// each with its own number and unit groups).
fn find_size(r: &Regex, text: &str) -> Option<u64> {
    let c = r.captures(text)?;
    let mut i = 1;
    while i + 1 < c.len() {
        if let (Some(n), Some(u)) = (c.get(i), c.get(i + 1)) {
            return size(n.as_str(), u.as_str());
        }
        i += 2;
    }
    None
}

/// Strips terminal colour codes and carriage returns (progress bars).
fn normalise(text: &str) -> String {
    let t = ANSI.replace_all(text, "");
    t.replace("\r\n", "\n").replace('\r', "\n")
}

pub fn parse(text: &str) -> Result<Parsed, ExplainError> {
    let text = normalise(text);
    let lines: Vec<&str> = text.lines().collect();
    let mut p = Parsed {
        messages: parse_messages(&lines),
        summary: parse_summary(&lines),
        ..Default::default()
    };
    // Keys and dicts may be broken across lines anywhere (even inside a
    // quoted key); they are delimited by quotes and commas, so the lines are
    // simply glued together.
    let flat: String = lines.concat();
    p.stats = parse_stats(&flat);
    p.segments = parse_segments(&flat);
    if p.messages.is_empty() && p.summary.is_none() && p.stats.is_none() && p.segments.is_none() {
        return Err(ExplainError::NothingRecognised);
    }
    Ok(p)
}

fn parse_messages(lines: &[&str]) -> Vec<OomMessage> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(m) = START.find(lines[i]) else {
            i += 1;
            continue;
        };
        let start_line = i;
        let mut text = lines[i][m.start()..].to_string();
        // A second message on the same line (tqdm glues records together) is
        // cut off and looked at on its own below.
        let mut rest_on_line = None;
        if let Some(m2) = START.find(&text[m.len()..]) {
            let cut = m.len() + m2.start();
            rest_on_line = Some(text[cut..].to_string());
            text.truncate(cut);
        }
        i += 1;
        if rest_on_line.is_none() {
            let mut joined = 0;
            while i < lines.len() && joined < 8 {
                let l = lines[i];
                if l.trim().is_empty() || START.is_match(l) || STOPPER.is_match(l) {
                    break;
                }
                // Joined as is: a terminal wrap cuts anywhere, and the
                // patterns accept missing spaces.
                text.push_str(l);
                i += 1;
                joined += 1;
            }
        }
        out.push(message(start_line + 1, &text));
        if let Some(r) = rest_on_line {
            out.push(message(start_line + 1, &r));
        }
    }
    out
}

fn message(line: usize, text: &str) -> OomMessage {
    let backend = START.captures(text).and_then(|c| {
        c.get(1)
            .map(|b| match b.as_str().to_ascii_uppercase().as_str() {
                "HIP" => Backend::Hip,
                "XPU" => Backend::Xpu,
                _ => Backend::Cuda,
            })
            .or(Some(Backend::Cuda))
    });
    let device = DEVICE
        .captures(text)
        .and_then(|c| c.get(1).or(c.get(2)).and_then(|d| d.as_str().parse().ok()));
    let tried = find_size(&TRIED, text);
    let capacity = find_size(&CAPACITY, text);
    let free = find_size(&FREE, text);
    let already = find_size(&ALREADY, text);
    let cached = find_size(&CACHED, text);
    let reserved_total = find_size(&RESERVED_TOTAL, text);
    let by_pytorch = find_size(&BY_PYTORCH, text);
    let private = find_size(&PRIVATE, text);
    let unallocated = find_size(&UNALLOCATED, text);
    let hint = if let Some(c) = HINT_EXPANDABLE.captures(text) {
        Some(Hint::ExpandableSegments {
            var: c[1].to_string(),
        })
    } else if HINT_SPLIT.is_match(text) {
        Some(Hint::MaxSplitSize)
    } else if HINT_EMPTY.is_match(text) {
        Some(Hint::EmptyCache)
    } else {
        None
    };

    let wording = if TRIED_EB.is_match(text) {
        Wording::MoreThan1Eb
    } else if PREEMPTIVE.is_match(text) {
        Wording::FractionRejection
    } else if by_pytorch.is_some() || text.contains("of which") {
        if text.contains("capacty") {
            Wording::Capacty
        } else {
            Wording::Current
        }
    } else if cached.is_some() {
        Wording::Cached
    } else if reserved_total.is_some() {
        if hint == Some(Hint::MaxSplitSize) {
            Wording::ReservedInTotalSplitHint
        } else {
            Wording::ReservedInTotal
        }
    } else if text.contains("error") && text.contains("out of memory") && tried.is_none() {
        Wording::RuntimeError
    } else {
        Wording::Unrecognised
    };

    let (allocated, reserved_unallocated, reserved, private_pools) = match wording {
        Wording::Cached => (
            already,
            cached,
            // 1.0–1.3 printed amount_cached − amount_allocated as "cached";
            // consecutive messages of one run then agree on the total.
            already.zip(cached).map(|(a, c)| a + c),
            None,
        ),
        Wording::ReservedInTotal | Wording::ReservedInTotalSplitHint => {
            (already, None, reserved_total, None)
        }
        _ => {
            // "allocated by PyTorch" includes the private-pool bytes named
            // right after it; reserved = that + "reserved but unallocated".
            let alloc = by_pytorch.map(|u| u.saturating_sub(private.unwrap_or(0)));
            let reserved = by_pytorch.zip(unallocated).map(|(u, r)| u + r);
            (
                alloc.or(already),
                unallocated,
                reserved.or(reserved_total),
                private,
            )
        }
    };

    let mut processes: Vec<ProcessUse> = Vec::new();
    if let Some(b) = find_size(&THIS_PROCESS, text) {
        processes.push(ProcessUse {
            pid: None,
            bytes: b,
            this_process: true,
        });
    }
    for c in PROCESS.captures_iter(text) {
        if let (Ok(pid), Some(b)) = (c[1].parse(), size(&c[2], &c[3])) {
            processes.push(ProcessUse {
                pid: Some(pid),
                bytes: b,
                this_process: false,
            });
        }
    }
    let mut self_inferred = false;
    if !processes.iter().any(|p| p.this_process)
        && let Some(r) = reserved
    {
        // Within rounding below reserved still counts as "at least".
        let slack = (r as f64 * 0.001) as u64 + (10 << 20);
        let best = processes
            .iter()
            .enumerate()
            .filter(|(_, p)| p.bytes + slack >= r && p.bytes <= r + SELF_MARGIN)
            .min_by_key(|(_, p)| (p.bytes.abs_diff(r), p.pid));
        if let Some((k, _)) = best {
            processes[k].this_process = true;
            self_inferred = true;
        }
    }

    OomMessage {
        line,
        text: text.trim_end().to_string(),
        backend,
        wording,
        device,
        tried,
        requested: REQUESTED
            .captures(text)
            .and_then(|c| size(&c[1], c.get(2).map(|u| u.as_str()).unwrap_or("B"))),
        capacity,
        free,
        allocated,
        private_pools,
        reserved_unallocated,
        reserved,
        allowed: find_size(&ALLOWED, text),
        processes,
        self_inferred,
        hint,
    }
}

fn canonical_metric(name: &str) -> &'static str {
    match name {
        "Allocated memory" => "allocated_bytes",
        "Active memory" => "active_bytes",
        "Requested memory" => "requested_bytes",
        "GPU reserved memory" => "reserved_bytes",
        "Non-releasable memory" => "inactive_split_bytes",
        "Allocations" => "allocation",
        "Active allocs" => "active",
        "GPU reserved segments" => "segment",
        "Non-releasable allocs" => "inactive_split",
        "Oversize allocations" => "oversize_allocations",
        _ => "oversize_segments",
    }
}

fn parse_cell(cell: &str, is_bytes: bool) -> Option<u64> {
    let c = cell.trim();
    if is_bytes {
        let m = CELL_SIZE.captures(c)?;
        size(&m[1], &m[2])
    } else {
        let m = CELL_COUNT.captures(c)?;
        let n: u64 = m[1].parse().ok()?;
        Some(match &m[2] {
            "K" => n * 1000,
            "M" => n * 1_000_000,
            _ => n,
        })
    }
}

/// `memory_summary()` rows, with metric names in `memory_stats()` spelling
/// (`allocated_bytes`, `reserved_bytes`, `inactive_split_bytes`, …).
fn parse_summary(lines: &[&str]) -> Option<MemorySummary> {
    let mut s = MemorySummary::default();
    let mut seen = false;
    let mut current: Option<&'static str> = None;
    for l in lines {
        if let Some(c) = SUMMARY_DEVICE.captures(l) {
            s.device = c[1].parse().ok();
            seen = true;
        }
        if let Some(c) = SUMMARY_OOMS.captures(l) {
            s.ooms = c[1].parse().ok();
            seen = true;
        }
        if let Some(c) = SUMMARY_RETRIES.captures(l) {
            s.alloc_retries = c[1].parse().ok();
            seen = true;
        }
        let Some(c) = SUMMARY_ROW.captures(l) else {
            continue;
        };
        seen = true;
        let name = c.get(1).expect("group").as_str();
        let (metric, pool) = match name {
            "from large pool" | "from small pool" => {
                let Some(m) = current else { continue };
                (
                    m,
                    if name == "from large pool" {
                        Pool::Large
                    } else {
                        Pool::Small
                    },
                )
            }
            _ => {
                let m = canonical_metric(name);
                current = Some(m);
                (m, Pool::All)
            }
        };
        let is_bytes = metric.ends_with("_bytes");
        let rest = c.get(2).expect("group").as_str();
        let complete = rest.trim_end().ends_with('|');
        let cells: Vec<&str> = rest.split('|').collect();
        // Without the closing bar the last cell may be cut mid-number.
        let usable = if complete {
            cells.len()
        } else {
            s.truncated = true;
            cells.len().saturating_sub(1)
        };
        let cell = |k: usize| {
            if k < usable {
                parse_cell(cells[k], is_bytes)
            } else {
                None
            }
        };
        s.rows.push(SummaryRow {
            metric: metric.to_string(),
            pool,
            cur: cell(0),
            peak: cell(1),
            total_allocated: cell(2),
            total_freed: cell(3),
        });
    }
    if !seen {
        return None;
    }
    if s.rows.last().is_some_and(|r| r.total_freed.is_none()) {
        s.truncated = true;
    }
    Some(s)
}

const STAT_PREFIXES: &[&str] = &[
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "oversize_allocations",
    "oversize_segments",
    "num_alloc_retries",
    "num_ooms",
    "num_sync_all_streams",
    "num_device_alloc",
    "num_device_free",
    "num_oom_rejections",
    "max_split_size",
];

fn parse_stats(flat: &str) -> Option<MemoryStats> {
    let mut s = MemoryStats::default();
    for c in STAT_KV.captures_iter(flat) {
        let key = &c[1];
        let head = key.split('.').next().unwrap_or("");
        if !STAT_PREFIXES.contains(&head) {
            continue;
        }
        if head == key && !key.starts_with("num_") && key != "max_split_size" {
            continue;
        }
        if let Ok(v) = c[2].parse() {
            s.values.insert(key.to_string(), v);
        }
    }
    // One or two matches could be prose; a dump has many keys.
    (s.values.len() >= 3).then_some(s)
}

fn parse_segments(flat: &str) -> Option<SegmentsPaste> {
    let totals: Vec<u64> = SEG_TOTAL
        .captures_iter(flat)
        .filter_map(|c| c[1].parse().ok())
        .collect();
    if totals.is_empty() {
        return None;
    }
    let allocated: Vec<u64> = SEG_ALLOCATED
        .captures_iter(flat)
        .filter_map(|c| c[1].parse().ok())
        .collect();
    let mut p = SegmentsPaste {
        segments: totals.len() as u64,
        reserved: totals.iter().sum(),
        allocated: (!allocated.is_empty()).then(|| allocated.iter().sum()),
        ..Default::default()
    };
    for d in BLOCK_DICT.find_iter(flat) {
        let d = d.as_str();
        let (Some(sz), Some(st)) = (BLOCK_SIZE.captures(d), BLOCK_STATE.captures(d)) else {
            continue;
        };
        p.blocks += 1;
        if &st[1] == "inactive"
            && let Ok(b) = sz[1].parse::<u64>()
        {
            p.largest_inactive_block = Some(p.largest_inactive_block.unwrap_or(0).max(b));
        }
    }
    Some(p)
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
    let parsed = parse(text)?;
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
    Ok(Explanation { parsed, items })
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
    match m.wording {
        Wording::Cached => notes.push(
            "in this wording \"cached\" is memory reserved but not allocated; reserved = already allocated + cached"
                .into(),
        ),
        Wording::RuntimeError => notes.push(
            "\"CUDA error: out of memory\" comes from the CUDA runtime, not from PyTorch's caching allocator: \
             creating the CUDA context, a library workspace (cuBLAS, cuDNN, NCCL) or a kernel launch failed; \
             the allocator's figures are not in the message, so look at nvidia-smi and what else runs on the GPU"
                .into(),
        ),
        Wording::MoreThan1Eb => notes.push(
            "a request of more than 1 EiB is a wrong size computation (an overflow or a negative \
             dimension), not a memory shortage"
                .into(),
        ),
        Wording::FractionRejection => notes.push(
            "the allocator refused the request before asking the driver, because it would exceed \
             the per_process_memory_fraction cap (throw_on_cudamalloc_oom): raise the fraction or \
             reduce the peak"
                .into(),
        ),
        Wording::Unrecognised => notes.push(
            "\"out of memory\" without the allocator's figures; paste the whole message, or the \
             output of torch.cuda.memory_summary() taken at the failure"
                .into(),
        ),
        _ => {}
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
    // Suggestions the release that wrote the message does not have.
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
mod tests {
    use super::*;

    const GIB: f64 = 1073741824.0;
    const MIB: f64 = 1048576.0;

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(size("12.50", "MiB"), Some((12.5 * MIB) as u64));
        assert_eq!(size("1062", "MB"), Some(1062 << 20));
        assert_eq!(size("0", "bytes"), Some(0));
        assert_eq!(size("1.5", "GiB"), Some((1.5 * GIB) as u64));
    }

    #[test]
    fn wrapped_and_prefixed_current_message() {
        let t = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capac\n\
                 ity of 79.10 GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 78.00 GiB memory in use. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 17.00 GiB is reserved by PyTorch but unallocated.\n";
        let p = parse(t).unwrap();
        assert_eq!(p.messages.len(), 1);
        let m = &p.messages[0];
        assert_eq!(m.wording, Wording::Current);
        assert_eq!(m.device, Some(3));
        assert_eq!(m.capacity, size("79.10", "GiB"));
        assert_eq!(m.reserved, Some((77.0 * GIB) as u64));
        assert_eq!(m.this_process(), Some((78.0 * GIB) as u64));
        assert_eq!(m.other_processes(), Some(0));
        let e = explain(&Style::default(), t).unwrap();
        assert_eq!(
            e.items[0].diagnosis.cause,
            crate::analysis::advice::Cause::Fragmentation
        );
    }

    #[test]
    fn old_releases_do_not_get_settings_they_lack() {
        let t = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.90 GiB total capacity; 10.00 GiB already allocated; 100.00 MiB free; 14.00 GiB reserved in total by PyTorch)";
        let e = explain(&Style::default(), t).unwrap();
        assert_eq!(e.parsed.messages[0].wording, Wording::ReservedInTotal);
        let s = &e.items[0].diagnosis.suggestions;
        assert!(
            s.iter()
                .filter(|s| s.what.contains("expandable_segments") || s.what.contains("max_split"))
                .all(|s| !s.applies && s.why.starts_with("needs PyTorch"))
        );
    }

    #[test]
    fn runtime_errors_and_nonsense() {
        let e = explain(&Style::default(), "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported").unwrap();
        assert_eq!(e.parsed.messages[0].wording, Wording::RuntimeError);
        assert_eq!(
            explain(&Style::default(), "hello world").unwrap_err(),
            ExplainError::NothingRecognised
        );
    }

    #[test]
    fn rare_wordings() {
        let p = parse(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.",
        )
        .unwrap();
        assert_eq!(p.messages[0].wording, Wording::MoreThan1Eb);
        assert_eq!(p.messages[0].tried, None);
        let p = parse(
            "torch.OutOfMemoryError: CUDA out of memory. Allocation was preemptively rejected because it would exceed per_process_memory_fraction limit. Requested size: 2.00 GiB",
        )
        .unwrap();
        assert_eq!(p.messages[0].wording, Wording::FractionRejection);
        assert_eq!(p.messages[0].requested, Some(2 << 30));
        // Two records glued on one line by a progress bar.
        let p = parse("CUDA out of memory. Tried to allocate 2.00 MiB (GPU 1; 1.00 GiB total capacity; 10.00 MiB already allocated; 0 bytes free; 20.00 MiB cached) 50%|### CUDA out of memory. Tried to allocate 4.00 MiB (GPU 1; 1.00 GiB total capacity; 10.00 MiB already allocated; 0 bytes free; 20.00 MiB cached)").unwrap();
        assert_eq!(p.messages.len(), 2);
        assert_eq!(p.messages[1].tried, Some(4 << 20));
        assert_eq!(p.messages[1].device, Some(1));
    }

    #[test]
    fn newest_hint_variable_is_kept_in_suggestions() {
        let t = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 80.00 GiB of which 1.00 GiB is free. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 10.00 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
        let e = explain(&Style::default(), t).unwrap();
        assert!(
            e.items[0].diagnosis.suggestions[0]
                .what
                .starts_with("PYTORCH_ALLOC_CONF=")
        );
    }
}
