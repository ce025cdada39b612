//! Driving the allocator model with a recorded request stream: one device,
//! one configuration. Maps recorded block addresses to the model's, keeps
//! the figures of each trace event as they are produced, and sums a run
//! up.
//!
//! Owns the per-run bookkeeping; the policy itself is `allocator.rs`, the
//! comparison with the recording `fidelity.rs`.

use super::allocator::{AddressOrder, Counters, SimAction, SimError, Simulator};
use super::config::SimConfig;
use super::keys::{Held, Keys};
use super::nearpeak::NearPeak;
use super::trace::{self, Request, StartState, TracedRequest};
use crate::model::{Action, BlockState, Snapshot, TraceEvent};
use serde::Serialize;
use std::collections::HashMap;

/// Where the device capacity came from.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CapacitySource {
    /// `--capacity`.
    Given,
    /// Reserved bytes at a recorded OOM plus the free bytes it reported.
    RecordedOom,
    /// Nothing known: the model never runs out of memory.
    Unlimited,
}

/// Everything a run needs from one device of a snapshot, read once and
/// shared by every configuration, and the snapshot, whose trace a run
/// reads its requests from.
#[derive(Debug, Clone)]
pub struct DeviceInput<'a> {
    pub snap: &'a Snapshot,
    pub device: i64,
    pub events: usize,
    pub start: StartState,
    pub requests: Requests,
    /// Reserved bytes after each trace event, as recorded.
    pub recorded_reserved: trace::RecordedReserved,
    pub recorded_start_reserved: u64,
    pub recorded_segment_events: Vec<(String, u64)>,
    /// Trace index of each recorded segment event.
    pub recorded_segment_event_index: Vec<usize>,
    /// Sizes of the final segments (mapped runs for expandable segments).
    pub recorded_final_segments: Vec<u64>,
    /// Recorded `oom` events (each a key-less allocation among `requests`).
    pub recorded_ooms: usize,
    pub capacity: Option<u64>,
    pub capacity_source: CapacitySource,
    /// Where the recording's cudaMalloc put new segments.
    pub address_order: AddressOrder,
    /// The settings the file recorded (PyTorch defaults when it has none).
    pub recorded_config: SimConfig,
    pub settings_recorded: bool,
    /// Things the reader should know about the inputs (each once).
    pub notes: Vec<String>,
}

/// A device's requests, as a run needs them besides the trace: the
/// number of each request's key ([`Keys`]), 4 bytes a request. A run reads
/// the requests themselves from the trace as it goes
/// ([`trace::requests_into`]): that pass costs little beside the model's
/// work on each request, where keeping them (16 bytes or more each) beside
/// the trace was most of what the what-if model held.
#[derive(Debug, Clone, Default)]
pub struct Requests {
    keys: Keys,
    len: usize,
    allocations: usize,
}

