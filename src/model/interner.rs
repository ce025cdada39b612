//! The [`Interner`]: builds a snapshot's interned tables (strings, frames,
//! stacks, pools, streams, unknown actions, events' extras) while it is
//! decoded, each id handed out once per distinct value.

use super::*;
use crate::core::table::IdTable;

/// An interned table is full: its ids would reach the value that stands
/// for "absent".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("more than {limit} distinct {what} in one snapshot")]
pub struct TableFull {
    pub what: &'static str,
    pub limit: u64,
}

/// Ids a table may hand out: `0..MAX_IDS`, so never `u32::MAX`.
const MAX_IDS: usize = NO_ID as usize;

/// The error of a table that would hand out `u32::MAX`.
fn full(what: &'static str) -> TableFull {
    TableFull {
        what,
        limit: MAX_IDS as u64,
    }
}

/// The id the next entry of a table holding `len` entries gets, unless it
/// would reach [`MAX_IDS`].
fn next_id(len: usize, what: &'static str) -> Result<u32, TableFull> {
    if len >= MAX_IDS {
        return Err(TableFull {
            what,
            limit: MAX_IDS as u64,
        });
    }
    Ok(len as u32)
}

/// The interner's maps: keyed by what an untrusted file holds, so seeded
/// at random per map (foldhash's `RandomState`, as `sim::run` keys its
/// address maps), yet several times quicker than SipHash on the stacks and
/// frames of a real trace.
type IdMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Builds the interned tables while a snapshot is decoded.
#[derive(Default)]
pub struct Interner {
    strings: IdTable<String>,
    frames: IdTable<Frame>,
    stacks: IdTable<Vec<FrameId>>,
    pools: Vec<(i64, i64)>,
    pool_ids: IdMap<(i64, i64), PoolIdx>,
    other_actions: Vec<StrId>,
    other_action_ids: IdMap<StrId, ActionName>,
    extras: IdTable<EventExtras>,
    streams: Vec<i64>,
    stream_ids: IdMap<i64, StreamIdx>,
}

impl Interner {
    pub fn new() -> Self {
        let mut i = Interner::default();
        i.stack(Vec::new());
        i
    }
    /// Room for `stacks` more stacks and `extras` more combinations of
    /// extras, when a decoder knows about how many its file holds.
    pub fn reserve(&mut self, stacks: usize, extras: usize) {
        self.stacks.reserve(stacks);
        self.extras.reserve(extras);
    }
    /// The id of `s`; refused once the table would hand out `u32::MAX`, the
    /// id an event reads as an absent string.
    pub fn string(&mut self, s: &str) -> Result<StrId, TableFull> {
        (self.strings.intern(s, str::to_owned).map(StrId)).map_err(|_| full("strings"))
    }
    pub fn frame(&mut self, f: Frame) -> FrameId {
        // A frame holds two string ids: there are fewer distinct frames
        // than distinct strings, which the file's size bounds.
        FrameId(
            self.frames
                .intern(&f, Frame::clone)
                .expect("fewer frames than ids"),
        )
    }
    pub fn stack(&mut self, frames: Vec<FrameId>) -> StackId {
        StackId((self.stacks.intern_owned(frames)).expect("fewer stacks than ids"))
    }
    /// A trace event's `pool_id`.
    pub fn pool(&mut self, pair: (i64, i64)) -> Result<PoolIdx, TableFull> {
        if let Some(id) = self.pool_ids.get(&pair) {
            return Ok(*id);
        }
        let id = PoolIdx(next_id(self.pools.len(), "trace pool ids")?);
        self.pools.push(pair);
        self.pool_ids.insert(pair, id);
        Ok(id)
    }
    /// The index of a trace event's stream.
    pub fn stream(&mut self, v: i64) -> Result<StreamIdx, TableFull> {
        if v == 0 {
            return Ok(StreamIdx::DEFAULT);
        }
        if let Some(id) = self.stream_ids.get(&v) {
            return Ok(*id);
        }
        let id = StreamIdx(next_id(self.streams.len() + 1, "trace streams")?);
        self.streams.push(v);
        self.stream_ids.insert(v, id);
        Ok(id)
    }
    /// The index of a trace event's extras; none when every field is
    /// absent.
    pub fn extras(&mut self, x: EventExtras) -> Result<Option<ExtrasIdx>, TableFull> {
        if x.is_none() {
            return Ok(None);
        }
        let id = (self.extras.intern(&x, |x| *x)).map_err(|_| full("trace event extras"))?;
        Ok(Some(ExtrasIdx(id)))
    }
    /// Gives `e` its extras `x`: `device_free` held by the event when it
    /// can hold it ([`TraceEvent::hold_device_free`]), the rest interned.
    pub fn event_extras(
        &mut self,
        e: &mut TraceEvent,
        mut x: EventExtras,
    ) -> Result<(), TableFull> {
        e.hold_device_free(&mut x);
        e.set_extras(self.extras(x)?);
        Ok(())
    }
    /// The action named `name`: a known one, or the next unknown one.
    pub fn action(&mut self, name: &str) -> Result<Action, TableFull> {
        if let Some(a) = Action::parse(name) {
            return Ok(a);
        }
        let s = self.string(name)?;
        if let Some(n) = self.other_action_ids.get(&s) {
            return Ok(Action::Other(*n));
        }
        let Ok(i) = u16::try_from(self.other_actions.len()) else {
            return Err(TableFull {
                what: "unknown trace actions",
                limit: ActionName::MAX as u64,
            });
        };
        let n = ActionName::new(i);
        self.other_actions.push(s);
        self.other_action_ids.insert(s, n);
        Ok(Action::Other(n))
    }
    /// The frames of an interned stack (while still building).
    pub fn stack_frames(&self, id: StackId) -> Vec<FrameId> {
        self.stacks.items()[id.0 as usize].clone()
    }
    pub fn finish(self, snap: &mut Snapshot) {
        snap.strings = self.strings.into_items();
        snap.frames = self.frames.into_items();
        snap.stacks = self.stacks.into_items();
        snap.pools = self.pools;
        snap.other_actions = self.other_actions;
        snap.event_extras = self.extras.into_items();
        snap.streams = self.streams;
    }
    /// Starts from an existing snapshot's tables (for tools that add stacks).
    pub fn from_snapshot(snap: &Snapshot) -> Self {
        let mut i = Interner::new();
        i.strings = IdTable::from_items(snap.strings.clone());
        i.frames = IdTable::from_items(snap.frames.clone());
        i.stacks = IdTable::from_items(snap.stacks.clone());
        if i.stacks.is_empty() {
            i.stack(Vec::new());
        }
        i.pools = snap.pools.clone();
        i.pool_ids = ids_of(&snap.pools, PoolIdx);
        i.other_actions = snap.other_actions.clone();
        // A snapshot's table holds at most `ActionName::MAX` names.
        i.other_action_ids = ids_of(&snap.other_actions, |n| ActionName::new(n as u16));
        i.extras = IdTable::from_items(snap.event_extras.clone());
        i.streams = snap.streams.clone();
        // Stream 0 has no entry: the table's first is index 1.
        i.stream_ids = ids_of(&snap.streams, |n| StreamIdx(n + 1));
        i
    }
}

/// Each entry of `table` to its id, `id(place)`.
fn ids_of<K: Clone + Eq + std::hash::Hash, V>(table: &[K], id: impl Fn(u32) -> V) -> IdMap<K, V> {
    (table.iter().cloned()).zip((0..).map(id)).collect()
}
