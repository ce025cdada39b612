//! The CI gate: rules with thresholds, read from command-line flags and a
//! `fragscope.toml`, evaluated against [`Metrics`] into one list of
//! [`Finding`]s that every output format renders.
//!
//! Owns: the rule names and their config syntax, config validation (every
//! error names the file and the key), the pass/fail arithmetic and the hints.
//! Must not compute metrics (that is [`crate::analysis::metrics`]), read snapshots, or
//! format output (that is `render::check`).
//!
//! Config file:
//!
//! ```toml
//! [check]
//! baseline = "ci/baseline.pickle"   # relative to this file
//! max_fragmentation = 0.5           # or "50%"
//! min_largest_gap = "1GiB"
//! max_peak_reserved = "40GiB"       # or a byte count
//! max_peak_allocated = "36GiB"
//! max_internal_waste = "512MiB"
//! max_oom_events = 0                # the default
//! max_peak_total = "3GiB"           # memory-timeline exports
//!
//! [check.max_peak_category]         # memory-timeline exports, per category
//! activation = "2GiB"
//! optimizer_state = "512MiB"
//!
//! [check.max_regression]            # against the baseline
//! peak_reserved = "5%"              # relative
//! fragmentation = 0.05              # absolute, in the metric's unit
//! largest_gap = "256MiB"
//! peak_activation = "10%"
//! ```

use crate::analysis::metrics::{Measured, MetricId, Metrics, Quantity, TraceFacts, Unit};
use crate::core::style::Style;
use crate::core::units::{fmt_pct, parse_size};
use crate::input::profiler::memtimeline::Category;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod rules;
pub use rules::*;

/// Version of the JSON that `check --format json` prints.
pub const CHECK_SCHEMA: &str = "fragscope.check/1";
/// Read from the current directory when `--config` is not given.
pub const CONFIG_FILE: &str = "fragscope.toml";

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// The metric is not measurable from this input, or there is no baseline.
    Skipped,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Skipped => "skipped",
        }
    }
}

/// A measured value or threshold.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    Bytes(u64),
    Ratio(f64),
    Count(u64),
    /// How much worse than the baseline, as a fraction of it (0.05 = 5 %
    /// worse; negative = better).
    Relative(f64),
    /// How much worse than the baseline, in bytes (negative = better).
    BytesDelta(i64),
    RatioDelta(f64),
    CountDelta(i64),
}

impl Value {
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Bytes(b) | Value::Count(b) => b as f64,
            Value::Ratio(r) | Value::Relative(r) | Value::RatioDelta(r) => r,
            Value::BytesDelta(d) | Value::CountDelta(d) => d as f64,
        }
    }
    pub fn fmt(self, st: &Style) -> String {
        let signed = |d: f64, s: String| if d > 0.0 { format!("+{s}") } else { s };
        match self {
            Value::Bytes(b) => st.bytes(b),
            Value::Ratio(r) => fmt_pct(r),
            Value::Count(c) => c.to_string(),
            Value::Relative(r) if crate::core::units::pct_rounds_to_zero(r) => "±0%".into(),
            Value::Relative(r) => signed(r, fmt_pct(r)),
            Value::BytesDelta(d) => st.delta(d as i128),
            Value::RatioDelta(r) if crate::core::units::pct_rounds_to_zero(r) => "±0 pt".into(),
            Value::RatioDelta(r) => signed(r, format!("{:.1} pt", r * 100.0)),
            Value::CountDelta(d) => signed(d as f64, d.to_string()),
        }
    }
    /// Whether [`Value::fmt`] prints this change as zero (`0.0 pt`, `0.0%`).
    pub fn rounds_to_zero(self) -> bool {
        match self {
            Value::Relative(r) | Value::RatioDelta(r) => crate::core::units::pct_rounds_to_zero(r),
            Value::BytesDelta(d) | Value::CountDelta(d) => d == 0,
            Value::Bytes(_) | Value::Ratio(_) | Value::Count(_) => false,
        }
    }
    /// A change too small for [`Value::fmt`], with three more decimals.
    fn fmt_precise(self, st: &Style) -> String {
        let signed = |d: f64, s: String| if d > 0.0 { format!("+{s}") } else { s };
        match self {
            Value::Relative(r) => signed(r, format!("{:.4}%", r * 100.0)),
            Value::RatioDelta(r) => signed(r, format!("{:.4} pt", r * 100.0)),
            other => other.fmt(st),
        }
    }
    fn of(q: Quantity) -> Value {
        match q {
            Quantity::Bytes(b) => Value::Bytes(b),
            Quantity::Ratio(r) => Value::Ratio(r),
            Quantity::Count(c) => Value::Count(c),
        }
    }
    fn delta(unit: Unit, d: f64) -> Value {
        match unit {
            Unit::Bytes => Value::BytesDelta(d as i64),
            Unit::Ratio => Value::RatioDelta(d),
            Unit::Count => Value::CountDelta(d as i64),
        }
    }
}

