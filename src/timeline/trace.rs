//! A profiler trace device's events → its [`Series`]: the same [`Sample`]s
//! a replayed snapshot has, with the figures a trace cannot give left
//! `None` (no [`Sample::layout`]; no reserved figure before the first
//! event, for CPU memory or in the 2021 schema).

use super::resolve::{event_index, last_at_or_before};
use super::{KeyMoment, Sample, Series, key_moments};
use crate::model::Moment;
use crate::model::profiler::{TraceDevice, time_of};

/// `samples[0]` is the start (the bytes allocated before the trace, dated
/// at the first event), `samples[i + 1]` the state after event `i`.
pub fn trace_series(d: &TraceDevice) -> Series {
    let mut v = Vec::with_capacity(d.events.len() + 1);
    let start = d.summary.allocated_before_trace;
    v.push(Sample {
        event: None,
        time_us: d.events.first().map(|e| time_of(e.ts_us)),
        allocated: start,
        active: start,
        ..Default::default()
    });
    for (i, (e, x)) in d.events.iter().zip(d.totals()).enumerate() {
        v.push(Sample {
            event: Some(i as u32),
            time_us: Some(time_of(e.ts_us)),
            allocated: x.allocated,
            active: x.allocated,
            reserved: x.reserved,
            external_free: x.external_free(),
            layout: None,
        });
    }
    Series::plain(v)
}

/// The key moments of a trace device ([`super::key_moments`] of its
/// series): each OOM met the state after the last memory event recorded
/// before it; a moment names the operator running at its event.
pub fn trace_key_moments(d: &TraceDevice, names: &[String], samples: &Series) -> Vec<KeyMoment> {
    let ooms = d
        .ooms
        .iter()
        .map(|o| d.events.iter().rposition(|e| e.ts_us <= o.ts_us));
    key_moments(samples, ooms, |i| {
        d.events[i].op.map(|o| names[o as usize].clone())
    })
}

/// The event a moment names on a trace device (`None` = before the first
/// event), or why this trace cannot name it.
pub fn resolve(d: &TraceDevice, m: Moment) -> Result<Option<usize>, String> {
    let n = d.events.len();
    Ok(match m {
        Moment::Start => None,
        Moment::End => n.checked_sub(1),
        Moment::Event(k) => event_index(k, n, || {
            format!("event {k} is past the end of the memory events ({n}, numbered from 0)")
        })?,
        Moment::TimeUs(t) => last_at_or_before(d.events.iter().map(|e| Some(time_of(e.ts_us))), t),
        Moment::PeakAllocated => d
            .summary
            .peak_allocated
            .as_ref()
            .and_then(|p| p.event.map(|e| e as usize)),
        Moment::PeakReserved => match &d.summary.peak_reserved {
            Some(p) => p.event.map(|e| e as usize),
            None => {
                return Err("reserved memory is not recorded (CPU memory, or the 2021 schema with only Bytes)".to_string());
            }
        },
        Moment::MaxFragmentation | Moment::MinLargestGap => {
            return Err(
                "not measurable for a profiler trace: fragmentation and the largest free gap need the segment layout, which a trace does not record".into(),
            );
        }
        Moment::Oom(k) => match d.ooms.get(k) {
            // The state the failure met: after the last memory event
            // recorded before it.
            Some(o) => d.events.iter().rposition(|e| e.ts_us <= o.ts_us),
            None => {
                return Err(format!(
                    "{} out-of-memory event(s) recorded; oom:{} does not exist",
                    d.ooms.len(),
                    k + 1
                ));
            }
        },
    })
}
