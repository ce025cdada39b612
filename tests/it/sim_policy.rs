//! One test per allocator rule (§4 of the format spec), on the model itself,
//! with the sizes of the spec's worked examples where it gives them.

use fragscope::model::{BlockState, SegmentType};
use fragscope::sim::{AddressOrder, SimAction, SimConfig, Simulator};

const MIB: u64 = 1 << 20;

fn seg_events(s: &Simulator) -> Vec<(SimAction, u64)> {
    seg_events_since(s, 0)
}

/// Segment events from the `n`-th event on.
fn seg_events_since(s: &Simulator, n: usize) -> Vec<(SimAction, u64)> {
    s.events()[n..]
        .iter()
        .filter(|e| e.action.is_segment_event())
        .map(|e| (e.action, e.size))
        .collect()
}

fn sim(conf: &str, capacity: Option<u64>) -> Simulator {
    Simulator::new(SimConfig::parse(conf).unwrap(), capacity)
}

fn checked(s: &Simulator) {
    s.check_invariants().unwrap();
}

#[test]
fn worked_example_4_bytes() {
    let mut s = sim("", None);
    s.malloc(4, 0).unwrap();
    checked(&s);
    assert_eq!(seg_events(&s), vec![(SimAction::SegmentAlloc, 2 * MIB)]);
    let segs = s.segments();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].segment_type, SegmentType::Small);
    let sizes: Vec<(u64, BlockState)> = segs[0].blocks.iter().map(|b| (b.size, b.state)).collect();
    assert_eq!(
        sizes,
        vec![
            (512, BlockState::ActiveAllocated),
            (2_096_640, BlockState::Inactive)
        ]
    );
}

#[test]
fn worked_example_1_5_mb() {
    let mut s = sim("", None);
    s.malloc(1_500_000, 0).unwrap();
    checked(&s);
    assert_eq!(seg_events(&s), vec![(SimAction::SegmentAlloc, 20_971_520)]);
    let segs = s.segments();
    assert_eq!(segs[0].segment_type, SegmentType::Large);
    let sizes: Vec<u64> = segs[0].blocks.iter().map(|b| b.size).collect();
    assert_eq!(sizes, vec![1_500_160, 19_471_360]);
}

#[test]
fn worked_example_100_mb_is_not_split() {
    let mut s = sim("", None);
    s.malloc(100_000_000, 0).unwrap();
    checked(&s);
    assert_eq!(seg_events(&s), vec![(SimAction::SegmentAlloc, 100_663_296)]);
    let segs = s.segments();
    assert_eq!(segs[0].blocks.len(), 1);
    let b = &segs[0].blocks[0];
    assert_eq!(b.size, 100_663_296);
    assert_eq!(b.size - b.requested_size.unwrap(), 663_296);
}

#[test]
fn best_fit_is_smallest_adequate_then_lowest_address() {
    let mut s = sim("", None);
    let a = s.malloc(12 * MIB, 0).unwrap();
    let b = s.malloc(16 * MIB, 0).unwrap();
    let c = s.malloc(12 * MIB, 0).unwrap();
    for x in [a, b, c] {
        s.free(x).unwrap();
    }
    // 11 MiB leaves 1 MiB in a 12 MiB block: not split (needs > 1 MiB).
    assert_eq!(s.malloc(11 * MIB, 0).unwrap(), a);
    assert_eq!(s.malloc(11 * MIB, 0).unwrap(), c);
    assert_eq!(s.malloc(11 * MIB, 0).unwrap(), b);
    assert_eq!(s.counters().device_allocs, 3, "all served from the cache");
    checked(&s);
}

#[test]
fn streams_never_share_cached_blocks() {
    let mut s = sim("", None);
    let a = s.malloc(4 * MIB, 1).unwrap();
    s.free(a).unwrap();
    s.malloc(4 * MIB, 2).unwrap();
    assert_eq!(s.counters().device_allocs, 2);
    assert_eq!(s.malloc(4 * MIB, 1).unwrap(), a);
    checked(&s);
}