/// One rule applied to one file: the data every output renders.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Finding {
    /// The config key: `max_peak_reserved`, `max_regression.peak_reserved`.
    pub rule: String,
    pub metric: MetricId,
    /// The device the figure comes from (`None`: summed, or none).
    pub device: Option<i64>,
    /// `None` when not measurable (verdict `skipped`), or when a relative
    /// change from a zero baseline is undefined.
    pub measured: Option<Value>,
    pub threshold: Value,
    /// Regression rules: the metric in the baseline and in the checked file.
    pub baseline_value: Option<Quantity>,
    pub current_value: Option<Quantity>,
    pub verdict: Verdict,
    /// One line saying what was compared with what.
    pub message: String,
    /// What to try (empty when the rule holds).
    pub hint: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CheckReport {
    pub schema: String,
    pub file: String,
    pub baseline: Option<String>,
    pub findings: Vec<Finding>,
    /// Every metric measurable from the checked file, to calibrate limits.
    pub metrics: BTreeMap<MetricId, Measured>,
    /// What the figures rest on (replay anomalies, unused baseline, …).
    pub notes: Vec<String>,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.failed == 0
    }
}

/// Applies every rule; absolute rules first (in [`RuleKind::ALL`] order),
/// then regressions (in [`MetricId::ALL`] order).
pub fn evaluate(
    st: &Style,
    file: &str,
    current: &Metrics,
    baseline: Option<(&str, &Metrics)>,
    rules: &Rules,
) -> CheckReport {
    let mut findings = Vec::new();
    for (&rule, &limit) in &rules.limits {
        findings.push(absolute(st, rule, limit, current));
    }
    for (&c, &limit) in &rules.category_limits {
        findings.push(absolute_on(
            st,
            format!("{CATEGORY_RULES}.{}", c.key()),
            MetricId::peak_of(c),
            false,
            limit,
            current,
        ));
    }
    for (&metric, &limit) in &rules.regressions {
        findings.push(regression(st, metric, limit, current, baseline));
    }
    let mut notes: Vec<String> = current.notes.clone();
    if findings.is_empty() {
        notes.push(if current.source == crate::analysis::metrics::Source::MemoryTimeline {
            format!(
                "no rule is set, so nothing is gated: a memory-timeline export is checked with {}, {CATEGORY_RULES}.CATEGORY or max_regression.peak_* (docs/ci.md)",
                RuleKind::MaxPeakTotal.key()
            )
        } else {
            "no rule is set, so nothing is gated".into()
        });
    }
    if let Some((name, b)) = baseline {
        notes.extend(b.notes.iter().map(|n| format!("baseline {name}: {n}")));
        if rules.regressions.is_empty() {
            notes.push(
                "a baseline was given but no max_regression rule is set, so it gates nothing"
                    .into(),
            );
        }
    }
    let count = |v| {
        findings
            .iter()
            .filter(|f: &&Finding| f.verdict == v)
            .count()
    };
    CheckReport {
        schema: CHECK_SCHEMA.into(),
        file: file.into(),
        baseline: baseline.map(|b| b.0.to_string()),
        passed: count(Verdict::Pass),
        failed: count(Verdict::Fail),
        skipped: count(Verdict::Skipped),
        findings,
        metrics: MetricId::ALL
            .into_iter()
            .filter_map(|m| current.get(m).map(|v| (m, v)))
            .collect(),
        notes,
    }
}

