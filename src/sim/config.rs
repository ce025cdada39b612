//! Allocator settings for the simulator: parsing the
//! `PYTORCH_CUDA_ALLOC_CONF` syntax (§4.7 of the format spec) and reading a
//! snapshot's `allocator_settings`.
//!
//! Owns [`SimConfig`] and its text form; knows nothing of blocks or traces.
//! Keys that only concern the pinned-host allocator, locking or handles are
//! accepted and ignored, as they do not change the device policy.

use crate::model::AllocatorSettings;
use crate::model::policy::{LARGE_BUFFER, ROUNDUP_BUCKETS};
use serde::Serialize;

/// The policy knobs of the native caching allocator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimConfig {
    /// `None` = unlimited (the default).
    pub max_split_size: Option<u64>,
    /// How much bigger than an oversize request a cached oversize block may be.
    pub max_non_split_rounding: u64,
    /// Segment size for 1–10 MiB requests and expandable large-pool page.
    pub large_segment_size: u64,
    /// Divisions per bucket; 0 or 1 = plain 512-byte rounding.
    pub roundup_power2_divisions: [u64; ROUNDUP_BUCKETS],
    /// 0 = off. Only acts together with a memory fraction.
    pub garbage_collection_threshold: f64,
    /// `per_process_memory_fraction` / `set_per_process_memory_fraction`.
    pub memory_fraction: Option<f64>,
    pub expandable_segments: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            max_split_size: None,
            max_non_split_rounding: LARGE_BUFFER,
            large_segment_size: LARGE_BUFFER,
            roundup_power2_divisions: [0; ROUNDUP_BUCKETS],
            garbage_collection_threshold: 0.0,
            memory_fraction: None,
            expandable_segments: false,
        }
    }
}

/// A configuration string that cannot be used; says which entry and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("allocator config {spec:?}: {entry}: {msg}")]
pub struct ConfigError {
    pub spec: String,
    pub entry: String,
    pub msg: String,
}

const MIB: u64 = 1 << 20;

/// Keys PyTorch accepts that leave the device caching policy unchanged.
const IGNORED_KEYS: &[&str] = &[
    "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register",
    "pinned_num_register_threads",
    "pinned_use_background_threads",
    "pinned_max_round_threshold_mb",
    "pinned_max_cached_size_mb",
    "pinned_reserve_segment_size_mb",
    "pinned_free_catch_all",
    "graph_capture_record_stream_reuse",
    "throw_on_cudamalloc_oom",
    "expandable_segments_reserve",
    "expandable_segments_reserve_by_class",
    "expandable_segments_handle_type",
];

/// Splits on commas outside brackets.
fn top_level_entries(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '[' => {
                depth += 1;
                cur.push(c);
            }
            ']' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth <= 0 => out.push(std::mem::take(&mut cur)),
            c if c.is_whitespace() => {}
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().filter(|e| !e.is_empty()).collect()
}

impl SimConfig {
    /// Parses `PYTORCH_CUDA_ALLOC_CONF` syntax, starting from PyTorch's
    /// defaults: `expandable_segments:True,max_split_size_mb:256`,
    /// `roundup_power2_divisions:[256:1,512:2,>:8]`. The empty string is the
    /// default configuration.
    pub fn parse(spec: &str) -> Result<SimConfig, ConfigError> {
        let mut c = SimConfig::default();
        c.apply(spec)?;
        Ok(c)
    }