impl Requests {
    fn push(&mut self, r: &TracedRequest) {
        self.keys.push(&r.request);
        self.len += 1;
        if matches!(r.request, Request::Alloc { key: Some(_), .. }) {
            self.allocations += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Allocations with a recorded address (recorded OOMs left out).
    pub fn allocations(&self) -> usize {
        self.allocations
    }
}

/// Hashing for maps keyed by block address: foldhash's multiply-fold
/// instead of SipHash, which was a tenth of a run. Its seed is drawn per
/// map, so a crafted file cannot pick colliding addresses in advance.
type AddrHashing = foldhash::fast::RandomState;

type AddrMap<V> = HashMap<u64, V, AddrHashing>;

/// The settings the file recorded as a configuration (PyTorch's defaults
/// when it has none), whether it recorded any, and notes on reading them.
pub fn recorded_config(snap: &Snapshot) -> (SimConfig, bool, Vec<String>) {
    let mut notes = Vec::new();
    let (recorded_config, settings_recorded) = match &snap.allocator_settings {
        Some(s) => match SimConfig::from_settings(s) {
            Ok(c) => (c, true),
            Err(e) => {
                notes.push(format!(
                    "the recorded PYTORCH_CUDA_ALLOC_CONF could not be read ({e}); the explicit allocator_settings fields are used"
                ));
                let mut c = SimConfig {
                    max_split_size: s.max_split_size(),
                    expandable_segments: s.expandable_segments().unwrap_or(false),
                    ..SimConfig::default()
                };
                if let Some(d) = s.roundup_power2_divisions() {
                    c.roundup_power2_divisions = d;
                }
                (c, true)
            }
        },
        None => (SimConfig::default(), false),
    };
    if !settings_recorded {
        notes.push(
            "the file records no allocator_settings (PyTorch < 2.3); PyTorch's defaults are assumed"
                .into(),
        );
    }
    (recorded_config, settings_recorded, notes)
}

/// Reads one device of a snapshot for simulation. `capacity` overrides the
/// capacity implied by recorded OOMs.
pub fn prepare(snap: &Snapshot, device: i64, capacity: Option<u64>) -> DeviceInput<'_> {
    prepare_from(snap, device, capacity, trace::start_state(snap, device))
}

/// [`prepare`] with the start state already rebuilt (see
/// [`trace::start_state_from`]).
pub fn prepare_from(
    snap: &Snapshot,
    device: i64,
    capacity: Option<u64>,
    start: StartState,
) -> DeviceInput<'_> {
    let events = snap.trace_of(device);
    let (recorded_config, settings_recorded, mut notes) = recorded_config(snap);
    let recorded_reserved = trace::recorded_reserved(snap, device);
    let from_oom = trace::capacity_from_ooms_with(snap, device, &recorded_reserved);
    let (capacity, capacity_source) = match (capacity, from_oom) {
        (Some(c), _) => (Some(c), CapacitySource::Given),
        (None, Some(c)) => (Some(c), CapacitySource::RecordedOom),
        (None, None) => (None, CapacitySource::Unlimited),
    };
    notes.extend(start_notes(&start));
    let mut requests = Requests::default();
    trace::requests_into(events, snap, capacity, &recorded_reserved, |r| {
        requests.push(&r)
    });
    requests.keys.finish();
    let seg: Vec<(usize, (Action, u64))> = trace::indexed_segment_events(events).collect();
    let mut recorded_final_segments: Vec<u64> =
        snap.segments_of(device).map(|s| s.total_size).collect();
    recorded_final_segments.sort_unstable();
    DeviceInput {
        snap,
        device,
        events: events.len(),
        recorded_start_reserved: trace::recorded_start_reserved(snap, device),
        recorded_segment_events: seg
            .iter()
            .map(|(_, (a, s))| (a.name(snap).to_string(), *s))
            .collect(),
        recorded_segment_event_index: seg.iter().map(|(i, _)| *i).collect(),
        recorded_final_segments,
        recorded_ooms: events.iter().filter(|e| e.action == Action::Oom).count(),
        start,
        requests,
        recorded_reserved,
        capacity,
        capacity_source,
        address_order: trace::address_order(events),
        recorded_config,
        settings_recorded,
        notes,
    }
}

/// What the reader should know about a start state (each note once).
pub fn start_notes(start: &StartState) -> Vec<String> {
    let mut out = Vec::new();
    if start.frees_of_older_blocks > 0 {
        out.push(format!(
            "the trace starts mid-run: {} free(s) of blocks allocated before its first event (first at event {}); the replay put those blocks back in the start state with sizes inferred from their requests{}",
            start.frees_of_older_blocks,
            start.first_older_free.map_or("?".into(), |i| i.to_string()),
            if start.widened_blocks > 0 {
                format!(
                    " ({} taking an unsplittable remainder of their segment)",
                    start.widened_blocks
                )
            } else {
                String::new()
            }
        ));
    }
    if start.replay_anomalies > 0 {
        out.push(format!(
            "the replay that rebuilt the start state met {} event(s) it could not apply as recorded ({})",
            start.replay_anomalies,
            start.first_replay_anomaly.as_deref().unwrap_or("no example")
        ));
    }
    if !start.final_state_reproduced {
        out.push(
            "replaying the trace does not reproduce the recorded final state exactly, so the start state may be off (see `fragscope timeline`)".into(),
        );
    }
    out
}

impl DeviceInput<'_> {
    /// The device's trace.
    pub fn trace(&self) -> &[TraceEvent] {
        self.snap.trace_of(self.device)
    }

    /// Replaces the start state by one with the same segments (the
    /// replay's report known at last, see [`trace::start_state_from`]) and
    /// its notes.
    pub fn set_start(&mut self, snap: &Snapshot, start: StartState) {
        let (_, _, mut notes) = recorded_config(snap);
        notes.extend(start_notes(&start));
        self.notes = notes;
        self.start = start;
    }
}

