//! Why an allocation failed and what to try: one diagnosis shared by
//! `fragscope oom` (figures from a replayed snapshot) and `fragscope explain`
//! (figures parsed from an OOM message). Pure logic over [`OomFigures`]; the
//! callers supply what they know and leave the rest `None`.

use crate::core::style::Style;
use serde::Serialize;

/// Everything known about one failed allocation. Unknown figures are `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OomFigures {
    /// Bytes the tensor asked for (or the allocator's rounded request).
    pub requested: Option<u64>,
    /// Bytes the allocator tried to cudaMalloc (the "Tried to allocate" figure
    /// of the message: a segment size, e.g. 20 MiB for a 1.5 MB tensor).
    pub alloc_size: Option<u64>,
    /// Total device memory.
    pub capacity: Option<u64>,
    /// Free device memory reported by the driver at the failure.
    pub device_free: Option<u64>,
    /// Memory reserved by PyTorch's caching allocator.
    pub reserved: Option<u64>,
    /// Memory allocated to tensors.
    pub allocated: Option<u64>,
    /// Largest free block inside reserved memory (snapshots only).
    pub largest_free_gap: Option<u64>,
    /// Memory the whole process holds (`this process has X memory in use`).
    pub process_memory: Option<u64>,
    /// Memory held by other processes named in the message.
    pub other_processes: Option<u64>,
    /// Allowed maximum under a memory fraction (`X allowed;`).
    pub fraction_limit: Option<u64>,
    /// Bytes allocated in private pools (CUDA graphs).
    pub private_pools: Option<u64>,
    pub expandable_segments: Option<bool>,
    /// `None` = unlimited or unknown.
    pub max_split_size: Option<u64>,
    pub gc_threshold: Option<f64>,
}

