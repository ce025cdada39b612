//! The figures of one device at one moment: [`Sample`], the one sample type
//! of snapshots and profiler traces.

use serde::Serialize;

/// Figures of the allocator state at one moment (one device), for a
/// replayed snapshot and a profiler trace alike. A figure the input cannot
/// give is `None`: a trace has no block layout ([`Sample::layout`]), and no
/// reserved figure before its first event, for CPU memory or in the 2021
/// schema.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Index of the event after which this sample holds; `None` = start.
    pub event: Option<u32>,
    pub time_us: Option<i64>,
    /// Live bytes: requested bytes of live (`active_allocated`) blocks for
    /// a snapshot; a trace's `Total Allocated` (rounded block bytes, as
    /// `torch.cuda.memory_allocated()` reports).
    pub allocated: u64,
    /// Block bytes of live blocks (for a trace: equal to `allocated`).
    pub active: u64,
    pub reserved: Option<u64>,
    /// Inactive + pending-free bytes (for a trace: reserved − allocated,
    /// bytes cached but in no live allocation).
    pub external_free: Option<u64>,
    /// The figures read off the segment and block layout; `None` for a
    /// profiler trace, which records none (see
    /// [`crate::model::profiler::MISSING_FIGURES`]).
    pub layout: Option<LayoutFigures>,
}

/// The figures of a [`Sample`] that need the segment and block layout.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LayoutFigures {
    /// active − allocated (rounding waste).
    pub internal_free: u64,
    pub pending_free: u64,
    /// Largest inactive block.
    pub largest_free_gap: u64,
    /// Number of inactive blocks.
    pub free_gaps: u64,
    /// 1 − largest gap / inactive bytes (0 when nothing is free).
    pub fragmentation: f64,
    /// Largest request the small pool could serve without a new cudaMalloc.
    pub largest_small_request: u64,
    /// Largest request the large pool could serve without a new cudaMalloc.
    pub largest_large_request: u64,
}

impl Sample {
    /// Reserved bytes, 0 where not recorded (what a chart draws).
    #[inline]
    pub fn reserved_bytes(&self) -> u64 {
        self.reserved.unwrap_or(0)
    }

    /// Inactive + pending bytes, 0 where not recorded.
    #[inline]
    pub fn external_bytes(&self) -> u64 {
        self.external_free.unwrap_or(0)
    }

    /// The layout figures, all 0 for an input without a layout (what a
    /// chart draws; a table prints "not measurable" from [`Sample::layout`]).
    #[inline]
    pub fn lay(&self) -> LayoutFigures {
        self.layout.unwrap_or_default()
    }
}

/// Serialized flat, in the field order of `fragscope.timeline/1`; the
/// layout figures are left out where there is no layout.
impl Serialize for Sample {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let n = if self.layout.is_some() { 13 } else { 6 };
        let mut m = ser.serialize_struct("Sample", n)?;
        m.serialize_field("event", &self.event)?;
        m.serialize_field("time_us", &self.time_us)?;
        m.serialize_field("allocated", &self.allocated)?;
        m.serialize_field("active", &self.active)?;
        m.serialize_field("reserved", &self.reserved)?;
        match &self.layout {
            None => m.serialize_field("external_free", &self.external_free)?,
            Some(l) => {
                m.serialize_field("internal_free", &l.internal_free)?;
                m.serialize_field("external_free", &self.external_free)?;
                m.serialize_field("pending_free", &l.pending_free)?;
                m.serialize_field("largest_free_gap", &l.largest_free_gap)?;
                m.serialize_field("free_gaps", &l.free_gaps)?;
                m.serialize_field("fragmentation", &l.fragmentation)?;
                m.serialize_field("largest_small_request", &l.largest_small_request)?;
                m.serialize_field("largest_large_request", &l.largest_large_request)?;
            }
        }
        m.end()
    }
}
