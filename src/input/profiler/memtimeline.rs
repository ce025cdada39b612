//! `torch.profiler`'s `export_memory_timeline` files: live tensor bytes of
//! one device by memory-profiler category over time.
//!
//! Two JSON forms exist. The raw one (`.raw.json.gz`) is a list of
//! `[t_ns, action, bytes, category]` rows (action 1 PREEXISTING, 2 CREATE,
//! 3 INCREMENT_VERSION as a −old/+new pair, 4 DESTROY; `t_ns = -1` for tensors
//! that existed before profiling). The coalesced one (`.json`) is
//! `[times_us, sizes]` with `sizes[i]` = 9 cumulative byte counts, index 0
//! unused. Both become the same series: one [`CategorySample`] per distinct
//! microsecond, as PyTorch's own coalescing does, so the peak of a raw file
//! equals the peak of its coalesced export.
//!
//! Figures are tensor bytes as the memory profiler sees them (unrounded, no
//! allocator cache): there is no reserved memory and no layout here.

use super::Anomalies;
use crate::input::LoadError;
pub use crate::model::memtimeline::*;
use serde_json::Value;

fn is_int(v: &Value) -> bool {
    v.as_i64().is_some()
}

fn is_raw_row(v: &Value) -> bool {
    v.as_array()
        .is_some_and(|r| r.len() == 4 && r.iter().all(is_int))
}

/// Either form, judged from its first entries.
pub fn is_memory_timeline(v: &Value) -> bool {
    let Some(a) = v.as_array() else { return false };
    if a.is_empty() {
        return false;
    }
    if a.iter().take(16).all(is_raw_row) {
        return true;
    }
    if a.len() == 2
        && let (Some(times), Some(sizes)) = (a[0].as_array(), a[1].as_array())
    {
        return times.len() == sizes.len()
            && times.iter().take(16).all(|t| t.is_number())
            && sizes.iter().take(16).all(|s| {
                s.as_array()
                    .is_some_and(|r| r.len() == 9 && r.iter().all(is_int))
            });
    }
    false
}

pub fn timeline_from_json(v: &Value, name: &str) -> Result<MemoryTimeline, LoadError> {
    if !is_memory_timeline(v) {
        return Err(LoadError::Format {
            file: name.into(),
            msg: "not a memory-timeline export".into(),
        });
    }
    let a = v.as_array().expect("checked");
    if a.iter().take(16).all(is_raw_row) {
        let mut rows = RawRows::default();
        for r in a {
            rows.push(raw_row(r));
        }
        return Ok(rows.finish());
    }
    let (times, sizes) = (a[0].as_array(), a[1].as_array());
    let mut steps = CoalescedSteps::default();
    for (t, s) in times.expect("checked").iter().zip(sizes.expect("checked")) {
        steps.push(t.as_f64(), sizes_row(s));
    }
    Ok(steps.finish())
}

/// A row of a raw export: four integers.
fn raw_row(r: &Value) -> Option<[i64; 4]> {
    let r = r.as_array().filter(|r| r.len() == 4)?;
    Some([
        r[0].as_i64()?,
        r[1].as_i64()?,
        r[2].as_i64()?,
        r[3].as_i64()?,
    ])
}

/// A `sizes` entry of a coalesced export: nine integers.
fn sizes_row(s: &Value) -> Option<[i64; 9]> {
    let s = s.as_array().filter(|s| s.len() == 9)?;
    let mut row = [0; 9];
    for (x, v) in row.iter_mut().zip(s) {
        *x = v.as_i64()?;
    }
    Some(row)
}

fn peak(samples: &CategorySeries) -> Option<CategoryPeak> {
    let mut best: Option<(usize, CategorySample)> = None;
    for (i, s) in samples.iter().enumerate() {
        if best.is_none_or(|(_, b)| s.total() > b.total()) {
            best = Some((i, s));
        }
    }
    best.map(|(i, s)| CategoryPeak {
        sample: i,
        time_us: s.time_us,
        total: s.total(),
        bytes: s.bytes,
    })
}

