//! Frames lists whose frames are dicts written anew at every entry, as a
//! file holds them when the program that wrote it did not share them as
//! PyTorch does (a converter, a generator of its own): read to the model
//! of the same trace with shared frames, as the general machine reads
//! them, with a node for each distinct frame rather than for each one
//! written, and within the file's size in memory.

use crate::util::*;
use fragscope::input::pickle;
use fragscope::input::snapshot::TraceSink;
use fragscope::input::value::Node;
use fragscope::synth::pickle_writer::{Ident, Pickler};
use std::io;

/// How a trace's frames are written.
#[derive(Clone, Copy, Debug, PartialEq)]
enum How {
    /// Each call site's frames and list written once, then referenced.
    Shared,
    /// Every entry's frames built anew; their strings shared.
    Fresh,
    /// And every string too.
    FreshStrings,
    /// One new string object per entry, used by each of its frames (a
    /// reference from a frame to a value of the same list).
    StringPerEntry,
    /// Shared at even entries, anew at odd ones.
    Mixed,
    /// In one list, frames shared (even) and frames anew (odd).
    HalfShared,
    /// Anew, with keys the model does not read: None, a float, a bool.
    Extras,
}

const SITES: usize = 7;
const DEPTH: usize = 12;

/// Frame `j` of call site `s`: (filename, line, name).
fn frame(s: usize, j: usize) -> (String, i64, String) {
    (
        format!("/src/model/layer_{}.py", (s + j) % 5),
        (10 * j + s) as i64,
        format!("fn_{j}"),
    )
}

fn frames(p: &mut Pickler<Vec<u8>>, k: usize, how: How) -> io::Result<()> {
    let s = k % SITES;
    let depth = DEPTH - s;
    let shared = how == How::Shared || (how == How::Mixed && k.is_multiple_of(2));
    let list = match shared {
        true => Ident::Shared(1000 + s as u64),
        false => Ident::Fresh,
    };
    p.list(list, depth, |p, j| {
        let (file, line, name) = frame(s, j);
        let dict = match shared || (how == How::HalfShared && j % 2 == 0) {
            true => Ident::Shared(2000 + (s * DEPTH + j) as u64),
            false => Ident::Fresh,
        };
        let extras = if how == How::Extras { 3 } else { 0 };
        p.dict(dict, 3 + extras, |p, f| match f {
            0 => {
                p.str(Ident::Shared(10), "filename")?;
                match how {
                    How::FreshStrings => p.str(Ident::Fresh, &file),
                    How::StringPerEntry if j > 0 => {
                        p.str(Ident::Shared(1_000_000 + k as u64), &file_of(s))
                    }
                    _ => p.str(Ident::Shared(3000 + (s + j) as u64 % 5), &file),
                }
            }
            1 => {
                p.str(Ident::Shared(11), "line")?;
                p.int(line)
            }
            2 => {
                p.str(Ident::Shared(12), "name")?;
                match how {
                    How::FreshStrings => p.str(Ident::Fresh, &name),
                    _ => p.str(Ident::Shared(4000 + j as u64), &name),
                }
            }
            3 => {
                p.str(Ident::Shared(13), "column")?;
                p.float(j as f64 / 2.0)
            }
            4 => {
                p.str(Ident::Shared(14), "inlined")?;
                p.bool(j % 3 == 0)
            }
            _ => {
                p.str(Ident::Shared(15), "note")?;
                p.none()
            }
        })
    })
}

/// The one file name every frame of a [`How::StringPerEntry`] entry names
/// but the first.
fn file_of(s: usize) -> String {
    format!("/src/entry_{s}.py")
}

/// A trace of `n` allocations (see [`alloc_item`]), each with the frames
/// of call site `k % SITES`.
fn trace(n: usize, how: How) -> Vec<u8> {
    one_trace_pickle(n, 4, |p, k, f| match f {
        0..=2 => alloc_item(p, k, f),
        _ => {
            p.str(Ident::Shared(4), "frames")?;
            frames(p, k, how)
        }
    })
}

