//! Address-keyed maps kept as sorted vectors of keys (a binary search
//! touches only the keys): [`VecMap`] for the segments of a device, with the
//! values boxed in a second vector in key order, and [`SlabMap`] for the
//! live blocks of a segment, with the values out of line.
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
//! Blocks come and go on almost every event, and a few segments hold
//! hundreds of them, so there the shift is what costs: [`SlabMap`] keeps
//! each value in a slab (a vector with a free list) and shifts only the key
//! and a 4-byte slot number, 12 bytes an entry instead of 40. It also hands
//! out the position a search found ([`SlabMap::around_at`]), so that the
//! insertion after it does not search again.
//!
//! Owns only the container; what the entries mean is `state`'s business.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A removed value, the entry before its place, the key after it and the
/// place: the number of keys now below the removed one
/// ([`SlabMap::remove_around`]).
pub(crate) type Removed<'a, V> = (V, Option<(u64, &'a V)>, Option<u64>, usize);

#[derive(Debug)]
pub(crate) struct VecMap<V> {
    keys: Vec<u64>,
    /// Boxed: a segment is a few hundred bytes, and a segment freed below
    /// hundreds of others moved them all at every `segment_free`.
    vals: Vec<Box<V>>,
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

/// Position of `k` in the sorted `keys`, trying the position last found
/// (`hint`) first: the same key is usually asked for several times in a row.
#[inline]
fn hinted_search(keys: &[u64], hint: &AtomicUsize, k: u64) -> Option<usize> {
    let h = hint.load(Ordering::Relaxed);
    if keys.get(h) == Some(&k) {
        return Some(h);
    }
    let i = keys.binary_search(&k).ok()?;
    hint.store(i, Ordering::Relaxed);
    Some(i)
}

impl<V> VecMap<V> {
    /// Slot of `k`.
    #[inline]
    fn slot(&self, k: u64) -> Option<usize> {
        hinted_search(&self.keys, &self.hint, k)
    }

    /// Number of keys `<= k`: the slot of the last such key is one less.
    #[inline]
    fn upto(&self, k: u64) -> usize {
        self.keys.partition_point(|&a| a <= k)
    }

    pub fn get(&self, k: &u64) -> Option<&V> {
        self.slot(*k).map(|i| &*self.vals[i])
    }

    pub fn get_mut(&mut self, k: &u64) -> Option<&mut V> {
        self.slot(*k).map(|i| &mut *self.vals[i])
    }

    pub fn contains_key(&self, k: &u64) -> bool {
        self.slot(*k).is_some()
    }

    /// Inserts or replaces the value at `k`.
    pub fn insert(&mut self, k: u64, v: V) {
        // Appending in address order (building a layout) skips the search.
        if self.keys.last().is_none_or(|&l| l < k) {
            self.keys.push(k);
            self.vals.push(Box::new(v));
            return;
        }
        match self.keys.binary_search(&k) {
            Ok(i) => *self.vals[i] = v,
            Err(i) => {
                self.keys.insert(i, k);
                self.vals.insert(i, Box::new(v));
            }
        }
    }

