//! The figures `check` gates on and `diff` compares, defined and computed in
//! one place.
//!
//! Owns: the list of metrics (names, units, which direction is worse) and the
//! arithmetic that turns a final state plus a time series into them. The time
//! series is plain input: replayed [`Sample`]s of a snapshot, or the
//! `Total Allocated`/`Total Reserved` series of a profiler trace
//! ([`DeviceMetrics::from_totals`]). Must not load files, format text, or
//! change how the replay or [`StateStats`] define a figure.
//!
//! Definitions (per device; `docs/ci.md` repeats them for users):
//!
//! * peak allocated / peak reserved: the maxima over the series and the final
//!   state;
//! * end allocated / end reserved: the final state of the file;
//! * "under pressure": the moments whose reserved bytes are at least half the
//!   peak (the same notion as the replay's `min-gap` moment); early, nearly
//!   empty moments would otherwise dominate ratio figures;
//! * fragmentation: the worst `1 − largest free gap / inactive bytes` under
//!   pressure;
//! * largest gap: the smallest largest-free-gap under pressure (the biggest
//!   request the cache could still serve at its tightest moment); unknown when
//!   nothing was ever reserved. The `min_largest_gap` gate reads
//!   [`DeviceMetrics::gap_moments`] instead: a moment with nothing free has
//!   no gap, but is full rather than fragmented;
//! * free gaps: the most inactive blocks at one moment under pressure;
//! * internal waste: the most rounding waste (block bytes − requested bytes
//!   of live blocks) at one moment;
//! * OOM events: `oom` entries of the trace.
//!
//! A device without trace events has one moment, its recorded state: every
//! figure is that state's (a peak is then only a lower bound), and a note
//! says so.
//!
//! A file-level figure is the worst device's (largest peak, smallest gap);
//! OOM events add up over devices.
//!
//! A memory-timeline export (`export_memory_timeline`) has none of those:
//! it records live tensor bytes by memory-profiler category, so its metrics
//! are the peak of the total and each category's own peak
//! ([`CategoryMetrics`]); the allocator metrics are not measurable for it,
//! nor the category peaks for a snapshot or a profiler trace.

use crate::analysis::stats::StateStats;
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::input::profiler::memtimeline::{Category, MemoryTimeline};
use crate::model::Snapshot;
use crate::timeline::{LayoutFigures, Sample};
use serde::{Deserialize, Serialize};

mod id;
pub use id::*;

/// What the time-dependent figures of a device rest on.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Timeline {
    /// The trace was replayed; `samples` moments were measured.
    Replayed { samples: usize },
    /// No trace events: every figure is the final state's.
    FinalStateOnly,
    /// A profiler trace's allocator totals (allocated/reserved only).
    Totals { points: usize },
}

/// Where a moment of a device holds.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MomentAt {
    /// Before the first trace event.
    Start,
    /// After this trace event.
    Event(u32),
    /// The state the snapshot recorded (its final state).
    RecordedState,
}

impl MomentAt {
    /// `after event 9`, `at the start of the trace`, `in the recorded state`.
    pub fn text(self) -> String {
        match self {
            MomentAt::Start => "at the start of the trace".into(),
            MomentAt::Event(e) => format!("after event {e}"),
            MomentAt::RecordedState => "in the recorded state".into(),
        }
    }
}

/// Free memory and its largest gap at one moment under pressure.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapMoment {
    /// Bytes of inactive blocks: reserved memory free for a new request
    /// (pending frees are not free yet, rounding waste never is).
    pub free: u64,
    /// The largest inactive block.
    pub largest_gap: u64,
    pub at: MomentAt,
}

/// Keeps the moments no other moment is worse than for a minimum on the
/// largest gap: none with at least as much free and a gap no larger. Sorted
/// by free bytes, gaps ascend with them; on ties the first moment stays.
fn add_gap_moment(front: &mut std::collections::BTreeMap<u64, GapMoment>, m: GapMoment) {
    if front
        .range(m.free..)
        .next()
        .is_some_and(|(_, q)| q.largest_gap <= m.largest_gap)
    {
        return;
    }
    let worse: Vec<u64> = front
        .range(..=m.free)
        .rev()
        .take_while(|(_, q)| q.largest_gap >= m.largest_gap)
        .map(|(k, _)| *k)
        .collect();
    for k in worse {
        front.remove(&k);
    }
    front.insert(m.free, m);
}