impl OomFigures {
    /// What a profiler trace knows about a failure: the rounded request and
    /// the totals the `[OutOfMemory]` event carries, with the device's
    /// capacity where the trace names it.
    pub fn of_trace(o: &crate::model::profiler::TraceOom, capacity: Option<u64>) -> OomFigures {
        OomFigures {
            requested: Some(o.bytes),
            capacity,
            reserved: o.total_reserved,
            allocated: o.total_allocated,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Enough bytes free inside reserved memory, but no single gap large enough.
    Fragmentation,
    /// Not enough memory even if everything were perfectly packed.
    Capacity,
    /// Memory outside PyTorch (other processes, CUDA context, NCCL, …) took
    /// most of the device.
    OtherProcesses,
    /// A per-process memory fraction capped the allocator below the device.
    FractionLimit,
    /// Not enough figures to tell.
    Unknown,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Fragmentation => "fragmentation",
            Cause::Capacity => "capacity",
            Cause::OtherProcesses => "other processes / non-PyTorch memory",
            Cause::FractionLimit => "memory fraction limit",
            Cause::Unknown => "undetermined",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggestion {
    /// The setting or action, e.g. `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.
    pub what: String,
    pub applies: bool,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    pub cause: Cause,
    /// One sentence in plain words.
    pub headline: String,
    pub details: Vec<String>,
    pub suggestions: Vec<Suggestion>,
    /// Figures that contradict each other (some real messages have them).
    pub inconsistencies: Vec<String>,
}

/// Non-PyTorch memory above this share of the device is called out as a cause.
pub const OTHER_MEMORY_SHARE: f64 = 0.10;
/// …and above this absolute amount.
pub const OTHER_MEMORY_MIN: u64 = 1 << 30;

impl Suggestion {
    fn new(what: &str, applies: bool, why: impl Into<String>) -> Suggestion {
        Suggestion {
            what: what.into(),
            applies,
            why: why.into(),
        }
    }
}

/// The figures every part of a diagnosis derives from [`OomFigures`].
struct Derived {
    /// The allocator's request, else the tensor's.
    need: Option<u64>,
    /// Reserved minus allocated minus private pools.
    free_in_reserved: Option<u64>,
    /// Capacity minus device free minus reserved.
    non_pytorch: Option<u64>,
    device_free: u64,
    /// The memory fraction, not the device, refused the request.
    frac_capped: bool,
    /// Memory outside PyTorch is large enough to name as a cause.
    big_other: bool,
}

impl Derived {
    fn of(f: &OomFigures) -> Derived {
        let need = f.alloc_size.or(f.requested);
        let free_in_reserved = match (f.reserved, f.allocated) {
            (Some(r), Some(a)) => Some(
                r.saturating_sub(a)
                    .saturating_sub(f.private_pools.unwrap_or(0)),
            ),
            _ => None,
        };
        let non_pytorch = match (f.capacity, f.device_free, f.reserved) {
            (Some(c), Some(free), Some(r)) => Some(c.saturating_sub(free).saturating_sub(r)),
            _ => None,
        };
        let device_free = f.device_free.unwrap_or(0);
        let frac_capped = match (f.fraction_limit, f.reserved, need) {
            (Some(lim), Some(r), Some(n)) => r.saturating_add(n) > lim && device_free >= n,
            _ => false,
        };
        let big_other = match (non_pytorch, f.capacity) {
            (Some(o), Some(c)) => {
                o >= OTHER_MEMORY_MIN && o as f64 >= OTHER_MEMORY_SHARE * c as f64
            }
            (Some(o), None) => o >= 4 * OTHER_MEMORY_MIN,
            _ => false,
        } || f.other_processes.is_some_and(|o| o >= OTHER_MEMORY_MIN);
        Derived {
            need,
            free_in_reserved,
            non_pytorch,
            device_free,
            frac_capped,
            big_other,
        }
    }
}

pub fn diagnose(st: &Style, f: &OomFigures) -> Diagnosis {
    let d = Derived::of(f);
    let (cause, headline) = cause(st, f, &d);
    Diagnosis {
        cause,
        headline,
        details: details(st, f, &d),
        suggestions: suggestions(st, f, &d, cause),
        inconsistencies: inconsistencies(st, f),
    }
}

/// Figures that contradict each other, each in one sentence.
fn inconsistencies(st: &Style, f: &OomFigures) -> Vec<String> {
    let b = |x| st.bytes(x);
    [
        f.allocated
            .zip(f.reserved)
            .filter(|(a, r)| a > r)
            .map(|(a, r)| {
                format!(
                    "allocated ({}) exceeds reserved ({}): impossible for one allocator state",
                    b(a),
                    b(r)
                )
            }),
        f.capacity
            .zip(f.reserved)
            .filter(|(c, r)| r > c)
            .map(|(c, r)| {
                format!(
                    "reserved ({}) exceeds the device's capacity ({})",
                    b(r),
                    b(c)
                )
            }),
        f.capacity
            .zip(f.device_free)
            .filter(|(c, free)| free > c)
            .map(|(c, free)| {
                format!(
                    "free memory ({}) exceeds the device's capacity ({})",
                    b(free),
                    b(c)
                )
            }),
        match (f.capacity, f.device_free, f.process_memory) {
            (Some(c), Some(free), Some(p))
                if free.saturating_add(p) > c.saturating_add(c / 100) =>
            {
                Some(format!(
                    "free ({}) plus this process's memory ({}) exceed the capacity ({})",
                    b(free),
                    b(p),
                    b(c)
                ))
            }
            _ => None,
        },
        f.allocated
            .zip(f.process_memory)
            .filter(|&(a, p)| a > p.saturating_add(p / 100))
            .map(|(a, p)| {
                format!(
                    "PyTorch's allocated memory ({}) exceeds the process's memory in use ({})",
                    b(a),
                    b(p)
                )
            }),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The figures behind the diagnosis, one line each.
fn details(st: &Style, f: &OomFigures, d: &Derived) -> Vec<String> {
    let b = |x| st.bytes(x);
    [
        d.need.map(|n| format!("requested: {}", b(n))),
        f.reserved.zip(f.allocated).map(|(r, a)| {
            format!(
                "reserved by PyTorch: {}, allocated to tensors: {}, free inside reserved: {}",
                b(r),
                b(a),
                b(d.free_in_reserved.unwrap_or(0))
            )
        }),
        f.largest_free_gap
            .map(|g| format!("largest free gap inside reserved memory: {}", b(g))),
        f.capacity
            .zip(f.device_free)
            .map(|(c, free)| format!("device: {} total, {} free", b(c), b(free))),
        d.non_pytorch.map(|o| {
            format!(
                "memory outside PyTorch's cache (other processes, CUDA context, libraries): {}",
                b(o)
            )
        }),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The cause and the headline saying it.
fn cause(st: &Style, f: &OomFigures, d: &Derived) -> (Cause, String) {
    match (d.need, d.free_in_reserved) {
        _ if d.frac_capped => (
            Cause::FractionLimit,
            "the per-process memory fraction capped the allocator although the device had room"
                .to_string(),
        ),
        (Some(n), _) if f.capacity.is_some_and(|c| n > c) => (
            Cause::Capacity,
            format!(
                "capacity: the request alone ({}) is larger than the device's total capacity ({})",
                st.bytes(n),
                st.bytes(f.capacity.unwrap_or(0))
            ),
        ),
        (Some(n), Some(fr)) => cause_of_request(st, f, d, n, fr),
        _ if d.big_other => (
            Cause::OtherProcesses,
            "memory outside PyTorch's cache holds a large share of the device".to_string(),
        ),
        _ => (
            Cause::Unknown,
            "not enough figures to tell fragmentation from capacity".to_string(),
        ),
    }
}

/// The cause when the request `n` and the free bytes in reserved memory
/// `fr` are both known.
fn cause_of_request(st: &Style, f: &OomFigures, d: &Derived, n: u64, fr: u64) -> (Cause, String) {
    let device_free = d.device_free;
    let gap_too_small = f.largest_free_gap.is_none_or(|g| g < n);
    if fr >= n && gap_too_small {
        let gap = f
            .largest_free_gap
            .map(|g| format!(", but the largest free gap is only {}", st.bytes(g)))
            .unwrap_or_default();
        (
            Cause::Fragmentation,
            format!(
                "fragmentation: {} was free inside PyTorch's reserved memory{gap}, so {} did not fit in one piece",
                st.bytes(fr),
                st.bytes(n)
            ),
        )
    } else if fr + device_free >= n && fr > 0 && device_free < n && gap_too_small {
        (
            Cause::Fragmentation,
            format!(
                "fragmentation: {} free inside reserved memory plus {} free on the device would hold {}, but neither piece alone does",
                st.bytes(fr),
                st.bytes(device_free),
                st.bytes(n)
            ),
        )
    } else if f.device_free.is_some_and(|free| free >= n) {
        // The driver had room: neither capacity nor fragmentation
        // explains it (a backend limit, memory freed between the
        // failure and the report, or figures that are wrong).
        (
            Cause::Unknown,
            format!(
                "the device reported {} free, enough for {}: these figures do not explain the failure",
                st.bytes(device_free),
                st.bytes(n)
            ),
        )
    } else if d.big_other && fr + device_free < n {
        (
            Cause::OtherProcesses,
            format!(
                "memory outside PyTorch ({}) leaves too little for this process: even perfectly packed, {} does not fit",
                d.non_pytorch
                    .map(|b| st.bytes(b))
                    .unwrap_or_else(|| "unknown".into()),
                st.bytes(n)
            ),
        )
    } else {
        (
            Cause::Capacity,
            format!(
                "capacity: only {} was free in reserved memory and {} on the device, so {} does not fit even perfectly packed",
                st.bytes(fr),
                st.bytes(device_free),
                st.bytes(n)
            ),
        )
    }
}

/// What to try, in a fixed order; each says why it applies or not.
fn suggestions(st: &Style, f: &OomFigures, d: &Derived, cause: Cause) -> Vec<Suggestion> {
    let frag = cause == Cause::Fragmentation;
    let already_expandable = f.expandable_segments == Some(true);
    // Why a setting that acts on scattered free memory does not apply: the
    // reason is the diagnosis, never what the setting would do.
    let not_scattered = match cause {
        Cause::Capacity => {
            "helps when memory is free but scattered; here the bytes themselves are missing"
        }
        Cause::OtherProcesses => {
            "helps when memory is free but scattered; here memory held outside PyTorch is what is missing"
        }
        Cause::FractionLimit => {
            "helps when memory is free but scattered; here the per-process memory fraction refused the allocation"
        }
        Cause::Fragmentation | Cause::Unknown => {
            "helps when memory is free but scattered; these figures do not show scattered free memory"
        }
    };
    let free_enough = d.free_in_reserved.is_some_and(|x| x >= OTHER_MEMORY_MIN);
    let mut out = vec![
        Suggestion::new(
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            frag && !already_expandable,
            if already_expandable {
                "already enabled in this run"
            } else if frag {
                "segments grow in place instead of new fixed-size cudaMalloc blocks, so free pages of one stream coalesce; this is the usual cure for this kind of fragmentation"
            } else {
                not_scattered
            },
        ),
        Suggestion::new(
            "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<N>",
            frag && !already_expandable && f.max_split_size.is_none(),
            if f.max_split_size.is_some() {
                "already set in this run"
            } else if !frag {
                "only limits splitting of cached blocks; it cannot create memory"
            } else if already_expandable {
                "expandable segments are already enabled in this run, and they already keep large free ranges whole"
            } else {
                "blocks larger than N are never split, so large cached blocks are not eaten away by small tensors; choose N just above your most common large tensor"
            },
        ),
        Suggestion::new(
            "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8 (with a memory fraction)",
            frag && f.fraction_limit.is_some(),
            if f.fraction_limit.is_none() {
                "does nothing unless a per-process memory fraction is set"
            } else if frag {
                "with a memory fraction set, releases unused cached segments before the cap is reached"
            } else {
                "it only releases cached free memory, and the figures do not show cached free memory standing in the way"
            },
        ),
        Suggestion::new(
            "torch.cuda.empty_cache() at a phase boundary",
            frag && free_enough,
            if !frag {
                "it only returns cached free segments to the driver, and the figures do not show cached free memory standing in the way".into()
            } else if !free_enough {
                format!(
                    "less than {} is free in reserved memory: there is too little cached memory to return",
                    st.bytes(OTHER_MEMORY_MIN)
                )
            } else {
                "returns entirely free segments to the driver so a new, large segment can be created; it does not free segments that still hold one live block".into()
            },
        ),
        // Lowering the peak always helps, so it is never skipped; the
        // reason says how much it can do for this cause.
        Suggestion::new(
            "smaller batch or sequence length, activation checkpointing, lower precision",
            true,
            match cause {
                Cause::Capacity => {
                    "the live tensors themselves do not fit: reduce what is alive at the peak"
                }
                Cause::Fragmentation => {
                    "a lower peak needs fewer and smaller gaps, but the free memory stays scattered: the settings above address the cause"
                }
                _ => "reduces the peak whatever the cause",
            },
        ),
        Suggestion::new(
            "check other processes on the GPU (nvidia-smi) and CUDA_VISIBLE_DEVICES",
            d.big_other,
            match d.non_pytorch {
                Some(o) if d.big_other => format!(
                    "{} of the device is held outside PyTorch's cache",
                    st.bytes(o)
                ),
                Some(o) => format!(
                    "only {} of the device is held outside PyTorch's cache",
                    st.bytes(o)
                ),
                None if d.big_other => "the message names other processes holding memory".into(),
                None => "the figures do not show memory held outside PyTorch".into(),
            },
        ),
    ];
    if cause == Cause::FractionLimit {
        out.push(Suggestion::new(
            "raise torch.cuda.set_per_process_memory_fraction",
            true,
            "the cap, not the device, refused the allocation",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn diagnosed(f: &OomFigures) -> Diagnosis {
        diagnose(&Style::default(), f)
    }

    /// Enough free inside reserved memory, no gap large enough.
    fn fragmented() -> OomFigures {
        OomFigures {
            alloc_size: Some(2 * GIB),
            capacity: Some(80 * GIB),
            device_free: Some(100 * MIB),
            reserved: Some(78 * GIB),
            allocated: Some(70 * GIB),
            largest_free_gap: Some(300 * MIB),
            ..Default::default()
        }
    }

    /// The bytes are missing.
    fn full() -> OomFigures {
        OomFigures {
            alloc_size: Some(4 * GIB),
            capacity: Some(24 * GIB),
            device_free: Some(200 * MIB),
            reserved: Some(23 * GIB),
            allocated: Some(22 * GIB + 900 * MIB),
            ..Default::default()
        }
    }

    /// Most of the device is held outside PyTorch.
    fn crowded() -> OomFigures {
        OomFigures {
            reserved: Some(10 * GIB),
            allocated: Some(9 * GIB + 900 * MIB),
            largest_free_gap: None,
            ..fragmented()
        }
    }

    #[test]
    fn fragmentation_when_free_but_no_gap() {
        let d = diagnosed(&fragmented());
        assert_eq!(d.cause, Cause::Fragmentation);
        assert!(d.suggestions[0].applies);
    }

    #[test]
    fn capacity_when_bytes_are_missing() {
        let d = diagnosed(&full());
        assert_eq!(d.cause, Cause::Capacity);
        assert!(!d.suggestions[0].applies);
    }

    #[test]
    fn other_processes() {
        assert_eq!(diagnosed(&crowded()).cause, Cause::OtherProcesses);
    }

    #[test]
    fn a_request_larger_than_the_device_is_capacity() {
        let d = diagnosed(&OomFigures {
            alloc_size: Some(124 * GIB),
            capacity: Some(95 * GIB),
            device_free: Some(51 * GIB),
            reserved: Some(28 * GIB),
            allocated: Some(25 * GIB),
            other_processes: Some(15 * GIB),
            ..Default::default()
        });
        assert_eq!(d.cause, Cause::Capacity);
        assert!(
            d.headline.contains("larger than the device"),
            "{}",
            d.headline
        );
    }

    #[test]
    fn free_device_memory_leaves_the_cause_open() {
        let d = diagnosed(&OomFigures {
            alloc_size: Some(12 * MIB),
            capacity: Some(10 * GIB),
            device_free: Some(9 * GIB),
            reserved: Some(13 * MIB),
            allocated: Some(8 * MIB),
            ..Default::default()
        });
        assert_eq!(d.cause, Cause::Unknown);
        assert!(!d.suggestions[0].applies);
    }

    /// OOM figures of every cause, and of fragmentation under each setting
    /// a suggestion depends on.
    fn every_kind_of_oom() -> Vec<OomFigures> {
        let frag = fragmented();
        vec![
            frag.clone(),
            OomFigures {
                expandable_segments: Some(true),
                ..frag.clone()
            },
            OomFigures {
                max_split_size: Some(128 * MIB),
                ..frag.clone()
            },
            OomFigures {
                fraction_limit: Some(79 * GIB),
                ..frag.clone()
            },
            // Fragmentation with less than OTHER_MEMORY_MIN free in reserved.
            OomFigures {
                alloc_size: Some(64 * MIB),
                reserved: Some(78 * GIB),
                allocated: Some(78 * GIB - 100 * MIB),
                largest_free_gap: Some(20 * MIB),
                ..frag.clone()
            },
            OomFigures {
                fraction_limit: Some(24 * GIB),
                ..full()
            },
            crowded(),
            // The fraction capped the allocator.
            OomFigures {
                alloc_size: Some(2 * GIB),
                capacity: Some(80 * GIB),
                device_free: Some(40 * GIB),
                reserved: Some(39 * GIB),
                allocated: Some(39 * GIB),
                fraction_limit: Some(40 * GIB),
                ..Default::default()
            },
            // Unknown.
            OomFigures {
                alloc_size: Some(2 * GIB),
                ..Default::default()
            },
        ]
    }

    /// The first suggestion of `d` whose setting starts with `what`.
    fn suggestion<'a>(d: &'a Diagnosis, what: &str) -> &'a Suggestion {
        d.suggestions
            .iter()
            .find(|s| s.what.starts_with(what))
            .unwrap()
    }

    #[test]
    fn a_skipped_suggestion_says_why_it_is_skipped() {
        let all: Vec<Diagnosis> = every_kind_of_oom().iter().map(diagnosed).collect();
        let causes: std::collections::BTreeSet<String> =
            all.iter().map(|d| format!("{:?}", d.cause)).collect();
        assert_eq!(causes.len(), 5, "{causes:?}");
        // What a suggestion says where it applies is what it does: never a
        // reason for skipping it elsewhere.
        let mut applying = std::collections::BTreeSet::new();
        for d in &all {
            for s in d.suggestions.iter().filter(|s| s.applies) {
                applying.insert((s.what.clone(), s.why.clone()));
            }
        }
        for d in &all {
            for s in d.suggestions.iter().filter(|s| !s.applies) {
                assert!(
                    !applying.contains(&(s.what.clone(), s.why.clone())),
                    "{:?}: `{}` is skipped with the reason it applies elsewhere: {}",
                    d.cause,
                    s.what,
                    s.why
                );
            }
        }
        // Lowering the peak helps whatever the cause: it is never skipped.
        for d in &all {
            let s = suggestion(d, "smaller batch");
            assert!(s.applies, "{:?}: {}", d.cause, s.why);
        }
        let frag = &all[0];
        assert_eq!(frag.cause, Cause::Fragmentation);
        let batch = suggestion(frag, "smaller batch");
        assert!(batch.why.contains("stays scattered"), "{}", batch.why);
        // Too little free in reserved memory to return: said with the figure.
        let little = &all[4];
        assert_eq!(little.cause, Cause::Fragmentation);
        let empty = suggestion(little, "torch.cuda.empty_cache");
        assert!(!empty.applies);
        assert!(
            empty.why.starts_with("less than 1.00 GiB is free"),
            "{}",
            empty.why
        );
    }

    #[test]
    fn inconsistent_figures_are_reported() {
        let d = diagnosed(&OomFigures {
            capacity: Some(8 * GIB),
            reserved: Some(9 * GIB),
            allocated: Some(10 * GIB),
            ..Default::default()
        });
        assert_eq!(d.inconsistencies.len(), 2);
    }
}
