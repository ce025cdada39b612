//! A memory-timeline export's samples, kept compact: a raw export has a
//! sample a distinct microsecond, and each differs from the one before in a
//! category or two, so each is stored as what changed (a mask, the time's
//! step, each changed category's step: a few bytes) after the full sample
//! that starts its block of [`BLOCK`]. Reading one decodes at most a
//! block; walking them in order decodes each once. Every value, `u64::MAX`
//! and a missing time included, reads back exactly.

use super::memtimeline::CategorySample;

/// Samples a block: the first kept whole, the rest as steps.
const BLOCK: usize = 64;

/// Boxed: a timeline is a variant of several enums, which the series
/// inline would bloat.
#[derive(Clone, Debug, Default)]
pub struct CategorySeries(Box<Inner>);

#[derive(Clone, Debug, Default)]
struct Inner {
    len: usize,
    /// The first sample of each block, and where its steps start in `steps`.
    heads: Vec<(CategorySample, usize)>,
    steps: Vec<u8>,
    /// The last sample, the base of the next step.
    last: Option<CategorySample>,
}

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u128) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at `*pos`, which moves past it. Only this module writes the
/// bytes, so they are well formed.
fn get_varint(b: &[u8], pos: &mut usize) -> u128 {
    let (mut v, mut shift) = (0u128, 0);
    loop {
        let x = b[*pos];
        *pos += 1;
        v |= u128::from(x & 0x7f) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// `s` as a step from `prev`.
fn encode(out: &mut Vec<u8>, prev: &CategorySample, s: &CategorySample) {
    let mut mask = 0u8;
    for k in 0..8 {
        if s.bytes[k] != prev.bytes[k] {
            mask |= 1 << k;
        }
    }
    out.push(mask);
    // 0: no time; else 1 + the step from the last time (or from 0).
    let t = match s.time_us {
        None => 0,
        Some(t) => {
            let d = t.wrapping_sub(prev.time_us.unwrap_or(0));
            u128::from(zigzag(d)) + 1
        }
    };
    put_varint(out, t);
    for k in 0..8 {
        if mask & (1 << k) != 0 {
            let d = s.bytes[k].wrapping_sub(prev.bytes[k]) as i64;
            put_varint(out, u128::from(zigzag(d)));
        }
    }
}

/// The step at `*pos` applied to `cur`.
fn decode(b: &[u8], pos: &mut usize, cur: &mut CategorySample) {
    let mask = b[*pos];
    *pos += 1;
    let t = get_varint(b, pos);
    cur.time_us = match t {
        0 => None,
        z => Some(
            cur.time_us
                .unwrap_or(0)
                .wrapping_add(unzigzag((z - 1) as u64)),
        ),
    };
    for k in 0..8 {
        if mask & (1 << k) != 0 {
            let d = unzigzag(get_varint(b, pos) as u64);
            cur.bytes[k] = cur.bytes[k].wrapping_add(d as u64);
        }
    }
}

impl CategorySeries {
    pub fn new() -> CategorySeries {
        CategorySeries::default()
    }
    pub fn len(&self) -> usize {
        self.0.len
    }
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }
    pub fn push(&mut self, s: CategorySample) {
        let x = &mut *self.0;
        match &x.last {
            Some(prev) if !x.len.is_multiple_of(BLOCK) => encode(&mut x.steps, prev, &s),
            _ => x.heads.push((s, x.steps.len())),
        }
        x.last = Some(s);
        x.len += 1;
    }
    pub fn get(&self, i: usize) -> Option<CategorySample> {
        if i >= self.0.len {
            return None;
        }
        let (mut cur, mut pos) = self.0.heads[i / BLOCK];
        for _ in 0..i % BLOCK {
            decode(&self.0.steps, &mut pos, &mut cur);
        }
        Some(cur)
    }
    /// Sample `i`, which must exist.
    pub fn at(&self, i: usize) -> CategorySample {
        self.get(i).expect("sample index in range")
    }
    pub fn first(&self) -> Option<CategorySample> {
        self.0.heads.first().map(|h| h.0)
    }
    pub fn last(&self) -> Option<CategorySample> {
        self.0.last
    }
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            s: self,
            i: 0,
            cur: CategorySample {
                time_us: None,
                bytes: [0; 8],
            },
            pos: 0,
        }
    }
    pub fn to_vec(&self) -> Vec<CategorySample> {
        self.iter().collect()
    }
    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.0.heads.capacity() * std::mem::size_of::<(CategorySample, usize)>()
            + self.0.steps.capacity()
    }
}

