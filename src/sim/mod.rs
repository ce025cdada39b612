//! What-if allocator replay: a model of PyTorch's CUDA caching allocator
//! (§4 of the format spec) fed with a recorded request stream, so other
//! settings (`expandable_segments`, `max_split_size_mb`,
//! `roundup_power2_divisions` …) can be tried on the same program.
//!
//! Owns the policy (`policy`), the configuration syntax (`config`), the
//! allocator model (`allocator`), reading traces into requests (`trace`),
//! running and summing up (`run`) and the comparison with the recording
//! (`fidelity`). Does no I/O and no formatting: `cli::simulate` and
//! `render::simulate` present what [`simulate_device`] returns.
//!
//! It is a model: new segments get the model's own addresses, and the
//! start state is the replay stage's reconstruction (see
//! [`trace::start_state`]), whose blocks older than the trace have inferred
//! sizes.

pub mod allocator;
pub mod config;
pub mod fidelity;
pub mod keys;
mod nearpeak;
pub mod plan;
pub mod run;
pub mod series;
pub mod trace;

pub use allocator::{
    AddressOrder, Counters, Figures, OomInfo, SimAction, SimError, SimEvent, Simulator, Slot,
};
pub use config::{ConfigError, SimConfig};
pub use fidelity::Fidelity;
pub use run::{
    CapacitySource, DeviceInput, OomDemand, RecordedOoms, Requests, ReservedError, SimRun, Step,
    Summary,
};
pub use trace::{
    Request, StartState, TracedRequest, start_state, start_state_from, start_state_unreported,
};

use serde::Serialize;

/// `fragscope simulate`'s default sweep, each from PyTorch's defaults.
pub const DEFAULT_SWEEP: &[&str] = &[
    "",
    "expandable_segments:True",
    "max_split_size_mb:64",
    "max_split_size_mb:128",
    "max_split_size_mb:256",
    "max_split_size_mb:512",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:8",
    "roundup_power2_divisions:16",
];

/// The default sweep without the configurations equal to `recorded`.
pub fn default_sweep(recorded: &SimConfig) -> Vec<SimConfig> {
    DEFAULT_SWEEP
        .iter()
        .map(|s| SimConfig::parse(s).expect("built-in configurations parse"))
        .filter(|c| c != recorded)
        .collect()
}

/// One reserved-bytes curve for a chart.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    /// (trace event index, reserved bytes); the min/max of each bucket when
    /// downsampled, so peaks survive.
    pub points: Vec<(u32, u64)>,
}

/// Everything `simulate` reports for one device.
#[derive(Serialize, Debug, Clone)]
pub struct SimReport {
    pub schema: &'static str,
    pub device: i64,
    pub events: usize,
    pub allocations: usize,
    pub model: &'static str,
    pub capacity: Option<u64>,
    pub capacity_source: CapacitySource,
    pub recorded_config: String,
    pub settings_recorded: bool,
    pub start_exact: bool,
    pub frees_of_older_blocks: u64,
    /// The run under the recorded settings against the recording.
    pub fidelity: Fidelity,
    /// Peak requested bytes held by the program: the perfect-packing floor.
    pub floor_peak_requested: u64,
    /// Highest recorded reserved bytes, the start included.
    pub recorded_peak_reserved: u64,
    /// Recorded reserved bytes at the start, inherited from before the
    /// trace (rebuilt from the final state backwards).
    pub recorded_start_reserved: u64,
    /// Highest recorded reserved bytes after a trace event, the start left
    /// out (`None` for an empty trace).
    pub recorded_peak_reserved_in_trace: Option<u64>,
    pub recorded_end_reserved: u64,
    /// The recorded `oom` events, with what the program held and asked
    /// for at each (`recorded_ooms` and `oom_demand` in the JSON form).
    #[serde(flatten)]
    pub recorded_ooms: RecordedOoms,
    /// First the recorded settings, then each configuration tried.
    pub results: Vec<Summary>,
    /// The recording first, then one per result.
    pub series: Vec<Series>,
    pub notes: Vec<String>,
}

impl SimReport {
    /// The recording's inherited start holds its peak (see
    /// [`Summary::start_holds_peak`]).
    pub fn recorded_start_holds_peak(&self) -> bool {
        self.recorded_peak_reserved_in_trace
            .is_some_and(|p| p < self.recorded_peak_reserved)
    }

    /// The start holds the peak of the recording or of any run: then a
    /// peak over the whole run compares the start with itself, and the
    /// peaks during the trace are the figures to compare.
    pub fn start_holds_peak(&self) -> bool {
        self.recorded_start_holds_peak() || self.results.iter().any(|s| s.start_holds_peak())
    }
}

pub const SIMULATE_SCHEMA: &str = "fragscope.simulate/1";
pub const MODEL_NOTE: &str = "a model of PyTorch's CUDA caching allocator (2025 policy), replaying the recorded requests; not a measurement";

/// Most points per chart curve.
pub const SERIES_POINTS: usize = 600;

fn series(label: String, start: u64, values: impl ExactSizeIterator<Item = u64>) -> Series {
    let mut b = series::SeriesBuilder::new(values.len() + 1, SERIES_POINTS);
    b.push(start);
    for v in values {
        b.push(v);
    }
    Series {
        label,
        points: b.finish(),
    }
}

