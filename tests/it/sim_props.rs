//! Property tests of the allocator model: random request streams under
//! random settings keep the layout sound, conserve bytes, never exceed the
//! capacity, only fail when the policy says so, and can reuse every freed
//! block.

use fragscope::model::policy::{SMALL_BUFFER, is_small, round_size};
use fragscope::model::{BlockState, Segment, SegmentType};
use fragscope::sim::{AddressOrder, SimAction, SimConfig, Simulator, Slot};
use proptest::prelude::*;
use std::collections::BTreeMap;

const MIB: u64 = 1 << 20;

#[derive(Debug, Clone)]
enum Op {
    Alloc(u64, i64),
    /// Free the n-th live allocation (modulo the count).
    Free(usize),
    FreeRequested(usize),
    Complete(usize),
    EmptyCache,
}

fn size() -> impl Strategy<Value = u64> {
    prop_oneof![1u64..4096, 4096u64..MIB, MIB..10 * MIB, 10 * MIB..80 * MIB,]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (size(), 0i64..3).prop_map(|(s, st)| Op::Alloc(s, st)),
        3 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::FreeRequested),
        1 => any::<usize>().prop_map(Op::Complete),
        1 => Just(Op::EmptyCache),
    ]
}

const CONFIGS: &[&str] = &[
    "",
    "expandable_segments:True",
    "max_split_size_mb:64",
    "max_split_size_mb:32,max_non_split_rounding_mb:40",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:[1:2,4:8,>:16]",
    "garbage_collection_threshold:0.6,per_process_memory_fraction:0.8",
    "expandable_segments:True,max_split_size_mb:128",
];

fn setup() -> impl Strategy<Value = (usize, Option<u64>, Vec<Op>)> {
    (
        0..CONFIGS.len() * 2,
        prop_oneof![Just(None), (64u64..400).prop_map(|m| Some(m * MIB))],
        proptest::collection::vec(op(), 1..160),
    )
}

/// What the test knows of a live allocation.
#[derive(Debug, Clone, Copy)]
struct Live {
    addr: u64,
    requested: u64,
    stream: i64,
    pending: bool,
}

fn page_of(cfg: &SimConfig, rounded: u64) -> u64 {
    if is_small(rounded) {
        SMALL_BUFFER
    } else {
        cfg.large_segment_size
    }
}

/// Configuration `c` of [`CONFIGS`], under both address orders.
fn model(c: usize, capacity: Option<u64>) -> (SimConfig, Simulator) {
    let cfg = SimConfig::parse(CONFIGS[c % CONFIGS.len()]).unwrap();
    let mut s = Simulator::new(cfg.clone(), capacity);
    if c >= CONFIGS.len() {
        s.set_address_order(AddressOrder::Down);
    }
    (cfg, s)
}

/// After a flush with expandable segments: no cached block of a mapped
/// range holds a whole page (a range starts on a page boundary).
fn no_whole_free_page(cfg: &SimConfig, s: &Simulator) -> Result<(), TestCaseError> {
    for g in s
        .segments()
        .iter()
        .filter(|g| g.is_expandable == Some(true))
    {
        let page = match g.segment_type {
            SegmentType::Small => SMALL_BUFFER,
            _ => cfg.large_segment_size,
        };
        for b in g.blocks.iter().filter(|b| b.state == BlockState::Inactive) {
            let (begin, end) = (b.address - g.address, b.address - g.address + b.size);
            prop_assert!(
                begin.div_ceil(page) >= end / page,
                "a free page at {:#x} survived the flush",
                b.address
            );
        }
    }
    Ok(())
}

