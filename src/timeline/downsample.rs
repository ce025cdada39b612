//! Downsampling a long series for charts and CSV without losing extremes:
//! each bucket of consecutive samples becomes two points, the element-wise
//! minimum and maximum of every figure, so no peak is lowered and no dip is
//! raised (a property the tests check). One downsampler serves snapshots and
//! profiler traces (one [`Sample`] type); only the order of a bucket's two points
//! differs ([`Order`]). A memory-timeline export keeps real samples instead
//! ([`downsample_categories`]): its stacked chart must show sums of real
//! categories.

use super::{LayoutFigures, Sample, Series};
use crate::model::memtimeline::{CategorySample, CategorySeries};

/// The order of a bucket's two points, the one way the samples of the two
/// inputs are dated differently: both points keep the figures of the
/// bucket's extremes, the first is dated at the bucket's first sample, the
/// second at its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The extreme of reserved bytes that happens first comes first (its
    /// last maximum against its first minimum): a snapshot's chart rises and
    /// falls where the replay did.
    ReservedFirst,
    /// The minimum, then the maximum: a profiler trace's charts and CSV.
    LowThenHigh,
}

/// The lower or higher of two optional figures; a missing one yields to the
/// other.
fn opt_ext(a: Option<u64>, b: Option<u64>, max: bool) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if max { x.max(y) } else { x.min(y) }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Folds `s` into a bucket's element-wise minimum `lo` and maximum `hi`; a
/// figure one sample lacks yields to the other's.
#[inline]
fn fold(lo: &mut Sample, hi: &mut Sample, s: &Sample) {
    lo.allocated = lo.allocated.min(s.allocated);
    hi.allocated = hi.allocated.max(s.allocated);
    lo.active = lo.active.min(s.active);
    hi.active = hi.active.max(s.active);
    lo.reserved = opt_ext(lo.reserved, s.reserved, false);
    hi.reserved = opt_ext(hi.reserved, s.reserved, true);
    lo.external_free = opt_ext(lo.external_free, s.external_free, false);
    hi.external_free = opt_ext(hi.external_free, s.external_free, true);
    match (&mut lo.layout, &mut hi.layout, &s.layout) {
        (Some(lo), Some(hi), Some(s)) => fold_layout(lo, hi, s),
        (lo @ None, hi @ None, Some(s)) => (*lo, *hi) = (Some(*s), Some(*s)),
        _ => {}
    }
}

#[inline]
fn fold_layout(lo: &mut LayoutFigures, hi: &mut LayoutFigures, s: &LayoutFigures) {
    macro_rules! ext {
        ($($f:ident),*) => {$(
            lo.$f = lo.$f.min(s.$f);
            hi.$f = hi.$f.max(s.$f);
        )*};
    }
    ext!(
        internal_free,
        pending_free,
        largest_free_gap,
        free_gaps,
        largest_small_request,
        largest_large_request
    );
    lo.fragmentation = lo.fragmentation.min(s.fragmentation);
    hi.fragmentation = hi.fragmentation.max(s.fragmentation);
}

/// At most `max_points` samples (rounded up to an even count), in
/// [`Order::ReservedFirst`]; the series is returned unchanged when it is
/// already short enough.
pub fn downsample(samples: &[Sample], max_points: usize) -> Vec<Sample> {
    downsample_in(samples, max_points, Order::ReservedFirst)
}

/// [`downsample`] with the order of a bucket's two points given: a profiler
/// trace's series is cut in [`Order::LowThenHigh`].
pub fn downsample_in(samples: &[Sample], max_points: usize, order: Order) -> Vec<Sample> {
    downsample_iter(samples.len(), samples.iter().copied(), max_points, order)
}

/// [`downsample`] of a replayed series, read once, without expanding it.
pub fn downsample_series(samples: &Series, max_points: usize) -> Vec<Sample> {
    downsample_iter(
        samples.len(),
        samples.iter(),
        max_points,
        Order::ReservedFirst,
    )
}

