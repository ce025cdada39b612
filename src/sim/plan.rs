//! Which configurations of a sweep make the same run, so that each run is
//! made once and its result handed to the configurations that share it.
//!
//! Two settings reach the model only through comparisons it can watch:
//! - `roundup_power2_divisions` only through the rounding of each request
//!   (`round_size`): configurations that differ only there, and round every
//!   size the trace requests alike, make the same run;
//! - `max_split_size` (with `max_non_split_rounding`, which acts only on
//!   requests at or over it) only through comparisons of a request's or a
//!   cached block's size with it, and the release of oversize blocks after
//!   a failed cudaMalloc. A run records the largest size it compared
//!   ([`super::Simulator::split_probe`]); a configuration that differs from
//!   a run's only in those two settings, with both limits above that size,
//!   makes the same decision at every step, so the same run.
//!
//! Nothing here changes a figure: a shared run is the run itself under the
//! other configuration's label.

use super::config::SimConfig;
use super::run::{DeviceInput, SimRun};
use crate::model::Action;
use crate::model::policy::round_size;

/// How one configuration of a sweep gets its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Run it.
    Run,
    /// The run of that configuration (an earlier one, itself run): they
    /// round every request alike and differ in nothing else.
    SameAs(usize),
    /// That configuration's run, if its split probe allows (see
    /// [`shares_run`]); else run it.
    AfterProbe(usize),
}

/// `c` with the settings that act only through the size comparisons of
/// `max_split_size` set to the defaults.
fn without_split(c: &SimConfig) -> SimConfig {
    let d = SimConfig::default();
    SimConfig {
        max_split_size: d.max_split_size,
        max_non_split_rounding: d.max_non_split_rounding,
        ..c.clone()
    }
}

/// `a` and `b` differ at most in their rounding, and round every size
/// `input`'s trace asks for alike.
fn same_rounding(input: &DeviceInput, a: &SimConfig, b: &SimConfig) -> bool {
    let same_otherwise = SimConfig {
        roundup_power2_divisions: b.roundup_power2_divisions,
        ..a.clone()
    } == *b;
    same_otherwise
        && (a.roundup_power2_divisions == b.roundup_power2_divisions
            || input
                .trace()
                .iter()
                .filter(|e| matches!(e.action, Action::Alloc | Action::Oom))
                .all(|e| {
                    round_size(e.size, &a.roundup_power2_divisions)
                        == round_size(e.size, &b.roundup_power2_divisions)
                }))
}

/// How each of `configs` gets its run on `input`. A configuration with a
/// split limit waits for the one with the highest limit (none first) among
/// those equal to it but for that limit; the one waited for is always run.
pub fn plan(input: &DeviceInput, configs: &[SimConfig]) -> Vec<Plan> {
    let mut plan = vec![Plan::Run; configs.len()];
    for i in 0..configs.len() {
        if let Some(j) =
            (0..i).find(|&j| plan[j] == Plan::Run && same_rounding(input, &configs[j], &configs[i]))
        {
            plan[i] = Plan::SameAs(j);
        }
    }
    for i in 0..configs.len() {
        if plan[i] != Plan::Run {
            continue;
        }
        let base = without_split(&configs[i]);
        let limit = configs[i].max_split();
        let best = (0..configs.len())
            .filter(|&j| {
                j != i
                    && !matches!(plan[j], Plan::SameAs(_))
                    && configs[j].max_split() > limit
                    && without_split(&configs[j]) == base
            })
            .max_by_key(|&j| (configs[j].max_split(), std::cmp::Reverse(j)));
        if let Some(j) = best {
            plan[i] = Plan::AfterProbe(j);
        }
    }
    // The one waited for has the highest limit of its kind, so it waits for
    // none; the limit ordering makes this hold, and the runs rely on it.
    for p in &plan {
        if let Plan::AfterProbe(j) = *p {
            debug_assert_eq!(plan[j], Plan::Run);
        }
    }
    plan
}

/// `run`, made under `run.config`, is also the run under `other`: they
/// differ at most in the split settings, and both limits lie above every
/// size the run compared with its own.
pub fn shares_run(run: &SimRun, other: &SimConfig) -> bool {
    without_split(&run.config) == without_split(other)
        && run.split_probe < run.config.max_split().min(other.max_split())
}

/// `run` under `config`'s label.
pub fn relabel(run: &SimRun, config: &SimConfig) -> SimRun {
    SimRun {
        config: config.clone(),
        ..run.clone()
    }
}
