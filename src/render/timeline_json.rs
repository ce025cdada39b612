//! `timeline --json` of a snapshot's replayed devices: hundreds of
//! megabytes of samples, each written by hand in serde_json's pretty form
//! (the same bytes as `Sample`'s `Serialize`, a test holds them to it), the
//! rest of the document through serde at its depth.

use super::encode::Chunked;
use super::timeline::TIMELINE_SCHEMA;
use crate::analysis::findings::ReplayedDevice;
use crate::core::serial::Seq;
use crate::timeline::Sample;

/// A snapshot's replayed devices as JSON (schema [`TIMELINE_SCHEMA`]):
///
/// `{"schema", "file", "devices": [{"device", "report", "key_moments",
/// "downsampled", "samples": [Sample...]}]}`
///
/// in serde_json's pretty form. `downsampled` is true when `samples` was
/// reduced with --max-points; otherwise every sample is read from the
/// compact series as it is written (never expanded whole). The samples,
/// most of the bytes, are written by [`write_sample`]; the rest through
/// serde at its depth.
pub fn write_replays_json(
    w: &mut dyn std::io::Write,
    file: &str,
    replays: &[ReplayedDevice],
) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = Chunked::new(w);
    o.write_all(b"{\n  \"schema\": ")?;
    value(&mut o, 1, TIMELINE_SCHEMA)?;
    o.write_all(b",\n  \"file\": ")?;
    value(&mut o, 1, file)?;
    o.write_all(b",\n  \"devices\": [")?;
    for (i, r) in replays.iter().enumerate() {
        o.write_all(if i == 0 { b"\n    {" } else { b",\n    {" })?;
        o.write_all(b"\n      \"device\": ")?;
        value(&mut o, 3, &r.replay.device)?;
        o.write_all(b",\n      \"report\": ")?;
        value(&mut o, 3, &r.replay.report)?;
        o.write_all(b",\n      \"key_moments\": ")?;
        match &r.key_moments {
            Some(k) => value(&mut o, 3, &Seq::new(k.iter(&r.replay.samples)))?,
            None => value(&mut o, 3, &[0u8; 0])?,
        }
        o.write_all(b",\n      \"downsampled\": ")?;
        value(&mut o, 3, &r.downsampled)?;
        o.write_all(b",\n      \"samples\": [")?;
        let mut line = Vec::with_capacity(1024);
        let mut any = false;
        let mut put = |s: Sample| -> std::io::Result<()> {
            line.clear();
            line.extend_from_slice(if any { b",\n" } else { b"\n" });
            write_sample(&mut line, &s);
            any = true;
            o.write_all(&line)
        };
        match &r.points {
            Some(p) => p.iter().copied().try_for_each(&mut put)?,
            None => r.replay.samples.iter().try_for_each(&mut put)?,
        }
        o.write_all(if any {
            b"\n      ]\n    }"
        } else {
            b"]\n    }"
        })?;
    }
    o.write_all(if replays.is_empty() {
        b"]\n}\n"
    } else {
        b"\n  ]\n}\n"
    })?;
    o.finish()
}

/// `v` through serde in the pretty form, nested `level` levels deep.
fn value<T: serde::Serialize + ?Sized>(
    o: &mut Chunked,
    level: usize,
    v: &T,
) -> std::io::Result<()> {
    super::pretty::value_at(o, level, v).map_err(std::io::Error::from)
}

/// One sample as `Sample`'s `Serialize` writes it in the pretty form, as an
/// element of the `samples` array (eight spaces in, its fields ten).
fn write_sample(out: &mut Vec<u8>, s: &Sample) {
    use serde_json::ser::{CompactFormatter, Formatter};
    // Writing to memory cannot fail.
    fn key(out: &mut Vec<u8>, first: bool, key: &[u8]) {
        out.extend_from_slice(if first {
            b"\n          \""
        } else {
            b",\n          \""
        });
        out.extend_from_slice(key);
        out.extend_from_slice(b"\": ");
    }
    fn u(out: &mut Vec<u8>, name: &[u8], v: u64) {
        key(out, false, name);
        drop(CompactFormatter.write_u64(out, v));
    }
    fn opt(out: &mut Vec<u8>, name: &[u8], v: Option<u64>) {
        key(out, false, name);
        match v {
            Some(v) => drop(CompactFormatter.write_u64(out, v)),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.extend_from_slice(b"        {");
    key(out, true, b"event");
    match s.event {
        Some(v) => drop(CompactFormatter.write_u32(out, v)),
        None => out.extend_from_slice(b"null"),
    }
    key(out, false, b"time_us");
    match s.time_us {
        Some(v) => drop(CompactFormatter.write_i64(out, v)),
        None => out.extend_from_slice(b"null"),
    }
    u(out, b"allocated", s.allocated);
    u(out, b"active", s.active);
    opt(out, b"reserved", s.reserved);
    match &s.layout {
        None => opt(out, b"external_free", s.external_free),
        Some(l) => {
            u(out, b"internal_free", l.internal_free);
            opt(out, b"external_free", s.external_free);
            u(out, b"pending_free", l.pending_free);
            u(out, b"largest_free_gap", l.largest_free_gap);
            u(out, b"free_gaps", l.free_gaps);
            key(out, false, b"fragmentation");
            // As serde_json writes an f64: null when not finite.
            if l.fragmentation.is_finite() {
                drop(CompactFormatter.write_f64(out, l.fragmentation));
            } else {
                out.extend_from_slice(b"null");
            }
            u(out, b"largest_small_request", l.largest_small_request);
            u(out, b"largest_large_request", l.largest_large_request);
        }
    }
    out.extend_from_slice(b"\n        }");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::LayoutFigures;
    use serde_json::json;

    #[test]
    fn a_sample_has_the_bytes_serde_json_gives_it() {
        let layout = LayoutFigures {
            internal_free: 512,
            pending_free: 0,
            largest_free_gap: u64::MAX,
            free_gaps: 7,
            fragmentation: 0.123_456_789_012_345_67,
            largest_small_request: 1 << 20,
            largest_large_request: 3,
        };
        let samples = [
            Sample::default(),
            Sample {
                event: Some(u32::MAX),
                time_us: Some(i64::MIN),
                allocated: u64::MAX,
                active: 1,
                reserved: Some(0),
                external_free: Some(42),
                layout: Some(layout),
            },
            Sample {
                event: Some(0),
                time_us: Some(-1),
                layout: Some(LayoutFigures {
                    fragmentation: f64::NAN,
                    ..layout
                }),
                ..Sample::default()
            },
            Sample {
                layout: Some(LayoutFigures {
                    fragmentation: 1e-300,
                    ..layout
                }),
                ..Sample::default()
            },
            Sample {
                layout: Some(LayoutFigures {
                    fragmentation: 0.0,
                    ..layout
                }),
                ..Sample::default()
            },
        ];
        let want = serde_json::to_string_pretty(&json!({ "d": [{ "s": samples }] })).unwrap();
        let mut got = b"{\n  \"d\": [\n    {\n      \"s\": [".to_vec();
        for (i, s) in samples.iter().enumerate() {
            got.extend_from_slice(if i == 0 { b"\n" } else { b",\n" });
            write_sample(&mut got, s);
        }
        got.extend_from_slice(b"\n      ]\n    }\n  ]\n}");
        assert_eq!(String::from_utf8(got).unwrap(), want);
    }
}
