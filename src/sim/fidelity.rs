//! How closely the model reproduces a recording: run under the recorded
//! settings, its segment events, reserved-bytes curve, final segments and
//! OOMs are compared with the trace's.
//!
//! Owns the comparison arithmetic only; running the model is `run.rs`.

use super::run::{DeviceInput, SimRun};
use serde::Serialize;
use std::collections::HashMap;
use std::hash::Hash;

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Fidelity {
    pub device: i64,
    pub start_exact: bool,
    pub frees_of_older_blocks: u64,
    pub recorded_segment_events: usize,
    pub simulated_segment_events: usize,
    /// Longest common subsequence of the two (action, size) sequences;
    /// with `segment_events_window`, a lower bound of it.
    pub matched_segment_events: usize,
    /// Set where the two sequences part over so many events that the
    /// subsequence is counted within windows of this many recorded segment
    /// events ([`compare`]); absent where it is exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_events_window: Option<usize>,
    /// matched / the longer sequence; `None` when neither has any.
    pub segment_events_matched: Option<f64>,
    /// Trace index of the first recorded segment event where the two
    /// sequences part (`None` when one is a prefix of the other).
    pub first_divergence: Option<usize>,
    /// Moments compared: the start and every event that completes a request.
    pub reserved_points: usize,
    pub recorded_peak_reserved: u64,
    pub max_reserved_error: u64,
    /// Trace index of the largest error (`None` = the start).
    pub max_reserved_error_event: Option<usize>,
    /// Largest error over the recorded peak reserved.
    pub max_reserved_error_share: f64,
    /// Mean error over the recorded peak reserved.
    pub mean_reserved_error_share: f64,
    pub final_segments_recorded: usize,
    pub final_segments_simulated: usize,
    /// Size multiset intersection of the final segments.
    pub final_segments_matched: usize,
    /// matched / the larger count; `None` when neither has any.
    pub final_segments_share: Option<f64>,
    pub recorded_ooms: usize,
    /// Recorded OOMs at which the model failed too.
    pub recorded_ooms_reproduced: usize,
    /// OOMs of the model where the recording succeeded.
    pub spurious_ooms: usize,
    pub skipped_frees: u64,
}

/// Length of the longest common subsequence. The common prefix and suffix
/// are matched as they stand (an LCS can always keep them), and what is
/// left goes through [`lcs_bits`]: a run that reproduces its recording
/// costs one pass, one that does not n·m/64 word operations, where a table
/// of n·m comparisons made a long trace's fidelity quadratic.
pub fn lcs_len<T: Eq + Hash>(a: &[T], b: &[T]) -> usize {
    let (pre, suf) = common_ends(a, b);
    pre + suf + lcs_bits(&a[pre..a.len() - suf], &b[pre..b.len() - suf])
}

/// The lengths of the common prefix of `a` and `b`, and of their common
/// suffix past it.
fn common_ends<T: Eq>(a: &[T], b: &[T]) -> (usize, usize) {
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suf = (a[pre..].iter().rev())
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (pre, suf)
}

/// The recorded segment events a run reproduces in order: the longest
/// common subsequence of the two, or a lower bound of it counted within
/// windows (`window`, the recorded events a window holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matched {
    pub count: usize,
    pub window: Option<usize>,
}

/// Comparisons (an element of each sequence) the longest common
/// subsequence is worked out exactly for, after the common prefix and
/// suffix: about 0.1 s of one core. The work grows with the product of
/// the two lengths, so a long trace that the model parts from (a quarter
/// of a million segment events each: 60 times this) would cost minutes.
const EXACT_CELLS: u64 = 1 << 32;

/// Recorded segment events a window holds past [`EXACT_CELLS`].
const WINDOW: usize = 1 << 14;

/// The events of `a` (made at trace events `a_at`, ascending) that `b`
/// (made at `b_at`) reproduces in order. Exactly the longest common
/// subsequence where its middle (past the common prefix and suffix) is
/// within [`EXACT_CELLS`]; past it, the middle of `a` is cut into windows
/// of [`WINDOW`] events, each compared with the events of `b` made over the
/// same trace events, and the counts summed: a common subsequence of the
/// two, so at most the longest one, and work that grows with the length.
pub fn compare<T: Eq + Hash>(a: &[T], a_at: &[usize], b: &[T], b_at: &[usize]) -> Matched {
    compare_within(a, a_at, b, b_at, EXACT_CELLS, WINDOW)
}

