//! The typed data of a `torch.profiler` Chrome trace recorded with
//! `profile_memory=True`: per (device type, device id) the `[memory]` events
//! with the operator running at each, the `[OutOfMemory]` events, the totals
//! after every event and the figures of the whole trace, plus the anomalies
//! found while decoding. [`crate::input::profiler`] builds it; every later
//! stage reads it.
//!
//! What a trace cannot give: it holds no segment or block layout, so the
//! largest free gap, the number of free gaps, fragmentation in the snapshot
//! sense and internal (rounding) waste do not exist for it. See
//! [`MISSING_FIGURES`].

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A problem in the data, counted and reported once with its first example.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    pub kind: &'static str,
    pub count: u64,
    /// Record path of the first occurrence, e.g. `traceEvents[1834].args`.
    pub example: String,
}

/// Figures of [`crate::timeline::Sample`] that a trace cannot give, with why.
/// Charts and checks name these as "not available for profiler traces".
pub const MISSING_FIGURES: &[(&str, &str)] = &[
    (
        "internal_free",
        "a trace records rounded block sizes only, not requested sizes",
    ),
    (
        "pending_free",
        "a trace reports a free when the program drops the tensor, not when the allocator completes it",
    ),
    (
        "largest_free_gap",
        "a trace holds no segment or block layout",
    ),
    ("free_gaps", "a trace holds no segment or block layout"),
    (
        "fragmentation",
        "needs the largest free gap, which needs the segment layout",
    ),
    ("largest_small_request", "needs the segment layout"),
    ("largest_large_request", "needs the segment layout"),
];

/// What to record instead of a trace without GPU memory events.
pub const RECORD_GPU_MEMORY: &str = "to measure GPU memory, profile the run on the GPU with \
torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True), \
or record a memory snapshot (torch.cuda.memory._record_memory_history(), then \
torch.cuda.memory._dump_snapshot(\"snapshot.pickle\"))";

/// `c10::DeviceType` and index of a memory event.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceKey {
    pub device_type: i64,
    pub device_id: i64,
}

impl DeviceKey {
    /// `cuda:0`, `hip:0`, `xpu:1`, `cpu`.
    pub fn label(&self) -> String {
        let t = match self.device_type {
            0 => "cpu",
            1 => "cuda",
            6 => "hip",
            9 => "xla",
            12 => "xpu",
            13 => "mps",
            15 => "hpu",
            19 => "mtia",
            20 => "privateuseone",
            _ => "",
        };
        if t.is_empty() {
            format!("device type {}:{}", self.device_type, self.device_id)
        } else if self.device_id < 0 {
            t.to_string()
        } else {
            format!("{t}:{}", self.device_id)
        }
    }

    /// CPU memory is not cached by a device allocator: no reserved bytes.
    pub fn is_cpu(&self) -> bool {
        self.device_type == 0
    }
}

/// One `[memory]` event.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct MemEvent {
    /// Position in `traceEvents`.
    pub index: u32,
    pub ts_us: f64,
    /// Rounded block bytes; negative for a free.
    pub bytes: i64,
    pub addr: Option<u64>,
    pub total_allocated: Option<u64>,
    pub total_reserved: Option<u64>,
    pub finished: Option<bool>,
    /// Index into [`ProfilerTrace::threads`].
    pub thread: u32,
    /// Innermost `cpu_op` on the same thread whose time range holds the
    /// event (index into [`ProfilerTrace::names`]): the call site.
    pub op: Option<u32>,
    /// Outermost such `cpu_op` (the top-level operator).
    pub top_op: Option<u32>,
    /// Innermost `python_function` with a source location (`file.py(N): f`).
    pub python: Option<u32>,
    /// For an allocation, the position (in this device's events) of its
    /// free; for a free, of its allocation. Needs `Addr`.
    pub pair: Option<u32>,
}

/// One `[OutOfMemory]` event.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct TraceOom {
    pub index: u32,
    pub ts_us: f64,
    /// Rounded request.
    pub bytes: u64,
    pub total_allocated: Option<u64>,
    pub total_reserved: Option<u64>,
    pub op: Option<String>,
    pub python: Option<String>,
}

