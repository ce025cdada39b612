//! The outputs of `fragscope check`, all from one [`CheckReport`]: a text
//! table, JSON (schema `fragscope.check/1`), GitHub workflow annotations plus
//! a Markdown job summary, and JUnit XML. Each returns a `String`; the
//! command decides where it goes.

use super::table::{Tone, new_table, paint, toned};
use crate::analysis::check::{CheckReport, Finding, RuleKind, Verdict};
use crate::core::style::Style;
use comfy_table::Cell;

fn measured(st: &Style, f: &Finding) -> String {
    match (f.measured, f.verdict) {
        (Some(v), _) => v.fmt(st),
        (None, Verdict::Skipped) => "n/a".into(),
        // min_largest_gap with no moment that had the minimum free.
        (None, _) if RuleKind::parse(&f.rule).is_some() => "-".into(),
        (None, _) => "from 0".into(),
    }
}

fn threshold(st: &Style, f: &Finding) -> String {
    let min = RuleKind::parse(&f.rule).is_some_and(|r| r.is_min());
    format!("{} {}", if min { "≥" } else { "≤" }, f.threshold.fmt(st))
}

fn device(f: &Finding) -> String {
    f.device
        .map(|d| d.to_string())
        .unwrap_or_else(|| "-".into())
}

fn headline(r: &CheckReport) -> String {
    let total = r.findings.len();
    let skipped = if r.skipped > 0 {
        format!(", {} skipped", r.skipped)
    } else {
        String::new()
    };
    if total == 0 {
        "no rule to evaluate".into()
    } else if r.failed > 0 {
        format!("{} of {total} rules failed{skipped}", r.failed)
    } else {
        format!("all {} evaluated rules hold{skipped}", total - r.skipped)
    }
}

fn verdict_tone(v: Verdict) -> Tone {
    match v {
        Verdict::Pass => Tone::Good,
        Verdict::Fail => Tone::Bad,
        Verdict::Skipped => Tone::Muted,
    }
}