fn compare_within<T: Eq + Hash>(
    a: &[T],
    a_at: &[usize],
    b: &[T],
    b_at: &[usize],
    exact_cells: u64,
    window: usize,
) -> Matched {
    debug_assert_eq!((a.len(), b.len()), (a_at.len(), b_at.len()));
    let (pre, suf) = common_ends(a, b);
    let (a, a_at) = (&a[pre..a.len() - suf], &a_at[pre..a_at.len() - suf]);
    let (b, b_at) = (&b[pre..b.len() - suf], &b_at[pre..b_at.len() - suf]);
    if (a.len() as u64).saturating_mul(b.len() as u64) <= exact_cells || a.len() <= window {
        return Matched {
            count: pre + suf + lcs_bits(a, b),
            window: None,
        };
    }
    let mut count = pre + suf;
    let mut from = 0;
    for (j, part) in a.chunks(window).enumerate() {
        // The events of `b` made before the next window's first event.
        let to = match a_at.get((j + 1) * window) {
            Some(&t) => from + b_at[from..].partition_point(|&x| x < t),
            None => b.len(),
        };
        count += lcs_len(part, &b[from..to]);
        from = to;
    }
    Matched {
        count,
        window: Some(window),
    }
}

/// LCS length by the bit-vector algorithm of Crochemore, Iliopoulos,
/// Pinzon and Reid (2001): one bit per element of `b`, all ones at first;
/// for each element x of `a`, V = (V + (V & M)) | (V & !M), M the positions
/// of x in `b`; the LCS is the count of zero bits.
///
/// [`PASS`] elements of `a` are taken in one pass over the words
/// ([`step_n`]): each word is read and written once for all of them, and
/// their carry chains run side by side.
fn lcs_bits<T: Eq + Hash>(a: &[T], b: &[T]) -> usize {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    // Positions in `b` of each distinct element, by first appearance.
    let mut ids: HashMap<&T, usize, foldhash::fast::RandomState> = HashMap::default();
    let mut positions: Vec<Vec<usize>> = Vec::new();
    for (j, y) in b.iter().enumerate() {
        let id = *ids.entry(y).or_insert_with(|| {
            positions.push(Vec::new());
            positions.len() - 1
        });
        positions[id].push(j);
    }
    let words = b.len().div_ceil(64);
    // An element found at least once a word has its bits made once (at
    // most 64 such elements: 8 bytes an element of `b` in all); any other
    // sets its few bits in a scratch vector for each element of `a` that
    // names it, and clears them after. Setting every position for every
    // element of `a` cost the product of the two counts of each element:
    // quadratic on a recording whose segments are mostly of one size.
    let dense: Vec<Option<Vec<u64>>> = positions
        .iter()
        .map(|p| (p.len() >= words).then(|| bits_of(p, words)))
        .collect();
    // The bits above `b.len()` stay ones: they never match, and a carry
    // into them is ORed back with the ones of V & !M.
    let mut v = vec![u64::MAX; words];
    let mut scratch: [Vec<u64>; PASS] = std::array::from_fn(|_| vec![0u64; words]);
    // An element not in `b` (M = 0) leaves V as it is.
    let mut xs = a.iter().filter_map(|x| ids.get(x).copied()).peekable();
    // Words below an element's first match take no carry and stay as they
    // are: a pass starts at the lowest of its elements' first words.
    let first = |id: usize| positions[id][0] / 64;
    let mut group = [0usize; PASS];
    while xs.peek().is_some() {
        let mut n = 0;
        while n < PASS
            && let Some(x) = xs.next()
        {
            group[n] = x;
            n += 1;
        }
        let group = &group[..n];
        for (k, &id) in group.iter().enumerate() {
            if dense[id].is_none() {
                for &j in &positions[id] {
                    scratch[k][j / 64] |= 1 << (j % 64);
                }
            }
        }
        let masks: [&[u64]; PASS] = std::array::from_fn(|k| match group.get(k) {
            Some(&id) => dense[id].as_deref().unwrap_or(&scratch[k]),
            None => &[],
        });
        if n == PASS {
            let lo = group.iter().map(|&id| first(id)).min().unwrap_or(0);
            step_n(&mut v[lo..], masks.map(|m| &m[lo..]));
        } else {
            for (&id, m) in group.iter().zip(masks) {
                let lo = first(id);
                step(&mut v[lo..], &m[lo..]);
            }
        }
        for (k, &id) in group.iter().enumerate() {
            if dense[id].is_none() {
                for &j in &positions[id] {
                    scratch[k][j / 64] = 0;
                }
            }
        }
    }
    v.iter().map(|w| w.count_zeros() as usize).sum()
}

