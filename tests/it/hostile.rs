//! Hostile inputs against the built binary and the library: snapshots arrive
//! attached to bug tickets from strangers, and opening one must be safe,
//! bounded and answered by one clear line. See docs/robustness.md.

use crate::util::guarded::*;
use crate::util::{Pk, Rng, leftovers, path_str, peak_rss, real_inputs};
use fragscope::input::{self, LoadError};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Address space for the cases that try to make fragscope allocate: a few
/// hundred MB, far below what the hostile input asks for.
const SMALL_AS: u64 = 384 << 20;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    path_str(&p)
}

fn lib_err(bytes: &[u8]) -> String {
    match input::load_bytes(bytes, "case") {
        Ok(_) => panic!("loaded a hostile input"),
        Err(e) => {
            let s = e.to_string();
            assert!(s.starts_with("case: "), "{s}");
            assert!(!s.contains('\n'), "{s:?}");
            s
        }
    }
}

// ---------------------------------------------------------------------------
// Pickle opcodes that would import or call code.

fn forbidden_cases(marker: &str) -> Vec<(&'static str, Vec<u8>)> {
    let cmd = format!("touch {marker}");
    let call = |head: &[u8]| Pk::new().raw(head).raw(b"(").s(&cmd).raw(b"tR").stop();
    vec![
        ("GLOBAL", call(b"cos\nsystem\n")),
        (
            "STACK_GLOBAL",
            Pk::new().s("os").s("system").raw(b"\x93").stop(),
        ),
        ("REDUCE", Pk::new().raw(b"N)R").stop()),
        ("BUILD", Pk::new().raw(b"}}b").stop()),
        (
            "INST",
            Pk::new().raw(b"(").s(&cmd).raw(b"ios\nsystem\n").stop(),
        ),
        ("OBJ", Pk::new().raw(b"(N").s(&cmd).raw(b"o").stop()),
        ("NEWOBJ", Pk::new().raw(b"N)\x81").stop()),
        ("NEWOBJ_EX", Pk::new().raw(b"N)}\x92").stop()),
        ("EXT1", Pk::new().raw(b"\x82\x01").stop()),
        ("EXT2", Pk::new().raw(b"\x83\x01\x00").stop()),
        ("EXT4", Pk::new().raw(b"\x84\x01\x00\x00\x00").stop()),
        ("PERSID", Pk::new().raw(b"Pfoo\n").stop()),
        ("BINPERSID", Pk::new().s("foo").raw(b"Q").stop()),
    ]
}

#[test]
fn code_executing_opcodes_are_refused_by_name() {
    let d = tmp();
    let marker = path_str(&d.path().join("executed"));
    for (name, bytes) in forbidden_cases(&marker) {
        let msg = lib_err(&bytes);
        assert!(
            msg.contains(&format!("refused opcode {name} ")),
            "{name}: {msg}"
        );
        let f = write(d.path(), &format!("{name}.pickle"), &bytes);
        let r = run(&["stats", &f]);
        r.assert_clean_error(&f)
            .assert_stderr_has(&format!("refused opcode {name} "))
            .assert_stderr_has("byte ");
        // Also after a legitimate-looking prefix, inside gzip and inside a
        // memory_viz page: refused wherever it sits.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        let gzf = write(
            d.path(),
            &format!("{name}.pickle.gz"),
            &gz.finish().unwrap(),
        );
        run(&["convert", &gzf, "-o", &format!("{gzf}.json")])
            .assert_clean_error(&gzf)
            .assert_stderr_has(name);
        assert!(!Path::new(&format!("{gzf}.json")).exists());
    }
    assert!(
        !Path::new(&marker).exists(),
        "a refused pickle ran its payload"
    );
}

#[test]
fn refused_inside_html_page() {
    use base64::Engine;
    let d = tmp();
    let p = Pk::new().raw(b"cos\nsystem\n").stop();
    let page = format!(
        "<html><script>const local_files = [{{\"name\": \"s.pickle\", \"base64\": \"{}\"}}]</script></html>",
        base64::engine::general_purpose::STANDARD.encode(&p)
    );
    let f = write(d.path(), "page.html", page.as_bytes());
    run(&["stats", &f])
        .assert_clean_error(&f)
        .assert_stderr_has("embedded pickle")
        .assert_stderr_has("GLOBAL");
}

// ---------------------------------------------------------------------------
// Memo references, length prefixes, nesting.

#[test]
fn memo_references_to_missing_keys() {
    let d = tmp();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("binget", Pk::new().raw(b"h\x05").stop()),
        ("long_binget", Pk::new().raw(b"j\xff\xff\xff\xff").stop()),
        ("get_text", b"(lp0\ng7\na.".to_vec()),
        // Stored at 0 and 2^32-1, then a key in between.
        (
            "between",
            Pk::new()
                .raw(b"N\x94r\xff\xff\xff\xff0j\x00\x00\x01\x00")
                .stop(),
        ),
    ];
    for (name, bytes) in cases {
        let msg = lib_err(&bytes);
        assert!(msg.contains("memo reference"), "{name}: {msg}");
        let f = write(d.path(), &format!("{name}.pickle"), &bytes);
        run_limited(&["stats", &f], small())
            .assert_clean_error(&f)
            .assert_stderr_has("was never stored");
    }
    // A sparse high memo key works and costs nothing.
    let ok = Pk::new()
        .raw(b"}r\xff\xff\xff\xff0j\xff\xff\xff\xff")
        .stop();
    let msg = lib_err(&ok);
    assert!(msg.contains("no `segments`"), "{msg}");
}