/// Every metric of one device. `None` = not measurable from this input.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct DeviceMetrics {
    pub device: i64,
    pub timeline: Timeline,
    pub peak_allocated: Option<u64>,
    pub peak_reserved: Option<u64>,
    pub end_allocated: Option<u64>,
    pub end_reserved: Option<u64>,
    pub fragmentation: Option<f64>,
    pub largest_gap: Option<u64>,
    pub free_gaps: Option<u64>,
    pub internal_waste: Option<u64>,
    pub oom_events: Option<u64>,
    /// The moments under pressure that decide the `min_largest_gap` gate,
    /// by free bytes (ascending, and so are their gaps): for a minimum of N,
    /// the first with at least N free has the smallest gap of all moments
    /// that had N free ([`DeviceMetrics::tightest_with_free`]). Empty
    /// without a segment layout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gap_moments: Vec<GapMoment>,
}

impl DeviceMetrics {
    /// Of the moments under pressure with at least `bytes` free, the one
    /// with the smallest largest gap (the first such moment on ties); `None`
    /// when no moment had that much free.
    pub fn tightest_with_free(&self, bytes: u64) -> Option<GapMoment> {
        let i = self.gap_moments.partition_point(|m| m.free < bytes);
        self.gap_moments.get(i).copied()
    }

    /// The most free bytes at one moment under pressure.
    pub fn most_free_under_pressure(&self) -> Option<u64> {
        self.gap_moments.last().map(|m| m.free)
    }

    /// From the final state of a device and its replayed samples (any order,
    /// may be empty), read in two passes: the peaks, then the moments under
    /// pressure, so a compact series is decoded as it is read, never
    /// expanded whole. The final state also counts as a moment, so peaks are
    /// never below the recorded end even where a replay drifted.
    pub fn from_parts<I>(
        device: i64,
        end: &StateStats,
        samples: I,
        oom_events: u64,
    ) -> DeviceMetrics
    where
        I: IntoIterator<Item = Sample>,
        I::IntoIter: Clone + ExactSizeIterator,
    {
        let samples = samples.into_iter();
        let n_samples = samples.len();
        let end_sample = Sample {
            allocated: end.allocated_bytes,
            active: end.active_bytes,
            reserved: Some(end.reserved_bytes),
            external_free: Some(end.external_free_bytes),
            layout: Some(LayoutFigures {
                internal_free: end.internal_free_bytes,
                pending_free: end.pending_free_bytes,
                largest_free_gap: end.largest_free_block_bytes,
                free_gaps: end.free_blocks,
                fragmentation: end.fragmentation,
                ..Default::default()
            }),
            ..Sample::default()
        };
        let at = |s: &Sample| s.event.map_or(MomentAt::Start, MomentAt::Event);
        let moments = || {
            (samples.clone().map(move |s| (s, at(&s))))
                .chain(std::iter::once((end_sample, MomentAt::RecordedState)))
        };
        let (mut peak_allocated, mut peak_reserved, mut internal_waste) = (0, 0, 0);
        for (s, _) in moments() {
            peak_allocated = peak_allocated.max(s.allocated);
            peak_reserved = peak_reserved.max(s.reserved_bytes());
            internal_waste = internal_waste.max(s.lay().internal_free);
        }
        let mut fragmentation = 0.0;
        let (mut largest_gap, mut free_gaps) = (None::<u64>, None::<u64>);
        let mut front = std::collections::BTreeMap::new();
        for (s, at) in moments().filter(|(s, _)| under_pressure(s.reserved_bytes(), peak_reserved))
        {
            fragmentation = f64::max(fragmentation, s.lay().fragmentation);
            largest_gap = Some(largest_gap.map_or(s.lay().largest_free_gap, |g| {
                g.min(s.lay().largest_free_gap)
            }));
            free_gaps = Some(free_gaps.map_or(s.lay().free_gaps, |g| g.max(s.lay().free_gaps)));
            if peak_reserved > 0 {
                add_gap_moment(
                    &mut front,
                    GapMoment {
                        free: s.external_bytes().saturating_sub(s.lay().pending_free),
                        largest_gap: s.lay().largest_free_gap,
                        at,
                    },
                );
            }
        }
        DeviceMetrics {
            device,
            timeline: if n_samples == 0 {
                Timeline::FinalStateOnly
            } else {
                Timeline::Replayed { samples: n_samples }
            },
            peak_allocated: Some(peak_allocated),
            peak_reserved: Some(peak_reserved),
            end_allocated: Some(end.allocated_bytes),
            end_reserved: Some(end.reserved_bytes),
            fragmentation: Some(fragmentation),
            largest_gap: largest_gap.filter(|_| peak_reserved > 0),
            free_gaps,
            internal_waste: Some(internal_waste),
            oom_events: Some(oom_events),
            gap_moments: front.into_values().collect(),
        }
    }

