//! A device's replayed series kept compact: 72 bytes per moment instead of
//! the 112 of a [`Sample`], whose figures are read back exactly.
//!
//! Of a replayed sample, four figures follow from others and are not
//! stored: the event index (the position: `samples[0]` is the start,
//! `samples[i + 1]` the state after event `i`), `internal_free` (active −
//! allocated), `external_free` (inactive + pending) and `fragmentation`
//! (from the largest gap and the inactive bytes). The largest request the
//! small pool could serve is at most 1 MiB and the number of free blocks
//! fits in 31 bits, so both share one 8-byte word with the flag saying
//! whether the event had a time.
//!
//! A sample that does not fit that form (one built by hand, with figures
//! that do not add up) turns the whole series into plain samples, so a
//! series always gives back exactly what was pushed.
//!
//! Owns only the storage; the figures come from `state`.

use super::Sample;
use crate::stats::fragmentation;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    time_us: i64,
    allocated: u64,
    active: u64,
    reserved: u64,
    pending: u64,
    inactive: u64,
    largest_gap: u64,
    largest_large_request: u64,
    /// Free blocks, with [`TIMED`] set when the sample has a time.
    free_gaps: u32,
    largest_small_request: u32,
}

const TIMED: u32 = 1 << 31;

impl Row {
    /// The row of `s` when `s` is sample number `pos` of a replay.
    fn of(s: &Sample, pos: usize) -> Option<Row> {
        let event = match pos.checked_sub(1) {
            None => None,
            Some(e) => Some(u32::try_from(e).ok()?),
        };
        let inactive = s.external_free.checked_sub(s.pending_free)?;
        let r = Row {
            time_us: s.time_us.unwrap_or(0),
            allocated: s.allocated,
            active: s.active,
            reserved: s.reserved,
            pending: s.pending_free,
            inactive,
            largest_gap: s.largest_free_gap,
            largest_large_request: s.largest_large_request,
            free_gaps: u32::try_from(s.free_gaps).ok().filter(|g| g & TIMED == 0)?
                | if s.time_us.is_some() { TIMED } else { 0 },
            largest_small_request: u32::try_from(s.largest_small_request).ok()?,
        };
        // Bitwise, so a NaN or a rounding difference falls back too.
        let same = |a: &Sample, b: &Sample| {
            (a.event, a.internal_free, a.fragmentation.to_bits())
                == (b.event, b.internal_free, b.fragmentation.to_bits())
        };
        let back = r.sample(pos);
        (back.event == event && same(&back, s)).then_some(r)
    }

    #[inline]
    fn sample(&self, pos: usize) -> Sample {
        Sample {
            event: pos.checked_sub(1).map(|e| e as u32),
            time_us: (self.free_gaps & TIMED != 0).then_some(self.time_us),
            allocated: self.allocated,
            active: self.active,
            reserved: self.reserved,
            internal_free: self.active.wrapping_sub(self.allocated),
            external_free: self.inactive + self.pending,
            pending_free: self.pending,
            largest_free_gap: self.largest_gap,
            free_gaps: u64::from(self.free_gaps & !TIMED),
            fragmentation: fragmentation(self.largest_gap, self.inactive),
            largest_small_request: u64::from(self.largest_small_request),
            largest_large_request: self.largest_large_request,
        }
    }
}

#[derive(Debug, Clone)]
enum Store {
    Compact(Vec<Row>),
    Plain(Vec<Sample>),
}

/// The samples of one device's replay, in order (see [`super::DeviceReplay`]).
#[derive(Debug, Clone)]
pub struct Series {
    store: Store,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            store: Store::Compact(Vec::new()),
        }
    }
}

impl Series {
    pub fn with_capacity(n: usize) -> Series {
        Series {
            store: Store::Compact(Vec::with_capacity(n)),
        }
    }