#[test]
fn small_and_large_pools_never_share_segments() {
    let mut s = sim("", None);
    let big = s.malloc(2 * MIB, 0).unwrap();
    s.free(big).unwrap();
    // 20 MiB of cached large-pool memory cannot serve a 4 KiB request.
    s.malloc(4096, 0).unwrap();
    assert_eq!(
        seg_events(&s),
        vec![
            (SimAction::SegmentAlloc, 20 * MIB),
            (SimAction::SegmentAlloc, 2 * MIB)
        ]
    );
}

#[test]
fn freed_neighbours_merge() {
    let mut s = sim("", None);
    let a = s.malloc(1000, 0).unwrap();
    let b = s.malloc(1000, 0).unwrap();
    let c = s.malloc(1000, 0).unwrap();
    assert_eq!((b - a, c - b), (1024, 1024));
    s.free(b).unwrap();
    assert_eq!(s.figures().free_blocks, 2);
    s.free(a).unwrap();
    s.free(c).unwrap();
    checked(&s);
    let f = s.figures();
    assert_eq!((f.free_blocks, f.largest_free), (1, 2 * MIB));
}

#[test]
fn large_pool_split_needs_more_than_1_mib() {
    let mut s = sim("", None);
    // 19 MiB → a 20 MiB segment; 1 MiB left is not > 1 MiB: handed out whole.
    s.malloc(19 * MIB, 0).unwrap();
    assert_eq!(s.figures().allocated, 20 * MIB);
    // 18.5 MiB → 20 MiB segment with 1.5 MiB left: split.
    s.malloc(18 * MIB + 512 * 1024, 0).unwrap();
    assert_eq!(s.figures().allocated, 20 * MIB + 18 * MIB + 512 * 1024);
    assert_eq!(s.figures().largest_free, 1536 * 1024);
    checked(&s);
}

#[test]
fn max_split_size_keeps_oversize_blocks_for_oversize_requests() {
    let mut s = sim("max_split_size_mb:64", None);
    let big = s.malloc(100 * MIB, 0).unwrap();
    s.free(big).unwrap();
    // Below max_split_size: the 100 MiB block is not handed out.
    let small = s.malloc(30 * MIB, 0).unwrap();
    assert_ne!(small, big);
    // At or over it: only when the block is less than 20 MiB bigger.
    assert_ne!(s.malloc(70 * MIB, 0).unwrap(), big);
    assert_eq!(s.malloc(90 * MIB, 0).unwrap(), big);
    assert_eq!(s.figures().allocated, 30 * MIB + 70 * MIB + 100 * MIB);
    checked(&s);
}

#[test]
fn max_non_split_rounding_widens_the_reuse_window() {
    let mut s = sim("max_split_size_mb:64,max_non_split_rounding_mb:40", None);
    let big = s.malloc(100 * MIB, 0).unwrap();
    s.free(big).unwrap();
    assert_eq!(s.malloc(70 * MIB, 0).unwrap(), big);
}

#[test]
fn oom_retry_frees_cached_segments_then_retries() {
    let mut s = sim("", Some(60 * MIB));
    let a = s.malloc(40 * MIB, 0).unwrap();
    s.free(a).unwrap();
    s.malloc(50 * MIB, 0).unwrap();
    assert_eq!(
        seg_events(&s),
        vec![
            (SimAction::SegmentAlloc, 40 * MIB),
            (SimAction::SegmentFree, 40 * MIB),
            (SimAction::SegmentAlloc, 50 * MIB)
        ]
    );
    assert_eq!(s.counters().alloc_retries, 1);
    checked(&s);
}

#[test]
fn oom_when_nothing_whole_is_cached() {
    let mut s = sim("", Some(60 * MIB));
    // Three 20 MiB segments of four 5 MiB blocks; free two apart in each.
    let mut blocks = Vec::new();
    for _ in 0..12 {
        blocks.push(s.malloc(5 * MIB, 0).unwrap());
    }
    assert_eq!(s.figures().reserved, 60 * MIB);
    for (i, b) in blocks.iter().enumerate() {
        if i % 2 == 0 {
            s.free(*b).unwrap();
        }
    }
    // 30 MiB free, but no 10 MiB gap and no whole segment to release.
    let err = s.malloc(10 * MIB, 0).unwrap_err();
    assert_eq!(err.rounded, 10 * MIB);
    assert_eq!(err.alloc_size, 10 * MIB);
    assert_eq!(err.reserved, 60 * MIB);
    let oom = s.events().last().unwrap();
    assert_eq!(oom.action, SimAction::Oom);
    assert_eq!(oom.device_free, Some(0));
    assert_eq!(s.counters().ooms, 1);
    checked(&s);
}

