//! Tables of user data — a CSV file with a header row, or JSON Lines (one object per line) —
//! read into named columns of cells that remember their line, for messages that point at the
//! bad cell. Used by trace replay and by file-backed length distributions.

use std::path::Path;

/// The largest data file accepted (bytes): far beyond any trace a person keeps, small enough that
/// a wrong path (a disk image, `/dev/zero`) is refused before it fills the memory.
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// The most cells (rows × columns) a data file may have: they are held in memory while it is
/// read (10⁷ rows of 3 columns fit).
pub const MAX_CELLS: usize = 32_000_000;

fn too_many_cells(line: u64) -> DataError {
    err(
        Some(At { line, field: None }),
        format!("has more than {MAX_CELLS} cells (rows × columns)"),
        "use a smaller file, or take a sample of its rows",
    )
}

/// One cell: a number, a string, a boolean, or empty.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// Empty CSV field, JSON `null` or a key the object lacks.
    Empty,
    /// A number (JSON number, or CSV text that parses as one).
    Number(f64),
    /// Text.
    Text(String),
    /// JSON `true` / `false`.
    Bool(bool),
}

impl Cell {
    /// The cell as the user wrote it, for messages.
    pub fn render(&self) -> String {
        match self {
            Cell::Empty => "an empty cell".to_string(),
            Cell::Number(x) => format!("{x}"),
            Cell::Text(s) => format!("{s:?}"),
            Cell::Bool(b) => b.to_string(),
        }
    }
}

/// Where a cell is: its line in the file and, for CSV, its field number (from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    /// Line, from 1.
    pub line: u64,
    /// CSV field number, from 1; for JSON Lines, where cells are found by key, `None`, but the
    /// column of a syntax error.
    pub field: Option<usize>,
}

/// A problem with a data file, located as precisely as the format allows.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct DataError {
    /// Where, if at a cell or line.
    pub at: Option<At>,
    /// The column, if the problem is in one.
    pub column: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

/// How a data file is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// CSV with a header row: a cell is at a line and a field number.
    Csv,
    /// JSON Lines: a cell is at a line and a key.
    JsonLines,
}

/// A data file's rows, by column name.
#[derive(Clone, Debug)]
pub struct Table {
    /// The layout.
    pub format: Format,
    /// Column names, in file order (CSV header; JSON keys in order of first appearance).
    pub columns: Vec<String>,
    /// Rows: the cells in `columns` order, and where the row starts.
    pub rows: Vec<(At, Vec<Cell>)>,
}

impl Table {
    /// The index of a column.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

fn err(at: Option<At>, message: impl Into<String>, hint: impl Into<String>) -> DataError {
    DataError {
        at,
        column: None,
        message: message.into(),
        hint: hint.into(),
    }
}

/// Read a JSON Lines file (`.jsonl`, `.ndjson`) or CSV (anything else).
pub fn read(path: &Path) -> Result<Table, DataError> {
    use crate::files::ReadError;
    let text = crate::files::read_rows_text(path, MAX_FILE_BYTES).map_err(|e| match e {
        ReadError::Io(e) => err(
            None,
            format!("cannot be read: {e}"),
            "check the path: it is relative to the scenario file",
        ),
        ReadError::TooLarge { .. } => err(
            None,
            format!("holds more than the {MAX_FILE_BYTES} bytes a data file may have"),
            "use a smaller file, or take a sample of its rows",
        ),
        ReadError::LineTooLong { limit } => err(
            None,
            format!("has a line longer than {limit} bytes: it is not a file of rows"),
            "give a CSV file with a header row, or JSON Lines",
        ),
        ReadError::NotUtf8 { offset } => err(
            None,
            format!("is not UTF-8 text (invalid byte at offset {offset})"),
            "give a CSV file with a header row, or JSON Lines",
        ),
    })?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext.to_ascii_lowercase().as_str() {
        "jsonl" | "ndjson" => json_lines(&text),
        "json" => Err(err(
            None,
            "is a .json file, which servesim does not read as a table",
            "give JSON Lines (one object per line) in a .jsonl file, or CSV with a header row",
        )),
        _ => csv_table(&text),
    }
}

impl Table {
    /// Where a cell is, for messages: `line 3, column "x"` (CSV) or `line 3, key "x"`.
    pub fn locate(&self, at: At, column: &str) -> String {
        match self.format {
            Format::Csv => format!("line {}, column \"{column}\"", at.line),
            Format::JsonLines => format!("line {}, key \"{column}\"", at.line),
        }
    }

