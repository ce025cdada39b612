//! The worst fragmentation near a run's peak, folded step by step.

use super::run::Step;
use std::collections::BTreeMap;

/// The worst fragmentation near the peak, found without keeping every
/// step: which moments count (reserved at least half the final peak) is
/// only known at the end, so the steps are folded per reserved level, and
/// levels below half the running peak, which can never count, are dropped.
#[derive(Debug, Default)]
pub(super) struct NearPeak {
    pub peak: u64,
    /// Reserved level → (worst fragmentation, smallest largest gap).
    levels: BTreeMap<u64, (f64, u64)>,
    /// The level of the latest steps, not yet in `levels` (reserved changes
    /// only at segment events, so most steps land here; 0 = none, a level
    /// never kept): the level, its most fragmented step as (largest free,
    /// inactive), the smallest largest gap. Plain fields, read and written
    /// at every step.
    cur_level: u64,
    cur_worst: Worst,
    cur_gap: u64,
}

/// The most fragmented of some steps, as the (largest free, inactive) pair
/// that [`crate::model::fragmentation`] reads, found without dividing at
/// every step.
#[derive(Debug, Clone, Copy, Default)]
struct Worst(u64, u64);

impl Worst {
    /// Exact below this: every figure converts to a float unrounded.
    const EXACT: u64 = 1 << 53;

    /// The more fragmented of the two; of two with equal fragmentation,
    /// either. Fragmentation is 1 − largest / inactive (0 when nothing is
    /// free), and correctly rounded division and subtraction are
    /// monotonic: the pair with the smaller exact ratio never gives the
    /// smaller float. Figures past 2^53 bytes are compared as floats.
    #[inline]
    fn worse(self, o: Worst) -> Worst {
        let (Worst(a, b), Worst(c, d)) = (self, o);
        if b == 0 || d == 0 || a.max(b).max(c).max(d) >= Self::EXACT {
            return if self.value() >= o.value() { self } else { o };
        }
        // a / b <= c / d
        if (a as u128) * (d as u128) <= (c as u128) * (b as u128) {
            self
        } else {
            o
        }
    }

    fn value(self) -> f64 {
        crate::model::fragmentation(self.0, self.1)
    }
}

impl NearPeak {
    #[inline]
    pub fn add(&mut self, s: &Step) {
        if s.reserved > self.peak {
            self.raise(s.reserved);
        }
        if s.reserved == 0 {
            return;
        }
        let f = Worst(s.largest_free, s.inactive);
        if self.cur_level == s.reserved {
            self.cur_worst = self.cur_worst.worse(f);
            self.cur_gap = self.cur_gap.min(s.largest_free);
        } else {
            self.store();
            (self.cur_level, self.cur_worst, self.cur_gap) = (s.reserved, f, s.largest_free);
        }
    }

    /// A new peak: the current level is stored, and levels below half the
    /// new peak dropped.
    #[cold]
    fn raise(&mut self, reserved: u64) {
        self.peak = reserved;
        self.store();
        // Reserved climbs in many small steps (a page mapped at a time):
        // drop levels only when some lie below the new half.
        let half = self.peak.div_ceil(2);
        if self
            .levels
            .first_key_value()
            .is_some_and(|(&r, _)| r < half)
        {
            let keep = self.levels.split_off(&half);
            self.levels = keep;
        }
    }

    fn store(&mut self) {
        if self.cur_level != 0 {
            let e = self.levels.entry(self.cur_level).or_insert((0.0, u64::MAX));
            e.0 = e.0.max(self.cur_worst.value());
            e.1 = e.1.min(self.cur_gap);
            self.cur_level = 0;
        }
    }

    /// (worst fragmentation, smallest largest gap) over the steps with
    /// reserved at least half the peak.
    pub fn finish(mut self) -> (f64, u64) {
        self.store();
        let mut worst = 0.0f64;
        let mut gap = u64::MAX;
        for (&r, &(w, g)) in &self.levels {
            if r.saturating_mul(2) >= self.peak {
                worst = worst.max(w);
                gap = gap.min(g);
            }
        }
        (worst, if gap == u64::MAX { 0 } else { gap })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Folding with [`Worst::worse`] gives the fragmentation that taking
    /// the largest of every step's float gives, bit for bit.
    #[test]
    fn the_worst_pair_gives_the_largest_fragmentation() {
        let mut next = crate::model::test_support::below(0x9e37_79b9_7f4a_7c15u64);
        for round in 0..2000 {
            let scale = [1 << 10, 1 << 30, 1 << 54, u64::MAX][round % 4];
            let mut w: Option<Worst> = None;
            let mut max = f64::MIN;
            for _ in 0..1 + next(40) {
                let inactive = if next(8) == 0 { 0 } else { next(scale) };
                // Largest free at most inactive, as in the model; now and
                // then a ratio repeated, scaled.
                let largest = if inactive == 0 { 0 } else { next(inactive + 1) };
                let p = Worst(largest, inactive);
                max = max.max(p.value());
                w = Some(w.map_or(p, |w| w.worse(p)));
            }
            assert_eq!(w.unwrap().value().to_bits(), max.to_bits(), "round {round}");
        }
        // Equal ratios, different figures: the same float.
        assert_eq!(Worst(1, 3).worse(Worst(2, 6)).value(), Worst(2, 6).value());
    }
}