fn on_device(d: Option<i64>) -> String {
    d.map(|d| format!(" on device {d}")).unwrap_or_default()
}

fn absolute(st: &Style, rule: RuleKind, limit: Quantity, m: &Metrics) -> Finding {
    absolute_on(
        st,
        rule.key().into(),
        rule.metric(),
        rule.is_min(),
        limit,
        m,
    )
}

/// A bound on one metric, under the rule named `rule` (`min`: fails below
/// the limit, else above it).
fn absolute_on(
    st: &Style,
    rule: String,
    metric: MetricId,
    min: bool,
    limit: Quantity,
    m: &Metrics,
) -> Finding {
    let mut f = Finding {
        rule,
        metric,
        device: None,
        measured: None,
        threshold: Value::of(limit),
        baseline_value: None,
        current_value: None,
        verdict: Verdict::Skipped,
        message: String::new(),
        hint: String::new(),
    };
    let Some(got) = m.get(metric) else {
        f.message = not_measurable(metric, m);
        f.hint = unmeasurable_hint(metric, m);
        return f;
    };
    if f.rule == RuleKind::MinLargestGap.key() {
        return min_largest_gap(st, f, limit, m);
    }
    f.device = got.device;
    f.measured = Some(Value::of(got.value));
    let (v, t) = (got.value.as_f64(), limit.as_f64());
    let fails = if min { v < t } else { v > t };
    let relation = match (min, fails) {
        (false, true) => "exceeds the limit of",
        (false, false) => "is within the limit of",
        (true, true) => "is below the minimum of",
        (true, false) => "meets the minimum of",
    };
    f.message = format!(
        "{} {}{}{} {relation} {}",
        metric.label(),
        got.value.fmt(st),
        on_device(got.device),
        recorded_only(metric, m, got.device),
        limit.fmt(st)
    );
    if fails {
        f.verdict = Verdict::Fail;
        f.hint = fail_hint(st, metric, m, got.device);
    } else {
        f.verdict = Verdict::Pass;
    }
    f
}

/// `min_largest_gap` fails only on the fragmentation signature: a moment
/// under pressure with at least the minimum free in reserved memory but no
/// single free block that large. A moment with less free than that (a full
/// cache among them) could not serve the request from the cache however its
/// free bytes lay: that is a matter of capacity, which the peak rules gate.
/// The figure shown is the smallest largest gap among the moments that had
/// the minimum free, on the worst device.
fn min_largest_gap(st: &Style, mut f: Finding, limit: Quantity, m: &Metrics) -> Finding {
    let n = limit.as_f64() as u64;
    let measured = || m.devices.iter().filter(|d| d.largest_gap.is_some());
    // Devices ascend; the first of equal gaps wins.
    let tightest = measured()
        .filter_map(|d| d.tightest_with_free(n).map(|g| (d.device, g)))
        .min_by_key(|(_, g)| g.largest_gap);
    let Some((d, g)) = tightest else {
        // No moment had that much free: nothing was refused for want of one gap.
        let most = measured()
            .filter_map(|d| d.most_free_under_pressure().map(|b| (d.device, b)))
            .fold(None, |best: Option<(i64, u64)>, x| match best {
                Some(b) if b.1 >= x.1 => Some(b),
                _ => Some(x),
            });
        f.device = most.map(|x| x.0);
        f.verdict = Verdict::Pass;
        f.message = format!(
            "no moment under pressure had {} of reserved memory free (at most {}{}), so no gap of that size was missing: meets the minimum of {}",
            limit.fmt(st),
            st.bytes(most.map_or(0, |x| x.1)),
            on_device(f.device),
            limit.fmt(st)
        );
        return f;
    };
    f.device = Some(d);
    f.measured = Some(Value::Bytes(g.largest_gap));
    if g.largest_gap < n {
        f.verdict = Verdict::Fail;
        f.message = format!(
            "largest free gap {} on device {d} is below the minimum of {} {}, with {} of reserved memory free",
            st.bytes(g.largest_gap),
            limit.fmt(st),
            g.at.text(),
            st.bytes(g.free)
        );
        f.hint = format!(
            "{} of reserved memory sat free {} but in gaps of at most {}: a request of {} needs a new \
cudaMalloc (an OOM when the device is full) although the cache holds enough. That is \
fragmentation: try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which grows a segment instead \
of leaving gaps between segments, and avoid keeping long-lived tensors allocated between \
short-lived ones.",
            st.bytes(g.free),
            g.at.text(),
            st.bytes(g.largest_gap),
            limit.fmt(st)
        );
    } else {
        f.verdict = Verdict::Pass;
        f.message = format!(
            "largest free gap at least {} on device {d} whenever {} or more of reserved memory were free under pressure: meets the minimum of {}",
            st.bytes(g.largest_gap),
            limit.fmt(st),
            limit.fmt(st)
        );
    }
    f
}