    pub fn remove(&mut self, k: &u64) -> Option<V> {
        let i = self.slot(*k)?;
        self.keys.remove(i);
        Some(*self.vals.remove(i))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&u64, &V)> + ExactSizeIterator {
        self.keys.iter().zip(self.vals.iter().map(|v| &**v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &u64> + ExactSizeIterator {
        self.keys.iter()
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.vals.iter().map(|v| &**v)
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
            // The caller mostly looks the entry up by its key next.
            self.hint.store(h, Ordering::Relaxed);
            return Some(k);
        }
        let i = self.upto(x).checked_sub(1)?;
        let k = self.keys[i];
        if inside(k, &self.vals[i]) {
            memo.store(i, Ordering::Relaxed);
            self.hint.store(i, Ordering::Relaxed);
            Some(k)
        } else {
            None
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
    type IntoIter = std::iter::Zip<
        std::slice::Iter<'a, u64>,
        std::iter::Map<std::slice::Iter<'a, Box<V>>, fn(&'a Box<V>) -> &'a V>,
    >;
    fn into_iter(self) -> Self::IntoIter {
        let unbox: fn(&'a Box<V>) -> &'a V = <Box<V> as AsRef<V>>::as_ref;
        self.keys.iter().zip(self.vals.iter().map(unbox))
    }
}

/// An address-keyed map of `Copy` values: keys and slot numbers in sorted
/// vectors, the values in a slab whose freed places are reused.
#[derive(Debug)]
pub(crate) struct SlabMap<V> {
    keys: Vec<u64>,
    /// Place in `slab` of the value of `keys[i]`. Four bytes: a segment
    /// cannot hold 2^32 live blocks of a snapshot that fits in memory.
    slots: Vec<u32>,
    slab: Vec<V>,
    /// Places of `slab` whose value was removed.
    free: Vec<u32>,
    /// Position of the last successful look-up (a guess; checked before use).
    hint: AtomicUsize,
}

impl<V> Default for SlabMap<V> {
    fn default() -> Self {
        SlabMap {
            keys: Vec::new(),
            slots: Vec::new(),
            slab: Vec::new(),
            free: Vec::new(),
            hint: AtomicUsize::new(0),
        }
    }
}

impl<V: Clone> Clone for SlabMap<V> {
    fn clone(&self) -> Self {
        SlabMap {
            keys: self.keys.clone(),
            slots: self.slots.clone(),
            slab: self.slab.clone(),
            free: self.free.clone(),
            hint: AtomicUsize::new(self.hint.load(Ordering::Relaxed)),
        }
    }
}

/// The entries of a [`SlabMap`] in key order.
pub(crate) struct SlabIter<'a, V> {
    keys: std::slice::Iter<'a, u64>,
    slots: std::slice::Iter<'a, u32>,
    slab: &'a [V],
}

impl<'a, V> Iterator for SlabIter<'a, V> {
    type Item = (&'a u64, &'a V);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let k = self.keys.next()?;
        let s = *self.slots.next()?;
        Some((k, &self.slab[s as usize]))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.keys.size_hint()
    }
}

impl<V> DoubleEndedIterator for SlabIter<'_, V> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        let k = self.keys.next_back()?;
        let s = *self.slots.next_back()?;
        Some((k, &self.slab[s as usize]))
    }
}

impl<V> ExactSizeIterator for SlabIter<'_, V> {}

impl<V: Copy> SlabMap<V> {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Stores `v` in a free place of the slab, or a new one.
    #[inline]
    fn put(&mut self, v: V) -> u32 {
        match self.free.pop() {
            Some(s) => {
                self.slab[s as usize] = v;
                s
            }
            None => {
                self.slab.push(v);
                (self.slab.len() - 1) as u32
            }
        }
    }

    /// The value at position `i` of the key order.
    #[inline]
    fn val(&self, i: usize) -> &V {
        &self.slab[self.slots[i] as usize]
    }

    /// Position of `k`.
    #[inline]
    fn slot(&self, k: u64) -> Option<usize> {
        hinted_search(&self.keys, &self.hint, k)
    }

    pub fn get(&self, k: &u64) -> Option<&V> {
        self.slot(*k).map(|i| self.val(i))
    }

    pub fn get_mut(&mut self, k: &u64) -> Option<&mut V> {
        let i = self.slot(*k)?;
        Some(&mut self.slab[self.slots[i] as usize])
    }

    pub fn contains_key(&self, k: &u64) -> bool {
        self.slot(*k).is_some()
    }

    /// Inserts or replaces the value at `k`.
    pub fn insert(&mut self, k: u64, v: V) {
        // Appending in address order (building a layout) skips the search.
        if self.keys.last().is_none_or(|&l| l < k) {
            self.insert_at(self.keys.len(), k, v);
            return;
        }
        match self.keys.binary_search(&k) {
            Ok(i) => self.slab[self.slots[i] as usize] = v,
            Err(i) => self.insert_at(i, k, v),
        }
    }

