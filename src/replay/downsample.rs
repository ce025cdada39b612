//! Downsampling a long series for charts and CSV without losing extremes:
//! each bucket of consecutive samples becomes two points, the element-wise
//! minimum and maximum of every figure, so no peak is lowered and no dip is
//! raised (a property the tests check).

use super::Sample;

/// At most `max_points` samples (rounded up to an even count); the series is
/// returned unchanged when it is already short enough.
pub fn downsample(samples: &[Sample], max_points: usize) -> Vec<Sample> {
    let max_points = max_points.max(2);
    if samples.len() <= max_points {
        return samples.to_vec();
    }
    let buckets = max_points / 2;
    let per = samples.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(buckets * 2);
    for chunk in samples.chunks(per) {
        let mut lo = chunk[0];
        let mut hi = chunk[0];
        for s in &chunk[1..] {
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
        }
        let first = chunk[0];
        let last = chunk[chunk.len() - 1];
        // Put the extreme of reserved that happens first, first.
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
        a.event = first.event;
        a.time_us = first.time_us;
        b.event = last.event;
        b.time_us = last.time_us;
        out.push(a);
        if chunk.len() > 1 {
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        }
    }
}
