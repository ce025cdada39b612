//! What the what-if model's runs say about the recorded OOM, in brief: the
//! one answer the report's verdict, its HTML and its Markdown give about
//! `expandable_segments:True` (worded by `render::simulate`).

use crate::sim::SimReport;

/// The configuration the one-line answer is about.
pub const EXPANDABLE: &str = "expandable_segments:True";

/// Would `expandable_segments:True` have avoided the recorded OOM, in the
/// model (or what it does to the peak without one).
#[derive(Debug, Clone, PartialEq)]
pub enum ExpandableAnswer {
    /// The recording already ran with it, and recorded no OOM.
    AlreadyOn,
    /// It was already on when the OOM was recorded.
    AlreadyOnAtOom,
    /// No OOM was recorded: the peaks reserved with it and under the
    /// recorded settings; `inherited`, when both start from the reserved
    /// bytes inherited from before the trace (which hold the peak of the
    /// whole run), and the peaks are those during the trace.
    NoOom {
        expandable: u64,
        recorded: u64,
        inherited: Option<u64>,
    },
    NotAvoided,
    /// Avoided, but another allocation fails at `event`.
    AvoidedButFailsAt {
        event: usize,
    },
    /// Avoided: the peak reserved, and the peak during the trace when the
    /// start inherited from before the trace holds the peak.
    Avoided {
        peak: u64,
        in_trace: Option<u64>,
    },
}

/// The answer of `r` (`None` when the run did not try the setting).
pub fn expandable_answer(r: &SimReport) -> Option<ExpandableAnswer> {
    let recorded = r.results.first()?;
    if r.recorded_config.contains(EXPANDABLE) {
        return Some(if r.recorded_ooms.is_empty() {
            ExpandableAnswer::AlreadyOn
        } else {
            ExpandableAnswer::AlreadyOnAtOom
        });
    }
    let es = r.results[1..].iter().find(|s| s.config == EXPANDABLE)?;
    let in_trace = (es.start_holds_peak() || recorded.start_holds_peak())
        .then(|| {
            es.peak_reserved_in_trace
                .zip(recorded.peak_reserved_in_trace)
        })
        .flatten();
    Some(if r.recorded_ooms.is_empty() {
        match in_trace {
            Some((e, rec)) => ExpandableAnswer::NoOom {
                expandable: e,
                recorded: rec,
                inherited: Some(es.start_reserved),
            },
            None => ExpandableAnswer::NoOom {
                expandable: es.peak_reserved,
                recorded: recorded.peak_reserved,
                inherited: None,
            },
        }
    } else if es.recorded_ooms_avoided < es.recorded_ooms {
        ExpandableAnswer::NotAvoided
    } else if let Some(event) = es.first_oom_event {
        ExpandableAnswer::AvoidedButFailsAt { event }
    } else {
        ExpandableAnswer::Avoided {
            peak: es.peak_reserved,
            in_trace: in_trace.map(|(e, _)| e),
        }
    })
}
