//! Zoomed windows of a long series in time independent of the trace's
//! length: the series is cut once into buckets of `per` samples, each kept
//! as its two min/max points (as [`downsample`] keeps them), and a window
//! wide enough to be drawn from those is downsampled from them, with the
//! few samples at its ends read exactly. Element-wise minima and maxima
//! fold the same way in one step or two, so no peak is lowered and no dip
//! raised; a narrower window is downsampled from its samples.

use super::{columns, window};
use crate::timeline::downsample::downsample;
use crate::timeline::{Sample, Series};
use serde_json::Value;

/// About this many buckets are kept a device (two samples each).
const BUCKETS: usize = 1 << 17;

/// One device's series cut into buckets.
pub struct Zoom {
    /// Samples per bucket.
    per: usize,
    /// Two points per bucket of `per` samples, in order.
    points: Vec<Sample>,
}

impl Zoom {
    pub fn new(series: &Series) -> Zoom {
        let per = series.len().div_ceil(BUCKETS).max(1);
        let mut points = Vec::new();
        if per > 1 {
            let mut buf = Vec::with_capacity(per);
            let mut it = series.iter();
            loop {
                buf.clear();
                buf.extend(it.by_ref().take(per));
                if buf.is_empty() {
                    break;
                }
                points.extend(downsample(&buf, 2));
            }
        }
        Zoom { per, points }
    }

    /// What [`window`] answers, from the buckets when each point of the
    /// answer spans at least four of them.
    pub fn window(&self, series: &Series, from: i64, to: i64, points: usize) -> Value {
        let n = series.len() as i64;
        let lo = (from + 1).clamp(0, n - 1) as usize;
        let hi = (to + 1).clamp(0, n - 1) as usize;
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let points = points.max(2);
        let per_point = (hi - lo + 1).div_ceil(points / 2);
        if self.per == 1 || per_point < 4 * self.per {
            return window(series, from, to, points);
        }
        // Whole buckets a..b, the samples before a and from b on exactly.
        let a = lo.div_ceil(self.per);
        let b = (hi + 1) / self.per;
        let mut seq: Vec<Sample> = series.iter().skip(lo).take(a * self.per - lo).collect();
        seq.extend_from_slice(&self.points[2 * a..2 * b]);
        seq.extend(series.iter().skip(b * self.per).take(hi + 1 - b * self.per));
        columns(&downsample(&seq, points), false)
    }
}
