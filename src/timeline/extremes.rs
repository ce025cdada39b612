//! The samples where a series' figures peak, found in one read of it: the
//! key moments of a replay and the moments a report or a query resolves.

use super::Sample;
use super::series::Series;

/// Index of the first sample with the largest figure.
pub(super) fn first_max_by(samples: &Series, f: impl Fn(&Sample) -> f64) -> usize {
    let mut best = 0;
    let mut top = f64::NAN;
    for (i, s) in samples.iter().enumerate() {
        let v = f(&s);
        // `top` is the figure of sample `best` (NaN before the first).
        if i == 0 {
            top = v;
        } else if v > top {
            best = i;
            top = v;
        }
    }
    best
}

/// Indices of the samples of the moments [`first_max_by`] and
/// [`min_gap_under_pressure`] find, as they find them, from one read of
/// the series instead of five; `None` where no sample has the figure.
pub(super) struct Extremes {
    pub(super) peak_allocated: Option<usize>,
    pub(super) peak_reserved: Option<usize>,
    pub(super) max_fragmentation: Option<usize>,
    pub(super) min_largest_gap: Option<usize>,
    pub(super) peak_external: Option<usize>,
}

/// The first sample with the highest value of each figure, among those that
/// have it; with `layout`, also the smallest largest gap under pressure.
pub(super) fn extremes(samples: &Series, layout: bool) -> Extremes {
    let mut best: [Option<(usize, f64)>; 4] = [None; 4];
    let mut gap = MinGapUnderPressure::of(samples);
    for (i, s) in samples.iter().enumerate() {
        let v = [
            Some(s.allocated as f64),
            s.reserved.map(|r| r as f64),
            s.layout.map(|l| l.fragmentation),
            s.external_free.map(|e| e as f64),
        ];
        for k in 0..4 {
            if let Some(v) = v[k]
                && best[k].is_none_or(|(_, top)| v > top)
            {
                best[k] = Some((i, v));
            }
        }
        if layout {
            gap.add(i, &s);
        }
    }
    let at = |k: usize| best[k].map(|(i, _)| i);
    Extremes {
        peak_allocated: at(0),
        peak_reserved: at(1),
        max_fragmentation: at(2),
        min_largest_gap: layout.then(|| gap.index()),
        peak_external: at(3),
    }
}

/// Index of the first sample with the smallest largest free gap among those
/// whose reserved bytes are at least half the peak.
pub(super) fn min_gap_under_pressure(samples: &Series) -> usize {
    let mut gap = MinGapUnderPressure::of(samples);
    for (i, s) in samples.iter().enumerate() {
        gap.add(i, &s);
    }
    gap.index()
}

/// [`min_gap_under_pressure`] folded a sample at a time (the series knows
/// its peak before it is read), so that [`extremes`] finds it in its read.
struct MinGapUnderPressure {
    peak: u64,
    /// The first sample with the smallest gap so far, and that gap.
    best: Option<(usize, u64)>,
}

impl MinGapUnderPressure {
    fn of(samples: &Series) -> Self {
        MinGapUnderPressure {
            peak: samples.peak_reserved(),
            best: None,
        }
    }

    fn add(&mut self, i: usize, s: &Sample) {
        if s.reserved_bytes().saturating_mul(2) < self.peak {
            return;
        }
        let gap = s.lay().largest_free_gap;
        if self.best.is_none_or(|(_, g)| gap < g) {
            self.best = Some((i, gap));
        }
    }

    /// The sample found (0 when none qualifies).
    fn index(&self) -> usize {
        self.best.map_or(0, |(i, _)| i)
    }
}
