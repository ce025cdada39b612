use super::reading::*;
use super::*;

const GIB: f64 = 1073741824.0;
const MIB: f64 = 1048576.0;

#[test]
fn sizes_use_binary_units() {
    assert_eq!(size("12.50", "MiB"), Some((12.5 * MIB) as u64));
    assert_eq!(size("1062", "MB"), Some(1062 << 20));
    assert_eq!(size("0", "bytes"), Some(0));
    assert_eq!(size("1.5", "GiB"), Some((1.5 * GIB) as u64));
}

#[test]
fn wrapped_and_prefixed_current_message() {
    let t = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capac\n\
             ity of 79.10 GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 78.00 GiB memory in use. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 17.00 GiB is reserved by PyTorch but unallocated.\n";
    let p = parse(t).unwrap();
    assert_eq!(p.messages.len(), 1);
    let m = &p.messages[0];
    assert_eq!(m.wording, Wording::Current);
    assert_eq!(m.device, Some(3));
    assert_eq!(m.capacity, size("79.10", "GiB"));
    assert_eq!(m.reserved, Some((77.0 * GIB) as u64));
    assert_eq!(m.this_process(), Some((78.0 * GIB) as u64));
    assert_eq!(m.other_processes(), Some(0));
    let e = explain(&Style::default(), t).unwrap();
    assert_eq!(
        e.items[0].diagnosis.cause,
        crate::analysis::advice::Cause::Fragmentation
    );
}

#[test]
fn old_releases_do_not_get_settings_they_lack() {
    let t = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.90 GiB total capacity; 10.00 GiB already allocated; 100.00 MiB free; 14.00 GiB reserved in total by PyTorch)";
    let e = explain(&Style::default(), t).unwrap();
    assert_eq!(e.parsed.messages[0].wording, Wording::ReservedInTotal);
    let s = &e.items[0].diagnosis.suggestions;
    assert!(
        s.iter()
            .filter(|s| s.what.contains("expandable_segments") || s.what.contains("max_split"))
            .all(|s| !s.applies && s.why.starts_with("needs PyTorch"))
    );
}

#[test]
fn runtime_errors_and_nonsense() {
    let e = explain(&Style::default(), "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported").unwrap();
    assert_eq!(e.parsed.messages[0].wording, Wording::RuntimeError);
    assert_eq!(
        explain(&Style::default(), "hello world").unwrap_err(),
        ExplainError::NothingRecognised
    );
}

#[test]
fn rare_wordings() {
    let p = parse(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.",
    )
    .unwrap();
    assert_eq!(p.messages[0].wording, Wording::MoreThan1Eb);
    assert_eq!(p.messages[0].tried, None);
    let p = parse(
        "torch.OutOfMemoryError: CUDA out of memory. Allocation was preemptively rejected because it would exceed per_process_memory_fraction limit. Requested size: 2.00 GiB",
    )
    .unwrap();
    assert_eq!(p.messages[0].wording, Wording::FractionRejection);
    assert_eq!(p.messages[0].requested, Some(2 << 30));
    // Two records glued on one line by a progress bar.
    let p = parse("CUDA out of memory. Tried to allocate 2.00 MiB (GPU 1; 1.00 GiB total capacity; 10.00 MiB already allocated; 0 bytes free; 20.00 MiB cached) 50%|### CUDA out of memory. Tried to allocate 4.00 MiB (GPU 1; 1.00 GiB total capacity; 10.00 MiB already allocated; 0 bytes free; 20.00 MiB cached)").unwrap();
    assert_eq!(p.messages.len(), 2);
    assert_eq!(p.messages[1].tried, Some(4 << 20));
    assert_eq!(p.messages[1].device, Some(1));
}

#[test]
fn newest_hint_variable_is_kept_in_suggestions() {
    let t = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 80.00 GiB of which 1.00 GiB is free. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 10.00 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
    let e = explain(&Style::default(), t).unwrap();
    assert!(
        e.items[0].diagnosis.suggestions[0]
            .what
            .starts_with("PYTORCH_ALLOC_CONF=")
    );
}

mod streamed {
    use super::super::stream::{OVERLAP, Pieces, WINDOW};
    use super::*;
    use proptest::prelude::*;

    const MSG: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.50 GiB is free. Of the allocated memory 70.00 GiB is allocated by PyTorch, and 5.00 GiB is reserved by PyTorch but unallocated.";

    fn lines(t: &str) -> Vec<String> {
        Pieces::new(t.as_bytes()).map(|p| p.text).collect()
    }

