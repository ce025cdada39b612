//! An address-keyed map kept as two sorted vectors (keys apart from
//! values, so a binary search touches only the keys), for the segments of a
//! device and the live blocks of a segment.
//!
//! Why not a `BTreeMap`: the replay looks up a segment and its blocks a few
//! times per trace event, and both sets are small (hundreds of segments,
//! tens of blocks per segment in the files we see); a binary search over a
//! contiguous `Vec<u64>` beats a walk down tree nodes, and the neighbours of
//! an entry (the free runs before and after a block) are the adjacent
//! slots. Inserting and removing shift the tail, which stays cheap at those
//! sizes. The last slot found is remembered: consecutive events mostly name
//! the same segment.
//!
//! Owns only the container; what the entries mean is `state`'s business.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A removed value, the entry before its place and the key after it.
pub(crate) type Removed<'a, V> = (V, Option<(u64, &'a V)>, Option<u64>);

#[derive(Debug)]
pub(crate) struct VecMap<V> {
    keys: Vec<u64>,
    vals: Vec<V>,
    /// Slot of the last successful look-up (a guess; checked before use).
    /// Atomic only so that a shared layout stays `Sync`.
    hint: AtomicUsize,
}

impl<V> Default for VecMap<V> {
    fn default() -> Self {
        VecMap {
            keys: Vec::new(),
            vals: Vec::new(),
            hint: AtomicUsize::new(0),
        }
    }
}

impl<V: Clone> Clone for VecMap<V> {
    fn clone(&self) -> Self {
        VecMap {
            keys: self.keys.clone(),
            vals: self.vals.clone(),
            hint: AtomicUsize::new(self.hint.load(Ordering::Relaxed)),
        }
    }
}

impl<V> VecMap<V> {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Slot of `k`.
    #[inline]
    fn slot(&self, k: u64) -> Option<usize> {
        let h = self.hint.load(Ordering::Relaxed);
        if self.keys.get(h) == Some(&k) {
            return Some(h);
        }
        let i = self.keys.binary_search(&k).ok()?;
        self.hint.store(i, Ordering::Relaxed);
        Some(i)
    }

    /// Number of keys `<= k`: the slot of the last such key is one less.
    #[inline]
    fn upto(&self, k: u64) -> usize {
        self.keys.partition_point(|&a| a <= k)
    }

    pub fn get(&self, k: &u64) -> Option<&V> {
        self.slot(*k).map(|i| &self.vals[i])
    }

    pub fn get_mut(&mut self, k: &u64) -> Option<&mut V> {
        self.slot(*k).map(|i| &mut self.vals[i])
    }

    pub fn contains_key(&self, k: &u64) -> bool {
        self.slot(*k).is_some()
    }

    /// Inserts or replaces the value at `k`.
    pub fn insert(&mut self, k: u64, v: V) {
        // Appending in address order (building a layout) skips the search.
        if self.keys.last().is_none_or(|&l| l < k) {
            self.keys.push(k);
            self.vals.push(v);
            return;
        }
        match self.keys.binary_search(&k) {
            Ok(i) => self.vals[i] = v,
            Err(i) => {
                self.keys.insert(i, k);
                self.vals.insert(i, v);
            }
        }
    }

    pub fn remove(&mut self, k: &u64) -> Option<V> {
        let i = self.slot(*k)?;
        self.keys.remove(i);
        Some(self.vals.remove(i))
    }

