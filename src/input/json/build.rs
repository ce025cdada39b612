//! A JSON snapshot's values built into the [`Arena`] as they are parsed,
//! with no `serde_json::Value` of the whole document: equal values (strings,
//! numbers, frames, frames lists) are one node, as a pickle's memo makes
//! them, and the entries of `device_traces[d]` go to the [`TraceSink`] as
//! soon as each is read, as the pickle machine hands them over, so what
//! stays in memory is the model's size, not the text's.
//!
//! A value made one node with an equal one still counts as one of the
//! file's values ([`Arena::taken`]): the schema layer bounds what shared
//! references may expand to by the values the file holds, and a JSON text
//! holds every value it names, however many are equal.
//!
//! Objects keep `serde_json`'s map semantics (a repeated key keeps its first
//! place and its last value), so the arena is the one the whole document
//! parsed into a `Value` gave.

use crate::core::hash::{FxBuild, FxHasher};
use crate::input::pickle::{Sink, Val};
use crate::input::snapshot::{TraceSink, dedup_keys};
use crate::input::value::{Arena, Node, Vid};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::collections::HashMap;
use std::hash::Hasher;

/// A value as it is read: an integer not yet given a node (the entries'
/// fields need none), a node (and whether it is shared by content), or a
/// trace entry the sink took.
#[derive(Clone, Copy)]
pub(super) enum Item {
    Int(i64),
    Node(Vid, bool),
    Taken(u32),
}

/// Where a value sits: `device_traces` itself, one device's trace list,
/// an entry of it (with its list), or anywhere else.
#[derive(Clone, Copy)]
pub(super) enum Ctx {
    Plain,
    DeviceTraces,
    TraceList,
    Entry(u32),
}

#[derive(Default)]
pub(super) struct Builder<'p> {
    pub arena: Arena,
    pub sink: TraceSink,
    /// Nodes shared by content, by hash (a colliding node is not shared).
    cons: HashMap<u64, Vid, FxBuild>,
    /// The document parsed in place, if it is: its text, and where it
    /// tells how far the parser has read.
    place: Option<InPlace<'p>>,
    /// Each `frames` value read so far by its text ([`text_key`]), as the
    /// shared node it was read into and the values it holds: a stack
    /// written out again is found by its text, not parsed again.
    frames_texts: HashMap<(u64, u64, usize), (Vid, u64), FxBuild>,
    /// The string node of the key `frames`, once read.
    frames_key: Option<Vid>,
}

/// A document parsed where it lies: its whole text (where a value read
/// apart from it finds its place for an error), and what is told where
/// each string the parser hands over starts, which is how far it has read.
#[derive(Clone, Copy)]
pub(super) struct InPlace<'p> {
    pub doc: &'p [u8],
    pub read_to: &'p dyn Fn(*const u8),
}

/// Starts the message of an error in a `frames` value read apart from its
/// document: `NESTED` line `:` column `:` message, the place in the
/// document ([`nested_error`] reads it back).
const NESTED: &str = "\u{1}frames:";

/// The message of an error of serde_json, without the place it appends.
fn bare(e: &serde_json::Error) -> String {
    let s = e.to_string();
    let place = format!(" at line {} column {}", e.line(), e.column());
    s.strip_suffix(&place).map_or(s.clone(), str::to_string)
}

/// The message for the error `e` met reading `text`, a value of a document
/// read apart from it (after the check of its text, which lets a number
/// out of range through): placed in the document, as its parser places
/// it, when the document is parsed in place; else with no place, so that
/// the parser of the document places it where it stands, after the value.
pub(super) fn nested(place: Option<InPlace>, text: &str, e: &serde_json::Error) -> String {
    let doc = place.map_or(&[][..], |p| p.doc);
    let at = (text.as_ptr() as usize).wrapping_sub(doc.as_ptr() as usize);
    let Some(before) = doc.get(..at).filter(|_| at < doc.len()) else {
        return bare(e);
    };
    let line = 1 + before.iter().filter(|&&c| c == b'\n').count();
    let column = before.iter().rev().take_while(|&&c| c != b'\n').count();
    let (line, column) = if e.line() == 1 {
        (line, column + e.column())
    } else {
        (line + e.line() - 1, e.column())
    };
    format!("{NESTED}{line}:{column}:{}", bare(e))
}