    #[test]
    fn line_ends_and_colour_codes_as_the_text_would_be_cleaned() {
        assert_eq!(
            lines("a\r\nb\rc\n\x1b[31md\x1b[0m\n\ne"),
            ["a", "b", "c", "d", "", "e"]
        );
        assert_eq!(lines("a\r\r\n"), ["a", ""]);
        // A code between the two bytes of a line end leaves one line end.
        assert_eq!(lines("a\r\x1b[0m\nb\r\x1b[K\x1b[1;31m\nc"), ["a", "b", "c"]);
        // What only starts like a code is text.
        assert_eq!(lines("\x1b\x1b[1mx\x1b[12\x1b]"), ["\x1bx\x1b[12\x1b]"]);
        assert_eq!(lines("\n"), [""]);
        assert!(lines("").is_empty());
        // A line end split between two reads.
        let r = std::io::BufReader::with_capacity(2, "ab\r\ncd".as_bytes());
        let got: Vec<String> = Pieces::new(r).map(|p| p.text).collect();
        assert_eq!(got, ["ab", "cd"]);
    }

    /// Messages on one line far longer than a window, one of them across
    /// each window boundary and in each overlap: each is read once, whole.
    #[test]
    fn messages_in_a_line_longer_than_a_window_are_each_read_once() {
        let own = WINDOW - OVERLAP;
        let starts = [
            10,
            own - 20,
            own + 100,
            WINDOW - 50,
            2 * own - MSG.len() / 2,
            2 * own + OVERLAP - 10,
            3 * own + 7,
        ];
        let mut line = vec![b'x'; 3 * WINDOW];
        for (k, &s) in starts.iter().enumerate() {
            let m = MSG.replace("2.00 GiB", &format!("{k}.00 GiB"));
            line[s..s + m.len()].copy_from_slice(m.as_bytes());
            line[s + m.len()] = b' ';
        }
        let mut text = String::from_utf8(line).unwrap();
        text.push('\n');
        text.push_str(MSG);
        let p = parse(&text).unwrap();
        let tried: Vec<u64> = p.messages.iter().map(|m| m.tried.unwrap()).collect();
        let mut want: Vec<u64> = (0..starts.len() as u64).map(|k| k << 30).collect();
        want.push(2 << 30);
        assert_eq!(tried, want);
        assert!(
            p.messages
                .iter()
                .all(|m| m.capacity == size("79.15", "GiB"))
        );
        assert_eq!(p.messages.last().unwrap().line, 2);
    }

    /// The dump and segment readers over the glued text, as one pass of
    /// each pattern over the whole text gives them.
    #[test]
    fn dumps_and_segments_broken_anywhere_across_windows() {
        let mut t = String::new();
        let mut want_total = 0u64;
        let mut want_largest = 0u64;
        for i in 0..40_000u64 {
            let (total, inactive) = (2 << 20 | i << 9, 512 * (i % 977));
            want_total += total;
            want_largest = want_largest.max(inactive);
            t.push_str(&format!(
                "{{'device': 0, 'address': {}, 'total_size': {total}, 'allocated_size': 512, 'blocks': [{{'size': {inactive}, 'state': 'inactive'}}, {{'size': 512, 'state': 'active_allocated'}}]}}, ",
                i << 21
            ));
            // Terminal wraps anywhere, keys and numbers included.
            if i % 7 == 3 {
                let cut = t.len() - (i as usize % 50) - 1;
                t.insert(cut, '\n');
            }
        }
        t.push_str("\n{'num_alloc_retries': 3, 'num_ooms': 1, 'allocated_bytes.all.cu\nrrent': 7, 'reserved_bytes.all.peak': 9}\n");
        assert!(t.len() > 3 * WINDOW);
        let p = parse(&t).unwrap();
        let s = p.segments.unwrap();
        assert_eq!(s.segments, 40_000);
        assert_eq!(s.reserved, want_total);
        assert_eq!(s.allocated, Some(512 * 40_000));
        assert_eq!(s.blocks, 80_000);
        assert_eq!(s.largest_inactive_block, Some(want_largest));
        let st = p.stats.unwrap();
        assert_eq!(st.get("allocated_bytes.all.current"), Some(7));
        assert_eq!(st.get("num_alloc_retries"), Some(3));
        assert_eq!(st.values.len(), 4);
    }

