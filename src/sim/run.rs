//! Driving the allocator model with a recorded request stream: one device,
//! one configuration. Maps recorded block addresses to the model's, keeps
//! one set of figures per trace event, and sums a run up.
//!
//! Owns the per-run bookkeeping; the policy itself is `allocator.rs`, the
//! comparison with the recording `fidelity.rs`.

use super::allocator::{AddressOrder, Counters, SimError, SimEvent, Simulator};
use super::config::SimConfig;
use super::trace::{self, Request, StartState, TracedRequest};
use crate::model::{Action, BlockState, Snapshot};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

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
/// shared by every configuration.
#[derive(Serialize, Debug, Clone)]
pub struct DeviceInput {
    pub device: i64,
    pub events: usize,
    pub start: StartState,
    pub requests: Vec<TracedRequest>,
    /// Reserved bytes after each trace event, as recorded.
    pub recorded_reserved: Vec<u64>,
    pub recorded_start_reserved: u64,
    pub recorded_segment_events: Vec<(String, u64)>,
    /// Trace index of each recorded segment event.
    pub recorded_segment_event_index: Vec<usize>,
    /// Sizes of the final segments (mapped runs for expandable segments).
    pub recorded_final_segments: Vec<u64>,
    /// Trace indices of recorded `oom` events.
    pub recorded_ooms: Vec<usize>,
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
pub fn prepare(snap: &Snapshot, device: i64, capacity: Option<u64>) -> DeviceInput {
    let events = snap.trace_of(device);
    let (recorded_config, settings_recorded, mut notes) = recorded_config(snap);
    let recorded_reserved = trace::recorded_reserved(snap, device);
    let from_oom = trace::capacity_from_ooms(snap, device);
    let (capacity, capacity_source) = match (capacity, from_oom) {
        (Some(c), _) => (Some(c), CapacitySource::Given),
        (None, Some(c)) => (Some(c), CapacitySource::RecordedOom),
        (None, None) => (None, CapacitySource::Unlimited),
    };
    let start = trace::start_state(snap, device);
    if start.frees_of_older_blocks > 0 {
        notes.push(format!(
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
        notes.push(format!(
            "the replay that rebuilt the start state met {} event(s) it could not apply as recorded ({})",
            start.replay_anomalies,
            start.first_replay_anomaly.as_deref().unwrap_or("no example")
        ));
    }
    if !start.final_state_reproduced {
        notes.push(
            "replaying the trace does not reproduce the recorded final state exactly, so the start state may be off (see `fragscope timeline`)".into(),
        );
    }
    let requests = trace::requests(events, capacity, &recorded_reserved);
    let seg: Vec<(usize, (Action, u64))> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.action,
                Action::SegmentAlloc
                    | Action::SegmentFree
                    | Action::SegmentMap
                    | Action::SegmentUnmap
            )
        })
        .map(|(i, e)| (i, (e.action.clone(), e.size)))
        .collect();
    let mut recorded_final_segments: Vec<u64> =
        snap.segments_of(device).map(|s| s.total_size).collect();
    recorded_final_segments.sort_unstable();
    DeviceInput {
        device,
        events: events.len(),
        recorded_start_reserved: trace::recorded_start_reserved(snap, device),
        recorded_segment_events: seg
            .iter()
            .map(|(_, (a, s))| (a.name(snap).to_string(), *s))
            .collect(),
        recorded_segment_event_index: seg.iter().map(|(i, _)| *i).collect(),
        recorded_final_segments,
        recorded_ooms: events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.action == Action::Oom)
            .map(|(i, _)| i)
            .collect(),
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

/// An allocation the model could not serve.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimOom {
    pub event: usize,
    pub requested: u64,
    /// The recording failed here too (an `oom` event).
    pub recorded: bool,
}