/// A figure's highest value and where it was first reached.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Peak {
    pub bytes: u64,
    /// Index in [`TraceDevice::events`] (`None` = before the first event).
    pub event: Option<u32>,
    pub time_us: Option<i64>,
    pub op: Option<String>,
    pub python: Option<String>,
}

/// An event after which `Total Reserved` was higher: the allocator had to
/// map new memory for this allocation.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ReservedStep {
    pub event: u32,
    pub time_us: i64,
    /// The allocation that triggered the growth (rounded bytes).
    pub bytes: u64,
    pub reserved_before: u64,
    pub reserved_after: u64,
    /// reserved − allocated just before: when at least `bytes`, the cache
    /// held enough free bytes but no block that fit (fragmentation, or a
    /// different pool or stream).
    pub free_before: u64,
    pub op: Option<String>,
    pub python: Option<String>,
}

/// Bytes attributed to one operator.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct OpShare {
    pub op: String,
    pub bytes: u64,
    pub events: u64,
}

/// Figures of one device over the whole trace.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct DeviceSummary {
    pub events: u64,
    pub allocations: u64,
    pub frees: u64,
    /// `Addr` present on every event (allocations can be paired with frees).
    pub has_addr: bool,
    /// `Total Allocated`/`Total Reserved` present (not the 2021 schema).
    pub has_totals: bool,
    pub first_time_us: Option<i64>,
    pub last_time_us: Option<i64>,
    /// Bytes already allocated when the trace starts.
    pub allocated_before_trace: u64,
    /// True when that figure is only a lower bound (2021 schema: the largest
    /// deficit of frees over allocations seen in the trace).
    pub allocated_before_is_lower_bound: bool,
    pub allocated_end: u64,
    pub reserved_start: Option<u64>,
    pub reserved_end: Option<u64>,
    pub external_free_end: Option<u64>,
    pub peak_allocated: Option<Peak>,
    pub peak_reserved: Option<Peak>,
    /// Highest reserved − allocated.
    pub peak_external_free: Option<Peak>,
    /// Every growth of reserved memory, in time order.
    pub reserved_growth: Vec<ReservedStep>,
    /// Growths that happened while the cache already held at least the
    /// allocation's bytes free.
    pub growth_with_free_cache: u64,
    pub growth_with_free_cache_bytes: u64,
    /// Bytes allocated per operator (call site), largest first. Allocations
    /// outside every operator are named by their Python function
    /// (`python: file.py(N): f`) when the trace has one.
    pub allocations_by_op: Vec<OpShare>,
    /// Live allocations at the peak of allocated bytes, by operator, largest
    /// first; memory older than the trace is `(allocated before the trace)`.
    /// Needs `Addr`.
    pub live_at_peak_by_op: Vec<OpShare>,
    /// Allocations of the trace still live at its end. Needs `Addr`.
    pub live_at_end: Option<u64>,
    pub live_at_end_bytes: Option<u64>,
    /// Frees of memory allocated before the trace started.
    pub frees_before_trace: u64,
    pub frees_before_trace_bytes: u64,
    pub out_of_memory_events: u64,
}

