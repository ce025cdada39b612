use super::*;

fn sample(allocated: u64, reserved: u64, largest: u64, inactive: u64, gaps: u64) -> Sample {
    Sample {
        allocated,
        active: allocated,
        reserved: Some(reserved),
        external_free: Some(inactive),
        layout: Some(LayoutFigures {
            largest_free_gap: largest,
            free_gaps: gaps,
            fragmentation: crate::model::fragmentation(largest, inactive),
            ..Default::default()
        }),
        ..Sample::default()
    }
}

fn end_state(allocated: u64, reserved: u64, largest: u64, inactive: u64) -> StateStats {
    let mut s = StateStats {
        reserved_bytes: reserved,
        allocated_bytes: allocated,
        active_bytes: allocated,
        inactive_bytes: inactive,
        external_free_bytes: inactive,
        largest_free_block_bytes: largest,
        free_blocks: u64::from(inactive > 0),
        ..StateStats::default()
    };
    s.finish();
    s
}

/// The metrics of device 0 from samples and an end state given as the
/// arguments of [`sample`] and [`end_state`], with `ooms` OOM events.
fn metrics_of(
    samples: &[(u64, u64, u64, u64, u64)],
    (allocated, reserved, largest, inactive): (u64, u64, u64, u64),
    ooms: u64,
) -> DeviceMetrics {
    let samples: Vec<Sample> = samples
        .iter()
        .map(|&(a, r, l, i, g)| sample(a, r, l, i, g))
        .collect();
    let end = end_state(allocated, reserved, largest, inactive);
    DeviceMetrics::from_parts(0, &end, samples, ooms)
}

#[test]
fn peaks_come_from_the_series_and_pressure_filters_early_moments() {
    // Early moment: tiny reservation, badly fragmented (2 equal gaps) but
    // not under pressure. Peak: 100 reserved. Tightest gap under pressure: 10.
    let m = metrics_of(
        &[
            (1, 10, 2, 4, 2),
            (60, 100, 30, 40, 2),
            (80, 100, 10, 20, 2),
            (40, 60, 20, 20, 1),
        ],
        (30, 60, 30, 30),
        1,
    );
    assert_eq!(m.peak_allocated, Some(80));
    assert_eq!(m.peak_reserved, Some(100));
    assert_eq!(m.end_allocated, Some(30));
    assert_eq!(m.end_reserved, Some(60));
    assert_eq!(m.largest_gap, Some(10));
    // 1 − 10/20 at the third sample; the first sample (0.5) is ignored
    // because 10 < 100 / 2.
    assert!((m.fragmentation.unwrap() - 0.5).abs() < 1e-12);
    assert_eq!(m.free_gaps, Some(2));
    assert_eq!(m.oom_events, Some(1));
    assert_eq!(m.timeline, Timeline::Replayed { samples: 4 });
}

#[test]
fn final_state_counts_as_a_moment() {
    let end = end_state(50, 200, 100, 150);
    let m = DeviceMetrics::from_parts(3, &end, [sample(10, 20, 10, 10, 1)], 0);
    assert_eq!(m.peak_reserved, Some(200));
    assert_eq!(m.peak_allocated, Some(50));
    assert_eq!(m.largest_gap, Some(100));
    let only_end = DeviceMetrics::from_parts(3, &end, [], 0);
    assert_eq!(only_end.timeline, Timeline::FinalStateOnly);
    assert_eq!(only_end.peak_reserved, Some(200));
    assert!((only_end.fragmentation.unwrap() - (1.0 - 100.0 / 150.0)).abs() < 1e-12);
}

#[test]
fn totals_series_gives_peaks_and_ends_only() {
    let m = DeviceMetrics::from_totals(1, [(10, 20), (30, 40), (5, 40)], None);
    assert_eq!(m.peak_allocated, Some(30));
    assert_eq!(m.peak_reserved, Some(40));
    assert_eq!(m.end_allocated, Some(5));
    assert_eq!(m.fragmentation, None);
    assert_eq!(m.get(MetricId::LargestGap), None);
    let empty = DeviceMetrics::from_totals(1, std::iter::empty(), None);
    assert_eq!(empty.peak_reserved, None);
}

#[test]
fn file_figure_is_the_worst_device_and_ooms_add_up() {
    let a = DeviceMetrics::from_parts(0, &end_state(10, 100, 50, 90), [], 1);
    let b = DeviceMetrics::from_parts(1, &end_state(10, 300, 20, 90), [], 2);
    let m = Metrics {
        source: Source::Snapshot,
        devices: vec![a, b],
        notes: vec![],
        categories: None,
        trace: None,
    };
    let r = m.get(MetricId::PeakReserved).unwrap();
    assert_eq!((r.value, r.device), (Quantity::Bytes(300), Some(1)));
    let g = m.get(MetricId::LargestGap).unwrap();
    assert_eq!((g.value, g.device), (Quantity::Bytes(20), Some(1)));
    let o = m.get(MetricId::OomEvents).unwrap();
    assert_eq!((o.value, o.device), (Quantity::Count(3), None));
}

