//! Many ranks: one snapshot per rank of a distributed job, side by side.
//!
//! Owns the per-rank row (`stats` figures of the final state, the peaks and
//! worst fragmentation of [`crate::analysis::metrics`]), the rank labels (paths
//! without the directory they share, never absolute) and the verdict
//! sentences. The outlier flags come from the caller, computed with the rule
//! of `fragscope stats` on several files (`cli::stats::outliers`), so both
//! commands flag the same ranks. No I/O, no formatting beyond sentences.

use crate::analysis::metrics::{MetricId, Metrics};
use crate::analysis::stats::FileStats;
use crate::core::style::Style;
use crate::core::units::fmt_pct;

/// One rank's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct RankRow {
    /// The path without the directory all ranks share.
    pub file: String,
    pub devices: usize,
    pub segments: u64,
    /// Final state, as `fragscope stats` prints it.
    pub end_reserved: u64,
    pub end_allocated: u64,
    /// Final-state fragmentation (`1 − largest free block / inactive bytes`).
    pub fragmentation: f64,
    /// Over the replayed trace (the worst device), as `check` measures them.
    pub peak_reserved: Option<u64>,
    pub peak_allocated: Option<u64>,
    pub worst_fragmentation: Option<f64>,
    pub events: u64,
    pub ooms: u64,
    /// Why the rank is an outlier, by the `stats` rule.
    pub outlier: Option<String>,
}

pub fn row(file: String, fs: &FileStats, m: &Metrics) -> RankRow {
    let bytes = |id| {
        m.get(id).and_then(|x| match x.value {
            crate::analysis::metrics::Quantity::Bytes(b) => Some(b),
            _ => None,
        })
    };
    RankRow {
        file,
        devices: fs.devices.len(),
        segments: fs.totals.segments,
        end_reserved: fs.totals.reserved_bytes,
        end_allocated: fs.totals.allocated_bytes,
        fragmentation: fs.totals.fragmentation,
        peak_reserved: bytes(MetricId::PeakReserved),
        peak_allocated: bytes(MetricId::PeakAllocated),
        worst_fragmentation: m.get(MetricId::Fragmentation).map(|x| x.value.as_f64()),
        events: fs.trace_events.iter().sum(),
        ooms: fs.oom_events.len() as u64,
        outlier: None,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RanksReport {
    pub rows: Vec<RankRow>,
    /// Inputs not in the table, one line each with why.
    pub left_out: Vec<String>,
    pub verdict: Vec<String>,
    /// The outlier rule in words.
    pub rule: String,
}

/// Paths without the directories every one of them starts with, so labels
/// stay short and no absolute path reaches a report (`/runs/r0/s.pickle`,
/// `/runs/r1/s.pickle` → `r0/s.pickle`, `r1/s.pickle`). A single path keeps
/// its base name.
pub fn labels(paths: &[String]) -> Vec<String> {
    let split: Vec<Vec<&str>> = paths
        .iter()
        .map(|p| p.split(['/', '\\']).filter(|c| !c.is_empty()).collect())
        .collect();
    let shortest = split.iter().map(|s| s.len()).min().unwrap_or(0);
    // Keep at least the last component of each path.
    let mut common = 0;
    while common + 1 < shortest && split.iter().all(|s| s[common] == split[0][common]) {
        common += 1;
    }
    split.iter().map(|s| s[common..].join("/")).collect()
}

pub fn build(st: &Style, rows: Vec<RankRow>, left_out: Vec<String>, rule: String) -> RanksReport {
    let mut verdict = Vec::new();
    let n = rows.len();
    let flagged: Vec<&RankRow> = rows.iter().filter(|r| r.outlier.is_some()).collect();
    if n == 0 {
        verdict.push("No rank could be read as a snapshot.".into());
    } else if flagged.is_empty() {
        verdict.push(format!("{n} ranks; none is an outlier ({rule})."));
    } else {
        verdict.push(format!(
            "{} of {n} ranks {}: {}.",
            flagged.len(),
            if flagged.len() == 1 {
                "is an outlier"
            } else {
                "are outliers"
            },
            flagged
                .iter()
                .map(|r| format!("{} ({})", r.file, r.outlier.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    let ooms: Vec<&RankRow> = rows.iter().filter(|r| r.ooms > 0).collect();
    if !ooms.is_empty() {
        verdict.push(format!(
            "Out-of-memory events recorded on {}: {}.",
            if ooms.len() == 1 {
                "one rank"
            } else {
                "several ranks"
            },
            ooms.iter()
                .map(|r| format!("{} ({})", r.file, r.ooms))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // Highest peak; earliest rank on ties.
    let top = rows.iter().fold(None, |b: Option<&RankRow>, r| match b {
        Some(b) if b.peak_reserved >= r.peak_reserved => Some(b),
        _ => Some(r),
    });
    if let Some(t) = top
        && let Some(p) = t.peak_reserved
    {
        verdict.push(format!(
            "Highest peak reserved: {} on {} (fragmentation at the end {}).",
            st.bytes(p),
            t.file,
            fmt_pct(t.fragmentation)
        ));
    }
    RanksReport {
        rows,
        left_out,
        verdict,
        rule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_drop_the_shared_directories_only() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            labels(&p(&["/runs/job/r0/s.pickle", "/runs/job/r1/s.pickle"])),
            p(&["r0/s.pickle", "r1/s.pickle"])
        );
        assert_eq!(
            labels(&p(&["/a/x.pickle", "/a/y.pickle"])),
            p(&["x.pickle", "y.pickle"])
        );
        assert_eq!(labels(&p(&["/a/b/x.pickle"])), p(&["x.pickle"]));
        assert_eq!(
            labels(&p(&["x.pickle", "sub/y.pickle"])),
            p(&["x.pickle", "sub/y.pickle"])
        );
    }
}
