//! The caching allocator's size rules as the replay applies them to rebuild
//! block layouts from a trace (whose sizes are requested, not rounded):
//! `round_size`, `should_split` and the segment size of a new cudaMalloc,
//! bound to one snapshot's settings.
//!
//! Owns only that binding: the rules themselves are [`crate::model::policy`],
//! the one source of truth shared with the allocator model, so the replay and
//! the simulator can never disagree about a block's size.

use crate::model::AllocatorSettings;
use crate::model::policy as rules;

pub use rules::{LARGE_BUFFER, SMALL_BUFFER, SMALL_SIZE};

/// The settings that change rounding and splitting.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Policy {
    /// Divisions per power-of-two MiB bucket (`roundup_power2_divisions`).
    pub divisions: [u64; rules::ROUNDUP_BUCKETS],
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
                .unwrap_or([0; rules::ROUNDUP_BUCKETS]),
            max_split_size: s.and_then(|s| s.max_split_size()),
            expandable: s.and_then(|s| s.expandable_segments()).unwrap_or(false),
        }
    }

    pub fn uses_power2_rounding(&self) -> bool {
        self.divisions.iter().any(|&d| d > 1)
    }

    /// `round_size`: the block size the allocator carves for a request.
    pub fn round_size(&self, size: u64) -> u64 {
        rules::round_size(size, &self.divisions)
    }

    /// Which pool a rounded size goes to.
    pub fn is_small(rounded: u64) -> bool {
        rules::is_small(rounded)
    }

    /// `should_split`: whether a free block carved for `rounded` bytes keeps
    /// `remaining` bytes as a separate free block.
    pub fn should_split(&self, small_pool: bool, rounded: u64, remaining: u64) -> bool {
        rules::should_split(
            rounded.saturating_add(remaining),
            rounded,
            small_pool,
            self.expandable,
            self.max_split_size.unwrap_or(u64::MAX),
        )
    }

    /// `get_allocation_size`: the segment a new cudaMalloc would create.
    pub fn allocation_size(rounded: u64) -> u64 {
        rules::allocation_size(rounded)
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
