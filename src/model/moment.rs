//! Moments: the points of a timeline a command can name (`--at`) and the
//! out-of-memory events marked on it. Snapshots and profiler traces share
//! them; the timeline resolves a [`Moment`] to an event, findings and charts
//! carry [`OomMark`]s.

use crate::core::units::fmt_binary;

/// A moment named on the command line (`--at`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Moment {
    Start,
    End,
    /// After trace event N (0-based).
    Event(usize),
    /// The last event at or before this `time_us`.
    TimeUs(i64),
    PeakAllocated,
    PeakReserved,
    MaxFragmentation,
    /// Smallest largest-free-gap while reserved is at least half its peak.
    MinLargestGap,
    /// The N-th `oom` event (0-based).
    Oom(usize),
}

/// An out-of-memory event to mark on a time series.
#[derive(Debug, Clone, PartialEq)]
pub struct OomMark {
    /// Index of the `oom` event in the device trace.
    pub event: usize,
    pub time_us: Option<i64>,
    /// The (rounded) request that failed.
    pub request: u64,
    /// Largest free gap inside reserved memory at that moment.
    pub largest_gap: Option<u64>,
    /// Free device memory the driver reported.
    pub device_free: Option<u64>,
}

impl OomMark {
    /// `OOM: 4.94 GiB requested, largest free gap 1.20 GiB`
    pub fn caption(&self) -> String {
        let gap = self
            .largest_gap
            .map(|g| format!(", largest free gap {}", fmt_binary(g)))
            .unwrap_or_default();
        format!("OOM: {} requested{gap}", fmt_binary(self.request))
    }
}

impl std::str::FromStr for Moment {
    type Err = String;
    /// `start`, `end`, `peak` (allocated), `peak-reserved`, `max-frag`,
    /// `min-gap`, `oom`, `oom:N` (1-based on the command line), an event
    /// index, or `t=MICROSECONDS` (epoch µs, as `time_us`).
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        Ok(match t.as_str() {
            "start" => Moment::Start,
            "end" => Moment::End,
            "peak" | "peak-allocated" => Moment::PeakAllocated,
            "peak-reserved" => Moment::PeakReserved,
            "max-frag" | "max-fragmentation" => Moment::MaxFragmentation,
            "min-gap" => Moment::MinLargestGap,
            "oom" => Moment::Oom(0),
            _ => {
                if let Some(n) = t.strip_prefix("oom:") {
                    let n: usize = n
                        .parse()
                        .map_err(|_| format!("malformed moment {s:?}: oom:N takes a number"))?;
                    if n == 0 {
                        return Err("oom:N counts from 1".into());
                    }
                    Moment::Oom(n - 1)
                } else if let Some(v) = t.strip_prefix("t=") {
                    Moment::TimeUs(v.parse().map_err(|_| {
                        format!("malformed time {s:?}: t= takes epoch microseconds")
                    })?)
                } else if let Ok(n) = t.parse::<usize>() {
                    Moment::Event(n)
                } else {
                    return Err(format!(
                        "unknown moment {s:?}: use start, end, peak, peak-reserved, max-frag, min-gap, oom, oom:N, an event index or t=MICROSECONDS"
                    ));
                }
            }
        })
    }
}
