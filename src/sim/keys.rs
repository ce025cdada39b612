//! The blocks a run's requests name, numbered densely as the requests are
//! read, once per device.
//!
//! The trace names a block by its recorded address (a request's `key`); a
//! run keeps, for each key, the model's address of its block, or that the
//! model refused its allocation. Whether a key is bound at a request does
//! not depend on the run: it is bound from an allocation to the completed
//! free, whatever the model answered. So each bound key gets a number,
//! reused once the key is freed, and every run keeps its answers in a table
//! indexed by it instead of hashing addresses at every request.
//!
//! A key a free names before any request allocated it is bound from
//! before the trace: to the start state's live block at that address when
//! there is one ([`Keys::start_table`]), else to nothing. The numbering
//! needs no start state, so it is made while the requests are read.

use super::allocator::Slot;
use super::trace::Request;
use std::collections::HashMap;

/// No key bound: a request of a recorded `oom`, an `empty_cache`, or a
/// free of a key already freed.
pub const UNBOUND: u32 = u32::MAX;

/// The dense numbers of a device's keys.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    /// Per request, in order, its key's number (or [`UNBOUND`]).
    of_request: Vec<u32>,
    /// Keys a free names first, bound from before the trace: (number, key).
    from_start: Vec<(u32, u64)>,
    /// How many numbers are in use at once, at most.
    count: u32,
    /// While the requests are read: each key named so far, with its number
    /// while it is bound ([`UNBOUND`] once freed); and the numbers freed.
    seen: HashMap<u64, u32, foldhash::fast::RandomState>,
    spare: Vec<u32>,
}

impl Keys {
    /// Numbers the key of the next request.
    pub fn push(&mut self, r: &Request) {
        use std::collections::hash_map::Entry;
        // One lookup of the key a request: the entry is read and written
        // in place.
        let n = match *r {
            Request::Alloc { key: Some(k), .. } => match self.seen.entry(k) {
                Entry::Occupied(e) if *e.get() != UNBOUND => *e.get(),
                Entry::Occupied(mut e) => {
                    let n = Self::new_number(&mut self.spare, &mut self.count);
                    e.insert(n);
                    n
                }
                Entry::Vacant(e) => *e.insert(Self::new_number(&mut self.spare, &mut self.count)),
            },
            Request::FreeRequested { key } | Request::FreeCompleted { key } => {
                let completes = matches!(r, Request::FreeCompleted { .. });
                match self.seen.entry(key) {
                    Entry::Occupied(mut e) => {
                        let n = *e.get();
                        if completes && n != UNBOUND {
                            e.insert(UNBOUND);
                            self.spare.push(n);
                        }
                        n
                    }
                    Entry::Vacant(e) => {
                        // A number no request used before: a run sets it
                        // from the start state before its first request.
                        let n = self.count;
                        self.count += 1;
                        self.from_start.push((n, key));
                        if completes {
                            e.insert(UNBOUND);
                            self.spare.push(n);
                        } else {
                            e.insert(n);
                        }
                        n
                    }
                }
            }
            Request::Alloc { key: None, .. } | Request::EmptyCache => UNBOUND,
        };
        self.of_request.push(n);
    }

    fn new_number(spare: &mut Vec<u32>, count: &mut u32) -> u32 {
        spare.pop().unwrap_or_else(|| {
            *count += 1;
            *count - 1
        })
    }

    /// Once every request is numbered: drops what only the numbering needs.
    pub fn finish(&mut self) {
        self.seen = HashMap::default();
        self.spare = Vec::new();
        self.of_request.shrink_to_fit();
    }

    /// The number of request `i`'s key.
    #[inline]
    pub fn of(&self, i: usize) -> u32 {
        debug_assert!(i < self.of_request.len(), "request {i} not numbered");
        self.of_request.get(i).copied().unwrap_or(UNBOUND)
    }

    /// What a run knows of each number at its start: the keys bound from
    /// before the trace, at their blocks' addresses where the start holds
    /// a live block there (`live_at` gives where the model keeps the live
    /// block at an address, `None` where none starts).
    pub fn start_table(&self, live_at: impl Fn(u64) -> Option<Slot>) -> Vec<Held> {
        let mut held = vec![Held::None; self.count as usize];
        for &(n, k) in &self.from_start {
            if let Some(slot) = live_at(k) {
                held[n as usize] = Held::At(k, slot);
            }
        }
        held
    }
}