    /// From a series of (allocated, reserved) totals in time order, such as a
    /// profiler trace's `Total Allocated`/`Total Reserved`. Only the peak and
    /// end figures exist; `oom_events` when the source counts them.
    pub fn from_totals(
        device: i64,
        points: impl IntoIterator<Item = (u64, u64)>,
        oom_events: Option<u64>,
    ) -> DeviceMetrics {
        let mut n = 0usize;
        let mut peak = (None::<u64>, None::<u64>);
        let mut last = None;
        for (a, r) in points {
            n += 1;
            peak.0 = Some(peak.0.map_or(a, |p| p.max(a)));
            peak.1 = Some(peak.1.map_or(r, |p| p.max(r)));
            last = Some((a, r));
        }
        DeviceMetrics {
            device,
            timeline: Timeline::Totals { points: n },
            peak_allocated: peak.0,
            peak_reserved: peak.1,
            end_allocated: last.map(|l| l.0),
            end_reserved: last.map(|l| l.1),
            fragmentation: None,
            largest_gap: None,
            free_gaps: None,
            internal_waste: None,
            oom_events,
            gap_moments: Vec::new(),
        }
    }

    pub fn get(&self, m: MetricId) -> Option<Quantity> {
        Some(match m {
            MetricId::PeakAllocated => Quantity::Bytes(self.peak_allocated?),
            MetricId::PeakReserved => Quantity::Bytes(self.peak_reserved?),
            MetricId::EndAllocated => Quantity::Bytes(self.end_allocated?),
            MetricId::EndReserved => Quantity::Bytes(self.end_reserved?),
            MetricId::Fragmentation => Quantity::Ratio(self.fragmentation?),
            MetricId::LargestGap => Quantity::Bytes(self.largest_gap?),
            MetricId::FreeGaps => Quantity::Count(self.free_gaps?),
            MetricId::InternalWaste => Quantity::Bytes(self.internal_waste?),
            MetricId::OomEvents => Quantity::Count(self.oom_events?),
            // A device of a snapshot or trace has no memory-profiler categories.
            MetricId::PeakTotal
            | MetricId::PeakParameter
            | MetricId::PeakOptimizerState
            | MetricId::PeakInput
            | MetricId::PeakTemporary
            | MetricId::PeakActivation
            | MetricId::PeakGradient
            | MetricId::PeakAutogradDetail
            | MetricId::PeakUnknown => return None,
        })
    }
}

/// Reserved at least half its peak.
pub fn under_pressure(reserved: u64, peak_reserved: u64) -> bool {
    reserved.saturating_mul(2) >= peak_reserved
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Snapshot,
    ProfilerTrace,
    /// `export_memory_timeline`'s live tensor bytes by category.
    MemoryTimeline,
}

