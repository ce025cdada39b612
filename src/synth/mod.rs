//! Synthetic memory snapshots for tests, fixtures and benchmarks: a program
//! ([`workload`], [`serving`], [`light`]) driven through the allocator model
//! ([`crate::sim`]), so that segments, blocks and trace agree and
//! fragmentation emerges from the allocator's own rules, written as CPython
//! writes `_dump_snapshot` ([`write`], through [`pickle_writer`]).
//!
//! What the file holds, as PyTorch 2.11 records it with
//! `_record_memory_history(enabled="all", context="all", stacks="all",
//! max_entries=N)` switched on after a warm-up:
//!
//! * `segments`: the allocator's final state, device by device; blocks
//!   allocated while recording carry the allocation's stack, older ones `[]`.
//! * `device_traces[d]`: the last `N` events of device `d` (its ring
//!   buffer): `alloc`, `free_requested`, `free_completed` (deferred for
//!   tensors used on the data stream), `segment_alloc`, `segment_free`,
//!   `segment_map`, `segment_unmap` and `oom`, each with `time_us`,
//!   `compile_context` and `user_metadata`.
//! * `allocator_settings` (the defaults, or `expandable_segments:True`) and
//!   `external_annotations` (optimizer steps).
//!
//! What the program is, and so what the file looks like, is its [`Shape`]:
//! the plain training run (`narrow`, the default), the same run with
//! hundreds of deep call sites, a serving loop that fragments the cache,
//! the training run under expandable segments, or eight devices of which
//! one or two are busy.
//!
//! Object sharing follows the binding: one string object per key name, one
//! stack list per captured traceback (an allocation's list is shared by its
//! `alloc` event, its block and, when it made one, its segment and
//! `segment_alloc`; a free's by both free events), frame dicts shared by
//! every list that holds them, on every device.
//!
//! Deterministic: the bytes are a function of the options only.
//!
//! Owns generating and writing; reads nothing.

pub mod light;
pub mod pickle_writer;
pub mod serving;
pub mod stacks;
pub mod workload;

mod write;

use crate::model::{BlockState, Segment};
use crate::sim::{AddressOrder, SimAction, SimConfig, SimEvent, Simulator};
use stacks::{StackPool, TORCH, py};
use std::collections::{HashMap, VecDeque};
use workload::{Program, Req, Style, Tensor, Workload};

pub use write::write_pickle;

/// SplitMix64: small, fast, and stable across releases (the files a seed
/// makes must not change when a dependency does).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6a09_e667_f3bc_c908)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// What kind of run a synthetic snapshot records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum Shape {
    /// A GPT-style training run (AdamW, bf16 autocast, a new sequence
    /// length every step): about 55 call sites, a few hundred segments.
    #[default]
    Narrow,
    /// The training run with at least 26 blocks nested as deep as their
    /// index, custom autograd functions and a launcher: over 400 distinct
    /// stacks of 30 to 300 frames, Python and C++.
    ManySites,
    /// An inference server with continuous batching and caches grown by
    /// concatenation: thousands of segments and of live blocks, sizes by
    /// the thousand, segments given back and their addresses reused.
    Fragmented,
    /// The training run under `expandable_segments:True`, with
    /// `empty_cache()` after every second step: `segment_map` and
    /// `segment_unmap` instead of `segment_alloc` and `segment_free`.
    Expandable,
    /// Eight devices (`--devices`): the first one or two (`--busy-devices`)
    /// train, the others keep a moving average of the weights, a few
    /// events a step.
    MultiDevice,
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Narrow => "narrow",
            Shape::ManySites => "many-sites",
            Shape::Fragmented => "fragmented",
            Shape::Expandable => "expandable",
            Shape::MultiDevice => "multi-device",
        }
    }
}

#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// Trace entries each busy device keeps (`max_entries`).
    pub events: u64,
    pub seed: u64,
    /// Device memory the allocator may reserve (each device).
    pub capacity: u64,
    pub shape: Shape,
    /// Devices of a `multi-device` run.
    pub devices: u32,
    /// Of those, how many train (the first ones); the rest are light.
    pub busy_devices: u32,
}

impl Default for SynthOptions {
    fn default() -> Self {
        SynthOptions {
            events: 10_000,
            seed: 0,
            capacity: 80 << 30,
            shape: Shape::Narrow,
            devices: 8,
            busy_devices: 2,
        }
    }
}

