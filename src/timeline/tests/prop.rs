//! Property tests of the replay: random request streams, replayed from a
//! cut part way and whole, conserve bytes (also under expandable segments).

use super::super::forward::{Ctx, step};
use super::super::policy::{LARGE_BUFFER, Policy, SMALL_BUFFER};
use super::super::state::Layout;
use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Alloc(u64),
    Free(usize, bool),
    Complete(usize),
    EmptyCache,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop_oneof![1u64..4096, 4096u64..(1 << 20), (1u64 << 20)..(48 << 20)].prop_map(Op::Alloc),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(k, d)| Op::Free(k, d)),
        1 => any::<usize>().prop_map(Op::Complete),
        1 => Just(Op::EmptyCache),
    ]
}

/// Turns random intents into a trace a caching allocator could have
/// written, by asking the layout where each request would go.
fn generate(ops: &[Op], expandable: bool) -> (Vec<TraceEvent>, Vec<Layout>) {
    let s = snap(vec![], vec![]);
    let mut ctx = Ctx::new(&s, 0, &[]);
    ctx.policy.expandable = expandable;
    let mut l = Layout::default();
    l.set_indexed(true);
    let mut trace = Vec::new();
    let mut states = vec![l.clone()];
    let mut next_addr = B;
    // Expandable: one reservation per pool, mapped upward from its base.
    let mut mapped_end = [B, B + (1 << 40)];
    let mut push = |l: &mut Layout, trace: &mut Vec<TraceEvent>, e: TraceEvent| {
        step(l, &ctx, trace.len(), &e).expect("generated events are valid");
        trace.push(e);
        states.push(l.clone());
    };
    for o in ops {
        match *o {
            Op::Alloc(req) => {
                let rounded = ctx.policy.round_size(req);
                let small = Policy::is_small(rounded);
                let fit = l.best_fit(small, rounded);
                let x = match fit {
                    Some(x) => x,
                    None if expandable => {
                        let (page, k) = if small {
                            (SMALL_BUFFER, 0)
                        } else {
                            (LARGE_BUFFER, 1)
                        };
                        // A free tail of the mapped run is used first.
                        let tail = l
                            .segs
                            .last_before(mapped_end[k])
                            .filter(|(a, s)| *a + s.size == mapped_end[k])
                            .and_then(|(a, s)| {
                                let last = s.blocks.iter().next_back();
                                let free_from = last.map_or(a, |(b, lb)| b + lb.size);
                                (free_from < mapped_end[k]).then_some(free_from)
                            });
                        let start = tail.unwrap_or(mapped_end[k]);
                        let need = (start + rounded).saturating_sub(mapped_end[k]);
                        let bytes = need.div_ceil(page) * page;
                        let e = ev(Action::SegmentMap, mapped_end[k], bytes);
                        mapped_end[k] += bytes;
                        push(&mut l, &mut trace, e);
                        start
                    }
                    None => {
                        let size = Policy::allocation_size(rounded);
                        let x = next_addr;
                        next_addr += size + 64 * MIB;
                        push(&mut l, &mut trace, ev(Action::SegmentAlloc, x, size));
                        x
                    }
                };
                push(&mut l, &mut trace, alloc(x, req));
            }
            Op::Free(k, deferred) => {
                let live: Vec<(u64, u64)> = l
                    .segs
                    .values()
                    .flat_map(|s| s.blocks.iter().filter(|(_, b)| !b.pending))
                    .map(|(a, b)| (*a, b.requested))
                    .collect();
                if live.is_empty() {
                    continue;
                }
                let (a, r) = live[k % live.len()];
                push(&mut l, &mut trace, ev(Action::FreeRequested, a, r));
                if !deferred {
                    push(&mut l, &mut trace, ev(Action::FreeCompleted, a, r));
                }
            }
            Op::Complete(k) => {
                let pending: Vec<(u64, u64)> = l
                    .segs
                    .values()
                    .flat_map(|s| s.blocks.iter().filter(|(_, b)| b.pending))
                    .map(|(a, b)| (*a, b.requested))
                    .collect();
                if pending.is_empty() {
                    continue;
                }
                let (a, r) = pending[k % pending.len()];
                push(&mut l, &mut trace, ev(Action::FreeCompleted, a, r));
            }
            Op::EmptyCache => {
                let empty: Vec<(u64, u64)> = l
                    .segs
                    .iter()
                    .filter(|(_, s)| s.blocks.is_empty())
                    .map(|(a, s)| (*a, s.size))
                    .collect();
                for (a, size) in empty {
                    if expandable {
                        // Only a run at the top of the mapping is
                        // unmapped here, so mapping stays contiguous.
                        let k = usize::from(a >= B + (1 << 40));
                        if a + size == mapped_end[k] {
                            mapped_end[k] = a;
                            push(&mut l, &mut trace, ev(Action::SegmentUnmap, a, size));
                        }
                    } else {
                        push(&mut l, &mut trace, ev(Action::SegmentFree, a, size));
                    }
                }
            }
        }
    }
    (trace, states)
}