/// The positions `p` as a vector of `words` words.
fn bits_of(p: &[usize], words: usize) -> Vec<u64> {
    let mut m = vec![0u64; words];
    for &j in p {
        m[j / 64] |= 1 << (j % 64);
    }
    m
}

/// V = (V + (V & M)) | (V & !M), one word at a time, the carry rippling up.
fn step(v: &mut [u64], m: &[u64]) {
    let mut carry = 0;
    for (vk, mk) in v.iter_mut().zip(m) {
        *vk = word(*vk, *mk, &mut carry);
    }
}

/// Elements of `a` a pass over the words takes.
const PASS: usize = 4;

/// [`step`] with each mask in turn, in one pass: word k of a step needs
/// word k of the step before and its own carry from word k - 1.
fn step_n(v: &mut [u64], masks: [&[u64]; PASS]) {
    let mut carries = [0; PASS];
    // Each mask as long as `v`: no bound to check in the loop.
    let masks = masks.map(|m| &m[..v.len()]);
    for (k, vk) in v.iter_mut().enumerate() {
        let mut w = *vk;
        for (m, c) in masks.iter().zip(&mut carries) {
            w = word(w, m[k], c);
        }
        *vk = w;
    }
}

/// One word of a step: its new value, and the carry (0 or 1) into the
/// next word. `v & !m` is `v ^ (v & m)`.
#[inline(always)]
fn word(v: u64, m: u64, carry: &mut u8) -> u64 {
    let u = v & m;
    add_with_carry(v, u, carry) | (v ^ u)
}

/// `a + b + carry`, the carry out left in `carry`: one add-with-carry
/// instruction where the target has one (the four carry chains of
/// [`step_n`] took about twice the time as two adds and a compare each).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn add_with_carry(a: u64, b: u64, carry: &mut u8) -> u64 {
    let mut s = 0;
    *carry = std::arch::x86_64::_addcarry_u64(*carry, a, b, &mut s);
    s
}

#[cfg(not(target_arch = "x86_64"))]
use portable_add_with_carry as add_with_carry;

/// [`add_with_carry`] on any target.
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
fn portable_add_with_carry(a: u64, b: u64, carry: &mut u8) -> u64 {
    let (s, c1) = a.overflowing_add(b);
    let (s, c2) = s.overflowing_add(*carry as u64);
    *carry = (c1 || c2) as u8;
    s
}

/// Size of the multiset intersection of two ascending lists.
fn sorted_intersection(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

fn share(matched: usize, a: usize, b: usize) -> Option<f64> {
    let d = a.max(b);
    (d > 0).then(|| matched as f64 / d as f64)
}

/// Compares a run (normally under the recorded settings) with the recording.
pub fn measure(input: &DeviceInput, run: &SimRun) -> Fidelity {
    let (rec, sim) = named_segment_events(input, run);
    let matched = run
        .matched_segment_events
        .unwrap_or_else(|| compare_named(input, run, &rec, &sim));
    let first_divergence = rec
        .iter()
        .zip(&sim)
        .position(|(a, b)| a != b)
        .or_else(|| (rec.len() > sim.len()).then_some(sim.len()))
        .and_then(|k| input.recorded_segment_event_index.get(k).copied());

    // Reserved bytes at the start and after every event that completes a
    // request (summed up by the run as it went): between a recorded
    // segment_alloc and its alloc the recording is one event ahead of the
    // model, which is not an error.
    let peak = input
        .recorded_reserved
        .iter()
        .chain(std::iter::once(input.recorded_start_reserved))
        .max()
        .unwrap_or(0);
    let err = &run.reserved_error;
    let (max_err, max_at, sum, n) = (err.max, err.max_event, err.sum, err.points);
    let denom = peak.max(1) as f64;

    let fin = sorted_intersection(&input.recorded_final_segments, &run.final_segments);
    let reproduced = run.ooms.reproduced as usize;
    Fidelity {
        device: input.device,
        start_exact: input.start.exact,
        frees_of_older_blocks: input.start.frees_of_older_blocks,
        recorded_segment_events: rec.len(),
        simulated_segment_events: sim.len(),
        matched_segment_events: matched.count,
        segment_events_window: matched.window,
        segment_events_matched: share(matched.count, rec.len(), sim.len()),
        first_divergence,
        reserved_points: n,
        recorded_peak_reserved: peak,
        max_reserved_error: max_err,
        max_reserved_error_event: max_at,
        max_reserved_error_share: max_err as f64 / denom,
        mean_reserved_error_share: sum / n as f64 / denom,
        final_segments_recorded: input.recorded_final_segments.len(),
        final_segments_simulated: run.final_segments.len(),
        final_segments_matched: fin,
        final_segments_share: share(
            fin,
            input.recorded_final_segments.len(),
            run.final_segments.len(),
        ),
        recorded_ooms: input.recorded_ooms,
        recorded_ooms_reproduced: reproduced,
        spurious_ooms: (run.ooms.refused - run.ooms.reproduced) as usize,
        skipped_frees: run.skipped_frees,
    }
}

/// Segment events, each as (action, size).
type Named<'a> = Vec<(&'a str, u64)>;