#[test]
fn category_peaks_of_an_export() {
    // Activations peak at 300 when parameters are 100; gradients (50)
    // come after the activations are gone: each category's own peak, and
    // the total's (400), which is not their sum (450).
    let t = crate::input::profiler::memtimeline::timeline_from_json(
        &serde_json::json!([
            [-1, 1, 100, 0],
            [1000, 2, 300, 4],
            [2000, 4, -300, 4],
            [3000, 2, 50, 5]
        ]),
        "x",
    )
    .unwrap();
    let m = Metrics::of_memory_timeline(&t);
    assert_eq!(m.source, Source::MemoryTimeline);
    let b = |id| m.get(id).map(|x| x.value);
    assert_eq!(b(MetricId::PeakTotal), Some(Quantity::Bytes(400)));
    assert_eq!(b(MetricId::PeakActivation), Some(Quantity::Bytes(300)));
    assert_eq!(b(MetricId::PeakGradient), Some(Quantity::Bytes(50)));
    assert_eq!(b(MetricId::PeakParameter), Some(Quantity::Bytes(100)));
    assert_eq!(b(MetricId::PeakInput), Some(Quantity::Bytes(0)));
    for id in MetricId::ALLOCATOR {
        assert_eq!(m.get(id), None, "{id:?}");
    }
    // And no category figure for a snapshot, even an empty one.
    let s = Metrics::of_snapshot(&Snapshot::default(), None).unwrap();
    for id in MetricId::CATEGORIES {
        assert_eq!(s.get(id), None, "{id:?}");
    }
    assert_eq!(
        s.get(MetricId::PeakReserved).map(|x| x.value),
        Some(Quantity::Bytes(0))
    );
    for c in crate::input::profiler::memtimeline::Category::ALL {
        assert_eq!(MetricId::peak_of(c).category(), Some(c));
    }
    assert_eq!(MetricId::PeakTotal.category(), None);
}

#[test]
fn gap_moments_answer_the_tightest_moment_with_enough_free() {
    // A full moment (nothing free, no gap), a fragmented one (16 free in
    // gaps of 8) and a roomy one; the early moment is not under pressure.
    let m = metrics_of(
        &[
            (1, 10, 1, 9, 1),
            (40, 40, 0, 0, 0),
            (24, 40, 8, 16, 2),
            (10, 40, 30, 30, 1),
        ],
        (20, 40, 20, 20),
        0,
    );
    assert_eq!(m.largest_gap, Some(0));
    let at = |n: u64| {
        m.tightest_with_free(n)
            .map(|g| (g.free, g.largest_gap, g.at))
    };
    assert_eq!(at(0), Some((0, 0, MomentAt::Start)));
    assert_eq!(at(1), Some((16, 8, MomentAt::Start)));
    assert_eq!(at(17), Some((20, 20, MomentAt::RecordedState)));
    assert_eq!(at(31), None);
    assert_eq!(m.most_free_under_pressure(), Some(30));
    // Against every moment, for a pseudo-random series.
    let mut x = 12345u64;
    let mut next = |k: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % k
    };
    let series: Vec<Sample> = (0..400)
        .map(|i| {
            let reserved = 50 + next(50);
            let free = next(reserved + 1);
            let mut s = sample(reserved - free, reserved, next(free + 1), free, 1);
            s.event = Some(i);
            s
        })
        .collect();
    let end = end_state(60, 100, 10, 40);
    let m = DeviceMetrics::from_parts(0, &end, series.iter().copied(), 0);
    let peak = m.peak_reserved.unwrap();
    for n in [0, 1, 5, 20, 40, 60, 90, 101] {
        let want = series
            .iter()
            .chain(std::iter::once(&Sample {
                reserved: Some(100),
                external_free: Some(40),
                layout: Some(LayoutFigures {
                    largest_free_gap: 10,
                    ..Default::default()
                }),
                ..Sample::default()
            }))
            .filter(|s| under_pressure(s.reserved_bytes(), peak) && s.external_bytes() >= n)
            .map(|s| s.lay().largest_free_gap)
            .min();
        assert_eq!(
            m.tightest_with_free(n).map(|g| g.largest_gap),
            want,
            "n = {n}"
        );
    }
    // Gaps ascend with free bytes.
    assert!(
        m.gap_moments
            .windows(2)
            .all(|w| w[0].free < w[1].free && w[0].largest_gap < w[1].largest_gap)
    );
}

#[test]
fn metric_keys_round_trip() {
    for m in MetricId::ALL {
        assert_eq!(MetricId::parse(m.key()), Some(m));
        let j = serde_json::to_string(&m).unwrap();
        assert_eq!(j, format!("\"{}\"", m.key()));
    }
    assert_eq!(MetricId::parse("peak"), None);
}