/// The figures of a memory-timeline export: tensor bytes as the memory
/// profiler sees them (unrounded, no allocator cache).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CategoryMetrics {
    /// Time steps measured (distinct microseconds, tensors from before
    /// profiling included).
    pub samples: usize,
    /// The highest total of all categories at one moment.
    pub peak_total: u64,
    /// Each category's own highest live bytes, indexed like
    /// [`Category::ALL`] (the categories may peak at different moments).
    pub peak: [u64; 8],
}

impl CategoryMetrics {
    pub fn of(t: &MemoryTimeline) -> CategoryMetrics {
        let mut peak = [0u64; 8];
        let mut peak_total = 0;
        for s in &t.samples {
            for (p, b) in peak.iter_mut().zip(s.bytes) {
                *p = (*p).max(b);
            }
            peak_total = peak_total.max(s.total());
        }
        CategoryMetrics {
            samples: t.samples.len(),
            peak_total,
            peak,
        }
    }

    pub fn get(&self, m: MetricId) -> Option<u64> {
        match m {
            MetricId::PeakTotal => Some(self.peak_total),
            _ => m.category().map(|c| self.peak[c as usize]),
        }
    }
}

/// A file-level figure and the device it comes from (`None` when it sums
/// several devices, or the file has none).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub value: Quantity,
    pub device: Option<i64>,
}

/// What a profiler trace records, for saying truly why a figure is missing.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceFacts {
    /// Every `[memory]` event is CPU memory: no GPU figure exists at all.
    pub cpu_only: bool,
    /// A measured device's events carry only `Bytes` (the 2021 schema): no
    /// reserved memory and no out-of-memory events.
    pub bytes_only: bool,
}

/// Every metric of one input.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Metrics {
    pub source: Source,
    pub devices: Vec<DeviceMetrics>,
    /// What the figures rest on that a reader should know (replay anomalies,
    /// a final state the replay could not reproduce), one line each.
    pub notes: Vec<String>,
    /// A memory-timeline export's figures (`devices` is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<CategoryMetrics>,
    /// For a profiler trace read by [`Metrics::of_trace`]: what it records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceFacts>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MetricsError {
    #[error("no device {device} in this file (devices: {available})")]
    NoSuchDevice { device: i64, available: String },
}

impl Metrics {
    /// Every metric of a snapshot, replaying the trace of each device that
    /// has events (`device` limits it to one).
    pub fn of_snapshot(snap: &Snapshot, device: Option<i64>) -> Result<Metrics, MetricsError> {
        let devices = select_devices(snap, device)?;
        let ooms = crate::analysis::stats::snapshot_oom_events(snap);
        let mut out = Metrics {
            source: Source::Snapshot,
            devices: Vec::new(),
            notes: Vec::new(),
            categories: None,
            trace: None,
        };
        for d in devices {
            let end = StateStats::of(snap.segments_of(d));
            let n_oom = ooms.iter().filter(|o| o.device == d).count() as u64;
            // The replay contract gives exactly the final state when there are
            // no events, which `from_parts` already counts.
            let r = if snap.trace_of(d).is_empty() {
                None
            } else {
                let r = crate::timeline::replay_device(snap, d);
                let anomalies: u64 = r.report.anomalies.iter().map(|a| a.count).sum();
                if let Some(a) = r.report.anomalies.first() {
                    out.notes.push(format!(
                        "device {d}: the replay worked around {anomalies} anomalies (e.g. {}); timeline figures are approximate",
                        a.example
                    ));
                }
                if !r.report.final_state_matches {
                    out.notes.push(format!(
                        "device {d}: replaying the trace did not reproduce the recorded final state{}",
                        r.report
                            .final_state_diff
                            .as_deref()
                            .map(|x| format!(" ({x})"))
                            .unwrap_or_default()
                    ));
                }
                Some(r)
            };
            let no_samples = crate::timeline::Series::default();
            let samples = r.as_ref().map_or(&no_samples, |r| &r.samples);
            out.devices
                .push(DeviceMetrics::from_parts(d, &end, samples, n_oom));
        }
        let untraced: Vec<String> = out
            .devices
            .iter()
            .filter(|d| d.timeline == Timeline::FinalStateOnly)
            .map(|d| d.device.to_string())
            .collect();
        if !untraced.is_empty() {
            // Once for all such devices: their figures are real, but of one
            // moment.
            out.notes.push(format!(
                "{} {}: no trace was recorded, so only the recorded state is known and every figure is that state's: the run's peaks (at least these) and its out-of-memory events are not measurable; {}",
                if untraced.len() == 1 { "device" } else { "devices" },
                untraced.join(", "),
                crate::timeline::RECORD_A_TRACE
            ));
        }
        Ok(out)
    }

