//! Trace replay: a workload given as a file of requests, one row each, sent in file order.
//!
//! Columns (CSV header or JSON Lines keys): `prompt_tokens` and `output_tokens` (required), and
//! optionally `arrival_s` (when the request is sent, for `client.mode = "trace"`),
//! `max_new_tokens` (what it asks for), `ignore_eos`, and the shared prompt prefixes
//! `prefix_group` (empty: none) and `prefix_tokens` (the prompt tokens every request of the group
//! shares, the same on each of its rows, at most the row's prompt; empty or 0 without a group).
//! A row keeps its pairing: a prompt is sent with its own output length.

use std::path::Path;

use super::datafile::{self, At, Cell, DataError, Format};
use super::dist::MAX_TOKENS_PER_REQUEST;
use crate::diagnostic::did_you_mean;
use crate::request::SharedPrefix;
use crate::time::SimTime;

/// The columns servesim reads.
pub const COLUMNS: &[&str] = &[
    "prompt_tokens",
    "output_tokens",
    "arrival_s",
    "max_new_tokens",
    "ignore_eos",
    "prefix_group",
    "prefix_tokens",
];

/// The latest arrival accepted (one year), as for every simulated time a scenario gives.
pub const MAX_ARRIVAL_S: f64 = crate::settings::MAX_SIM_S;

/// At most this many bad cells are reported, then a count of the rest.
const MAX_REPORTED: usize = 12;

/// One request of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRow {
    /// Prompt length.
    pub prompt_tokens: u32,
    /// Where the model would stop by itself (EOS).
    pub output_tokens: u32,
    /// When it is sent (open-loop replay); `None` if the file has no `arrival_s`.
    pub arrival: Option<SimTime>,
    /// `max_tokens` it asks for; `None` to use the workload's.
    pub max_new_tokens: Option<u32>,
    /// `ignore_eos`; `None` to use the workload's.
    pub ignore_eos: Option<bool>,
    /// The prompt prefix it shares with its group (`group` indexes [`Trace::groups`]).
    pub prefix: Option<SharedPrefix>,
}

/// A trace read from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The rows, in file (= send) order.
    pub rows: Vec<TraceRow>,
    /// The prefix groups' names, in order of first appearance (empty without `prefix_group`).
    pub groups: Vec<String>,
    /// Whether the file gives `arrival_s` (every row then has one).
    pub has_arrivals: bool,
    /// Columns of the file that servesim does not read.
    pub ignored_columns: Vec<String>,
}

fn bad(at: At, column: &str, message: impl Into<String>, hint: &str) -> DataError {
    DataError {
        at: Some(at),
        column: Some(column.to_string()),
        message: message.into(),
        hint: hint.to_string(),
    }
}

/// A token count in `[1, MAX_TOKENS_PER_REQUEST]`.
fn tokens(cell: &Cell, at: At, column: &str) -> Result<Option<u32>, DataError> {
    let hint = "a whole number of tokens, at least 1";
    match cell {
        Cell::Empty => Ok(None),
        Cell::Number(x)
            if x.fract() == 0.0 && *x >= 1.0 && *x <= f64::from(MAX_TOKENS_PER_REQUEST) =>
        {
            Ok(Some(*x as u32))
        }
        Cell::Number(x) if x.fract() == 0.0 && *x > f64::from(MAX_TOKENS_PER_REQUEST) => Err(bad(
            at,
            column,
            format!("{x} is more than the {MAX_TOKENS_PER_REQUEST} tokens a request may have"),
            hint,
        )),
        other => Err(bad(
            at,
            column,
            format!("{} is not a token count", other.render()),
            hint,
        )),
    }
}

fn boolean(cell: &Cell, at: At, column: &str) -> Result<Option<bool>, DataError> {
    match cell {
        Cell::Empty => Ok(None),
        Cell::Bool(b) => Ok(Some(*b)),
        Cell::Number(x) if *x == 0.0 || *x == 1.0 => Ok(Some(*x == 1.0)),
        Cell::Text(s) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Cell::Text(s) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        other => Err(bad(
            at,
            column,
            format!("{} is not a boolean", other.render()),
            "write true or false (or 1 or 0)",
        )),
    }
}

