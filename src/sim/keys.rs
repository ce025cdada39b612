//! The blocks a run's requests name, numbered densely once per device.
//!
//! The trace names a block by its recorded address (a request's `key`); a
//! run keeps, for each key, the model's address of its block, or that the
//! model refused its allocation. Whether a key is bound at a request does
//! not depend on the run: it is bound from an allocation (or the start
//! state) to the completed free, whatever the model answered. So each bound
//! key gets a number, reused once the key is freed, and every run keeps its
//! answers in a table indexed by it instead of hashing addresses at every
//! request.

use super::run::DeviceInput;
use super::trace::Request;
use crate::model::BlockState;
use std::collections::HashMap;

/// No key bound: a request of a recorded `oom`, or a free of a block
/// neither the start state nor the trace allocated.
pub const UNBOUND: u32 = u32::MAX;

/// The dense numbers of a device's keys.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    /// Per request, in order, its key's number (or [`UNBOUND`]).
    pub of_request: Vec<u32>,
    /// The start state's live blocks: number and address.
    pub start: Vec<(u32, u64)>,
    /// How many numbers are in use at once, at most.
    pub count: u32,
}

impl Keys {
    pub fn of(input: &DeviceInput) -> Keys {
        let mut bound: HashMap<u64, u32, foldhash::fast::RandomState> = HashMap::default();
        let mut spare: Vec<u32> = Vec::new();
        let mut count = 0u32;
        let mut bind = |k: u64, bound: &mut HashMap<_, _, _>, spare: &mut Vec<u32>| {
            *bound.entry(k).or_insert_with(|| {
                spare.pop().unwrap_or_else(|| {
                    count += 1;
                    count - 1
                })
            })
        };
        let mut start = Vec::new();
        for s in &input.start.segments {
            for b in &s.blocks {
                if b.state != BlockState::Inactive {
                    start.push((bind(b.address, &mut bound, &mut spare), b.address));
                }
            }
        }
        let mut of_request = Vec::with_capacity(input.requests.len());
        for r in input.requests.iter() {
            of_request.push(match r.request {
                Request::Alloc { key: Some(k), .. } => bind(k, &mut bound, &mut spare),
                Request::FreeRequested { key } => bound.get(&key).copied().unwrap_or(UNBOUND),
                Request::FreeCompleted { key } => match bound.remove(&key) {
                    Some(n) => {
                        spare.push(n);
                        n
                    }
                    None => UNBOUND,
                },
                Request::Alloc { key: None, .. } | Request::EmptyCache => UNBOUND,
            });
        }
        Keys {
            of_request,
            start,
            count,
        }
    }
}

/// What a run knows of one bound key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Not bound (or freed).
    None,
    /// The model's address of its block.
    At(u64),
    /// The model refused its allocation.
    Refused,
}