/// The line, column and message of an error [`nested`] placed in its
/// document; `None` for any other error.
pub(super) fn nested_error(e: &serde_json::Error) -> Option<(usize, usize, String)> {
    let rest = bare(e).strip_prefix(NESTED)?.to_string();
    let mut parts = rest.splitn(3, ':');
    let line = parts.next()?.parse().ok()?;
    let column = parts.next()?.parse().ok()?;
    Some((line, column, parts.next()?.to_string()))
}

/// A text by two hashes of it, seeded apart, and its length: two texts
/// with the same key differ with a chance of about 2^-128.
fn text_key(t: &str) -> (u64, u64, usize) {
    use std::hash::BuildHasher;
    let (a, b) = (
        foldhash::quality::FixedState::with_seed(0x243f_6a88_85a3_08d3),
        foldhash::quality::FixedState::with_seed(0x1319_8a2e_0370_7344),
    );
    (a.hash_one(t), b.hash_one(t), t.len())
}

/// [`node_hash`] of a string node, from the text alone.
fn str_hash(s: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write_u64(7);
    h.write(s.as_bytes());
    h.finish()
}

fn node_hash(n: &Node) -> u64 {
    let mut h = FxHasher::default();
    match n {
        Node::None => h.write_u64(1),
        Node::Bool(b) => h.write_u64(2 + *b as u64),
        Node::Int(i) => {
            h.write_u64(4);
            h.write_u64(*i as u64)
        }
        Node::BigInt => h.write_u64(5),
        Node::Float(f) => {
            h.write_u64(6);
            h.write_u64(f.to_bits())
        }
        Node::Str(s) => return str_hash(s),
        Node::List(v) => {
            h.write_u64(8);
            v.iter().for_each(|&x| h.write_u32(x))
        }
        Node::Dict(v) => {
            h.write_u64(9);
            v.iter().for_each(|&(k, x)| {
                h.write_u32(k);
                h.write_u32(x)
            })
        }
        _ => h.write_u64(10),
    }
    h.finish()
}

impl<'p> Builder<'p> {
    /// A builder of a document parsed in place, or (`None`) read from a
    /// stream.
    pub(super) fn reading(place: Option<InPlace<'p>>) -> Self {
        Builder {
            place,
            ..Builder::default()
        }
    }

    /// A string read: in place, its place tells how far the parser has read.
    #[inline]
    fn read(&self, s: &str) {
        if let Some(p) = self.place {
            (p.read_to)(s.as_ptr())
        }
    }

    /// Whether `k`, an object's key, is `frames`.
    fn is_frames_key(&mut self, k: Vid) -> bool {
        if self.frames_key == Some(k) {
            return true;
        }
        if self.frames_key.is_none()
            && matches!(self.arena.get(k), Node::Str(s) if &**s == "frames")
        {
            self.frames_key = Some(k);
            return true;
        }
        false
    }

    /// The value of a `frames` key from its text, read once for each
    /// distinct text.
    fn frames_value(&mut self, text: &str) -> Result<Item, serde_json::Error> {
        let key = text_key(text);
        if let Some(&(id, values)) = self.frames_texts.get(&key) {
            self.arena.taken += values;
            return Ok(Item::Node(id, true));
        }
        let before = self.arena.values();
        let mut de = serde_json::Deserializer::from_str(text);
        let it = match (Seed {
            b: self,
            ctx: Ctx::Plain,
        })
        .deserialize(&mut de)
        {
            Ok(it) => it,
            Err(e) => return Err(serde::de::Error::custom(nested(self.place, text, &e))),
        };
        if let Item::Node(id, true) = it {
            let values = self.arena.values() - before;
            self.frames_texts.insert(key, (id, values));
        }
        Ok(it)
    }

