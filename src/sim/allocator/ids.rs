//! Sets of blocks by number, for the indexes a cache flush reads whole
//! (pending frees, flushable blocks): insert and remove in constant time,
//! no hashing; their order is never observed (a flush sorts them first).

use super::BlockId;

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Default)]
pub(super) struct IdSet {
    items: Vec<BlockId>,
    /// Per block number, its place in `items` ([`NONE`] when absent).
    at: Vec<u32>,
}

impl IdSet {
    pub fn insert(&mut self, id: BlockId) {
        if id >= self.at.len() {
            self.at.resize(id + 1, NONE);
        }
        if self.at[id] == NONE {
            self.at[id] = self.items.len() as u32;
            self.items.push(id);
        }
    }

    pub fn remove(&mut self, id: BlockId) {
        let Some(&p) = self.at.get(id).filter(|&&p| p != NONE) else {
            return;
        };
        let last = self.items.pop().expect("a member");
        if last != id {
            self.items[p as usize] = last;
            self.at[last] = p;
        }
        self.at[id] = NONE;
    }

    #[cfg(test)]
    pub fn contains(&self, id: BlockId) -> bool {
        self.at.get(id).is_some_and(|&p| p != NONE)
    }

    /// The members, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = BlockId> + '_ {
        self.items.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn holds_what_a_set_holds() {
        let mut next = crate::model::test_support::below(0x9e37_79b9_7f4a_7c15);
        let (mut s, mut b) = (IdSet::default(), BTreeSet::new());
        for _ in 0..20_000 {
            let id = next(300) as BlockId;
            if next(5) < 3 {
                s.insert(id);
                b.insert(id);
            } else {
                s.remove(id);
                b.remove(&id);
            }
            assert_eq!(s.contains(id), b.contains(&id));
        }
        assert_eq!(s.iter().collect::<BTreeSet<_>>(), b);
    }
}