fn small() -> Limits {
    Limits {
        address_space: Some(SMALL_AS),
        ..Default::default()
    }
}

#[test]
fn length_prefixes_of_2_pow_32_and_2_pow_63_allocate_nothing() {
    let d = tmp();
    let l32 = (1u64 << 32).to_le_bytes();
    let l63 = (1u64 << 63).to_le_bytes();
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for (op, name) in [
        (0x8du8, "BINUNICODE8"),
        (0x8e, "BINBYTES8"),
        (0x96, "BYTEARRAY8"),
    ] {
        for (bits, len) in [(32, l32), (63, l63)] {
            let mut body = vec![op];
            body.extend_from_slice(&len);
            body.extend_from_slice(b"abc");
            cases.push((format!("{name}_2^{bits}"), Pk::new().raw(&body).stop()));
        }
    }
    // 4-byte prefixes top out at 2^32-1.
    for (op, name) in [(b'X', "BINUNICODE"), (b'B', "BINBYTES"), (0x8b, "LONG4")] {
        let mut body = vec![op];
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        body.extend_from_slice(b"abc");
        cases.push((format!("{name}_2^32-1"), Pk::new().raw(&body).stop()));
    }
    // FRAME lengths are hints and never trusted either.
    let mut framed = vec![0x95];
    framed.extend_from_slice(&l63);
    cases.push(("FRAME_2^63".into(), Pk::new().raw(&framed).stop()));
    for (name, bytes) in cases {
        let f = write(d.path(), &format!("{name}.pickle"), &bytes);
        let r = run_limited(&["stats", &f], small());
        r.assert_clean_error(&f);
        let msg = lib_err(&bytes);
        if !name.starts_with("FRAME") {
            assert!(
                msg.contains("past the end") || msg.contains("larger than the data"),
                "{name}: {msg}"
            );
        }
    }
}

#[test]
fn nesting_100_000_deep_does_not_overflow_the_stack() {
    let d = tmp();
    const N: usize = 100_000;
    // Lists in lists.
    let mut lists = vec![0x80, 4];
    lists.extend(std::iter::repeat_n(b']', N));
    lists.extend(std::iter::repeat_n(b'a', N - 1));
    lists.push(b'.');
    // MARKs in MARKs, closed by LIST.
    let mut marks = vec![0x80, 4];
    marks.extend(std::iter::repeat_n(b'(', N));
    marks.extend(std::iter::repeat_n(b'l', N));
    marks.push(b'.');
    // Dicts in dicts under allocator_settings (fatal: settings are read) and
    // under an unknown key (kept as a marker: never fatal).
    let nested_dicts = |key: &str| {
        let mut p = Pk::new().raw(b"}(").s("segments").raw(b"]").s(key);
        for _ in 0..N {
            p = p.raw(b"}").s("k");
        }
        p = p.raw(b"}");
        p.raw(&vec![b's'; N]).raw(b"u").stop()
    };
    let json_deep = {
        let mut v = vec![b'['; N];
        v.extend(vec![b']'; N]);
        v
    };
    let json_settings = format!(
        "{{\"segments\": [], \"allocator_settings\": {{\"a\": {}1{}}}}}",
        "[".repeat(100),
        "]".repeat(100)
    );
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("lists.pickle", lists, false),
        ("marks.pickle", marks, false),
        ("settings.pickle", nested_dicts("allocator_settings"), false),
        ("unknown.pickle", nested_dicts("from_the_future"), true),
        ("deep.json", json_deep, false),
        ("settings.json", json_settings.into_bytes(), false),
    ];
    let mut files = Vec::new();
    for (name, bytes, ok) in cases {
        let f = write(d.path(), name, &bytes);
        let r = run_limited(&["stats", &f], small());
        if ok {
            r.assert_ok();
        } else {
            r.assert_clean_error(&f);
        }
        files.push(f);
    }
    // The same files in one run go through worker threads, whose stacks are
    // smaller than the main thread's.
    let mut args = vec!["stats".to_string()];
    args.extend(files.iter().cloned());
    let r = run(&args);
    assert_eq!(r.code, Some(2), "{r}");
    assert_eq!(r.stderr_lines().len(), 5, "{r}");
    assert!(r.stdout.contains("unknown.pickle"), "{r}");
}

#[test]
fn nesting_in_messagepack_is_bounded() {
    // fragscope's own MessagePack form, with a settings value nested far
    // deeper than any decoder produces.
    let d = tmp();
    let snap = fragscope::model::Snapshot {
        allocator_settings: Some(fragscope::model::AllocatorSettings {
            entries: vec![("x".into(), fragscope::model::Setting::Int(7))],
        }),
        stacks: vec![vec![]],
        ..Default::default()
    };
    let mp = fragscope::render::encode::to_msgpack_bytes(&snap);
    // The encoding of Setting::Int(7) and of one List level around a value.
    let leaf = rmp_serde::to_vec(&fragscope::model::Setting::Int(7)).unwrap();
    let one = rmp_serde::to_vec(&fragscope::model::Setting::List(vec![
        fragscope::model::Setting::Int(7),
    ]))
    .unwrap();
    let at = mp
        .windows(leaf.len())
        .rposition(|w| w == leaf)
        .expect("leaf in the encoding");
    let prefix = &one[..one.len() - leaf.len()];
    let mut deep = mp[..at].to_vec();
    for _ in 0..100_000 {
        deep.extend_from_slice(prefix);
    }
    deep.extend_from_slice(&mp[at..]);
    // The binary first (main thread, then worker threads): a stack overflow
    // in the library call below would abort the whole test process.
    let f = write(d.path(), "deep.msgpack", &deep);
    run_limited(&["stats", &f], small())
        .assert_clean_error(&f)
        .assert_stderr_has("depth limit exceeded");
    let r = run(&["stats", &f, &f]);
    assert_eq!(r.code, Some(2), "{r}");
    assert_eq!(r.stderr_lines().len(), 2, "{r}");
    let msg = lib_err(&deep);
    assert!(msg.contains("MessagePack"), "{msg}");
}