/// The model's state after one trace event.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Step {
    pub reserved: u64,
    /// Block bytes of live allocations.
    pub allocated: u64,
    /// Requested bytes of live allocations.
    pub requested: u64,
    /// Cached bytes.
    pub inactive: u64,
    pub largest_free: u64,
}

/// The allocations a run could not serve, and the recorded `oom` events it
/// met, counted: a trace may hold an `oom` at most events, and a run keeps
/// no list of them.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OomCounts {
    /// Allocations the model refused.
    pub refused: u64,
    /// Trace index of the first.
    pub first: Option<usize>,
    /// Recorded `oom` events the model refused too.
    pub reproduced: u64,
    /// Recorded `oom` events the model served.
    pub avoided: u64,
}

impl OomCounts {
    /// Recorded `oom` events the run met.
    pub fn recorded(&self) -> u64 {
        self.reproduced + self.avoided
    }
    fn refuse(&mut self, i: usize, recorded: bool) {
        self.refused += 1;
        self.first.get_or_insert(i);
        self.reproduced += recorded as u64;
    }
}

/// The run's reserved bytes against the recording, at the start and after
/// every event that completes a request (what [`super::fidelity`] compares).
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct ReservedError {
    /// Moments compared, the start included.
    pub points: usize,
    pub max: u64,
    /// Trace index of the largest error (`None` = the start).
    pub max_event: Option<usize>,
    /// Sum of the errors, in the order of the moments.
    pub sum: f64,
}

#[derive(Serialize, Debug, Clone)]
pub struct SimRun {
    pub config: SimConfig,
    pub start: Step,
    /// After the last trace event (the start for an empty trace).
    pub end: Step,
    /// Highest reserved and allocated bytes, the start included.
    pub peak_reserved: u64,
    pub peak_allocated: u64,
    /// Highest reserved bytes after a trace event: the start state, which
    /// a trace that begins mid-run inherits from before it, left out
    /// (`None` for an empty trace). Below `peak_reserved` when the
    /// inherited start holds the peak.
    pub peak_reserved_in_trace: Option<u64>,
    /// Highest 1 − largest cached block / cached bytes while reserved is at
    /// least half its peak, and the smallest largest cached block then.
    pub worst_fragmentation: f64,
    /// 0 when no moment qualifies.
    pub smallest_largest_gap: u64,
    pub reserved_error: ReservedError,
    /// Reserved bytes at the start (index 0) and after each trace event
    /// (index i + 1), downsampled to [`super::SERIES_POINTS`].
    pub reserved_points: Vec<(u32, u64)>,
    /// The segment events (cudaMalloc, cudaFree, page mappings) in order,
    /// each as its action and size: what [`super::fidelity`] compares with
    /// the recording.
    pub segment_events: Vec<(SimAction, u64)>,
    /// The trace event at which each of `segment_events` was made.
    #[serde(skip)]
    pub segment_event_at: Vec<usize>,
    pub ooms: OomCounts,
    /// Frees of blocks the model does not hold (older than the start state).
    pub skipped_frees: u64,
    /// Frees of allocations the model itself refused.
    pub frees_of_refused: u64,
    pub counters: Counters,
    /// Sizes of the final segments, ascending.
    pub final_segments: Vec<u64>,
    /// [`super::Simulator::split_probe`] at the end of the run.
    #[serde(skip)]
    pub split_probe: u64,
    /// The recording's segment events that this run reproduces in order,
    /// once worked out ([`super::fidelity::matched`]): the run under the
    /// recorded settings has it made beside the other runs.
    #[serde(skip)]
    pub matched_segment_events: Option<super::fidelity::Matched>,
}

fn step(s: &Simulator) -> Step {
    let f = s.figures();
    Step {
        reserved: f.reserved,
        allocated: f.allocated,
        requested: f.requested,
        inactive: f.inactive,
        largest_free: f.largest_free,
    }
}

/// Replays a device's requests under one configuration.
///
/// An allocation the model refuses is skipped and the run goes on (the
/// program is assumed to survive it, as the recorded program did when its
/// own OOM is in the trace); a recorded OOM the model serves is freed at
/// once, since the program never used it.
///
/// A run keeps no per-event memory: its figures are summed up as the steps
/// are produced (see [`run_observed`] for every step).
pub fn run(input: &DeviceInput, cfg: &SimConfig) -> Result<SimRun, SimError> {
    run_observed(input, cfg, |_, _| {})
}