    /// The node of `n`, shared with an equal one made before.
    fn cons(&mut self, n: Node) -> Vid {
        let h = node_hash(&n);
        if let Some(&id) = self.cons.get(&h) {
            let same = match (self.arena.get(id), &n) {
                // A frames list the sink took since.
                (Node::Stack(s), Node::List(items)) => self.sink.stack_items(*s) == &items[..],
                (old, new) => old == new,
            };
            if same {
                // A value of the file all the same: the schema layer's
                // bound on what shared references expand to counts it.
                self.arena.taken += 1;
                return id;
            }
            return self.arena.push(n);
        }
        let id = self.arena.push(n);
        self.cons.insert(h, id);
        id
    }

    /// [`Builder::cons`] of a string, found by its text: only a string
    /// not seen before is copied.
    pub(super) fn str_node(&mut self, s: &str) -> Vid {
        let h = str_hash(s);
        match self.cons.get(&h) {
            Some(&id) if matches!(self.arena.get(id), Node::Str(o) if **o == *s) => {
                self.arena.taken += 1;
                id
            }
            // A colliding node is not shared.
            Some(_) => self.arena.push(Node::Str(s.into())),
            None => {
                let id = self.arena.push(Node::Str(s.into()));
                self.cons.insert(h, id);
                id
            }
        }
    }

    fn int_node(&mut self, i: i64) -> Vid {
        self.cons(Node::Int(i))
    }

    /// The node of an item.
    pub(super) fn vid(&mut self, it: Item, list: u32) -> Vid {
        match it {
            Item::Int(i) => self.int_node(i),
            Item::Node(v, _) => v,
            Item::Taken(i) => self.arena.push(Node::Record(list, i)),
        }
    }

    fn shared(it: Item) -> bool {
        matches!(it, Item::Int(_) | Item::Node(_, true))
    }

    /// A container: shared by content when all its items are.
    fn container(&mut self, n: Node, shared: bool) -> Item {
        if shared {
            Item::Node(self.cons(n), true)
        } else {
            Item::Node(self.arena.push(n), false)
        }
    }

    /// After the document: the trace lists the schema layer will not read
    /// whole become lists of records (as the pickle machine leaves them).
    pub(super) fn finish(mut self, root: Vid) -> (Arena, TraceSink) {
        for t in self.sink.finish(&self.arena, root) {
            if let Node::Trace(l, n) = *self.arena.get(t) {
                let items = (0..n)
                    .map(|i| self.arena.push(Node::Record(l, i)))
                    .collect();
                self.arena.taken = self.arena.taken.saturating_sub(n as u64);
                self.arena.nodes[t as usize] = Node::List(items);
            }
        }
        (self.arena, self.sink)
    }

    /// A trace entry's items as the sink reads them; `None` when it would
    /// not take them.
    fn take_entry(&mut self, l: u32, pairs: &[(Vid, Item)]) -> Option<u32> {
        let mut vals = Vec::with_capacity(2 * pairs.len());
        for &(k, v) in pairs {
            vals.push(Val::Node(k));
            vals.push(match v {
                Item::Int(i) => Val::Int(i),
                Item::Node(v, _) => Val::Node(v),
                Item::Taken(_) => return None,
            });
        }
        self.sink.take_entry(&mut self.arena, l, &vals, None)
    }
}

/// Reads one value into the builder.
pub(super) struct Seed<'b, 'p> {
    pub b: &'b mut Builder<'p>,
    pub ctx: Ctx,
}