/// No captured stack (recording was off when it happened).
pub const NO_CAPTURE: u32 = u32::MAX;

/// One trace entry. For `oom`, `addr` holds `device_free`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub action: SimAction,
    pub addr: u64,
    pub size: u64,
    pub stream: i64,
    pub time_us: i64,
    pub capture: u32,
}

/// What one device recorded.
pub struct DeviceTrace {
    pub device: i64,
    /// Whether it ran the shape's main program (a light device of a
    /// `multi-device` run is not busy).
    pub busy: bool,
    /// What it ran, in a few words.
    pub program: String,
    /// Oldest first.
    pub events: Vec<Event>,
    /// Final state, sorted by address, with the capture of each segment and
    /// of each of its blocks.
    pub segments: Vec<(Segment, u32, Vec<u32>)>,
    /// Events recorded in all, before the ring buffer dropped the oldest.
    pub recorded: u64,
}

/// One `record_function` range edge in the traces' span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotation {
    pub stage: &'static str,
    pub name: &'static str,
    pub device: i64,
    pub time_us: i64,
}

/// A finished synthetic run, ready to write.
pub struct Synth {
    pub shape: Shape,
    /// The stacks of every device's program.
    pub pool: StackPool,
    /// Stack (index into `pool.stacks`) of each captured traceback.
    pub captures: Vec<u32>,
    /// One per device, in device order.
    pub devices: Vec<DeviceTrace>,
    pub annotations: Vec<Annotation>,
    /// Whether the run ended in an OOM (the snapshot is then the one an OOM
    /// observer would dump).
    pub ended_in_oom: bool,
    /// The allocator ran with `expandable_segments:True`.
    pub expandable: bool,
}

impl Synth {
    /// Trace events of every device.
    pub fn event_count(&self) -> usize {
        self.devices.iter().map(|d| d.events.len()).sum()
    }
    pub fn segment_count(&self) -> usize {
        self.devices.iter().map(|d| d.segments.len()).sum()
    }
    /// Events recorded in all, on every device.
    pub fn recorded(&self) -> u64 {
        self.devices.iter().map(|d| d.recorded).sum()
    }
}

/// One device while the run is generated.
struct Dev {
    device: i64,
    busy: bool,
    prog: Box<dyn Program>,
    sim: Simulator,
    rng: Rng,
    ring: VecDeque<Event>,
    live: HashMap<Tensor, u64>,
    /// Capture of the block at an address (allocated or pending free).
    block_capture: HashMap<u64, u32>,
    /// Capture of the segment (or mapped run) starting at an address.
    segment_capture: HashMap<u64, u32>,
    /// Blocks freed on the data stream: completed at the first allocation
    /// after their stream caught up (a few requests later).
    deferred: VecDeque<(u64, u64)>,
    recorded: u64,
    requests: u64,
    time: i64,
}

impl Dev {
    fn new(
        device: i64,
        busy: bool,
        prog: Box<dyn Program>,
        cfg: SimConfig,
        opts: &SynthOptions,
    ) -> Dev {
        let mut sim = Simulator::new(cfg, Some(opts.capacity));
        sim.set_address_order(AddressOrder::Down);
        let keep = opts.events.max(1) as usize;
        let rng_seed = opts.seed.wrapping_add((device as u64) << 40);
        Dev {
            device,
            busy,
            prog,
            sim,
            rng: Rng::new(rng_seed.wrapping_mul(31).wrapping_add(7)),
            ring: VecDeque::with_capacity(if busy { keep.min(1 << 24) } else { 0 }),
            live: HashMap::new(),
            block_capture: HashMap::new(),
            segment_capture: HashMap::new(),
            deferred: VecDeque::new(),
            recorded: 0,
            requests: 0,
            time: 1_700_000_000_000_000i64 + (opts.seed % 1_000_000_000) as i64 * 1_000,
        }
    }

    /// Events the allocator model emitted for a request with capture `c`,
    /// with what they change in the captures' bookkeeping.
    fn note(&mut self, emitted: &mut Vec<(SimEvent, u32)>, c: u32) {
        for e in self.sim.take_events() {
            match e.action {
                // A cache flush (OOM retry, empty_cache) completes pending frees.
                SimAction::FreeCompleted => {
                    self.deferred.retain(|d| d.0 != e.addr);
                    self.block_capture.remove(&e.addr);
                }
                SimAction::SegmentAlloc | SimAction::SegmentMap => {
                    self.segment_capture.insert(e.addr, c);
                }
                SimAction::SegmentFree | SimAction::SegmentUnmap => {
                    self.segment_capture.remove(&e.addr);
                }
                _ => {}
            }
            emitted.push((e, c));
        }
    }