// ---------------------------------------------------------------------------
// Decompression bombs.

/// `total` bytes of zeros (after `head`) as concatenated gzip members,
/// which decompress as one stream.
fn gzip_bomb(total: usize, head: &[u8]) -> Vec<u8> {
    let member = |start: &[u8]| {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(start).unwrap();
        gz.write_all(&vec![0u8; (16 << 20) - start.len()]).unwrap();
        gz.finish().unwrap()
    };
    let mut out = member(head);
    out.extend(member(&[]).repeat(total / (16 << 20) - 1));
    out
}

fn zstd_bomb(total: usize, head: &[u8]) -> Vec<u8> {
    let frame = |start: &[u8]| {
        let mut b = start.to_vec();
        b.resize(16 << 20, 0);
        zstd::bulk::compress(&b, 3).unwrap()
    };
    let mut out = frame(head);
    out.extend(frame(&[]).repeat(total / (16 << 20) - 1));
    out
}

#[test]
fn decompression_bombs_stop_at_the_limit() {
    let d = tmp();
    // A stream that starts as JSON would: only the size limit stops it.
    for (name, bomb, what) in [
        ("bomb.gz", gzip_bomb(1 << 30, b"["), "gzip"),
        ("bomb.zst", zstd_bomb(1 << 30, b"["), "zstd"),
    ] {
        assert!(bomb.len() < 4 << 20, "{name} is {} bytes", bomb.len());
        let f = write(d.path(), name, &bomb);
        run_limited(&["--max-input-size", "1MiB", "stats", &f], small())
            .assert_clean_error(&f)
            .assert_stderr_has("limit of 1048576 bytes")
            .assert_stderr_has(&format!("after {what} decompression"))
            .assert_stderr_has("--max-input-size");
        // Raising the limit moves the bound, and memory follows it.
        run_limited(&["--max-input-size", "64MiB", "stats", &f], small())
            .assert_clean_error(&f)
            .assert_stderr_has("limit of 67108864 bytes");
        // Within the limit, the stream is read whole and is no JSON.
        let one = if what == "gzip" {
            gzip_bomb(16 << 20, b"[")
        } else {
            zstd_bomb(16 << 20, b"[")
        };
        let within = write(d.path(), &format!("small-{name}"), &one);
        run_limited(&["--max-input-size", "64MiB", "stats", &within], small())
            .assert_clean_error(&within)
            .assert_stderr_has("JSON");
    }
    // The bound applies to plain files too.
    let mut json = vec![b' '; 2 << 20];
    json[0] = b'[';
    let big = write(d.path(), "big.json", &json);
    run(&["--max-input-size", "1MiB", "stats", &big])
        .assert_clean_error(&big)
        .assert_stderr_has("larger than the limit of 1048576 bytes;");
}

/// 2 GiB of zeros, gzip or zstd: refused on its first decompressed bytes,
/// under the default 16 GiB limit, in an address space far smaller than
/// the stream (reading it whole, or to the limit, cannot pass).
#[test]
fn a_bomb_that_starts_as_no_input_is_refused_on_its_first_bytes() {
    let d = tmp();
    for (name, bomb, what) in [
        ("zeros.gz", gzip_bomb(2 << 30, b""), "gzip"),
        ("zeros.zst", zstd_bomb(2 << 30, b""), "zstd"),
        ("spaces.gz", gzip_bomb(2 << 30, &[b' '; 8192]), "gzip"),
    ] {
        let f = write(d.path(), name, &bomb);
        let out = d.path().join("out.json").to_string_lossy().into_owned();
        let html = d.path().join("out.html").to_string_lossy().into_owned();
        for cmd in ["stats", "report", "timeline", "convert"] {
            let mut args = vec![cmd, f.as_str()];
            match cmd {
                "convert" => args.extend(["-o", out.as_str()]),
                "report" => args.extend(["-o", html.as_str()]),
                _ => {}
            }
            run_limited(&args, small())
                .assert_clean_error(&f)
                .assert_stderr_has("not a memory snapshot, profiler trace or memory timeline")
                .assert_stderr_has(&format!("after {what} decompression"));
        }
    }
    let z = write(d.path(), "z.gz", &gzip_bomb(2 << 30, b""));
    let r = run(&["stats", &z]);
    r.assert_stderr_has("(starts with bytes [00, 00, 00, 00]) after gzip decompression");
    // Refused on its first window, the 2 GiB stream costs the process's
    // own few mebibytes: its peak RSS stays under 32 MiB.
    let (code, rss) = peak_rss(["stats", z.as_str()]);
    assert_eq!(code, 2);
    assert!(rss < 32 << 20, "peak RSS {rss} bytes refusing {z}");
}

