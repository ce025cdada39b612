//! Reading the pasted text: one pattern a figure; messages, `memory_summary()` tables, `memory_stats()` dumps and segment dicts.

use super::stream::{Glued, Piece, Pieces};
use super::*;

pub(super) const SIZE: &str = r"(\d+(?:\.\d+)?)\s*(bytes|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB|B)";

pub(super) fn re(p: &str) -> Regex {
    Regex::new(&p.replace("{SIZE}", SIZE)).expect("valid pattern")
}

/// Terminal colour codes, as the stream leaves them out
/// ([`super::stream::Uncoloured`]); the tests' reading of a whole text uses it.
#[cfg(test)]
pub(super) static ANSI: LazyLock<Regex> = LazyLock::new(|| re(r"\x1b\[[0-9;]*[A-Za-z]"));
pub(super) static START: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(CUDA|HIP|XPU)\s*out\s*of\s*memory|CUDA\s*error:\s*out\s*of\s*memory")
});
pub(super) static TRIED: LazyLock<Regex> = LazyLock::new(|| re(r"Tried\s*to\s*allocate\s*{SIZE}"));
pub(super) static TRIED_EB: LazyLock<Regex> =
    LazyLock::new(|| re(r"Tried\s*to\s*allocate\s*more\s*than\s*1\s*EB"));
pub(super) static DEVICE: LazyLock<Regex> =
    LazyLock::new(|| re(r"\(\s*GPU\s*(\d+)\s*;|GPU\s*(\d+)\s*has\s*a\s*total"));
pub(super) static CAPACITY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"{SIZE}\s*total\s*capacity|total\s*capac(?:i)?ty\s*of\s*(\d+(?:\.\d+)?)\s*(bytes|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB|B)",
    )
});
pub(super) static FREE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r";\s*{SIZE}\s*free\s*;|of\s*which\s*(\d+(?:\.\d+)?)\s*(bytes|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB|B)\s*is\s*free",
    )
});
pub(super) static ALREADY: LazyLock<Regex> = LazyLock::new(|| re(r"{SIZE}\s*already\s*allocated"));
pub(super) static CACHED: LazyLock<Regex> = LazyLock::new(|| re(r"{SIZE}\s*cached\s*\)"));
pub(super) static RESERVED_TOTAL: LazyLock<Regex> =
    LazyLock::new(|| re(r"{SIZE}\s*reserved\s*in\s*total\s*by\s*PyTorch"));
pub(super) static ALLOWED: LazyLock<Regex> = LazyLock::new(|| re(r"{SIZE}\s*allowed\s*;"));
pub(super) static THIS_PROCESS: LazyLock<Regex> =
    LazyLock::new(|| re(r"this\s*process\s*has\s*{SIZE}\s*memory\s*in\s*use"));
pub(super) static PROCESS: LazyLock<Regex> =
    LazyLock::new(|| re(r"Process\s*(\d+)\s*has\s*{SIZE}\s*memory\s*in\s*use"));
pub(super) static BY_PYTORCH: LazyLock<Regex> =
    LazyLock::new(|| re(r"allocated\s*memory\s*{SIZE}\s*is\s*allocated\s*by\s*PyTorch"));
pub(super) static PRIVATE: LazyLock<Regex> =
    LazyLock::new(|| re(r"with\s*{SIZE}\s*allocated\s*in\s*private\s*pools"));
pub(super) static UNALLOCATED: LazyLock<Regex> =
    LazyLock::new(|| re(r"{SIZE}\s*is\s*reserved\s*by\s*PyTorch\s*but\s*unallocated"));
pub(super) static REQUESTED: LazyLock<Regex> = LazyLock::new(|| {
    re(r"Requested\s*size\s*:\s*(\d+(?:\.\d+)?)\s*(bytes|KiB|MiB|GiB|TiB|PiB|KB|MB|GB|TB|PB|B)?")
});
pub(super) static PREEMPTIVE: LazyLock<Regex> = LazyLock::new(|| re(r"preemptively\s*rejected"));
pub(super) static HINT_EXPANDABLE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(PYTORCH_(?:CUDA_|HIP_|XPU_)?ALLOC_CONF)\s*=\s*expandable_segments"));
pub(super) static HINT_SPLIT: LazyLock<Regex> =
    LazyLock::new(|| re(r"max_split_size_mb\s*to\s*avoid"));