/// Replays one device under its recorded settings and under `configs`
/// (runs in parallel; the result does not depend on it).
pub fn simulate_device(
    snap: &crate::model::Snapshot,
    device: i64,
    configs: &[SimConfig],
    capacity: Option<u64>,
) -> Result<SimReport, SimError> {
    // The runs need only the start's segments: the replay's report (a
    // pass over the trace) and what it tells of the start are worked out
    // while they run, on a core a run leaves free (nine runs on two cores
    // leave one for most of a run).
    // The requests are read while the replay rebuilds the start.
    let ((replayer, segments), mut input) = rayon::join(
        || {
            let replayer = crate::timeline::Replayer::new(snap, device);
            let segments = replayer.state_at(None).segments;
            (replayer, segments)
        },
        || {
            run::prepare_from(
                snap,
                device,
                capacity,
                trace::start_state_unreported(Vec::new()),
            )
        },
    );
    input.start.segments = segments;
    let (start, runs) = rayon::join(
        || trace::start_state_from(snap, device, Vec::new(), &replayer.report()),
        || run_configs(&input, configs),
    );
    let segments = std::mem::take(&mut input.start.segments);
    input.set_start(snap, StartState { segments, ..start });
    Ok(report_of(input, runs?))
}

/// [`simulate_device`] from a start state the caller already rebuilt
/// ([`trace::start_state_from`] on its own replay): the same answer
/// without replaying the trace again.
pub fn simulate_from(
    snap: &crate::model::Snapshot,
    device: i64,
    configs: &[SimConfig],
    capacity: Option<u64>,
    start: StartState,
) -> Result<SimReport, SimError> {
    let input = run::prepare_from(snap, device, capacity, start);
    let runs = run_configs(&input, configs)?;
    Ok(report_of(input, runs))
}

/// Runs the recorded settings, then `configs`, in parallel (the result
/// does not depend on it). Uses only the start state's segments.
/// Configurations that provably make the same run share one ([`plan`]).
pub fn run_configs(input: &DeviceInput, configs: &[SimConfig]) -> Result<Vec<SimRun>, SimError> {
    use plan::Plan;
    use std::sync::Mutex;
    let mut all = vec![input.recorded_config.clone()];
    all.extend(configs.iter().cloned());
    let plan = plan::plan(input, &all);
    let slots: Vec<Mutex<Option<Result<SimRun, SimError>>>> =
        all.iter().map(|_| Mutex::new(None)).collect();
    let put = |i: usize, r: Result<SimRun, SimError>| {
        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    };
    // Only the run under the recorded settings has its segment events
    // compared with the recording's (and the run it may take as its own).
    let run_i = |i: usize| match i == 0 || plan[0] == Plan::AfterProbe(i) {
        true => run::run(input, &all[i]),
        false => run::run_without_segment_events(input, &all[i]),
    };
    // The runs others wait for start first.
    let mut order: Vec<usize> = (0..all.len()).filter(|&i| plan[i] == Plan::Run).collect();
    order.sort_by_key(|&i| !plan.contains(&Plan::AfterProbe(i)));
    rayon::scope_fifo(|s| {
        for &i in &order {
            let (all, plan, put, run_i) = (&all, &plan, &put, &run_i);
            s.spawn_fifo(move |s| {
                let mut r = run_i(i);
                for d in (0..all.len()).filter(|&d| plan[d] == Plan::AfterProbe(i)) {
                    match &r {
                        Ok(base) if plan::shares_run(base, &all[d]) => {
                            put(d, Ok(plan::relabel(base, &all[d])))
                        }
                        _ => s.spawn_fifo(move |_| put(d, run_i(d))),
                    }
                }
                // The fidelity's comparison of segment events (quadratic
                // where the run parts from the recording) is made here,
                // while other runs go on, not after every run.
                if i == 0
                    && let Ok(run) = &mut r
                {
                    run.matched_segment_events = Some(fidelity::matched(input, run));
                }
                put(i, r);
            });
        }
    });
    let mut done: Vec<Option<Result<SimRun, SimError>>> = slots
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect();
    for i in 0..all.len() {
        if let Plan::SameAs(j) = plan[i] {
            done[i] = Some(match &done[j] {
                Some(Ok(run)) => Ok(plan::relabel(run, &all[i])),
                _ => run_i(i),
            });
        }
    }
    done.into_iter()
        .map(|r| r.expect("every configuration has a run"))
        .collect()
}

/// Sums up the runs of [`run_configs`] on `input`.
pub fn report_of(input: DeviceInput, runs: Vec<SimRun>) -> SimReport {
    let device = input.device;
    let fidelity = fidelity::measure(&input, &runs[0]);
    let (floor_peak_requested, recorded_ooms) = run::program_demand(&input);
    let mut s = vec![series(
        "recorded".into(),
        input.recorded_start_reserved,
        input.recorded_reserved.iter(),
    )];
    for r in &runs {
        s.push(Series {
            label: r.config.label(),
            points: r.reserved_points.clone(),
        });
    }
    SimReport {
        schema: SIMULATE_SCHEMA,
        device,
        events: input.events,
        allocations: input.requests.allocations(),
        model: MODEL_NOTE,
        capacity: input.capacity,
        capacity_source: input.capacity_source,
        recorded_config: input.recorded_config.label(),
        settings_recorded: input.settings_recorded,
        start_exact: input.start.exact,
        frees_of_older_blocks: input.start.frees_of_older_blocks,
        fidelity,
        floor_peak_requested,
        recorded_peak_reserved: input
            .recorded_reserved
            .iter()
            .chain(std::iter::once(input.recorded_start_reserved))
            .max()
            .unwrap_or(0),
        recorded_start_reserved: input.recorded_start_reserved,
        recorded_peak_reserved_in_trace: input.recorded_reserved.iter().max(),
        recorded_end_reserved: input
            .recorded_reserved
            .last()
            .unwrap_or(input.recorded_start_reserved),
        recorded_ooms,
        results: runs.iter().map(run::summarize).collect(),
        series: s,
        notes: input.notes,
    }
}
