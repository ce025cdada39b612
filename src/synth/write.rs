//! The synthetic snapshot written as CPython writes `_dump_snapshot`: the
//! key strings, frames lists, segments, trace entries and settings, each
//! shared object written once and memoized as the binding shares it.

use super::pickle_writer::{Ident, Pickler};
use super::*;
use std::io::{self, Write};

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

pub(super) fn key<W: Write>(p: &mut Pickler<W>, k: &str) -> io::Result<()> {
    let i = KEYS.iter().position(|x| *x == k).expect("a known key");
    p.str(Ident::Shared(KEY + i as u64), k)
}

/// A dict item of an integer under one of the binding's keys.
fn int_item<W: Write>(p: &mut Pickler<W>, (k, v): (&str, i64)) -> io::Result<()> {
    key(p, k)?;
    p.int(v)
}

pub(super) fn shared_str<W: Write>(
    p: &mut Pickler<W>,
    space: u64,
    n: u64,
    s: &str,
) -> io::Result<()> {
    p.str(Ident::Shared(space + n), s)
}

pub(super) fn frames<W: Write>(p: &mut Pickler<W>, s: &Synth, capture: u32) -> io::Result<()> {
    if capture == NO_CAPTURE {
        return p.list(EMPTY_FRAMES, 0, |_, _| Ok(()));
    }
    let stack = &s.pool.stacks[s.captures[capture as usize] as usize];
    p.list(
        Ident::Shared(CAPTURE + capture as u64),
        stack.len(),
        |p, i| {
            let f = stack[i];
            let fr = &s.pool.frames[f as usize];
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
                _ => int_item(p, ("line", fr.line as i64)),
            })
        },
    )
}

pub(super) fn segment<W: Write>(
    p: &mut Pickler<W>,
    s: &Synth,
    (seg, sc, bcs): &(Segment, u32, Vec<u32>),
) -> io::Result<()> {
    // Frames gathered later are set after `blocks`; an empty list in place.
    let late = *sc != NO_CAPTURE;
    let ints = [
        ("device", seg.device),
        ("address", seg.address as i64),
        ("total_size", seg.total_size as i64),
        ("allocated_size", seg.allocated_size.unwrap_or(0) as i64),
        ("active_size", seg.active_size.unwrap_or(0) as i64),
        ("requested_size", seg.requested_size.unwrap_or(0) as i64),
        ("stream", seg.stream),
    ];
    p.dict(Ident::Fresh, 12, |p, i| match i {
        0..=6 => int_item(p, ints[i]),
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
                let ints = [
                    ("address", b.address as i64),
                    ("size", b.size as i64),
                    ("requested_size", b.requested_size.unwrap_or(0) as i64),
                ];
                p.dict(Ident::Fresh, 5, |p, k| match k {
                    0..=2 => int_item(p, ints[k]),
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

pub(super) fn event<W: Write>(p: &mut Pickler<W>, s: &Synth, e: &Event) -> io::Result<()> {
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
        2 => int_item(p, ("size", e.size as i64)),
        3 => int_item(p, ("stream", e.stream)),
        4 => int_item(p, ("time_us", e.time_us)),
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

pub(super) fn allocator_settings<W: Write>(p: &mut Pickler<W>, expandable: bool) -> io::Result<()> {
    let f = Ident::Fresh;
    p.dict(f, 9, |p, i| match i {
        0 => {
            p.str(f, "PYTORCH_CUDA_ALLOC_CONF")?;
            p.str(
                f,
                if expandable {
                    "expandable_segments:True"
                } else {
                    ""
                },
            )
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
            p.bool(expandable)
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
            let all: Vec<&(Segment, u32, Vec<u32>)> =
                s.devices.iter().flat_map(|d| &d.segments).collect();
            p.list(f, all.len(), |p, j| segment(p, s, all[j]))
        }
        1 => {
            p.str(f, "device_traces")?;
            p.list(f, s.devices.len(), |p, d| {
                let events = &s.devices[d].events;
                p.list(f, events.len(), |p, j| event(p, s, &events[j]))
            })
        }
        2 => {
            p.str(f, "allocator_settings")?;
            allocator_settings(p, s.expandable)
        }
        _ => {
            p.str(f, "external_annotations")?;
            p.list(f, s.annotations.len(), |p, j| {
                let a = s.annotations[j];
                p.dict(f, 4, |p, k| match k {
                    0 => {
                        key(p, "stage")?;
                        p.str(f, a.stage)
                    }
                    1 => {
                        key(p, "name")?;
                        p.str(f, a.name)
                    }
                    2 => {
                        key(p, "device")?;
                        p.int(a.device)
                    }
                    _ => {
                        key(p, "time_us")?;
                        p.int(a.time_us)
                    }
                })
            })
        }
    })?;
    Ok(p.finish()?.1)
}
