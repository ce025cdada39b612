//! The arithmetic rules of PyTorch's CUDA caching allocator
//! (`c10/cuda/CUDACachingAllocator.cpp`, 2025 revision; see §4 of the format
//! spec): size rounding, pool choice, the segment size asked of cudaMalloc,
//! the split rule and the oversize-block rules of the best-fit search.
//!
//! Owns pure functions of sizes and settings only; the block bookkeeping that
//! applies them lives in `allocator.rs`.

/// Minimum size and alignment of every block.
pub const MIN_BLOCK_SIZE: u64 = 512;
/// Requests whose rounded size is at most this go to the small pool.
pub const SMALL_SIZE: u64 = 1 << 20;
/// Segment size of the small pool, and its expandable page size.
pub const SMALL_BUFFER: u64 = 2 << 20;
/// Requests from here on get a segment of their own (rounded to 2 MiB).
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// Default segment size of the large pool for 1–10 MiB requests
/// (`large_segment_size_mb` changes it in 2.15+).
pub const LARGE_BUFFER: u64 = 20 << 20;
/// Large segments are multiples of this.
pub const ROUND_LARGE: u64 = 2 << 20;
/// Number of `roundup_power2_divisions` buckets (1 MiB … 32 GiB and up).
pub const ROUNDUP_BUCKETS: usize = 16;

/// Bucket of `roundup_power2_divisions` for a size: `floor(log2 size) − 20`,
/// clamped to 0..=15 (everything under 2 MiB shares bucket 0).
pub fn roundup_bucket(size: u64) -> usize {
    if size == 0 {
        return 0;
    }
    let log = 63 - size.leading_zeros() as i64;
    (log - 20).clamp(0, ROUNDUP_BUCKETS as i64 - 1) as usize
}

/// `roundup_power2_next_division`: a power of two stays; otherwise round up
/// to the next of `divisions` equal steps between the neighbouring powers.
pub fn roundup_power2_next_division(size: u64, divisions: u64) -> u64 {
    if size.is_power_of_two() {
        return size;
    }
    let floor = 1u64 << (63 - size.leading_zeros());
    // The step uses floor(log2 divisions), as the source does for a
    // non-power-of-two division count.
    let step = floor >> (63 - divisions.max(1).leading_zeros());
    if step == 0 {
        return floor << 1;
    }
    let down = size & !(step - 1);
    // Saturates: a size within a step of 2^64 only comes from a damaged file.
    if down == size {
        size
    } else {
        down.saturating_add(step)
    }
}

/// `round_size`: the size a request is carved to.
pub fn round_size(size: u64, divisions: &[u64; ROUNDUP_BUCKETS]) -> u64 {
    if size < MIN_BLOCK_SIZE {
        return MIN_BLOCK_SIZE;
    }
    let d = divisions[roundup_bucket(size)];
    if d > 1 && size > MIN_BLOCK_SIZE.saturating_mul(d) {
        roundup_power2_next_division(size, d)
    } else {
        size.div_ceil(MIN_BLOCK_SIZE).saturating_mul(MIN_BLOCK_SIZE)
    }
}

/// Whether a rounded size is served by the small pool.
pub fn is_small(rounded: u64) -> bool {
    rounded <= SMALL_SIZE
}

/// `get_allocation_size`: the segment asked of cudaMalloc for a rounded
/// request, with the default large segment size.
pub fn allocation_size(size: u64) -> u64 {
    allocation_size_with(size, LARGE_BUFFER)
}

/// [`allocation_size`] with a configured `large_segment_size`.
pub fn allocation_size_with(size: u64, large_segment_size: u64) -> u64 {
    if size <= SMALL_SIZE {
        SMALL_BUFFER
    } else if size < MIN_LARGE_ALLOC {
        large_segment_size
    } else {
        size.div_ceil(ROUND_LARGE).saturating_mul(ROUND_LARGE)
    }
}

/// `should_split`: whether a found block of `block_size` is split to serve a
/// rounded request of `size`. Small pool, or expandable segments on: any
/// remainder of at least 512 B; large pool: only below `max_split_size` and
/// with a remainder strictly over 1 MiB.
pub fn should_split(
    block_size: u64,
    size: u64,
    small_pool: bool,
    expandable_segments: bool,
    max_split_size: u64,
) -> bool {
    let remaining = block_size - size;
    if small_pool || expandable_segments {
        remaining >= MIN_BLOCK_SIZE
    } else {
        size < max_split_size && remaining > SMALL_SIZE
    }
}