impl PartialEq for CategorySeries {
    fn eq(&self, o: &Self) -> bool {
        self.0.len == o.0.len && self.iter().eq(o.iter())
    }
}

impl From<Vec<CategorySample>> for CategorySeries {
    fn from(v: Vec<CategorySample>) -> Self {
        v.into_iter().collect()
    }
}

impl FromIterator<CategorySample> for CategorySeries {
    fn from_iter<I: IntoIterator<Item = CategorySample>>(it: I) -> Self {
        let mut s = CategorySeries::new();
        for x in it {
            s.push(x);
        }
        s
    }
}

pub struct Iter<'a> {
    s: &'a CategorySeries,
    i: usize,
    cur: CategorySample,
    pos: usize,
}

impl Iterator for Iter<'_> {
    type Item = CategorySample;
    fn next(&mut self) -> Option<CategorySample> {
        if self.i >= self.s.0.len {
            return None;
        }
        if self.i.is_multiple_of(BLOCK) {
            (self.cur, self.pos) = self.s.0.heads[self.i / BLOCK];
        } else {
            decode(&self.s.0.steps, &mut self.pos, &mut self.cur);
        }
        self.i += 1;
        Some(self.cur)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.s.0.len - self.i;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a CategorySeries {
    type Item = CategorySample;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: Option<i64>, b: [u64; 8]) -> CategorySample {
        CategorySample {
            time_us: t,
            bytes: b,
        }
    }

    /// Extremes, missing times between present ones, repeats, and more than
    /// a block, read back in order, one at a time, and from the ends.
    #[test]
    fn every_sample_reads_back_exactly() {
        let mut v = vec![
            s(None, [0; 8]),
            s(None, [u64::MAX; 8]),
            s(Some(i64::MIN), [0, 1, 2, 3, 4, 5, 6, u64::MAX]),
            s(Some(i64::MAX), [u64::MAX, 0, 0, 0, 0, 0, 0, 0]),
            s(None, [7; 8]),
            s(Some(-1), [7; 8]),
            s(Some(-1), [7; 8]),
            s(Some(0), [1 << 63; 8]),
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut t = 1_700_000_000_000_000i64;
        for i in 0..300u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t += (x % 5) as i64;
            let mut b = v.last().unwrap().bytes;
            b[(x % 8) as usize] = x >> (i % 40);
            v.push(s(if x.is_multiple_of(17) { None } else { Some(t) }, b));
        }
        let c = CategorySeries::from(v.clone());
        assert_eq!(c.len(), v.len());
        assert_eq!(c.to_vec(), v);
        for (i, want) in v.iter().enumerate() {
            assert_eq!(c.get(i), Some(*want), "sample {i}");
        }
        assert_eq!(c.get(v.len()), None);
        assert_eq!(
            (c.first(), c.last()),
            (v.first().copied(), v.last().copied())
        );
        assert!(c.heap_bytes() < v.len() * std::mem::size_of::<CategorySample>() / 2);
        assert_eq!(c, CategorySeries::from_iter(v.iter().copied()));
        assert_ne!(c, CategorySeries::from(v[1..].to_vec()));
        let empty = CategorySeries::new();
        assert!(empty.is_empty() && empty.first().is_none() && empty.last().is_none());
        assert_eq!(empty.iter().count(), 0);
    }
}