impl DeviceSummary {
    /// The figures of the whole trace read off one device's events (sorted,
    /// paired) and their running totals ([`totals`]): first and last times,
    /// the end state, the peaks and where they were reached, every growth of
    /// reserved memory, bytes allocated per operator and, with `Addr`, what
    /// each operator held at the peak. Counts, pairing and the bytes
    /// allocated before the trace are the decoder's, set before; `reserved`:
    /// whether `Total Reserved` counts (see [`totals`]).
    pub fn add_figures(&mut self, events: &[MemEvent], reserved: bool, names: &[String]) {
        let name_of = |id: Option<u32>| id.map(|i| names[i as usize].clone());
        self.first_time_us = events.first().map(|e| time_of(e.ts_us));
        self.last_time_us = events.last().map(|e| time_of(e.ts_us));
        // Position k: the start (k = 0), then after event k − 1.
        let tot: Vec<Totals> = std::iter::once(Totals {
            allocated: self.allocated_before_trace,
            reserved: None,
        })
        .chain(totals(events, self.allocated_before_trace, reserved))
        .collect();
        let end = tot.last().expect("start totals");
        self.allocated_end = end.allocated;
        self.reserved_end = end.reserved;
        self.external_free_end = end.external_free();
        self.reserved_start = tot.get(1).and_then(|x| x.reserved);

        let peak_of = |f: &dyn Fn(&Totals) -> Option<u64>| -> Option<Peak> {
            let mut best: Option<(u64, usize)> = None;
            for (k, x) in tot.iter().enumerate() {
                if let Some(v) = f(x)
                    && best.is_none_or(|(b, _)| v > b)
                {
                    best = Some((v, k));
                }
            }
            let (bytes, k) = best?;
            let me = k.checked_sub(1).map(|i| &events[i]);
            Some(Peak {
                bytes,
                event: k.checked_sub(1).map(|i| i as u32),
                time_us: me.or(events.first()).map(|e| time_of(e.ts_us)),
                op: me.and_then(|m| name_of(m.op)),
                python: me.and_then(|m| name_of(m.python)),
            })
        };
        self.peak_allocated = peak_of(&|x| Some(x.allocated));
        self.peak_reserved = peak_of(&|x| x.reserved);
        self.peak_external_free = peak_of(&|x| x.external_free());

        for i in 1..events.len() {
            let (b, a) = (&tot[i], &tot[i + 1]);
            if let (Some(rb), Some(ra)) = (b.reserved, a.reserved)
                && ra > rb
            {
                let e = &events[i];
                let bytes = e.bytes.max(0) as u64;
                let free_before = rb.saturating_sub(b.allocated);
                if bytes > 0 && free_before >= bytes {
                    self.growth_with_free_cache += 1;
                    self.growth_with_free_cache_bytes += ra - rb;
                }
                self.reserved_growth.push(ReservedStep {
                    event: i as u32,
                    time_us: time_of(e.ts_us),
                    bytes,
                    reserved_before: rb,
                    reserved_after: ra,
                    free_before,
                    op: name_of(e.op),
                    python: name_of(e.python),
                });
            }
        }

        let mut by_op: HashMap<String, (u64, u64)> = HashMap::new();
        for e in events.iter().filter(|e| e.bytes > 0) {
            let x = by_op.entry(op_label(names, e)).or_default();
            x.0 += e.bytes as u64;
            x.1 += 1;
        }
        self.allocations_by_op = sorted_shares(by_op);

        if self.has_addr
            && let Some(at) = self.peak_allocated.as_ref().and_then(|p| p.event)
        {
            self.live_at_peak_by_op = live_by_op(
                events,
                names,
                self.allocated_before_trace,
                Some(at as usize),
            );
        }
    }
}

/// The running totals after one `[memory]` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// `Total Allocated` where recorded, else the bytes allocated before the
    /// trace plus the sum of `Bytes` so far (never below 0).
    pub allocated: u64,
    /// `Total Reserved`, where it counts.
    pub reserved: Option<u64>,
}

impl Totals {
    /// reserved − allocated: bytes cached but not in a live allocation.
    pub fn external_free(&self) -> Option<u64> {
        self.reserved.map(|r| r.saturating_sub(self.allocated))
    }
}

/// The totals after each of `events` (sorted), starting from `baseline`
/// bytes allocated before the first; `reserved`: whether `Total Reserved`
/// counts (an accelerator's events with totals: not CPU memory, not the
/// 2021 schema).
pub fn totals(
    events: &[MemEvent],
    baseline: u64,
    reserved: bool,
) -> impl Iterator<Item = Totals> + '_ {
    let mut running: i128 = baseline as i128;
    events.iter().map(move |e| {
        running += e.bytes as i128;
        if let Some(t) = e.total_allocated {
            running = t as i128;
        }
        Totals {
            allocated: running.max(0) as u64,
            reserved: e.total_reserved.filter(|_| reserved),
        }
    })
}