    /// Generates and applies the program's next step; returns whether the
    /// model ran out of memory.
    fn step(
        &mut self,
        reqs: &mut Vec<Req>,
        captures: &mut Vec<u32>,
        annotations: &mut Vec<Annotation>,
        keep: usize,
    ) -> bool {
        reqs.clear();
        self.prog.next_step(reqs);
        let recording = self.prog.recording();
        let mut emitted: Vec<(SimEvent, u32)> = Vec::new();
        for r in reqs.drain(..) {
            self.requests += 1;
            let capture_for = |stack: u32, captures: &mut Vec<u32>| {
                if recording {
                    captures.push(stack);
                    (captures.len() - 1) as u32
                } else {
                    NO_CAPTURE
                }
            };
            let mut oom = false;
            emitted.clear();
            match r {
                Req::Gap(us) => {
                    self.time += us as i64;
                    continue;
                }
                Req::Annotate { stage, name } => {
                    if recording {
                        annotations.push(Annotation {
                            stage,
                            name,
                            device: self.device,
                            time_us: self.time,
                        });
                    }
                    continue;
                }
                Req::Alloc {
                    t,
                    size,
                    stream,
                    stack,
                } => {
                    let c = capture_for(stack, captures);
                    while self
                        .deferred
                        .front()
                        .is_some_and(|d| d.1 + 4 <= self.requests)
                    {
                        let (addr, _) = self.deferred.pop_front().expect("checked");
                        self.sim.free_completed(addr).expect("a pending block");
                        self.block_capture.remove(&addr);
                        emitted.extend(self.sim.take_events().into_iter().map(|e| (e, c)));
                    }
                    match self.sim.malloc(size, stream) {
                        Ok(addr) => {
                            self.live.insert(t, addr);
                            self.block_capture.insert(addr, c);
                        }
                        Err(_) => oom = true,
                    }
                    self.note(&mut emitted, c);
                }
                Req::Free {
                    t,
                    stack,
                    deferred: d,
                } => {
                    let c = capture_for(stack, captures);
                    let addr = self
                        .live
                        .remove(&t)
                        .expect("the program frees live tensors only");
                    if d {
                        self.sim.free_requested(addr).expect("a live block");
                        self.deferred.push_back((addr, self.requests));
                    } else {
                        self.sim.free(addr).expect("a live block");
                        self.block_capture.remove(&addr);
                    }
                    emitted.extend(self.sim.take_events().into_iter().map(|e| (e, c)));
                }
                Req::EmptyCache { stack } => {
                    let c = capture_for(stack, captures);
                    self.sim.empty_cache();
                    self.note(&mut emitted, c);
                }
            }
            for &(e, c) in &emitted {
                self.time += 1 + self.rng.below(12) as i64;
                if !recording {
                    continue;
                }
                self.recorded += 1;
                if self.ring.len() == keep {
                    self.ring.pop_front();
                }
                self.ring.push_back(Event {
                    action: e.action,
                    addr: if e.action == SimAction::Oom {
                        e.device_free.unwrap_or(0)
                    } else {
                        e.addr
                    },
                    size: e.size,
                    stream: e.stream,
                    time_us: self.time,
                    capture: c,
                });
            }
            if oom {
                return true;
            }
        }
        false
    }

    fn finish(mut self) -> DeviceTrace {
        let program = self.prog.describe();
        let segments = self
            .sim
            .segments()
            .into_iter()
            .map(|mut s| {
                s.device = self.device;
                let sc = self
                    .segment_capture
                    .get(&s.address)
                    .copied()
                    .unwrap_or(NO_CAPTURE);
                let bc = s
                    .blocks
                    .iter()
                    .map(|b| match b.state {
                        BlockState::Inactive => NO_CAPTURE,
                        _ => self
                            .block_capture
                            .get(&b.address)
                            .copied()
                            .unwrap_or(NO_CAPTURE),
                    })
                    .collect();
                (s, sc, bc)
            })
            .collect();
        DeviceTrace {
            device: self.device,
            busy: self.busy,
            program,
            events: std::mem::take(&mut self.ring).into(),
            segments,
            recorded: self.recorded,
        }
    }
}

