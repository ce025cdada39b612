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
use crate::timeline::downsample::{Downsampler, Order, downsample};
use crate::timeline::{LayoutFigures, Sample, Series};
use serde_json::Value;

/// At most about this many buckets are kept a device (two points each,
/// 9.4 MB), however long its series.
const BUCKETS: usize = 1 << 16;

/// No bucket holds fewer samples than this: the points of a device are
/// at most an eighth of its samples, and a window of fewer than `2 *
/// MIN_PER` samples a point (64 000 for 2 000 points, a few milliseconds)
/// is read from the series.
const MIN_PER: usize = 16;

/// The samples of a bucket of the finest level of a series of `n`, `None`
/// for a series too short to need levels (a few tens of thousands).
fn finest_per(n: usize) -> Option<usize> {
    let per = n.div_ceil(BUCKETS).max(MIN_PER);
    (n / per > COARSEST / 2).then_some(per)
}

/// Each coarser level folds this many buckets of the level below.
const FOLD: usize = 8;

/// No coarser level is made once a level has at most this many points.
const COARSEST: usize = 4096;

/// One device's series cut into buckets, at levels of coarser buckets.
pub struct Zoom {
    /// Finest first: samples per bucket, and two points per bucket in
    /// order (one for a last bucket of one sample).
    levels: Vec<(usize, Vec<Point>)>,
}

/// A bucket's point with the figures a window's columns draw and no more
/// (`columns(_, false)`), each optional one with whether it was there: 72
/// bytes where a [`Sample`] takes 136, for 2^17 points a device. Every
/// figure of a point is the minimum or maximum of that figure alone, and
/// a window's points are ordered and dated by reserved bytes, event and
/// time alone, so the figures left out change nothing a window draws.
#[derive(Debug, Clone, Copy)]
struct Point {
    time_us: i64,
    allocated: u64,
    active: u64,
    reserved: u64,
    external_free: u64,
    largest_free_gap: u64,
    free_gaps: u64,
    fragmentation: f64,
    /// [`NO_EVENT`] for the start.
    event: u32,
    /// Which of the optional figures the sample had ([`TIMED`] …).
    has: u8,
}

const _: () = assert!(std::mem::size_of::<Point>() == 72);

const NO_EVENT: u32 = u32::MAX;
const TIMED: u8 = 1;
const RESERVED: u8 = 2;
const EXTERNAL: u8 = 4;
const LAYOUT: u8 = 8;

impl Point {
    fn of(s: &Sample) -> Point {
        let lay = s.lay();
        let flag = |b: bool, f: u8| if b { f } else { 0 };
        Point {
            time_us: s.time_us.unwrap_or(0),
            allocated: s.allocated,
            active: s.active,
            reserved: s.reserved_bytes(),
            external_free: s.external_bytes(),
            largest_free_gap: lay.largest_free_gap,
            free_gaps: lay.free_gaps,
            fragmentation: lay.fragmentation,
            // An event index is below u32::MAX (as every sample's is).
            event: s.event.unwrap_or(NO_EVENT),
            has: flag(s.time_us.is_some(), TIMED)
                | flag(s.reserved.is_some(), RESERVED)
                | flag(s.external_free.is_some(), EXTERNAL)
                | flag(s.layout.is_some(), LAYOUT),
        }
    }

    /// The sample the point was made of, the layout figures a window does
    /// not draw 0.
    fn sample(&self) -> Sample {
        let has = |f: u8| self.has & f != 0;
        Sample {
            event: (self.event != NO_EVENT).then_some(self.event),
            time_us: has(TIMED).then_some(self.time_us),
            allocated: self.allocated,
            active: self.active,
            reserved: has(RESERVED).then_some(self.reserved),
            external_free: has(EXTERNAL).then_some(self.external_free),
            layout: has(LAYOUT).then_some(LayoutFigures {
                largest_free_gap: self.largest_free_gap,
                free_gaps: self.free_gaps,
                fragmentation: self.fragmentation,
                ..LayoutFigures::default()
            }),
        }
    }
}

/// Two points of a bucket of `samples` (one for a bucket of one).
fn points_of(samples: &[Sample], out: &mut Vec<Point>) {
    out.extend(downsample(samples, 2).iter().map(Point::of));
}