fn dict_nodes(bytes: &[u8]) -> usize {
    let mut sink = TraceSink::new();
    let d = pickle::decode_from(bytes, &mut sink).unwrap();
    d.arena
        .nodes
        .iter()
        .filter(|n| matches!(n, Node::Dict(_)))
        .count()
}

/// Every way of writing the frames gives the general machine's model, and
/// (but for the one whose frames name other files) the model of the same
/// trace with shared frames; a frame written again and again is one node.
#[test]
fn frames_built_anew_read_as_shared_frames_read() {
    const N: usize = 3000;
    let (shared, _) = fast(&trace(N, How::Shared)).unwrap();
    for how in [
        How::Shared,
        How::Fresh,
        How::FreshStrings,
        How::StringPerEntry,
        How::Mixed,
        How::HalfShared,
        How::Extras,
    ] {
        let bytes = trace(N, how);
        let name = format!("{how:?}");
        assert!(fast_path_agrees(&name, &bytes), "{name}: not decoded");
        let (model, taken) = fast(&bytes).unwrap();
        assert_eq!(taken, N, "{name}: entries taken while reading");
        if matches!(
            how,
            How::Fresh | How::FreshStrings | How::Mixed | How::HalfShared
        ) {
            assert!(model == shared, "{name}: not the model of shared frames");
        }
        // A node or two a distinct frame (one the general machine made,
        // for an entry the fast path leaves to it, and one made here), not
        // one a frame written (N * 9 on average).
        let dicts = dict_nodes(&bytes);
        let distinct = (0..SITES).map(|s| DEPTH - s).sum::<usize>();
        assert!(
            dicts <= 2 * distinct + 10,
            "{name}: {dicts} dict nodes for {distinct} distinct frames"
        );
    }
}

/// Python's own pickler at protocols 2, 3 and 5: at 2 and 3 every value is
/// memoized at an index the bytes spell (BINPUT), and strings are
/// BINUNICODE; the same lists are found again all the same.
#[test]
fn frames_built_anew_read_the_same_at_every_protocol() {
    const N: usize = 2000;
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("fresh.pickle");
    std::fs::write(&src, trace(N, How::Fresh)).unwrap();
    let (shared, _) = fast(&trace(N, How::Shared)).unwrap();
    for proto in [2, 3, 5] {
        let out = d.path().join(format!("p{proto}.pickle"));
        let script = format!(
            "import pickle,sys; pickle.dump(pickle.load(open(sys.argv[1],'rb')), \
             open(sys.argv[2],'wb'), protocol={proto})"
        );
        let args = [
            "-c".as_ref(),
            script.as_ref(),
            src.as_os_str(),
            out.as_os_str(),
        ];
        if python3(&args, &format!("protocol {proto} is")).is_none() {
            return;
        }
        let bytes = std::fs::read(&out).unwrap();
        let name = format!("protocol {proto}");
        assert!(fast_path_agrees(&name, &bytes), "{name}: not decoded");
        let (model, taken) = fast(&bytes).unwrap();
        assert_eq!(taken, N, "{name}");
        assert!(model == shared, "{name}: not the model of shared frames");
        let distinct = (0..SITES).map(|s| DEPTH - s).sum::<usize>();
        let dicts = dict_nodes(&bytes);
        assert!(dicts <= 2 * distinct + 10, "{name}: {dicts} dict nodes");
    }
}