// ---------------------------------------------------------------------------
// Shared references that expand: memory and time stay linear in the input.

#[test]
fn shared_records_do_not_expand_without_bound() {
    let d = tmp();
    // One block dict shared 1 000 times in one list, that list shared by
    // 100 000 segments: 10^8 blocks from about 300 KB.
    let mut p = Pk::new().raw(b"}(").s("segments").raw(b"](");
    p = p
        .raw(b"}(")
        .s("address")
        .int(1 << 40)
        .s("total_size")
        .int(1 << 30)
        .s("blocks")
        .raw(b"](")
        .raw(b"}(")
        .s("size")
        .int(1 << 20)
        .s("state")
        .s("inactive")
        .raw(b"u\x94");
    for _ in 0..999 {
        p = p.raw(b"h\x00");
    }
    p = p.raw(b"eu\x94");
    for _ in 0..99_999 {
        p = p.raw(b"j\x01\x00\x00\x00");
    }
    let laughs = p.raw(b"eu").stop();
    assert!(laughs.len() < 1 << 20);
    // Settings lists ten wide and thirty deep: 10^30 leaves.
    let mut s = Pk::new()
        .raw(b"}(")
        .s("segments")
        .raw(b"]")
        .s("allocator_settings");
    s = s.raw(b"}").s("x").raw(b"K\x01\x940");
    for level in 0..30u32 {
        s = s.raw(b"(");
        for _ in 0..10 {
            s = s.raw(b"j").raw(&(level).to_le_bytes());
        }
        s = s.raw(b"l\x940");
    }
    let settings = s.raw(b"j").raw(&30u32.to_le_bytes()).raw(b"su").stop();
    // A 2.0-style trace whose events all share one long Python stack and
    // each add their own C++ frame list.
    let mut t = Pk::new().raw(b"}(").s("device_traces").raw(b"](](");
    t = t.raw(b"}(").s("action").s("alloc").s("frames").raw(b"(");
    for i in 0..20_000 {
        t = t.s(&format!("f{i}"));
    }
    t = t.raw(b"l\x94").s("cpp_frames").raw(b"]u");
    for _ in 0..50_000 {
        t = t
            .raw(b"}(")
            .s("action")
            .s("alloc")
            .s("frames")
            .raw(b"h\x00")
            .s("cpp_frames")
            .raw(b"(")
            .s("c10::alloc")
            .raw(b"lu");
    }
    let traces = t.raw(b"eeu").stop();
    for (name, bytes) in [
        ("laughs.pickle", laughs),
        ("settings.pickle", settings),
        ("stacks.pickle", traces),
    ] {
        // The binary first, under the limit: were the expansion unbounded,
        // the library call below would take the test process down with it.
        let f = write(d.path(), name, &bytes);
        run_limited(&["stats", &f], small())
            .assert_clean_error(&f)
            .assert_stderr_has("shared");
        let msg = lib_err(&bytes);
        assert!(msg.contains("shared"), "{name}: {msg}");
    }
}

// ---------------------------------------------------------------------------
// Real files, cut and damaged.

#[test]
fn real_files_truncated_at_every_tenth() {
    let d = tmp();
    for src in real_inputs() {
        let bytes = std::fs::read(&src).unwrap();
        let base = src.file_name().unwrap().to_string_lossy().into_owned();
        for tenth in 0..10 {
            let cut = &bytes[..bytes.len() * tenth / 10];
            let f = write(d.path(), &format!("{tenth}0pct-{base}"), cut);
            let r = run(&["stats", &f]);
            r.assert_ok_or_clean_error(&f);
            // A pickle cut short never has its STOP opcode.
            if base.ends_with(".pickle") || base.ends_with(".pkl") {
                r.assert_clean_error(&f);
            }
            std::fs::remove_file(&f).unwrap();
        }
    }
}