/// The memory timeline of one (device type, device id).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct TraceDevice {
    pub key: DeviceKey,
    /// `cuda:0`, `hip:0`, `cpu`.
    pub label: String,
    /// From `deviceProperties`, when the trace has them.
    pub name: Option<String>,
    pub capacity: Option<u64>,
    #[serde(skip)]
    pub events: Vec<MemEvent>,
    pub ooms: Vec<TraceOom>,
    pub summary: DeviceSummary,
}

impl TraceDevice {
    /// Live bytes by operator after event `at` (`None` = before the first
    /// event), largest first; `None` without `Addr` (the 2021 schema), where
    /// allocations cannot be paired with their frees.
    pub fn live_by_op(&self, names: &[String], at: Option<usize>) -> Option<Vec<OpShare>> {
        if !self.summary.has_addr {
            return None;
        }
        Some(live_by_op(
            &self.events,
            names,
            self.summary.allocated_before_trace,
            at,
        ))
    }

    /// Per operator: (live bytes at the end, most live bytes at one moment,
    /// live allocations at the end), sorted by operator. Memory older than
    /// the trace is [`BEFORE_TRACE`], starting at the bytes allocated before
    /// the first event. `None` without `Addr` (the 2021 schema), where a free
    /// cannot be charged to the operator that allocated.
    pub fn op_figures(&self, names: &[String]) -> Option<Vec<(String, u64, u64, u64)>> {
        if !self.summary.has_addr {
            return None;
        }
        let acc = op_running(
            &self.events,
            names,
            self.summary.allocated_before_trace,
            self.events.len(),
        );
        let clamp = |v: i128| v.clamp(0, u64::MAX as i128) as u64;
        Some(
            acc.into_iter()
                .map(|(op, (live, peak, n))| (op, clamp(live), clamp(peak), n.max(0) as u64))
                .collect(),
        )
    }

    /// Whether `Total Reserved` counts for this device's totals: an
    /// accelerator's, with totals recorded.
    pub fn reserved_recorded(&self) -> bool {
        self.summary.has_totals && !self.key.is_cpu()
    }

    /// The totals after each event ([`totals`]).
    pub fn totals(&self) -> impl Iterator<Item = Totals> + '_ {
        totals(
            &self.events,
            self.summary.allocated_before_trace,
            self.reserved_recorded(),
        )
    }
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct DeviceProperty {
    pub id: i64,
    pub name: String,
    pub total_global_mem: Option<u64>,
}

/// A decoded trace: one [`TraceDevice`] per (device type, device id) seen in
/// `[memory]` events, accelerators first, then CPU.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct ProfilerTrace {
    /// Entries of `traceEvents`.
    pub trace_events: u64,
    pub memory_events: u64,
    /// `[memory]` events of an accelerator (not CPU memory).
    pub gpu_memory_events: u64,
    /// `cpu_op` (`Operator` in 2021 traces) duration events.
    pub op_events: u64,
    pub devices: Vec<TraceDevice>,
    pub device_properties: Vec<DeviceProperty>,
    /// `distributedInfo.rank` / `world_size`.
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
    /// Interned operator and Python-function names.
    #[serde(skip)]
    pub names: Vec<String>,
    /// `pid/tid` of each thread seen in memory events.
    #[serde(skip)]
    pub threads: Vec<String>,
    pub anomalies: Vec<Anomaly>,
}

impl ProfilerTrace {
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// The accelerator devices (never the CPU), or only those with device
    /// id `device` when one is asked for; in the trace's order.
    pub fn accelerators(&self, device: Option<i64>) -> impl Iterator<Item = &TraceDevice> {
        self.devices
            .iter()
            .filter(move |d| !d.key.is_cpu() && device.is_none_or(|x| x == d.key.device_id))
    }

    /// True when the devices use the 2021 schema (only `Bytes`).
    pub fn bytes_only(&self) -> bool {
        self.devices.iter().any(|d| !d.summary.has_totals)
    }