/// [`run`] without its [`SimRun::segment_events`], for a run whose fidelity
/// is not measured: with many settings at once, each run's list of the
/// cudaMalloc and cudaFree it made (tens of thousands on a long trace)
/// would be held to the end for nothing.
pub fn run_without_segment_events(
    input: &DeviceInput,
    cfg: &SimConfig,
) -> Result<SimRun, SimError> {
    run_with(input, cfg, false, |_, _| {})
}

/// [`run`], also handing `observe` the model's state after each trace
/// event (index, step), in order.
pub fn run_observed(
    input: &DeviceInput,
    cfg: &SimConfig,
    observe: impl FnMut(usize, &Step),
) -> Result<SimRun, SimError> {
    run_with(input, cfg, true, observe)
}

fn run_with(
    input: &DeviceInput,
    cfg: &SimConfig,
    segment_events: bool,
    mut observe: impl FnMut(usize, &Step),
) -> Result<SimRun, SimError> {
    let mut sim = Simulator::with_initial(cfg.clone(), input.capacity, &input.start.segments)?;
    sim.set_record_block_events(false);
    sim.set_address_order(input.address_order);
    // What the run knows of each bound key, by its number.
    let keys = &input.requests.keys;
    // The start state's live blocks are the model's blocks in use, at the
    // same addresses.
    let slots = sim.slots();
    let held = keys.start_table(|a| slots.get(&a).copied());
    drop(slots);
    let start = step(&sim);
    let start_err = start.reserved.abs_diff(input.recorded_start_reserved);
    let err = ReservedError {
        points: 1,
        max: start_err,
        max_event: None,
        sum: start_err as f64,
    };
    let mut near = NearPeak::default();
    near.add(&start);
    let peak_allocated = start.allocated;
    let mut curve = super::series::SeriesBuilder::new(input.events + 1, super::SERIES_POINTS);
    curve.push(start.reserved);
    let last = start;
    let out = SimRun {
        config: cfg.clone(),
        start,
        end: start,
        peak_reserved: 0,
        peak_allocated: 0,
        peak_reserved_in_trace: None,
        worst_fragmentation: 0.0,
        smallest_largest_gap: 0,
        reserved_error: ReservedError::default(),
        reserved_points: Vec::new(),
        segment_events: Vec::new(),
        segment_event_at: Vec::new(),
        ooms: OomCounts::default(),
        skipped_frees: 0,
        frees_of_refused: 0,
        counters: Counters::default(),
        final_segments: Vec::new(),
        split_probe: 0,
        matched_segment_events: None,
    };
    let mut walk = Walk {
        sim,
        held,
        out,
        err,
        near,
        peak_allocated,
        curve,
        last,
        recorded: input.recorded_reserved.iter(),
        done: 0,
        completes: false,
        segment_events,
    };
    let mut next = 0;
    trace::requests_into(
        input.trace(),
        input.snap,
        input.capacity,
        &input.recorded_reserved,
        |r| {
            while walk.done < r.event {
                walk.event_done(&mut observe);
            }
            let n = keys.of(next);
            next += 1;
            walk.completes = true;
            apply(
                &mut walk.sim,
                r.event,
                &r.request,
                walk.held.get_mut(n as usize),
                &mut walk.out,
            );
        },
    );
    while walk.done < input.events {
        walk.event_done(&mut observe);
    }
    let Walk {
        sim,
        mut out,
        err,
        near,
        peak_allocated,
        curve,
        last,
        ..
    } = walk;
    out.end = last;
    out.peak_reserved = near.peak;
    out.peak_allocated = peak_allocated;
    (out.worst_fragmentation, out.smallest_largest_gap) = near.finish();
    out.reserved_error = err;
    out.reserved_points = curve.finish();
    out.counters = sim.counters();
    out.split_probe = sim.split_probe();
    let mut finals: Vec<u64> = sim.segment_sizes();
    finals.sort_unstable();
    out.final_segments = finals;
    Ok(out)
}

/// A run's state between the requests it reads from the trace.
struct Walk<'a> {
    sim: Simulator,
    /// What the run knows of each bound key, by its number.
    held: Vec<Held>,
    out: SimRun,
    err: ReservedError,
    near: NearPeak,
    peak_allocated: u64,
    curve: super::series::SeriesBuilder,
    last: Step,
    recorded: trace::ReservedIter<'a>,
    /// The events done: their requests made, their step taken.
    done: usize,
    /// Whether event `done` completed a request.
    completes: bool,
    /// Whether the run keeps its segment events.
    segment_events: bool,
}

