use super::*;

fn replayed(i: usize) -> Sample {
    let (allocated, active, pending, inactive) = (1000 + i as u64, 1536 + i as u64, 512, 4096);
    let largest = 2048;
    Sample {
        event: i.checked_sub(1).map(|e| e as u32),
        time_us: (!i.is_multiple_of(3)).then_some(1_700_000_000_000_000 + i as i64),
        allocated,
        active,
        reserved: Some(active + pending + inactive),
        external_free: Some(inactive + pending),
        layout: Some(LayoutFigures {
            internal_free: active - allocated,
            pending_free: pending,
            largest_free_gap: largest,
            free_gaps: 3,
            fragmentation: fragmentation(largest, inactive),
            largest_small_request: 1 << 20,
            largest_large_request: largest,
        }),
    }
}

#[test]
fn replayed_samples_come_back_exactly_in_compact_form() {
    let v: Vec<Sample> = (0..50).map(replayed).collect();
    let s = Series::from(v.clone());
    assert!(s.is_compact());
    assert_eq!(s.to_vec(), v);
    assert_eq!(
        s.iter().rev().collect::<Vec<_>>(),
        v.iter().rev().copied().collect::<Vec<_>>()
    );
    assert_eq!(
        (s.first(), s.last(), s.get(50)),
        (Some(v[0]), Some(v[49]), None)
    );
    assert!(s.heap_bytes() < 50 * 24, "{} bytes", s.heap_bytes());
}

#[test]
fn samples_that_do_not_add_up_turn_the_series_plain() {
    let mut v: Vec<Sample> = (0..20).map(replayed).collect();
    // Figures no replay gives: each one alone must fall back.
    let odd: [fn(&mut Sample); 6] = [
        |s| s.layout.as_mut().unwrap().internal_free += 1,
        |s| s.external_free = Some(0),
        |s| s.layout.as_mut().unwrap().fragmentation = 0.25,
        |s| s.event = Some(77),
        |s| s.layout.as_mut().unwrap().free_gaps = 1 << 40,
        |s| s.layout.as_mut().unwrap().largest_small_request = 1 << 40,
    ];
    for f in odd {
        let mut w = v.clone();
        f(&mut w[7]);
        let s = Series::from(w.clone());
        assert!(!s.is_compact());
        assert_eq!(s.to_vec(), w);
    }
    v[0].event = Some(0);
    assert_eq!(Series::from(v.clone()).to_vec(), v);
}

#[test]
fn extremes_round_trip_across_checkpoints() {
    // Every stored figure jumping between 0 and its largest value, and
    // the time between i64::MIN and i64::MAX, on both sides of restarts.
    let v: Vec<Sample> = (0..3 * CHECKPOINT + 5)
        .map(|i| {
            let big = i % 2 == 1;
            let x = if big { u64::MAX } else { 0 };
            Sample {
                event: i.checked_sub(1).map(|e| e as u32),
                time_us: Some(if big { i64::MAX } else { i64::MIN }),
                allocated: x,
                active: !x,
                reserved: Some(x),
                external_free: Some(x),
                layout: Some(LayoutFigures {
                    internal_free: (!x).wrapping_sub(x),
                    pending_free: x / 3,
                    largest_free_gap: x,
                    free_gaps: if big { (1 << 31) - 1 } else { 0 },
                    fragmentation: fragmentation(x, x - x / 3),
                    largest_small_request: if big { u64::from(u32::MAX) } else { 0 },
                    largest_large_request: !x,
                }),
            }
        })
        .collect();
    let s = Series::from(v.clone());
    assert!(s.is_compact());
    assert_eq!(s.to_vec(), v);
    for (i, x) in v.iter().enumerate() {
        assert_eq!(s.get(i), Some(*x), "sample {i}");
    }
}

use proptest::prelude::*;

/// A stored figure: small, arbitrary or at the ends of its range.
fn figure() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0u64..4096,
        2 => any::<u64>(),
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => (0u64..64).prop_map(|k| 1u64 << k),
    ]
}

/// What changes at one step: a time (maybe none, maybe going back),
/// new values for the figures whose bit is set in the mask, and
/// whether the sample is one no replay gives.
type Step = (Option<i64>, u16, [u64; 9], bool);

fn step() -> impl Strategy<Value = Step> {
    (
        prop_oneof![
            1 => Just(None),
            4 => any::<i64>().prop_map(Some),
            4 => (1_700_000_000_000_000i64..1_700_000_000_001_000).prop_map(Some),
        ],
        any::<u16>(),
        prop::array::uniform9(figure()),
        prop::bool::weighted(0.02),
    )
}