    /// Inserts `k`, absent, at position `i` of the key order (as
    /// [`SlabMap::around_at`] gave it).
    #[inline]
    pub fn insert_at(&mut self, i: usize, k: u64, v: V) {
        debug_assert!(i == 0 || self.keys[i - 1] < k);
        debug_assert!(self.keys.get(i).is_none_or(|&n| n > k));
        let s = self.put(v);
        self.keys.insert(i, k);
        self.slots.insert(i, s);
    }

    /// Removes `k`; with it, the entry now before its place, the key now
    /// after it and the place (one search for the four).
    pub fn remove_around(&mut self, k: &u64) -> Option<Removed<'_, V>> {
        let i = self.slot(*k)?;
        self.keys.remove(i);
        let s = self.slots.remove(i);
        self.free.push(s);
        let v = self.slab[s as usize];
        let before = i.checked_sub(1).map(|j| (self.keys[j], self.val(j)));
        Some((v, before, self.keys.get(i).copied(), i))
    }

    /// The entry at position `i` of the key order.
    #[inline]
    pub fn entry(&self, i: usize) -> (u64, &V) {
        (self.keys[i], self.val(i))
    }

    pub fn iter(&self) -> SlabIter<'_, V> {
        SlabIter {
            keys: self.keys.iter(),
            slots: self.slots.iter(),
            slab: &self.slab,
        }
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.iter().map(|(_, v)| v)
    }

    /// The entry with the largest key `< k`.
    #[inline]
    pub fn last_before(&self, k: u64) -> Option<(u64, &V)> {
        let i = self.keys.partition_point(|&a| a < k).checked_sub(1)?;
        Some((self.keys[i], self.val(i)))
    }

    /// The smallest key `>= k`.
    #[inline]
    pub fn first_at_or_after(&self, k: u64) -> Option<u64> {
        let i = self.keys.partition_point(|&a| a < k);
        self.keys.get(i).copied()
    }

    /// The entry with the largest key `<= k` and the smallest key `> k`,
    /// from one search.
    #[cfg(test)]
    pub fn around(&self, k: u64) -> (Option<(u64, &V)>, Option<u64>) {
        let (_, before, after) = self.around_at(k);
        (before, after)
    }

    /// Like `around`, with the number of keys `<= k`: where `k`, when
    /// absent, goes ([`SlabMap::insert_at`]).
    #[inline]
    pub fn around_at(&self, k: u64) -> (usize, Option<(u64, &V)>, Option<u64>) {
        let i = self.keys.partition_point(|&a| a <= k);
        let before = i.checked_sub(1).map(|j| (self.keys[j], self.val(j)));
        (i, before, self.keys.get(i).copied())
    }

    /// Moves the entries with keys `>= k` into a new map.
    pub fn split_off(&mut self, k: u64) -> SlabMap<V> {
        let i = self.keys.partition_point(|&a| a < k);
        let mut right = SlabMap::default();
        for j in i..self.keys.len() {
            let v = *self.val(j);
            right.insert_at(j - i, self.keys[j], v);
        }
        self.keys.truncate(i);
        self.free.extend(self.slots.drain(i..));
        right
    }

    /// Adds every entry of `other` (replacing equal keys).
    pub fn extend(&mut self, other: SlabMap<V>) {
        for (k, v) in other.iter() {
            self.insert(*k, *v);
        }
    }
}

impl<V: Copy> std::ops::Index<&u64> for SlabMap<V> {
    type Output = V;
    fn index(&self, k: &u64) -> &V {
        self.get(k).expect("no entry at this address")
    }
}

impl<'a, V: Copy> IntoIterator for &'a SlabMap<V> {
    type Item = (&'a u64, &'a V);
    type IntoIter = SlabIter<'a, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
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
        fn agrees_with_a_btreemap(ops in proptest::collection::vec((0u8..3, 0u64..64, 0u64..64), 1..300)) {
            let mut m: VecMap<u64> = VecMap::default();
            let mut r: BTreeMap<u64, u64> = BTreeMap::new();
            for (op, k, v) in ops {
                if op < 2 {
                    m.insert(k, v);
                    r.insert(k, v);
                } else {
                    prop_assert_eq!(m.remove(&k), r.remove(&k));
                }
                prop_assert_eq!(m.get(&k), r.get(&k));
                prop_assert_eq!(m.last_at_or_before(k), r.range(..=k).next_back().map(|(a, b)| (*a, b)));
                prop_assert_eq!(m.last_before(k), r.range(..k).next_back().map(|(a, b)| (*a, b)));
                prop_assert_eq!(m.first_at_or_after(k), r.range(k..).next().map(|(a, _)| *a));
                prop_assert_eq!(
                    m.containing(k, |a, b| k < a + b),
                    r.range(..=k).next_back().filter(|(a, b)| k < **a + **b).map(|(a, _)| *a)
                );
                prop_assert_eq!(m.iter().collect::<Vec<_>>(), r.iter().collect::<Vec<_>>());
            }
        }

