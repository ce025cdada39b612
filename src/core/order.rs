//! Sorting large slices of large items without a large buffer.

/// Sorts `v` as `v.sort_by_key(key)` does (stable: items with equal keys
/// keep their order), through a `u32` index per item: the items are then
/// put in place by following the cycles of the permutation. A stable sort
/// of the items themselves takes a buffer of half of them, which for
/// findings of a hundred bytes or more, by the million, is most of a
/// command's memory.
pub fn sort_stable_by_index<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    assert!(v.len() < u32::MAX as usize, "more items than u32 indexes");
    let mut order: Vec<u32> = (0..v.len() as u32).collect();
    order.sort_unstable_by_key(|&i| (key(&v[i as usize]), i));
    // Item `k` becomes the one at `order[k]`; a visited index is DONE.
    const DONE: u32 = u32::MAX;
    for i in 0..v.len() {
        let mut j = i;
        while order[j] != DONE {
            let k = order[j] as usize;
            order[j] = DONE;
            if k == i {
                break;
            }
            v.swap(j, k);
            j = k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same order as a stable sort, ties (equal keys, different
    /// payloads) in their first order.
    #[test]
    fn gives_what_a_stable_sort_gives() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for n in [0usize, 1, 2, 7, 100, 1000] {
            let v: Vec<(u64, usize)> = (0..n)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 5, i)
                })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|p| p.0);
            let mut got = v;
            sort_stable_by_index(&mut got, |p| p.0);
            assert_eq!(got, want, "n={n}");
        }
    }
}
