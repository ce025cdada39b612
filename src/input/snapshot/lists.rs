//! The lists a [`super::TraceSink`] fills: a device's trace entries, kept
//! or only counted, and a segment's blocks.

use crate::model::tally::Tallier;
use crate::model::*;

/// Entries of one trace list. A plain vector: its large buffers grow by
/// `realloc`, which the system allocator serves by remapping pages rather
/// than copying them, and capacity it never touches costs no memory. The
/// model takes it as it is: shrinking a short list out of its first chunk
/// copied it into memory new to the process (on the largest real file,
/// 350 page faults of 900 and a tenth of a decode), and spare capacity is
/// address space it never touches, not resident memory.
const FIRST: usize = 1 << 16;

/// The entries of one trace list, as a sink keeps them: all of them, or
/// (a sink that tallies) only their count and what the schema walk needs;
/// or the blocks of one segment (`frames` provisional, as an entry's).
pub(super) enum SinkList {
    Kept(Vec<TraceEvent>),
    Tallied(Box<ListTally>),
    Blocks(Vec<Block>),
}

/// A trace list counted instead of kept ([`TraceSink::tallying`]): its
/// tally, and the first entry that names each provisional stack and each
/// combination of extras, which the schema walk numbers in the order (and
/// with the errors) it would number them meeting every entry.
#[derive(Default)]
pub(super) struct ListTally {
    pub tally: Tallier,
    /// Entries that name a stack or extras no earlier entry of the list
    /// names, with their index; their `frames` and extras are provisional.
    pub firsts: Vec<(u32, TraceEvent)>,
    stacks: Bits,
    extras: Bits,
}

/// A growable set of small numbers.
#[derive(Default)]
struct Bits(Vec<u64>);

impl Bits {
    /// Adds `i`; whether it was new.
    #[inline]
    fn insert(&mut self, i: u32) -> bool {
        let (w, b) = ((i / 64) as usize, 1u64 << (i % 64));
        if w >= self.0.len() {
            self.0.resize(w + 1, 0);
        }
        let new = self.0[w] & b == 0;
        self.0[w] |= b;
        new
    }
}

impl SinkList {
    pub(super) fn len(&self) -> usize {
        match self {
            SinkList::Kept(v) => v.len(),
            SinkList::Tallied(t) => t.tally.events() as usize,
            SinkList::Blocks(v) => v.len(),
        }
    }

    /// The blocks of a block list, left empty; none of another.
    pub(super) fn take_blocks(&mut self) -> Vec<Block> {
        match self {
            SinkList::Blocks(v) => std::mem::take(v),
            _ => Vec::new(),
        }
    }

    #[inline]
    pub(super) fn is_blocks(&self) -> bool {
        matches!(self, SinkList::Blocks(_))
    }

    /// Takes `e`: its index in the list. `device_free` reads its extras
    /// (for a `device_free` the event does not hold).
    #[inline]
    pub(super) fn push(
        &mut self,
        e: TraceEvent,
        device_free: impl FnOnce(ExtrasIdx) -> Option<u64>,
    ) -> u32 {
        match self {
            SinkList::Kept(v) => {
                if v.capacity() == 0 {
                    // Large enough that the allocator maps it apart from
                    // its heap (grown by remapping, returned whole), as a
                    // chunk of 64 Ki events was before; a short trace
                    // touches only what it uses.
                    v.reserve_exact(FIRST);
                }
                v.push(e);
                (v.len() - 1) as u32
            }
            SinkList::Blocks(_) => unreachable!("an event pushed to a block list"),
            SinkList::Tallied(t) => {
                let j = t.tally.events() as u32;
                let new_stack = t.stacks.insert(e.frames.0);
                let new_extras = e.extras().is_some_and(|x| t.extras.insert(x.0));
                if new_stack || new_extras {
                    t.firsts.push((j, e.clone()));
                }
                t.tally.add(&e, || {
                    e.held_device_free()
                        .or_else(|| e.extras().and_then(device_free))
                });
                j
            }
        }
    }
}