/// The devices of a run and what each runs.
fn devices(opts: &SynthOptions) -> (Vec<Dev>, bool) {
    let plain = SimConfig::default();
    let train = |seed: u64, style: Style| -> Box<dyn Program> {
        Box::new(Workload::with_style(seed, opts.capacity, style))
    };
    match opts.shape {
        Shape::Narrow => (
            vec![Dev::new(
                0,
                true,
                train(opts.seed, Style::default()),
                plain,
                opts,
            )],
            false,
        ),
        Shape::ManySites => {
            let style = Style {
                min_layers: 26,
                nested_blocks: true,
                ..Style::default()
            };
            (
                vec![Dev::new(0, true, train(opts.seed, style), plain, opts)],
                false,
            )
        }
        Shape::Fragmented => {
            let prog = Box::new(serving::Serving::new(opts.seed, opts.capacity));
            (vec![Dev::new(0, true, prog, plain, opts)], false)
        }
        Shape::Expandable => {
            let style = Style {
                empty_cache_every: Some(2),
                ..Style::default()
            };
            let cfg = SimConfig::parse("expandable_segments:True").expect("a valid setting");
            (
                vec![Dev::new(0, true, train(opts.seed, style), cfg, opts)],
                true,
            )
        }
        Shape::MultiDevice => {
            let n = opts.devices.max(1);
            let busy = opts.busy_devices.clamp(1, n);
            let devs = (0..n)
                .map(|d| {
                    let prog: Box<dyn Program> = if d < busy {
                        // Data-parallel replicas: one model, each its own data.
                        let style = Style {
                            data_stream: Some(workload::DATA_STREAM + 0x1_0000 * d as i64),
                            step_seed: (d > 0).then_some(opts.seed ^ (0x5245_504c << 8) ^ d as u64),
                            ..Style::default()
                        };
                        train(opts.seed, style)
                    } else {
                        Box::new(light::Light::new(opts.seed, d as i64))
                    };
                    Dev::new(d as i64, d < busy, prog, plain.clone(), opts)
                })
                .collect();
            (devs, false)
        }
    }
}

/// Runs the shape's programs through the allocator model until every busy
/// device's ring buffer has wrapped (or the model runs out of memory).
pub fn generate(opts: &SynthOptions) -> Synth {
    generate_with_progress(opts, |_, _| {})
}

/// [`generate`], calling `progress(recorded, target)` after every step.
pub fn generate_with_progress(opts: &SynthOptions, mut progress: impl FnMut(u64, u64)) -> Synth {
    let (mut devs, expandable) = devices(opts);
    let keep = opts.events.max(1) as usize;
    // Run past the buffer's size so that it wraps, as long traces do.
    let stop_at = opts.events + opts.events / 10 + 1;
    let mut pool = StackPool::new();
    if opts.shape == Shape::ManySites {
        pool.python_backward = true;
        pool.launcher = vec![py(
            "wrapper",
            &format!("{TORCH}/distributed/elastic/multiprocessing/errors/__init__.py"),
            355,
        )];
    }
    let mut captures: Vec<u32> = Vec::new();
    let mut annotations = Vec::new();
    let mut ended_in_oom = false;
    let mut reqs = Vec::new();
    let behind = |devs: &[Dev]| {
        devs.iter()
            .filter(|d| d.busy)
            .map(|d| d.recorded)
            .min()
            .unwrap_or(stop_at)
    };
    'run: while behind(&devs) < stop_at {
        // Devices start each step together (their collectives wait for
        // the slowest).
        let start = devs.iter().map(|d| d.time).max().unwrap_or(0);
        for d in devs.iter_mut() {
            d.time = start;
            std::mem::swap(d.prog.pool(), &mut pool);
            let oom = d.step(&mut reqs, &mut captures, &mut annotations, keep);
            std::mem::swap(d.prog.pool(), &mut pool);
            if oom {
                ended_in_oom = true;
                break 'run;
            }
        }
        progress(behind(&devs).min(stop_at), stop_at);
    }
    let devices: Vec<DeviceTrace> = devs.into_iter().map(Dev::finish).collect();
    let first_time = devices
        .iter()
        .filter_map(|d| d.events.first())
        .map(|e| e.time_us)
        .min()
        .unwrap_or(i64::MAX);
    annotations.retain(|a| a.time_us >= first_time);
    Synth {
        shape: opts.shape,
        pool,
        captures,
        devices,
        annotations,
        ended_in_oom,
        expandable,
    }
}