impl Walk<'_> {
    /// Event `done` is over (its requests made): takes its step.
    #[inline]
    fn event_done(&mut self, observe: &mut impl FnMut(usize, &Step)) {
        let i = self.done;
        let recorded_here = self.recorded.next().unwrap_or(0);
        let out = &mut self.out;
        if !self.segment_events {
            self.sim.drain_events();
        } else if !self.sim.events().is_empty() {
            out.segment_events.extend(
                self.sim
                    .drain_events()
                    .filter(|e| e.action.is_segment_event())
                    .map(|e| (e.action, e.size)),
            );
            let made = out.segment_events.len() - out.segment_event_at.len();
            out.segment_event_at.extend(std::iter::repeat_n(i, made));
        }
        let s = step(&self.sim);
        if self.completes {
            let e = s.reserved.abs_diff(recorded_here);
            let err = &mut self.err;
            err.points += 1;
            err.sum += e as f64;
            if e > err.max {
                err.max = e;
                err.max_event = Some(i);
            }
        }
        // A step with the last one's reserved, cached and largest cached
        // bytes (most frees requested, every event the model makes no
        // request of) folds into nothing new.
        let last = &self.last;
        if (s.reserved, s.inactive, s.largest_free)
            != (last.reserved, last.inactive, last.largest_free)
        {
            self.near.add(&s);
        }
        self.peak_allocated = self.peak_allocated.max(s.allocated);
        out.peak_reserved_in_trace = Some(
            out.peak_reserved_in_trace
                .map_or(s.reserved, |p| p.max(s.reserved)),
        );
        self.curve.push(s.reserved);
        observe(i, &s);
        self.last = s;
        self.done += 1;
        self.completes = false;
    }
}

/// One request of event `i` made of the model: an allocation served (the
/// model's address held for its key) or refused (recorded in `out`), a
/// free, an `empty_cache`. `held` is what the run knows of the request's
/// key, `None` when no key is bound ([`super::keys::UNBOUND`]).
#[inline]
fn apply(
    sim: &mut Simulator,
    i: usize,
    request: &Request,
    held: Option<&mut Held>,
    out: &mut SimRun,
) {
    match *request {
        Request::Alloc {
            key,
            size,
            stream,
            pool,
        } => match sim.malloc_slot(size, stream, pool) {
            Ok((addr, slot)) => match key {
                // Every allocation with a key has its number.
                Some(_) => held.into_iter().for_each(|h| *h = Held::At(addr, slot)),
                None => {
                    out.ooms.avoided += 1;
                    sim.free_requested_at(addr, slot)
                        .and_then(|_| sim.free_completed_at(addr, slot))
                        .expect("just allocated");
                }
            },
            Err(_) => {
                out.ooms.refuse(i, key.is_none());
                if key.is_some() {
                    held.into_iter().for_each(|h| *h = Held::Refused);
                }
            }
        },
        Request::FreeRequested { .. } => {
            if let Some(&mut Held::At(a, slot)) = held {
                // A block already pending stays pending.
                let _ = sim.free_requested_at(a, slot);
            }
        }
        Request::FreeCompleted { .. } => match held.map(|h| std::mem::replace(h, Held::None)) {
            Some(Held::At(a, slot)) => {
                if sim.free_completed_at(a, slot).is_err() {
                    out.skipped_frees += 1;
                }
            }
            Some(Held::Refused) => out.frees_of_refused += 1,
            Some(Held::None) | None => out.skipped_frees += 1,
        },
        Request::EmptyCache => sim.empty_cache(),
    }
}

/// The figures of a run that the `simulate` table shows.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Summary {
    /// The configuration in PYTORCH_CUDA_ALLOC_CONF syntax (`defaults` for none).
    pub config: String,
    /// Highest reserved bytes, the start state included.
    pub peak_reserved: u64,
    /// Reserved bytes of the start state, inherited from before the trace
    /// (the same for every configuration: each run starts from it).
    pub start_reserved: u64,
    /// Highest reserved bytes after a trace event, the start left out
    /// (`None` for an empty trace).
    pub peak_reserved_in_trace: Option<u64>,
    pub end_reserved: u64,
    /// Peak block bytes of live allocations.
    pub peak_allocated: u64,
    /// Highest 1 − largest cached block / cached bytes while reserved is at
    /// least half its peak.
    pub worst_fragmentation: f64,
    /// Smallest largest cached block over the same moments.
    pub smallest_largest_gap: u64,
    /// cudaMalloc calls (or page mappings with expandable segments).
    pub device_allocs: u64,
    /// cudaFree calls (or page unmappings).
    pub device_frees: u64,
    pub ooms: u64,
    pub first_oom_event: Option<usize>,
    pub recorded_ooms: usize,
    pub recorded_ooms_avoided: usize,
}

