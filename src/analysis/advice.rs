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

pub fn diagnose(st: &Style, f: &OomFigures) -> Diagnosis {
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
    let mut inconsistencies = Vec::new();
    if let (Some(a), Some(r)) = (f.allocated, f.reserved)
        && a > r
    {
        inconsistencies.push(format!(
            "allocated ({}) exceeds reserved ({}): impossible for one allocator state",
            st.bytes(a),
            st.bytes(r)
        ));
    }
    if let (Some(c), Some(r)) = (f.capacity, f.reserved)
        && r > c
    {
        inconsistencies.push(format!(
            "reserved ({}) exceeds the device's capacity ({})",
            st.bytes(r),
            st.bytes(c)
        ));
    }
    if let (Some(c), Some(free)) = (f.capacity, f.device_free)
        && free > c
    {
        inconsistencies.push(format!(
            "free memory ({}) exceeds the device's capacity ({})",
            st.bytes(free),
            st.bytes(c)
        ));
    }
    if let (Some(c), Some(free), Some(p)) = (f.capacity, f.device_free, f.process_memory)
        && free.saturating_add(p) > c.saturating_add(c / 100)
    {
        inconsistencies.push(format!(
            "free ({}) plus this process's memory ({}) exceed the capacity ({})",
            st.bytes(free),
            st.bytes(p),
            st.bytes(c)
        ));
    }
    if let (Some(a), Some(p)) = (f.allocated, f.process_memory)
        && a > p.saturating_add(p / 100)
    {
        inconsistencies.push(format!(
            "PyTorch's allocated memory ({}) exceeds the process's memory in use ({})",
            st.bytes(a),
            st.bytes(p)
        ));
    }

    let mut details = Vec::new();
    if let Some(n) = need {
        details.push(format!("requested: {}", st.bytes(n)));
    }
    if let (Some(r), Some(a)) = (f.reserved, f.allocated) {
        details.push(format!(
            "reserved by PyTorch: {}, allocated to tensors: {}, free inside reserved: {}",
            st.bytes(r),
            st.bytes(a),
            st.bytes(free_in_reserved.unwrap_or(0))
        ));
    }
    if let Some(g) = f.largest_free_gap {
        details.push(format!(
            "largest free gap inside reserved memory: {}",
            st.bytes(g)
        ));
    }
    if let (Some(c), Some(free)) = (f.capacity, f.device_free) {
        details.push(format!(
            "device: {} total, {} free",
            st.bytes(c),
            st.bytes(free)
        ));
    }
    if let Some(o) = non_pytorch {
        details.push(format!(
            "memory outside PyTorch's cache (other processes, CUDA context, libraries): {}",
            st.bytes(o)
        ));
    }

    let device_free = f.device_free.unwrap_or(0);
    let frac_capped = match (f.fraction_limit, f.reserved, need) {
        (Some(lim), Some(r), Some(n)) => r.saturating_add(n) > lim && device_free >= n,
        _ => false,
    };
    let big_other = match (non_pytorch, f.capacity) {
        (Some(o), Some(c)) => o >= OTHER_MEMORY_MIN && o as f64 >= OTHER_MEMORY_SHARE * c as f64,
        (Some(o), None) => o >= 4 * OTHER_MEMORY_MIN,
        _ => false,
    } || f.other_processes.is_some_and(|o| o >= OTHER_MEMORY_MIN);

    let (cause, headline) = match (need, free_in_reserved) {
        _ if frac_capped => (
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
        (Some(n), Some(fr)) => {
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
            } else if big_other && fr + device_free < n {
                (
                    Cause::OtherProcesses,
                    format!(
                        "memory outside PyTorch ({}) leaves too little for this process: even perfectly packed, {} does not fit",
                        non_pytorch
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
        _ if big_other => (
            Cause::OtherProcesses,
            "memory outside PyTorch's cache holds a large share of the device".to_string(),
        ),
        _ => (
            Cause::Unknown,
            "not enough figures to tell fragmentation from capacity".to_string(),
        ),
    };

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
    let free_enough = free_in_reserved.is_some_and(|x| x >= OTHER_MEMORY_MIN);
    let mut suggestions = vec![
        Suggestion {
            what: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True".into(),
            applies: frag && !already_expandable,
            why: if already_expandable {
                "already enabled in this run".into()
            } else if frag {
                "segments grow in place instead of new fixed-size cudaMalloc blocks, so free pages of one stream coalesce; this is the usual cure for this kind of fragmentation".into()
            } else {
                not_scattered.into()
            },
        },
        Suggestion {
            what: "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<N>".into(),
            applies: frag && !already_expandable && f.max_split_size.is_none(),
            why: if f.max_split_size.is_some() {
                "already set in this run".into()
            } else if !frag {
                "only limits splitting of cached blocks; it cannot create memory".into()
            } else if already_expandable {
                "expandable segments are already enabled in this run, and they already keep large free ranges whole".into()
            } else {
                "blocks larger than N are never split, so large cached blocks are not eaten away by small tensors; choose N just above your most common large tensor".into()
            },
        },
        Suggestion {
            what: "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8 (with a memory fraction)".into(),
            applies: frag && f.fraction_limit.is_some(),
            why: if f.fraction_limit.is_none() {
                "does nothing unless a per-process memory fraction is set".into()
            } else if frag {
                "with a memory fraction set, releases unused cached segments before the cap is reached".into()
            } else {
                "it only releases cached free memory, and the figures do not show cached free memory standing in the way".into()
            },
        },
        Suggestion {
            what: "torch.cuda.empty_cache() at a phase boundary".into(),
            applies: frag && free_enough,
            why: if !frag {
                "it only returns cached free segments to the driver, and the figures do not show cached free memory standing in the way".into()
            } else if !free_enough {
                format!(
                    "less than {} is free in reserved memory: there is too little cached memory to return",
                    st.bytes(OTHER_MEMORY_MIN)
                )
            } else {
                "returns entirely free segments to the driver so a new, large segment can be created; it does not free segments that still hold one live block".into()
            },
        },
        Suggestion {
            // Lowering the peak always helps, so it is never skipped; the
            // reason says how much it can do for this cause.
            what: "smaller batch or sequence length, activation checkpointing, lower precision".into(),
            applies: true,
            why: match cause {
                Cause::Capacity => "the live tensors themselves do not fit: reduce what is alive at the peak".into(),
                Cause::Fragmentation => "a lower peak needs fewer and smaller gaps, but the free memory stays scattered: the settings above address the cause".into(),
                _ => "reduces the peak whatever the cause".into(),
            },
        },
        Suggestion {
            what: "check other processes on the GPU (nvidia-smi) and CUDA_VISIBLE_DEVICES".into(),
            applies: big_other,
            why: match non_pytorch {
                Some(o) if big_other => format!("{} of the device is held outside PyTorch's cache", st.bytes(o)),
                Some(o) => format!("only {} of the device is held outside PyTorch's cache", st.bytes(o)),
                None if big_other => "the message names other processes holding memory".into(),
                None => "the figures do not show memory held outside PyTorch".into(),
            },
        },
    ];
    if cause == Cause::FractionLimit {
        suggestions.push(Suggestion {
            what: "raise torch.cuda.set_per_process_memory_fraction".into(),
            applies: true,
            why: "the cap, not the device, refused the allocation".into(),
        });
    }
    Diagnosis {
        cause,
        headline,
        details,
        suggestions,
        inconsistencies,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    #[test]
    fn fragmentation_when_free_but_no_gap() {
        let d = diagnose(
            &Style::default(),
            &OomFigures {
                alloc_size: Some(2 * GIB),
                capacity: Some(80 * GIB),
                device_free: Some(100 * MIB),
                reserved: Some(78 * GIB),
                allocated: Some(70 * GIB),
                largest_free_gap: Some(300 * MIB),
                ..Default::default()
            },
        );
        assert_eq!(d.cause, Cause::Fragmentation);
        assert!(d.suggestions[0].applies);
    }

    #[test]
    fn capacity_when_bytes_are_missing() {
        let d = diagnose(
            &Style::default(),
            &OomFigures {
                alloc_size: Some(4 * GIB),
                capacity: Some(24 * GIB),
                device_free: Some(200 * MIB),
                reserved: Some(23 * GIB),
                allocated: Some(22 * GIB + 900 * MIB),
                ..Default::default()
            },
        );
        assert_eq!(d.cause, Cause::Capacity);
        assert!(!d.suggestions[0].applies);
    }

    #[test]
    fn other_processes() {
        let d = diagnose(
            &Style::default(),
            &OomFigures {
                alloc_size: Some(2 * GIB),
                capacity: Some(80 * GIB),
                device_free: Some(100 * MIB),
                reserved: Some(10 * GIB),
                allocated: Some(9 * GIB + 900 * MIB),
                ..Default::default()
            },
        );
        assert_eq!(d.cause, Cause::OtherProcesses);
    }

    #[test]
    fn a_request_larger_than_the_device_is_capacity() {
        let d = diagnose(
            &Style::default(),
            &OomFigures {
                alloc_size: Some(124 * GIB),
                capacity: Some(95 * GIB),
                device_free: Some(51 * GIB),
                reserved: Some(28 * GIB),
                allocated: Some(25 * GIB),
                other_processes: Some(15 * GIB),
                ..Default::default()
            },
        );
        assert_eq!(d.cause, Cause::Capacity);
        assert!(
            d.headline.contains("larger than the device"),
            "{}",
            d.headline
        );
    }

    #[test]
    fn free_device_memory_leaves_the_cause_open() {
        let d = diagnose(
            &Style::default(),
            &OomFigures {
                alloc_size: Some(12 * MIB),
                capacity: Some(10 * GIB),
                device_free: Some(9 * GIB),
                reserved: Some(13 * MIB),
                allocated: Some(8 * MIB),
                ..Default::default()
            },
        );
        assert_eq!(d.cause, Cause::Unknown);
        assert!(!d.suggestions[0].applies);
    }

    /// OOM figures of every cause, and of fragmentation under each setting
    /// a suggestion depends on.
    fn every_kind_of_oom() -> Vec<OomFigures> {
        let frag = OomFigures {
            alloc_size: Some(2 * GIB),
            capacity: Some(80 * GIB),
            device_free: Some(100 * MIB),
            reserved: Some(78 * GIB),
            allocated: Some(70 * GIB),
            largest_free_gap: Some(300 * MIB),
            ..Default::default()
        };
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
            // Capacity.
            OomFigures {
                alloc_size: Some(4 * GIB),
                capacity: Some(24 * GIB),
                device_free: Some(200 * MIB),
                reserved: Some(23 * GIB),
                allocated: Some(22 * GIB + 900 * MIB),
                fraction_limit: Some(24 * GIB),
                ..Default::default()
            },
            // Other processes.
            OomFigures {
                alloc_size: Some(2 * GIB),
                capacity: Some(80 * GIB),
                device_free: Some(100 * MIB),
                reserved: Some(10 * GIB),
                allocated: Some(9 * GIB + 900 * MIB),
                ..Default::default()
            },
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

    #[test]
    fn a_skipped_suggestion_says_why_it_is_skipped() {
        let all: Vec<Diagnosis> = every_kind_of_oom()
            .iter()
            .map(|f| diagnose(&Style::default(), f))
            .collect();
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
            let s = d
                .suggestions
                .iter()
                .find(|s| s.what.starts_with("smaller batch"))
                .unwrap();
            assert!(s.applies, "{:?}: {}", d.cause, s.why);
        }
        let frag = &all[0];
        assert_eq!(frag.cause, Cause::Fragmentation);
        let batch = frag
            .suggestions
            .iter()
            .find(|s| s.what.starts_with("smaller batch"))
            .unwrap();
        assert!(batch.why.contains("stays scattered"), "{}", batch.why);
        // Too little free in reserved memory to return: said with the figure.
        let little = &all[4];
        assert_eq!(little.cause, Cause::Fragmentation);
        let empty = little
            .suggestions
            .iter()
            .find(|s| s.what.starts_with("torch.cuda.empty_cache"))
            .unwrap();
        assert!(!empty.applies);
        assert!(
            empty.why.starts_with("less than 1.00 GiB is free"),
            "{}",
            empty.why
        );
    }

    #[test]
    fn inconsistent_figures_are_reported() {
        let d = diagnose(
            &Style::default(),
            &OomFigures {
                capacity: Some(8 * GIB),
                reserved: Some(9 * GIB),
                allocated: Some(10 * GIB),
                ..Default::default()
            },
        );
        assert_eq!(d.inconsistencies.len(), 2);
    }
}