#[test]
fn release_available_cached_blocks_frees_one_oversize_block() {
    let mut s = sim("max_split_size_mb:64", Some(200 * MIB));
    let a = s.malloc(100 * MIB, 0).unwrap();
    s.free(a).unwrap();
    // Below max_split_size: cannot take the cached oversize block.
    s.malloc(50 * MIB, 0).unwrap();
    // 80 MiB: the cached 100 MiB block is 20 MiB too big; no room for a
    // new segment; the oversize block is released and the retry fits.
    s.malloc(80 * MIB, 0).unwrap();
    assert_eq!(
        seg_events(&s),
        vec![
            (SimAction::SegmentAlloc, 100 * MIB),
            (SimAction::SegmentAlloc, 50 * MIB),
            (SimAction::SegmentFree, 100 * MIB),
            (SimAction::SegmentAlloc, 80 * MIB)
        ]
    );
    assert_eq!(s.counters().alloc_retries, 0, "no full flush was needed");
}

#[test]
fn gc_threshold_needs_a_memory_fraction() {
    let run = |conf: &str| {
        let mut s = sim(conf, Some(200 * MIB));
        let a = s.malloc(30 * MIB, 0).unwrap();
        let b = s.malloc(30 * MIB, 0).unwrap();
        s.free(a).unwrap();
        s.free(b).unwrap();
        s.malloc(40 * MIB, 0).unwrap();
        checked(&s);
        seg_events(&s)
    };
    // Without a fraction the threshold does nothing.
    assert_eq!(
        run("garbage_collection_threshold:0.5"),
        vec![
            (SimAction::SegmentAlloc, 30 * MIB),
            (SimAction::SegmentAlloc, 30 * MIB),
            (SimAction::SegmentAlloc, 40 * MIB)
        ]
    );
    // Fraction 0.5 of 200 MiB: GC above 50 MiB frees both cached segments
    // (equal age, not stopping at the target) before the new one.
    assert_eq!(
        run("garbage_collection_threshold:0.5,per_process_memory_fraction:0.5"),
        vec![
            (SimAction::SegmentAlloc, 30 * MIB),
            (SimAction::SegmentAlloc, 30 * MIB),
            (SimAction::SegmentFree, 30 * MIB),
            (SimAction::SegmentFree, 30 * MIB),
            (SimAction::SegmentAlloc, 40 * MIB)
        ]
    );
}

#[test]
fn memory_fraction_caps_reserved() {
    let mut s = sim("per_process_memory_fraction:0.5", Some(100 * MIB));
    s.malloc(40 * MIB, 0).unwrap();
    assert!(s.malloc(20 * MIB, 0).is_err());
}

#[test]
fn pending_free_is_reusable_only_when_completed() {
    let mut s = sim("", None);
    let a = s.malloc(4 * MIB, 0).unwrap();
    s.free_requested(a).unwrap();
    let b = s.malloc(4 * MIB, 0).unwrap();
    assert_ne!(a, b, "a pending block is not handed out");
    assert_eq!(s.figures().pending, 4 * MIB);
    s.free_completed(a).unwrap();
    checked(&s);
    assert_eq!(s.malloc(4 * MIB, 0).unwrap(), a);
}

#[test]
fn empty_cache_releases_only_whole_segments() {
    let mut s = sim("", None);
    let pinned = s.malloc(512, 0).unwrap();
    let x = s.malloc(1000, 0).unwrap();
    let big = s.malloc(30 * MIB, 0).unwrap();
    s.free(x).unwrap();
    s.free(big).unwrap();
    s.empty_cache();
    // The small segment holds a live 512 B block: it stays.
    assert_eq!(s.figures().reserved, 2 * MIB);
    assert_eq!(
        seg_events(&s).last(),
        Some(&(SimAction::SegmentFree, 30 * MIB))
    );
    s.free(pinned).unwrap();
    s.empty_cache();
    assert_eq!(s.figures().reserved, 0);
    checked(&s);
}

