//! Distinct values numbered in the order first seen, each held once: an
//! [`IdIndex`] finds a value's number by hashing the value where it is
//! stored (a table's vector, a decoder's arena), so no second copy of it
//! serves as a map's key; an [`IdTable`] is such an index beside its own
//! vector.
//!
//! A file that names a new string or stack at every event (a label per
//! step, a new innermost frame per allocation) makes these tables as long
//! as its trace: a map from value to number, beside the vector of values,
//! would hold each of them twice.
//!
//! [`U64Set`] is a set of addresses for the one table that changes at
//! every event: the addresses a trace's tally holds live.

use hashbrown::HashTable;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

/// Numbers the index hands out: `0..LIMIT`, so never `u32::MAX`, which
/// callers keep for "absent".
pub const LIMIT: usize = u32::MAX as usize;

/// The table holds [`LIMIT`] values: the next would need `u32::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// Numbers of values stored elsewhere, found by the values' hashes. The
/// caller says where number `i`'s value is (`key_of`), and must give the
/// same answer for the life of the index. Keys come from untrusted files:
/// the default hasher is seeded at random per index.
///
/// Each number is kept with 32 bits of its value's hash: the index grows
/// without hashing its values again (a stack of hundreds of frames, each
/// time), and a lookup compares a value only where those bits agree.
#[derive(Clone, Default)]
pub struct IdIndex<S = foldhash::fast::RandomState> {
    table: HashTable<(u32, u32)>,
    hasher: S,
}

/// The 32 bits of a value's hash the index keeps.
#[inline]
fn fold(h: u64) -> u32 {
    (h >> 32) as u32 ^ h as u32
}

