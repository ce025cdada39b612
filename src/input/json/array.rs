//! A top-level array that is no Chrome trace, read element by element: a
//! memory-timeline export's rows straight into the numbers its timeline
//! needs, a bare segment list into the arena as an object's `segments` are.
//!
//! Which one a document is follows [`is_memory_timeline`]'s rules, applied
//! as the elements arrive: the raw form when its first 16 elements (or all,
//! if fewer) are rows of four integers; the coalesced form when it is two
//! arrays of equal length, the first 16 times numbers and the first 16
//! `sizes` entries nine integers; anything else is a list of segments. An
//! array whose first element is itself an array is read as a timeline until
//! it turns out to be none; as a list of segments it would be refused at its
//! first element, a list where a segment's dict belongs, so the rest of it is
//! only parsed (a syntax error further on still wins), never kept.
//!
//! A value is never held as a `serde_json::Value` except the first element
//! when it is an object (whether it is a Chrome trace's event is read off
//! it): what is kept is one number per time, one entry per row or step, or
//! the arena's nodes.
//!
//! [`is_memory_timeline`]: crate::input::profiler::is_memory_timeline

use super::build::{Builder, Ctx, Seed};
use crate::input::profiler::memtimeline::{CoalescedSteps, MemoryTimeline, RawRows};
use crate::input::value::{Node, Vid};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A visitor's numbers: `$f` of the number as an integer that fits i64.
macro_rules! numbers {
    ($f:expr) => {
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            let f: fn(Option<i64>) -> Self::Value = $f;
            Ok(f(Some(v)))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            let f: fn(Option<i64>) -> Self::Value = $f;
            Ok(f(i64::try_from(v).ok()))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            let f: fn(Option<i64>) -> Self::Value = $f;
            Ok(f(None))
        }
    };
}

/// A visitor's values that are neither numbers nor arrays: `$v`, an object
/// parsed to its end.
macro_rules! others {
    ($v:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($v)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($v)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($v)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok($v)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            skip_map(map)?;
            Ok($v)
        }
    };
}

/// What a top-level array turned out to be.
pub(super) enum Array {
    Timeline(MemoryTimeline),
    /// A list of segments (or of anything else) in the arena, and its node.
    Segments(Box<Builder<'static>>, Vid),
    /// No timeline, and its first element an array: as a list of segments,
    /// refused at `[0]`.
    ListFirst,
}

/// The first element: an object or a scalar whole, an array as numbers.
pub(super) enum First {
    Value(Value),
    Numbers(Numbers),
}

/// An array read as numbers: the first element of a timeline (a raw row or
/// the times of a coalesced export).
pub(super) struct Numbers {
    /// Each item as a time: its value, or NaN when it is no number.
    times: Vec<f64>,
    /// The first four items as integers (`None`: not an integer).
    head: [Option<i64>; 4],
}

impl Numbers {
    fn raw_row(&self) -> Option<[i64; 4]> {
        match (self.times.len(), self.head) {
            (4, [Some(a), Some(b), Some(c), Some(d)]) => Some([a, b, c, d]),
            _ => None,
        }
    }