#[test]
fn expandable_segments_map_pages_and_grow_one_range() {
    let mut s = sim("expandable_segments:True", None);
    s.malloc(4, 0).unwrap();
    let a = s.malloc(1_500_000, 0).unwrap();
    // 30 MiB: the 18.57 MiB free tail of the first large page plus one more
    // 20 MiB page, contiguous with it.
    let b = s.malloc(30 * MIB, 0).unwrap();
    checked(&s);
    assert_eq!(
        seg_events(&s),
        vec![
            (SimAction::SegmentMap, 2 * MIB),
            (SimAction::SegmentMap, 20 * MIB),
            (SimAction::SegmentMap, 20 * MIB)
        ]
    );
    assert_eq!(b, a + 1_500_160);
    let large: Vec<_> = s
        .segments()
        .into_iter()
        .filter(|g| g.segment_type == SegmentType::Large)
        .collect();
    assert_eq!(large.len(), 1);
    assert_eq!(large[0].total_size, 40 * MIB);
    assert_eq!(large[0].is_expandable, Some(true));
    // Free everything in the large range: empty_cache unmaps whole pages.
    s.free(a).unwrap();
    s.free(b).unwrap();
    s.empty_cache();
    checked(&s);
    assert_eq!(
        seg_events(&s).last(),
        Some(&(SimAction::SegmentUnmap, 40 * MIB))
    );
    assert_eq!(s.figures().reserved, 2 * MIB);
}

#[test]
fn expandable_unmap_keeps_partial_pages() {
    let mut s = sim("expandable_segments:True", None);
    let keep = s.malloc(15 * MIB, 0).unwrap();
    let gone = s.malloc(30 * MIB, 0).unwrap();
    s.free(gone).unwrap();
    s.empty_cache();
    checked(&s);
    // 45 MiB mapped in three 20 MiB pages (60 MiB); the free 45 MiB from
    // 15 MiB on holds two whole pages (20..60): those are unmapped.
    assert_eq!(
        seg_events(&s).last(),
        Some(&(SimAction::SegmentUnmap, 40 * MIB))
    );
    assert_eq!(s.figures().reserved, 20 * MIB);
    assert_eq!(s.figures().inactive, 5 * MIB);
    s.free(keep).unwrap();
    checked(&s);
}

#[test]
fn expandable_pages_holding_live_blocks_stay_mapped() {
    let mut s = sim("expandable_segments:True", Some(60 * MIB));
    let mut blocks = Vec::new();
    for _ in 0..12 {
        blocks.push(s.malloc(5 * MIB, 0).unwrap());
    }
    for (i, b) in blocks.iter().enumerate() {
        if i % 2 == 0 {
            s.free(*b).unwrap();
        }
    }
    // Every 20 MiB page still holds a live 5 MiB block: nothing can be
    // unmapped, so a 10 MiB request fails here too.
    assert!(s.malloc(10 * MIB, 0).is_err());
    assert_eq!(s.counters().device_frees, 0);
    checked(&s);
}

#[test]
fn expandable_segments_avoid_a_fragmentation_oom() {
    // 8 MiB pairs fill three 20 MiB segments; freeing every second one
    // leaves 12 MiB free in each segment, never 16 MiB in one piece. In one
    // growing range the last freed block joins the unused tail instead.
    let run = |conf: &str| {
        let mut s = sim(conf, Some(60 * MIB));
        let mut second = Vec::new();
        for _ in 0..3 {
            s.malloc(8 * MIB, 0).unwrap();
            second.push(s.malloc(8 * MIB, 0).unwrap());
        }
        for b in second {
            s.free(b).unwrap();
        }
        let r = s.malloc(16 * MIB, 0).map(|_| ());
        checked(&s);
        r
    };
    assert!(run("").is_err());
    assert!(run("expandable_segments:True").is_ok());
}

