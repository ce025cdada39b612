//! The metrics by name: what each measures, its unit, which way is worse, and how a figure of one is written.

use super::*;

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum MetricId {
    PeakAllocated,
    PeakReserved,
    EndAllocated,
    EndReserved,
    Fragmentation,
    LargestGap,
    FreeGaps,
    InternalWaste,
    OomEvents,
    /// Memory-timeline exports: the highest total of live tensor bytes.
    PeakTotal,
    /// Memory-timeline exports: each category's own highest live bytes.
    PeakParameter,
    PeakOptimizerState,
    PeakInput,
    PeakTemporary,
    PeakActivation,
    PeakGradient,
    PeakAutogradDetail,
    PeakUnknown,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    /// A fraction in [0, 1].
    Ratio,
    Count,
}

impl MetricId {
    /// Every metric: the allocator's, then the memory timeline's.
    pub const ALL: [MetricId; 18] = {
        let mut all = [MetricId::PeakAllocated; 18];
        let mut i = 0;
        while i < 9 {
            all[i] = MetricId::ALLOCATOR[i];
            all[9 + i] = MetricId::CATEGORIES[i];
            i += 1;
        }
        all
    };

    /// The metrics of a snapshot or a profiler trace (the allocator's).
    pub const ALLOCATOR: [MetricId; 9] = [
        MetricId::PeakAllocated,
        MetricId::PeakReserved,
        MetricId::EndAllocated,
        MetricId::EndReserved,
        MetricId::Fragmentation,
        MetricId::LargestGap,
        MetricId::FreeGaps,
        MetricId::InternalWaste,
        MetricId::OomEvents,
    ];

    /// The metrics of a memory-timeline export: the total, then each
    /// category in the export's order.
    pub const CATEGORIES: [MetricId; 9] = [
        MetricId::PeakTotal,
        MetricId::PeakParameter,
        MetricId::PeakOptimizerState,
        MetricId::PeakInput,
        MetricId::PeakTemporary,
        MetricId::PeakActivation,
        MetricId::PeakGradient,
        MetricId::PeakAutogradDetail,
        MetricId::PeakUnknown,
    ];

    /// The peak of one memory-profiler category.
    pub fn peak_of(c: Category) -> MetricId {
        match c {
            Category::Parameter => MetricId::PeakParameter,
            Category::OptimizerState => MetricId::PeakOptimizerState,
            Category::Input => MetricId::PeakInput,
            Category::Temporary => MetricId::PeakTemporary,
            Category::Activation => MetricId::PeakActivation,
            Category::Gradient => MetricId::PeakGradient,
            Category::AutogradDetail => MetricId::PeakAutogradDetail,
            Category::Unknown => MetricId::PeakUnknown,
        }
    }

    /// The category a per-category peak is about.
    pub fn category(self) -> Option<Category> {
        Category::ALL
            .into_iter()
            .find(|&c| MetricId::peak_of(c) == self)
    }

    /// A figure of a memory-timeline export (the total or a category).
    pub fn is_category_figure(self) -> bool {
        self == MetricId::PeakTotal || self.category().is_some()
    }

    /// Whether an input of this kind can measure the metric at all.
    pub fn applies_to(self, source: Source) -> bool {
        self.is_category_figure() == (source == Source::MemoryTimeline)
    }

    /// The name used in config files, flags and JSON.
    pub fn key(self) -> &'static str {
        match self {
            MetricId::PeakAllocated => "peak_allocated",
            MetricId::PeakReserved => "peak_reserved",
            MetricId::EndAllocated => "end_allocated",
            MetricId::EndReserved => "end_reserved",
            MetricId::Fragmentation => "fragmentation",
            MetricId::LargestGap => "largest_gap",
            MetricId::FreeGaps => "free_gaps",
            MetricId::InternalWaste => "internal_waste",
            MetricId::OomEvents => "oom_events",
            MetricId::PeakTotal => "peak_total",
            MetricId::PeakParameter => "peak_parameter",
            MetricId::PeakOptimizerState => "peak_optimizer_state",
            MetricId::PeakInput => "peak_input",
            MetricId::PeakTemporary => "peak_temporary",
            MetricId::PeakActivation => "peak_activation",
            MetricId::PeakGradient => "peak_gradient",
            MetricId::PeakAutogradDetail => "peak_autograd_detail",
            MetricId::PeakUnknown => "peak_unknown",
        }
    }

    pub fn parse(s: &str) -> Option<MetricId> {
        MetricId::ALL.into_iter().find(|m| m.key() == s)
    }

    /// Words for tables and messages.
    pub fn label(self) -> &'static str {
        match self {
            MetricId::PeakAllocated => "peak allocated",
            MetricId::PeakReserved => "peak reserved",
            MetricId::EndAllocated => "end allocated",
            MetricId::EndReserved => "end reserved",
            MetricId::Fragmentation => "worst fragmentation under pressure",
            MetricId::LargestGap => "smallest largest gap under pressure",
            MetricId::FreeGaps => "most free gaps under pressure",
            MetricId::InternalWaste => "most internal waste",
            MetricId::OomEvents => "OOM events",
            MetricId::PeakTotal => "peak total (all categories)",
            MetricId::PeakParameter => "peak parameter",
            MetricId::PeakOptimizerState => "peak optimizer state",
            MetricId::PeakInput => "peak input",
            MetricId::PeakTemporary => "peak temporary",
            MetricId::PeakActivation => "peak activation",
            MetricId::PeakGradient => "peak gradient",
            MetricId::PeakAutogradDetail => "peak autograd detail",
            MetricId::PeakUnknown => "peak unknown",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            MetricId::Fragmentation => Unit::Ratio,
            MetricId::FreeGaps | MetricId::OomEvents => Unit::Count,
            _ => Unit::Bytes,
        }
    }

    /// The largest free gap is the one figure where less is worse.
    pub fn lower_is_worse(self) -> bool {
        self == MetricId::LargestGap
    }
}

/// A measured figure with its unit.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    Bytes(u64),
    Ratio(f64),
    Count(u64),
}

impl Quantity {
    pub fn as_f64(self) -> f64 {
        match self {
            Quantity::Bytes(b) | Quantity::Count(b) => b as f64,
            Quantity::Ratio(r) => r,
        }
    }
    pub fn unit(self) -> Unit {
        match self {
            Quantity::Bytes(_) => Unit::Bytes,
            Quantity::Ratio(_) => Unit::Ratio,
            Quantity::Count(_) => Unit::Count,
        }
    }
    /// `1.50 GiB`, `61.9%`, `3`.
    pub fn fmt(self, st: &Style) -> String {
        match self {
            Quantity::Bytes(b) => st.bytes(b),
            Quantity::Ratio(r) => fmt_pct(r),
            Quantity::Count(c) => c.to_string(),
        }
    }
    pub(super) fn of(unit: Unit, v: f64) -> Quantity {
        match unit {
            Unit::Bytes => Quantity::Bytes(v as u64),
            Unit::Ratio => Quantity::Ratio(v),
            Unit::Count => Quantity::Count(v as u64),
        }
    }
}