impl Summary {
    /// The inherited start state holds the peak: reserved never came back
    /// to the start's level after the first event, so `peak_reserved` is
    /// the start's and says nothing about this configuration.
    pub fn start_holds_peak(&self) -> bool {
        self.peak_reserved_in_trace
            .is_some_and(|p| p < self.peak_reserved)
    }
}

pub fn summarize(run: &SimRun) -> Summary {
    Summary {
        config: run.config.label(),
        peak_reserved: run.peak_reserved,
        start_reserved: run.start.reserved,
        peak_reserved_in_trace: run.peak_reserved_in_trace,
        end_reserved: run.end.reserved,
        peak_allocated: run.peak_allocated,
        worst_fragmentation: run.worst_fragmentation,
        smallest_largest_gap: run.smallest_largest_gap,
        device_allocs: run.counters.device_allocs,
        device_frees: run.counters.device_frees,
        ooms: run.ooms.refused,
        first_oom_event: run.ooms.first,
        recorded_ooms: run.ooms.recorded() as usize,
        recorded_ooms_avoided: run.ooms.avoided as usize,
    }
}

/// Requested bytes the program held when it made each recorded failing
/// request: (trace index, bytes held, rounded request).
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct OomDemand {
    pub event: usize,
    pub held: u64,
    pub request: u64,
}

/// A device's recorded `oom` events, in trace order, each with the
/// program's demand there. Every one is a request of its own (a key-less
/// allocation), so this one list gives both their trace indices and their
/// demand: a program that catches its OOMs may record one at most events.
/// Its JSON form is two entries of the object it is flattened into:
/// `recorded_ooms` (the trace indices) and `oom_demand`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedOoms(Vec<OomDemand>);

impl RecordedOoms {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The trace index of each.
    pub fn events(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.0.iter().map(|d| d.event)
    }

    pub fn demand(&self) -> &[OomDemand] {
        &self.0
    }
}

impl Serialize for RecordedOoms {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        struct Events<'a>(&'a [OomDemand]);
        impl Serialize for Events<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(|d| d.event))
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("recorded_ooms", &Events(&self.0))?;
        m.serialize_entry("oom_demand", &self.0)?;
        m.end()
    }
}

/// Walks the requests keeping the program's live requested bytes (from
/// `alloc` to `free_requested`); returns the peak and the demand at each
/// recorded OOM.
pub fn program_demand(input: &DeviceInput) -> (u64, RecordedOoms) {
    let mut live: AddrMap<u64> = AddrMap::default();
    let mut cur: u64 = 0;
    for s in &input.start.segments {
        for b in &s.blocks {
            if b.state == BlockState::ActiveAllocated {
                let r = b.requested_or_size().min(b.size);
                live.insert(b.address, r);
                cur = cur.saturating_add(r);
            }
        }
    }
    let mut peak = cur;
    let mut ooms = Vec::new();
    let each = |r: TracedRequest| match r.request {
        Request::Alloc {
            key: Some(k), size, ..
        } => {
            // Saturating: sizes near 2^64 only come from damaged files.
            if let Some(old) = live.insert(k, size) {
                cur = cur.saturating_sub(old);
            }
            cur = cur.saturating_add(size);
            peak = peak.max(cur);
        }
        Request::Alloc {
            key: None, size, ..
        } => ooms.push(OomDemand {
            event: r.event,
            held: cur,
            request: size,
        }),
        Request::FreeRequested { key } | Request::FreeCompleted { key } => {
            if let Some(s) = live.remove(&key) {
                cur = cur.saturating_sub(s);
            }
        }
        Request::EmptyCache => {}
    };
    trace::requests_into(
        input.trace(),
        input.snap,
        input.capacity,
        &input.recorded_reserved,
        each,
    );
    debug_assert_eq!(
        ooms.len(),
        input.recorded_ooms,
        "a request for each recorded OOM"
    );
    (peak, RecordedOoms(ooms))
}