/// [`downsample_series`] at each of `levels` (their `max_points`) from one
/// read of the series, handing each point to `emit(k, point)` for level
/// `k` as its bucket closes: the points are never held together.
pub fn downsample_series_levels(
    samples: &Series,
    levels: &[usize],
    mut emit: impl FnMut(usize, Sample),
) {
    // A bucket closes with at most two points, taken out at once.
    let mut ds: Vec<Downsampler> = (levels.iter())
        .map(|&m| Downsampler::holding(samples.len(), m, Order::ReservedFirst, 2))
        .collect();
    for s in samples.iter() {
        for (k, d) in ds.iter_mut().enumerate() {
            d.push(s);
            d.out.drain(..).for_each(|p| emit(k, p));
        }
    }
    for (k, d) in ds.into_iter().enumerate() {
        d.finish().into_iter().for_each(|p| emit(k, p));
    }
}

/// Buckets of `per` consecutive samples out of `n`, each read once.
fn downsample_iter(
    n: usize,
    samples: impl Iterator<Item = Sample>,
    max_points: usize,
    order: Order,
) -> Vec<Sample> {
    let mut d = Downsampler::new(n, max_points, order);
    samples.for_each(|s| d.push(s));
    d.finish()
}

/// [`downsample_series`] fed a sample at a time, so that a caller reading
/// the series for other figures cuts it in the same read: `n` samples
/// pushed in order give the points the function gives.
pub struct Downsampler {
    /// Samples per bucket; 0 keeps every sample (`n` is few enough).
    per: usize,
    /// Samples not yet in a bucket.
    left: usize,
    order: Order,
    out: Vec<Sample>,
    bucket: Option<Bucket>,
}

/// A sample's event and time.
type When = (Option<u32>, Option<i64>);

/// The bucket being read: its length, how many of its samples are in, when
/// its first and last samples hold, their element-wise extremes, and where
/// reserved peaks (its last maximum) and dips (its first minimum).
struct Bucket {
    len: usize,
    seen: usize,
    /// All a point takes of the first and last samples: a whole sample
    /// copied at every push was most of a level's cost.
    first: When,
    last: When,
    lo: Sample,
    hi: Sample,
    imax: usize,
    imin: usize,
    rmax: u64,
    rmin: u64,
}

/// How `n` samples are cut into buckets for at most `max_points` points
/// (rounded up to an even count): the samples a bucket holds (0 when every
/// sample is kept) and the points there will be at most.
pub fn buckets(n: usize, max_points: usize) -> (usize, usize) {
    let max_points = max_points.max(2);
    if n <= max_points {
        (0, n)
    } else {
        let buckets = max_points / 2;
        (n.div_ceil(buckets), buckets * 2)
    }
}

impl Downsampler {
    pub fn new(n: usize, max_points: usize, order: Order) -> Downsampler {
        Self::holding(n, max_points, order, buckets(n, max_points).1)
    }

    /// [`Downsampler::new`] with room for `cap` points.
    fn holding(n: usize, max_points: usize, order: Order, cap: usize) -> Downsampler {
        Downsampler {
            per: buckets(n, max_points).0,
            left: n,
            order,
            out: Vec::with_capacity(cap),
            bucket: None,
        }
    }

    #[inline]
    pub fn push(&mut self, s: Sample) {
        if self.per == 0 {
            return self.out.push(s);
        }
        let Some(b) = &mut self.bucket else {
            let len = self.per.min(self.left);
            self.left = self.left.saturating_sub(len);
            let r = s.reserved_bytes();
            self.bucket = Some(Bucket {
                len,
                seen: 1,
                first: (s.event, s.time_us),
                last: (s.event, s.time_us),
                lo: s,
                hi: s,
                imax: 0,
                imin: 0,
                rmax: r,
                rmin: r,
            });
            return self.close_if_full();
        };
        fold(&mut b.lo, &mut b.hi, &s);
        let r = s.reserved_bytes();
        if r >= b.rmax {
            (b.rmax, b.imax) = (r, b.seen);
        }
        if r < b.rmin {
            (b.rmin, b.imin) = (r, b.seen);
        }
        b.last = (s.event, s.time_us);
        b.seen += 1;
        self.close_if_full();
    }

