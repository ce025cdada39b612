//! Unit tests of the model: trace events, interned names and actions.

use super::*;

fn bare() -> TraceEvent {
    TraceEvent::new(
        Action::Alloc,
        0x7f00_0000_0000,
        512,
        StreamIdx(3),
        StackId(2),
    )
}

#[test]
fn an_event_without_optional_fields_reads_back_none() {
    let e = bare();
    assert_eq!(
        (e.action, e.addr(), e.size, e.stream, e.frames),
        (
            Action::Alloc,
            0x7f00_0000_0000,
            512,
            StreamIdx(3),
            StackId(2)
        )
    );
    assert_eq!(e.time_us(), None);
    assert_eq!(e.extras(), None);
    assert_eq!(Snapshot::default().extras(&e), EventExtras::NONE);
    assert_eq!(e.canonical_error(&EventExtras::NONE), None);
}

#[test]
fn each_optional_field_reads_back_exactly_at_its_extremes() {
    for t in [i64::MIN, -1, 0, 1, i64::MAX] {
        let e = bare().with_time_us(Some(t));
        assert_eq!(e.time_us(), Some(t));
        assert_eq!(e.extras(), None, "time_us {t} leaks into the extras");
    }
    for id in [0, 1, u32::MAX - 1] {
        let e = bare().with_extras(Some(ExtrasIdx(id)));
        assert_eq!(e.extras(), Some(ExtrasIdx(id)));
        assert_eq!(e.time_us(), None, "extras {id} leak into time_us");
    }
    let all = bare()
        .with_time_us(Some(i64::MIN))
        .with_extras(Some(ExtrasIdx(4)));
    assert_eq!(all.time_us(), Some(i64::MIN));
    assert_eq!(all.extras(), Some(ExtrasIdx(4)));
    assert_eq!(all.canonical_error(&EventExtras::NONE), None);
}

/// PyTorch writes an `oom` with `device_free` and no address; the event
/// holds it in the address's place, so a trace of many OOMs, each with its
/// own figure, interns no combination of extras for them.
#[test]
fn an_oom_without_an_address_holds_its_device_free() {
    let free = |v| EventExtras {
        device_free: Some(v),
        ..EventExtras::NONE
    };
    let mut i = Interner::new();
    let mut oom = TraceEvent::new(Action::Oom, 0, 1 << 30, StreamIdx::DEFAULT, StackId::EMPTY);
    for v in [0, 1, u64::MAX] {
        let mut e = oom.clone();
        i.event_extras(&mut e, free(v)).unwrap();
        assert_eq!(
            (e.held_device_free(), e.addr(), e.extras()),
            (Some(v), 0, None)
        );
        assert_eq!(e.canonical_error(&EventExtras::NONE), None);
        // The same event with its device_free apart is not canonical.
        assert!(oom.clone().canonical_error(&free(v)).is_some());
    }
    // Held with other extras: those alone are interned.
    let cat = i.string("activation").unwrap();
    i.event_extras(
        &mut oom,
        EventExtras {
            category: Some(cat),
            ..free(5)
        },
    )
    .unwrap();
    assert_eq!(oom.held_device_free(), Some(5));
    let mut snap = Snapshot::default();
    i.finish(&mut snap);
    assert_eq!(
        snap.event_extras,
        [EventExtras {
            category: Some(cat),
            ..EventExtras::NONE
        }]
    );
    assert_eq!(snap.device_free(&oom), Some(5));
    // Where the event cannot hold it (another action, or an `oom` with an
    // address), device_free stays in the extras, and is canonical there.
    for e in [
        TraceEvent::new(Action::Alloc, 0, 512, StreamIdx::DEFAULT, StackId::EMPTY),
        TraceEvent::new(Action::Oom, 0x7f00, 512, StreamIdx::DEFAULT, StackId::EMPTY),
    ] {
        let mut x = free(7);
        let mut held = e.clone();
        held.hold_device_free(&mut x);
        assert_eq!((held.held_device_free(), x.device_free), (None, Some(7)));
        assert_eq!(held, e);
        assert_eq!(e.canonical_error(&free(7)), None);
    }
    // A held device_free on an event that is not an oom is refused.
    let mut moved = TraceEvent::new(Action::Oom, 0, 512, StreamIdx::DEFAULT, StackId::EMPTY);
    moved.hold_device_free(&mut free(3));
    moved.action = Action::Alloc;
    assert!(moved.canonical_error(&EventExtras::NONE).is_some());
}