    /// Whether the first 16 items are numbers.
    fn times_lead(&self) -> bool {
        self.times.iter().take(16).all(|t| !t.is_nan())
    }
}

/// Reads the first element.
pub(super) struct FirstSeed;

impl<'de> DeserializeSeed<'de> for FirstSeed {
    type Value = First;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<First, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FirstSeed {
    type Value = First;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    scalars!(First::Value);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<First, A::Error> {
        let mut n = Numbers {
            times: Vec::new(),
            head: [None; 4],
        };
        while let Some(x) = seq.next_element_seed(NumSeed)? {
            let (t, int) = match x {
                Num::Number(t, int) => (t, int),
                Num::Other => (f64::NAN, None),
            };
            if let Some(h) = n.head.get_mut(n.times.len()) {
                *h = int;
            }
            n.times.push(t);
        }
        Ok(First::Numbers(n))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<First, A::Error> {
        let v = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(First::Value(v))
    }
}

/// The rest of an array whose first element is an object or a scalar (and
/// no Chrome trace's event): a list of segments, each built into the arena.
pub(super) fn segments<'de, A: SeqAccess<'de>>(
    first: Value,
    mut seq: A,
) -> Result<Array, A::Error> {
    let mut b = Box::<Builder>::default();
    let it = Seed {
        b: &mut b,
        ctx: Ctx::Plain,
    }
    .deserialize(&first)
    .map_err(de::Error::custom)?;
    drop(first);
    let mut items = vec![b.vid(it, 0)];
    while let Some(it) = seq.next_element_seed(Seed {
        b: &mut b,
        ctx: Ctx::Plain,
    })? {
        items.push(b.vid(it, 0));
    }
    let root = b.arena.push(Node::List(items));
    Ok(Array::Segments(b, root))
}

/// An empty array: a list of no segments.
pub(super) fn empty() -> Array {
    let mut b = Box::<Builder>::default();
    let root = b.arena.push(Node::List(Vec::new()));
    Array::Segments(b, root)
}

/// The rest of an array whose first element is an array.
pub(super) fn after_numbers<'de, A: SeqAccess<'de>>(
    first: Numbers,
    mut seq: A,
) -> Result<Array, A::Error> {
    let mut raw = first.raw_row().map(|r| {
        let mut rows = RawRows::default();
        rows.push(Some(r));
        rows
    });
    let coalesced = first.times_lead();
    if raw.is_none() && !coalesced {
        return list_first(seq);
    }
    let times = coalesced.then_some(&first.times[..]);
    let Some(second) = seq.next_element_seed(SecondSeed { times })? else {
        return Ok(match raw {
            Some(rows) => Array::Timeline(rows.finish()),
            None => Array::ListFirst,
        });
    };
    // A second element that is a row is no `sizes` array (its first item is
    // no array), so at most one form is left.
    match (raw.as_mut(), second.row, second.steps) {
        (Some(rows), Some(row), _) => rows.push(Some(row)),
        (_, _, Some(steps)) => {
            if seq.next_element::<Skip>()?.is_some() {
                return list_first(seq);
            }
            return Ok(Array::Timeline(steps.finish()));
        }
        _ => return list_first(seq),
    }
    let mut rows = raw.expect("matched above");
    let mut i = 2;
    while let Some(row) = seq.next_element_seed(IntsSeed::<4>)? {
        if row.is_none() && i < 16 {
            return list_first(seq);
        }
        rows.push(row);
        i += 1;
    }
    Ok(Array::Timeline(rows.finish()))
}

/// The rest of an array that is no timeline, its first element an array:
/// parsed to its end, kept nowhere.
fn list_first<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Array, A::Error> {
    while seq.next_element::<Skip>()?.is_some() {}
    Ok(Array::ListFirst)
}

/// The second element of an array whose first is one: a raw row, or the
/// `sizes` of a coalesced export whose times are `times`.
struct SecondSeed<'t> {
    times: Option<&'t [f64]>,
}

struct Second {
    row: Option<[i64; 4]>,
    /// The steps read, while the element may be the `sizes` of `times`.
    steps: Option<CoalescedSteps>,
}

impl<'de> DeserializeSeed<'de> for SecondSeed<'_> {
    type Value = Second;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Second, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SecondSeed<'_> {
    type Value = Second;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    numbers!(|_| Second {
        row: None,
        steps: None
    });
    others!(Second {
        row: None,
        steps: None
    });

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Second, A::Error> {
        let mut steps = self.times.map(|_| CoalescedSteps::default());
        let mut head = [None; 4];
        let mut n = 0;
        while let Some(x) = seq.next_element_seed(ItemSeed)? {
            let (int, sizes) = match x {
                Item::Int(i) => (Some(i), None),
                Item::Sizes(s) => (None, s),
                Item::Other => (None, None),
            };
            if let Some(h) = head.get_mut(n) {
                *h = int;
            }
            if let Some(s) = steps.as_mut() {
                match (self.times.and_then(|t| t.get(n)), sizes) {
                    (Some(&t), sizes) if sizes.is_some() || n >= 16 => {
                        s.push((!t.is_nan()).then_some(t), sizes)
                    }
                    // Longer than the times, or an early entry that is no
                    // `sizes` entry: no coalesced export.
                    _ => steps = None,
                }
            }
            n += 1;
        }
        if self.times.is_some_and(|t| t.len() != n) {
            steps = None;
        }
        let row = match (n, head) {
            (4, [Some(a), Some(b), Some(c), Some(d)]) => Some([a, b, c, d]),
            _ => None,
        };
        Ok(Second { row, steps })
    }
}

/// An item of an array of numbers.
enum Num {
    /// Its value as a float, and as an integer if it is one that fits i64.
    Number(f64, Option<i64>),
    Other,
}

struct NumSeed;

impl<'de> DeserializeSeed<'de> for NumSeed {
    type Value = Num;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Num, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NumSeed {
    type Value = Num;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_i64<E>(self, v: i64) -> Result<Num, E> {
        Ok(Num::Number(v as f64, Some(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Num, E> {
        Ok(Num::Number(v as f64, i64::try_from(v).ok()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Num, E> {
        Ok(Num::Number(v, None))
    }
    others!(Num::Other);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Num, A::Error> {
        skip_seq(seq)?;
        Ok(Num::Other)
    }
}

/// An item of the second element: an integer (a raw row's), an array (a
/// `sizes` entry: nine integers, or `None`), or anything else.
enum Item {
    Int(i64),
    Sizes(Option<[i64; 9]>),
    Other,
}

struct ItemSeed;

impl<'de> DeserializeSeed<'de> for ItemSeed {
    type Value = Item;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Item, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemSeed {
    type Value = Item;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    numbers!(|i: Option<i64>| i.map_or(Item::Other, Item::Int));
    others!(Item::Other);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Item, A::Error> {
        ints(seq).map(Item::Sizes)
    }
}

/// An array of `N` integers, or `None` for any other value.
struct IntsSeed<const N: usize>;

impl<'de, const N: usize> DeserializeSeed<'de> for IntsSeed<N> {
    type Value = Option<[i64; N]>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, const N: usize> Visitor<'de> for IntsSeed<N> {
    type Value = Option<[i64; N]>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    numbers!(|_| None);
    others!(None);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        ints(seq)
    }
}

/// The items of an array as `N` integers (`None` when they are not),
/// every item parsed.
fn ints<'de, A: SeqAccess<'de>, const N: usize>(mut seq: A) -> Result<Option<[i64; N]>, A::Error> {
    let mut out = [0; N];
    let mut n = 0;
    let mut all = true;
    while let Some(x) = seq.next_element_seed(IntSeed)? {
        match (x, out.get_mut(n)) {
            (Some(i), Some(o)) => *o = i,
            _ => all = false,
        }
        n += 1;
    }
    Ok((all && n == N).then_some(out))
}

/// An integer that fits i64, or `None` for any other value.
struct IntSeed;

impl<'de> DeserializeSeed<'de> for IntSeed {
    type Value = Option<i64>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<i64>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IntSeed {
    type Value = Option<i64>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    numbers!(|i| i);
    others!(None);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<i64>, A::Error> {
        skip_seq(seq)?;
        Ok(None)
    }
}

/// Any value, parsed as `serde_json::Value` would be (to the same nesting
/// limit, which `IgnoredAny` would not keep) and dropped.
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Skip, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    numbers!(|_| Skip);
    others!(Skip);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Skip, A::Error> {
        skip_seq(seq)?;
        Ok(Skip)
    }
}

fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<Skip>()?.is_some() {}
    Ok(())
}

fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<Skip, Skip>()?.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::input::Content;
    use crate::input::json::load_json;
    use crate::input::profiler::{is_memory_timeline, timeline_from_json};
    use serde_json::Value;

    fn rows(n: i64, bad_at: Option<i64>) -> String {
        let rows: Vec<String> = (0..n)
            .map(|i| match bad_at {
                Some(b) if b == i => "[1, 2, 3]".to_string(),
                _ => format!(
                    "[{}, {}, {}, {}]",
                    i * 700 - 1,
                    1 + i % 5,
                    100 - i * 3,
                    i % 9
                ),
            })
            .collect();
        format!("[{}]", rows.join(", "))
    }

    /// Read element by element, a document is the timeline (or not) that the
    /// whole `serde_json::Value` makes.
    #[test]
    fn each_document_is_what_its_value_makes() {
        let mut docs = vec![
            "[]".to_string(),
            "[[]]".into(),
            "[[], []]".into(),
            "[[], [], []]".into(),
            "[[1000, 2, 10, 3]]".into(),
            "[[1000, 2, 10.5, 3]]".into(),
            "[[1, 2, 3, 4], [1, 2, 3, 4.5]]".into(),
            "[[1, 2, 3, 4], {\"a\": [1]}]".into(),
            "[[1, 2, 3, 4], [[0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 1, 2, 3, 4, 5, 6, 7, 8], \
             [0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0]]]"
                .into(),
            "[[10, 20, 30], [[0, 5, 0, 0, 0, 0, 0, 0, 0], [0, 5, 0, 0, 0, 7, 0, 0, 0]]]".into(),
            "[[10, 20], [[0, 5, 0, 0, 0, 0, 0, 0, 0], [0, 5, 0, 0, 0, 7, 0, 0, 0]], 1]".into(),
            "[[10, \"x\"], [[0, 5, 0, 0, 0, 0, 0, 0, 0], [0, 5, 0, 0, 0, 7, 0, 0, 0]]]".into(),
            "[[18446744073709551615, -2.5], [[0, -5, 0, 0, 0, 0, 0, 0, 0], \
             [0, 5, 0, 0, 0, 7, 0, 0, 0]]]"
                .into(),
            "[1, 2, 3]".into(),
            "[[1, 2, 3]]".into(),
        ];
        for bad in [None, Some(0), Some(3), Some(15), Some(16), Some(30)] {
            docs.push(rows(40, bad));
            docs.push(rows(12, bad));
        }
        let n = 40;
        let times: Vec<String> = (0..n)
            .map(|i| match i {
                20 => "null".to_string(),
                _ => format!("{}", i as f64 * 1.5),
            })
            .collect();
        let sizes: Vec<String> = (0..n)
            .map(|i| match i {
                25 => "[1, 2]".to_string(),
                _ => format!("[0, {i}, 0, {}, 0, 0, 0, 0, {}]", 40 - i, i % 3),
            })
            .collect();
        docs.push(format!("[[{}], [{}]]", times.join(","), sizes.join(",")));
        for doc in docs {
            let v: Value = serde_json::from_str(&doc).unwrap();
            match load_json(doc.as_bytes(), "x") {
                Ok(Content::MemoryTimeline(t)) => {
                    assert!(is_memory_timeline(&v), "{doc}");
                    assert_eq!(t, timeline_from_json(&v, "x").unwrap(), "{doc}");
                }
                other => assert!(!is_memory_timeline(&v), "{doc}: {other:?}"),
            }
        }
    }

    /// An array whose first element is a list and that is no timeline is
    /// refused as a list of segments is, at its first element.
    #[test]
    fn a_list_first_is_no_segment() {
        for doc in [
            "[[1, 2, 3]]",
            "[[1, 2, 3, 4], [1, 2, 3]]",
            "[[1, 2], [3], [4]]",
        ] {
            let e = load_json(doc.as_bytes(), "x").unwrap_err().to_string();
            assert_eq!(e, "x: [0]: expected a dict, found list", "{doc}");
        }
    }
}
