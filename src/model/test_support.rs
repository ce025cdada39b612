//! Builders of model values for unit tests in every stage above the model:
//! a block, a segment holding given blocks, a segment laid out end to end.

use super::{Block, BlockState, Frame, FrameId, Interner, Segment, SegmentType, StackId};

/// A block of `size` bytes at `address`.
pub fn block(
    address: u64,
    size: u64,
    requested_size: Option<u64>,
    state: BlockState,
    frames: StackId,
) -> Block {
    Block {
        address,
        size,
        requested_size,
        state,
        frames,
    }
}

/// A large-pool segment of device 0, stream 0, at `address`, as large as its
/// blocks together, with no figures or stack of its own.
pub fn segment(address: u64, blocks: Vec<Block>) -> Segment {
    Segment {
        device: 0,
        address,
        total_size: blocks.iter().map(|b| b.size).sum(),
        allocated_size: None,
        active_size: None,
        requested_size: None,
        stream: 0,
        segment_type: SegmentType::Large,
        pool_id: None,
        is_expandable: None,
        frames: StackId::EMPTY,
        blocks,
    }
}

/// A [`segment`] at `address` of blocks (size, requested, state) without
/// stacks, each starting where the one before ends.
pub fn laid_out(address: u64, blocks: &[(u64, Option<u64>, BlockState)]) -> Segment {
    let mut at = address;
    let blocks = blocks
        .iter()
        .map(|&(size, requested, state)| {
            at += size;
            block(at - size, size, requested, state, StackId::EMPTY)
        })
        .collect();
    segment(address, blocks)
}

/// PyTorch's own frame under most user frames in the tests.
pub const TORCH_LINEAR: &str = "/usr/lib/python3/site-packages/torch/nn/modules/linear.py";

/// The frame `name` at `filename:line`, interned in `i`.
pub fn frame(i: &mut Interner, filename: &str, line: i64, name: &str) -> FrameId {
    let filename = i.string(filename).unwrap();
    let name = i.string(name).unwrap();
    i.frame(Frame {
        filename,
        line,
        name,
    })
}

/// Numbers for property tests (xorshift64 from `seed`): each call gives
/// one below its argument.
pub fn below(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed;
    move |n| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    }
}
