//! A segment's blocks are taken while the pickle is read, as trace entries
//! are: the same model as decoding to the arena first (every layout here,
//! odd ones included, and every real file), one node per block list
//! rather than a dict and its values per block, and a peak memory that
//! grows with the blocks by about the model's own size.

use crate::util::*;
use fragscope::input::pickle::{self, NoSink};
use fragscope::input::snapshot::{TraceSink, from_arena};
use fragscope::input::value::Node;
use fragscope::model::{Setting, Snapshot};
use std::path::{Path, PathBuf};

/// Writes snapshots with Python's own pickler, one per layout
/// (`scripts/segment_layouts.py`), into `dir`; `None` (with a note) where
/// python3 cannot run outside CI.
fn write_layouts(dir: &Path, segs: usize, per: usize) -> Option<Vec<PathBuf>> {
    let script = root().join("scripts/segment_layouts.py");
    let (segs, per) = (segs.to_string(), per.to_string());
    let args = [
        script.as_os_str(),
        dir.as_os_str(),
        segs.as_ref(),
        per.as_ref(),
    ];
    python3(&args, "blocks are")?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    Some(files)
}

fn slow(bytes: &[u8]) -> Result<Snapshot, String> {
    let d = pickle::decode_from(bytes, &mut NoSink).map_err(|e| e.to_string())?;
    from_arena(&d.arena, d.root).map_err(|e| e.to_string())
}

fn blocks_of(s: &Snapshot) -> usize {
    s.segments.iter().map(|s| s.blocks.len()).sum()
}

#[test]
fn blocks_taken_while_reading_give_the_arena_model_in_every_layout() {
    let d = tempfile::tempdir().unwrap();
    let Some(files) = write_layouts(d.path(), 300, 12) else {
        return;
    };
    assert_eq!(files.len(), 14);
    for f in &files {
        let name = name_of(f);
        let bytes = std::fs::read(f).unwrap();
        let mut sink = TraceSink::new();
        let decoded = pickle::decode_from(&bytes[..], &mut sink);
        let taken = sink.blocks();
        let fast = decoded.map_err(|e| e.to_string()).and_then(|d| {
            fragscope::input::snapshot::from_arena_with(&d.arena, d.root, sink)
                .map_err(|e| e.to_string())
        });
        // The general machine with the sink takes them the same way.
        fast_path_agrees(&name, &bytes);
        match (slow(&bytes), fast) {
            (Ok(a), Ok(b)) if name != "block-in-settings.pickle" => {
                assert!(a == b, "{name}: the model differs from the arena's");
                let all = blocks_of(&a);
                eprintln!("{name}: {all} blocks, {taken} taken while reading");
                match name.as_str() {
                    "legacy.pickle" => assert_eq!(taken, 0, "{name}"),
                    // Each block, or each but the ones named twice.
                    "twice.pickle" => assert!(taken > all * 3 / 4, "{name}: {taken}"),
                    // One list named twenty times, within the expansion budget.
                    "named-20.pickle" => assert_eq!(taken * 20, all, "{name}"),
                    // A block the sink leaves to the arena leaves the rest
                    // of its batch there too: the blocks before it are taken.
                    "mixed.pickle" => assert!(taken > all / 10 && taken < all, "{name}: {taken}"),
                    _ => assert_eq!(taken, all, "{name}"),
                }
            }
            // A segment's block named by a key the model keeps as a
            // settings value (PyTorch never writes this) is named, not
            // shown, as a trace entry there is: the rest is the same.
            (Ok(mut a), Ok(b)) if name == "block-in-settings.pickle" => {
                let shown = |s: &Snapshot| s.unknown_keys.iter().find(|k| k.0 == "extra").cloned();
                assert!(matches!(shown(&a), Some((_, Setting::Map(_)))), "{name}");
                assert_eq!(
                    shown(&b),
                    Some((
                        "extra".to_string(),
                        Setting::Str("<not representable>".into())
                    )),
                    "{name}"
                );
                a.unknown_keys = b.unknown_keys.clone();
                assert!(a == b, "{name}: differs elsewhere too");
            }
            (Err(a), Err(b)) => {
                eprintln!("{name}: refused: {b}");
                match name.as_str() {
                    "bad-state.pickle" | "state-twice.pickle" => {
                        assert_eq!(a, b, "{name}: different errors")
                    }
                    // PyTorch never names a segment's block there; the
                    // error says what was found.
                    "block-as-entry.pickle" => {
                        assert!(
                            b.contains("a segment's block where a trace entry belongs"),
                            "{b}"
                        )
                    }
                    _ => panic!("{name}: refused: {a} / {b}"),
                }
            }
            (Ok(_), Err(b)) if name == "block-as-entry.pickle" => {
                assert!(
                    b.contains("a segment's block where a trace entry belongs"),
                    "{b}"
                )
            }
            (a, b) => panic!("{name}: {:?} vs {:?}", a.err(), b.err()),
        }
    }
}

