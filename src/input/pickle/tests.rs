//! Unit tests of the pickle machine: memo sharing, refused opcodes, long
//! integers, hostile lengths, deep nesting and the text opcodes.

use super::literals::{long_from_le, sign_extend};
use super::*;

fn root(d: &Decoded) -> &Node {
    d.arena.get(d.root)
}

#[test]
fn protocol2_dict_with_memo_sharing() {
    // {"a": [1, 2], "b": <same list>} as CPython protocol 2 writes it.
    let p =
        b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01K\x02eX\x01\x00\x00\x00bq\x03h\x02u.";
    let d = decode(p).unwrap();
    assert_eq!(d.protocol, 2);
    let Node::Dict(items) = root(&d) else {
        panic!()
    };
    assert_eq!(items.len(), 2);
    assert_eq!(
        items[0].1, items[1].1,
        "memo reference must be a shared node"
    );
}

#[test]
fn refuses_global_with_offset() {
    let p = b"\x80\x02cos\nsystem\n.";
    let e = decode(p).err().unwrap();
    assert_eq!(e.offset, 2);
    assert!(e.msg.contains("GLOBAL"), "{}", e.msg);
}

#[test]
fn long1_negative_and_big() {
    let p = b"\x80\x02]q\x00(\x8a\x01\xff\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00e.";
    let d = decode(p).unwrap();
    let Node::List(v) = root(&d) else { panic!() };
    assert_eq!(d.arena.get(v[0]), &Node::Int(-1));
    assert_eq!(d.arena.get(v[1]), &Node::Int(i64::MIN));
    assert_eq!(d.arena.get(v[2]), &Node::BigInt);
}

#[test]
fn huge_length_prefix_is_an_error_not_an_allocation() {
    let p = b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f";
    let e = decode(p).err().unwrap();
    assert!(
        e.msg.contains("past the end") || e.msg.contains("larger"),
        "{}",
        e.msg
    );
}

#[test]
fn deep_nesting_does_not_overflow() {
    let mut p = vec![0x80, 4];
    p.extend(std::iter::repeat_n(b']', 200_000));
    p.extend(std::iter::repeat_n(b'a', 199_999));
    p.push(b'.');
    assert!(decode(&p).is_ok());
}

#[test]
fn protocol0_text_opcodes() {
    let p = b"(dp0\nS'x'\np1\nI42\nsVh\\u00e9\np2\nL7L\ns.";
    let d = decode(p).unwrap();
    let Node::Dict(items) = root(&d) else {
        panic!()
    };
    assert_eq!(d.arena.get(items[0].1), &Node::Int(42));
    assert_eq!(d.arena.as_str(items[1].0), Some("hé"));
}

#[test]
fn long1_word_read_agrees_with_the_byte_read() {
    let samples: [&[u8]; 9] = [
        b"",
        b"\x7f",
        b"\x80",
        b"\xff\x00",
        b"\x00\x80",
        b"\x00\xa0\x3c\x8b\xfe\x7f",
        b"\x45\x23\x01\x00\x00\x00\x06\x00",
        b"\x00\x00\x00\x00\x00\x00\x00\x80",
        b"\xff\xff\xff\xff\xff\xff\xff\xff",
    ];
    for b in samples {
        let mut w = [0xa5u8; 8];
        w[..b.len()].copy_from_slice(b);
        let fast = Val::Int(sign_extend(u64::from_le_bytes(w), b.len()));
        assert_eq!(fast, long_from_le(b), "{b:?}");
    }
    // Through the machine: a LONG1 near the end of the data takes the
    // byte path, one further in the word path; both give the value.
    let mut p = b"\x80\x04]\x94(\x8a\x03\xff\xff\x7f".to_vec();
    p.extend_from_slice(b"\x8a\x02\x00\x80e.");
    let d = decode(&p).unwrap();
    let Node::List(v) = root(&d) else { panic!() };
    assert_eq!(d.arena.get(v[0]), &Node::Int(0x7f_ffff));
    assert_eq!(d.arena.get(v[1]), &Node::Int(-32768));
}

