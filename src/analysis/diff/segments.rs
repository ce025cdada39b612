//! The segments of one run only, matched by address and size as `_memory_viz compare` matches them, with what they hold.

use super::*;

/// One segment of one run, with what it holds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SegmentFigures {
    pub device: i64,
    pub address: u64,
    pub total_size: u64,
    /// `small` or `large`.
    pub segment_type: String,
    pub stream: i64,
    pub pool_id: (i64, i64),
    /// Requested bytes of its live (`active_allocated`) blocks.
    pub allocated_bytes: u64,
    pub live_blocks: u64,
    /// Bytes of its inactive blocks.
    pub free_bytes: u64,
    /// The call site (as `culprits` names it, with its line) holding the
    /// most requested bytes in the segment; `None` without a live block.
    pub top_site: Option<String>,
    pub top_site_bytes: u64,
}

/// Segments matched by (address, total size), as PyTorch's `_memory_viz
/// compare` matches them: those of one run only.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SegmentDiff {
    /// Segments of BEFORE whose address and size AFTER has too.
    pub in_both: usize,
    pub only_before_count: usize,
    pub only_before_bytes: u64,
    pub only_after_count: usize,
    pub only_after_bytes: u64,
    /// The largest first (then by device and address), at most `--top`.
    pub only_before: Vec<SegmentFigures>,
    pub only_after: Vec<SegmentFigures>,
}

/// The segments of one run only, between two snapshots (each side one
/// device, or every device when `None`). A segment is the same in both when
/// its address and total size are: CUDA's unified addressing gives every
/// device its own addresses, so the device is not part of the key (and two
/// devices of one file can be compared). An expandable segment that grew
/// or shrank is therefore in both lists, as `_memory_viz compare` has it.
/// `top` bounds the lists (0 = all); the counts and bytes cover every one.
pub fn segment_diff(
    before: &Snapshot,
    before_device: Option<i64>,
    after: &Snapshot,
    after_device: Option<i64>,
    top: usize,
) -> SegmentDiff {
    let (b, a) = (
        segments_of(before, before_device),
        segments_of(after, after_device),
    );
    let keys = |v: &[&Segment]| -> BTreeSet<(u64, u64)> {
        v.iter().map(|x| (x.address, x.total_size)).collect()
    };
    let (kb, ka) = (keys(&b), keys(&a));
    let only = |snap: &Snapshot, v: &[&Segment], other: &BTreeSet<(u64, u64)>| {
        let mut names: HashMap<StackId, String> = HashMap::new();
        let facts = FrameFacts::new(snap);
        let mut out: Vec<SegmentFigures> = v
            .iter()
            .filter(|x| !other.contains(&(x.address, x.total_size)))
            .map(|x| segment_figures(&facts, x, &mut names))
            .collect();
        out.sort_by(|p, q| {
            q.total_size
                .cmp(&p.total_size)
                .then(p.device.cmp(&q.device))
                .then(p.address.cmp(&q.address))
        });
        let bytes = out.iter().fold(0u64, |t, x| t.saturating_add(x.total_size));
        (out, bytes)
    };
    let (mut ob, ob_bytes) = only(before, &b, &ka);
    let (mut oa, oa_bytes) = only(after, &a, &kb);
    let (ob_count, oa_count) = (ob.len(), oa.len());
    if top > 0 {
        ob.truncate(top);
        oa.truncate(top);
    }
    SegmentDiff {
        in_both: b.len() - ob_count,
        only_before_count: ob_count,
        only_before_bytes: ob_bytes,
        only_after_count: oa_count,
        only_after_bytes: oa_bytes,
        only_before: ob,
        only_after: oa,
    }
}

/// One device's segments, or every device's.
pub(super) fn segments_of(s: &Snapshot, device: Option<i64>) -> Vec<&Segment> {
    s.segments
        .iter()
        .filter(|x| device.is_none_or(|d| x.device == d))
        .collect()
}

pub(super) fn segment_figures(
    facts: &FrameFacts,
    seg: &Segment,
    names: &mut HashMap<StackId, String>,
) -> SegmentFigures {
    let (mut allocated, mut live, mut free) = (0u64, 0u64, 0u64);
    let mut by_site: BTreeMap<String, u64> = BTreeMap::new();
    for b in &seg.blocks {
        match b.state {
            BlockState::ActiveAllocated => {
                let bytes = b.requested_or_size().min(b.size);
                allocated = allocated.saturating_add(bytes);
                live += 1;
                let site = names
                    .entry(b.frames)
                    .or_insert_with(|| facts.call_site(b.frames).label());
                let e = by_site.entry(site.clone()).or_default();
                *e = e.saturating_add(bytes);
            }
            BlockState::Inactive => free = free.saturating_add(b.size),
            BlockState::ActivePendingFree => {}
        }
    }
    // Most bytes; ties to the first site by name (the map's order).
    let top = by_site
        .into_iter()
        .fold(None::<(String, u64)>, |best, (s, n)| match best {
            Some((_, m)) if m >= n => best,
            _ => Some((s, n)),
        });
    SegmentFigures {
        device: seg.device,
        address: seg.address,
        total_size: seg.total_size,
        segment_type: seg.segment_type.as_str().into(),
        stream: seg.stream,
        pool_id: seg.pool(),
        allocated_bytes: allocated,
        live_blocks: live,
        free_bytes: free,
        top_site_bytes: top.as_ref().map_or(0, |t| t.1),
        top_site: top.map(|t| t.0),
    }
}