    fn close_if_full(&mut self) {
        if self.bucket.as_ref().is_some_and(|b| b.seen >= b.len) {
            self.close();
        }
    }

    /// The bucket's two points (one for a bucket of one sample).
    fn close(&mut self) {
        let Some(b) = self.bucket.take() else {
            return;
        };
        let high_first = self.order == Order::ReservedFirst && b.imax < b.imin;
        let (mut x, mut y) = if high_first {
            (b.hi, b.lo)
        } else {
            (b.lo, b.hi)
        };
        (x.event, x.time_us) = b.first;
        (y.event, y.time_us) = b.last;
        self.out.push(x);
        if b.seen > 1 {
            self.out.push(y);
        }
    }

    /// The points: a bucket left short (fewer samples pushed than counted)
    /// is cut where it stands.
    pub fn finish(mut self) -> Vec<Sample> {
        self.close();
        self.out
    }
}

/// A memory-timeline export's series cut to at most `max_points` samples
/// (rounded up to even) for a stacked chart. Each bucket keeps two of its real samples, the lowest and the
/// highest total, in time order: stacks stay sums of real categories and
/// the peak is never lowered.
/// The samples are read once, in order, from the compact series.
pub fn downsample_categories(samples: &CategorySeries, max_points: usize) -> Vec<CategorySample> {
    let max_points = max_points.max(2);
    if samples.len() <= max_points {
        return samples.to_vec();
    }
    let per = samples.len().div_ceil(max_points / 2);
    let mut out = Vec::with_capacity(max_points);
    // The current bucket's lowest and highest (index, sample); ties go to
    // the earliest sample.
    type Kept = (usize, CategorySample);
    let mut bucket: Option<(Kept, Kept)> = None;
    let flush = |out: &mut Vec<CategorySample>, (lo, hi): (Kept, Kept)| {
        let (a, b) = if lo.0 <= hi.0 { (lo, hi) } else { (hi, lo) };
        out.push(a.1);
        if b.0 != a.0 {
            out.push(b.1);
        }
    };
    for (i, s) in samples.iter().enumerate() {
        if i.is_multiple_of(per) {
            if let Some(b) = bucket.take() {
                flush(&mut out, b);
            }
            bucket = Some(((i, s), (i, s)));
            continue;
        }
        let (lo, hi) = bucket.as_mut().expect("a bucket is open");
        if s.total() < lo.1.total() {
            *lo = (i, s);
        }
        if s.total() > hi.1.total() {
            *hi = (i, s);
        }
    }
    if let Some(b) = bucket {
        flush(&mut out, b);
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
                let mut l = x.lay();
                for s in &chunk[1..] {
                    let m = s.lay();
                    x.allocated = f(x.allocated, s.allocated);
                    x.active = f(x.active, s.active);
                    x.reserved = Some(f(x.reserved_bytes(), s.reserved_bytes()));
                    x.external_free = Some(f(x.external_bytes(), s.external_bytes()));
                    l.internal_free = f(l.internal_free, m.internal_free);
                    l.pending_free = f(l.pending_free, m.pending_free);
                    l.largest_free_gap = f(l.largest_free_gap, m.largest_free_gap);
                    l.free_gaps = f(l.free_gaps, m.free_gaps);
                    l.largest_small_request = f(l.largest_small_request, m.largest_small_request);
                    l.largest_large_request = f(l.largest_large_request, m.largest_large_request);
                    l.fragmentation = g(l.fragmentation, m.fragmentation);
                }
                x.layout = Some(l);
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
                event: Some(i as u32), reserved: Some(*r), external_free: Some(0),
                layout: Some(LayoutFigures { largest_free_gap: *g, ..Default::default() }),
                ..Default::default()
            }).collect();
            let d = downsample(&s, max);
            prop_assert!(d.len() <= max.max(2) + 1);
            let peak = s.iter().map(|x| x.reserved).max().unwrap();
            let dip = s.iter().map(|x| x.lay().largest_free_gap).min().unwrap();
            prop_assert_eq!(d.iter().map(|x| x.reserved).max().unwrap(), peak);
            prop_assert_eq!(d.iter().map(|x| x.lay().largest_free_gap).min().unwrap(), dip);
            prop_assert_eq!(&downsample_series(&Series::from(s.clone()), max), &d);
            // Levels cut in one read are those cut one at a time.
            let levels = [max, max * 3, 2];
            let mut at: Vec<Vec<Sample>> = vec![Vec::new(); levels.len()];
            downsample_series_levels(&Series::from(s.clone()), &levels, |k, p| at[k].push(p));
            for (m, got) in levels.iter().zip(&at) {
                prop_assert_eq!(got, &downsample(&s, *m));
            }
            prop_assert_eq!(&d, &by_chunks(&s, max));
        }
    }

    /// Each chunk's lowest and highest total, the earliest on ties, in
    /// time order: what [`downsample_categories`] keeps, from a slice.
    fn categories_by_chunks(samples: &[CategorySample], max: usize) -> Vec<CategorySample> {
        let max = max.max(2);
        if samples.len() <= max {
            return samples.to_vec();
        }
        let mut out = Vec::new();
        for chunk in samples.chunks(samples.len().div_ceil(max / 2)) {
            let lo = (0..chunk.len())
                .min_by_key(|&i| (chunk[i].total(), i))
                .unwrap();
            let hi = (0..chunk.len())
                .max_by_key(|&i| (chunk[i].total(), std::cmp::Reverse(i)))
                .unwrap();
            out.push(chunk[lo.min(hi)]);
            if lo != hi {
                out.push(chunk[lo.max(hi)]);
            }
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn downsampling_keeps_the_peak(
            totals in proptest::collection::vec(0u64..1_000_000, 1..2000),
            max in 2usize..300,
        ) {
            let t = crate::model::memtimeline::MemoryTimeline {
                samples: totals.iter().enumerate().map(|(i, &b)| crate::model::memtimeline::CategorySample {
                    time_us: Some(i as i64),
                    bytes: [b, 0, 0, 0, b / 2, 0, 0, 0],
                }).collect(),
                ..Default::default()
            };
            let d = downsample_categories(&t.samples, max);
            proptest::prop_assert!(d.len() <= max.max(2) + 1);
            let peak = t.samples.iter().map(|s| s.total()).max();
            proptest::prop_assert_eq!(d.iter().map(|s| s.total()).max(), peak);
            // Real samples, in time order.
            proptest::prop_assert!(d.windows(2).all(|w| w[0].time_us < w[1].time_us));
            let all = t.samples.to_vec();
            proptest::prop_assert!(d.iter().all(|s| all.contains(s)));
            proptest::prop_assert_eq!(&d, &categories_by_chunks(&all, max));
        }
    }

    proptest::proptest! {
        #[test]
        fn downsampling_keeps_extremes(
            vals in proptest::collection::vec((0u64..1_000_000, proptest::option::of(0u64..2_000_000)), 1..1500),
            max in 2usize..200,
        ) {
            let s: Vec<Sample> = vals.iter().enumerate().map(|(i, (a, r))| Sample {
                event: Some(i as u32), allocated: *a, active: *a, reserved: *r,
                external_free: r.map(|r| r.saturating_sub(*a)), ..Default::default()
            }).collect();
            let d = downsample_in(&s, max, Order::LowThenHigh);
            proptest::prop_assert!(d.len() <= max.max(2) + 1);
            let top = |v: &[Sample], f: &dyn Fn(&Sample) -> Option<u64>| v.iter().filter_map(f).max();
            let low = |v: &[Sample], f: &dyn Fn(&Sample) -> Option<u64>| v.iter().filter_map(f).min();
            proptest::prop_assert_eq!(top(&d, &|x| Some(x.allocated)), top(&s, &|x| Some(x.allocated)));
            proptest::prop_assert_eq!(low(&d, &|x| Some(x.allocated)), low(&s, &|x| Some(x.allocated)));
            proptest::prop_assert_eq!(top(&d, &|x| x.reserved), top(&s, &|x| x.reserved));
            proptest::prop_assert_eq!(top(&d, &|x| x.external_free), top(&s, &|x| x.external_free));
        }
    }
}