/// The hash the table files a value under, from the bits it keeps: the
/// table takes its slot from the low bits and its tag from the top ones.
/// An odd multiplier maps the low bits of `f` one to one onto the low bits
/// of the product, and carries all of `f` into its top ones.
#[inline]
fn spread(f: u32) -> u64 {
    (f as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl<S: BuildHasher> IdIndex<S> {
    pub fn with_hasher(hasher: S) -> Self {
        IdIndex {
            table: HashTable::new(),
            hasher,
        }
    }
    /// The hash the index files `k` under.
    #[inline]
    pub fn hash<Q: Hash + ?Sized>(&self, k: &Q) -> u64 {
        self.hasher.hash_one(k)
    }
    /// The number of the value equal to `k`.
    #[inline]
    pub fn find<'a, Q: Hash + Eq + ?Sized + 'a>(
        &self,
        k: &Q,
        key_of: impl Fn(u32) -> &'a Q,
    ) -> Option<u32> {
        self.find_hashed(self.hash(k), k, key_of)
    }
    /// [`IdIndex::find`] of `k` whose [`IdIndex::hash`] is `h`.
    #[inline]
    pub fn find_hashed<'a, Q: Eq + ?Sized + 'a>(
        &self,
        h: u64,
        k: &Q,
        key_of: impl Fn(u32) -> &'a Q,
    ) -> Option<u32> {
        let f = fold(h);
        (self.table)
            .find(spread(f), |&(i, g)| g == f && key_of(i) == k)
            .map(|&(i, _)| i)
    }
    /// Records `id` for `k`, which the index does not hold yet.
    pub fn insert<Q: Hash + ?Sized>(&mut self, k: &Q, id: u32) {
        self.insert_hashed(self.hash(k), id)
    }
    /// [`IdIndex::insert`] of a value whose [`IdIndex::hash`] is `h`.
    pub fn insert_hashed(&mut self, h: u64, id: u32) {
        let f = fold(h);
        (self.table).insert_unique(spread(f), (id, f), |&(_, g)| spread(g));
    }
    /// Room for `n` more numbers without growing.
    pub fn reserve(&mut self, n: usize) {
        self.table.reserve(n, |&(_, g)| spread(g));
    }
    pub fn len(&self) -> usize {
        self.table.len()
    }
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// Distinct values in the order first seen, numbered by their place.
#[derive(Clone)]
pub struct IdTable<K, S = foldhash::fast::RandomState> {
    items: Vec<K>,
    index: IdIndex<S>,
}

impl<K, S: Default> Default for IdTable<K, S> {
    fn default() -> Self {
        IdTable {
            items: Vec::new(),
            index: IdIndex::default(),
        }
    }
}

impl<K: Hash + Eq, S: BuildHasher + Default> IdTable<K, S> {
    /// A table of `items`, numbered by their place; a value met twice keeps
    /// its first number (the later copy stays in place, found by none).
    pub fn from_items(items: Vec<K>) -> Self {
        let mut index = IdIndex::with_hasher(S::default());
        for (i, k) in items.iter().enumerate() {
            let h = index.hash(k);
            if index.find_hashed(h, k, |j| &items[j as usize]).is_none() {
                index.insert_hashed(h, i as u32);
            }
        }
        IdTable { items, index }
    }
}

impl<K: Hash + Eq, S: BuildHasher> IdTable<K, S> {
    /// The number of the value equal to `k`.
    #[inline]
    pub fn get<Q: Hash + Eq + ?Sized>(&self, k: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
    {
        let items = &self.items;
        self.index.find(k, |i| items[i as usize].borrow())
    }
    /// The number of `k`, made from it by `make` and numbered next when
    /// the table lacks it (`k` hashed once either way).
    #[inline]
    pub fn intern<Q: Hash + Eq + ?Sized>(
        &mut self,
        k: &Q,
        make: impl FnOnce(&Q) -> K,
    ) -> Result<u32, Full>
    where
        K: Borrow<Q>,
    {
        let h = self.index.hash(k);
        let items = &self.items;
        match self.index.find_hashed(h, k, |i| items[i as usize].borrow()) {
            Some(i) => Ok(i),
            None => self.push_hashed(h, make(k)),
        }
    }
    /// [`IdTable::intern`] of a value the caller owns: kept as it is when new.
    #[inline]
    pub fn intern_owned(&mut self, k: K) -> Result<u32, Full> {
        let h = self.index.hash(&k);
        let items = &self.items;
        match self.index.find_hashed(h, &k, |i| &items[i as usize]) {
            Some(i) => Ok(i),
            None => self.push_hashed(h, k),
        }
    }
    /// Room for `n` more values without growing.
    pub fn reserve(&mut self, n: usize) {
        self.items.reserve(n);
        self.index.reserve(n);
    }
    /// Appends `k`, which the table does not hold, as the next number.
    fn push_hashed(&mut self, h: u64, k: K) -> Result<u32, Full> {
        if self.items.len() >= LIMIT {
            return Err(Full);
        }
        let id = self.items.len() as u32;
        self.index.insert_hashed(h, id);
        self.items.push(k);
        Ok(id)
    }
}

impl<K, S> IdTable<K, S> {
    pub fn items(&self) -> &[K] {
        &self.items
    }
    pub fn into_items(self) -> Vec<K> {
        self.items
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// A set of `u64`s (block addresses): open addressing with linear probing
/// in one vector, a key's first slot picked by the high bits of its product
/// with a constant after an exclusive-or with a seed chosen at random per
/// set (the keys come from untrusted files). Addresses are multiples of
/// 512, and a trace inserts and removes one at nearly every event: a
/// general hash set took about half as many instructions again as this one.
#[derive(Clone)]
pub struct U64Set {
    /// [`U64Set::EMPTY`] marks a free slot; the key equal to it is kept
    /// in `has_empty` instead.
    slots: Vec<u64>,
    len: usize,
    /// `64 - log2(slots.len())`.
    shift: u32,
    seed: u64,
    has_empty: bool,
}

impl Default for U64Set {
    fn default() -> Self {
        U64Set::new()
    }
}

impl U64Set {
    const EMPTY: u64 = u64::MAX;
    const FIRST: usize = 64;

    pub fn new() -> Self {
        use std::hash::{BuildHasher, RandomState};
        U64Set {
            slots: vec![Self::EMPTY; Self::FIRST],
            len: 0,
            shift: 64 - Self::FIRST.trailing_zeros(),
            seed: RandomState::new().hash_one(0x5eed_u64),
            has_empty: false,
        }
    }

    #[inline]
    fn home(&self, k: u64) -> usize {
        ((k ^ self.seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `k`, or the free slot where it would go.
    #[inline]
    fn find(&self, k: u64) -> (usize, bool) {
        let mask = self.mask();
        let mut i = self.home(k);
        loop {
            match self.slots[i] {
                x if x == k => return (i, true),
                Self::EMPTY => return (i, false),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Adds `k`; whether it was absent.
    #[inline]
    pub fn insert(&mut self, k: u64) -> bool {
        if k == Self::EMPTY {
            return !std::mem::replace(&mut self.has_empty, true);
        }
        let (i, found) = self.find(k);
        if found {
            return false;
        }
        self.slots[i] = k;
        self.len += 1;
        // At most three quarters full: probe runs stay short.
        if self.len * 4 > self.slots.len() * 3 {
            self.grow();
        }
        true
    }

    /// Removes `k`; whether it was present. The keys after it in its run
    /// move back into the gap where their probe passes it, so no slot is
    /// ever marked deleted.
    #[inline]
    pub fn remove(&mut self, k: u64) -> bool {
        if k == Self::EMPTY {
            return std::mem::replace(&mut self.has_empty, false);
        }
        let (mut hole, found) = self.find(k);
        if !found {
            return false;
        }
        let mask = self.mask();
        let mut j = (hole + 1) & mask;
        while self.slots[j] != Self::EMPTY {
            let home = self.home(self.slots[j]);
            // The key at `j` may fill the hole when the hole lies on its
            // probe path, from its home to `j`.
            if j.wrapping_sub(home) & mask >= j.wrapping_sub(hole) & mask {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = Self::EMPTY;
        self.len -= 1;
        true
    }

    pub fn contains(&self, k: u64) -> bool {
        match k {
            Self::EMPTY => self.has_empty,
            _ => self.find(k).1,
        }
    }

    pub fn len(&self) -> usize {
        self.len + self.has_empty as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cold]
    fn grow(&mut self) {
        let bigger = vec![Self::EMPTY; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        self.shift -= 1;
        for k in old.into_iter().filter(|&k| k != Self::EMPTY) {
            let (i, _) = self.find(k);
            self.slots[i] = k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_first_sight_and_hold_one_copy() {
        let mut t: IdTable<String> = IdTable::default();
        let words = ["b", "a", "b", "c", "a", ""];
        let ids: Vec<u32> = (words.iter())
            .map(|w| t.intern(*w, str::to_owned).unwrap())
            .collect();
        assert_eq!(ids, [0, 1, 0, 2, 1, 3]);
        assert_eq!(t.items(), ["b", "a", "c", ""]);
        assert_eq!(t.get("c"), Some(2));
        assert_eq!(t.get("d"), None);
    }

    #[test]
    fn a_table_rebuilt_from_its_items_finds_the_same_numbers() {
        // Enough values that the index grows several times.
        let mut t: IdTable<Vec<u32>> = IdTable::default();
        for i in 0..5000u32 {
            let k: Vec<u32> = (0..1 + i % 7).map(|j| i * 7 + j).collect();
            assert_eq!(t.intern(&k[..], <[u32]>::to_vec), Ok(i));
        }
        let again: IdTable<Vec<u32>> = IdTable::from_items(t.items().to_vec());
        for (i, k) in t.items().iter().enumerate() {
            assert_eq!(again.get(&k[..]), Some(i as u32));
        }
    }

    #[test]
    fn a_repeated_item_keeps_its_first_number() {
        let t: IdTable<u64> = IdTable::from_items(vec![7, 8, 7]);
        assert_eq!(t.get(&7), Some(0));
        assert_eq!(t.get(&8), Some(1));
    }

    #[test]
    fn a_u64_set_agrees_with_a_hash_set() {
        use std::collections::HashSet;
        // Multiples of 512 in a narrow range (block addresses, reused), a
        // few arbitrary keys and the one the set keeps aside.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ours = U64Set::new();
        let mut theirs = HashSet::new();
        for step in 0..200_000 {
            let r = next();
            let k = match r % 10 {
                0 => u64::MAX,
                1 => r >> 3,
                _ => 0x7f00_0000_0000 + (r >> 40) % 3000 * 512,
            };
            // Inserts outnumber removals early, then the other way round.
            let insert = (next() % 100) < if step < 100_000 { 60 } else { 40 };
            if insert {
                assert_eq!(ours.insert(k), theirs.insert(k), "insert {k:#x}");
            } else {
                assert_eq!(ours.remove(k), theirs.remove(&k), "remove {k:#x}");
            }
            assert_eq!(ours.len(), theirs.len());
        }
        for k in &theirs {
            assert!(ours.contains(*k));
        }
        assert!(!ours.contains(0x7f00_0000_0000 + 5000 * 512));
    }

    #[test]
    fn an_index_over_outside_storage() {
        let store = ["x".to_string(), "y".to_string(), "x".to_string()];
        let mut ix = IdIndex::<foldhash::fast::RandomState>::default();
        for (i, s) in store.iter().enumerate() {
            let key_of = |j: u32| store[j as usize].as_str();
            if ix.find(s.as_str(), key_of).is_none() {
                ix.insert(s.as_str(), i as u32);
            }
        }
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.find("x", |j| store[j as usize].as_str()), Some(0));
        assert_eq!(ix.find("z", |j| store[j as usize].as_str()), None);
    }

    /// A hasher that counts the values it hashes, and gives every value
    /// one of four hashes (so that most lookups meet other values first).
    #[derive(Default, Clone)]
    struct Counting(std::rc::Rc<std::cell::Cell<usize>>);
    struct Four(u64, std::rc::Rc<std::cell::Cell<usize>>);
    impl std::hash::Hasher for Four {
        fn finish(&self) -> u64 {
            self.1.set(self.1.get() + 1);
            (self.0 % 4).wrapping_mul(0x0123_4567_89ab_cdef)
        }
        fn write(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 = self.0.wrapping_mul(31).wrapping_add(b as u64);
            }
        }
    }
    impl BuildHasher for Counting {
        type Hasher = Four;
        fn build_hasher(&self) -> Four {
            Four(0, self.0.clone())
        }
    }

    #[test]
    fn an_index_grows_without_hashing_its_values_again() {
        let hashed = Counting::default();
        let mut ix = IdIndex::with_hasher(hashed.clone());
        let values: Vec<Vec<u32>> = (0..5000u32).map(|i| vec![i, i + 1]).collect();
        let key_of = |j: u32| values[j as usize].as_slice();
        for (i, v) in values.iter().enumerate() {
            let h = ix.hash(v.as_slice());
            assert_eq!(ix.find_hashed(h, v.as_slice(), key_of), None);
            ix.insert_hashed(h, i as u32);
        }
        // One hash a value, however often the index grew.
        assert_eq!(hashed.0.get(), 5000);
        // Values whose hashes agree are told apart by comparing them.
        for i in (0..5000u32).step_by(7) {
            assert_eq!(ix.find(&[i, i + 1][..], key_of), Some(i));
        }
        assert_eq!(ix.find(&[1, 1][..], key_of), None);
        assert_eq!(ix.len(), 5000);
    }
}
