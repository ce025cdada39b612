//! Synthetic memory snapshots for tests, fixtures and benchmarks: a training
//! run ([`workload`]) driven through the allocator model ([`crate::sim`]),
//! so that segments, blocks and trace agree and fragmentation emerges from
//! the allocator's own rules, written as CPython writes `_dump_snapshot`
//! ([`pickle_writer`]).
//!
//! What the file holds, as PyTorch 2.11 records it with
//! `_record_memory_history(enabled="all", context="all", stacks="all",
//! max_entries=N)` switched on after the first (warm-up) step:
//!
//! * `segments`: the allocator's final state; blocks allocated while
//!   recording carry the allocation's stack, older ones `[]`.
//! * `device_traces[0]`: the last `N` events (the ring buffer): `alloc`,
//!   `free_requested`, `free_completed` (deferred for tensors used on the
//!   data stream), `segment_alloc`, `segment_free` and `oom`, each with
//!   `time_us`, `compile_context` and `user_metadata`.
//! * `allocator_settings` (the defaults) and `external_annotations`
//!   (optimizer steps).
//!
//! Object sharing follows the binding: one string object per key name, one
//! stack list per captured traceback (an allocation's list is shared by its
//! `alloc` event, its block and, when it made one, its segment and
//! `segment_alloc`; a free's by both free events), frame dicts shared by
//! every list that holds them.
//!
//! Deterministic: the bytes are a function of (events, seed) only.
//!
//! Owns generating and writing; reads nothing.

pub mod pickle_writer;
pub mod stacks;
pub mod workload;

use crate::model::{BlockState, Segment};
use crate::sim::{AddressOrder, SimAction, SimConfig, SimEvent, Simulator};
use pickle_writer::{Ident, Pickler};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use workload::{Req, Tensor, Workload};

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

#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// Trace entries to keep (`max_entries`).
    pub events: u64,
    pub seed: u64,
    /// Device memory the allocator may reserve.
    pub capacity: u64,
}

