//! Zoomed windows of a long series in time independent of the trace's
//! length: the series is cut once into buckets of `per` samples, each kept
//! as its two min/max points (as [`downsample`] keeps them), and a window
//! wide enough to be drawn from those is downsampled from them, with the
//! few samples at its ends read exactly. Coarser levels fold eight buckets
//! of the level below into one, so the widest window reads a few thousand
//! points, not every bucket. Element-wise minima and maxima fold the same
//! way in one step or several, so no peak is lowered and no dip raised; a
//! narrower window is downsampled from its samples.

use super::{columns, window};
use crate::timeline::downsample::downsample;
use crate::timeline::{Sample, Series};
use serde_json::Value;

/// About this many buckets are kept a device (two samples each).
const BUCKETS: usize = 1 << 17;

/// Each coarser level folds this many buckets of the level below.
const FOLD: usize = 8;

/// No coarser level is made once a level has at most this many points.
const COARSEST: usize = 4096;

/// One device's series cut into buckets, at levels of coarser buckets.
pub struct Zoom {
    /// Finest first: samples per bucket, and two points per bucket in
    /// order (one for a last bucket of one sample).
    levels: Vec<(usize, Vec<Sample>)>,
}

impl Zoom {
    pub fn new(series: &Series) -> Zoom {
        let per = series.len().div_ceil(BUCKETS).max(1);
        let mut levels = Vec::new();
        if per > 1 {
            let mut points = Vec::new();
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
            levels.push((per, points));
        }
        // A bucket of a coarser level folds FOLD whole buckets below it
        // (2 × FOLD points), as one bucket of their samples would fold.
        while let Some((per, points)) = levels.last().filter(|(_, p)| p.len() > COARSEST) {
            let per = per * FOLD;
            let coarser: Vec<Sample> = points
                .chunks(2 * FOLD)
                .flat_map(|c| downsample(c, 2))
                .collect();
            levels.push((per, coarser));
        }
        Zoom { levels }
    }

    /// What [`window`] answers, from the coarsest level of buckets of
    /// which each point of the answer spans at least four.
    pub fn window(&self, series: &Series, from: i64, to: i64, points: usize) -> Value {
        let n = series.len() as i64;
        let lo = (from + 1).clamp(0, n - 1) as usize;
        let hi = (to + 1).clamp(0, n - 1) as usize;
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let points = points.max(2);
        let per_point = (hi - lo + 1).div_ceil(points / 2);
        let Some((per, level)) = self
            .levels
            .iter()
            .rev()
            .find(|(per, _)| per_point >= 4 * per)
            .map(|(per, level)| (*per, level))
        else {
            return window(series, from, to, points);
        };
        // Whole buckets a..b, the samples before a and from b on exactly.
        let a = lo.div_ceil(per);
        let b = (hi + 1) / per;
        let mut seq: Vec<Sample> = series.iter().skip(lo).take(a * per - lo).collect();
        seq.extend_from_slice(&level[2 * a..2 * b]);
        seq.extend(series.iter().skip(b * per).take(hi + 1 - b * per));
        columns(&downsample(&seq, points), false)
    }
}
