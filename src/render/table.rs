//! One table style for every command (comfy-table), fixed width when not on
//! a terminal so output is deterministic in tests and pipes.

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};

pub fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().map(Cell::new));
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

pub fn kv_table(rows: &[(String, String)]) -> Table {
    let mut t = new_table(&["", ""]);
    t.load_style(presets::NOTHING);
    for (k, v) in rows {
        t.add_row(vec![Cell::new(k), Cell::new(v)]);
    }
    t
}