fn seconds(cell: &Cell, at: At, column: &str) -> Result<Option<SimTime>, DataError> {
    let hint = "seconds from the start of the run, from 0 to one year";
    match cell {
        Cell::Empty => Ok(None),
        Cell::Number(x) if x.is_finite() && (0.0..=MAX_ARRIVAL_S).contains(x) => {
            Ok(SimTime::from_secs_f64(*x))
        }
        other => Err(bad(
            at,
            column,
            format!("{} is not a time in range", other.render()),
            hint,
        )),
    }
}

/// Read and check a trace file. Every bad cell is reported (up to a dozen, then a count).
pub fn load(path: &Path) -> Result<Trace, Vec<DataError>> {
    let table = datafile::read(path).map_err(|e| vec![e])?;
    let mut errors = Vec::new();
    let col = |name: &str| table.column(name);
    // A cell's field number, and the header's line: CSV only (JSON Lines name their keys).
    let csv = table.format == Format::Csv;
    let field = |i: usize| csv.then_some(i + 1);
    let header = |i: Option<usize>| csv.then_some(At { line: 1, field: i });
    for required in ["prompt_tokens", "output_tokens"] {
        if col(required).is_none() {
            errors.push(DataError {
                at: header(None),
                column: None,
                message: format!("has no column `{required}`"),
                hint: format!(
                    "a trace needs prompt_tokens and output_tokens; columns here: {}",
                    table.columns.join(", ")
                ),
            });
        }
    }
    let mut ignored_columns = Vec::new();
    for (i, name) in table.columns.iter().enumerate() {
        if COLUMNS.contains(&name.as_str()) {
            continue;
        }
        match did_you_mean(name, COLUMNS) {
            Some(close) => errors.push(DataError {
                at: header(Some(i + 1)),
                column: Some(name.clone()),
                message: format!("unknown column `{name}`"),
                hint: format!("did you mean `{close}`?"),
            }),
            None => ignored_columns.push(name.clone()),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let (prompt, output) = (
        col("prompt_tokens").unwrap_or(0),
        col("output_tokens").unwrap_or(0),
    );
    let (arrival, max_new, eos) = (col("arrival_s"), col("max_new_tokens"), col("ignore_eos"));
    let mut groups = Groups::new(col("prefix_group"), col("prefix_tokens"), csv);
    if table.rows.is_empty() {
        return Err(vec![DataError {
            at: None,
            column: None,
            message: "has a header but no rows".to_string(),
            hint: "a trace needs at least one request".to_string(),
        }]);
    }
    let mut rows = Vec::with_capacity(table.rows.len());
    let mut last_arrival = SimTime::ZERO;
    let mut failed = 0usize;
    let mut push = |e: DataError, errors: &mut Vec<DataError>| {
        failed += 1;
        if errors.len() < MAX_REPORTED {
            errors.push(e);
        }
    };
    for (at, cells) in &table.rows {
        let cell_at = |i: usize| At {
            line: at.line,
            field: field(i),
        };
        let mut row = TraceRow {
            prompt_tokens: 0,
            output_tokens: 0,
            arrival: None,
            max_new_tokens: None,
            ignore_eos: None,
            prefix: None,
        };
        let mut ok = true;
        for (i, name, slot) in [
            (prompt, "prompt_tokens", &mut row.prompt_tokens),
            (output, "output_tokens", &mut row.output_tokens),
        ] {
            match tokens(&cells[i], cell_at(i), name) {
                Ok(Some(n)) => *slot = n,
                Ok(None) => {
                    ok = false;
                    push(
                        bad(
                            cell_at(i),
                            name,
                            "is empty",
                            "every row needs a token count here",
                        ),
                        &mut errors,
                    );
                }
                Err(e) => {
                    ok = false;
                    push(e, &mut errors);
                }
            }
        }
        if let Some(i) = max_new {
            match tokens(&cells[i], cell_at(i), "max_new_tokens") {
                Ok(v) => row.max_new_tokens = v,
                Err(e) => {
                    ok = false;
                    push(e, &mut errors);
                }
            }
        }
        if let Some(i) = eos {
            match boolean(&cells[i], cell_at(i), "ignore_eos") {
                Ok(v) => row.ignore_eos = v,
                Err(e) => {
                    ok = false;
                    push(e, &mut errors);
                }
            }
        }
        if let Some(i) = arrival {
            match seconds(&cells[i], cell_at(i), "arrival_s") {
                Ok(Some(t)) if t < last_arrival => {
                    ok = false;
                    push(
                        bad(
                            cell_at(i),
                            "arrival_s",
                            format!(
                                "{} s is earlier than the row before ({} s)",
                                t.as_secs_f64(),
                                last_arrival.as_secs_f64()
                            ),
                            "rows are sent in file order: sort the file by arrival_s",
                        ),
                        &mut errors,
                    );
                }
                Ok(Some(t)) => {
                    last_arrival = t;
                    row.arrival = Some(t);
                }
                Ok(None) => {
                    ok = false;
                    push(
                        bad(
                            cell_at(i),
                            "arrival_s",
                            "is empty",
                            "give every row an arrival time, or drop the column",
                        ),
                        &mut errors,
                    );
                }
                Err(e) => {
                    ok = false;
                    push(e, &mut errors);
                }
            }
        }
        match groups.row(*at, cells, row.prompt_tokens) {
            Ok(prefix) => row.prefix = prefix,
            Err(e) => {
                ok = false;
                push(e, &mut errors);
            }
        }
        if ok {
            rows.push(row);
        }
    }
    if failed > MAX_REPORTED {
        errors.push(DataError {
            at: None,
            column: None,
            message: match failed - MAX_REPORTED {
                1 => "… and 1 more bad cell".to_string(),
                more => format!("… and {more} more bad cells"),
            },
            hint: "fix the ones above first".to_string(),
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Trace {
        rows,
        groups: groups.names,
        has_arrivals: arrival.is_some(),
        ignored_columns,
    })
}

/// The `prefix_group` / `prefix_tokens` columns: each group's name, its prefix length and the line
/// that first gave it.
struct Groups {
    group: Option<usize>,
    tokens: Option<usize>,
    csv: bool,
    names: Vec<String>,
    first: Vec<(u32, u64)>,
}

impl Groups {
    fn new(group: Option<usize>, tokens: Option<usize>, csv: bool) -> Self {
        Groups {
            group,
            tokens,
            csv,
            names: Vec::new(),
            first: Vec::new(),
        }
    }

    /// The shared prefix of one row (`prompt` tokens long; 0 when that cell was bad).
    fn row(
        &mut self,
        at: At,
        cells: &[Cell],
        prompt: u32,
    ) -> Result<Option<SharedPrefix>, DataError> {
        let cell_at = |i: usize| At {
            line: at.line,
            field: self.csv.then_some(i + 1),
        };
        let name = match self.group.map(|i| &cells[i]) {
            None | Some(Cell::Empty) => None,
            Some(Cell::Text(s)) if s.trim().is_empty() => None,
            Some(Cell::Text(s)) => Some(s.trim().to_string()),
            Some(Cell::Number(x)) => Some(format!("{x}")),
            Some(Cell::Bool(b)) => Some(b.to_string()),
        };
        let tokens = match self.tokens {
            None => None,
            Some(i) => match &cells[i] {
                Cell::Number(x) if *x == 0.0 => None,
                other => tokens(other, cell_at(i), "prefix_tokens")?,
            },
        };
        let at_tokens = self.tokens.map_or(at, cell_at);
        match (name, tokens) {
            (None, None) => Ok(None),
            (None, Some(n)) => Err(bad(
                at_tokens,
                "prefix_tokens",
                format!("{n} without a prefix_group"),
                "name the group whose prefix these tokens are, or leave prefix_tokens empty",
            )),
            (Some(g), None) => Err(bad(
                at_tokens,
                "prefix_tokens",
                format!("is missing for prefix_group {g:?}"),
                "give the prompt tokens the group shares (the same on every row of the group)",
            )),
            (Some(_), Some(n)) if prompt > 0 && n > prompt => Err(bad(
                at_tokens,
                "prefix_tokens",
                format!("{n} is more than the row's {prompt} prompt tokens"),
                "prompt_tokens counts the whole prompt, the shared prefix included",
            )),
            (Some(g), Some(n)) => {
                let group = match self.names.iter().position(|x| *x == g) {
                    Some(i) => i,
                    None => {
                        self.names.push(g);
                        self.first.push((n, at.line));
                        self.names.len() - 1
                    }
                };
                let (want, line) = self.first[group];
                if n != want {
                    return Err(bad(
                        at_tokens,
                        "prefix_tokens",
                        format!(
                            "{n} differs from the {want} that line {line} gives for prefix_group {:?}",
                            self.names[group]
                        ),
                        "every row of a group shares the same prefix: give it the same prefix_tokens",
                    ));
                }
                Ok(Some(SharedPrefix {
                    group: group as u32,
                    tokens: n,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(name: &str, text: &str) -> Result<Trace, Vec<DataError>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        load(&path)
    }

    #[test]
    fn csv_and_json_lines_give_the_same_rows() {
        let csv = load_text(
            "t.csv",
            "prompt_tokens,output_tokens,arrival_s,max_new_tokens,ignore_eos,id\n\
             10,5,0,,false,a\n20,7,0.5,100,true,b\n",
        )
        .unwrap();
        let jsonl = load_text(
            "t.jsonl",
            "{\"prompt_tokens\": 10, \"output_tokens\": 5, \"arrival_s\": 0, \"ignore_eos\": false, \"id\": \"a\"}\n\
             {\"prompt_tokens\": 20, \"output_tokens\": 7, \"arrival_s\": 0.5, \"max_new_tokens\": 100, \"ignore_eos\": true}\n",
        )
        .unwrap();
        assert_eq!(csv.rows, jsonl.rows);
        assert_eq!(csv.rows[1].arrival, Some(SimTime::from_ns(500_000_000)));
        assert_eq!(csv.rows[1].max_new_tokens, Some(100));
        assert_eq!(csv.rows[0].max_new_tokens, None);
        assert_eq!(csv.rows[1].ignore_eos, Some(true));
        assert!(csv.has_arrivals);
        assert_eq!(csv.ignored_columns, vec!["id".to_string()]);
    }

    #[test]
    fn every_bad_cell_is_reported_with_its_line_and_field() {
        let errs = load_text(
            "t.csv",
            "prompt_tokens,output_tokens,arrival_s\n10,0,1\nabc,5,2\n10,5,1.5\n",
        )
        .unwrap_err();
        let got: Vec<(u64, Option<usize>, Option<String>)> = errs
            .iter()
            .map(|e| (e.at.unwrap().line, e.at.unwrap().field, e.column.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (2, Some(2), Some("output_tokens".to_string())),
                (3, Some(1), Some("prompt_tokens".to_string())),
                (4, Some(3), Some("arrival_s".to_string())),
            ]
        );
        assert!(errs[2].message.contains("earlier than the row before"));
    }

    #[test]
    fn prefix_groups_are_numbered_in_order_of_appearance() {
        let t = load_text(
            "t.csv",
            "prompt_tokens,output_tokens,prefix_group,prefix_tokens\n\
             500,5,sys,300\n40,5,,\n400,5,tools,64\n300,5,sys,300\n20,5,,0\n",
        )
        .unwrap();
        assert_eq!(t.groups, vec!["sys".to_string(), "tools".to_string()]);
        let got: Vec<Option<(u32, u32)>> = t
            .rows
            .iter()
            .map(|r| r.prefix.map(|p| (p.group, p.tokens)))
            .collect();
        assert_eq!(
            got,
            vec![Some((0, 300)), None, Some((1, 64)), Some((0, 300)), None]
        );
    }

    #[test]
    fn inconsistent_prefix_rows_are_reported_with_their_line() {
        let errs = load_text(
            "t.csv",
            "prompt_tokens,output_tokens,prefix_group,prefix_tokens\n\
             500,5,sys,300\n400,5,sys,200\n100,5,tools,\n100,5,,50\n100,5,big,101\n",
        )
        .unwrap_err();
        let got: Vec<(u64, Option<usize>)> = errs
            .iter()
            .map(|e| (e.at.unwrap().line, e.at.unwrap().field))
            .collect();
        assert_eq!(
            got,
            vec![(3, Some(4)), (4, Some(4)), (5, Some(4)), (6, Some(4))]
        );
        assert!(errs[0]
            .message
            .contains("differs from the 300 that line 2 gives"));
        assert!(errs[1]
            .message
            .contains("missing for prefix_group \"tools\""));
        assert!(errs[2].message.contains("without a prefix_group"));
        assert!(errs[3]
            .message
            .contains("more than the row's 100 prompt tokens"));
    }

    #[test]
    fn a_misspelt_column_is_an_error_and_a_missing_one_is_named() {
        let errs = load_text("t.csv", "prompt_tokens,output_token\n1,2\n").unwrap_err();
        assert!(errs
            .iter()
            .any(|e| e.message.contains("has no column `output_tokens`")));
        assert!(errs
            .iter()
            .any(|e| e.message.contains("unknown column `output_token`")
                && e.hint.contains("`output_tokens`")));
    }

    #[test]
    fn a_token_count_of_exactly_the_maximum_is_accepted_and_one_more_is_refused() {
        let t = load_text(
            "t.csv",
            "prompt_tokens,output_tokens\n10000000,5\n10,10000000\n",
        )
        .unwrap();
        assert_eq!(t.rows[0].prompt_tokens, MAX_TOKENS_PER_REQUEST);
        assert_eq!(t.rows[1].output_tokens, MAX_TOKENS_PER_REQUEST);
        let errs = load_text("t.csv", "prompt_tokens,output_tokens\n10000001,5\n").unwrap_err();
        assert_eq!(
            errs[0].message,
            "10000001 is more than the 10000000 tokens a request may have"
        );
    }

    #[test]
    fn an_arrival_of_exactly_one_year_is_accepted() {
        // MAX_ARRIVAL_S = 365 × 24 × 3600 s = 31,536,000 s.
        let t = load_text(
            "t.csv",
            "prompt_tokens,output_tokens,arrival_s\n10,5,0\n10,5,31536000\n",
        )
        .unwrap();
        assert_eq!(
            t.rows[1].arrival,
            Some(SimTime::from_ns(31_536_000_000_000_000))
        );
    }

    #[test]
    fn twelve_bad_cells_are_all_reported_and_a_thirteenth_is_counted() {
        let rows = |n: usize| format!("prompt_tokens,output_tokens\n{}", "x,5\n".repeat(n));
        let errs = load_text("t.csv", &rows(12)).unwrap_err();
        assert_eq!(errs.len(), 12);
        assert!(errs.iter().all(|e| e.at.is_some()), "{errs:?}");
        let errs = load_text("t.csv", &rows(13)).unwrap_err();
        assert_eq!(errs.len(), 13);
        assert_eq!(errs[12].message, "… and 1 more bad cell");
        let errs = load_text("t.csv", &rows(14)).unwrap_err();
        assert_eq!(errs[12].message, "… and 2 more bad cells");
    }

    #[test]
    fn ignore_eos_reads_1_and_0_as_true_and_false() {
        let t = load_text(
            "t.csv",
            "prompt_tokens,output_tokens,ignore_eos\n10,5,1\n10,5,0\n10,5,\n",
        )
        .unwrap();
        let got: Vec<Option<bool>> = t.rows.iter().map(|r| r.ignore_eos).collect();
        assert_eq!(got, vec![Some(true), Some(false), None]);
    }

    #[test]
    fn a_blank_prefix_group_in_json_lines_is_no_group() {
        let t = load_text(
            "t.jsonl",
            "{\"prompt_tokens\": 10, \"output_tokens\": 5, \"prefix_group\": \"  \"}\n",
        )
        .unwrap();
        assert_eq!(t.rows[0].prefix, None);
        assert!(t.groups.is_empty());
    }
}