        /// The same for the slab-backed map, inserting also at the position
        /// a search gave, and reusing the places of removed values.
        #[test]
        fn slab_map_agrees_with_a_btreemap(ops in proptest::collection::vec((0u8..5, 0u64..64, 0u64..64), 1..300)) {
            let mut m: SlabMap<u64> = SlabMap::default();
            let mut r: BTreeMap<u64, u64> = BTreeMap::new();
            for (op, k, v) in ops {
                match op {
                    0 => {
                        m.insert(k, v);
                        r.insert(k, v);
                    }
                    1 => {
                        let (i, before, after) = m.around_at(k);
                        let want = (r.range(..=k).next_back().map(|(a, b)| (*a, *b)), r.range(k + 1..).next().map(|(a, _)| *a));
                        prop_assert_eq!((before.map(|(a, b)| (a, *b)), after), want);
                        prop_assert_eq!(i, r.range(..=k).count());
                        if let std::collections::btree_map::Entry::Vacant(e) = r.entry(k) {
                            m.insert_at(i, k, v);
                            e.insert(v);
                        }
                    }
                    2 => {
                        let got = m.remove_around(&k).map(|(x, b, a, i)| (x, b.map(|(p, q)| (p, *q)), a, i));
                        let want = r.remove(&k).map(|x| (x, r.range(..k).next_back().map(|(p, q)| (*p, *q)), r.range(k..).next().map(|(p, _)| *p), r.range(..k).count()));
                        prop_assert_eq!(got, want);
                    }
                    3 => {
                        if let Some(x) = m.get_mut(&k) {
                            *x = v;
                            r.insert(k, v);
                        }
                    }
                    _ => {
                        let mut right = m.split_off(k);
                        let mut rr = r.split_off(&k);
                        prop_assert_eq!(right.iter().collect::<Vec<_>>(), rr.iter().collect::<Vec<_>>());
                        if v % 2 == 0 {
                            m.extend(right);
                            r.append(&mut rr);
                        } else {
                            right.extend(std::mem::take(&mut m));
                            m = right;
                            r.append(&mut rr);
                        }
                    }
                }
                prop_assert_eq!(m.len(), r.len());
                prop_assert_eq!(m.get(&k), r.get(&k));
                prop_assert_eq!(m.contains_key(&k), r.contains_key(&k));
                prop_assert_eq!(m.last_before(k), r.range(..k).next_back().map(|(a, b)| (*a, b)));
                prop_assert_eq!(m.first_at_or_after(k), r.range(k..).next().map(|(a, _)| *a));
                prop_assert_eq!(m.around(k), (r.range(..=k).next_back().map(|(a, b)| (*a, b)), r.range(k + 1..).next().map(|(a, _)| *a)));
                prop_assert_eq!(m.iter().collect::<Vec<_>>(), r.iter().collect::<Vec<_>>());
                prop_assert_eq!(m.iter().rev().collect::<Vec<_>>(), r.iter().rev().collect::<Vec<_>>());
                prop_assert_eq!(m.values().copied().collect::<Vec<_>>(), r.values().copied().collect::<Vec<_>>());
                for (i, (a, b)) in r.iter().enumerate() {
                    prop_assert_eq!(m.entry(i), (*a, b));
                }
                // Every place of the slab is held by one entry or free.
                prop_assert_eq!(m.slab.len(), m.keys.len() + m.free.len());
            }
        }
    }
}