/// Relative comparisons tolerate float noise: `105 / 100 − 1` is a hair
/// above 0.05 and must not fail a 5 % rule.
const REL_EPS: f64 = 1e-9;

fn regression(
    st: &Style,
    metric: MetricId,
    limit: RegressionLimit,
    cur: &Metrics,
    baseline: Option<(&str, &Metrics)>,
) -> Finding {
    let mut f = Finding {
        rule: format!("max_regression.{}", metric.key()),
        metric,
        device: None,
        measured: None,
        threshold: match limit {
            RegressionLimit::Relative(r) => Value::Relative(r),
            RegressionLimit::Absolute(q) => Value::delta(metric.unit(), q.as_f64()),
        },
        baseline_value: None,
        current_value: None,
        verdict: Verdict::Skipped,
        message: String::new(),
        hint: String::new(),
    };
    let Some((bname, base)) = baseline else {
        f.message = format!(
            "{}: no baseline to compare with ({} allowed)",
            metric.label(),
            limit.fmt(st)
        );
        f.hint = "give one with --baseline FILE or `baseline = \"...\"` in [check]".into();
        return f;
    };
    let (b, c) = (base.get(metric), cur.get(metric));
    f.baseline_value = b.map(|x| x.value);
    f.current_value = c.map(|x| x.value);
    let (Some(b), Some(c)) = (b, c) else {
        f.message = match (b.is_none(), base.source) {
            (true, _) if no_gpu(base) => format!(
                "{} is not measurable for the baseline: {}",
                metric.label(),
                NO_GPU_EVENTS
            ),
            (true, crate::analysis::metrics::Source::ProfilerTrace) => format!(
                "{} is not measurable for the baseline, a profiler trace",
                metric.label()
            ),
            (true, _) => format!("{} is not measurable from the baseline", metric.label()),
            (false, _) => not_measurable(metric, cur),
        };
        f.hint = unmeasurable_hint(metric, if b.is_none() { base } else { cur });
        return f;
    };
    f.device = c.device;
    let (bv, cv) = (b.value.as_f64(), c.value.as_f64());
    let worse = if metric.lower_is_worse() {
        bv - cv
    } else {
        cv - bv
    };
    let fails = match limit {
        RegressionLimit::Relative(r) => {
            if bv == 0.0 {
                if worse > 0.0 {
                    true
                } else {
                    f.measured = Some(Value::Relative(0.0));
                    false
                }
            } else {
                let rel = worse / bv;
                f.measured = Some(Value::Relative(rel));
                rel > r + REL_EPS * r.max(1.0)
            }
        }
        RegressionLimit::Absolute(q) => {
            f.measured = Some(Value::delta(metric.unit(), worse));
            worse > q.as_f64() + REL_EPS * q.as_f64().max(1.0)
        }
    };
    let change = match f.measured {
        // A change that prints as zero is no change, unless it is what
        // fails the rule (a zero allowance): then it gets the digits.
        Some(m) if m.rounds_to_zero() && !fails => "unchanged".into(),
        Some(m) if m.rounds_to_zero() => format!("{} worse", m.fmt_precise(st)),
        Some(m) => format!("{} worse", m.fmt(st)),
        None => "up from zero".into(),
    };
    let oom = metric == MetricId::OomEvents;
    let qualifier = match (
        untraced_figure(metric, base, b.device),
        untraced_figure(metric, cur, c.device),
    ) {
        (false, false) => "",
        (true, true) if oom => "; neither has a trace, so no out-of-memory event could be recorded",
        (true, true) => "; both figures are of the recorded state (no trace)",
        (false, true) if oom => "; it has no trace, so none could be recorded",
        (false, true) => "; the figure is of its recorded state (no trace)",
        (true, false) if oom => "; the baseline has no trace, so none could be recorded in it",
        (true, false) => "; the baseline's figure is of its recorded state (no trace)",
    };
    let (bs, cs) = match (b.value, c.value) {
        (Quantity::Bytes(x), Quantity::Bytes(y)) => st.bytes_pair(x, y),
        (x, y) => (x.fmt(st), y.fmt(st)),
    };
    f.message = format!(
        "{} {bs} → {cs}{} ({change}; {} allowed) against {bname}{qualifier}",
        metric.label(),
        on_device(c.device),
        limit.fmt(st),
    );
    if fails {
        f.verdict = Verdict::Fail;
        f.hint = format!(
            "{} If the change is intended, record a new baseline (docs/ci.md).",
            fail_hint(st, metric, cur, c.device)
        );
    } else {
        f.verdict = Verdict::Pass;
    }
    f
}

