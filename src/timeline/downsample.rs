//! Downsampling a long series for charts and CSV without losing extremes:
//! each bucket of consecutive samples becomes two points, the element-wise
//! minimum and maximum of every figure, so no peak is lowered and no dip is
//! raised (a property the tests check).

use super::{Sample, Series};

/// At most `max_points` samples (rounded up to an even count); the series is
/// returned unchanged when it is already short enough.
pub fn downsample(samples: &[Sample], max_points: usize) -> Vec<Sample> {
    downsample_iter(samples.len(), samples.iter().copied(), max_points)
}

/// [`downsample`] of a replayed series, read once, without expanding it.
pub fn downsample_series(samples: &Series, max_points: usize) -> Vec<Sample> {
    downsample_iter(samples.len(), samples.iter(), max_points)
}

/// Buckets of `per` consecutive samples out of `n`, each read once.
fn downsample_iter(
    n: usize,
    mut samples: impl Iterator<Item = Sample>,
    max_points: usize,
) -> Vec<Sample> {
    let max_points = max_points.max(2);
    if n <= max_points {
        return samples.collect();
    }
    let buckets = max_points / 2;
    let per = n.div_ceil(buckets);
    let mut out = Vec::with_capacity(buckets * 2);
    let mut left = n;
    while left > 0 {
        let len = per.min(left);
        left -= len;
        let first = samples.next().expect("as many samples as counted");
        let (mut lo, mut hi, mut last) = (first, first, first);
        // Where reserved peaks (its last maximum) and dips (its first
        // minimum) in the bucket.
        let (mut imax, mut imin) = (0, 0);
        let (mut rmax, mut rmin) = (first.reserved, first.reserved);
        for j in 1..len {
            let s = samples.next().expect("as many samples as counted");
            macro_rules! ext {
                ($($f:ident),*) => {$(
                    lo.$f = lo.$f.min(s.$f);
                    hi.$f = hi.$f.max(s.$f);
                )*};
            }
            ext!(
                allocated,
                active,
                reserved,
                internal_free,
                external_free,
                pending_free,
                largest_free_gap,
                free_gaps,
                largest_small_request,
                largest_large_request
            );
            lo.fragmentation = lo.fragmentation.min(s.fragmentation);
            hi.fragmentation = hi.fragmentation.max(s.fragmentation);
            if s.reserved >= rmax {
                (rmax, imax) = (s.reserved, j);
            }
            if s.reserved < rmin {
                (rmin, imin) = (s.reserved, j);
            }
            last = s;
        }
        // Put the extreme of reserved that happens first, first.
        let (mut a, mut b) = if imax < imin { (hi, lo) } else { (lo, hi) };
        a.event = first.event;
        a.time_us = first.time_us;
        b.event = last.event;
        b.time_us = last.time_us;
        out.push(a);
        if len > 1 {
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The same buckets, cut with `chunks` and searched afterwards.
    fn by_chunks(samples: &[Sample], max_points: usize) -> Vec<Sample> {
        let max_points = max_points.max(2);
        if samples.len() <= max_points {
            return samples.to_vec();
        }
        let per = samples.len().div_ceil(max_points / 2);
        let mut out = Vec::new();
        for chunk in samples.chunks(per) {
            let pick = |f: fn(u64, u64) -> u64, g: fn(f64, f64) -> f64| {
                let mut x = chunk[0];
                for s in &chunk[1..] {
                    x.allocated = f(x.allocated, s.allocated);
                    x.active = f(x.active, s.active);
                    x.reserved = f(x.reserved, s.reserved);
                    x.internal_free = f(x.internal_free, s.internal_free);
                    x.external_free = f(x.external_free, s.external_free);
                    x.pending_free = f(x.pending_free, s.pending_free);
                    x.largest_free_gap = f(x.largest_free_gap, s.largest_free_gap);
                    x.free_gaps = f(x.free_gaps, s.free_gaps);
                    x.largest_small_request = f(x.largest_small_request, s.largest_small_request);
                    x.largest_large_request = f(x.largest_large_request, s.largest_large_request);
                    x.fragmentation = g(x.fragmentation, s.fragmentation);
                }
                x
            };
            let (lo, hi) = (pick(u64::min, f64::min), pick(u64::max, f64::max));
            let imax = chunk
                .iter()
                .enumerate()
                .max_by_key(|(_, s)| s.reserved)
                .map(|(i, _)| i)
                .unwrap_or(0);
            let imin = chunk
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.reserved)
                .map(|(i, _)| i)
                .unwrap_or(0);
            let (mut a, mut b) = if imax < imin { (hi, lo) } else { (lo, hi) };
            let (first, last) = (chunk[0], chunk[chunk.len() - 1]);
            (a.event, a.time_us, b.event, b.time_us) =
                (first.event, first.time_us, last.event, last.time_us);
            out.push(a);
            if chunk.len() > 1 {
                out.push(b);
            }
        }
        out
    }

    proptest! {
        #[test]
        fn extremes_survive(vals in proptest::collection::vec((0u64..1_000_000, 0u64..1000), 1..2000), max in 2usize..300) {
            let s: Vec<Sample> = vals.iter().enumerate().map(|(i, (r, g))| Sample {
                event: Some(i as u32), reserved: *r, largest_free_gap: *g, ..Default::default()
            }).collect();
            let d = downsample(&s, max);
            prop_assert!(d.len() <= max.max(2) + 1);
            let peak = s.iter().map(|x| x.reserved).max().unwrap();
            let dip = s.iter().map(|x| x.largest_free_gap).min().unwrap();
            prop_assert_eq!(d.iter().map(|x| x.reserved).max().unwrap(), peak);
            prop_assert_eq!(d.iter().map(|x| x.largest_free_gap).min().unwrap(), dip);
            prop_assert_eq!(&downsample_series(&Series::from(s.clone()), max), &d);
            prop_assert_eq!(&d, &by_chunks(&s, max));
        }
    }
}
