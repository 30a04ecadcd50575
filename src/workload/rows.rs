//! Lengths sampled as whole rows of a file (`workload.lengths = { file, prompt, output }`): each
//! request takes one row, drawn uniformly with replacement from the `length_rows` stream, and
//! sends that row's prompt with that row's own output length — the pairing, and any
//! correlation between the two, survive (two independent `empirical` distributions would
//! lose them).
//!
//! Files: CSV with a header row or JSON Lines (`prompt` and `output` name columns / keys,
//! read with [`super::datafile`]); or a ShareGPT-format `.json` file — an array of
//! conversations `{"conversations": [{"from": "human", …}, {"from": "gpt", …}, …]}` — where,
//! as `sglang.bench_serving` and `vllm bench serve` pair them, a conversation's first turn is
//! the prompt and its second the output, and `prompt` and `output` name the key of each turn
//! that gives its token count (e.g. `"num_tokens"`). servesim does not tokenize text: a turn
//! without that count is an error, not a guess from its words. Conversations with fewer than
//! two turns are skipped, as the benchmark clients skip them.

use std::path::Path;

use serde_json::Value;

use super::datafile::{self, Cell, DataError};
use super::dist::MAX_TOKENS_PER_REQUEST;

/// The most rows kept (as many as an empirical distribution may hold).
pub const MAX_ROWS: usize = super::dist::MAX_EMPIRICAL_VALUES;

fn problem(message: impl Into<String>, hint: impl Into<String>) -> DataError {
    DataError {
        at: None,
        column: None,
        message: message.into(),
        hint: hint.into(),
    }
}

/// A token count from a cell (`where_` locates it for the message).
fn count(cell: &Cell, where_: &str) -> Result<u32, DataError> {
    match cell {
        Cell::Number(x)
            if x.fract() == 0.0 && *x >= 1.0 && *x <= f64::from(MAX_TOKENS_PER_REQUEST) =>
        {
            Ok(*x as u32)
        }
        c => Err(problem(
            format!("{where_}: {} is not a token count", c.render()),
            format!("a whole number of tokens in [1, {MAX_TOKENS_PER_REQUEST}]"),
        )),
    }
}

/// The `(prompt, output)` token counts of every row of `path`.
pub fn load(path: &Path, prompt: &str, output: &str) -> Result<Vec<(u32, u32)>, DataError> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let rows = if ext.eq_ignore_ascii_case("json") {
        sharegpt(path, prompt, output)?
    } else {
        let t = datafile::read(path)?;
        let (p, o) = (t.index_of(prompt)?, t.index_of(output)?);
        let mut rows = Vec::with_capacity(t.rows.len());
        for (at, cells) in &t.rows {
            rows.push((
                count(&cells[p], &t.locate(*at, prompt))?,
                count(&cells[o], &t.locate(*at, output))?,
            ));
        }
        rows
    };
    within(rows, MAX_ROWS)
}

/// The rows, if there are some and at most `max_rows` of them.
fn within(rows: Vec<(u32, u32)>, max_rows: usize) -> Result<Vec<(u32, u32)>, DataError> {
    match rows.len() {
        0 => Err(problem("has no rows", "give at least one row")),
        n if n > max_rows => Err(problem(
            format!("has {n} rows, more than {max_rows}"),
            "take a sample of its rows",
        )),
        _ => Ok(rows),
    }
}