/// The samples the steps make, each figure kept from the sample before
/// unless its mask bit is set; and whether every one adds up.
fn samples(steps: &[Step]) -> (Vec<Sample>, bool) {
    let mut f = [0u64; 9];
    let mut out = Vec::with_capacity(steps.len());
    let mut all_fit = true;
    for (i, &(time_us, mask, new, odd)) in steps.iter().enumerate() {
        for k in 0..9 {
            if mask & (1 << k) != 0 {
                f[k] = new[k];
            }
        }
        let [
            allocated,
            active,
            reserved,
            pending,
            inactive,
            gap,
            large,
            gaps,
            small,
        ] = f;
        let inactive = inactive.min(u64::MAX - pending);
        let mut s = Sample {
            event: i.checked_sub(1).map(|e| e as u32),
            time_us,
            allocated,
            active,
            reserved: Some(reserved),
            external_free: Some(inactive + pending),
            layout: Some(LayoutFigures {
                internal_free: active.wrapping_sub(allocated),
                pending_free: pending,
                largest_free_gap: gap,
                free_gaps: gaps % (1 << 31),
                fragmentation: fragmentation(gap, inactive),
                largest_small_request: small % (1 << 32),
                largest_large_request: large,
            }),
        };
        if odd {
            let l = s.layout.as_mut().unwrap();
            l.internal_free = l.internal_free.wrapping_add(1);
            all_fit = false;
        }
        out.push(s);
    }
    (out, all_fit)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_samples_read_back_exactly(
        steps in prop::collection::vec(step(), 0..(4 * CHECKPOINT + 3)),
        split in any::<prop::sample::Index>(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let (v, all_fit) = samples(&steps);
        let s = Series::from(v.clone());
        // Any ascending indices, repeats and the last one included.
        if !v.is_empty() {
            let mut at: Vec<usize> = picks.iter().map(|p| p.index(v.len())).collect();
            at.sort_unstable();
            let want: Vec<Sample> = at.iter().map(|&i| v[i]).collect();
            prop_assert_eq!(s.at_ascending(&at), want);
        }
        prop_assert_eq!(s.is_compact(), all_fit);
        prop_assert_eq!(s.len(), v.len());
        for (i, x) in v.iter().enumerate() {
            prop_assert_eq!(s.get(i), Some(*x), "sample {}", i);
        }
        prop_assert_eq!(s.get(v.len()), None);
        prop_assert_eq!(s.first(), v.first().copied());
        prop_assert_eq!(s.last(), v.last().copied());
        prop_assert_eq!(s.to_vec(), v.clone());
        let back: Vec<Sample> = s.iter().rev().collect();
        prop_assert!(back.iter().rev().eq(v.iter()));
        // From both ends at once: the two halves meet without a gap or
        // an overlap.
        let k = if v.is_empty() { 0 } else { split.index(v.len() + 1) };
        let mut it = s.iter();
        let head: Vec<Sample> = it.by_ref().take(k).collect();
        let mut tail: Vec<Sample> = it.by_ref().rev().collect();
        prop_assert_eq!(it.next(), None);
        tail.reverse();
        prop_assert_eq!(&head[..], &v[..k]);
        prop_assert_eq!(&tail[..], &v[k..]);
        prop_assert_eq!(&Series::from(v.clone()), &s);
        if all_fit && !v.is_empty() {
            // At most a header of five bytes and ten changes of eight
            // per row, and one offset per restart.
            prop_assert!(
                s.heap_bytes()
                    <= v.len() * MAX_ROW_BYTES
                        + v.len().div_ceil(CHECKPOINT) * std::mem::size_of::<usize>()
            );
        }
    }

    #[test]
    fn pushing_one_by_one_matches_collecting(
        steps in prop::collection::vec(step(), 1..(2 * CHECKPOINT + 3)),
    ) {
        let (v, _) = samples(&steps);
        let mut s = Series::default();
        for (i, x) in v.iter().enumerate() {
            s.push(*x);
            prop_assert_eq!(s.last(), Some(*x));
            prop_assert_eq!(s.len(), i + 1);
        }
        prop_assert_eq!(s.to_vec(), v);
    }

    /// Pushing figures gives the series that pushing their samples
    /// gives, in the compact form or not, whatever the figures.
    #[test]
    fn pushing_figures_matches_pushing_their_samples(
        steps in prop::collection::vec((step(), figure(), figure()), 1..(2 * CHECKPOINT + 3)),
    ) {
        let mut by_figures = Series::default();
        let mut by_samples = Series::default();
        let mut f = [0u64; 9];
        for (i, &((time_us, mask, new, _), gaps, small)) in steps.iter().enumerate() {
            for k in 0..9 {
                if mask & (1 << k) != 0 {
                    f[k] = new[k];
                }
            }
            let [allocated, active, reserved, pending, inactive, largest_gap, largest_large, _, _] = f;
            let fig = Figures {
                time_us,
                allocated,
                active,
                reserved,
                pending,
                inactive,
                largest_gap,
                // Mostly in range, now and then past it.
                free_gaps: if gaps % 7 == 0 { gaps } else { gaps % (1 << 31) },
                largest_small: if small % 7 == 0 { small } else { small % (1 << 32) },
                largest_large,
            };
            by_figures.push_figures(&fig);
            by_samples.push(fig.sample(i.checked_sub(1).map(|e| e as u32)));
            prop_assert_eq!(by_figures.is_compact(), by_samples.is_compact());
            prop_assert_eq!(by_figures.last(), by_samples.last());
        }
        prop_assert_eq!(by_figures.heap_bytes(), by_samples.heap_bytes());
        prop_assert_eq!(&by_figures, &by_samples);
    }
}
