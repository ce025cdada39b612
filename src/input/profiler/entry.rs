//! A Chrome trace's entry read from its JSON text, only as far as
//! [`TraceReader::add`](super::chrome::TraceReader::add) can keep anything
//! of it: most entries of a real trace (kernels, runtime calls, flows) are
//! left unparsed, and of the others only the keys it looks up are built.

use serde_json::Value;

/// What [`TraceReader::add`](super::chrome::TraceReader::add) reads of the
/// entry `text`: `None` when it keeps nothing of it. An object whose text
/// names none of the event names and categories it keeps, with no escape
/// that could spell one, is left unparsed.
pub(super) fn read(text: &str) -> Result<Option<Value>, serde_json::Error> {
    const NAMED: [&str; 5] = [
        "[memory]",
        "[OutOfMemory]",
        "cpu_op",
        "Operator",
        "python_function",
    ];
    let b = text.as_bytes();
    let left = b.first() == Some(&b'{')
        && memchr::memchr(b'\\', b).is_none()
        && !NAMED
            .iter()
            .any(|k| memchr::memmem::find(b, k.as_bytes()).is_some());
    if left {
        return Ok(None);
    }
    Ok(Some(match serde_json::from_str::<Kept>(text)? {
        Kept::Keys(m) => Value::Object(m),
        Kept::Whole => serde_json::from_str::<Value>(text)?,
    }))
}

/// A trace entry as [`TraceReader::add`](super::chrome::TraceReader::add) reads it: of an object, the keys it
/// looks up alone (the last value of a repeated one, as in a `Value`), and
/// `args` only where it may be read (the event is no memory event, by a
/// name read before it, and no later name says otherwise); anything else
/// whole.
enum Kept {
    Keys(serde_json::Map<String, Value>),
    /// Not an object, or an `args` left before a later name that needs it.
    Whole,
}

/// The top-level keys [`TraceReader::add`](super::chrome::TraceReader::add) and `memory_event` read.
const KEPT_KEYS: [&str; 8] = ["name", "ph", "cat", "ts", "dur", "pid", "tid", "args"];

/// Whether `name` is the name of an event whose `args` are read.
fn reads_args(name: Option<&Value>) -> bool {
    matches!(
        name.and_then(|n| n.as_str()),
        Some("[memory]" | "[OutOfMemory]")
    )
}

impl<'de> serde::Deserialize<'de> for Kept {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Kept, D::Error> {
        d.deserialize_any(KeptVisitor)
    }
}

struct KeptVisitor;

/// A key of an entry: its place in [`KEPT_KEYS`], if any.
struct KeptKey(Option<usize>);

impl<'de> serde::Deserialize<'de> for KeptKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<KeptKey, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = KeptKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, k: &str) -> Result<KeptKey, E> {
                Ok(KeptKey(KEPT_KEYS.iter().position(|&x| x == k)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> serde::de::Visitor<'de> for KeptVisitor {
    type Value = Kept;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Kept, A::Error> {
        let mut m = serde_json::Map::new();
        let mut args_left = false;
        while let Some(KeptKey(k)) = map.next_key()? {
            match k {
                Some(i)
                    if KEPT_KEYS[i] == "args"
                        && m.get("name").is_some_and(|n| !reads_args(Some(n))) =>
                {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    args_left = true;
                }
                Some(i) => {
                    m.insert(KEPT_KEYS[i].to_string(), map.next_value()?);
                }
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        if args_left && reads_args(m.get("name")) {
            return Ok(Kept::Whole);
        }
        Ok(Kept::Keys(m))
    }
    // Anything but an object is read whole (an anomaly of `add`).
    fn visit_bool<E>(self, _: bool) -> Result<Kept, E> {
        Ok(Kept::Whole)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Kept, E> {
        Ok(Kept::Whole)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Kept, E> {
        Ok(Kept::Whole)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Kept, E> {
        Ok(Kept::Whole)
    }
    fn visit_str<E>(self, _: &str) -> Result<Kept, E> {
        Ok(Kept::Whole)
    }
    fn visit_unit<E>(self) -> Result<Kept, E> {
        Ok(Kept::Whole)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Kept, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Kept::Whole)
    }
}

#[cfg(test)]
mod tests {
    use crate::input::Content;
    use crate::input::json::load_json;
    use crate::input::profiler::trace_from_json;

    /// A trace read entry by entry from its text is the trace its whole
    /// `Value` gives, whatever the order and repetition of the keys.
    #[test]
    fn read_keeps_what_add_reads() {
        let mem = |ts: u32, bytes: i64| {
            format!(
                r#"{{"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": {ts}, "args": {{"Addr": 4096, "Bytes": {bytes}, "Total Allocated": 512, "Total Reserved": 2097152, "Device Id": 0, "Device Type": 1}}}}"#
            )
        };
        let entries = [
            mem(5, 512),
            // `args` before the name.
            r#"{"args": {"Bytes": -512, "Device Type": 1, "Device Id": 0, "Total Allocated": 0, "Total Reserved": 2097152, "Addr": 4096}, "ph": "i", "ts": 30, "pid": 1, "tid": 2, "name": "[memory]"}"#.into(),
            r#"{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 1, "dur": 20, "args": {"External id": 7, "Input Dims": [[2, 2]]}}"#.into(),
            // A later name makes it a memory event after its `args`.
            r#"{"name": "aten::x", "args": {"Bytes": 256, "Device Type": 1, "Device Id": 0}, "ph": "i", "ts": 6, "name": "[memory]", "pid": 1, "tid": 2}"#.into(),
            // A repeated key: the last value.
            r#"{"ph": "X", "cat": "kernel", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2, "ts": 4, "dur": 3}"#.into(),
            r#"{"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 1, "tid": 2, "ts": 0, "dur": 40}"#.into(),
            r#"{"ph": "X", "cat": "kernel", "name": "void k<float>()", "pid": 0, "tid": 7, "ts": 2, "dur": 1, "args": {"correlation": 3}}"#.into(),
            // Spelled with an escape.
            mem(8, 128).replace("[memory]", "\\u005bmemory]"),
            r#"{"ph": "i", "name": "[OutOfMemory]", "pid": 1, "tid": 2, "ts": 9, "args": {"Bytes": 1073741824, "Device Type": 1, "Device Id": 0, "Total Allocated": 640, "Total Reserved": 2097152}}"#.into(),
            r#"{"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 10}"#.into(),
            "5".into(),
            r#""text""#.into(),
            "[1, 2]".into(),
            "null".into(),
        ];
        for n in 1..=entries.len() {
            let doc = format!(r#"{{"traceEvents": [{}]}}"#, entries[..n].join(", "));
            let whole: serde_json::Value = serde_json::from_str(&doc).unwrap();
            let expected = format!("{:?}", trace_from_json(&whole, "x"));
            let read = match load_json(doc.as_bytes(), "x") {
                Ok(Content::Profiler(t)) => format!("{:?}", Ok::<_, ()>(t)),
                Ok(other) => panic!("not a profiler trace: {other:?}"),
                Err(e) => format!("{:?}", Err::<(), _>(e)),
            };
            assert_eq!(read, expected, "{doc}");
        }
    }
}