#[derive(Serialize, Debug, Clone)]
pub struct SimRun {
    pub config: SimConfig,
    pub start: Step,
    /// `steps[i]`: after trace event `i`.
    pub steps: Vec<Step>,
    /// Segment and OOM events, with the trace event they happened at.
    pub events: Vec<(usize, SimEvent)>,
    pub ooms: Vec<SimOom>,
    /// Per recorded `oom` (trace index): whether the model served it.
    pub recorded_oom_avoided: Vec<(usize, bool)>,
    /// Frees of blocks the model does not hold (older than the start state).
    pub skipped_frees: u64,
    /// Frees of allocations the model itself refused.
    pub frees_of_refused: u64,
    pub counters: Counters,
    /// Sizes of the final segments, ascending.
    pub final_segments: Vec<u64>,
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
pub fn run(input: &DeviceInput, cfg: &SimConfig) -> Result<SimRun, SimError> {
    let mut sim = Simulator::with_initial(cfg.clone(), input.capacity, &input.start.segments)?;
    sim.set_record_block_events(false);
    sim.set_address_order(input.address_order);
    let mut map: HashMap<u64, u64> = HashMap::new();
    for s in &input.start.segments {
        for b in &s.blocks {
            if b.state != BlockState::Inactive {
                map.insert(b.address, b.address);
            }
        }
    }
    let mut refused: HashSet<u64> = HashSet::new();
    let mut out = SimRun {
        config: cfg.clone(),
        start: step(&sim),
        steps: Vec::with_capacity(input.events),
        events: Vec::new(),
        ooms: Vec::new(),
        recorded_oom_avoided: Vec::new(),
        skipped_frees: 0,
        frees_of_refused: 0,
        counters: Counters::default(),
        final_segments: Vec::new(),
    };
    let mut reqs = input.requests.iter().peekable();
    for i in 0..input.events {
        while let Some(r) = reqs.next_if(|r| r.event == i) {
            match r.request {
                Request::Alloc {
                    key,
                    size,
                    stream,
                    pool,
                } => match sim.malloc_in(size, stream, pool) {
                    Ok(addr) => match key {
                        Some(k) => {
                            map.insert(k, addr);
                            refused.remove(&k);
                        }
                        None => {
                            out.recorded_oom_avoided.push((i, true));
                            sim.free(addr).expect("just allocated");
                        }
                    },
                    Err(oom) => {
                        out.ooms.push(SimOom {
                            event: i,
                            requested: oom.requested,
                            recorded: key.is_none(),
                        });
                        match key {
                            Some(k) => {
                                map.remove(&k);
                                refused.insert(k);
                            }
                            None => out.recorded_oom_avoided.push((i, false)),
                        }
                    }
                },
                Request::FreeRequested { key } => {
                    if let Some(&a) = map.get(&key) {
                        // A block already pending stays pending.
                        let _ = sim.free_requested(a);
                    }
                }
                Request::FreeCompleted { key } => match map.remove(&key) {
                    Some(a) => {
                        if sim.free_completed(a).is_err() {
                            out.skipped_frees += 1;
                        }
                    }
                    None if refused.remove(&key) => out.frees_of_refused += 1,
                    None => out.skipped_frees += 1,
                },
                Request::EmptyCache => sim.empty_cache(),
            }
        }
        out.events
            .extend(sim.take_events().into_iter().map(|e| (i, e)));
        out.steps.push(step(&sim));
    }
    out.counters = sim.counters();
    let mut finals: Vec<u64> = sim.segments().iter().map(|s| s.total_size).collect();
    finals.sort_unstable();
    out.final_segments = finals;
    Ok(out)
}

/// The figures of a run that the `simulate` table shows.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Summary {
    /// The configuration in PYTORCH_CUDA_ALLOC_CONF syntax (`defaults` for none).
    pub config: String,
    pub peak_reserved: u64,
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

pub fn summarize(run: &SimRun) -> Summary {
    let all = std::iter::once(&run.start).chain(run.steps.iter());
    let peak_reserved = all.clone().map(|s| s.reserved).max().unwrap_or(0);
    let peak_allocated = all.clone().map(|s| s.allocated).max().unwrap_or(0);
    let mut worst = 0.0f64;
    let mut gap = u64::MAX;
    for s in all.filter(|s| s.reserved > 0 && s.reserved * 2 >= peak_reserved) {
        worst = worst.max(crate::stats::fragmentation(s.largest_free, s.inactive));
        gap = gap.min(s.largest_free);
    }
    Summary {
        config: run.config.label(),
        peak_reserved,
        end_reserved: run.steps.last().unwrap_or(&run.start).reserved,
        peak_allocated,
        worst_fragmentation: worst,
        smallest_largest_gap: if gap == u64::MAX { 0 } else { gap },
        device_allocs: run.counters.device_allocs,
        device_frees: run.counters.device_frees,
        ooms: run.ooms.len() as u64,
        first_oom_event: run.ooms.first().map(|o| o.event),
        recorded_ooms: run.recorded_oom_avoided.len(),
        recorded_ooms_avoided: run.recorded_oom_avoided.iter().filter(|(_, a)| *a).count(),
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

/// Walks the requests keeping the program's live requested bytes (from
/// `alloc` to `free_requested`); returns the peak and the demand at each
/// recorded OOM.
fn program_demand(input: &DeviceInput) -> (u64, Vec<OomDemand>) {
    let mut live: HashMap<u64, u64> = HashMap::new();
    let mut cur: u64 = 0;
    for s in &input.start.segments {
        for b in &s.blocks {
            if b.state == BlockState::ActiveAllocated {
                let r = b.requested_or_size().min(b.size);
                live.insert(b.address, r);
                cur += r;
            }
        }
    }
    let mut peak = cur;
    let mut ooms = Vec::new();
    for r in &input.requests {
        match r.request {
            Request::Alloc {
                key: Some(k), size, ..
            } => {
                if let Some(old) = live.insert(k, size) {
                    cur -= old;
                }
                cur += size;
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
                    cur -= s;
                }
            }
            _ => {}
        }
    }
    (peak, ooms)
}

/// Peak of requested bytes held by the program: no configuration can
/// reserve less.
pub fn peak_requested(input: &DeviceInput) -> u64 {
    program_demand(input).0
}

/// The program's demand at each recorded OOM. When held + request exceeds
/// the capacity, no allocator setting can avoid that OOM.
pub fn oom_demand(input: &DeviceInput) -> Vec<OomDemand> {
    program_demand(input).1
}