#[test]
fn real_files_with_random_byte_flips() {
    let d = tmp();
    let mut rng = Rng::new(9);
    for src in real_inputs() {
        let bytes = std::fs::read(&src).unwrap();
        let base = src.file_name().unwrap().to_string_lossy().into_owned();
        for flips in [1usize, 16, 256] {
            let b = rng.flipped(&bytes, flips);
            let f = write(d.path(), &format!("flip{flips}-{base}"), &b);
            run_limited(
                &["stats", &f],
                Limits {
                    address_space: Some(4 << 30),
                    ..Default::default()
                },
            )
            .assert_ok_or_clean_error(&f);
            std::fs::remove_file(&f).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------
// Inputs that are well-formed but wrong.

#[test]
fn a_trace_that_contradicts_its_segments() {
    // The segments hold one live block at A; the trace frees A twice, frees
    // an address no segment holds, allocates outside every segment, and
    // releases a segment that was never reserved.
    let a = 1u64 << 40;
    let snap = json!({
        "segments": [{
            "device": 0, "address": a, "total_size": 2097152, "stream": 0,
            "segment_type": "large",
            "blocks": [
                {"address": a, "size": 1048576, "requested_size": 1000000, "state": "active_allocated"},
                {"address": a + 1048576, "size": 1048576, "state": "inactive"}
            ]
        }],
        "device_traces": [[
            {"action": "free_requested", "addr": a, "size": 1000000, "stream": 0, "time_us": 30},
            {"action": "free_completed", "addr": a, "size": 1000000, "stream": 0, "time_us": 20},
            {"action": "free_completed", "addr": a, "size": 1000000, "stream": 0, "time_us": 10},
            {"action": "free_completed", "addr": 12345, "size": 512, "stream": 0},
            {"action": "alloc", "addr": 1u64 << 50, "size": 4096, "stream": 7},
            {"action": "segment_free", "addr": 1u64 << 45, "size": 1u64 << 62, "stream": 0},
            {"action": "segment_unmap", "addr": a, "size": 1u64 << 62, "stream": 0}
        ], [], [
            {"action": "alloc", "addr": a, "size": 1, "stream": 0}
        ]]
    });
    let d = tmp();
    let f = write(d.path(), "contradiction.json", snap.to_string().as_bytes());
    let r = run(&["stats", &f]);
    r.assert_ok();
    assert!(r.stdout.contains("starts mid-run"), "{r}");
    let r = run(&["stats", "--json", &f]);
    r.assert_ok();
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["trace_events"], json!([7, 0, 1]));
    assert_eq!(v["reserved_bytes"], json!(2097152));
    // Converted and read back, it is the same contradiction.
    let out = path_str(&d.path().join("back.msgpack"));
    run(&["convert", &f, "-o", &out]).assert_ok();
    let r2 = run(&["stats", "--json", &out]);
    r2.assert_ok();
    let v2: serde_json::Value = serde_json::from_str(&r2.stdout).unwrap();
    assert_eq!(v["trace_coverage"], v2["trace_coverage"]);
}

#[test]
fn not_a_snapshot() {
    let d = tmp();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.pickle", vec![], "empty file"),
        (
            "text.txt",
            b"hello, world\n".to_vec(),
            "not a memory snapshot",
        ),
        (
            "image.png",
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
            "not a memory snapshot",
        ),
        (
            "int.pickle",
            Pk::new().raw(b"K\x01").stop(),
            "top-level value is a int",
        ),
        (
            "str.pickle",
            Pk::new().s("segments").stop(),
            "top-level value is a str",
        ),
        ("dict.pickle", Pk::new().raw(b"}").stop(), "no `segments`"),
        ("other.json", br#"{"foo": 1}"#.to_vec(), "no `segments`"),
        ("number.json", b"[1, 2, 3]".to_vec(), "[0]: expected a dict"),
        (
            "bad.json",
            b"{\"segments\": [".to_vec(),
            "invalid JSON at line 1",
        ),
        ("nul.json", b"{\"a\": \"\0\"}".to_vec(), "invalid JSON"),
        (
            "segments.json",
            br#"{"segments": 5}"#.to_vec(),
            "segments: expected a list",
        ),
        (
            "html.html",
            b"<html><body>no snapshot here</body></html>".to_vec(),
            "without an embedded snapshot",
        ),
        (
            "badb64.html",
            br#"<html>"base64": "!!!!"</html>"#.to_vec(),
            "not valid base64",
        ),
        (
            "msgpack.bin",
            input::MSGPACK_MAGIC.to_vec(),
            "corrupt fragscope MessagePack",
        ),
        ("gzip.gz", vec![0x1f, 0x8b, 8, 0, 0], "gzip"),
        ("zstd.zst", vec![0x28, 0xb5, 0x2f, 0xfd, 0, 0], "zstd"),
        (
            "protocol9.pickle",
            b"\x80\x09N.".to_vec(),
            "unsupported pickle protocol 9",
        ),
        ("stop.pickle", b"\x80\x04.".to_vec(), "stack underflow"),
        (
            "unknown_op.pickle",
            b"\x80\x04\xff".to_vec(),
            "unknown pickle opcode 0xff",
        ),
    ];
    for (name, bytes, want) in cases {
        let f = write(d.path(), name, &bytes);
        run(&["stats", &f])
            .assert_clean_error(&f)
            .assert_stderr_has(want);
        run(&["convert", &f, "-o", &format!("{f}.json")]).assert_clean_error(&f);
        assert!(!Path::new(&format!("{f}.json")).exists());
    }
    let missing = path_str(&d.path().join("missing.pickle"));
    run(&["stats", &missing])
        .assert_clean_error(&missing)
        .assert_stderr_has("cannot read");
    let empty_dir = d.path().join("nothing");
    std::fs::create_dir(&empty_dir).unwrap();
    let e = path_str(&empty_dir);
    run(&["stats", &e]).assert_clean_error(&e);
}

fn event(action: &str, addr: serde_json::Value) -> serde_json::Value {
    json!({"action": action, "addr": addr, "size": 512, "stream": 0})
}

#[test]
fn wrong_types_name_the_record_path() {
    let d = tmp();
    let json_case = json!({
        "segments": [],
        "device_traces": [[
            event("alloc", json!(16)), event("alloc", json!(32)),
            event("free_requested", json!(16)), event("free_completed", json!("0x10"))
        ]]
    });
    let f = write(d.path(), "types.json", json_case.to_string().as_bytes());
    run(&["stats", &f])
        .assert_clean_error(&f)
        .assert_stderr_has("device_traces[0][3].addr: expected an int, found str");

    // The same in a pickle, with memoized keys as PyTorch writes them.
    let ev = |p: Pk, addr: Option<i64>| {
        let p = p.raw(b"}(").s("action").s("alloc").s("addr");
        let p = match addr {
            Some(a) => p.int(a),
            None => p.s("0x10"),
        };
        p.s("size").int(512).raw(b"u")
    };
    let mut p = Pk::new()
        .raw(b"}(")
        .s("segments")
        .raw(b"]")
        .s("device_traces")
        .raw(b"](](");
    for a in [Some(16), Some(32), Some(48), None] {
        p = ev(p, a);
    }
    let bytes = p.raw(b"eeu").stop();
    let msg = lib_err(&bytes);
    assert!(msg.contains("device_traces[0][3].addr"), "{msg}");
    let f = write(d.path(), "types.pickle", &bytes);
    run(&["stats", &f])
        .assert_clean_error(&f)
        .assert_stderr_has("device_traces[0][3].addr: expected an int, found str");

    for (case, want) in [
        (
            json!({"segments": [{"address": 0, "total_size": 1.5}]}),
            "segments[0].total_size: expected an int, found float",
        ),
        (
            json!({"segments": [{"address": 0, "total_size": 1024, "blocks": [
                {"size": 512, "state": "inactive"}, {"size": -512, "state": "inactive"}]}]}),
            "segments[0].blocks[1].size: expected a non-negative int, found -512",
        ),
        (
            json!({"segments": [{"address": 0, "total_size": 1024, "blocks": [
                {"size": 512, "state": "gone\nfragscope: error: forged"}]}]}),
            "segments[0].blocks[0].state: unknown block state \"gone\\nfragscope",
        ),
        (
            json!({"segments": [], "device_traces": [[{"action": "alloc", "addr": 18446744073709551615u64}]]}),
            "device_traces[0][0].addr: integer does not fit in 64 bits",
        ),
    ] {
        let f = write(d.path(), "case.json", case.to_string().as_bytes());
        run(&["stats", &f])
            .assert_clean_error(&f)
            .assert_stderr_has(want);
    }
}

#[test]
fn error_lines_stay_one_line_whatever_the_input_holds() {
    // Keys and values from the file reach messages; a newline in them must
    // not forge a second line.
    let d = tmp();
    let mut deep = String::from("1");
    for _ in 0..40 {
        deep = format!("{{\"k\\n\": {deep}}}");
    }
    let case =
        format!("{{\"segments\": [], \"external_annotations\": [{{\"evil\\nkey\": {deep}}}]}}");
    let f = write(d.path(), "newline.json", case.as_bytes());
    let r = run(&["stats", &f]);
    r.assert_clean_error(&f).assert_stderr_has("evil\\nkey");
    let named = write(d.path(), "two\nlines.pickle", b"junk");
    let r = run(&["stats", &named]);
    r.assert_clean_error("two\\nlines.pickle");
}

// ---------------------------------------------------------------------------
// Nothing lost.

fn seed_snapshot() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/seeds/snapshot_p4.pickle"
    ))
}