    /// The text read whole, as the readers read it before they streamed:
    /// cleaned, split into lines, and glued for the dumps. The oracle of
    /// the property below.
    fn whole(text: &str) -> Option<Parsed> {
        use super::super::stream::Piece;
        let t = ANSI.replace_all(text, "");
        let t = t.replace("\r\n", "\n").replace('\r', "\n");
        let pieces = t.lines().enumerate().map(|(i, l)| Piece {
            text: l.to_string(),
            line: i,
            own: l.len(),
            fresh: 0,
            whole: true,
        });
        let messages = parse_messages(pieces);
        let mut summary = SummaryReader::default();
        t.lines().for_each(|l| summary.line(l));
        let flat: String = t.chars().filter(|&c| c != '\n').collect();
        let mut stats = MemoryStats::default();
        for c in STAT_KV.captures_iter(&flat) {
            stat_kv(&mut stats, &c[1], &c[2]);
        }
        let totals: Vec<u64> = SEG_TOTAL
            .captures_iter(&flat)
            .filter_map(|c| c[1].parse().ok())
            .collect();
        let allocated: Vec<u64> = SEG_ALLOCATED
            .captures_iter(&flat)
            .filter_map(|c| c[1].parse().ok())
            .collect();
        let mut seg = SegmentsPaste {
            segments: totals.len() as u64,
            reserved: totals.iter().sum(),
            allocated: (!allocated.is_empty()).then(|| allocated.iter().sum()),
            ..Default::default()
        };
        for d in BLOCK_DICT.find_iter(&flat) {
            let d = d.as_str();
            let (Some(sz), Some(st)) = (BLOCK_SIZE.captures(d), BLOCK_STATE.captures(d)) else {
                continue;
            };
            seg.blocks += 1;
            if &st[1] == "inactive" {
                let b: u64 = sz[1].parse().unwrap();
                seg.largest_inactive_block = Some(seg.largest_inactive_block.unwrap_or(0).max(b));
            }
        }
        let p = Parsed {
            messages,
            summary: summary.finish(),
            stats: (stats.values.len() >= 3).then_some(stats),
            segments: (!totals.is_empty()).then_some(seg),
        };
        let none = p.messages.is_empty()
            && p.summary.is_none()
            && p.stats.is_none()
            && p.segments.is_none();
        (!none).then_some(p)
    }

    const FRAGMENTS: &[&str] = &[
        MSG,
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.90 GiB total capacity; 14.93 GiB already allocated; 5.75 MiB free; 15.07 GiB reserved in total by PyTorch)",
        "HIP out of memory. Tried to allocate 1.00 GiB. GPU 1 has a total capacity of 63.98 GiB",
        "step 12 loss 0.3412",
        "Traceback (most recent call last):",
        "|===========================================================================|",
        "| Allocated memory      |  10240 MiB |  12288 MiB |  40960 GiB |  40950 GiB |",
        "|       from large pool |  10000 MiB |  12000 MiB |  40000 GiB |  39990 GiB |",
        "| GPU reserved memory   |  14336 MiB |  14336 MiB |  14336 MiB |      0 B   |",
        "|                  PyTorch CUDA memory summary, device ID 0                 |",
        "|   CUDA OOMs: 1          |        cudaMalloc retries: 3                    |",
        "{'allocated_bytes.all.current': 1024, 'num_alloc_retries': 2, ",
        "'reserved_bytes.all.peak': 4096, 'active_bytes.large_pool.freed': -5}",
        "{'device': 0, 'address': 140, 'total_size': 20971520, 'allocated_size': 512, 'blocks': [",
        "{'size': 512, 'state': 'active_allocated'}, {'size': 2048, 'state': 'inactive'}]}",
        "\x1b[31mERROR\x1b[0m ",
        " 45%|####5     | ",
        "\r\x1b[K",
        "température ✓ 日本 ",
    ];

    fn arb_text() -> impl Strategy<Value = String> {
        let piece = (0..FRAGMENTS.len(), 0usize..4, any::<bool>(), any::<u16>());
        proptest::collection::vec(piece, 0..60).prop_map(|parts| {
            let mut t = String::new();
            for (f, end, wrap, cut) in parts {
                let mut frag = FRAGMENTS[f].to_string();
                // A terminal wrap anywhere in it, sometimes.
                if wrap && !frag.is_empty() {
                    let mut at = usize::from(cut) % frag.len();
                    while !frag.is_char_boundary(at) {
                        at -= 1;
                    }
                    frag.insert(at, '\n');
                }
                t.push_str(&frag);
                t.push_str(["", "\n", "\r\n", "\r"][end]);
            }
            t
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// Read as a stream, through reads of any size, any text shorter
        /// than a window gives what the whole text gives.
        #[test]
        fn the_stream_reads_what_the_whole_text_holds(text in arb_text(), cap in 1usize..64) {
            let r = std::io::BufReader::with_capacity(cap, text.as_bytes());
            let streamed = parse_reader(r).unwrap().ok();
            prop_assert_eq!(streamed, whole(&text));
        }
    }
}
