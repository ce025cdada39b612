//! A reserved-bytes curve downsampled while it is produced: the same points
//! as `timeline::downsample::downsample` over the whole series (each bucket of
//! consecutive values becomes its minimum and maximum, the one that happens
//! first first), without keeping one value per trace event.
//!
//! Owns the streaming bucketing only; the bucket rule itself is the replay
//! stage's, and a test checks the two agree.

/// Builds the points of one curve from values pushed in order; the number
/// of values must be known up front (it sets the bucket width).
#[derive(Debug, Clone)]
pub struct SeriesBuilder {
    /// Values per bucket; 0 keeps every value (the series is short enough).
    per: usize,
    /// Index the next value gets.
    next: usize,
    points: Vec<(u32, u64)>,
    /// The bucket being filled (none before the first value, and while
    /// every value is kept), in plain fields: a value lands in it at
    /// every step.
    bucket: bool,
    /// Its first index, and the index past its last.
    first: usize,
    end: usize,
    lo: u64,
    hi: u64,
    /// First index of the minimum, last index of the maximum (the ties
    /// `Iterator::min_by_key` / `max_by_key` pick).
    imin: usize,
    imax: usize,
}

impl SeriesBuilder {
    /// For `len` values and at most `max_points` points (rounded up to an
    /// even count, as the downsampler does).
    pub fn new(len: usize, max_points: usize) -> SeriesBuilder {
        let (per, cap) = crate::timeline::downsample::buckets(len, max_points);
        SeriesBuilder {
            per,
            next: 0,
            points: Vec::with_capacity(cap),
            bucket: false,
            first: 0,
            end: 0,
            lo: 0,
            hi: 0,
            imin: 0,
            imax: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, v: u64) {
        let i = self.next;
        self.next += 1;
        if i < self.end {
            if v < self.lo {
                self.lo = v;
                self.imin = i;
            }
            if v >= self.hi {
                self.hi = v;
                self.imax = i;
            }
        } else {
            self.start(i, v);
        }
    }

    /// Value `i` begins a bucket (or, while every value is kept, is a
    /// point).
    #[cold]
    fn start(&mut self, i: usize, v: u64) {
        if self.per == 0 {
            self.points.push((i as u32, v));
            return;
        }
        self.flush(i.wrapping_sub(1));
        self.bucket = true;
        (self.first, self.end) = (i, i + self.per);
        (self.lo, self.hi, self.imin, self.imax) = (v, v, i, i);
    }

    /// Writes the bucket being filled, whose last value is `last`.
    fn flush(&mut self, last: usize) {
        if !std::mem::take(&mut self.bucket) {
            return;
        }
        let (a, z) = if self.imax < self.imin {
            (self.hi, self.lo)
        } else {
            (self.lo, self.hi)
        };
        self.points.push((self.first as u32, a));
        if last > self.first {
            self.points.push((last as u32, z));
        }
    }

    /// The points: (index of the value, value).
    pub fn finish(mut self) -> Vec<(u32, u64)> {
        self.flush(self.next.wrapping_sub(1));
        self.points
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{Sample, downsample::downsample};

    fn reference(vals: &[u64], max: usize) -> Vec<(u32, u64)> {
        let s: Vec<Sample> = vals
            .iter()
            .enumerate()
            .map(|(i, &r)| Sample {
                event: Some(i as u32),
                reserved: Some(r),
                ..Default::default()
            })
            .collect();
        downsample(&s, max)
            .iter()
            .map(|s| (s.event.unwrap_or(0), s.reserved_bytes()))
            .collect()
    }

    #[test]
    fn same_points_as_the_downsampler() {
        let mut next = crate::model::test_support::below(0x9e37_79b9_7f4a_7c15);
        for len in [
            0usize, 1, 2, 3, 599, 600, 601, 602, 899, 1200, 1201, 4999, 20_011,
        ] {
            for max in [2usize, 3, 7, 600] {
                for levels in [2u64, 5, 1 << 40] {
                    let vals: Vec<u64> = (0..len).map(|_| next(levels)).collect();
                    let mut b = SeriesBuilder::new(len, max);
                    for &v in &vals {
                        b.push(v);
                    }
                    assert_eq!(
                        b.finish(),
                        reference(&vals, max),
                        "len {len}, max {max}, levels {levels}"
                    );
                }
            }
        }
    }
}