/// Runs the ops, checking the invariants after each; returns the events.
fn drive(
    c: usize,
    capacity: Option<u64>,
    ops: &[Op],
) -> Result<Vec<(SimAction, u64)>, TestCaseError> {
    let (cfg, mut s) = model(c, capacity);
    let mut live: Vec<Live> = Vec::new();
    let mut net: i128 = 0;
    let mut seen = 0;
    for op in ops {
        let flushes = s.counters().alloc_retries;
        match *op {
            Op::Alloc(size, stream) => match s.malloc(size, stream) {
                Ok(addr) => {
                    if s.counters().alloc_retries > flushes {
                        live.retain(|l| !l.pending);
                    }
                    prop_assert_eq!(addr % 512, 0);
                    prop_assert!(
                        live.iter().all(|l| l.addr != addr),
                        "address handed out twice"
                    );
                    live.push(Live {
                        addr,
                        requested: size,
                        stream,
                        pending: false,
                    });
                }
                Err(oom) => {
                    let c = capacity.expect("an unlimited device never runs out");
                    let rounded = round_size(size, &cfg.roundup_power2_divisions);
                    prop_assert_eq!(oom.rounded, rounded);
                    if cfg.memory_fraction.is_none() {
                        // Only when the device cannot give the next segment
                        // (or page) even after the cache was flushed.
                        // Expandable: at most the whole pages of the request
                        // (less when a free mapped tail is reused).
                        let need = if cfg.expandable_segments {
                            let page = page_of(&cfg, rounded);
                            rounded.div_ceil(page) * page
                        } else {
                            oom.alloc_size
                        };
                        prop_assert!(
                            oom.reserved + need > c,
                            "OOM with {} reserved, {} needed, capacity {}",
                            oom.reserved,
                            need,
                            c
                        );
                    }
                    if !cfg.expandable_segments {
                        // The flush left no cached whole segment behind.
                        for g in s.segments() {
                            prop_assert!(
                                !(g.blocks.len() == 1 && g.blocks[0].state == BlockState::Inactive),
                                "cached whole segment at {:#x} survived the OOM flush",
                                g.address
                            );
                        }
                    } else {
                        no_whole_free_page(&cfg, &s)?;
                    }
                }
            },
            Op::Free(n) if !live.is_empty() => {
                let l = live.remove(n % live.len());
                if l.pending {
                    prop_assert!(s.free_completed(l.addr).is_ok());
                } else {
                    s.free(l.addr).unwrap();
                }
            }
            Op::FreeRequested(n) if !live.is_empty() => {
                let i = n % live.len();
                if !live[i].pending {
                    s.free_requested(live[i].addr).unwrap();
                    live[i].pending = true;
                }
            }
            Op::Complete(n) if !live.is_empty() => {
                let i = n % live.len();
                if live[i].pending {
                    let l = live.remove(i);
                    s.free_completed(l.addr).unwrap();
                }
            }
            Op::EmptyCache => {
                s.empty_cache();
                // The flush completes pending frees.
                live.retain(|l| !l.pending);
                if !cfg.expandable_segments {
                    for g in s.segments() {
                        prop_assert!(
                            g.blocks.iter().any(|b| b.state != BlockState::Inactive),
                            "empty_cache left a cached whole segment"
                        );
                    }
                } else {
                    no_whole_free_page(&cfg, &s)?;
                }
            }
            _ => {}
        }
        if s.counters().alloc_retries > flushes {
            // A full flush before a retry completes every pending free.
            live.retain(|l| !l.pending);
        }
        if let Err(e) = s.check_invariants() {
            return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
        }
        let f = s.figures();
        if let Some(c) = capacity {
            prop_assert!(f.reserved <= c, "reserved {} over capacity {c}", f.reserved);
        }
        for e in &s.events()[seen..] {
            match e.action {
                SimAction::SegmentAlloc | SimAction::SegmentMap => net += e.size as i128,
                SimAction::SegmentFree | SimAction::SegmentUnmap => net -= e.size as i128,
                _ => {}
            }
        }
        seen = s.events().len();
        prop_assert_eq!(
            net,
            f.reserved as i128,
            "segment events do not add up to reserved"
        );
        // Every live allocation is where it was, with its request.
        let segs = s.segments();
        let blocks: BTreeMap<u64, (u64, BlockState, u64, &Segment)> = segs
            .iter()
            .flat_map(|g| g.blocks.iter().map(move |b| (g, b)))
            .map(|(g, b)| {
                (
                    b.address,
                    (b.size, b.state, b.requested_size.unwrap_or(0), g),
                )
            })
            .collect();
        let mut requested = 0;
        for l in &live {
            let (size, state, req, seg) = blocks[&l.addr];
            prop_assert_eq!(req, l.requested);
            let rounded = round_size(l.requested, &cfg.roundup_power2_divisions);
            prop_assert!(size >= rounded);
            // Streams and pools never share segments.
            prop_assert_eq!(seg.stream, l.stream);
            let small = seg.segment_type == SegmentType::Small;
            prop_assert_eq!(small, is_small(rounded));
            let want = if l.pending {
                BlockState::ActivePendingFree
            } else {
                BlockState::ActiveAllocated
            };
            prop_assert_eq!(state, want);
            if !l.pending {
                requested += l.requested;
            }
        }
        prop_assert_eq!(f.requested, requested);
    }
    Ok(s.events().iter().map(|e| (e.action, e.size)).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn random_streams_keep_the_layout_sound((c, capacity, ops) in setup()) {
        drive(c, capacity, &ops)?;
    }

    #[test]
    fn the_model_is_deterministic((c, capacity, ops) in setup()) {
        let a = drive(c, capacity, &ops)?;
        let b = drive(c, capacity, &ops)?;
        prop_assert_eq!(a, b);
    }

    /// Without max_split_size (which may keep a merged oversize block from
    /// a smaller request), a freed block serves the same request again from
    /// the cache: no new segment, reserved unchanged.
    #[test]
    fn every_freed_block_is_reusable(
        c in prop_oneof![Just(0usize), Just(1), Just(4), Just(5)],
        allocs in proptest::collection::vec((size(), 0i64..3), 1..40),
        frees in proptest::collection::vec(any::<usize>(), 0..30),
        pick in any::<usize>(),
    ) {
        let cfg = SimConfig::parse(CONFIGS[c]).unwrap();
        let mut s = Simulator::new(cfg, None);
        let mut live: Vec<(u64, u64, i64)> = Vec::new();
        for (size, stream) in allocs {
            live.push((s.malloc(size, stream).unwrap(), size, stream));
        }
        for f in frees {
            if live.len() > 1 {
                let (a, _, _) = live.remove(f % live.len());
                s.free(a).unwrap();
            }
        }
        let (a, size, stream) = live[pick % live.len()];
        s.free(a).unwrap();
        let before = s.figures().reserved;
        let n = s.events().len();
        s.malloc(size, stream).unwrap();
        prop_assert_eq!(s.figures().reserved, before);
        prop_assert!(
            s.events()[n..].iter().all(|e| !e.action.is_segment_event()),
            "a freed block could not be reused"
        );
        s.check_invariants().map_err(TestCaseError::fail)?;
    }

    /// The layout the model reports loads back into an equal model.
    #[test]
    fn reported_layout_round_trips((c, capacity, ops) in setup()) {
        let (cfg, mut s) = model(c, capacity);
        let mut live = Vec::new();
        for op in &ops {
            match *op {
                Op::Alloc(size, stream) => {
                    if let Ok(a) = s.malloc(size, stream) {
                        live.push(a);
                    }
                }
                Op::Free(n) if !live.is_empty() => {
                    let a = live.remove(n % live.len());
                    s.free(a).unwrap();
                }
                _ => {}
            }
        }
        let segs = s.segments();
        let t = Simulator::with_initial(cfg, capacity, &segs).map_err(|e| TestCaseError::fail(e.to_string()))?;
        t.check_invariants().map_err(TestCaseError::fail)?;
        prop_assert_eq!(t.segments(), segs);
        prop_assert_eq!(t.figures(), s.figures());
    }
}

/// What each op of `ops` made of a fresh model under `cfg`, one line per
/// op (its result, the figures, the events so far), and the model's split
/// probe at the end. Frees pick among the live allocations by position,
/// so two models that answer alike are driven alike.
fn transcript(cfg: &SimConfig, capacity: Option<u64>, ops: &[Op]) -> (Vec<String>, u64) {
    transcript_with(cfg, capacity, ops, false).expect("no invariant checked")
}

/// [`transcript`], freeing by address, or (`by_slot`) where
/// `malloc_slot` placed each block, as a run of the model does, checking
/// the layout's invariants after each op.
fn transcript_with(
    cfg: &SimConfig,
    capacity: Option<u64>,
    ops: &[Op],
    by_slot: bool,
) -> Result<(Vec<String>, u64), String> {
    let mut s = Simulator::new(cfg.clone(), capacity);
    // Without a slot the model looks the block up by its address, as
    // `free_requested` and `free_completed` do.
    let hint = |slot: Slot| if by_slot { slot } else { Slot::UNKNOWN };
    let mut live: Vec<(u64, Slot)> = Vec::new();
    let mut out = Vec::new();
    for op in ops {
        let r = match *op {
            Op::Alloc(size, stream) => {
                let r = s.malloc_slot(size, stream, (0, 0));
                if let Ok(a) = r {
                    live.push(a);
                }
                format!("{:?}", r.map(|(a, _)| a))
            }
            Op::Free(n) | Op::Complete(n) if !live.is_empty() => {
                let (a, slot) = live.remove(n % live.len());
                format!("{:?}", s.free_completed_at(a, hint(slot)))
            }
            Op::FreeRequested(n) if !live.is_empty() => {
                let (a, slot) = live[n % live.len()];
                format!("{:?}", s.free_requested_at(a, hint(slot)))
            }
            Op::EmptyCache => {
                s.empty_cache();
                String::new()
            }
            _ => continue,
        };
        if by_slot {
            s.check_invariants()
                .map_err(|e| format!("after {op:?}: {e}"))?;
        }
        out.push(format!(
            "{r} {:?} {:?} {:?}",
            s.figures(),
            s.counters(),
            s.events()
        ));
    }
    Ok((out, s.split_probe()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// A model freed by where it placed each block (a run's way, which
    /// keeps no address index) answers as one freed by address (which
    /// builds the index at its first free and keeps it).
    #[test]
    fn freeing_by_slot_or_by_address_is_the_same_model((c, capacity, ops) in setup()) {
        let cfg = SimConfig::parse(CONFIGS[c % CONFIGS.len()]).unwrap();
        let by_addr = transcript_with(&cfg, capacity, &ops, false).map_err(TestCaseError::fail)?;
        let by_slot = transcript_with(&cfg, capacity, &ops, true).map_err(TestCaseError::fail)?;
        prop_assert_eq!(by_slot, by_addr);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// `max_split_size` acts only through the sizes the split probe
    /// covers: a run under any limit above the probe of a run (and above
    /// that run's own limit) makes the same decisions at every step, with
    /// any `max_non_split_rounding`. What lets `simulate` share one run
    /// between such configurations.
    #[test]
    fn a_split_limit_above_the_probe_changes_nothing(
        (c, capacity, ops) in setup(),
        extra in 0u64..(200 * MIB),
        rounding in prop_oneof![Just(None), (0u64..64).prop_map(|m| Some(m * MIB))],
    ) {
        let base = SimConfig::parse(CONFIGS[c % CONFIGS.len()]).unwrap();
        let (want, probe) = transcript(&base, capacity, &ops);
        let limit = probe.saturating_add(1).max(20 * MIB).saturating_add(extra);
        prop_assume!(probe < base.max_split() && probe < limit);
        let other = SimConfig {
            max_split_size: Some(limit),
            max_non_split_rounding: rounding.unwrap_or(base.max_non_split_rounding),
            ..base.clone()
        };
        let (got, _) = transcript(&other, capacity, &ops);
        prop_assert_eq!(got, want);
    }
}

/// The probe is not vacuous: a cached 100 MiB block serves a 10 MiB
/// request without a limit, and a 64 MiB limit, below the probe, refuses it.
#[test]
fn a_split_limit_below_the_probe_can_change_the_run() {
    let ops = [Op::Alloc(100 * MIB, 0), Op::Free(0), Op::Alloc(10 * MIB, 0)];
    let base = SimConfig::default();
    let (want, probe) = transcript(&base, None, &ops);
    assert!(probe >= 100 * MIB, "probe {probe}");
    let other = SimConfig::parse("max_split_size_mb:64").unwrap();
    let (got, _) = transcript(&other, None, &ops);
    assert_ne!(got, want);
}