    /// A profiler trace's per-device totals series.
    pub fn from_totals<I>(series: impl IntoIterator<Item = (i64, I, Option<u64>)>) -> Metrics
    where
        I: IntoIterator<Item = (u64, u64)>,
    {
        let mut devices: Vec<DeviceMetrics> = series
            .into_iter()
            .map(|(d, pts, oom)| DeviceMetrics::from_totals(d, pts, oom))
            .collect();
        devices.sort_by_key(|d| d.device);
        Metrics {
            source: Source::ProfilerTrace,
            devices,
            notes: Vec::new(),
            categories: None,
            trace: None,
        }
    }

    /// The metrics of a profiler trace: peaks and ends from its `Total
    /// Allocated`/`Total Reserved` series, OOMs from its `[OutOfMemory]`
    /// events, per accelerator (CPU memory is not cached by a device
    /// allocator and is left out). `device` picks one device index. The notes
    /// name every figure a trace cannot give.
    pub fn of_trace(
        tr: &crate::input::profiler::ProfilerTrace,
        device: Option<i64>,
    ) -> Result<Metrics, MetricsError> {
        if let Some(n) = tr.no_gpu_memory() {
            // Nothing is measurable, whichever device is asked for: one line
            // says why and what to record.
            return Ok(Metrics {
                source: Source::ProfilerTrace,
                devices: Vec::new(),
                notes: vec![n],
                categories: None,
                trace: Some(TraceFacts {
                    cpu_only: true,
                    bytes_only: false,
                }),
            });
        }
        let picked: Vec<&crate::input::profiler::TraceDevice> = tr.accelerators(device).collect();
        if let Some(want) = device
            && picked.is_empty()
        {
            let accel: Vec<&crate::input::profiler::TraceDevice> = tr.accelerators(None).collect();
            return Err(MetricsError::NoSuchDevice {
                device: want,
                available: if accel.is_empty() {
                    "none".into()
                } else {
                    accel
                        .iter()
                        .map(|d| d.key.device_id.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            });
        }
        let mut devices = Vec::new();
        let mut facts = TraceFacts::default();
        let mut notes = vec![format!(
            "not measurable for a profiler trace: {}, {}, {} and {} (a trace has no segment layout and no requested sizes)",
            MetricId::Fragmentation.key(),
            MetricId::LargestGap.key(),
            MetricId::FreeGaps.key(),
            MetricId::InternalWaste.key()
        )];
        for d in picked {
            // The totals after each event.
            let events: Vec<_> = d.totals().collect();
            // The 2021 schema has no [OutOfMemory] events; a device with
            // only those has no [memory] event to tell its schema by.
            let bytes_only = !d.summary.has_totals && !events.is_empty();
            let oom = (!bytes_only).then_some(d.ooms.len() as u64);
            let mut m = DeviceMetrics::from_totals(
                d.key.device_id,
                events
                    .iter()
                    .map(|x| (x.allocated, x.reserved.unwrap_or(0))),
                oom,
            );
            if bytes_only {
                facts.bytes_only = true;
                m.peak_reserved = None;
                m.end_reserved = None;
                notes.push(format!(
                    "{}: reserved memory is not recorded (2021 schema with only Bytes): peak_reserved, end_reserved and oom_events are not measurable, and allocated bytes are rebuilt by summing",
                    d.label
                ));
            } else if events.iter().any(|x| x.reserved.is_none()) {
                m.peak_reserved = None;
                m.end_reserved = None;
                notes.push(format!(
                    "{}: Total Reserved is missing from some [memory] events: peak_reserved and end_reserved are not measurable",
                    d.label
                ));
            }
            if events.is_empty() {
                m.peak_allocated = None;
                m.end_allocated = None;
            }
            devices.push(m);
        }
        if tr.devices.iter().any(|d| d.key.is_cpu()) {
            notes.push("CPU memory events are left out: no device allocator caches them".into());
        }
        devices.sort_by_key(|d| d.device);
        Ok(Metrics {
            source: Source::ProfilerTrace,
            devices,
            notes,
            categories: None,
            trace: Some(facts),
        })
    }

    /// The metrics of a memory-timeline export: the peak of the total and
    /// of each category. The notes say what it cannot give.
    pub fn of_memory_timeline(t: &MemoryTimeline) -> Metrics {
        let mut notes = vec![format!(
            "a memory-timeline export records live tensor bytes by category as the memory profiler sees them (unrounded, outside the allocator's cache): {} and each category's peak ({}) are measured; the allocator's figures (reserved memory, free gaps, fragmentation, OOM events) are not measurable for it",
            MetricId::PeakTotal.key(),
            MetricId::CATEGORIES[1..]
                .iter()
                .map(|m| m.key())
                .collect::<Vec<_>>()
                .join(", ")
        )];
        if !t.anomalies.is_empty() {
            let n: u64 = t.anomalies.iter().map(|a| a.count).sum();
            notes.push(format!(
                "{n} row(s) of the export could not be read as written (e.g. {}: {}); the figures leave them out or clamp them",
                t.anomalies[0].kind, t.anomalies[0].example
            ));
        }
        Metrics {
            source: Source::MemoryTimeline,
            devices: Vec::new(),
            notes,
            categories: Some(CategoryMetrics::of(t)),
            trace: None,
        }
    }

    /// The file-level figure: the worst device's (OOM events add up).
    pub fn get(&self, m: MetricId) -> Option<Measured> {
        if !m.applies_to(self.source) {
            return None;
        }
        if let Some(c) = &self.categories {
            return c.get(m).map(|b| Measured {
                value: Quantity::Bytes(b),
                device: None,
            });
        }
        if self.devices.is_empty() {
            // A snapshot with no segments and no trace: nothing was reserved.
            return match (self.source, m) {
                (Source::Snapshot, MetricId::LargestGap)
                | (Source::ProfilerTrace | Source::MemoryTimeline, _) => None,
                (Source::Snapshot, _) => Some(Measured {
                    value: Quantity::of(m.unit(), 0.0),
                    device: None,
                }),
            };
        }
        let vals: Vec<(i64, Quantity)> = self
            .devices
            .iter()
            .filter_map(|d| d.get(m).map(|q| (d.device, q)))
            .collect();
        if vals.is_empty() {
            return None;
        }
        if m == MetricId::OomEvents {
            let total: u64 = vals.iter().map(|(_, q)| q.as_f64() as u64).sum();
            return Some(Measured {
                value: Quantity::Count(total),
                device: if vals.len() == 1 {
                    Some(vals[0].0)
                } else {
                    None
                },
            });
        }
        // Devices are ascending; the first of equal values wins.
        let mut best = vals[0];
        for v in &vals[1..] {
            let worse = if m.lower_is_worse() {
                v.1.as_f64() < best.1.as_f64()
            } else {
                v.1.as_f64() > best.1.as_f64()
            };
            if worse {
                best = *v;
            }
        }
        Some(Measured {
            value: best.1,
            device: Some(best.0),
        })
    }
}

fn select_devices(snap: &Snapshot, device: Option<i64>) -> Result<Vec<i64>, MetricsError> {
    let all = snap.devices();
    match device {
        None => Ok(all),
        Some(d) if all.contains(&d) => Ok(vec![d]),
        Some(d) => Err(MetricsError::NoSuchDevice {
            device: d,
            available: if all.is_empty() {
                "none".into()
            } else {
                all.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        }),
    }
}

#[cfg(test)]
mod tests;