    /// True when the trace has memory events but none of an accelerator:
    /// every `[memory]` event is CPU memory (Device Type 0), as when the
    /// profiled model ran on the CPU. No caching allocator manages that
    /// memory, so no GPU figure (peak, reserved, out-of-memory) exists.
    pub fn cpu_only(&self) -> bool {
        !self.devices.is_empty() && self.devices.iter().all(|d| d.key.is_cpu())
    }

    /// The one sentence every command prints for a [`Self::cpu_only`] trace,
    /// with what to record instead; `None` for a trace with GPU events.
    pub fn no_gpu_memory(&self) -> Option<String> {
        if !self.cpu_only() {
            return None;
        }
        Some(format!(
            "no GPU memory events: all {} [memory] events of this profiler trace are CPU memory \
             (Device Type 0), which no GPU caching allocator manages, so it shows no GPU peak, \
             reserved memory or out-of-memory event; {RECORD_GPU_MEMORY}",
            self.memory_events
        ))
    }
}

/// Microseconds of a trace timestamp, as every figure dates them.
pub fn time_of(ts: f64) -> i64 {
    ts.floor() as i64
}

/// Python-side allocations), the Python function is the best one left.
pub fn op_label(names: &[String], e: &MemEvent) -> String {
    match (e.op, e.python) {
        (Some(i), _) => names[i as usize].clone(),
        (None, Some(p)) => format!("python: {}", names[p as usize]),
        (None, None) => "(outside any operator)".to_string(),
    }
}

/// Name of the share of memory older than the trace.
pub const BEFORE_TRACE: &str = "(allocated before the trace)";

/// Live bytes after event `at` (`None` = before the first event) by
/// operator: the allocations of the trace not yet freed, plus the memory
/// older than the trace that is still live ([`BEFORE_TRACE`]). Needs paired
/// events (`Addr`).
/// Per operator, over the first `n` events: (live bytes, most live bytes at
/// one moment, live allocations). A free is charged to the operator of the
/// allocation it pairs with; an unpaired free, like the `baseline` bytes
/// allocated before the first event, to [`BEFORE_TRACE`].
fn op_running(
    events: &[MemEvent],
    names: &[String],
    baseline: u64,
    n: usize,
) -> BTreeMap<String, (i128, i128, i64)> {
    let mut acc: BTreeMap<String, (i128, i128, i64)> = BTreeMap::new();
    let older = baseline as i128;
    if older > 0 {
        acc.insert(BEFORE_TRACE.to_string(), (older, older, 0));
    }
    // A zero-byte event is neither an allocation nor a free of one.
    for e in events.iter().take(n).filter(|e| e.bytes != 0) {
        let (op, delta, count) = if e.bytes > 0 {
            (op_label(names, e), e.bytes as i128, 1)
        } else {
            match e.pair.and_then(|p| events.get(p as usize)) {
                Some(a) => (op_label(names, a), e.bytes as i128, -1),
                None => (BEFORE_TRACE.to_string(), e.bytes as i128, 0),
            }
        };
        let x = acc.entry(op).or_default();
        x.0 += delta;
        x.1 = x.1.max(x.0);
        x.2 += count;
    }
    acc
}

/// What each operator holds after event `at` (`None`: before the first),
/// largest first; operators that hold nothing are left out.
pub fn live_by_op(
    events: &[MemEvent],
    names: &[String],
    baseline: u64,
    at: Option<usize>,
) -> Vec<OpShare> {
    let n = at.map_or(0, |a| a + 1);
    let by_op: HashMap<String, (u64, u64)> = op_running(events, names, baseline, n)
        .into_iter()
        .filter(|(_, (live, _, _))| *live > 0)
        .map(|(op, (live, _, count))| (op, (live as u64, count.max(0) as u64)))
        .collect();
    sorted_shares(by_op)
}

pub fn sorted_shares(m: HashMap<String, (u64, u64)>) -> Vec<OpShare> {
    let mut v: Vec<OpShare> = m
        .into_iter()
        .map(|(op, (bytes, events))| OpShare { op, bytes, events })
        .collect();
    v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.op.cmp(&b.op)));
    v
}
