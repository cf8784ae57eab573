//! Aligned text tables: each column is padded to its widest cell (or to its minimum width),
//! left- or right-aligned, and a left-aligned last column is never padded, so no line ends
//! in spaces.

/// How a column's cells are padded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}

#[derive(Debug, Clone)]
struct Column {
    align: Align,
    /// Text written before the column's cell (the indent, for the first column).
    before: &'static str,
    min: usize,
}

/// A text table built column by column, then row by row.
#[derive(Debug, Clone, Default)]
pub struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new() -> Table {
        Table::default()
    }

    /// Adds a left-aligned column, written after `before`, at least `min` wide.
    pub fn left(mut self, before: &'static str, min: usize) -> Table {
        self.columns.push(Column {
            align: Align::Left,
            before,
            min,
        });
        self
    }

    /// Adds a right-aligned column, written after `before`, at least `min` wide.
    pub fn right(mut self, before: &'static str, min: usize) -> Table {
        self.columns.push(Column {
            align: Align::Right,
            before,
            min,
        });
        self
    }

    /// Adds a row: one cell per column, in order.
    pub fn row<S: ToString>(&mut self, cells: impl IntoIterator<Item = S>) {
        let cells: Vec<String> = cells.into_iter().map(|c| c.to_string()).collect();
        assert_eq!(
            cells.len(),
            self.columns.len(),
            "a table row has one cell per column"
        );
        self.rows.push(cells);
    }

    /// The rows, one line each.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|i| {
                let widest = self.rows.iter().map(|r| r[i].chars().count()).max();
                widest.unwrap_or(0).max(self.columns[i].min)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            for (i, (cell, c)) in row.iter().zip(&self.columns).enumerate() {
                let w = widths[i];
                out.push_str(c.before);
                match c.align {
                    Align::Left if i + 1 == row.len() => out.push_str(cell),
                    Align::Left => out.push_str(&format!("{cell:<w$}")),
                    Align::Right => out.push_str(&format!("{cell:>w$}")),
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_their_widest_cell_and_the_last_is_not_padded() {
        let mut t = Table::new().left("  ", 4).right(" ", 0).left("  ", 0);
        t.row(["name", "n", "what"]);
        t.row(["a", "100", "x"]);
        t.row(["longer", "2", ""]);
        assert_eq!(
            t.render(),
            "  name     n  what\n  a      100  x\n  longer   2  \n"
        );
    }
}