/// What a run knows of one bound key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Not bound (or freed).
    None,
    /// The model's address of its block, and where the model keeps it
    /// (which spares it a lookup by address).
    At(u64, Slot),
    /// The model refused its allocation.
    Refused,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BlockState;
    use crate::model::StackId;
    use crate::model::test_support::{block, segment};
    use crate::sim::trace::StartState;
    use std::collections::HashMap;
    use std::collections::HashSet;

    /// What a run sees at each request, one word each, given whether the
    /// model serves each allocation: kept by key in hash maps (the
    /// recorded address of a start block is its model address), or by
    /// number in the table.
    fn by_key(reqs: &[Request], start: &[u64], served: &[bool]) -> Vec<String> {
        let mut map: HashMap<u64, u64> = start.iter().map(|&k| (k, k)).collect();
        let mut refused: HashSet<u64> = HashSet::default();
        let mut out = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            out.push(match *r {
                Request::Alloc { key: Some(k), .. } if served[i] => {
                    map.insert(k, 1000 + i as u64);
                    refused.remove(&k);
                    "served".to_string()
                }
                Request::Alloc { key: Some(k), .. } => {
                    map.remove(&k);
                    refused.insert(k);
                    "refused".to_string()
                }
                Request::FreeRequested { key } => format!("requested {:?}", map.get(&key)),
                Request::FreeCompleted { key } => match map.remove(&key) {
                    Some(a) => format!("completed {a}"),
                    None if refused.remove(&key) => "of refused".to_string(),
                    None => "skipped".to_string(),
                },
                _ => "other".to_string(),
            });
        }
        out
    }

    fn by_number(reqs: &[Request], start: &StartState, served: &[bool]) -> Vec<String> {
        let mut keys = Keys::default();
        reqs.iter().for_each(|r| keys.push(r));
        keys.finish();
        let live: HashSet<u64> = (start.segments.iter())
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state != BlockState::Inactive)
            .map(|b| b.address)
            .collect();
        let mut held = keys.start_table(|a| live.contains(&a).then_some(Slot::UNKNOWN));
        let mut out = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            let h = held.get_mut(keys.of(i) as usize);
            out.push(match *r {
                Request::Alloc { key: Some(_), .. } => {
                    let h = h.expect("an allocation has its number");
                    if served[i] {
                        *h = Held::At(1000 + i as u64, Slot::UNKNOWN);
                        "served".to_string()
                    } else {
                        *h = Held::Refused;
                        "refused".to_string()
                    }
                }
                Request::FreeRequested { .. } => format!(
                    "requested {:?}",
                    match h {
                        Some(&mut Held::At(a, _)) => Some(a),
                        _ => None,
                    }
                ),
                Request::FreeCompleted { .. } => {
                    match h.map(|h| std::mem::replace(h, Held::None)) {
                        Some(Held::At(a, _)) => format!("completed {a}"),
                        Some(Held::Refused) => "of refused".to_string(),
                        _ => "skipped".to_string(),
                    }
                }
                _ => "other".to_string(),
            });
        }
        out
    }

    /// Random request streams over a few keys, some live in the start
    /// state: the numbers give what the keys give, at every request.
    #[test]
    fn numbers_stand_for_keys() {
        let mut next = crate::model::test_support::below(0x2545_f491_4f6c_dd1du64);
        for round in 0..500 {
            let live: Vec<u64> = (0..6).filter(|_| next(2) == 0).map(|k| k * 512).collect();
            let blocks = (0..6)
                .map(|k| {
                    let state = if live.contains(&(k * 512)) {
                        BlockState::ActiveAllocated
                    } else {
                        BlockState::Inactive
                    };
                    block(k * 512, 512, None, state, StackId::EMPTY)
                })
                .collect();
            let start = super::super::trace::start_state_unreported(vec![segment(0, blocks)]);
            let mut reqs = Vec::new();
            let mut served = Vec::new();
            for _ in 0..1 + next(60) {
                let key = next(8) * 512;
                reqs.push(match next(7) {
                    0 | 1 => Request::Alloc {
                        key: Some(key),
                        size: 512,
                        stream: 0,
                        pool: (0, 0),
                    },
                    2 => Request::Alloc {
                        key: None,
                        size: 512,
                        stream: 0,
                        pool: (0, 0),
                    },
                    3 | 4 => Request::FreeRequested { key },
                    5 => Request::FreeCompleted { key },
                    _ => Request::EmptyCache,
                });
                served.push(next(4) != 0);
            }
            assert_eq!(
                by_number(&reqs, &start, &served),
                by_key(&reqs, &live, &served),
                "round {round}: {reqs:?}"
            );
        }
    }
}