    /// Applies the entries of a configuration string on top of `self`.
    pub fn apply(&mut self, spec: &str) -> Result<(), ConfigError> {
        for entry in top_level_entries(spec) {
            let err = |msg: String| ConfigError {
                spec: spec.to_string(),
                entry: entry.clone(),
                msg,
            };
            let Some((key, val)) = entry.split_once(':') else {
                return Err(err("expected key:value".into()));
            };
            let int = |v: &str| -> Result<u64, ConfigError> {
                v.parse::<u64>()
                    .map_err(|_| err(format!("{v:?} is not a whole number")))
            };
            match key {
                "backend" => match val {
                    "native" => {}
                    "cudaMallocAsync" => {
                        return Err(err(
                            "the cudaMallocAsync backend does not use the caching policy this model simulates".into(),
                        ));
                    }
                    _ => return Err(err("expected native or cudaMallocAsync".into())),
                },
                "max_split_size_mb" => {
                    let mb = int(val)?;
                    let floor = self.large_segment_size / MIB;
                    if mb <= floor {
                        return Err(err(format!("must be more than {floor} (MiB)")));
                    }
                    self.max_split_size = Some(mb.saturating_mul(MIB));
                }
                "max_non_split_rounding_mb" => {
                    let mb = int(val)?;
                    let floor = self.large_segment_size / MIB;
                    if mb < floor {
                        return Err(err(format!("must be at least {floor} (MiB)")));
                    }
                    self.max_non_split_rounding = mb.saturating_mul(MIB);
                }
                "large_segment_size_mb" => {
                    let mb = int(val)?;
                    if mb <= 10 {
                        return Err(err("must be more than 10 (MiB)".into()));
                    }
                    let old = self.large_segment_size;
                    self.large_segment_size = mb.saturating_mul(MIB);
                    if self.max_non_split_rounding == old {
                        self.max_non_split_rounding = self.large_segment_size;
                    }
                }
                "garbage_collection_threshold" => {
                    let t: f64 = val
                        .parse()
                        .map_err(|_| err(format!("{val:?} is not a number")))?;
                    if !(t > 0.0 && t < 1.0) {
                        return Err(err("must be between 0 and 1 (exclusive)".into()));
                    }
                    self.garbage_collection_threshold = t;
                }
                "per_process_memory_fraction" => {
                    let f: f64 = val
                        .parse()
                        .map_err(|_| err(format!("{val:?} is not a number")))?;
                    if !(f > 0.0 && f <= 1.0) {
                        return Err(err("must be in (0, 1]".into()));
                    }
                    self.memory_fraction = if f < 1.0 { Some(f) } else { None };
                }
                "expandable_segments" => {
                    self.expandable_segments = match val {
                        "True" | "true" | "1" => true,
                        "False" | "false" | "0" => false,
                        _ => return Err(err("expected True or False".into())),
                    }
                }
                "roundup_power2_divisions" => {
                    self.roundup_power2_divisions = parse_divisions(val).map_err(err)?;
                }
                k if IGNORED_KEYS.contains(&k) => {}
                _ => return Err(err(format!("unknown key {key:?}"))),
            }
        }
        Ok(())
    }

    /// The settings a snapshot recorded (`allocator_settings`, 2.3+): the
    /// configuration string for keys without a field of their own, then the
    /// explicit fields. `None` when the file recorded none.
    pub fn from_settings(s: &AllocatorSettings) -> Result<SimConfig, ConfigError> {
        let mut c = SimConfig::default();
        if let Some(conf) = s.conf_string() {
            c.apply(conf)?;
        }
        c.max_split_size = s.max_split_size();
        if let Some(t) = s.garbage_collection_threshold() {
            c.garbage_collection_threshold = t;
        }
        if let Some(e) = s.expandable_segments() {
            c.expandable_segments = e;
        }
        if let Some(d) = s.roundup_power2_divisions() {
            c.roundup_power2_divisions = d;
        }
        Ok(c)
    }

    /// `max_split_size` with "unlimited" as `u64::MAX`.
    pub fn max_split(&self) -> u64 {
        self.max_split_size.unwrap_or(u64::MAX)
    }

    /// The shortest configuration string that yields this configuration
    /// (`defaults` when nothing differs from PyTorch's defaults).
    pub fn label(&self) -> String {
        let d = SimConfig::default();
        let mut parts = Vec::new();
        if self.expandable_segments {
            parts.push("expandable_segments:True".to_string());
        }
        if let Some(m) = self.max_split_size {
            parts.push(format!("max_split_size_mb:{}", m / MIB));
        }
        if self.large_segment_size != d.large_segment_size {
            parts.push(format!(
                "large_segment_size_mb:{}",
                self.large_segment_size / MIB
            ));
        }
        if self.max_non_split_rounding != self.large_segment_size {
            parts.push(format!(
                "max_non_split_rounding_mb:{}",
                self.max_non_split_rounding / MIB
            ));
        }
        let r = &self.roundup_power2_divisions;
        if r.iter().any(|&x| x > 1) {
            if r.iter().all(|&x| x == r[0]) {
                parts.push(format!("roundup_power2_divisions:{}", r[0]));
            } else {
                let list: Vec<String> = r
                    .iter()
                    .enumerate()
                    .map(|(i, v)| format!("{}:{v}", 1u64 << i))
                    .collect();
                parts.push(format!("roundup_power2_divisions:[{}]", list.join(",")));
            }
        }
        if self.garbage_collection_threshold > 0.0 {
            parts.push(format!(
                "garbage_collection_threshold:{}",
                self.garbage_collection_threshold
            ));
        }
        if let Some(f) = self.memory_fraction {
            parts.push(format!("per_process_memory_fraction:{f}"));
        }
        if parts.is_empty() {
            "defaults".to_string()
        } else {
            parts.join(",")
        }
    }
}

