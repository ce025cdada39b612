//! The blocks by address, kept only once something asks for a block by
//! its address alone.
//!
//! A run of the model finds each block it frees by where it placed it
//! ([`super::Slot`]), so keeping an address map up to date at every split
//! and merge (two or three hash updates a request) paid for lookups that a
//! run never makes. The map is built from the blocks at its first lookup
//! and kept from then on: a caller that frees by address (the generator,
//! the tests) pays one walk over the blocks, then what it paid before.

use super::{Blk, BlockId};
use std::collections::HashMap;

/// foldhash, seeded per map (addresses are multiples of 512, which a
/// multiply-only hash leaves with the low bits, the bucket, at zero). The
/// map's order is never observed: what walks it sorts first.
type AddrHashing = foldhash::fast::RandomState;

#[derive(Debug, Clone, Default)]
pub(super) struct AddrIndex {
    /// `Some` once kept: every live block at its address.
    map: Option<HashMap<u64, BlockId, AddrHashing>>,
}

impl AddrIndex {
    #[inline]
    pub fn insert(&mut self, addr: u64, id: BlockId) {
        if let Some(m) = &mut self.map {
            m.insert(addr, id);
        }
    }

    #[inline]
    pub fn remove(&mut self, addr: u64) {
        if let Some(m) = &mut self.map {
            m.remove(&addr);
        }
    }

    /// Moves `id`'s entry from `old` to `addr` (the entry at `old` is
    /// left alone when another block holds it).
    #[inline]
    pub fn moved(&mut self, id: BlockId, old: u64, addr: u64) {
        if let Some(m) = &mut self.map {
            if m.get(&old) == Some(&id) {
                m.remove(&old);
            }
            m.insert(addr, id);
        }
    }

    /// The block at `addr`, the map built from `blocks` first if it is
    /// not kept yet.
    pub fn get(&mut self, addr: u64, blocks: &[Option<Blk>]) -> Option<BlockId> {
        self.map
            .get_or_insert_with(|| of_blocks(blocks))
            .get(&addr)
            .copied()
    }

    /// The map if kept.
    pub fn kept(&self) -> Option<&HashMap<u64, BlockId, AddrHashing>> {
        self.map.as_ref()
    }
}

/// Every live block of `blocks` at its address.
pub(super) fn of_blocks(blocks: &[Option<Blk>]) -> HashMap<u64, BlockId, AddrHashing> {
    let mut m = HashMap::with_capacity_and_hasher(blocks.len(), AddrHashing::default());
    for (id, b) in blocks.iter().enumerate() {
        if let Some(b) = b {
            m.insert(b.addr, id);
        }
    }
    m
}
