//! What naming a moment by an event index or a time takes, for a
//! replayed snapshot (`DeviceReplay::resolve`) and a profiler trace
//! (`trace::resolve`) alike.

/// Event `k` of `n` (`Moment::Event`), or the error `past_end` words.
pub(crate) fn event_index(
    k: usize,
    n: usize,
    past_end: impl FnOnce() -> String,
) -> Result<Option<usize>, String> {
    if k >= n { Err(past_end()) } else { Ok(Some(k)) }
}

/// The last event dated at or before `t` (`Moment::TimeUs`; an undated
/// event counts as before it), `None` when the first is later.
pub(crate) fn last_at_or_before(times: impl Iterator<Item = Option<i64>>, t: i64) -> Option<usize> {
    let mut found = None;
    for (i, et) in times.enumerate() {
        match et {
            Some(et) if et > t => break,
            _ => found = Some(i),
        }
    }
    found
}