#[test]
fn address_order_decides_equal_size_ties() {
    // Three equal segments, freed: best fit takes the lowest address, which
    // is the oldest segment when the driver grows upward and the newest
    // when it grows downward.
    for (order, pick) in [(AddressOrder::Up, 0), (AddressOrder::Down, 2)] {
        let mut s = sim("", None);
        s.set_address_order(order);
        let segs: Vec<u64> = (0..3).map(|_| s.malloc(30 * MIB, 0).unwrap()).collect();
        match order {
            AddressOrder::Up => assert!(segs[0] < segs[1] && segs[1] < segs[2]),
            AddressOrder::Down => assert!(segs[0] > segs[1] && segs[1] > segs[2]),
        }
        for &a in &segs {
            s.free(a).unwrap();
        }
        assert_eq!(s.malloc(30 * MIB, 0).unwrap(), segs[pick]);
        checked(&s);
    }
}

#[test]
fn released_address_ranges_are_handed_out_again() {
    let mut s = sim("", None);
    s.set_address_order(AddressOrder::Down);
    let a = s.malloc(30 * MIB, 0).unwrap();
    let b = s.malloc(30 * MIB, 0).unwrap();
    s.free(a).unwrap();
    s.empty_cache();
    // The first range is free again and is the highest that fits.
    assert_eq!(s.malloc(20 * MIB, 0).unwrap(), a + 10 * MIB);
    assert!(b < a);
    checked(&s);
}

/// A simulator whose only recorded segment (30 MiB) starts at `at`.
fn one_recorded_segment_at(at: u64, order: AddressOrder) -> Simulator {
    let mut first = sim("", None);
    first.malloc(30 * MIB, 0).unwrap();
    let mut segs = first.segments();
    let from = segs[0].address;
    segs[0].address = at;
    for b in &mut segs[0].blocks {
        b.address = b.address - from + at;
    }
    let mut s = Simulator::with_initial(SimConfig::parse("").unwrap(), None, &segs).unwrap();
    s.set_address_order(order);
    s
}

#[test]
fn new_segments_use_the_other_side_once_their_side_is_full() {
    // Growing down from a recorded segment at 64 MiB leaves room for two
    // new 30 MiB segments (the space starts at 2 MiB); the rest go above it
    // instead of the model running out of addresses (a false OOM).
    let mut s = one_recorded_segment_at(64 * MIB, AddressOrder::Down);
    let addrs: Vec<u64> = (0..20).map(|_| s.malloc(30 * MIB, 0).unwrap()).collect();
    checked(&s);
    assert_eq!(
        addrs[..2],
        [34 * MIB, 4 * MIB],
        "below it first: {addrs:x?}"
    );
    assert!(addrs[2..].iter().all(|&a| a > 64 * MIB), "{addrs:x?}");
    assert_eq!(s.counters().ooms, 0);

    // Growing up from a segment near the top of the 2^47-byte space: one
    // fits above it, the rest go below it, nearest first.
    let top = 1u64 << 47;
    let at = top - 64 * MIB;
    let mut s = one_recorded_segment_at(at, AddressOrder::Up);
    let addrs: Vec<u64> = (0..20).map(|_| s.malloc(30 * MIB, 0).unwrap()).collect();
    checked(&s);
    assert_eq!(addrs[..2], [at + 30 * MIB, at - 30 * MIB], "{addrs:x?}");
    assert!(addrs[1..].iter().all(|&a| a < at), "{addrs:x?}");
    assert_eq!(s.counters().ooms, 0);
}

/// `seg` moved to start at `at`, blocks and all.
fn relocated(seg: &fragscope::model::Segment, at: u64) -> fragscope::model::Segment {
    let mut s = seg.clone();
    for b in &mut s.blocks {
        b.address = b.address - seg.address + at;
    }
    s.address = at;
    s
}