impl Default for SynthOptions {
    fn default() -> Self {
        SynthOptions {
            events: 10_000,
            seed: 0,
            capacity: 80 << 30,
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

/// A finished synthetic run, ready to write.
pub struct Synth {
    pub workload: Workload,
    /// Stack (index into `workload.pool.stacks`) of each captured traceback.
    pub captures: Vec<u32>,
    /// Oldest first.
    pub events: Vec<Event>,
    /// Final state, sorted by address, with the capture of each segment and
    /// of each of its blocks.
    pub segments: Vec<(Segment, u32, Vec<u32>)>,
    /// (stage, name, time_us) of the `record_function` ranges in the trace's span.
    pub annotations: Vec<(&'static str, &'static str, i64)>,
    /// Whether the run ended in an OOM (the snapshot is then the one an OOM
    /// observer would dump).
    pub ended_in_oom: bool,
    /// Events recorded in all, before the ring buffer dropped the oldest.
    pub recorded: u64,
}

/// Runs the workload through the allocator model until the ring buffer
/// has wrapped (or the model runs out of memory).
pub fn generate(opts: &SynthOptions) -> Synth {
    generate_with_progress(opts, |_, _| {})
}

/// [`generate`], calling `progress(recorded, target)` after every step.
pub fn generate_with_progress(opts: &SynthOptions, mut progress: impl FnMut(u64, u64)) -> Synth {
    let mut w = Workload::new(opts.seed, opts.capacity);
    let mut rng = Rng::new(opts.seed.wrapping_mul(31).wrapping_add(7));
    let mut sim = Simulator::new(SimConfig::default(), Some(opts.capacity));
    sim.set_address_order(AddressOrder::Down);
    let keep = opts.events.max(1) as usize;
    // Run past the buffer's size so that it wraps, as long traces do.
    let stop_at = opts.events + opts.events / 10 + 1;
    let mut ring: VecDeque<Event> = VecDeque::with_capacity(keep.min(1 << 24));
    let mut captures: Vec<u32> = Vec::new();
    let mut live: HashMap<Tensor, u64> = HashMap::new();
    // Capture of the block at an address (allocated or pending free).
    let mut block_capture: HashMap<u64, u32> = HashMap::new();
    let mut segment_capture: HashMap<u64, u32> = HashMap::new();
    // Blocks freed on the data stream: completed at the first allocation
    // after their stream caught up (a few requests later).
    let mut deferred: VecDeque<(u64, u64)> = VecDeque::new();
    let mut annotations = Vec::new();
    let mut recorded = 0u64;
    let mut requests = 0u64;
    let mut time = 1_700_000_000_000_000i64 + (opts.seed % 1_000_000_000) as i64 * 1_000;
    let mut ended_in_oom = false;
    let mut reqs = Vec::new();
    'run: while recorded < stop_at {
        reqs.clear();
        w.next_step(&mut reqs);
        // Recording starts after the warm-up step.
        let recording = w.step > 1;
        for r in reqs.drain(..) {
            requests += 1;
            let capture_for = |stack: u32, captures: &mut Vec<u32>| {
                if recording {
                    captures.push(stack);
                    (captures.len() - 1) as u32
                } else {
                    NO_CAPTURE
                }
            };
            let mut emitted: Vec<(SimEvent, u32)> = Vec::new();
            match r {
                Req::Gap(us) => {
                    time += us as i64;
                    continue;
                }
                Req::Annotate { stage, name } => {
                    if recording {
                        annotations.push((stage, name, time));
                    }
                    continue;
                }
                Req::Alloc {
                    t,
                    size,
                    stream,
                    stack,
                } => {
                    let c = capture_for(stack, &mut captures);
                    while deferred.front().is_some_and(|d| d.1 + 4 <= requests) {
                        let (addr, _) = deferred.pop_front().expect("checked");
                        sim.free_completed(addr).expect("a pending block");
                        block_capture.remove(&addr);
                        emitted.extend(sim.take_events().into_iter().map(|e| (e, c)));
                    }
                    match sim.malloc(size, stream) {
                        Ok(addr) => {
                            live.insert(t, addr);
                            block_capture.insert(addr, c);
                        }
                        Err(_) => ended_in_oom = true,
                    }
                    for e in sim.take_events() {
                        match e.action {
                            // A cache flush (OOM retry) completes pending frees.
                            SimAction::FreeCompleted => {
                                deferred.retain(|d| d.0 != e.addr);
                                block_capture.remove(&e.addr);
                            }
                            SimAction::SegmentAlloc => {
                                segment_capture.insert(e.addr, c);
                            }
                            SimAction::SegmentFree => {
                                segment_capture.remove(&e.addr);
                            }
                            _ => {}
                        }
                        emitted.push((e, c));
                    }
                }
                Req::Free {
                    t,
                    stack,
                    deferred: d,
                } => {
                    let c = capture_for(stack, &mut captures);
                    let addr = live
                        .remove(&t)
                        .expect("the workload frees live tensors only");
                    if d {
                        sim.free_requested(addr).expect("a live block");
                        deferred.push_back((addr, requests));
                    } else {
                        sim.free(addr).expect("a live block");
                        block_capture.remove(&addr);
                    }
                    emitted.extend(sim.take_events().into_iter().map(|e| (e, c)));
                }
            }
            for (e, c) in emitted {
                time += 1 + rng.below(12) as i64;
                if !recording {
                    continue;
                }
                recorded += 1;
                if ring.len() == keep {
                    ring.pop_front();
                }
                ring.push_back(Event {
                    action: e.action,
                    addr: if e.action == SimAction::Oom {
                        e.device_free.unwrap_or(0)
                    } else {
                        e.addr
                    },
                    size: e.size,
                    stream: e.stream,
                    time_us: time,
                    capture: c,
                });
            }
            if ended_in_oom {
                break 'run;
            }
        }
        progress(recorded.min(stop_at), stop_at);
    }
    let events: Vec<Event> = ring.into();
    let first_time = events.first().map_or(time, |e| e.time_us);
    annotations.retain(|a| a.2 >= first_time);
    let segments = sim
        .segments()
        .into_iter()
        .map(|s| {
            let sc = segment_capture
                .get(&s.address)
                .copied()
                .unwrap_or(NO_CAPTURE);
            let bc = s
                .blocks
                .iter()
                .map(|b| match b.state {
                    BlockState::Inactive => NO_CAPTURE,
                    _ => block_capture.get(&b.address).copied().unwrap_or(NO_CAPTURE),
                })
                .collect();
            (s, sc, bc)
        })
        .collect();
    Synth {
        workload: w,
        captures,
        events,
        segments,
        annotations,
        ended_in_oom,
        recorded,
    }
}

// ---- writing ---------------------------------------------------------------

/// Identity spaces of the shared objects.
const KEY: u64 = 1 << 56;
const ACTION: u64 = 2 << 56;
const FRAME: u64 = 3 << 56;
const CAPTURE: u64 = 4 << 56;
const MISC: u64 = 5 << 56;
const EMPTY_FRAMES: Ident = Ident::Shared(MISC);

/// The binding's key strings (one object each).
const KEYS: &[&str] = &[
    "device",
    "address",
    "total_size",
    "allocated_size",
    "active_size",
    "requested_size",
    "stream",
    "segment_type",
    "segment_pool_id",
    "is_expandable",
    "frames",
    "blocks",
    "size",
    "state",
    "action",
    "addr",
    "time_us",
    "compile_context",
    "user_metadata",
    "device_free",
    "name",
    "filename",
    "line",
    "stage",
];

fn key<W: Write>(p: &mut Pickler<W>, k: &str) -> io::Result<()> {
    let i = KEYS.iter().position(|x| *x == k).expect("a known key");
    p.str(Ident::Shared(KEY + i as u64), k)
}

fn shared_str<W: Write>(p: &mut Pickler<W>, space: u64, n: u64, s: &str) -> io::Result<()> {
    p.str(Ident::Shared(space + n), s)
}

fn frames<W: Write>(p: &mut Pickler<W>, s: &Synth, capture: u32) -> io::Result<()> {
    if capture == NO_CAPTURE {
        return p.list(EMPTY_FRAMES, 0, |_, _| Ok(()));
    }
    let stack = &s.workload.pool.stacks[s.captures[capture as usize] as usize];
    p.list(
        Ident::Shared(CAPTURE + capture as u64),
        stack.len(),
        |p, i| {
            let f = stack[i];
            let fr = &s.workload.pool.frames[f as usize];
            // `py_symbolize`: name, filename, line; fresh strings per frame.
            p.dict(Ident::Shared(FRAME + f as u64), 3, |p, k| match k {
                0 => {
                    key(p, "name")?;
                    p.str(Ident::Fresh, &fr.name)
                }
                1 => {
                    key(p, "filename")?;
                    p.str(Ident::Fresh, &fr.filename)
                }
                _ => {
                    key(p, "line")?;
                    p.int(fr.line as i64)
                }
            })
        },
    )
}

fn segment<W: Write>(
    p: &mut Pickler<W>,
    s: &Synth,
    (seg, sc, bcs): &(Segment, u32, Vec<u32>),
) -> io::Result<()> {
    // Frames gathered later are set after `blocks`; an empty list in place.
    let late = *sc != NO_CAPTURE;
    p.dict(Ident::Fresh, 12, |p, i| match i {
        0 => {
            key(p, "device")?;
            p.int(0)
        }
        1 => {
            key(p, "address")?;
            p.int(seg.address as i64)
        }
        2 => {
            key(p, "total_size")?;
            p.int(seg.total_size as i64)
        }
        3 => {
            key(p, "allocated_size")?;
            p.int(seg.allocated_size.unwrap_or(0) as i64)
        }
        4 => {
            key(p, "active_size")?;
            p.int(seg.active_size.unwrap_or(0) as i64)
        }
        5 => {
            key(p, "requested_size")?;
            p.int(seg.requested_size.unwrap_or(0) as i64)
        }
        6 => {
            key(p, "stream")?;
            p.int(seg.stream)
        }
        7 => {
            key(p, "segment_type")?;
            let t = seg.segment_type.as_str();
            shared_str(p, MISC, 1 + (t == "small") as u64, t)
        }
        8 => {
            key(p, "segment_pool_id")?;
            let (a, b) = seg.pool();
            p.tuple(Ident::Fresh, 2, |p, j| p.int(if j == 0 { a } else { b }))
        }
        9 => {
            key(p, "is_expandable")?;
            p.bool(seg.expandable())
        }
        10 | 11 if (i == 10) == late => {
            key(p, "blocks")?;
            p.list(Ident::Fresh, seg.blocks.len(), |p, j| {
                let b = &seg.blocks[j];
                p.dict(Ident::Fresh, 5, |p, k| match k {
                    0 => {
                        key(p, "address")?;
                        p.int(b.address as i64)
                    }
                    1 => {
                        key(p, "size")?;
                        p.int(b.size as i64)
                    }
                    2 => {
                        key(p, "requested_size")?;
                        p.int(b.requested_size.unwrap_or(0) as i64)
                    }
                    3 => {
                        key(p, "state")?;
                        let st = b.state.as_str();
                        let n = match b.state {
                            BlockState::ActiveAllocated => 3,
                            BlockState::ActivePendingFree => 4,
                            BlockState::Inactive => 5,
                        };
                        shared_str(p, MISC, n, st)
                    }
                    _ => {
                        key(p, "frames")?;
                        frames(p, s, bcs[j])
                    }
                })
            })
        }
        _ => {
            key(p, "frames")?;
            frames(p, s, *sc)
        }
    })
}

fn event<W: Write>(p: &mut Pickler<W>, s: &Synth, e: &Event) -> io::Result<()> {
    let n = if e.capture == NO_CAPTURE { 7 } else { 8 };
    p.dict(Ident::Fresh, n, |p, i| match i {
        0 => {
            key(p, "action")?;
            shared_str(p, ACTION, e.action as u64, e.action.name())
        }
        1 => {
            key(
                p,
                if e.action == SimAction::Oom {
                    "device_free"
                } else {
                    "addr"
                },
            )?;
            p.int(e.addr as i64)
        }
        2 => {
            key(p, "size")?;
            p.int(e.size as i64)
        }
        3 => {
            key(p, "stream")?;
            p.int(e.stream)
        }
        4 => {
            key(p, "time_us")?;
            p.int(e.time_us)
        }
        5 => {
            key(p, "compile_context")?;
            p.str(Ident::Fresh, "N/A")
        }
        6 => {
            key(p, "user_metadata")?;
            p.str(Ident::Fresh, "")
        }
        _ => {
            key(p, "frames")?;
            frames(p, s, e.capture)
        }
    })
}

fn allocator_settings<W: Write>(p: &mut Pickler<W>) -> io::Result<()> {
    let f = Ident::Fresh;
    p.dict(f, 9, |p, i| match i {
        0 => {
            p.str(f, "PYTORCH_CUDA_ALLOC_CONF")?;
            p.str(f, "")
        }
        1 => {
            p.str(f, "max_split_size")?;
            p.int(-1)
        }
        2 => {
            p.str(f, "garbage_collection_threshold")?;
            p.float(0.0)
        }
        3 => {
            p.str(f, "expandable_segments")?;
            p.bool(false)
        }
        4 => {
            p.str(f, "pinned_num_register_threads")?;
            p.int(1)
        }
        5 => {
            p.str(f, "release_lock_on_cudamalloc")?;
            p.bool(false)
        }
        6 => {
            p.str(f, "pinned_use_cuda_host_register")?;
            p.bool(false)
        }
        7 => {
            p.str(f, "graph_capture_record_stream_reuse")?;
            p.bool(false)
        }
        _ => {
            p.str(f, "roundup_power2_divisions")?;
            p.dict(f, 16, |p, j| {
                p.str(f, &(1u64 << j).to_string())?;
                p.int(0)
            })
        }
    })
}

/// Writes the snapshot as CPython's `pickle.dump(snapshot, f)` (protocol 4)
/// would; returns the bytes written.
pub fn write_pickle<W: Write>(s: &Synth, out: W) -> io::Result<u64> {
    let mut p = Pickler::new(out);
    let f = Ident::Fresh;
    p.dict(f, 4, |p, i| match i {
        0 => {
            p.str(f, "segments")?;
            p.list(f, s.segments.len(), |p, j| segment(p, s, &s.segments[j]))
        }
        1 => {
            p.str(f, "device_traces")?;
            p.list(f, 1, |p, _| {
                p.list(f, s.events.len(), |p, j| event(p, s, &s.events[j]))
            })
        }
        2 => {
            p.str(f, "allocator_settings")?;
            allocator_settings(p)
        }
        _ => {
            p.str(f, "external_annotations")?;
            p.list(f, s.annotations.len(), |p, j| {
                let (stage, name, t) = s.annotations[j];
                p.dict(f, 4, |p, k| match k {
                    0 => {
                        key(p, "stage")?;
                        p.str(f, stage)
                    }
                    1 => {
                        key(p, "name")?;
                        p.str(f, name)
                    }
                    2 => {
                        key(p, "device")?;
                        p.int(0)
                    }
                    _ => {
                        key(p, "time_us")?;
                        p.int(t)
                    }
                })
            })
        }
    })?;
    Ok(p.finish()?.1)
}