fn check_stream(ops: Vec<Op>, cut: usize, expandable: bool) -> Result<(), TestCaseError> {
    let (full, states) = generate(&ops, expandable);
    let cut = cut % (full.len() + 1);
    let start = &states[cut];
    let end = &states[full.len()];
    let mut s = snap(end.to_segments(0), full[cut..].to_vec());
    if expandable {
        s.allocator_settings = Some(AllocatorSettings {
            entries: vec![("expandable_segments".into(), Setting::Bool(true))],
        });
    }
    // The replay, checked against a rescan after every event.
    let run = Run::new(&s, 0);
    let mut l = run.start.clone();
    prop_assert!(l.check().is_ok(), "start: {:?}", l.check());
    // A moment's state is replayed without the index: its blocks are
    // those of the indexed replay.
    let moment = cut % run.trace.len().max(1);
    let mut at_moment = None;
    for i in 0..run.trace.len() {
        let _ = run.step(&mut l, i);
        let x = l.sample(None, None);
        prop_assert_eq!(
            x.allocated + x.lay().internal_free + x.external_bytes(),
            x.reserved_bytes()
        );
        prop_assert!(l.check().is_ok(), "after event {}: {:?}", i, l.check());
        if i == moment {
            at_moment = Some(l.to_segments(0));
        }
    }
    if let Some(want) = at_moment {
        prop_assert_eq!(state_at(&s, 0, Some(moment)).segments, want);
    }
    let r = replay_device(&s, 0);
    // Key moments found together are those found one by one.
    for (label, m) in [
        ("peak allocated", Moment::PeakAllocated),
        ("peak reserved", Moment::PeakReserved),
        ("max fragmentation", Moment::MaxFragmentation),
        ("min largest gap", Moment::MinLargestGap),
    ] {
        if r.samples.len() > 1 {
            let k = r.key_moments(&s).into_iter().find(|k| k.label == label);
            prop_assert_eq!(k.map(|k| k.at), Some(r.resolve(&s, m).expect("resolves")));
        }
    }
    prop_assert!(
        r.report.final_state_matches,
        "{:?}",
        r.report.final_state_diff
    );
    prop_assert_eq!(
        r.report.clean_events,
        r.report.events,
        "{:?}",
        &r.report.anomalies
    );
    // The start is recovered up to the sizes of blocks older than the
    // trace, which only the rules can guess.
    let s0 = r.samples.at(0);
    let t0 = start.sample(None, None);
    prop_assert_eq!(
        (s0.reserved_bytes(), s0.allocated, s0.lay().pending_free > 0),
        (t0.reserved_bytes(), t0.allocated, t0.lay().pending_free > 0)
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_streams_conserve_bytes(ops in proptest::collection::vec(op(), 1..160), cut in any::<usize>()) {
        check_stream(ops, cut, false)?;
    }

    #[test]
    fn random_expandable_streams_conserve_bytes(ops in proptest::collection::vec(op(), 1..160), cut in any::<usize>()) {
        check_stream(ops, cut, true)?;
    }
}
