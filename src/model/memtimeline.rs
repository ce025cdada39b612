//! The typed data of a `torch.profiler` `export_memory_timeline` file: live
//! tensor bytes of one device by memory-profiler category over time, one
//! [`CategorySample`] per distinct microsecond. Figures are tensor bytes as
//! the memory profiler sees them (unrounded, no allocator cache): there is no
//! reserved memory and no layout here. [`crate::input::profiler`] builds it.

pub use super::catseries::CategorySeries;
use super::profiler::Anomaly;
use serde::Serialize;

/// Memory-profiler categories, in the index order of the export files.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Parameter,
    OptimizerState,
    Input,
    Temporary,
    Activation,
    Gradient,
    AutogradDetail,
    Unknown,
}

impl Category {
    pub const ALL: [Category; 8] = [
        Category::Parameter,
        Category::OptimizerState,
        Category::Input,
        Category::Temporary,
        Category::Activation,
        Category::Gradient,
        Category::AutogradDetail,
        Category::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Parameter => "parameter",
            Category::OptimizerState => "optimizer state",
            Category::Input => "input",
            Category::Temporary => "temporary",
            Category::Activation => "activation",
            Category::Gradient => "gradient",
            Category::AutogradDetail => "autograd detail",
            Category::Unknown => "unknown",
        }
    }

    /// The name in config files, flags and JSON (`optimizer_state`).
    pub fn key(self) -> &'static str {
        match self {
            Category::Parameter => "parameter",
            Category::OptimizerState => "optimizer_state",
            Category::Input => "input",
            Category::Temporary => "temporary",
            Category::Activation => "activation",
            Category::Gradient => "gradient",
            Category::AutogradDetail => "autograd_detail",
            Category::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.key() == s)
    }

    /// The colours of PyTorch's own plot, so charts read the same.
    pub fn color(self) -> &'static str {
        match self {
            Category::Parameter => "darkgreen",
            Category::OptimizerState => "goldenrod",
            Category::Input => "black",
            Category::Temporary => "mediumpurple",
            Category::Activation => "red",
            Category::Gradient => "mediumblue",
            Category::AutogradDetail => "royalblue",
            Category::Unknown => "grey",
        }
    }
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TimelineForm {
    /// `[t_ns, action, bytes, category]` rows.
    Raw,
    /// `[times_us, sizes]`.
    Coalesced,
}

/// Live bytes per category (indexed like [`Category::ALL`]) after every row
/// of one microsecond.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct CategorySample {
    /// `None` = tensors that existed before profiling started.
    pub time_us: Option<i64>,
    pub bytes: [u64; 8],
}

impl CategorySample {
    pub fn total(&self) -> u64 {
        self.bytes.iter().sum()
    }
    pub fn get(&self, c: Category) -> u64 {
        self.bytes[c as usize]
    }
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct CategoryPeak {
    /// Index into [`MemoryTimeline::samples`].
    pub sample: usize,
    pub time_us: Option<i64>,
    pub total: u64,
    pub bytes: [u64; 8],
}

/// Row counts per action (raw form only).
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActionCounts {
    pub preexisting: u64,
    pub create: u64,
    pub increment_version: u64,
    pub destroy: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct MemoryTimeline {
    pub form: Option<TimelineForm>,
    /// Rows (raw) or time steps (coalesced) in the file.
    pub rows: u64,
    /// One a distinct microsecond (compact: [`CategorySeries`]).
    #[serde(skip)]
    pub samples: CategorySeries,
    /// Highest total (the first sample that reaches it).
    pub peak: Option<CategoryPeak>,
    pub actions: Option<ActionCounts>,
    pub anomalies: Vec<Anomaly>,
}

impl MemoryTimeline {
    pub fn first_time_us(&self) -> Option<i64> {
        self.samples.iter().find_map(|s| s.time_us)
    }
    pub fn last_time_us(&self) -> Option<i64> {
        self.samples.iter().filter_map(|s| s.time_us).last()
    }
    pub fn end(&self) -> Option<CategorySample> {
        self.samples.last()
    }
    /// Bytes of tensors that existed before profiling started.
    pub fn preexisting(&self) -> Option<CategorySample> {
        self.samples.first().filter(|s| s.time_us.is_none())
    }
}