/// The recorded segment events and the run's.
fn named_segment_events<'a>(input: &'a DeviceInput, run: &SimRun) -> (Named<'a>, Named<'static>) {
    let rec = input
        .recorded_segment_events
        .iter()
        .map(|(a, s)| (a.as_str(), *s))
        .collect();
    let sim = run
        .segment_events
        .iter()
        .map(|&(a, size)| (a.name(), size))
        .collect();
    (rec, sim)
}

/// The recorded segment events that `run` reproduces in order
/// ([`compare`]), as [`measure`] counts them.
pub fn matched(input: &DeviceInput, run: &SimRun) -> Matched {
    let (rec, sim) = named_segment_events(input, run);
    compare_named(input, run, &rec, &sim)
}

/// [`compare`] of the recorded segment events `rec` and the run's `sim`
/// ([`named_segment_events`]), each with the trace events that made them.
fn compare_named(
    input: &DeviceInput,
    run: &SimRun,
    rec: &[(&str, u64)],
    sim: &[(&str, u64)],
) -> Matched {
    compare(
        rec,
        &input.recorded_segment_event_index,
        sim,
        &run.segment_event_at,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table the bit-parallel LCS replaced.
    fn lcs_table<T: PartialEq>(a: &[T], b: &[T]) -> usize {
        let mut prev = vec![0usize; b.len() + 1];
        let mut cur = vec![0usize; b.len() + 1];
        for x in a {
            for (j, y) in b.iter().enumerate() {
                cur[j + 1] = if x == y {
                    prev[j] + 1
                } else {
                    cur[j].max(prev[j + 1])
                };
            }
            std::mem::swap(&mut prev, &mut cur);
        }
        prev[b.len()]
    }

    proptest::proptest! {
        /// Small alphabets (many matches) and lengths across word
        /// boundaries, with shared prefixes and suffixes.
        #[test]
        fn lcs_matches_the_table(
            pre in proptest::collection::vec(0u8..4, 0..70),
            a in proptest::collection::vec(0u8..4, 0..200),
            b in proptest::collection::vec(0u8..4, 0..200),
            suf in proptest::collection::vec(0u8..4, 0..70),
        ) {
            let a: Vec<u8> = pre.iter().chain(&a).chain(&suf).copied().collect();
            let b: Vec<u8> = pre.iter().chain(&b).chain(&suf).copied().collect();
            proptest::prop_assert_eq!(lcs_len(&a, &b), lcs_table(&a, &b));
            proptest::prop_assert_eq!(lcs_bits(&a, &b), lcs_table(&a, &b));
        }

        /// A few frequent elements among many rare ones: the two ways of
        /// making an element's bits (made once, or set for each use).
        #[test]
        fn lcs_of_rare_and_frequent_elements_matches_the_table(
            a in proptest::collection::vec(proptest::prop_oneof![0u16..2, 0u16..300], 0..400),
            b in proptest::collection::vec(proptest::prop_oneof![0u16..2, 0u16..300], 0..400),
        ) {
            proptest::prop_assert_eq!(lcs_bits(&a, &b), lcs_table(&a, &b));
        }

        /// Counted within windows: a common subsequence (at most the
        /// longest), the sum of each window's longest one, and exact where
        /// the budget allows; a run that reproduces its recording is
        /// counted whole either way.
        #[test]
        fn windows_count_a_common_subsequence(
            a in proptest::collection::vec(0u8..3, 0..300),
            b in proptest::collection::vec(0u8..3, 0..300),
            gaps_a in proptest::collection::vec(0usize..3, 300),
            gaps_b in proptest::collection::vec(0usize..3, 300),
            window in 1usize..40,
        ) {
            let at = |gaps: &[usize], n: usize| -> Vec<usize> {
                gaps[..n].iter().scan(0, |t, g| { *t += g; Some(*t) }).collect()
            };
            let (a_at, b_at) = (at(&gaps_a, a.len()), at(&gaps_b, b.len()));
            let exact = lcs_table(&a, &b);
            let all = compare_within(&a, &a_at, &b, &b_at, u64::MAX, window);
            proptest::prop_assert_eq!(all, Matched { count: exact, window: None });
            let w = compare_within(&a, &a_at, &b, &b_at, 0, window);
            proptest::prop_assert!(w.count <= exact);
            if w.window.is_some() {
                // The windows as the doc comment cuts them, each compared
                // by the table.
                let (pre, suf) = common_ends(&a, &b);
                let (am, aat) = (&a[pre..a.len() - suf], &a_at[pre..a.len() - suf]);
                let (bm, bat) = (&b[pre..b.len() - suf], &b_at[pre..b.len() - suf]);
                let mut want = pre + suf;
                let mut from = 0;
                for (j, part) in am.chunks(window).enumerate() {
                    let to = match aat.get((j + 1) * window) {
                        Some(&t) => (from..bm.len()).find(|&k| bat[k] >= t).unwrap_or(bm.len()),
                        None => bm.len(),
                    };
                    want += lcs_table(part, &bm[from..to]);
                    from = to;
                }
                proptest::prop_assert_eq!(w.count, want);
            }
            let same = compare_within(&a, &a_at, &a, &a_at, 0, window);
            proptest::prop_assert_eq!(same.count, a.len());
        }
    }

    /// Past the budget, a long run that parts from its recording here and
    /// there costs work that grows with its length, and loses little.
    #[test]
    fn a_long_comparison_is_counted_within_windows() {
        let mut next = crate::model::test_support::below(0x853c_49e6_748f_ea9b);
        let n = 200_000;
        let a: Vec<u16> = (0..n).map(|_| next(40) as u16).collect();
        // The same events, one in fifty changed, made one trace event later.
        let b: Vec<u16> = a
            .iter()
            .map(|&x| {
                if next(50) == 0 {
                    40 + next(40) as u16
                } else {
                    x
                }
            })
            .collect();
        let a_at: Vec<usize> = (0..n).map(|i| 3 * i).collect();
        let b_at: Vec<usize> = (0..n).map(|i| 3 * i + 1).collect();
        let m = compare(&a, &a_at, &b, &b_at);
        assert_eq!(m.window, Some(WINDOW));
        let changed = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        // At least every unchanged event, but for a few at each window's
        // edge.
        assert!(
            m.count <= n && m.count + 64 * (n / WINDOW + 1) >= n - changed,
            "{m:?}"
        );
        // Under the budget, the exact count.
        let short = 20_000;
        let e = compare(&a[..short], &a_at[..short], &b[..short], &b_at[..short]);
        assert_eq!(e.window, None);
        assert_eq!(e.count, lcs_len(&a[..short], &b[..short]));
    }

    /// The target's add-with-carry and the portable one agree, carries
    /// and edges included.
    #[test]
    fn add_with_carry_matches_the_portable_one() {
        let mut next = crate::model::test_support::below(0x2545_f491_4f6c_dd1d);
        let edges = [0, 1, u64::MAX, u64::MAX - 1, 1 << 63];
        for i in 0..20_000usize {
            let pick = |n: u64, k: usize| {
                if k.is_multiple_of(3) {
                    edges[k % edges.len()]
                } else {
                    n
                }
            };
            let (a, b) = (pick(next(u64::MAX), i), pick(next(u64::MAX), i / 3));
            for c in [0u8, 1] {
                let (mut c1, mut c2) = (c, c);
                let s1 = add_with_carry(a, b, &mut c1);
                let s2 = portable_add_with_carry(a, b, &mut c2);
                assert_eq!((s1, c1), (s2, c2), "{a} + {b} + {c}");
                let wide = a as u128 + b as u128 + c as u128;
                assert_eq!((s1, c1), (wide as u64, (wide >> 64) as u8));
            }
        }
    }

    #[test]
    fn lcs() {
        assert_eq!(lcs_len(&[1, 2, 3, 4], &[1, 3, 4, 5]), 3);
        assert_eq!(lcs_len::<u8>(&[], &[1]), 0);
        assert_eq!(lcs_len(&[7, 7], &[7, 7, 7]), 2);
        assert_eq!(sorted_intersection(&[1, 2, 2, 5], &[2, 2, 2, 5, 6]), 3);
        assert_eq!(share(0, 0, 0), None);
        assert_eq!(share(3, 4, 3), Some(0.75));
    }
}
