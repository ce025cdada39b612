//! Findings computed from a timeline: figures per device ([`stats`],
//! [`metrics`]), call sites ([`frames`], [`culprits`]), OOMs ([`oom`],
//! [`advice`], [`explain`]), ranks, diff and check, events and the report.

pub mod advice;
pub mod check;
pub mod culprits;
pub mod diff;
pub mod events;
pub mod explain;
pub mod findings;
pub mod frames;
pub mod metrics;
pub mod oom;
pub mod ranks;
pub mod report;
pub mod stats;
pub mod verdict;
pub mod what_if;
