//! Terminal tables.

use comfy_table::{presets, CellAlignment, Table};

/// A terminal table without lines: numbers right-aligned, the first `left` columns left-aligned.
pub(super) fn table<S: ToString>(header: &[S], left: usize) -> Table {
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    t.set_header(header.iter().map(ToString::to_string).collect::<Vec<_>>());
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_cell_alignment(if i < left {
            CellAlignment::Left
        } else {
            CellAlignment::Right
        });
    }
    t
}

/// The table's lines, without trailing spaces, each ending in a newline.
pub(super) fn render(t: &Table) -> String {
    t.lines().map(|l| l.trim_end().to_string() + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_text_left_and_numbers_right() {
        let mut t = table(&["name", "tokens"], 1);
        t.add_row(vec!["a", "1,000"]);
        t.add_row(vec!["longer", "7"]);
        assert_eq!(
            render(&t),
            " name    tokens\n a        1,000\n longer       7\n"
        );
    }
}