/// A raw export read row by row (`[t_ns, action, bytes, category]`, or
/// `None` for a row that is not four integers), in file order.
#[derive(Default)]
pub struct RawRows {
    an: Anomalies,
    actions: ActionCounts,
    rows: usize,
    /// Per row kept: its microsecond plus one (0 before profiling) shifted
    /// left by 3, its category in the low 3 bits; and its bytes.
    parsed: Vec<(u64, i64)>,
}

impl RawRows {
    /// The next row.
    pub fn push(&mut self, row: Option<[i64; 4]>) {
        let i = self.rows;
        self.rows += 1;
        let an = &mut self.an;
        let Some([t, action, bytes, cat]) = row else {
            an.add("row that is not four integers", || format!("[{i}]"));
            return;
        };
        match action {
            1 => self.actions.preexisting += 1,
            2 => self.actions.create += 1,
            3 => self.actions.increment_version += 1,
            4 => self.actions.destroy += 1,
            _ => an.add("unknown action", || format!("[{i}][1] = {action}")),
        }
        let cat = if (0..8).contains(&cat) {
            cat as u64
        } else {
            an.add("unknown category (counted as unknown)", || {
                format!("[{i}][3] = {cat}")
            });
            7
        };
        // PyTorch converts ns to µs with int(t / 1000) before coalescing:
        // below 2^54, so the key fits.
        let time = if t < 0 { 0 } else { (t / 1000) as u64 + 1 };
        self.parsed.push(((time << 3) | cat, bytes));
    }

    /// The timeline: one sample per distinct microsecond.
    pub fn finish(self) -> MemoryTimeline {
        let RawRows {
            mut an,
            actions,
            rows,
            mut parsed,
        } = self;
        // Pre-existing rows first, then time order. The rows of one
        // microsecond are summed before its sample is taken, so their order
        // among themselves does not matter.
        parsed.sort_unstable_by_key(|p| p.0 >> 3);
        let mut live = [0i128; 8];
        let mut samples = CategorySeries::new();
        let mut i = 0;
        while i < parsed.len() {
            let key = parsed[i].0 >> 3;
            while i < parsed.len() && parsed[i].0 >> 3 == key {
                live[(parsed[i].0 & 7) as usize] += parsed[i].1 as i128;
                i += 1;
            }
            let t = key.checked_sub(1).map(|t| t as i64);
            samples.push(sample(&live, t, &mut an));
        }
        drop(parsed);
        MemoryTimeline {
            actions: Some(actions),
            ..timeline(TimelineForm::Raw, rows, samples, an)
        }
    }
}

/// A coalesced export read step by step: each time (`None` when it is not
/// a number) with its `sizes` entry (`None` when it is not nine integers).
#[derive(Default)]
pub struct CoalescedSteps {
    an: Anomalies,
    steps: usize,
    samples: CategorySeries,
}

impl CoalescedSteps {
    /// The next step.
    pub fn push(&mut self, time: Option<f64>, sizes: Option<[i64; 9]>) {
        let i = self.steps;
        self.steps += 1;
        let Some(row) = sizes else {
            self.an.add("sizes entry that is not nine integers", || {
                format!("[1][{i}]")
            });
            return;
        };
        let Some(t) = time.filter(|t| t.is_finite()) else {
            self.an
                .add("time that is not a number", || format!("[0][{i}]"));
            return;
        };
        let mut live = [0i128; 8];
        for k in 0..8 {
            live[k] = row[k + 1] as i128;
        }
        let s = sample(&live, Some(t as i64), &mut self.an);
        self.samples.push(s);
    }

    pub fn finish(self) -> MemoryTimeline {
        timeline(TimelineForm::Coalesced, self.steps, self.samples, self.an)
    }
}

/// A timeline of `form` read from `rows` rows, with its peak.
fn timeline(
    form: TimelineForm,
    rows: usize,
    samples: CategorySeries,
    an: Anomalies,
) -> MemoryTimeline {
    MemoryTimeline {
        form: Some(form),
        rows: rows as u64,
        peak: peak(&samples),
        samples,
        actions: None,
        anomalies: an.into_vec(),
    }
}

