//! One table style for every command (comfy-table), fixed width when not on
//! a terminal so output is deterministic in tests and pipes.
//!
//! Color is decided once by the command line (`--color`, NO_COLOR, whether
//! stdout is a terminal) and handed in as a [`Style`]; tables never look at
//! the terminal themselves, so the same arguments give the same bytes
//! whether or not stdout is a terminal. Without color no escape sequence is
//! ever written.

use crate::core::style::Style;
use comfy_table::{Attribute, Cell, CellAlignment, Color, ContentArrangement, Table, presets};

/// How a figure reads, for coloring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Warn,
    Bad,
    /// Not applicable / not measured.
    Muted,
}

impl Tone {
    fn color(self) -> Color {
        match self {
            Tone::Good => Color::Green,
            Tone::Warn => Color::Yellow,
            Tone::Bad => Color::Red,
            Tone::Muted => Color::DarkGrey,
        }
    }
    fn sgr(self) -> &'static str {
        match self {
            Tone::Good => "32",
            Tone::Warn => "33",
            Tone::Bad => "31",
            Tone::Muted => "90",
        }
    }
}

/// Fragmentation below a quarter reads as healthy, from a half on as bad:
/// at 50 % the largest free block holds less than half of the free bytes.
pub fn fragmentation_tone(f: f64) -> Tone {
    if f >= 0.5 {
        Tone::Bad
    } else if f >= 0.25 {
        Tone::Warn
    } else {
        Tone::Good
    }
}

/// A cell colored by `tone` when color is on (plain otherwise).
pub fn toned(text: impl std::fmt::Display, tone: Tone) -> Cell {
    Cell::new(text).fg(tone.color())
}

/// `text` wrapped in an ANSI color for text outside tables; unchanged when
/// color is off.
pub fn paint(st: &Style, text: &str, tone: Tone) -> String {
    if st.color {
        format!("\x1b[{}m{text}\x1b[0m", tone.sgr())
    } else {
        text.to_string()
    }
}

pub fn new_table(st: &Style, header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .force_no_tty()
        .set_header(
            header
                .iter()
                .map(|h| Cell::new(h).add_attribute(Attribute::Bold)),
        );
    if st.color {
        t.enforce_styling();
        // Colors on the text only, so padding stays plain.
        t.style_text_only();
    }
    t
}

/// Right-aligns every column from `first` on (numbers).
pub fn align_numbers(t: &mut Table, first: usize) {
    let n = t.column_count();
    for i in first..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

pub fn kv_table(st: &Style, rows: &[(String, String)]) -> Table {
    let mut t = new_table(st, &["", ""]);
    t.load_style(presets::NOTHING);
    for (k, v) in rows {
        t.add_row(vec![Cell::new(k), Cell::new(v)]);
    }
    t
}

/// The growths of reserved memory of a trace, the largest first (earliest
/// on ties), as every table of them lists them.
pub fn largest_growth_first(
    steps: &[crate::model::profiler::ReservedStep],
) -> Vec<&crate::model::profiler::ReservedStep> {
    let mut v: Vec<_> = steps.iter().collect();
    v.sort_by(|a, b| {
        (b.reserved_after - b.reserved_before)
            .cmp(&(a.reserved_after - a.reserved_before))
            .then(a.event.cmp(&b.event))
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tables_carry_no_escapes() {
        let st = Style::default();
        let mut t = new_table(&st, &["metric", "value"]);
        t.add_row(vec![Cell::new("fragmentation"), toned("62.0%", Tone::Bad)]);
        let s = t.to_string();
        assert!(s.contains("62.0%"));
        assert!(!s.contains('\x1b'), "{s:?}");
        assert_eq!(paint(&st, "FAIL", Tone::Bad), "FAIL");
    }

    #[test]
    fn colored_tables_and_text_carry_escapes() {
        let st = Style {
            color: true,
            ..Style::default()
        };
        let mut t = new_table(&st, &["metric", "value"]);
        t.add_row(vec![Cell::new("fragmentation"), toned("62.0%", Tone::Bad)]);
        assert!(t.to_string().contains('\x1b'));
        assert_eq!(paint(&st, "FAIL", Tone::Bad), "\x1b[31mFAIL\x1b[0m");
    }

    #[test]
    fn fragmentation_tones() {
        assert_eq!(fragmentation_tone(0.0), Tone::Good);
        assert_eq!(fragmentation_tone(0.3), Tone::Warn);
        assert_eq!(fragmentation_tone(0.5), Tone::Bad);
    }
}
