//! The multiset of free-block sizes of one pool class, answering one
//! question per trace event: the largest size. Every allocation and free
//! changes up to three entries, so both have to be cheap.
//!
//! Sizes go into 1024 buckets by their power of two and the four bits
//! below it (the bucket order is the size order), each bucket a short sorted
//! vector of `(size, count)`; two levels of bit masks say which buckets hold
//! anything, so the largest size is the last entry of the highest non-empty
//! bucket, found with two leading-zero counts. Compared with an ordered map
//! of counts this takes no allocation per distinct size and no tree walk.
//!
//! Owns only the sizes: which blocks are free is `state`'s business.

const SUB_BITS: u32 = 4;
const BUCKETS: usize = 64 << SUB_BITS;
const WORDS: usize = BUCKETS / 64;

#[derive(Debug, Clone, Default)]
pub(crate) struct GapSizes {
    /// `(size, count)` per bucket, sorted by size; empty until the first
    /// size arrives (a layout kept without its index allocates nothing).
    buckets: Vec<Vec<(u64, u32)>>,
    /// Bit `b` of word `w`: bucket `w * 64 + b` is not empty.
    mask: [u64; WORDS],
    /// Bit `w`: word `w` of `mask` is not zero.
    summary: u16,
}

/// Equal when they hold the same sizes, however many buckets are allocated.
impl PartialEq for GapSizes {
    fn eq(&self, o: &GapSizes) -> bool {
        let held =
            |g: &GapSizes| -> Vec<(u64, u32)> { g.buckets.iter().flatten().copied().collect() };
        self.mask == o.mask && self.summary == o.summary && held(self) == held(o)
    }
}

/// The bucket of a size: its power of two, then the next four bits, so a
/// larger size never lands in a lower bucket.
#[inline]
fn bucket(size: u64) -> usize {
    debug_assert!(size > 0);
    let lg = 63 - size.leading_zeros();
    let sub = if lg >= SUB_BITS {
        size >> (lg - SUB_BITS)
    } else {
        size << (SUB_BITS - lg)
    } & ((1 << SUB_BITS) - 1);
    ((lg << SUB_BITS) as u64 | sub) as usize
}

impl GapSizes {
    pub fn add(&mut self, size: u64) {
        if self.buckets.is_empty() {
            self.buckets = vec![Vec::new(); BUCKETS];
        }
        let b = bucket(size);
        let v = &mut self.buckets[b];
        match v.binary_search_by_key(&size, |e| e.0) {
            Ok(i) => v[i].1 += 1,
            Err(i) => {
                v.insert(i, (size, 1));
                self.mask[b / 64] |= 1 << (b % 64);
                self.summary |= 1 << (b / 64);
            }
        }
    }

    /// Takes one block of `size` out; false when there was none.
    pub fn remove(&mut self, size: u64) -> bool {
        let b = bucket(size);
        let Some(v) = self.buckets.get_mut(b) else {
            return false;
        };
        let Ok(i) = v.binary_search_by_key(&size, |e| e.0) else {
            return false;
        };
        if v[i].1 > 1 {
            v[i].1 -= 1;
        } else {
            v.remove(i);
            if v.is_empty() {
                self.mask[b / 64] &= !(1 << (b % 64));
                if self.mask[b / 64] == 0 {
                    self.summary &= !(1 << (b / 64));
                }
            }
        }
        true
    }

    /// The largest size held (0 when none).
    #[inline]
    pub fn max(&self) -> u64 {
        if self.summary == 0 {
            return 0;
        }
        let w = 15 - self.summary.leading_zeros() as usize;
        let b = w * 64 + 63 - self.mask[w].leading_zeros() as usize;
        self.buckets[b].last().map_or(0, |e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn buckets_follow_the_size_order() {
        let mut sizes: Vec<u64> = (1..5000).collect();
        for k in 0..64 {
            let p = 1u64 << k;
            sizes.extend([p, p + 1, p | (p >> 1), p | (p - 1)]);
        }
        sizes.sort();
        assert!(sizes.iter().all(|&s| bucket(s) < BUCKETS));
        assert!(sizes.windows(2).all(|w| bucket(w[0]) <= bucket(w[1])));
    }

    proptest! {
        /// The largest size is that of an ordered map of counts.
        #[test]
        fn max_agrees_with_an_ordered_map(ops in proptest::collection::vec((any::<bool>(), prop_oneof![1u64..5000, any::<u64>().prop_map(|x| x.max(1))]), 1..400)) {
            let mut g = GapSizes::default();
            let mut r: BTreeMap<u64, u32> = BTreeMap::new();
            let mut held: Vec<u64> = Vec::new();
            for (add, s) in ops {
                if add || held.is_empty() {
                    g.add(s);
                    *r.entry(s).or_insert(0) += 1;
                    held.push(s);
                } else {
                    let s = held.swap_remove((s % held.len() as u64) as usize);
                    prop_assert!(g.remove(s));
                    let n = r.get_mut(&s).unwrap();
                    *n -= 1;
                    if *n == 0 {
                        r.remove(&s);
                    }
                }
                prop_assert_eq!(g.max(), r.last_key_value().map_or(0, |(k, _)| *k));
            }
            // A size never added is not taken out.
            prop_assert_eq!(g.remove(6000), r.contains_key(&6000));
        }
    }
}