    /// Removes `k`; with it, the entry now before its place and the key now
    /// after it (one search for the three).
    pub fn remove_around(&mut self, k: &u64) -> Option<Removed<'_, V>> {
        let i = self.slot(*k)?;
        self.keys.remove(i);
        let v = self.vals.remove(i);
        let before = i.checked_sub(1).map(|j| (self.keys[j], &self.vals[j]));
        Some((v, before, self.keys.get(i).copied()))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&u64, &V)> + ExactSizeIterator {
        self.keys.iter().zip(self.vals.iter())
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &u64> + ExactSizeIterator {
        self.keys.iter()
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.vals.iter()
    }

    /// The entry with the largest key `<= k`.
    #[cfg(test)]
    pub fn last_at_or_before(&self, k: u64) -> Option<(u64, &V)> {
        let i = self.upto(k).checked_sub(1)?;
        Some((self.keys[i], &self.vals[i]))
    }

    /// The entry with the largest key `< k`.
    #[inline]
    pub fn last_before(&self, k: u64) -> Option<(u64, &V)> {
        let i = self.keys.partition_point(|&a| a < k).checked_sub(1)?;
        Some((self.keys[i], &self.vals[i]))
    }

    /// The smallest key `>= k`.
    #[inline]
    pub fn first_at_or_after(&self, k: u64) -> Option<u64> {
        let i = self.keys.partition_point(|&a| a < k);
        self.keys.get(i).copied()
    }

    /// The entry with the largest key `<= k` and the smallest key `> k`,
    /// from one search.
    #[inline]
    pub fn around(&self, k: u64) -> (Option<(u64, &V)>, Option<u64>) {
        let i = self.upto(k);
        let before = i.checked_sub(1).map(|j| (self.keys[j], &self.vals[j]));
        (before, self.keys.get(i).copied())
    }

    /// The entry with the largest key `<= x`, when `inside(key, value)`
    /// holds for it; the remembered slot is tried first.
    #[cfg(test)]
    pub fn containing(&self, x: u64, inside: impl Fn(u64, &V) -> bool) -> Option<u64> {
        self.containing_via(x, &self.hint, inside)
    }

    /// Like `containing` (the entry with the largest key `<= x`, when
    /// `inside` holds for it), with the slot to try first kept by the caller
    /// (e.g. one per region of the key space).
    #[inline]
    pub fn containing_via(
        &self,
        x: u64,
        memo: &AtomicUsize,
        inside: impl Fn(u64, &V) -> bool,
    ) -> Option<u64> {
        let h = memo.load(Ordering::Relaxed);
        if let Some(&k) = self.keys.get(h)
            && k <= x
            && self.keys.get(h + 1).is_none_or(|&n| n > x)
            && inside(k, &self.vals[h])
        {
            return Some(k);
        }
        let i = self.upto(x).checked_sub(1)?;
        let k = self.keys[i];
        if inside(k, &self.vals[i]) {
            memo.store(i, Ordering::Relaxed);
            Some(k)
        } else {
            None
        }
    }

    /// Moves the entries with keys `>= k` into a new map.
    pub fn split_off(&mut self, k: u64) -> VecMap<V> {
        let i = self.keys.partition_point(|&a| a < k);
        VecMap {
            keys: self.keys.split_off(i),
            vals: self.vals.split_off(i),
            hint: AtomicUsize::new(0),
        }
    }

    /// Adds every entry of `other` (replacing equal keys).
    pub fn extend(&mut self, other: VecMap<V>) {
        if self
            .keys
            .last()
            .is_none_or(|&l| other.keys.first().is_none_or(|&f| l < f))
        {
            self.keys.extend(other.keys);
            self.vals.extend(other.vals);
        } else {
            for (k, v) in other.keys.into_iter().zip(other.vals) {
                self.insert(k, v);
            }
        }
    }
}

impl<V> std::ops::Index<&u64> for VecMap<V> {
    type Output = V;
    fn index(&self, k: &u64) -> &V {
        self.get(k).expect("no entry at this address")
    }
}

impl<'a, V> IntoIterator for &'a VecMap<V> {
    type Item = (&'a u64, &'a V);
    type IntoIter = std::iter::Zip<std::slice::Iter<'a, u64>, std::slice::Iter<'a, V>>;
    fn into_iter(self) -> Self::IntoIter {
        self.keys.iter().zip(self.vals.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Every query answers as the same query on a `BTreeMap` does.
        #[test]
        fn agrees_with_a_btreemap(ops in proptest::collection::vec((0u8..4, 0u64..64, 0u64..64), 1..300)) {
            let mut m: VecMap<u64> = VecMap::default();
            let mut r: BTreeMap<u64, u64> = BTreeMap::new();
            for (op, k, v) in ops {
                match op {
                    0 | 1 => {
                        m.insert(k, v);
                        r.insert(k, v);
                    }
                    2 if v % 2 == 0 => prop_assert_eq!(m.remove(&k), r.remove(&k)),
                    2 => {
                        let got = m.remove_around(&k).map(|(x, b, a)| (x, b.map(|(p, q)| (p, *q)), a));
                        let want = r.remove(&k).map(|x| (x, r.range(..k).next_back().map(|(p, q)| (*p, *q)), r.range(k..).next().map(|(p, _)| *p)));
                        prop_assert_eq!(got, want);
                    }
                    _ => {
                        let mut right = m.split_off(k);
                        let mut rr = r.split_off(&k);
                        prop_assert_eq!(right.iter().collect::<Vec<_>>(), rr.iter().collect::<Vec<_>>());
                        if v % 2 == 0 {
                            m.extend(right);
                            r.append(&mut rr);
                        } else {
                            // Out of order: the right half first.
                            right.extend(std::mem::take(&mut m));
                            m = right;
                            r.append(&mut rr);
                        }
                    }
                }
                prop_assert_eq!(m.get(&k), r.get(&k));
                prop_assert_eq!(m.last_at_or_before(k), r.range(..=k).next_back().map(|(a, b)| (*a, b)));
                prop_assert_eq!(m.last_before(k), r.range(..k).next_back().map(|(a, b)| (*a, b)));
                prop_assert_eq!(m.first_at_or_after(k), r.range(k..).next().map(|(a, _)| *a));
                prop_assert_eq!(m.around(k), (r.range(..=k).next_back().map(|(a, b)| (*a, b)), r.range(k + 1..).next().map(|(a, _)| *a)));
                prop_assert_eq!(
                    m.containing(k, |a, b| k < a + b),
                    r.range(..=k).next_back().filter(|(a, b)| k < **a + **b).map(|(a, _)| *a)
                );
                prop_assert_eq!(m.iter().collect::<Vec<_>>(), r.iter().collect::<Vec<_>>());
            }
        }
    }
}