#[test]
fn missing_memo_key() {
    let e = decode(b"\x80\x04h\x05.").err().unwrap();
    assert!(e.msg.contains("memo reference 5"));
}

/// The frames cache admits every list it missed until most lists it
/// admitted were pushed out without being found again (a file whose
/// stacks are all new); then one in sixteen, until lists found again
/// outnumber them once more.
#[test]
fn frames_cache_admits_lists_while_they_recur() {
    use super::frames::{Cached, FramesCache, frames_set};
    let mut c = FramesCache::new();
    // A list of references (BINGETs) of its own, padded past 32 bytes.
    let list = |k: u32| -> Vec<u8> {
        let mut b: Vec<u8> = (0..20)
            .flat_map(|j| [b'h', ((k * 7 + j) % 256) as u8])
            .collect();
        b.extend_from_slice(&k.to_le_bytes());
        b.push(b'e');
        b
    };
    let admitted = |c: &mut FramesCache, from: u32, n: u32, recur: bool| {
        let mut yes = 0;
        for k in from..from + n {
            let b = list(k);
            let set = frames_set(&b).unwrap();
            if c.find(&b, 0, set, 0).is_some() {
                continue;
            }
            if c.admit() {
                yes += 1;
                c.insert(set, &b[..b.len() - 1], k, 0, Cached::Read);
                // Found again at once, as a call site's next event finds it.
                if recur {
                    assert_eq!(c.find(&b, 0, set, 0), Some((k, b.len())));
                }
            }
        }
        yes
    };
    // New lists, each found again: every one is admitted.
    assert_eq!(admitted(&mut c, 0, 8192, true), 8192);
    // New lists never found again: once the cache has filled anew with
    // them, one in sixteen.
    let yes = admitted(&mut c, 100_000, 64 * 1024, false);
    assert!(yes < 64 * 1024 / 8, "{yes} of 65536 admitted");
    // Found again once more: once the unused ones are pushed out, all of
    // them again.
    let yes = admitted(&mut c, 200_000, 64 * 1024, true);
    eprintln!("{yes} of 65536 admitted while the cache recovers");
    assert_eq!(admitted(&mut c, 300_000, 8192, true), 8192);
}

/// Lists of one set that recur in a cycle longer than its ways are found
/// in the deep cache, and count as found again: the cache goes on
/// admitting new lists.
#[test]
fn frames_cache_counts_lists_found_in_the_deep_cache() {
    use super::frames::{Cached, FramesCache, frames_set};
    let mut c = FramesCache::new();
    // The same first 32 bytes (one set), then a reference of its own.
    let list = |k: u32| -> Vec<u8> {
        let mut b: Vec<u8> = (0..16).flat_map(|_| [b'h', 1]).collect();
        b.push(b'j');
        b.extend_from_slice(&k.to_le_bytes());
        b.push(b'e');
        b
    };
    let deep_hits = std::cell::Cell::new(0);
    let offer = |c: &mut FramesCache, k: u32| -> bool {
        let b = list(k);
        let set = frames_set(&b).unwrap();
        if c.find(&b, 0, set, 0).is_some() {
            return true;
        }
        let body = &b[..b.len() - 1];
        match c.find_deep(body, 0) {
            Ok(s) => {
                assert_eq!(s, k);
                deep_hits.set(deep_hits.get() + 1);
                c.insert(set, body, s, 0, Cached::Deep);
                true
            }
            Err(hash) => {
                let yes = c.admit();
                if yes {
                    c.insert(set, body, k, 0, Cached::Read);
                    c.insert_deep(body, hash, k, 0);
                }
                yes
            }
        }
    };
    // A cycle of 48 lists, more than the set's 32 ways, forty times over.
    for _ in 0..40 {
        for k in 0..48 {
            offer(&mut c, k);
        }
    }
    let deep_hits = deep_hits.get();
    assert!(deep_hits > 30 * 48, "{deep_hits} found in the deep cache");
    // New lists are all admitted still.
    assert!((1000..1100).all(|k| offer(&mut c, k)));
}