    /// The index of `column`, or an error that lists the columns and the nearest name.
    pub fn index_of(&self, column: &str) -> Result<usize, DataError> {
        self.column(column).ok_or_else(|| {
            let names: Vec<&str> = self.columns.iter().map(String::as_str).collect();
            let guess = crate::diagnostic::did_you_mean(column, &names)
                .map(|g| format!("did you mean \"{g}\"? "))
                .unwrap_or_default();
            err(
                None,
                format!("has no column \"{column}\" (it has {})", names.join(", ")),
                format!("{guess}name one of its columns"),
            )
        })
    }
}

/// The token counts in `column` of a JSON Lines file (rows without the key are skipped), as for
/// a CSV column of an empirical distribution: positive numbers, at most `max_values`.
pub fn json_lines_column(
    path: &Path,
    column: &str,
    max_values: usize,
) -> Result<Vec<f64>, DataError> {
    let t = read(path)?;
    let i = t.index_of(column)?;
    let mut out = Vec::new();
    for (at, cells) in &t.rows {
        match &cells[i] {
            Cell::Empty => {}
            Cell::Number(x) if x.is_finite() && *x > 0.0 => out.push(*x),
            c => {
                let msg = format!(
                    "{}: {} is not a positive token count",
                    t.locate(*at, column),
                    c.render()
                );
                return Err(err(None, msg, "a positive number of tokens"));
            }
        }
    }
    match out.len() {
        0 => Err(err(
            None,
            format!("has no value under \"{column}\""),
            "give at least one row with it",
        )),
        n if n > max_values => Err(err(
            None,
            format!("has {n} values, more than {max_values}"),
            "take a sample of its rows",
        )),
        _ => Ok(out),
    }
}

fn cell_from_text(s: &str) -> Cell {
    let t = s.trim();
    if t.is_empty() {
        Cell::Empty
    } else if let Ok(x) = t.parse::<f64>() {
        Cell::Number(x)
    } else {
        Cell::Text(t.to_string())
    }
}

/// Parse CSV text with a header row.
pub fn csv_table(text: &str) -> Result<Table, DataError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(text.as_bytes());
    let columns: Vec<String> = reader
        .headers()
        .map_err(|e| csv_error(&e, text))?
        .iter()
        .map(|h| h.trim().trim_start_matches('\u{feff}').to_string())
        .collect();
    if columns.iter().all(String::is_empty) {
        return Err(err(
            Some(At {
                line: 1,
                field: None,
            }),
            "has no header row",
            "the first line must name the columns, e.g. prompt_tokens,output_tokens",
        ));
    }
    let mut rows = Vec::new();
    let mut lines = Lines::new(text);
    for rec in reader.records() {
        let rec = rec.map_err(|e| csv_error(&e, text))?;
        let line = rec.position().map_or(0, |p| lines.at(p.byte()));
        if rec.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        if (rows.len() + 1).saturating_mul(columns.len()) > MAX_CELLS {
            return Err(too_many_cells(line));
        }
        rows.push((
            At { line, field: None },
            rec.iter().map(cell_from_text).collect(),
        ));
    }
    Ok(Table {
        format: Format::Csv,
        columns,
        rows,
    })
}

/// The line of the record the csv crate places at byte `byte`. Its positions point where it
/// started reading, before the blank lines it skips, so skip those first.
fn line_at(text: &str, byte: u64) -> u64 {
    Lines::new(text).at(byte)
}