    pub fn len(&self) -> usize {
        match &self.store {
            Store::Compact(v) => v.len(),
            Store::Plain(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a sample (the event index it carries is the position's).
    pub fn push(&mut self, s: Sample) {
        match &mut self.store {
            Store::Compact(v) => match Row::of(&s, v.len()) {
                Some(r) => v.push(r),
                None => {
                    let mut plain: Vec<Sample> = Vec::with_capacity(v.capacity());
                    plain.extend(v.iter().enumerate().map(|(i, r)| r.sample(i)));
                    plain.push(s);
                    self.store = Store::Plain(plain);
                }
            },
            Store::Plain(v) => v.push(s),
        }
    }

    pub fn get(&self, i: usize) -> Option<Sample> {
        match &self.store {
            Store::Compact(v) => v.get(i).map(|r| r.sample(i)),
            Store::Plain(v) => v.get(i).copied(),
        }
    }

    /// Sample `i`; panics past the end, as indexing a slice does.
    pub fn at(&self, i: usize) -> Sample {
        let n = self.len();
        self.get(i)
            .unwrap_or_else(|| panic!("sample {i} of a series of {n}"))
    }

    pub fn first(&self) -> Option<Sample> {
        self.get(0)
    }

    pub fn last(&self) -> Option<Sample> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            series: self,
            front: 0,
            back: self.len(),
        }
    }

    pub fn to_vec(&self) -> Vec<Sample> {
        self.iter().collect()
    }

    /// Bytes the samples take (not counting spare capacity).
    pub fn heap_bytes(&self) -> usize {
        match &self.store {
            Store::Compact(v) => v.len() * std::mem::size_of::<Row>(),
            Store::Plain(v) => v.len() * std::mem::size_of::<Sample>(),
        }
    }
}

impl PartialEq for Series {
    fn eq(&self, o: &Series) -> bool {
        self.len() == o.len() && self.iter().eq(o.iter())
    }
}

impl From<Vec<Sample>> for Series {
    fn from(v: Vec<Sample>) -> Series {
        v.into_iter().collect()
    }
}

impl FromIterator<Sample> for Series {
    fn from_iter<I: IntoIterator<Item = Sample>>(it: I) -> Series {
        let it = it.into_iter();
        let mut s = Series::with_capacity(it.size_hint().0);
        for x in it {
            s.push(x);
        }
        s
    }
}

/// The samples of a [`Series`], by value.
#[derive(Clone)]
pub struct Iter<'a> {
    series: &'a Series,
    front: usize,
    back: usize,
}

impl Iterator for Iter<'_> {
    type Item = Sample;
    #[inline]
    fn next(&mut self) -> Option<Sample> {
        if self.front >= self.back {
            return None;
        }
        let s = self.series.get(self.front);
        self.front += 1;
        s
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Sample> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        self.series.get(self.back)
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Series {
    type Item = Sample;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replayed(i: usize) -> Sample {
        let (allocated, active, pending, inactive) = (1000 + i as u64, 1536 + i as u64, 512, 4096);
        let largest = 2048;
        Sample {
            event: i.checked_sub(1).map(|e| e as u32),
            time_us: (!i.is_multiple_of(3)).then_some(1_700_000_000_000_000 + i as i64),
            allocated,
            active,
            reserved: active + pending + inactive,
            internal_free: active - allocated,
            external_free: inactive + pending,
            pending_free: pending,
            largest_free_gap: largest,
            free_gaps: 3,
            fragmentation: fragmentation(largest, inactive),
            largest_small_request: 1 << 20,
            largest_large_request: largest,
        }
    }

    #[test]
    fn replayed_samples_come_back_exactly_in_compact_form() {
        let v: Vec<Sample> = (0..50).map(replayed).collect();
        let s = Series::from(v.clone());
        assert!(matches!(s.store, Store::Compact(_)));
        assert_eq!(s.to_vec(), v);
        assert_eq!(
            s.iter().rev().collect::<Vec<_>>(),
            v.iter().rev().copied().collect::<Vec<_>>()
        );
        assert_eq!(
            (s.first(), s.last(), s.get(50)),
            (Some(v[0]), Some(v[49]), None)
        );
        assert_eq!(s.heap_bytes(), 50 * 72);
    }

    #[test]
    fn samples_that_do_not_add_up_turn_the_series_plain() {
        let mut v: Vec<Sample> = (0..20).map(replayed).collect();
        // Figures no replay gives: each one alone must fall back.
        let odd: [fn(&mut Sample); 6] = [
            |s| s.internal_free += 1,
            |s| s.external_free = 0,
            |s| s.fragmentation = 0.25,
            |s| s.event = Some(77),
            |s| s.free_gaps = 1 << 40,
            |s| s.largest_small_request = 1 << 40,
        ];
        for f in odd {
            let mut w = v.clone();
            f(&mut w[7]);
            let s = Series::from(w.clone());
            assert!(matches!(s.store, Store::Plain(_)));
            assert_eq!(s.to_vec(), w);
        }
        v[0].event = Some(0);
        assert_eq!(Series::from(v.clone()).to_vec(), v);
    }
}