/// Why a metric does not apply to this kind of input: the allocator's
/// figures to a memory-timeline export, the category peaks to the rest.
fn other_kind_hint(metric: MetricId, m: &Metrics) -> Option<String> {
    if metric.applies_to(m.source) {
        return None;
    }
    Some(
        if m.source == crate::analysis::metrics::Source::MemoryTimeline {
            format!(
                "a memory-timeline export records live tensor bytes by category, not the allocator's state; gate {} or {CATEGORY_RULES}.CATEGORY on it, or record a memory snapshot or profiler trace to measure {}",
                RuleKind::MaxPeakTotal.key(),
                metric.key()
            )
        } else {
            format!(
                "{} is a memory-profiler category figure, which only a memory-timeline export records: torch.profiler's export_memory_timeline(\"x.raw.json.gz\")",
                metric.key()
            )
        },
    )
}

/// Said after a figure of a device without trace events: only its recorded
/// state is known (the metrics' note says so once, with what to record).
/// End figures are that state by definition and need no word.
fn recorded_only(metric: MetricId, m: &Metrics, device: Option<i64>) -> &'static str {
    if !untraced_figure(metric, m, device) {
        return "";
    }
    match metric {
        MetricId::OomEvents => " (no trace, so none could be recorded)",
        _ => " (of the recorded state: no trace)",
    }
}

/// A figure of a snapshot's device (or, summed, devices) without trace
/// events, other than an end figure.
fn untraced_figure(metric: MetricId, m: &Metrics, device: Option<i64>) -> bool {
    let untraced = |d: &crate::analysis::metrics::DeviceMetrics| {
        d.timeline == crate::analysis::metrics::Timeline::FinalStateOnly
    };
    let from_untraced = match device {
        Some(x) => m.devices.iter().any(|d| d.device == x && untraced(d)),
        None => !m.devices.is_empty() && m.devices.iter().all(untraced),
    };
    from_untraced
        && m.source == crate::analysis::metrics::Source::Snapshot
        && !matches!(metric, MetricId::EndAllocated | MetricId::EndReserved)
}

/// Why a skipped rule's metric is missing: a profiler trace without GPU
/// memory events gives none at all.
const NO_GPU_EVENTS: &str = "the profiler trace holds no GPU memory events";

/// A profiler trace whose `[memory]` events are all CPU memory (the note of
/// its [`Metrics`] says so, with what to record instead).
fn no_gpu(m: &Metrics) -> bool {
    m.trace.is_some_and(|t| t.cpu_only)
}

