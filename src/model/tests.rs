//! Unit tests of the model: trace events, interned names and actions.

use super::*;

fn bare() -> TraceEvent {
    TraceEvent::new(Action::Alloc, 0x7f00_0000_0000, 512, -3, StackId(2))
}

#[test]
fn an_event_without_optional_fields_reads_back_none() {
    let e = bare();
    assert_eq!(
        (e.action, e.addr, e.size, e.stream, e.frames),
        (Action::Alloc, 0x7f00_0000_0000, 512, -3, StackId(2))
    );
    assert_eq!(e.time_us(), None);
    assert_eq!(e.device_free(), None);
    assert_eq!(e.compile_context(), None);
    assert_eq!(e.user_metadata(), None);
    assert_eq!(e.category(), None);
    assert_eq!(e.pool(), None);
    assert_eq!(e.canonical_error(), None);
}

#[test]
fn each_optional_field_reads_back_exactly_at_its_extremes() {
    for t in [i64::MIN, -1, 0, 1, i64::MAX] {
        let e = bare().with_time_us(Some(t));
        assert_eq!(e.time_us(), Some(t));
        assert_eq!(e.device_free(), None, "time_us {t} leaks into device_free");
    }
    for f in [0, 1, u64::MAX - 1, u64::MAX] {
        let e = bare().with_device_free(Some(f));
        assert_eq!(e.device_free(), Some(f));
        assert_eq!(e.time_us(), None, "device_free {f} leaks into time_us");
    }
    for id in [0, 1, u32::MAX - 1] {
        let s = Some(StrId(id));
        let e = bare().with_compile_context(s);
        assert_eq!(
            (e.compile_context(), e.user_metadata(), e.category()),
            (s, None, None)
        );
        let e = bare().with_user_metadata(s);
        assert_eq!(
            (e.compile_context(), e.user_metadata(), e.category()),
            (None, s, None)
        );
        let e = bare().with_category(s);
        assert_eq!(
            (e.compile_context(), e.user_metadata(), e.category()),
            (None, None, s)
        );
        let e = bare().with_pool(Some(PoolIdx(id)));
        assert_eq!(e.pool(), Some(PoolIdx(id)));
    }
    let all = bare()
        .with_time_us(Some(i64::MIN))
        .with_device_free(Some(u64::MAX))
        .with_compile_context(Some(StrId(1)))
        .with_user_metadata(Some(StrId(2)))
        .with_category(Some(StrId(3)))
        .with_pool(Some(PoolIdx(4)));
    assert_eq!(all.time_us(), Some(i64::MIN));
    assert_eq!(all.device_free(), Some(u64::MAX));
    assert_eq!(
        (all.compile_context(), all.user_metadata(), all.category()),
        (Some(StrId(1)), Some(StrId(2)), Some(StrId(3)))
    );
    assert_eq!(all.pool(), Some(PoolIdx(4)));
    assert_eq!(all.canonical_error(), None);
}

#[test]
fn clearing_every_field_gives_back_the_bare_event() {
    let mut e = bare()
        .with_time_us(Some(-5))
        .with_device_free(Some(7))
        .with_compile_context(Some(StrId(1)))
        .with_user_metadata(Some(StrId(2)))
        .with_category(Some(StrId(3)))
        .with_pool(Some(PoolIdx(0)));
    assert_ne!(e, bare());
    e.set_time_us(None);
    e.set_device_free(None);
    e.set_compile_context(None);
    e.set_user_metadata(None);
    e.set_category(None);
    e.set_pool(None);
    assert_eq!(e, bare());
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
    let mut snap = Snapshot::default();
    i.finish(&mut snap);
    assert_eq!(snap.pools, vec![(1, 5), (0, 0)]);
    assert_eq!((x.name(&snap), y.name(&snap)), ("mystery", "enigma"));
    let e = TraceEvent::new(x, 0, 0, 0, StackId::EMPTY).with_pool(Some(b));
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