#[test]
fn recorded_expandable_segments_keep_the_reservations_the_file_shows() {
    // A 30 MiB request on stream 0 and a 4 MiB one on stream 1: expandable
    // segments map whole 20 MiB pages, so 40 MiB and 20 MiB segments.
    let conf = "expandable_segments:True";
    let mut first = sim(conf, None);
    first.malloc(30 * MIB, 0).unwrap();
    first.malloc(4 * MIB, 1).unwrap();
    let segs = first.segments();
    let a = segs.iter().find(|g| g.stream == 0).unwrap();
    let other = segs.iter().find(|g| g.stream == 1).unwrap();
    assert_eq!((a.is_expandable, a.total_size), (Some(true), 40 * MIB));
    assert_eq!(other.total_size, 20 * MIB);
    let base = 1u64 << 40;

    // Another stream's segment between two runs of stream 0: one
    // reservation could not hold both, so there are two.
    let layout = vec![
        relocated(a, base),
        relocated(other, base + 40 * MIB),
        relocated(a, base + 60 * MIB),
    ];
    let s = Simulator::with_initial(SimConfig::parse(conf).unwrap(), None, &layout).unwrap();
    checked(&s);
    assert_eq!(s.segments(), layout);

    // Two runs that touch: one reservation would have reported them as one
    // 80 MiB segment, so they are two reservations and stay two segments.
    let layout = vec![relocated(a, base), relocated(a, base + 40 * MIB)];
    let mut s = Simulator::with_initial(SimConfig::parse(conf).unwrap(), None, &layout).unwrap();
    checked(&s);
    assert_eq!(s.segments(), layout);
    // Freed, the two 40 MiB runs do not serve one 60 MiB request together
    // (one reservation would have, from `base`, mapping nothing): it goes
    // to the upper run, which maps 20 MiB more above itself.
    for g in &layout {
        s.free(g.blocks[0].address).unwrap();
    }
    let n = s.events().len();
    assert_eq!(s.malloc(60 * MIB, 0).unwrap(), base + 40 * MIB);
    checked(&s);
    assert_eq!(
        seg_events_since(&s, n),
        vec![(SimAction::SegmentMap, 20 * MIB)]
    );
}

#[test]
fn recorded_expandable_runs_not_whole_pages_apart_are_two_reservations() {
    // Two 40 MiB runs of stream 0, 50 MiB apart: one reservation maps its
    // 20 MiB pages at whole pages from its base, so these are two (a new
    // reservation is made when a request does not fit the unmapped space
    // of the others), not a layout to refuse.
    let conf = "expandable_segments:True";
    let mut first = sim(conf, None);
    first.malloc(30 * MIB, 0).unwrap();
    let a = first.segments().remove(0);
    assert_eq!(a.total_size, 40 * MIB);
    let base = 1u64 << 40;
    let layout = vec![relocated(&a, base), relocated(&a, base + 50 * MIB)];
    let mut s = Simulator::with_initial(SimConfig::parse(conf).unwrap(), None, &layout).unwrap();
    checked(&s);
    assert_eq!(s.segments(), layout);
    // Freed and flushed, each gives back all its pages.
    for g in &layout {
        s.free(g.blocks[0].address).unwrap();
    }
    s.empty_cache();
    checked(&s);
    assert!(s.segments().is_empty());
    assert_eq!(s.figures().reserved, 0);

    // A run off the 2 MiB boundaries reservations start on, or not whole
    // pages long, no reservation could have mapped.
    for layout in [
        vec![relocated(&a, base + 512)],
        vec![relocated(&a, base), relocated(&a, base + 51 * MIB)],
    ] {
        let e = Simulator::with_initial(SimConfig::parse(conf).unwrap(), None, &layout);
        assert!(e.unwrap_err().to_string().contains("not aligned"));
    }
    let mut short = relocated(&a, base);
    short.total_size -= 2 * MIB;
    short.blocks.last_mut().unwrap().size -= 2 * MIB;
    let e = Simulator::with_initial(SimConfig::parse(conf).unwrap(), None, &[short]);
    assert!(e.unwrap_err().to_string().contains("pages"));
}

/// A recorded block of no bytes (PyTorch's smallest is 512) would start
/// where its neighbour starts; the model refuses such a start state, by
/// the segment and the block, instead of keeping one of the two.
#[test]
fn a_recorded_block_of_no_bytes_is_refused() {
    let mut first = sim("", None);
    let a = first.malloc(MIB, 0).unwrap();
    first.free(a).unwrap();
    let b = first.malloc(MIB, 0).unwrap();
    let mut segs = first.segments();
    let at = segs[0].blocks[0].address;
    assert_eq!(at, b);
    let mut empty = segs[0].blocks[0].clone();
    empty.size = 0;
    empty.state = BlockState::ActivePendingFree;
    segs[0].blocks.insert(0, empty);
    let e = Simulator::with_initial(SimConfig::parse("").unwrap(), None, &segs).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("a block of 0 bytes at {at:#x}")),
        "{e}"
    );
}