#[test]
fn a_failed_convert_leaves_the_existing_output_whole() {
    let d = tmp();
    let good = path_str(&seed_snapshot());
    let out = path_str(&d.path().join("out.json"));
    std::fs::write(&out, b"previous report").unwrap();
    // The input fails to load: the output is untouched.
    let bad = write(d.path(), "bad.pickle", b"\x80\x04cos\nsystem\n.");
    run(&["convert", &bad, "-o", &out]).assert_clean_error(&bad);
    assert_eq!(std::fs::read(&out).unwrap(), b"previous report");
    // The write itself fails half-way (file size limit): the old output is
    // whole and no temporary file is left.
    let r = run_limited(
        &["convert", &good, "-o", &out],
        Limits {
            file_size: Some(1000),
            ..Default::default()
        },
    );
    r.assert_clean_error(&out).assert_stderr_has("cannot write");
    assert_eq!(std::fs::read(&out).unwrap(), b"previous report");
    assert!(leftovers(d.path()).is_empty(), "{:?}", leftovers(d.path()));
    // A directory that does not exist.
    let nowhere = path_str(&d.path().join("no/such/dir/out.json"));
    run(&["convert", &good, "-o", &nowhere]).assert_clean_error(&nowhere);
    // And when it works, the output is complete and reads back.
    run(&["convert", &good, "-o", &out]).assert_ok();
    let back = input::load(&out, &Default::default()).unwrap();
    assert!(matches!(back.content, input::Content::Snapshot(_)));
    assert!(leftovers(d.path()).is_empty());
}

#[test]
fn convert_refuses_to_write_over_its_input() {
    let d = tmp();
    let bytes = std::fs::read(seed_snapshot()).unwrap();
    let inp = write(d.path(), "snap.json", &bytes);
    let sub = d.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::os::unix::fs::symlink(&inp, d.path().join("link.json")).unwrap();
    for out in [
        inp.clone(),
        path_str(&sub.join("../snap.json")),
        path_str(&d.path().join("link.json")),
    ] {
        run(&["convert", &inp, "-o", &out])
            .assert_clean_error(&out)
            .assert_stderr_has("refusing to write over an input file");
        assert_eq!(std::fs::read(&inp).unwrap(), bytes, "input changed");
    }
    assert!(leftovers(d.path()).is_empty());
}