/// The message of a rule skipped because its metric is not measurable.
fn not_measurable(metric: MetricId, m: &Metrics) -> String {
    if no_gpu(m) {
        return format!("{} is not measurable: {NO_GPU_EVENTS}", metric.label());
    }
    match m.source {
        crate::analysis::metrics::Source::ProfilerTrace => {
            format!("{} is not measurable for a profiler trace", metric.label())
        }
        crate::analysis::metrics::Source::MemoryTimeline => {
            format!(
                "{} is not measurable for a memory-timeline export",
                metric.label()
            )
        }
        crate::analysis::metrics::Source::Snapshot => {
            format!("{} is not measurable from this input", metric.label())
        }
    }
}

/// What a profiler trace lacks for a metric, true to the schema it was
/// recorded with (only the 2021 schema lacks totals and OOM events).
fn trace_lacks(metric: MetricId, t: TraceFacts) -> &'static str {
    match metric {
        MetricId::Fragmentation | MetricId::LargestGap | MetricId::FreeGaps => {
            "a profiler trace has no segment layout, so no free gaps to measure"
        }
        MetricId::InternalWaste => {
            "a profiler trace records rounded block sizes only, not the requested sizes rounding waste needs"
        }
        MetricId::PeakReserved | MetricId::EndReserved if t.bytes_only => {
            "this profiler trace does not record Total Reserved (2021 schema, only Bytes)"
        }
        MetricId::PeakReserved | MetricId::EndReserved => {
            "this profiler trace lacks Total Reserved on some memory events of the device, or holds none for it"
        }
        MetricId::OomEvents if t.bytes_only => {
            "this profiler trace's schema (2021, only Bytes) records no out-of-memory events"
        }
        MetricId::OomEvents => "this input does not count out-of-memory events",
        MetricId::PeakAllocated | MetricId::EndAllocated => {
            "the profiler trace holds no memory events for this device"
        }
        MetricId::PeakTotal
        | MetricId::PeakParameter
        | MetricId::PeakOptimizerState
        | MetricId::PeakInput
        | MetricId::PeakTemporary
        | MetricId::PeakActivation
        | MetricId::PeakGradient
        | MetricId::PeakAutogradDetail
        | MetricId::PeakUnknown => "a profiler trace records no memory-profiler categories",
    }
}

fn unmeasurable_hint(metric: MetricId, m: &Metrics) -> String {
    if let Some(h) = other_kind_hint(metric, m) {
        return h;
    }
    match m.source {
        crate::analysis::metrics::Source::MemoryTimeline => {
            "the export holds no time step to measure".into()
        }
        // The note says why, once, and what to record instead.
        crate::analysis::metrics::Source::ProfilerTrace if no_gpu(m) => String::new(),
        crate::analysis::metrics::Source::ProfilerTrace => format!(
            "{}; record a memory snapshot to measure {}",
            trace_lacks(metric, m.trace.unwrap_or_default()),
            metric.key()
        ),
        crate::analysis::metrics::Source::Snapshot if m.devices.is_empty() => {
            "the snapshot holds no segments: nothing was reserved".into()
        }
        crate::analysis::metrics::Source::Snapshot => {
            "nothing was reserved in this snapshot, so there is no free gap to measure".into()
        }
    }
}

