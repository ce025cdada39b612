//! Where a series' key moments fall ([`KeyMomentsAt`]), each one's sample
//! read from the series only when it is asked for.

use super::{KeyMoment, KeyMomentsFold, RECORDED_STATE, Series};

/// Where the [`key_moments`] of a series fall, without their samples: each
/// is read from the series when it is asked for. A trace may hold an OOM at
/// most events; a list of whole samples would then outgrow the series.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyMomentsAt {
    /// The start and the series' extremes (or the recorded state alone):
    /// label and event.
    head: Vec<(&'static str, Option<usize>)>,
    /// The event after which each OOM met the state, in order.
    ooms: Vec<Option<usize>>,
    /// The end's event; `None` for the recorded state alone.
    end: Option<Option<usize>>,
}

impl KeyMomentsAt {
    pub(super) fn new(
        samples: &Series,
        f: &KeyMomentsFold,
        ooms: impl IntoIterator<Item = Option<usize>>,
    ) -> KeyMomentsAt {
        let layout = f.layout();
        if layout && samples.len() == 1 {
            return KeyMomentsAt {
                head: vec![(RECORDED_STATE, None)],
                ooms: Vec::new(),
                end: None,
            };
        }
        let mut head = vec![("start", None)];
        let x = f.extremes();
        let mut peaks = vec![
            ("peak allocated", x.peak_allocated),
            ("peak reserved", x.peak_reserved),
        ];
        if layout {
            peaks.push(("max fragmentation", x.max_fragmentation));
            peaks.push(("min largest gap", x.min_largest_gap));
        } else {
            peaks.push(("peak free external", x.peak_external));
        }
        for (label, i) in peaks {
            if let Some(i) = i {
                head.push((label, samples.at(i).event.map(|e| e as usize)));
            }
        }
        let events = samples.len().saturating_sub(1);
        KeyMomentsAt {
            head,
            ooms: ooms.into_iter().collect(),
            end: Some(events.checked_sub(1)),
        }
    }

    /// The OOMs among the moments.
    pub fn ooms(&self) -> usize {
        self.ooms.len()
    }

    /// Each moment in order, its sample read from `samples` (the series
    /// they were found in) as it comes.
    pub fn iter<'a>(
        &'a self,
        samples: &'a Series,
    ) -> impl ExactSizeIterator<Item = KeyMoment> + 'a {
        self.iter_first(samples, usize::MAX)
    }

    /// [`KeyMomentsAt::iter`] with only the first `max_ooms` OOMs.
    pub fn iter_first<'a>(
        &'a self,
        samples: &'a Series,
        max_ooms: usize,
    ) -> impl ExactSizeIterator<Item = KeyMoment> + 'a {
        let ooms = self.ooms.len().min(max_ooms);
        let n = self.head.len() + ooms + usize::from(self.end.is_some());
        (0..n).map(move |i| {
            let (label, at) = match i.checked_sub(self.head.len()) {
                None => (self.head[i].0.to_string(), self.head[i].1),
                Some(k) if k < ooms => (format!("oom #{}", k + 1), self.ooms[k]),
                Some(_) => ("end".to_string(), self.end.flatten()),
            };
            KeyMoment {
                label,
                at,
                sample: samples.after(at),
                op: None,
            }
        })
    }
}