#[test]
fn many_files_report_every_readable_one_and_name_each_unreadable_one() {
    let d = tmp();
    let good = std::fs::read(seed_snapshot()).unwrap();
    let a = write(d.path(), "rank0.pickle", &good);
    let b = write(d.path(), "rank1.pickle", &good[..good.len() / 2]);
    let c = write(d.path(), "rank2.pickle", &good);
    let e = write(d.path(), "rank3.pickle", b"not a snapshot");
    let missing = path_str(&d.path().join("rank4.pickle"));
    let args = ["stats", &a, &b, &c, &e, &missing];
    let r = run(&args);
    assert_eq!(r.code, Some(2), "{r}");
    for ok in [&a, &c] {
        assert!(r.stdout.contains(ok.as_str()), "{ok} not reported{r}");
    }
    let lines = r.stderr_lines();
    assert_eq!(lines.len(), 3, "{r}");
    for (line, bad) in lines.iter().zip([&b, &e, &missing]) {
        assert!(line.starts_with("fragscope: error: "), "{r}");
        assert!(line.contains(bad.as_str()), "{bad} not named in order{r}");
    }
    let mut json_args = vec!["stats", "--json"];
    json_args.extend_from_slice(&args[1..]);
    let r = run(&json_args);
    assert_eq!(r.code, Some(2), "{r}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["unreadable"], json!(3));
    assert_eq!(v["files"].as_array().unwrap().len(), 2);
    // A directory of ranks behaves the same.
    let r = run(&["stats", &path_str(d.path())]);
    assert_eq!(r.code, Some(2), "{r}");
    assert_eq!(r.stderr_lines().len(), 2, "{r}");
}

#[test]
fn verbose_adds_the_chain_of_causes() {
    let d = tmp();
    let missing = path_str(&d.path().join("missing.pickle"));
    let r = run(&["stats", &missing]);
    r.assert_clean_error(&missing);
    let line = r.stderr_lines()[0].to_string();
    assert_eq!(
        line.matches("No such file or directory").count(),
        1,
        "the cause is printed once: {line}"
    );
    let r = run(&["--verbose", "stats", &missing]);
    assert_eq!(r.code, Some(2), "{r}");
    let lines = r.stderr_lines();
    assert_eq!(lines.len(), 2, "{r}");
    assert!(
        lines[0].starts_with("fragscope: error: ") && lines[0].contains(&missing),
        "{r}"
    );
    assert!(!lines[0].contains("No such file"), "{r}");
    assert!(
        lines[1].starts_with("  caused by: No such file or directory"),
        "{r}"
    );

    let good = path_str(&seed_snapshot());
    let nowhere = path_str(&d.path().join("no/out.json"));
    let r = run(&["-v", "convert", &good, "-o", &nowhere]);
    assert_eq!(r.code, Some(2), "{r}");
    let lines = r.stderr_lines();
    assert_eq!(lines.len(), 2, "{r}");
    assert!(lines[1].starts_with("  caused by: "), "{r}");
}

// ---------------------------------------------------------------------------
// The library entry points answer errors typed, with the file.

#[test]
fn library_errors_carry_the_file() {
    let e = input::load("/nonexistent/fragscope-test", &Default::default()).unwrap_err();
    assert!(matches!(e, LoadError::Io { .. }));
    assert_eq!(e.file(), "/nonexistent/fragscope-test");
    let e = input::load_bytes(b"\x80\x04cos\nsystem\n.", "x.pickle").unwrap_err();
    match e {
        LoadError::Decode {
            offset, ref msg, ..
        } => {
            assert_eq!(offset, 2);
            assert!(msg.contains("GLOBAL"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn absurd_sizes_and_times_neither_overflow_nor_allocate() {
    // Every figure at the edge of its type: sums that overflow u64, a
    // segment whose page map would need terabytes, time spans beyond i64.
    let max = i64::MAX as u64;
    let seg = |addr: u64| {
        json!({"device": 0, "address": addr, "total_size": max, "stream": i64::MIN,
               "segment_type": "large", "blocks": [
                   {"address": addr, "size": max, "requested_size": max, "state": "active_allocated"},
                   {"address": addr, "size": max, "state": "inactive"},
                   {"address": max, "size": max, "state": "active_pending_free"}]})
    };
    let snap = json!({
        "segments": [seg(0), seg(max), seg(max - 1), seg(1)],
        "device_traces": [[
            {"action": "alloc", "addr": 0, "size": max, "stream": 0, "time_us": i64::MIN},
            {"action": "oom", "size": max, "stream": 0, "device_free": max, "time_us": i64::MAX}
        ]]
    });
    let d = tmp();
    let f = write(d.path(), "absurd.json", snap.to_string().as_bytes());
    for args in [
        vec!["stats", f.as_str()],
        vec!["stats", "--json", f.as_str()],
        vec!["stats", "--bytes", f.as_str(), f.as_str()],
    ] {
        run_limited(&args, small()).assert_ok();
    }
}

#[test]
fn messagepack_of_an_earlier_version_is_refused_with_what_to_do() {
    // Version 1 was the serde form of the model before trace events were
    // packed, version 2 before their rarely present fields were interned,
    // version 3 before an `oom` held its own `device_free`, version 4
    // before a stream was an index into a table: their events cannot be
    // read as the current ones.
    let snap = fragscope::model::Snapshot {
        stacks: vec![vec![]],
        ..Default::default()
    };
    let now = fragscope::render::encode::to_msgpack_bytes(&snap);
    let version = fragscope::input::MSGPACK_MAGIC.len() - 1;
    assert_eq!(now[version], 5);
    let d = tmp();
    for old in [1u8, 2, 3, 4] {
        let mut bytes = now.clone();
        bytes[version] = old;
        let f = write(d.path(), &format!("v{old}.msgpack"), &bytes);
        run(&["stats", &f])
            .assert_clean_error(&f)
            .assert_stderr_has(&format!(
                "fragscope MessagePack version {old} was written by an earlier fragscope"
            ))
            .assert_stderr_has("convert the original snapshot again");
    }
}

#[test]
fn messagepack_ids_are_checked_before_use() {
    // fragscope's MessagePack deserialises straight into the model; an id
    // outside its table would make a later stage index past the end.
    use fragscope::model::*;
    let ev = TraceEvent::new(Action::Alloc, 0, 0, StreamIdx::DEFAULT, StackId::EMPTY);
    let one = |e: TraceEvent| Snapshot {
        device_traces: Some(vec![vec![e]]),
        stacks: vec![vec![]],
        ..Default::default()
    };
    let with_extras = |x: EventExtras| Snapshot {
        event_extras: vec![x],
        ..one(ev.clone().with_extras(Some(ExtrasIdx(0))))
    };
    let bad_string = with_extras(EventExtras {
        user_metadata: Some(StrId(5)),
        ..EventExtras::NONE
    });
    let bad_extras = one(ev.clone().with_extras(Some(ExtrasIdx(1))));
    let empty_extras = with_extras(EventExtras::NONE);
    let twice = Snapshot {
        event_extras: vec![
            EventExtras {
                device_free: Some(1),
                ..EventExtras::NONE
            };
            2
        ],
        ..one(ev.clone())
    };
    let bad_stack = one(TraceEvent::new(
        Action::Alloc,
        0,
        0,
        StreamIdx::DEFAULT,
        StackId(3),
    ));
    let bad_stream = Snapshot {
        streams: vec![7],
        ..one(TraceEvent::new(
            Action::Alloc,
            0,
            0,
            StreamIdx(2),
            StackId::EMPTY,
        ))
    };
    let zero_stream = Snapshot {
        streams: vec![0],
        ..one(ev.clone())
    };
    let stream_twice = Snapshot {
        streams: vec![-4, 3, -4],
        ..one(ev.clone())
    };
    let bad_pool = with_extras(EventExtras {
        pool: Some(PoolIdx(2)),
        ..EventExtras::NONE
    });
    let bad_action = one(TraceEvent::new(
        Action::Other(ActionName::new(1)),
        0,
        0,
        StreamIdx::DEFAULT,
        StackId::EMPTY,
    ));
    let bad_action_name = Snapshot {
        other_actions: vec![StrId(7)],
        ..one(ev.clone())
    };
    let no_empty_stack = Snapshot::default();
    // An `oom` without an address holds its own device_free; kept apart
    // from it, the same event would have two forms.
    let oom = TraceEvent::new(Action::Oom, 0, 1 << 20, StreamIdx::DEFAULT, StackId::EMPTY);
    let free_apart = Snapshot {
        event_extras: vec![EventExtras {
            device_free: Some(9),
            ..EventExtras::NONE
        }],
        ..one(oom.clone().with_extras(Some(ExtrasIdx(0))))
    };
    let mut held = oom.clone();
    held.hold_device_free(&mut EventExtras {
        device_free: Some(9),
        ..EventExtras::NONE
    });
    assert_eq!(held.held_device_free(), Some(9));
    let mut not_oom = held.clone();
    not_oom.action = Action::Alloc;
    let held_by_alloc = one(not_oom);
    let d = tmp();
    for (name, snap, want) in [
        (
            "string.msgpack",
            bad_string,
            "event_extras[0]: string id 5 is not below 0",
        ),
        (
            "extras.msgpack",
            bad_extras,
            "device_traces[0][0]: extras id 1 is not below 0",
        ),
        (
            "empty-extras.msgpack",
            empty_extras,
            "event_extras[0]: no field present",
        ),
        (
            "twice.msgpack",
            twice,
            "event_extras[1]: the same as event_extras[0]",
        ),
        (
            "stack.msgpack",
            bad_stack,
            "device_traces[0][0]: stack id 3 is not below 1",
        ),
        (
            "stream.msgpack",
            bad_stream,
            "device_traces[0][0]: stream id 2 is not below 2",
        ),
        (
            "zero-stream.msgpack",
            zero_stream,
            "streams[0]: stream 0, which needs no entry",
        ),
        (
            "stream-twice.msgpack",
            stream_twice,
            "streams[2]: the same as streams[0]",
        ),
        (
            "pool.msgpack",
            bad_pool,
            "event_extras[0]: pool id 2 is not below 0",
        ),
        (
            "action.msgpack",
            bad_action,
            "device_traces[0][0]: unknown-action id 1 is not below 0",
        ),
        (
            "action-name.msgpack",
            bad_action_name,
            "other_actions[0]: string id 7 is not below 0",
        ),
        (
            "empty.msgpack",
            no_empty_stack,
            "stack 0 must be the empty stack",
        ),
        (
            "free-apart.msgpack",
            free_apart,
            "device_traces[0][0]: the device_free of an oom without an address kept apart from it",
        ),
        (
            "held-by-alloc.msgpack",
            held_by_alloc,
            "device_traces[0][0]: a device_free held by an event that is not an oom",
        ),
    ] {
        let f = write(
            d.path(),
            name,
            &fragscope::render::encode::to_msgpack_bytes(&snap),
        );
        run(&["stats", &f])
            .assert_clean_error(&f)
            .assert_stderr_has(want);
    }
}
