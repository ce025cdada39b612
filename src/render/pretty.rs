//! serde_json's pretty form (two spaces a level), written with each line
//! break and its indent in one piece: serde_json's own `PrettyFormatter`
//! writes the indent a level at a time, a call into the writer each, which
//! made most of the writing of a long `timeline --json` (hundreds of
//! megabytes of objects nested four to six deep). The bytes are the same.

use serde::Serialize;
use serde_json::ser::Formatter;
use std::io::{self, Write};

/// Levels whose line break and indent are written from [`BREAKS`]; deeper
/// ones a level at a time.
const LEVELS: usize = 64;

/// `,\n` and the spaces of [`LEVELS`] levels: a line break after a value is
/// `BREAKS[..2 + 2 * level]`, before the first one `BREAKS[1..2 + 2 * level]`.
static BREAKS: [u8; 2 + 2 * LEVELS] = {
    let mut b = [b' '; 2 + 2 * LEVELS];
    b[0] = b',';
    b[1] = b'\n';
    b
};

/// The formatter: the state of serde_json's `PrettyFormatter` with its
/// default indent.
#[derive(Default)]
pub struct Pretty {
    level: usize,
    has_value: bool,
}

#[inline]
fn line<W: ?Sized + Write>(w: &mut W, comma: bool, level: usize) -> io::Result<()> {
    let from = if comma { 0 } else { 1 };
    if level <= LEVELS {
        return w.write_all(&BREAKS[from..2 + 2 * level]);
    }
    w.write_all(&BREAKS[from..2])?;
    (0..level).try_for_each(|_| w.write_all(b"  "))
}

impl Pretty {
    /// `[` or `{`: one level deeper, no value in it yet.
    #[inline]
    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    /// `]` or `}`, on a line of its own after a value.
    #[inline]
    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            line(w, false, self.level)?;
        }
        w.write_all(bracket)
    }
}

impl Formatter for Pretty {
    #[inline]
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    #[inline]
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    #[inline]
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        line(w, !first, self.level)
    }

    #[inline]
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    #[inline]
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    #[inline]
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    #[inline]
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        line(w, !first, self.level)
    }

    #[inline]
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    #[inline]
    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// `value` as [`to_writer`] writes it nested `level` levels deep: its
/// inner lines indented by that many more levels, the first and the last
/// (its closing bracket) not indented, as it follows a key or a bracket.
pub fn value_at<W: Write, T: ?Sized + Serialize>(
    w: W,
    level: usize,
    value: &T,
) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(
        w,
        Pretty {
            level,
            has_value: false,
        },
    ))
}

/// `serde_json::to_writer_pretty`, the same bytes, written faster.
pub fn to_writer<W: Write, T: ?Sized + Serialize>(w: W, value: &T) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(
        w,
        Pretty::default(),
    ))
}

/// [`to_writer`] and a line break: a `--json` document as a command prints
/// it, written as it is serialized. Through a buffer of its own, so the
/// serializer's many small writes go to a writer it knows, not through
/// `dyn Write` one by one.
pub fn write_line<T: ?Sized + Serialize>(w: &mut dyn Write, value: &T) -> io::Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, w);
    to_writer(&mut w, value)?;
    w.write_all(b"\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn pretty(v: &Value) -> String {
        let mut out = Vec::new();
        super::to_writer(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_same_bytes_as_serde_jsons_pretty_form() {
        let mut deep = json!([1, {}, []]);
        for i in 0..80 {
            deep = if i % 2 == 0 {
                json!({ "k": deep, "e": [], "o": {} })
            } else {
                json!([deep, [[]], { "x": [1, 2.5, null, "s\"\n"] }])
            };
        }
        let cases = [
            json!(null),
            json!([]),
            json!({}),
            json!([[]]),
            json!([{}]),
            json!({ "a": [] , "b": {}, "c": [1, [], [2, {}]] }),
            json!([1, "two", 3.5, true, null, { "x": { "y": [{ "z": [] }] } }]),
            deep,
        ];
        for v in &cases {
            assert_eq!(pretty(v), serde_json::to_string_pretty(v).unwrap(), "{v}");
        }
    }
}
