//! The report's verdict in words, one sentence a line, for every format
//! that shows it (HTML, Markdown, the summary image).

use crate::analysis::report::{Report, VerdictLine};
use crate::core::style::Style;

/// Each line of `r`'s verdict as a sentence.
pub fn lines(st: &Style, r: &Report) -> Vec<String> {
    r.verdict.iter().map(|v| line(st, v)).collect()
}

/// One verdict line as a sentence: the typed findings worded as
/// `fragscope culprits` and `fragscope simulate` word them.
pub fn line(st: &Style, v: &VerdictLine) -> String {
    match v {
        VerdictLine::Text(t) | VerdictLine::Oom { text: t, .. } => t.clone(),
        VerdictLine::Culprits {
            device,
            at,
            summary,
        } => format!(
            "Culprits on device {device} at {at}: {}",
            super::culprits::summary(st, summary)
        ),
        VerdictLine::WhatIf { device, answer } => format!(
            "What-if model, device {device}: {}",
            super::simulate::expandable_answer(st, answer)
        ),
    }
}