fn fail_hint(st: &Style, metric: MetricId, m: &Metrics, device: Option<i64>) -> String {
    match metric {
        MetricId::Fragmentation => {
            "Free memory is split into many gaps while memory is tight: try \
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, and avoid keeping long-lived tensors allocated \
between short-lived ones."
                .into()
        }
        MetricId::LargestGap => "At the tightest moment no cached free block was this large, so a \
bigger request needs a new cudaMalloc (an OOM when the device is full): \
expandable_segments:True lets segments grow instead of leaving gaps."
            .into(),
        MetricId::PeakReserved | MetricId::EndReserved => {
            let dev = m
                .devices
                .iter()
                .find(|d| Some(d.device) == device)
                .or(m.devices.first());
            let untraced = dev
                .is_some_and(|d| d.timeline == crate::analysis::metrics::Timeline::FinalStateOnly);
            match dev.and_then(|d| Some((d.peak_allocated?, d.peak_reserved?))) {
                Some((a, r)) if untraced && r > 0 && (a as f64) < 0.8 * r as f64 => format!(
                    "In the recorded state {} is allocated ({} of reserved): the rest is cached \
free memory. Look at the fragmentation figures and try expandable_segments:True.",
                    st.bytes(a),
                    fmt_pct(a as f64 / r as f64)
                ),
                Some((a, _)) if untraced => format!(
                    "Live tensors hold {} in the recorded state, most of the reservation: reduce \
batch or sequence size, or use activation checkpointing.",
                    st.bytes(a)
                ),
                Some((a, r)) if r > 0 && (a as f64) < 0.8 * r as f64 => format!(
                    "Allocated memory peaks at {} ({} of peak reserved): the rest is cached free \
memory. Look at the fragmentation figures and try expandable_segments:True.",
                    st.bytes(a),
                    fmt_pct(a as f64 / r as f64)
                ),
                Some((a, _)) => format!(
                    "Live tensors peak at {}, most of the reservation: reduce batch or sequence \
size, or use activation checkpointing.",
                    st.bytes(a)
                ),
                None => "Reduce batch or sequence size, or use activation checkpointing.".into(),
            }
        }
        MetricId::PeakAllocated | MetricId::EndAllocated => "Live tensors exceed the budget: \
reduce batch or sequence size, use activation checkpointing, or keep optimizer state in lower \
precision."
            .into(),
        MetricId::InternalWaste => "Blocks are larger than the requests they serve: check \
roundup_power2_divisions and max_split_size_mb in PYTORCH_CUDA_ALLOC_CONF, and request sizes \
just above a rounding step."
            .into(),
        MetricId::FreeGaps => {
            "More free blocks are scattered between live ones: the same remedies \
as for fragmentation apply (expandable_segments:True)."
                .into()
        }
        MetricId::OomEvents => {
            "The recorded run hit an out-of-memory error; `fragscope oom` explains it.".into()
        }
        MetricId::PeakTotal
        | MetricId::PeakParameter
        | MetricId::PeakOptimizerState
        | MetricId::PeakInput
        | MetricId::PeakTemporary
        | MetricId::PeakActivation
        | MetricId::PeakGradient
        | MetricId::PeakAutogradDetail
        | MetricId::PeakUnknown => category_hint(metric),
    }
}

/// What to try when a memory-timeline figure is over its limit.
fn category_hint(metric: MetricId) -> String {
    let what = match metric.category() {
        None => {
            "Live tensors exceed the budget: `fragscope diff` against an earlier export shows which category grew."
        }
        Some(Category::Parameter) => {
            "Parameters exceed the budget: a smaller model, lower-precision weights, or sharding them across ranks (FSDP)."
        }
        Some(Category::OptimizerState) => {
            "Optimizer state exceeds the budget: a lighter optimizer or lower-precision (8-bit) states, or sharding them across ranks (ZeRO, FSDP)."
        }
        Some(Category::Input) => "Inputs exceed the budget: a smaller batch or sequence length.",
        Some(Category::Temporary) => {
            "Temporaries within an operator exceed the budget: a smaller batch or sequence length, or a fused or chunked kernel."
        }
        Some(Category::Activation) => {
            "Activations kept for backward exceed the budget: activation checkpointing, or a smaller batch or sequence length."
        }
        Some(Category::Gradient) => {
            "Gradients exceed the budget: lower-precision gradients, freeing them early (zero_grad(set_to_none=True)), or sharding them across ranks."
        }
        Some(Category::AutogradDetail) => {
            "Tensors autograd keeps for backward exceed the budget: activation checkpointing, or a smaller batch or sequence length."
        }
        Some(Category::Unknown) => {
            "Tensors the memory profiler could not categorize exceed the budget: `fragscope timeline` on the export shows when."
        }
    };
    what.into()
}

#[cfg(test)]
mod tests;