pub(super) static HINT_EMPTY: LazyLock<Regex> =
    LazyLock::new(|| re(r"`?empty_cache`?\s*to\s*release"));
/// A line that continues nothing: tables, tracebacks, section lines, log
/// records of their own.
pub(super) static STOPPER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"^\s*(\|[=\-]{5}|\|\s*\S|Traceback|During handling|=====|File "|\d{4}-\d{2}-\d{2}[ T]|\[rank\d+\]|(WARNING|ERROR|INFO|DEBUG)\b)"#,
    )
});

pub(super) static SUMMARY_ROW: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"\|\s*(Allocated memory|Active memory|Requested memory|GPU reserved memory|Non-releasable memory|Allocations|Active allocs|GPU reserved segments|Non-releasable allocs|Oversize allocations|Oversize GPU segments|from large pool|from small pool)\s*\|(.*)$",
    )
});
pub(super) static SUMMARY_DEVICE: LazyLock<Regex> =
    LazyLock::new(|| re(r"memory summary, device ID (\d+)"));
pub(super) static SUMMARY_OOMS: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:CUDA|HIP|XPU) OOMs:\s*(\d+)"));
pub(super) static SUMMARY_RETRIES: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:cudaMalloc|hipMalloc|Malloc) retries:\s*(\d+)"));
pub(super) static CELL_SIZE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(\d+)\s*(B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|PiB)$"));
pub(super) static CELL_COUNT: LazyLock<Regex> = LazyLock::new(|| re(r"^(\d+)\s*([KM]?)$"));
pub(super) static STAT_KV: LazyLock<Regex> =
    LazyLock::new(|| re(r#"['"]([a-z_]+(?:\.[a-z0-9_]+){0,3})['"]\s*[,:]\s*(-?\d+)"#));
pub(super) static SEG_TOTAL: LazyLock<Regex> =
    LazyLock::new(|| re(r#"['"]total_size['"]\s*:\s*(\d+)"#));
pub(super) static SEG_ALLOCATED: LazyLock<Regex> =
    LazyLock::new(|| re(r#"['"]allocated_size['"]\s*:\s*(\d+)"#));
pub(super) static BLOCK_DICT: LazyLock<Regex> = LazyLock::new(|| re(r"\{[^{}]*\}"));
pub(super) static BLOCK_SIZE: LazyLock<Regex> = LazyLock::new(|| re(r#"['"]size['"]\s*:\s*(\d+)"#));
pub(super) static BLOCK_STATE: LazyLock<Regex> =
    LazyLock::new(|| re(r#"['"]state['"]\s*:\s*['"](\w+)['"]"#));

pub(super) fn unit(u: &str) -> f64 {
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
pub(super) fn size(num: &str, u: &str) -> Option<u64> {
    let v: f64 = num.parse().ok()?;
    Some((v * unit(u)).round() as u64)
}

/// The first size captured by `r` (which may have several alternatives,
/// each with its own number and unit groups).
pub(super) fn find_size(r: &Regex, text: &str) -> Option<u64> {
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

/// Everything recognised in `text`.
pub fn parse(text: &str) -> Result<Parsed, ExplainError> {
    match parse_reader(text.as_bytes()) {
        Ok(p) => p,
        // Reading bytes in memory cannot fail.
        Err(e) => unreachable!("reading a string: {e}"),
    }
}

/// Everything recognised in the text `r` gives, read as a stream: the
/// readers of lines and of the glued text (see [`super::stream`]) take each
/// line as it comes, so the text is never held whole. The outer error is a
/// read error of `r`.
pub fn parse_reader(r: impl std::io::BufRead) -> std::io::Result<Result<Parsed, ExplainError>> {
    let mut pieces = Pieces::new(r);
    let mut summary = SummaryReader::default();
    let mut glued = Glued::default();
    let messages = parse_messages(pieces.by_ref().inspect(|p| {
        summary.line(&p.text);
        // Keys and dicts may be broken across lines anywhere (even inside
        // a quoted key); they are delimited by quotes and commas, so the
        // lines are simply glued together.
        glued.push(&p.text[p.fresh..]);
    }));
    if let Some(e) = pieces.error.take() {
        return Err(e);
    }
    let (stats, segments) = glued.finish();
    let p = Parsed {
        messages,
        summary: summary.finish(),
        stats,
        segments,
    };
    if p.messages.is_empty() && p.summary.is_none() && p.stats.is_none() && p.segments.is_none() {
        return Ok(Err(ExplainError::NothingRecognised));
    }
    Ok(Ok(p))
}

/// The messages in the lines (or windows of long lines) given: each from
/// its first words to the end of its line, with up to eight continuation
/// lines.
pub(super) fn parse_messages(lines: impl Iterator<Item = Piece>) -> Vec<OomMessage> {
    let mut out = Vec::new();
    let mut lines = lines.peekable();
    while let Some(piece) = lines.next() {
        let line = piece.text.as_str();
        // Several messages on one line (tqdm glues records together) are
        // each read up to the next one. One starting in a window's overlap
        // is the next window's.
        let starts: Vec<usize> = START.find_iter(line).map(|m| m.start()).collect();
        let owned = starts.iter().take_while(|&&s| s < piece.own).count();
        for k in 0..owned {
            let end = starts.get(k + 1).copied().unwrap_or(line.len());
            let mut text = line[starts[k]..end].to_string();
            // A lone message on a whole line may go on on the next lines; a
            // window of a long line goes on in the next window.
            if starts.len() == 1 && piece.whole {
                let mut joined = 0;
                while let Some(next) = lines.peek()
                    && joined < 8
                {
                    let l = next.text.as_str();
                    if !next.whole
                        || l.trim().is_empty()
                        || START.is_match(l)
                        || STOPPER.is_match(l)
                    {
                        break;
                    }
                    // Joined as is: a terminal wrap cuts anywhere, and the
                    // patterns accept missing spaces.
                    text.push_str(l);
                    lines.next();
                    joined += 1;
                }
            }
            out.push(message(piece.line + 1, &text));
        }
    }
    out
}

pub(super) fn message(line: usize, text: &str) -> OomMessage {
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
    let hint = hint_of(text);

    let wording = wording_of(
        text,
        by_pytorch,
        cached,
        reserved_total,
        hint.as_ref(),
        tried,
    );

    let (allocated, reserved_unallocated, reserved, private_pools) = match wording {
        Wording::Cached => (
            already,
            cached,
            // 1.0–1.3 printed amount_cached − amount_allocated as "cached";
            // consecutive messages of one run then agree on the total.
            already.zip(cached).map(|(a, c)| a.saturating_add(c)),
            None,
        ),
        Wording::ReservedInTotal | Wording::ReservedInTotalSplitHint => {
            (already, None, reserved_total, None)
        }
        _ => {
            // "allocated by PyTorch" includes the private-pool bytes named
            // right after it; reserved = that + "reserved but unallocated".
            let alloc = by_pytorch.map(|u| u.saturating_sub(private.unwrap_or(0)));
            let reserved = by_pytorch
                .zip(unallocated)
                .map(|(u, r)| u.saturating_add(r));
            (
                alloc.or(already),
                unallocated,
                reserved.or(reserved_total),
                private,
            )
        }
    };

    let (processes, self_inferred) = processes_of(text, reserved);

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

/// The advice line PyTorch appended to the message, if any.
fn hint_of(text: &str) -> Option<Hint> {
    if let Some(c) = HINT_EXPANDABLE.captures(text) {
        Some(Hint::ExpandableSegments {
            var: c[1].to_string(),
        })
    } else if HINT_SPLIT.is_match(text) {
        Some(Hint::MaxSplitSize)
    } else if HINT_EMPTY.is_match(text) {
        Some(Hint::EmptyCache)
    } else {
        None
    }
}

/// Which PyTorch release's wording the message has, from the figures it names.
fn wording_of(
    text: &str,
    by_pytorch: Option<u64>,
    cached: Option<u64>,
    reserved_total: Option<u64>,
    hint: Option<&Hint>,
    tried: Option<u64>,
) -> Wording {
    if TRIED_EB.is_match(text) {
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
        if hint == Some(&Hint::MaxSplitSize) {
            Wording::ReservedInTotalSplitHint
        } else {
            Wording::ReservedInTotal
        }
    } else if text.contains("error") && text.contains("out of memory") && tried.is_none() {
        Wording::RuntimeError
    } else {
        Wording::Unrecognised
    }
}

/// The processes the message lists, and whether the one that is this
/// process had to be inferred (the one nearest the reserved bytes).
fn processes_of(text: &str, reserved: Option<u64>) -> (Vec<ProcessUse>, bool) {
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
            .filter(|(_, p)| {
                p.bytes.saturating_add(slack) >= r && p.bytes <= r.saturating_add(SELF_MARGIN)
            })
            .min_by_key(|(_, p)| (p.bytes.abs_diff(r), p.pid));
        if let Some((k, _)) = best {
            processes[k].this_process = true;
            self_inferred = true;
        }
    }
    (processes, self_inferred)
}

pub(super) fn canonical_metric(name: &str) -> &'static str {
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

pub(super) fn parse_cell(cell: &str, is_bytes: bool) -> Option<u64> {
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
/// (`allocated_bytes`, `reserved_bytes`, `inactive_split_bytes`, …), read a
/// line at a time.
#[derive(Default)]
pub(super) struct SummaryReader {
    s: MemorySummary,
    seen: bool,
    current: Option<&'static str>,
}

impl SummaryReader {
    pub fn line(&mut self, l: &str) {
        // Each pattern only where the words it cannot match without are:
        // a plain substring search costs a fraction of a pattern's, and
        // nearly every line of a long log is none of these.
        let s = &mut self.s;
        if l.contains("device ID")
            && let Some(c) = SUMMARY_DEVICE.captures(l)
        {
            s.device = c[1].parse().ok();
            self.seen = true;
        }
        if l.contains("OOMs:")
            && let Some(c) = SUMMARY_OOMS.captures(l)
        {
            s.ooms = c[1].parse().ok();
            self.seen = true;
        }
        if l.contains("retries:")
            && let Some(c) = SUMMARY_RETRIES.captures(l)
        {
            s.alloc_retries = c[1].parse().ok();
            self.seen = true;
        }
        if !l.contains('|') {
            return;
        }
        let Some(c) = SUMMARY_ROW.captures(l) else {
            return;
        };
        self.seen = true;
        let name = c.get(1).expect("group").as_str();
        let (metric, pool) = match name {
            "from large pool" | "from small pool" => {
                let Some(m) = self.current else { return };
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
                self.current = Some(m);
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

    pub fn finish(self) -> Option<MemorySummary> {
        let mut s = self.s;
        if !self.seen {
            return None;
        }
        if s.rows.last().is_some_and(|r| r.total_freed.is_none()) {
            s.truncated = true;
        }
        Some(s)
    }
}

pub(super) const STAT_PREFIXES: &[&str] = &[
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

/// One `'key': value` of a `memory_stats()` dump, kept when the key is one
/// of the allocator's (a later one wins).
pub(super) fn stat_kv(s: &mut MemoryStats, key: &str, value: &str) {
    let head = key.split('.').next().unwrap_or("");
    if !STAT_PREFIXES.contains(&head) {
        return;
    }
    if head == key && !key.starts_with("num_") && key != "max_split_size" {
        return;
    }
    if let Ok(v) = value.parse() {
        s.values.insert(key.to_string(), v);
    }
}