/// The default output: a table, then the failed and skipped rules with hints.
pub fn text(st: &Style, r: &CheckReport) -> String {
    let mut out = format!("fragscope check {}", r.file);
    if let Some(b) = &r.baseline {
        out.push_str(&format!(" (baseline {b})"));
    }
    out.push('\n');
    let mut t = new_table(st, &["rule", "device", "measured", "threshold", "verdict"]);
    for f in &r.findings {
        t.add_row(vec![
            Cell::new(&f.rule),
            Cell::new(device(f)),
            Cell::new(measured(st, f)),
            Cell::new(threshold(st, f)),
            toned(f.verdict.as_str(), verdict_tone(f.verdict)),
        ]);
    }
    for i in 1..4 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    if !r.findings.is_empty() {
        out.push_str(&t.to_string());
        out.push('\n');
    }
    for f in r.findings.iter().filter(|f| f.verdict != Verdict::Pass) {
        out.push_str(&format!(
            "{} {}: {}\n",
            paint(st, f.verdict.as_str(), verdict_tone(f.verdict)),
            f.rule,
            f.message
        ));
        if !f.hint.is_empty() {
            out.push_str(&format!("  hint: {}\n", f.hint));
        }
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    if let Some(first) = r.metrics.values().next() {
        // One device for every figure: say it once.
        let one = r.metrics.values().all(|v| v.device == first.device);
        match (one, first.device) {
            (true, Some(d)) => out.push_str(&format!("measured (device {d}):\n")),
            _ => out.push_str("measured:\n"),
        }
        // Keys padded to the longest (at least 15 wide).
        let w = r
            .metrics
            .keys()
            .map(|m| m.key().len() + 1)
            .fold(15, usize::max);
        for (m, v) in &r.metrics {
            let dev = match v.device {
                Some(d) if !one => format!(" (device {d})"),
                _ => String::new(),
            };
            out.push_str(&format!("  {:<w$} {}{dev}\n", m.key(), v.value.fmt(st)));
        }
    }
    out.push_str(&headline(r));
    out.push('\n');
    out
}

pub fn json(r: &CheckReport) -> String {
    serde_json::to_string_pretty(r).expect("a check report always serialises") + "\n"
}

/// GitHub's escaping of a workflow command's message.
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// …and of a property value (`file=`, `title=`).
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One workflow command per failed (`::error`) or skipped (`::warning`)
/// rule, and a `::notice` per note.
pub fn github_annotations(r: &CheckReport) -> String {
    let mut out = String::new();
    for f in &r.findings {
        let level = match f.verdict {
            Verdict::Pass => continue,
            Verdict::Fail => "error",
            Verdict::Skipped => "warning",
        };
        let msg = if f.hint.is_empty() {
            f.message.clone()
        } else {
            format!("{}. {}", f.message, f.hint)
        };
        out.push_str(&format!(
            "::{level} file={},title={}::{}\n",
            gh_property(&r.file),
            gh_property(&format!("fragscope check {}", f.rule)),
            gh_data(&msg)
        ));
    }
    for n in &r.notes {
        out.push_str(&format!(
            "::notice file={},title={}::{}\n",
            gh_property(&r.file),
            gh_property("fragscope check"),
            gh_data(n)
        ));
    }
    out
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Markdown for `$GITHUB_STEP_SUMMARY`.
pub fn github_summary(st: &Style, r: &CheckReport) -> String {
    let mut out = format!("### fragscope check `{}`: {}\n\n", r.file, headline(r));
    if let Some(b) = &r.baseline {
        out.push_str(&format!("Baseline: `{b}`\n\n"));
    }
    out.push_str("| rule | device | measured | threshold | verdict | details |\n");
    out.push_str("| --- | ---: | ---: | ---: | --- | --- |\n");
    for f in &r.findings {
        let verdict = match f.verdict {
            Verdict::Fail => "**FAIL**",
            v => v.as_str(),
        };
        let details = if f.hint.is_empty() {
            f.message.clone()
        } else {
            format!("{}<br>{}", f.message, f.hint)
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {verdict} | {} |\n",
            f.rule,
            device(f),
            md_cell(&measured(st, f)),
            md_cell(&threshold(st, f)),
            md_cell(&details)
        ));
    }
    if !r.notes.is_empty() {
        out.push('\n');
        for n in &r.notes {
            out.push_str(&format!("- {}\n", md_cell(n)));
        }
    }
    out.push('\n');
    out
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 forbids even when escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: one test case per rule; failed rules carry `<failure>`,
/// skipped ones `<skipped>`. No timestamps, so the output is reproducible.
pub fn junit(r: &CheckReport) -> String {
    let n = r.findings.len();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"fragscope check\" tests=\"{n}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n",
        r.failed, r.skipped
    ));
    out.push_str(&format!(
        "  <testsuite name=\"fragscope check {}\" tests=\"{n}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n",
        xml(&r.file),
        r.failed,
        r.skipped
    ));
    out.push_str("    <properties>\n");
    out.push_str(&format!(
        "      <property name=\"file\" value=\"{}\"/>\n",
        xml(&r.file)
    ));
    if let Some(b) = &r.baseline {
        out.push_str(&format!(
            "      <property name=\"baseline\" value=\"{}\"/>\n",
            xml(b)
        ));
    }
    out.push_str("    </properties>\n");
    for f in &r.findings {
        let open = format!(
            "    <testcase classname=\"fragscope.check\" name=\"{}\"",
            xml(&f.rule)
        );
        match f.verdict {
            Verdict::Pass => {
                out.push_str(&format!("{open}>\n"));
                out.push_str(&format!(
                    "      <system-out>{}</system-out>\n",
                    xml(&f.message)
                ));
                out.push_str("    </testcase>\n");
            }
            Verdict::Fail => {
                out.push_str(&format!("{open}>\n"));
                out.push_str(&format!(
                    "      <failure message=\"{}\" type=\"{}\">{}</failure>\n",
                    xml(&f.message),
                    xml(&f.rule),
                    xml(&f.hint)
                ));
                out.push_str("    </testcase>\n");
            }
            Verdict::Skipped => {
                out.push_str(&format!("{open}>\n"));
                out.push_str(&format!(
                    "      <skipped message=\"{}\"/>\n",
                    xml(&format!("{}. {}", f.message, f.hint))
                ));
                out.push_str("    </testcase>\n");
            }
        }
    }
    if !r.notes.is_empty() {
        out.push_str(&format!(
            "    <system-out>{}</system-out>\n",
            xml(&r.notes.join("\n"))
        ));
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(gh_data("50% of\nit"), "50%25 of%0Ait");
        assert_eq!(gh_property("a:b,c"), "a%3Ab%2Cc");
        assert_eq!(xml("<a & \"b\"\u{1}>"), "&lt;a &amp; &quot;b&quot;&gt;");
        assert_eq!(md_cell("a|b"), "a\\|b");
    }
}