/// A frame shares its node with every equal frame read after it, so
/// changing one through the memo (which PyTorch never writes) is refused
/// rather than changing them all.
#[test]
fn a_frame_changed_after_its_entry_was_read_is_refused() {
    // {"device_traces": [[{"action": "alloc", "frames": [{"filename": "a.py"}]}]]},
    // then SETITEM into the frame dict (memo 9) through the memo.
    let p = b"\x80\x04}\x94\x8c\x0ddevice_traces\x94]\x94]\x94(}\x94(\x8c\x06action\x94\x8c\x05alloc\x94\x8c\x06frames\x94]\x94(}\x94(\x8c\x08filename\x94\x8c\x04a.py\x94ueuh\x09\x8c\x04line\x94K\x02s0eas.";
    let general_says = general(p);
    assert!(general_says.is_ok(), "{general_says:?}");
    let e = fast(p).map(|x| x.0).unwrap_err();
    assert!(e.contains("after a trace entry used it"), "{e}");
    // Without the SETITEM, both read it alike.
    let q = b"\x80\x04}\x94\x8c\x0ddevice_traces\x94]\x94]\x94(}\x94(\x8c\x06action\x94\x8c\x05alloc\x94\x8c\x06frames\x94]\x94(}\x94(\x8c\x08filename\x94\x8c\x04a.py\x94ueueas.";
    assert!(fast_path_agrees("one frame", q));
}

/// 300 000 entries whose frames are all written anew (about 50 MB): the
/// model costs no node a frame written, only its memo entry (4 bytes each,
/// 9 an entry on average). Measured above the same trace with shared
/// frames, at most 64 bytes an entry (46 here); read as the general
/// machine reads them, with a node for every frame and line written, it
/// took about 1 400, eight times the file.
#[test]
fn frames_built_anew_cost_no_memory_a_frame() {
    const N: usize = 300_000;
    let d = tempfile::tempdir().unwrap();
    let mut rss = Vec::new();
    for how in [How::Shared, How::Fresh] {
        let f = d.path().join(format!("{how:?}.pickle"));
        std::fs::write(&f, trace(N, how)).unwrap();
        let (code, peak) = peak_rss(["stats".as_ref(), f.as_os_str()]);
        assert_eq!(code, 0);
        rss.push(peak);
    }
    let per_entry = rss[1].saturating_sub(rss[0]) / N as u64;
    eprintln!("frames built anew: {per_entry} bytes an entry above shared frames");
    assert!(
        per_entry <= 64,
        "{per_entry} bytes an entry above shared frames (peak RSS {rss:?})"
    );
}

/// Byte flips and cuts in the trace of files whose frames are written
/// anew: the fast path gives the general machine's model or its error,
/// or refuses a SETITEM on a frame it shares (which the general machine,
/// keeping a dict per frame written, lets through).
#[test]
fn a_changed_file_of_frames_built_anew_reads_as_the_general_machine_reads_it() {
    let refused = |e: &str| e.contains("SETITEM on a frame after a trace entry used it");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut errors = 0;
    for how in [
        How::Fresh,
        How::FreshStrings,
        How::StringPerEntry,
        How::HalfShared,
    ] {
        let bytes = trace(800, how);
        let from = bytes.len() / 8;
        for k in 0..150 {
            let at = from + (crate::decoder::xorshift(&mut state) as usize) % (bytes.len() - from);
            let mut b = bytes.clone();
            if k % 10 == 0 {
                b.truncate(at);
            } else {
                b[at] ^= 1 << (crate::decoder::xorshift(&mut state) % 8);
            }
            let name = format!("{how:?}: change {k} at byte {at}");
            match (general(&b), fast(&b)) {
                (Ok((a, ta)), Ok((f, tf))) => {
                    assert!(a == f, "{name}: the fast path changes the model");
                    assert_eq!(ta, tf, "{name}: entries taken");
                }
                (Err(a), Err(f)) => {
                    assert!(a == f || refused(&f), "{name}: {a} vs {f}");
                    errors += 1;
                }
                (Ok(_), Err(f)) if refused(&f) => errors += 1,
                (a, f) => panic!("{name}: {:?} vs {:?}", a.err(), f.err()),
            }
        }
    }
    assert!(
        errors > 30,
        "only {errors} of the changed files fail to decode"
    );
}
