//! Serde helpers for outputs written as they are produced.

use serde::ser::{Serialize, SerializeSeq, Serializer};
use std::cell::RefCell;

/// A sequence serialized element by element from an iterator, so that a
/// long list (a trace's events, a replay's samples) is never collected first.
/// It can be serialized once.
pub struct Seq<I>(RefCell<Option<I>>);

impl<I> Seq<I> {
    pub fn new(items: I) -> Seq<I> {
        Seq(RefCell::new(Some(items)))
    }
}

impl<I, T> Serialize for Seq<I>
where
    I: ExactSizeIterator<Item = T>,
    T: Serialize,
{
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let Some(items) = self.0.borrow_mut().take() else {
            return Err(serde::ser::Error::custom("a sequence is written once"));
        };
        let mut seq = ser.serialize_seq(Some(items.len()))?;
        for x in items {
            seq.serialize_element(&x)?;
        }
        seq.end()
    }
}