/// `4` (every bucket) or `[1:4,64:8,>:16]` (bucket by lower bound in MiB; the
/// first entry also fills the buckets below it, `>` every bucket after the
/// last one named).
fn parse_divisions(v: &str) -> Result<[u64; ROUNDUP_BUCKETS], String> {
    let check = |d: u64| -> Result<u64, String> {
        if d == 0 || d.is_power_of_two() {
            Ok(d)
        } else {
            Err(format!("divisions must be a power of two (got {d})"))
        }
    };
    let num = |s: &str| -> Result<u64, String> {
        s.parse::<u64>()
            .map_err(|_| format!("{s:?} is not a whole number"))
    };
    if let Some(inner) = v.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| "missing closing ]".to_string())?;
        let mut out = [0u64; ROUNDUP_BUCKETS];
        let mut first = true;
        let mut last: Option<usize> = None;
        for item in inner.split(',').filter(|s| !s.is_empty()) {
            let (k, d) = item
                .split_once(':')
                .ok_or_else(|| format!("{item:?}: expected size_mb:divisions"))?;
            let d = check(num(d)?)?;
            if k == ">" {
                let from = last.map_or(0, |l| l + 1);
                for x in out.iter_mut().skip(from) {
                    *x = d;
                }
                continue;
            }
            let mb = num(k)?;
            if !mb.is_power_of_two() {
                return Err(format!("interval {mb} MiB is not a power of two"));
            }
            let idx = (mb.trailing_zeros() as usize).min(ROUNDUP_BUCKETS - 1);
            if first {
                for x in out.iter_mut().take(idx) {
                    *x = d;
                }
                first = false;
            }
            out[idx] = d;
            last = Some(idx);
        }
        Ok(out)
    } else {
        let d = check(num(v)?)?;
        Ok([d; ROUNDUP_BUCKETS])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Setting;

    #[test]
    fn parses_the_usual_strings() {
        let c = SimConfig::parse("expandable_segments:True,max_split_size_mb:256").unwrap();
        assert!(c.expandable_segments);
        assert_eq!(c.max_split_size, Some(256 << 20));
        assert_eq!(c.label(), "expandable_segments:True,max_split_size_mb:256");
        assert_eq!(SimConfig::parse("").unwrap(), SimConfig::default());
        assert_eq!(SimConfig::parse(" ").unwrap().label(), "defaults");
        let g = SimConfig::parse(
            "garbage_collection_threshold:0.6, per_process_memory_fraction:0.5,pinned_num_register_threads:8",
        )
        .unwrap();
        assert_eq!(g.garbage_collection_threshold, 0.6);
        assert_eq!(g.memory_fraction, Some(0.5));
    }

    #[test]
    fn divisions_lists() {
        let c = SimConfig::parse("roundup_power2_divisions:4").unwrap();
        assert_eq!(c.roundup_power2_divisions, [4; 16]);
        assert_eq!(c.label(), "roundup_power2_divisions:4");
        let c = SimConfig::parse("roundup_power2_divisions:[256:1,512:2,>:8]").unwrap();
        let r = c.roundup_power2_divisions;
        // 256 MiB is bucket 8; the first entry fills buckets 0..8.
        assert_eq!(&r[..9], &[1; 9]);
        assert_eq!(r[9], 2);
        assert_eq!(&r[10..], &[8; 6]);
        let again = SimConfig::parse(&c.label()).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn refuses_bad_entries() {
        for bad in [
            "max_split_size_mb:20",
            "expandable_segments:yes",
            "roundup_power2_divisions:3",
            "roundup_power2_divisions:[3:4]",
            "garbage_collection_threshold:1.5",
            "backend:cudaMallocAsync",
            "no_such_key:1",
            "max_split_size_mb",
        ] {
            let e = SimConfig::parse(bad).unwrap_err();
            assert!(!e.msg.is_empty(), "{bad}");
        }
    }

    #[test]
    fn large_segment_size_moves_the_rounding_default() {
        let c = SimConfig::parse("large_segment_size_mb:32").unwrap();
        assert_eq!(c.large_segment_size, 32 << 20);
        assert_eq!(c.max_non_split_rounding, 32 << 20);
        assert!(SimConfig::parse("large_segment_size_mb:32,max_split_size_mb:30").is_err());
    }

    #[test]
    fn reads_recorded_settings() {
        let s = AllocatorSettings {
            entries: vec![
                (
                    "PYTORCH_CUDA_ALLOC_CONF".into(),
                    Setting::Str("expandable_segments:True".into()),
                ),
                ("max_split_size".into(), Setting::Int(-1)),
                ("garbage_collection_threshold".into(), Setting::Float(0.0)),
                ("expandable_segments".into(), Setting::Bool(true)),
                (
                    "roundup_power2_divisions".into(),
                    Setting::Map(
                        (0..16)
                            .map(|i| (format!("{}", 1u64 << i), Setting::Int(0)))
                            .collect(),
                    ),
                ),
            ],
        };
        let c = SimConfig::from_settings(&s).unwrap();
        assert!(c.expandable_segments);
        assert_eq!(c.max_split_size, None);
        assert_eq!(c.label(), "expandable_segments:True");
    }
}