/// The two oversize rules of `get_free_block`: a block at or over
/// `max_split_size` is not handed to a smaller request, and a request at or
/// over it only takes a block less than `max_non_split_rounding` bigger.
pub fn oversize_refuses(
    block_size: u64,
    size: u64,
    max_split_size: u64,
    max_non_split_rounding: u64,
) -> bool {
    (size < max_split_size && block_size >= max_split_size)
        || (size >= max_split_size && block_size >= size.saturating_add(max_non_split_rounding))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: [u64; 16] = [0; 16];

    #[test]
    fn worked_examples_round() {
        // §4.2 worked examples.
        assert_eq!(round_size(4, &NONE), 512);
        assert_eq!(round_size(1_500_000, &NONE), 1_500_160);
        assert_eq!(round_size(100_000_000, &NONE), 100_000_256);
        // 1200 with 4 divisions → 1280 (step 256 between 1024 and 2048)...
        assert_eq!(roundup_power2_next_division(1200, 4), 1280);
        // ...but round_size uses divisions only above 512 × d = 2048 B, so
        // a 1200 B request is still rounded to 512 B multiples.
        let mut four = NONE;
        four[0] = 4;
        assert_eq!(round_size(1200, &four), 1536);
        assert_eq!(round_size(2100, &four), 2560);
    }

    #[test]
    fn rounding_edges() {
        assert_eq!(round_size(0, &NONE), 512);
        assert_eq!(round_size(512, &NONE), 512);
        assert_eq!(round_size(513, &NONE), 1024);
        // Divisions apply only above 512 × d; 0 and 1 mean plain rounding.
        let mut eight = NONE;
        eight[0] = 8;
        assert_eq!(round_size(4000, &eight), 4096);
        assert_eq!(round_size(4100, &eight), 4608);
        let mut one = NONE;
        one[0] = 1;
        assert_eq!(round_size(1200, &one), 1536);
        // A power of two is kept.
        let mut all4 = [4u64; 16];
        all4[15] = 4;
        assert_eq!(round_size(64 << 20, &all4), 64 << 20);
        // 65 MiB with 4 divisions of [64, 128) MiB → 80 MiB.
        assert_eq!(round_size(65 << 20, &all4), 80 << 20);
    }

    #[test]
    fn buckets() {
        assert_eq!(roundup_bucket(1), 0);
        assert_eq!(roundup_bucket((2 << 20) - 1), 0);
        assert_eq!(roundup_bucket(2 << 20), 1);
        assert_eq!(roundup_bucket(40 << 30), 15);
        assert_eq!(roundup_bucket(1 << 60), 15);
    }

    #[test]
    fn worked_examples_segments() {
        assert_eq!(allocation_size(512), 2 << 20);
        assert_eq!(allocation_size(SMALL_SIZE), 2 << 20);
        assert_eq!(allocation_size(1_500_160), 20_971_520);
        assert_eq!(allocation_size((10 << 20) - 512), 20 << 20);
        assert_eq!(allocation_size(100_000_256), 100_663_296);
        assert_eq!(allocation_size_with(3 << 20, 32 << 20), 32 << 20);
        assert!(is_small(SMALL_SIZE));
        assert!(!is_small(SMALL_SIZE + 512));
    }

    #[test]
    fn split_rules() {
        let unlimited = u64::MAX;
        // Small pool: remainder ≥ 512.
        assert!(should_split(2 << 20, 512, true, false, unlimited));
        assert!(!should_split(1024, 768, true, false, unlimited));
        // Worked example: 1 500 160 in a 20 MiB segment splits (19 471 360 left).
        assert!(should_split(20_971_520, 1_500_160, false, false, unlimited));
        // Worked example: 100 000 256 in 100 663 296 leaves 663 040 ≤ 1 MiB.
        assert!(!should_split(
            100_663_296,
            100_000_256,
            false,
            false,
            unlimited
        ));
        // Strictly more than 1 MiB.
        assert!(!should_split(
            (20 << 20) + SMALL_SIZE,
            20 << 20,
            false,
            false,
            unlimited
        ));
        assert!(should_split(
            (20 << 20) + SMALL_SIZE + 512,
            20 << 20,
            false,
            false,
            unlimited
        ));
        // Oversize requests are never split in the large pool...
        assert!(!should_split(300 << 20, 256 << 20, false, false, 256 << 20));
        // ...but are with expandable segments.
        assert!(should_split(300 << 20, 256 << 20, false, true, 256 << 20));
    }

    #[test]
    fn oversize_rules() {
        let m = 256 << 20;
        let r = 20 << 20;
        assert!(oversize_refuses(m, 2 << 20, m, r));
        assert!(!oversize_refuses(m - 512, 2 << 20, m, r));
        assert!(!oversize_refuses(m + (19 << 20), m, m, r));
        assert!(oversize_refuses(m + (20 << 20), m, m, r));
        assert!(!oversize_refuses(u64::MAX - 1, 1 << 30, u64::MAX, r));
    }
}