#[test]
fn a_block_list_is_one_node_and_a_block_none() {
    let d = tempfile::tempdir().unwrap();
    let Some(files) = write_layouts(d.path(), 400, 10) else {
        return;
    };
    let plain = files.iter().find(|f| name_of(f) == "plain.pickle").unwrap();
    let bytes = std::fs::read(plain).unwrap();
    let mut sink = TraceSink::new();
    let a = pickle::decode_from(&bytes[..], &mut sink).unwrap().arena;
    let blocks = sink.blocks();
    let lists = (a.nodes.iter())
        .filter(|n| matches!(n, Node::Trace(..)))
        .count();
    let dicts = (a.nodes.iter())
        .filter(|n| matches!(n, Node::Dict(_) | Node::Record(..)))
        .count();
    assert!(blocks > 3000, "{blocks} blocks");
    assert_eq!(lists, 400, "one list node per segment's blocks");
    // The segments, the frames, the top-level dict and the settings.
    assert!(dicts < 500, "{dicts} dict nodes for {blocks} blocks");
    // A segment's own values have nodes, about a dozen; its blocks none.
    let arena = pickle::decode_from(&bytes[..], &mut NoSink).unwrap().arena;
    assert!(
        a.nodes.len() <= 12 * 400 + 200 && a.nodes.len() * 4 < arena.nodes.len(),
        "{} nodes for {blocks} blocks ({} in the arena alone)",
        a.nodes.len(),
        arena.nodes.len()
    );
}

#[test]
fn flipped_bytes_of_a_segments_file_read_as_the_general_machine_reads_them() {
    let d = tempfile::tempdir().unwrap();
    let Some(files) = write_layouts(d.path(), 40, 6) else {
        return;
    };
    let mut rng = Rng::new(24);
    let mut decoded = 0;
    for name in ["plain.pickle", "with-trace.pickle", "mixed.pickle"] {
        let f = files.iter().find(|f| name_of(f) == name).unwrap();
        let bytes = std::fs::read(f).unwrap();
        for k in 0..150 {
            let flipped = rng.flipped(&bytes, 1 + k % 3);
            let cut = match k % 10 {
                9 => &flipped[..rng.below(flipped.len() as u64) as usize],
                _ => &flipped[..],
            };
            decoded += fast_path_agrees(&format!("{name} flip {k}"), cut) as usize;
        }
    }
    assert!(decoded > 40, "only {decoded} flipped files decoded");
}

#[test]
fn every_block_of_the_real_files_is_taken_while_reading() {
    let Some(files) = real_pickles() else { return };
    let mut total = 0;
    for f in files {
        let name = name_of(&f);
        let bytes = std::fs::read(&f).unwrap();
        let mut sink = TraceSink::new();
        let Ok(d) = pickle::decode_from(&bytes[..], &mut sink) else {
            continue;
        };
        let taken = sink.blocks();
        let snap = fragscope::input::snapshot::from_arena_with(&d.arena, d.root, sink).unwrap();
        let all = blocks_of(&snap);
        eprintln!("{name}: {all} blocks, {taken} taken while reading");
        // A 1.13 file's blocks (`history`, no address) go to the arena.
        assert!(taken == all || taken == 0, "{name}: {taken} of {all}");
        total += taken;
    }
    assert!(total > 10_000, "only {total} blocks taken");
}

/// `stats` of a snapshot of segments alone: what each further block costs
/// at the peak, measured against the same file with half the segments.
#[test]
fn a_block_costs_about_its_model_size_in_memory() {
    let d = tempfile::tempdir().unwrap();
    let (small, big) = (d.path().join("s"), d.path().join("b"));
    std::fs::create_dir_all(&small).unwrap();
    std::fs::create_dir_all(&big).unwrap();
    let (Some(s), Some(b)) = (
        write_layouts(&small, 4000, 25),
        write_layouts(&big, 8000, 25),
    ) else {
        return;
    };
    let pick = |v: &[PathBuf]| {
        v.iter()
            .find(|f| name_of(f) == "bare.pickle")
            .unwrap()
            .clone()
    };
    let (s, b) = (pick(&s), pick(&b));
    let count = |p: &Path| blocks_of(&slow(&std::fs::read(p).unwrap()).unwrap());
    let extra = (count(&b) - count(&s)) as u64;
    let (c1, r1) = peak_rss(["stats".as_ref(), s.as_os_str()]);
    let (c2, r2) = peak_rss(["stats".as_ref(), b.as_os_str()]);
    assert_eq!((c1, c2), (0, 0));
    let per_block = r2.saturating_sub(r1) / extra;
    let file_per_block =
        (std::fs::metadata(&b).unwrap().len() - std::fs::metadata(&s).unwrap().len()) / extra;
    eprintln!(
        "{extra} more blocks: {per_block} B each at the peak; the file {file_per_block} B each"
    );
    // A model block is 40 bytes; a dict of the general machine with its
    // values and frames list was over 200.
    assert!(per_block <= 96, "{per_block} B a block");
}
