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
/// the series ([`KeyMomentsFold`]) instead of five; `None` where no sample
/// has the figure.
pub(super) struct Extremes {
    pub(super) peak_allocated: Option<usize>,
    pub(super) peak_reserved: Option<usize>,
    pub(super) max_fragmentation: Option<usize>,
    pub(super) min_largest_gap: Option<usize>,
    pub(super) peak_external: Option<usize>,
}

/// The key moments of a series ([`super::key_moments`]) folded a sample at
/// a time, so that a caller reading the series for other figures finds
/// them in the same read: fed every sample in order, then handed to
/// [`super::DeviceReplay::key_moments_first`]. It keeps the first sample
/// with the highest value of each figure, among those that have it, and
/// with a layout the smallest largest gap under pressure.
pub struct KeyMomentsFold {
    best: [Option<(usize, f64)>; 4],
    gap: MinGapUnderPressure,
    /// Whether the series has a layout (its first sample's).
    layout: bool,
}

impl KeyMomentsFold {
    pub fn new(samples: &Series) -> Self {
        KeyMomentsFold {
            best: [None; 4],
            gap: MinGapUnderPressure::of(samples),
            layout: samples.first().is_some_and(|s| s.layout.is_some()),
        }
    }

    /// The fold of the whole series, for a caller that reads it for
    /// nothing else.
    pub fn read(samples: &Series) -> Self {
        let mut f = KeyMomentsFold::new(samples);
        for (i, s) in samples.iter().enumerate() {
            f.add(i, &s);
        }
        f
    }

    #[inline]
    pub fn add(&mut self, i: usize, s: &Sample) {
        let v = [
            Some(s.allocated as f64),
            s.reserved.map(|r| r as f64),
            s.layout.map(|l| l.fragmentation),
            s.external_free.map(|e| e as f64),
        ];
        for k in 0..4 {
            if let Some(v) = v[k]
                && self.best[k].is_none_or(|(_, top)| v > top)
            {
                self.best[k] = Some((i, v));
            }
        }
        if self.layout {
            self.gap.add(i, s);
        }
    }

    pub(super) fn layout(&self) -> bool {
        self.layout
    }

    pub(super) fn extremes(&self) -> Extremes {
        let at = |k: usize| self.best[k].map(|(i, _)| i);
        Extremes {
            peak_allocated: at(0),
            peak_reserved: at(1),
            max_fragmentation: at(2),
            min_largest_gap: self.layout.then(|| self.gap.index()),
            peak_external: at(3),
        }
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
/// its peak before it is read), so that [`KeyMomentsFold`] finds it in its
/// read.
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
