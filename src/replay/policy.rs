//! The caching allocator's size rules, as far as the replay needs them to
//! rebuild block layouts from a trace (whose sizes are requested, not
//! rounded): `round_size`, `should_split` and the segment size of a new
//! cudaMalloc. Written from §4.2 of the snapshot-format notes; kept in this
//! one place, with the allocator's names, so it can give way to the
//! simulator's policy module without touching the replay.

use crate::model::AllocatorSettings;

/// Minimum size and alignment of every block.
pub const MIN_BLOCK: u64 = 512;
/// Requests whose rounded size is at most this go to the small pool.
pub const SMALL_SIZE: u64 = 1 << 20;
/// Segment size of the small pool (and its expandable page size).
pub const SMALL_BUFFER: u64 = 2 << 20;
/// Requests under this get a `LARGE_BUFFER` segment.
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// Default large segment size (and large expandable page size).
pub const LARGE_BUFFER: u64 = 20 << 20;
/// Large segments are rounded up to multiples of this.
pub const ROUND_LARGE: u64 = 2 << 20;

/// The settings that change rounding and splitting.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Policy {
    /// Divisions per power-of-two MiB bucket (`roundup_power2_divisions`).
    pub divisions: [u64; 16],
    /// `None` = unlimited.
    pub max_split_size: Option<u64>,
    /// Expandable segments on: every pool splits down to 512 bytes.
    pub expandable: bool,
}

impl Policy {
    pub fn from_settings(s: Option<&AllocatorSettings>) -> Policy {
        Policy {
            divisions: s
                .and_then(|s| s.roundup_power2_divisions())
                .unwrap_or([0; 16]),
            max_split_size: s.and_then(|s| s.max_split_size()),
            expandable: s.and_then(|s| s.expandable_segments()).unwrap_or(false),
        }
    }

    pub fn uses_power2_rounding(&self) -> bool {
        self.divisions.iter().any(|&d| d > 1)
    }

    /// `round_size`: the block size the allocator carves for a request.
    pub fn round_size(&self, size: u64) -> u64 {
        if size < MIN_BLOCK {
            return MIN_BLOCK;
        }
        let bucket = (63 - size.leading_zeros() as i64 - 20).clamp(0, 15) as usize;
        let div = self.divisions[bucket];
        if div > 1 && size > MIN_BLOCK * div {
            if size.is_power_of_two() {
                return size;
            }
            let floor = 1u64 << (63 - size.leading_zeros());
            let step = floor >> (63 - div.leading_zeros());
            if step == 0 {
                return floor << 1;
            }
            return size.div_ceil(step) * step;
        }
        size.div_ceil(MIN_BLOCK) * MIN_BLOCK
    }

    /// Which pool a rounded size goes to.
    pub fn is_small(rounded: u64) -> bool {
        rounded <= SMALL_SIZE
    }

    /// `should_split`: whether a free block carved for `rounded` bytes keeps
    /// `remaining` bytes as a separate free block.
    pub fn should_split(&self, small_pool: bool, rounded: u64, remaining: u64) -> bool {
        if small_pool || self.expandable {
            remaining >= MIN_BLOCK
        } else {
            self.max_split_size.is_none_or(|m| rounded < m) && remaining > SMALL_SIZE
        }
    }

    /// `get_allocation_size`: the segment a new cudaMalloc would create.
    pub fn allocation_size(rounded: u64) -> u64 {
        if rounded <= SMALL_SIZE {
            SMALL_BUFFER
        } else if rounded < MIN_LARGE_ALLOC {
            LARGE_BUFFER
        } else {
            rounded.div_ceil(ROUND_LARGE) * ROUND_LARGE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_examples_of_the_spec() {
        let p = Policy::default();
        assert_eq!(p.round_size(4), 512);
        assert_eq!(p.round_size(1_500_000), 1_500_160);
        assert_eq!(p.round_size(100_000_000), 100_000_256);
        assert_eq!(Policy::allocation_size(512), SMALL_BUFFER);
        assert_eq!(Policy::allocation_size(1_500_160), LARGE_BUFFER);
        assert_eq!(Policy::allocation_size(100_000_256), 100_663_296);
        // 100 MB: remainder 663 040 B ≤ 1 MiB is not split off.
        assert!(!p.should_split(false, 100_000_256, 100_663_296 - 100_000_256));
        assert!(p.should_split(false, 1_500_160, LARGE_BUFFER - 1_500_160));
        assert!(p.should_split(true, 512, SMALL_BUFFER - 512));
        assert!(!p.should_split(true, 512, 0));
    }

    #[test]
    fn power2_divisions() {
        let mut p = Policy {
            divisions: [4; 16],
            ..Default::default()
        };
        // [2, 4) MiB in four steps of 512 KiB.
        assert_eq!(p.round_size((3 << 20) + 1), (7 << 20) / 2);
        assert_eq!(p.round_size(1 << 21), 1 << 21);
        // Not above 512 × divisions: plain 512-byte rounding.
        assert_eq!(p.round_size(1200), 1536);
        p.divisions = [1; 16];
        assert_eq!(p.round_size((3 << 20) + 1), (3 << 20) + 512);
    }

    #[test]
    fn expandable_and_max_split() {
        let p = Policy {
            expandable: true,
            ..Default::default()
        };
        assert!(p.should_split(false, 30 << 20, 512));
        let p = Policy {
            max_split_size: Some(64 << 20),
            ..Default::default()
        };
        assert!(!p.should_split(false, 80 << 20, 40 << 20));
        assert!(p.should_split(false, 8 << 20, 40 << 20));
    }
}