impl Zoom {
    pub fn new(series: &Series) -> Zoom {
        let mut levels = Vec::new();
        if let Some(per) = finest_per(series.len()) {
            let mut points = Vec::with_capacity(2 * series.len().div_ceil(per));
            let mut buf = Vec::with_capacity(per);
            let mut it = series.iter();
            loop {
                buf.clear();
                buf.extend(it.by_ref().take(per));
                if buf.is_empty() {
                    break;
                }
                points_of(&buf, &mut points);
            }
            levels.push((per, points));
        }
        // A bucket of a coarser level folds FOLD whole buckets below it
        // (2 × FOLD points), as one bucket of their samples would fold.
        while let Some((per, points)) = levels.last().filter(|(_, p)| p.len() > COARSEST) {
            let per = per * FOLD;
            let mut coarser = Vec::with_capacity(points.len().div_ceil(FOLD));
            let mut buf = Vec::with_capacity(2 * FOLD);
            for c in points.chunks(2 * FOLD) {
                buf.clear();
                buf.extend(c.iter().map(Point::sample));
                points_of(&buf, &mut coarser);
            }
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
        // Fed to one downsampler as `downsample` of them all feeds it: a
        // window of half a level is never held as samples.
        let (head, mid, tail) = (a * per - lo, &level[2 * a..2 * b], hi + 1 - b * per);
        let mut d = Downsampler::new(head + mid.len() + tail, points, Order::ReservedFirst);
        (series.iter().skip(lo).take(head))
            .chain(mid.iter().map(Point::sample))
            .chain(series.iter().skip(b * per).take(tail))
            .for_each(|s| d.push(s));
        columns(&d.finish(), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples with every optional figure now there, now not, and every
    /// layout figure moving.
    fn samples(n: u32) -> Vec<Sample> {
        let mut x = 7u64;
        (0..n)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                let r = x >> 33;
                // Long stretches without the figure, with it, and with it
                // now and then, so that whole buckets lack it.
                let there = |bit: u64| match (u64::from(i) / 37_000 + bit) % 3 {
                    0 => false,
                    1 => true,
                    _ => r >> bit & 7 != 0,
                };
                let some = |bit: u64, v: u64| there(bit).then_some(v);
                Sample {
                    event: i.checked_sub(1),
                    time_us: there(3).then_some(i64::from(i) * 10),
                    allocated: r % 1000,
                    active: r % 1300,
                    reserved: some(6, r % 5000),
                    external_free: some(9, r % 700),
                    layout: there(12).then_some(LayoutFigures {
                        internal_free: r % 11,
                        pending_free: r % 13,
                        largest_free_gap: r % 400,
                        free_gaps: r % 17,
                        fragmentation: (r % 101) as f64 / 100.0,
                        largest_small_request: r % 19,
                        largest_large_request: r % 23,
                    }),
                }
            })
            .collect()
    }

    /// What a window answered when the levels kept whole samples.
    fn with_whole_samples(series: &Series, from: i64, to: i64, points: usize) -> Value {
        let all = series.to_vec();
        let mut levels: Vec<(usize, Vec<Sample>)> = Vec::new();
        if let Some(per) = finest_per(series.len()) {
            levels.push((
                per,
                all.chunks(per).flat_map(|c| downsample(c, 2)).collect(),
            ));
        }
        while let Some((per, p)) = levels.last().filter(|(_, p)| p.len() > COARSEST) {
            let c = p.chunks(2 * FOLD).flat_map(|c| downsample(c, 2)).collect();
            levels.push((per * FOLD, c));
        }
        let n = all.len() as i64;
        let lo = (from + 1).clamp(0, n - 1) as usize;
        let hi = (to + 1).clamp(0, n - 1) as usize;
        let per_point = (hi - lo + 1).div_ceil(points.max(2) / 2);
        let Some((per, level)) = levels.iter().rev().find(|(p, _)| per_point >= 4 * p) else {
            return window(series, from, to, points);
        };
        let (a, b) = (lo.div_ceil(*per), (hi + 1) / per);
        let mut seq = all[lo..a * per].to_vec();
        seq.extend_from_slice(&level[2 * a..2 * b]);
        seq.extend_from_slice(&all[b * per..=hi]);
        columns(&downsample(&seq, points.max(2)), false)
    }

    /// Points keep only what a window draws, and answer every window as
    /// whole samples did, at every level and past its ends.
    #[test]
    fn slim_points_answer_as_whole_samples() {
        let n = 700_003;
        let series = Series::from(samples(n));
        let zoom = Zoom::new(&series);
        assert!(zoom.levels.len() >= 2, "{} levels", zoom.levels.len());
        let n = i64::from(n);
        for (from, to, points) in [
            (-1, n - 2, 2000),
            (-1, n - 2, 101),
            (12_345, 654_321, 1000),
            (3, 3 + 90_000, 2000),
            (77, 77 + 40_000, 500),
            (500, 900, 2000),
            (-5, n + 5, 300),
        ] {
            assert_eq!(
                zoom.window(&series, from, to, points),
                with_whole_samples(&series, from, to, points),
                "{from}..{to} in {points}"
            );
        }
    }
}