/// Line numbers of records met in order: each call counts the line breaks from the previous
/// record's start only, so a file's rows are numbered in one pass (counting from the start for
/// every row took minutes at 50,000 rows and hours at a million — found by the fuzzer).
struct Lines<'t> {
    bytes: &'t [u8],
    /// Where the last count stopped, and the line there.
    at: usize,
    line: u64,
}

impl<'t> Lines<'t> {
    fn new(text: &'t str) -> Self {
        Lines {
            bytes: text.as_bytes(),
            at: 0,
            line: 1,
        }
    }

    /// The line of the record placed at byte `byte` (see [`line_at`]).
    fn at(&mut self, byte: u64) -> u64 {
        let bytes = self.bytes;
        let mut at = usize::try_from(byte).unwrap_or(usize::MAX).min(bytes.len());
        while at < bytes.len() && (bytes[at] == b'\n' || bytes[at] == b'\r') {
            at += 1;
        }
        if at < self.at {
            // (Records come in order; a position before the last one is counted afresh.)
            self.at = 0;
            self.line = 1;
        }
        self.line += bytes[self.at..at].iter().filter(|&&b| b == b'\n').count() as u64;
        self.at = at;
        self.line
    }
}

fn csv_error(e: &csv::Error, text: &str) -> DataError {
    let line = e.position().map(|p| line_at(text, p.byte()));
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("has {len} fields where the header has {expected_len}"),
        _ => format!("is not valid CSV: {e}"),
    };
    err(
        line.map(|line| At { line, field: None }),
        message,
        "every row needs one value per header column, separated by commas",
    )
}