#[test]
fn an_event_is_small() {
    assert_eq!(std::mem::size_of::<TraceEvent>(), 40);
}

#[test]
fn clearing_every_field_gives_back_the_bare_event() {
    let mut e = bare()
        .with_time_us(Some(-5))
        .with_extras(Some(ExtrasIdx(0)));
    assert_ne!(e, bare());
    e.set_time_us(None);
    e.set_extras(None);
    assert_eq!(e, bare());
}

#[test]
fn extras_are_interned_once_in_order_and_none_needs_no_entry() {
    let mut i = Interner::new();
    assert_eq!(i.extras(EventExtras::NONE).unwrap(), None);
    let every = [
        EventExtras {
            device_free: Some(u64::MAX),
            ..EventExtras::NONE
        },
        EventExtras {
            device_free: Some(0),
            ..EventExtras::NONE
        },
        EventExtras {
            compile_context: Some(StrId(1)),
            ..EventExtras::NONE
        },
        EventExtras {
            user_metadata: Some(StrId(1)),
            ..EventExtras::NONE
        },
        EventExtras {
            category: Some(StrId(1)),
            ..EventExtras::NONE
        },
        EventExtras {
            pool: Some(PoolIdx(0)),
            ..EventExtras::NONE
        },
        EventExtras {
            device_free: Some(7),
            compile_context: Some(StrId(1)),
            user_metadata: Some(StrId(2)),
            category: Some(StrId(3)),
            pool: Some(PoolIdx(0)),
        },
    ];
    for (k, x) in every.iter().enumerate() {
        assert_eq!(i.extras(*x).unwrap(), Some(ExtrasIdx(k as u32)));
    }
    // Each again: the same index, nothing added.
    for (k, x) in every.iter().enumerate() {
        assert_eq!(i.extras(*x).unwrap(), Some(ExtrasIdx(k as u32)));
    }
    i.pool((3, 4)).unwrap();
    let mut snap = Snapshot::default();
    i.finish(&mut snap);
    assert_eq!(snap.event_extras, every.to_vec());
    for (k, x) in every.iter().enumerate() {
        let e = bare().with_extras(Some(ExtrasIdx(k as u32)));
        assert_eq!(snap.extras(&e), *x);
        let pool = x.pool.map(|_| (3, 4));
        assert_eq!(snap.pool_of(&e), pool);
    }
    // A tool adding to a snapshot's tables finds the same indexes.
    let mut again = Interner::from_snapshot(&snap);
    assert_eq!(again.extras(every[6]).unwrap(), Some(ExtrasIdx(6)));
}

#[test]
fn pools_and_unknown_actions_are_interned_once_in_order() {
    let mut i = Interner::new();
    let a = i.pool((1, 5)).unwrap();
    let b = i.pool((0, 0)).unwrap();
    assert_eq!(
        (a, b, i.pool((1, 5)).unwrap()),
        (PoolIdx(0), PoolIdx(1), PoolIdx(0))
    );
    let x = i.action("mystery").unwrap();
    let y = i.action("enigma").unwrap();
    assert_eq!(i.action("alloc").unwrap(), Action::Alloc);
    assert_eq!(i.action("mystery").unwrap(), x);
    assert_ne!(x, y);
    let in_b = i
        .extras(EventExtras {
            pool: Some(b),
            ..EventExtras::NONE
        })
        .unwrap();
    let mut snap = Snapshot::default();
    i.finish(&mut snap);
    assert_eq!(snap.pools, vec![(1, 5), (0, 0)]);
    assert_eq!((x.name(&snap), y.name(&snap)), ("mystery", "enigma"));
    let e = TraceEvent::new(x, 0, 0, StreamIdx::DEFAULT, StackId::EMPTY).with_extras(in_b);
    assert_eq!(snap.pool_of(&e), Some((0, 0)));
    assert_eq!(snap.pool_of(&bare()), None);
}

#[test]
fn unknown_actions_past_the_limit_are_refused() {
    let mut i = Interner::new();
    for k in 0..ActionName::MAX {
        i.action(&format!("a{k}")).unwrap();
    }
    let e = i.action("one-too-many").unwrap_err();
    assert_eq!(
        e.to_string(),
        "more than 65536 distinct unknown trace actions in one snapshot"
    );
    // A known action and an unknown one already numbered still resolve.
    assert_eq!(i.action("free_completed").unwrap(), Action::FreeCompleted);
    assert_eq!(i.action("a7").unwrap(), Action::Other(ActionName::new(7)));
}