/// The sample at `t` of the live bytes per category, a negative count
/// shown as 0 (and noted).
fn sample(live: &[i128; 8], t: Option<i64>, an: &mut Anomalies) -> CategorySample {
    let mut out = [0u64; 8];
    for (k, &x) in live.iter().enumerate() {
        if x < 0 {
            an.add("live bytes of a category below zero (shown as 0)", || {
                format!(
                    "{} at t = {} µs: {x} bytes",
                    Category::ALL[k].as_str(),
                    t.map(|t| t.to_string())
                        .unwrap_or_else(|| "before profiling".into())
                )
            });
        }
        out[k] = x.clamp(0, u64::MAX as i128) as u64;
    }
    CategorySample {
        time_us: t,
        bytes: out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn raw_rows_coalesce_per_microsecond() {
        let v = json!([
            [-1, 1, 100, 0],
            [5_000, 2, 40, 4],
            [5_400, 2, 10, 3],
            [6_000, 3, -100, 0],
            [6_000, 3, 100, 1],
            [7_000, 4, -40, 4],
        ]);
        assert!(is_memory_timeline(&v));
        let t = timeline_from_json(&v, "x").unwrap();
        assert_eq!(t.form, Some(TimelineForm::Raw));
        assert_eq!(t.samples.len(), 4);
        assert_eq!(t.preexisting().unwrap().total(), 100);
        // 5_000 ns and 5_400 ns are the same microsecond.
        assert_eq!(t.samples.at(1).time_us, Some(5));
        assert_eq!(t.samples.at(1).get(Category::Activation), 40);
        assert_eq!(t.samples.at(1).get(Category::Temporary), 10);
        let p = t.peak.unwrap();
        assert_eq!((p.total, p.sample), (150, 1));
        assert_eq!(t.samples.at(2).get(Category::OptimizerState), 100);
        assert_eq!(t.samples.at(2).get(Category::Parameter), 0);
        assert_eq!(t.end().unwrap().total(), 110);
        assert_eq!(t.actions.unwrap().increment_version, 2);
        assert!(t.anomalies.is_empty());
    }

    #[test]
    fn coalesced_form() {
        let v = json!([
            [10, 20, 30],
            [
                [0, 5, 0, 0, 0, 0, 0, 0, 0],
                [0, 5, 0, 0, 0, 7, 0, 0, 0],
                [0, 5, 0, 0, 0, 0, 3, 0, 1]
            ]
        ]);
        assert!(is_memory_timeline(&v));
        let t = timeline_from_json(&v, "x").unwrap();
        assert_eq!(t.form, Some(TimelineForm::Coalesced));
        let p = t.peak.unwrap();
        assert_eq!((p.total, p.time_us), (12, Some(20)));
        assert_eq!(t.end().unwrap().get(Category::Unknown), 1);
        assert_eq!(t.end().unwrap().get(Category::Gradient), 3);
    }

    #[test]
    fn category_keys_round_trip_and_match_the_json() {
        for c in Category::ALL {
            assert_eq!(Category::parse(c.key()), Some(c));
            assert_eq!(
                serde_json::to_string(&c).unwrap(),
                format!("\"{}\"", c.key())
            );
        }
        assert_eq!(Category::parse("activations"), None);
    }

    #[test]
    fn negative_live_bytes_are_an_anomaly_not_an_abort() {
        let v = json!([[1000, 4, -8, 3]]);
        let t = timeline_from_json(&v, "x").unwrap();
        assert_eq!(t.samples.at(0).total(), 0);
        assert_eq!(t.anomalies.len(), 1);
    }

    #[test]
    fn snapshot_lists_are_not_timelines() {
        assert!(!is_memory_timeline(&json!([])));
        assert!(!is_memory_timeline(&json!([{"address": 0}])));
        assert!(!is_memory_timeline(&json!([[1, 2, 3]])));
    }
}
