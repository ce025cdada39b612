//! The keys of a trace entry and of a segment's block, and how the
//! [`super::sink::TraceSink`] reads each of their values from the arena into
//! the record's fields.

use crate::input::pickle::Val;
use crate::input::value::{Arena, Node, Vid};
use crate::model::*;

/// The keys of a trace entry, as [`Cx::event`] reads them, and those of a
/// block, as [`Cx::block`] does (each kind of record ignores the other's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    Action,
    Addr,
    Size,
    Stream,
    TimeUs,
    Frames,
    DeviceFree,
    CompileContext,
    UserMetadata,
    PoolId,
    Category,
    /// A key the arena path must see (2.0 `cpp_frames`).
    Legacy,
    /// A block's `address`, `requested_size` and `state`.
    Address,
    RequestedSize,
    State,
    /// A block's 1.13–2.0 `history`, which the arena path reads.
    History,
    /// A segment's `blocks`.
    Blocks,
    Ignored,
}

pub(super) fn classify(s: &str) -> Key {
    match s {
        "action" => Key::Action,
        "addr" => Key::Addr,
        "size" => Key::Size,
        "stream" => Key::Stream,
        "time_us" => Key::TimeUs,
        "frames" => Key::Frames,
        "cpp_frames" => Key::Legacy,
        "device_free" => Key::DeviceFree,
        "compile_context" => Key::CompileContext,
        "user_metadata" => Key::UserMetadata,
        "pool_id" => Key::PoolId,
        "category" => Key::Category,
        "address" => Key::Address,
        "requested_size" => Key::RequestedSize,
        "state" => Key::State,
        "history" => Key::History,
        "blocks" => Key::Blocks,
        _ => Key::Ignored,
    }
}

// The values of one trace entry, read from the arena.
pub(super) fn int(a: &Arena, v: Val) -> Option<i64> {
    match v {
        Val::Int(i) => Some(i),
        Val::Node(id) => match a.get(id) {
            Node::Int(i) => Some(*i),
            _ => None,
        },
        _ => None,
    }
}
pub(super) fn uint(a: &Arena, v: Val) -> Option<u64> {
    int(a, v).and_then(|i| u64::try_from(i).ok())
}
pub(super) fn is_none(a: &Arena, v: Val) -> bool {
    match v {
        Val::None => true,
        Val::Node(id) => matches!(a.get(id), Node::None),
        _ => false,
    }
}
pub(super) fn string(a: &Arena, v: Val) -> Option<StrId> {
    match v {
        Val::Node(id) if matches!(a.get(id), Node::Str(_)) => Some(StrId(id)),
        _ => None,
    }
}
pub(super) fn pair(a: &Arena, v: Val) -> Option<(i64, i64)> {
    let Val::Node(id) = v else { return None };
    let l: &[Vid] = match a.get(id) {
        Node::Tuple(l) => l,
        Node::List(l) => l,
        _ => return None,
    };
    match l {
        [x, y] => Some((int(a, Val::Node(*x))?, int(a, Val::Node(*y))?)),
        _ => None,
    }
}
/// An entry's fields as they are read.
pub(super) struct Fields {
    pub e: TraceEvent,
    /// The entry's extras, with provisional ids.
    pub x: EventExtras,
    pub action: Option<Val>,
    pub frames: Option<Val>,
    pub pool: Option<(i64, i64)>,
    pub stream: i64,
}
#[inline(always)]
pub(super) fn field(f: &mut Fields, a: &Arena, key: Key, v: Val) -> Option<()> {
    let e = &mut f.e;
    let x = &mut f.x;
    match key {
        Key::Action => f.action = Some(v),
        Key::Addr => e.set_addr(uint(a, v)?),
        Key::Size => e.size = uint(a, v)?,
        Key::Stream => f.stream = int(a, v)?,
        Key::TimeUs if !is_none(a, v) => e.set_time_us(Some(int(a, v)?)),
        Key::Frames => f.frames = Some(v),
        Key::DeviceFree => x.device_free = Some(uint(a, v)?),
        Key::CompileContext => x.compile_context = Some(string(a, v)?),
        Key::UserMetadata => x.user_metadata = Some(string(a, v)?),
        Key::PoolId if !is_none(a, v) => f.pool = Some(pair(a, v)?),
        Key::Category if !is_none(a, v) => x.category = Some(string(a, v)?),
        Key::Legacy => return None,
        _ => {}
    }
    Some(())
}

/// A block's fields as they are read; `frames` a value for the sink to
/// make a stack of.
#[derive(Default)]
pub(super) struct BlockFields {
    pub address: Option<u64>,
    pub size: Option<u64>,
    pub requested: Option<u64>,
    pub state: Option<BlockState>,
    pub frames: Option<Val>,
}
/// One item of a block, as [`Cx::block`] reads it; `None` for anything it
/// would coerce, reject or read as a legacy format.
#[inline(always)]
pub(super) fn block_field(b: &mut BlockFields, a: &Arena, key: Key, v: Val) -> Option<()> {
    match key {
        Key::Address => b.address = Some(uint(a, v)?),
        Key::Size => b.size = Some(uint(a, v)?),
        Key::RequestedSize => b.requested = Some(uint(a, v)?),
        // Each one read, as the arena path reads each: a repeated key's
        // earlier value may be what the file gets wrong.
        Key::State => {
            let Val::Node(id) = v else { return None };
            b.state = Some(BlockState::parse(a.as_str(id)?)?)
        }
        Key::Frames => b.frames = Some(v),
        Key::History => return None,
        _ => {}
    }
    Some(())
}