/// A ShareGPT-format file: the first two turns of each conversation, their token counts under
/// the keys `prompt` and `output`.
fn sharegpt(path: &Path, prompt: &str, output: &str) -> Result<Vec<(u32, u32)>, DataError> {
    // A JSON array may sit on one line: the size cap of data files, not the line cap.
    let text = crate::files::read_text(path, datafile::MAX_FILE_BYTES).map_err(|e| {
        let hint = match e {
            crate::files::ReadError::Io(_) => "check the path: it is relative to the scenario file",
            _ => "give a ShareGPT JSON file",
        };
        problem(format!("cannot be read: {e}"), hint)
    })?;
    let hint = "a ShareGPT file: a JSON array of {\"conversations\": [{\"from\": …, \"value\": …, \"<count key>\": N}, …]}";
    let v: Value =
        serde_json::from_str(&text).map_err(|e| problem(format!("is not JSON: {e}"), hint))?;
    let Value::Array(convs) = v else {
        return Err(problem("is not a JSON array of conversations", hint));
    };
    let mut rows = Vec::new();
    for (i, c) in convs.iter().enumerate() {
        let Some(Value::Array(turns)) = c.get("conversations") else {
            return Err(problem(
                format!("[{i}] has no \"conversations\" array"),
                hint,
            ));
        };
        if turns.len() < 2 {
            continue;
        }
        let turn = |j: usize, key: &str| -> Result<u32, DataError> {
            let where_ = format!("[{i}].conversations[{j}].{key}");
            match turns[j].get(key) {
                Some(Value::Number(n)) => count(&Cell::Number(n.as_f64().unwrap_or(f64::NAN)), &where_),
                Some(other) => count(&Cell::Text(other.to_string()), &where_),
                None => Err(problem(
                    format!("{where_} is missing: servesim does not tokenize text, so each turn needs its token count"),
                    format!("add \"{key}\": N (the turn's tokens under the model's tokenizer) to every turn, or name the key that holds it"),
                )),
            }
        };
        rows.push((turn(0, prompt)?, turn(1, output)?));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    #[test]
    fn a_file_may_hold_exactly_the_most_rows_and_not_one_more() {
        // With a limit of 2 (the real one, 10⁷ rows, would take a 40 MB file): 2 rows are
        // kept, 3 are refused naming both counts, none is refused.
        let two = vec![(10, 3), (20, 5)];
        assert_eq!(within(two.clone(), 2).unwrap(), two);
        let e = within(vec![(10, 3), (20, 5), (30, 7)], 2).unwrap_err();
        assert_eq!(e.message, "has 3 rows, more than 2");
        assert_eq!(within(Vec::new(), 2).unwrap_err().message, "has no rows");
    }

    #[test]
    fn rows_keep_their_pairing_in_csv_json_lines_and_sharegpt() {
        let (_d, csv) = file("a.csv", "p,o,x\n10,3,a\n20,5,b\n");
        assert_eq!(load(&csv, "p", "o").unwrap(), vec![(10, 3), (20, 5)]);
        let (_d, jl) = file("a.jsonl", "{\"p\": 10, \"o\": 3}\n{\"p\": 20, \"o\": 5}\n");
        assert_eq!(load(&jl, "p", "o").unwrap(), vec![(10, 3), (20, 5)]);
        let share = r#"[{"id": "a", "conversations": [{"from": "human", "value": "hi", "n": 10},
            {"from": "gpt", "value": "yo", "n": 3}, {"from": "human", "value": "?", "n": 1}]},
            {"id": "b", "conversations": [{"from": "human", "value": "alone", "n": 4}]}]"#;
        let (_d, sg) = file("s.json", share);
        assert_eq!(load(&sg, "n", "n").unwrap(), vec![(10, 3)]);
        let e = load(&sg, "tokens", "n").unwrap_err();
        assert!(
            e.message.contains(
                "[0].conversations[0].tokens is missing: servesim does not tokenize text"
            ),
            "{}",
            e.message
        );
        let e = load(&csv, "p", "out").unwrap_err();
        assert!(e.message.contains("no column \"out\""), "{}", e.message);
        let (_d, bad) = file("b.csv", "p,o\n10,3.5\n");
        let e = load(&bad, "p", "o").unwrap_err();
        assert_eq!(e.message, "line 2, column \"o\": 3.5 is not a token count");
        assert_eq!(
            datafile::json_lines_column(&jl, "o", 10).unwrap(),
            vec![3.0, 5.0]
        );
    }

    #[test]
    fn a_row_of_zero_tokens_is_refused_and_one_token_is_accepted() {
        let (_d, one) = file("one.csv", "p,o\n1,1\n");
        assert_eq!(load(&one, "p", "o").unwrap(), vec![(1, 1)]);
        let (_d, zero) = file("zero.csv", "p,o\n10,3\n0,3\n");
        let e = load(&zero, "p", "o").unwrap_err();
        assert_eq!(e.message, "line 3, column \"p\": 0 is not a token count");
        let (_d, zero) = file("zero.jsonl", "{\"p\": 10, \"o\": 0}\n");
        assert!(load(&zero, "p", "o").is_err());
    }

    #[test]
    fn a_sharegpt_file_is_known_by_its_extension_in_any_case() {
        let share = r#"[{"conversations": [{"from": "human", "n": 10}, {"from": "gpt", "n": 3}]}]"#;
        let (_d, upper) = file("S.JSON", share);
        assert_eq!(load(&upper, "n", "n").unwrap(), vec![(10, 3)]);
    }
}