impl<'de> DeserializeSeed<'de> for Seed<'_, '_> {
    type Value = Item;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Item, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, '_> {
    type Value = Item;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Item, E> {
        Ok(Item::Node(self.b.cons(Node::Bool(v)), true))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Item, E> {
        Ok(Item::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Item, E> {
        Ok(match i64::try_from(v) {
            Ok(i) => Item::Int(i),
            Err(_) => Item::Node(self.b.cons(Node::BigInt), true),
        })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Item, E> {
        // As `serde_json::Value` holds it: a number not finite is null.
        let n = if v.is_finite() {
            Node::Float(v)
        } else {
            Node::None
        };
        Ok(Item::Node(self.b.cons(n), true))
    }
    fn visit_str<E>(self, v: &str) -> Result<Item, E> {
        self.b.read(v);
        Ok(Item::Node(self.b.str_node(v), true))
    }
    fn visit_unit<E>(self) -> Result<Item, E> {
        Ok(Item::Node(self.b.cons(Node::None), true))
    }
    fn visit_none<E>(self) -> Result<Item, E> {
        Ok(Item::Node(self.b.cons(Node::None), true))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item, A::Error> {
        let b = self.b;
        match self.ctx {
            Ctx::DeviceTraces => {
                let mut items = Vec::new();
                while let Some(it) = seq.next_element_seed(Seed {
                    b: &mut *b,
                    ctx: Ctx::TraceList,
                })? {
                    items.push(b.vid(it, 0));
                }
                Ok(Item::Node(b.arena.push(Node::List(items)), false))
            }
            Ctx::TraceList => {
                let l = b.sink.new_list();
                let mut items = Vec::new();
                while let Some(it) = seq.next_element_seed(Seed {
                    b: &mut *b,
                    ctx: Ctx::Entry(l),
                })? {
                    items.push(it);
                }
                let n = items.len();
                let whole = n > 0
                    && items
                        .iter()
                        .enumerate()
                        .all(|(j, it)| matches!(it, Item::Taken(i) if *i as usize == j));
                if whole {
                    b.arena.taken += n as u64;
                    return Ok(Item::Node(b.arena.push(Node::Trace(l, n as u32)), false));
                }
                let items = items.into_iter().map(|it| b.vid(it, l)).collect();
                Ok(Item::Node(b.arena.push(Node::List(items)), false))
            }
            Ctx::Plain | Ctx::Entry(_) => {
                let mut items = Vec::new();
                let mut shared = true;
                while let Some(it) = seq.next_element_seed(Seed {
                    b: &mut *b,
                    ctx: Ctx::Plain,
                })? {
                    shared &= Builder::shared(it);
                    items.push(b.vid(it, 0));
                }
                Ok(b.container(Node::List(items), shared))
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item, A::Error> {
        let b = self.b;
        let mut pairs: Vec<(Vid, Item)> = Vec::new();
        while let Some(k) = map.next_key_seed(Key(&mut *b))? {
            // A document parsed in place lends its text; a stream's is
            // copied out.
            let v = if b.is_frames_key(k) {
                if b.place.is_some() {
                    let raw: &'de serde_json::value::RawValue = map.next_value()?;
                    b.read(raw.get());
                    b.frames_value(raw.get()).map_err(de::Error::custom)?
                } else {
                    let raw: Box<serde_json::value::RawValue> = map.next_value()?;
                    b.frames_value(raw.get()).map_err(de::Error::custom)?
                }
            } else {
                map.next_value_seed(Seed {
                    b: &mut *b,
                    ctx: Ctx::Plain,
                })?
            };
            pairs.push((k, v));
        }
        dedup_keys(&mut pairs);
        if let Ctx::Entry(l) = self.ctx
            && let Some(i) = b.take_entry(l, &pairs)
        {
            return Ok(Item::Taken(i));
        }
        let shared = pairs.iter().all(|&(_, v)| Builder::shared(v));
        let items = pairs.into_iter().map(|(k, v)| (k, b.vid(v, 0))).collect();
        Ok(b.container(Node::Dict(items), shared))
    }
}

/// An object's key, read into its string node without a copy of its own.
struct Key<'b, 'p>(&'b mut Builder<'p>);

impl<'de> DeserializeSeed<'de> for Key<'_, '_> {
    type Value = Vid;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Vid, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_, '_> {
    type Value = Vid;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E>(self, v: &str) -> Result<Vid, E> {
        self.0.read(v);
        Ok(self.0.str_node(v))
    }
}