/// Parse JSON Lines: one object per non-empty line.
pub fn json_lines(text: &str) -> Result<Table, DataError> {
    let mut columns: Vec<String> = Vec::new();
    let mut objects = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i as u64 + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| {
            err(
                Some(At {
                    line,
                    field: Some(e.column()),
                }),
                format!("is not valid JSON: {e}"),
                "write one JSON object per line, e.g. {\"prompt_tokens\": 512, \"output_tokens\": 128}",
            )
        })?;
        let serde_json::Value::Object(map) = value else {
            return Err(err(
                Some(At { line, field: None }),
                "holds a JSON value that is not an object",
                "write one JSON object per line, e.g. {\"prompt_tokens\": 512, \"output_tokens\": 128}",
            ));
        };
        for k in map.keys() {
            if !columns.iter().any(|c| c == k) {
                columns.push(k.clone());
            }
        }
        if (objects.len() + 1).saturating_mul(columns.len()) > MAX_CELLS {
            return Err(too_many_cells(line));
        }
        objects.push((line, map));
    }
    let rows = objects
        .into_iter()
        .map(|(line, map)| {
            let cells = columns
                .iter()
                .map(|c| match map.get(c) {
                    None | Some(serde_json::Value::Null) => Cell::Empty,
                    Some(serde_json::Value::Number(n)) => {
                        Cell::Number(n.as_f64().unwrap_or(f64::NAN))
                    }
                    Some(serde_json::Value::Bool(b)) => Cell::Bool(*b),
                    Some(serde_json::Value::String(s)) => Cell::Text(s.clone()),
                    Some(other) => Cell::Text(other.to_string()),
                })
                .collect();
            (At { line, field: None }, cells)
        })
        .collect();
    Ok(Table {
        format: Format::JsonLines,
        columns,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_keep_their_line_and_type() {
        let t = csv_table("a,b\n1, x\n\n2.5,\n").unwrap();
        assert_eq!(t.columns, vec!["a", "b"]);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[0].0.line, 2);
        assert_eq!(t.rows[0].1, vec![Cell::Number(1.0), Cell::Text("x".into())]);
        assert_eq!(t.rows[1].0.line, 4);
        assert_eq!(t.rows[1].1, vec![Cell::Number(2.5), Cell::Empty]);
    }

    #[test]
    fn lines_counted_in_one_pass_equal_lines_counted_from_the_start() {
        let text = "a,b\r\n1,2\n\n\r\n3,4\r\n\n\n5,6\n7,8";
        let mut lines = Lines::new(text);
        let starts: Vec<u64> = (0..=text.len() as u64).collect();
        for &b in starts.iter().chain(&starts) {
            let fresh = {
                let bytes = text.as_bytes();
                let mut at = (b as usize).min(bytes.len());
                while at < bytes.len() && (bytes[at] == b'\n' || bytes[at] == b'\r') {
                    at += 1;
                }
                bytes[..at].iter().filter(|&&c| c == b'\n').count() as u64 + 1
            };
            assert_eq!(lines.at(b), fresh, "byte {b}");
        }
        let t = csv_table(text).unwrap();
        let got: Vec<u64> = t.rows.iter().map(|r| r.0.line).collect();
        assert_eq!(got, vec![2, 5, 8, 9]);
    }

    #[test]
    fn a_short_csv_row_is_an_error_at_its_line() {
        let e = csv_table("a,b\n1,2\n\n3\n").unwrap_err();
        assert_eq!(e.at.map(|a| a.line), Some(4));
        assert!(
            e.message.contains("1 fields where the header has 2"),
            "{e:?}"
        );
    }

    #[test]
    fn json_lines_take_keys_in_order_of_first_appearance() {
        let t = json_lines("{\"b\": 1}\n\n{\"a\": true, \"b\": null}\n").unwrap();
        assert_eq!(t.columns, vec!["b", "a"]);
        assert_eq!(t.rows[0].1, vec![Cell::Number(1.0), Cell::Empty]);
        assert_eq!(t.rows[1].0.line, 3);
        assert_eq!(t.rows[1].1, vec![Cell::Empty, Cell::Bool(true)]);
    }

    #[test]
    fn bad_json_is_an_error_at_its_line_and_column() {
        let e = json_lines("{\"a\": 1}\n{\"a\": }\n").unwrap_err();
        let at = e.at.unwrap();
        assert_eq!(at.line, 2);
        assert!(at.field.is_some());
    }

    #[test]
    fn a_json_lines_column_refuses_a_zero_count() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.jsonl");
        std::fs::write(&p, "{\"n\": 5}\n{\"n\": 0}\n").unwrap();
        let e = json_lines_column(&p, "n", 10).unwrap_err();
        assert_eq!(
            e.message,
            "line 2, key \"n\": 0 is not a positive token count"
        );
    }

    #[test]
    fn a_json_lines_column_may_hold_exactly_max_values() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.jsonl");
        std::fs::write(&p, "{\"n\": 5}\n{\"n\": 7}\n").unwrap();
        assert_eq!(json_lines_column(&p, "n", 2).unwrap(), vec![5.0, 7.0]);
        let e = json_lines_column(&p, "n", 1).unwrap_err();
        assert_eq!(e.message, "has 2 values, more than 1");
    }

    #[test]
    fn a_header_with_an_empty_name_among_others_is_a_header() {
        let t = csv_table("a,,b\n1,2,3\n").unwrap();
        assert_eq!(t.columns, vec!["a", "", "b"]);
        assert_eq!(
            csv_table(",\n1,2\n").unwrap_err().message,
            "has no header row"
        );
    }

    #[test]
    fn json_lines_skip_lines_of_spaces() {
        let t = json_lines("{\"a\": 1}\n  \t\n{\"a\": 2}\n").unwrap();
        let lines: Vec<u64> = t.rows.iter().map(|r| r.0.line).collect();
        assert_eq!(lines, vec![1, 3]);
    }

    #[test]
    fn jsonl_and_ndjson_files_are_read_as_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["t.jsonl", "t.ndjson", "u.NDJSON"] {
            let p = dir.path().join(name);
            std::fs::write(&p, "{\"a\": 1}\n").unwrap();
            let t = read(&p).unwrap();
            assert_eq!(t.format, Format::JsonLines, "{name}");
            assert_eq!(t.columns, vec!["a"], "{name}");
        }
    }

    #[test]
    fn header_names_lose_a_byte_order_mark() {
        // The csv crate drops one at the start of the file; one before a later name is ours.
        let t = csv_table("a,\u{feff}b\n1,2\n").unwrap();
        assert_eq!(t.columns, vec!["a", "b"]);
    }
}
