//! Reading a step-time table: its keys in `[engine.step_time]`, a CSV file of measured points
//! (`table = "file.csv"`, relative to the scenario) or the same points inline.
//!
//! The CSV has a header row and one row per point:
//!
//! ```text
//! step,batch,kv_tokens,tokens,ms
//! decode,1,0,,7.9
//! decode,1,200000,,9.1
//! decode,64,0,,12.4
//! decode,64,200000,,13.6
//! prefill,,,512,21.0
//! prefill,,,8192,240.5
//! ```
//!
//! Decode rows must fill a grid: every batch size at every KV size. Each axis needs at least two
//! points.

use std::collections::BTreeMap;
use std::path::Path;

use super::StepTable;
use crate::diagnostic::did_you_mean;
use crate::settings::{keys, Bad, Values, When};
use crate::workload::datafile::{self, At, Cell, DataError, Format};

const TABLE: When = When::If("engine.step_time.model", &["table"]);

keys! {
/// The table model's keys in `[engine.step_time]`.
KEYS:
"engine.step_time.table" [Text, Absent("the inline arrays below"), TABLE, ""]
    "a CSV file of measured step times (relative to the scenario): columns step (decode or prefill), batch, kv_tokens, tokens, ms", e.g. r#""h100-llama-8b.csv""#;
"engine.step_time.decode_batch" [Numbers(Within(1.0, MAX_BATCH as f64)), Absent("from the table file"), TABLE, ""]
    "inline table: the batch sizes, increasing (log-spaced is best)", e.g. "[1, 8, 64, 256]";
"engine.step_time.decode_kv_tokens" [Numbers(Within(0.0, MAX_KV as f64)), Absent("from the table file"), TABLE, "tokens"]
    "inline table: the KV sizes (tokens the whole batch attends), increasing", e.g. "[0, 500000]";
"engine.step_time.decode_ms" [Numbers(Within(0.0, MAX_MS)), Absent("from the table file"), TABLE, "ms"]
    "inline table: decode step times, one row per batch size (batch sizes × KV sizes values)", e.g. "[8.0, 9.5, 9.0, 10.5, 12.0, 13.5, 20.0, 21.5]";
"engine.step_time.prefill_tokens" [Numbers(Within(1.0, MAX_KV as f64)), Absent("from the table file"), TABLE, "tokens"]
    "inline table: prefill batch sizes in tokens, increasing", e.g. "[512, 2048, 8192]";
"engine.step_time.prefill_ms" [Numbers(Within(0.0, MAX_MS)), Absent("from the table file"), TABLE, "ms"]
    "inline table: prefill batch times, one per size", e.g. "[21.0, 70.0, 240.5]";
}

/// The largest batch size a table may name.
const MAX_BATCH: u64 = 1 << 24;
/// The largest KV or token count a table may name.
const MAX_KV: u64 = 1 << 40;
/// The longest step a table may give, ms.
const MAX_MS: f64 = 1e6;
/// The CSV's columns.
const COLUMNS: &[&str] = &["step", "batch", "kv_tokens", "tokens", "ms"];
/// Bad rows reported before the rest are counted.
const MAX_REPORTED: usize = 12;

fn ps(ms: f64) -> u64 {
    (ms * 1e9).round() as u64
}

/// Read the table of a scenario with `model = "table"`: from the file, or inline.
pub fn read(v: &mut dyn Values) -> Result<StepTable, Bad> {
    const INLINE: [&str; 5] = [
        "decode_batch",
        "decode_kv_tokens",
        "decode_ms",
        "prefill_tokens",
        "prefill_ms",
    ];
    let path = |k: &str| format!("engine.step_time.{k}");
    let mut inline: [Option<Vec<f64>>; 5] = Default::default();
    for (slot, k) in inline.iter_mut().zip(INLINE) {
        *slot = v.opt::<Vec<f64>>(&path(k))?;
    }
    match v.opt::<String>("engine.step_time.table")? {
        Some(file) => {
            if let Some(k) = INLINE.iter().zip(&inline).find(|(_, x)| x.is_some()) {
                let msg = "an inline table cannot be given with a table file";
                return Err(v.bad(
                    &path(k.0),
                    msg,
                    "keep either table = \"file.csv\" or the inline arrays",
                ));
            }
            load_for(v, "engine.step_time.table", &file)
        }
        None => {
            let missing: Vec<&str> = INLINE
                .iter()
                .zip(&inline)
                .filter(|(_, x)| x.is_none())
                .map(|(k, _)| *k)
                .collect();
            if !missing.is_empty() {
                let msg = format!(
                    "model = \"table\" needs a table file or the inline arrays; missing: {}",
                    missing.join(", ")
                );
                let hint = "give table = \"file.csv\" (columns step, batch, kv_tokens, tokens, ms), or decode_batch, decode_kv_tokens, decode_ms, prefill_tokens and prefill_ms";
                return Err(v.fail("engine.step_time.model", "engine.step_time", msg, hint));
            }
            let [b, k, d, t, p] = inline.map(Option::unwrap_or_default);
            inline_table(v, b, k, d, t, p)
        }
    }
}

/// Read the table file at `file` (relative to the scenario) for the key `key`; every bad row is
/// reported at the key, with the file's line.
pub fn load_for(v: &mut dyn Values, key: &str, file: &str) -> Result<StepTable, Bad> {
    match load(&v.base_dir().join(file), file) {
        Ok(t) => Ok(t),
        Err(errors) => {
            for e in errors {
                let at = match e.at {
                    Some(At {
                        line,
                        field: Some(f),
                    }) => format!(":{line}:{f}"),
                    Some(At { line, .. }) => format!(":{line}"),
                    None => String::new(),
                };
                v.bad(key, format!("{file}{at}: {}", e.message), e.hint);
            }
            Err(Bad)
        }
    }
}

fn axis(v: &mut dyn Values, key: &str, xs: &[f64]) -> Result<Vec<u64>, Bad> {
    let path = format!("engine.step_time.{key}");
    if xs.iter().any(|x| x.fract() != 0.0) {
        return Err(v.bad(
            &path,
            "must hold whole numbers",
            "write integers, e.g. [1, 8, 64]",
        ));
    }
    let out: Vec<u64> = xs.iter().map(|&x| x as u64).collect();
    if out.len() < 2 || out.windows(2).any(|w| w[0] >= w[1]) {
        let msg = "must hold at least two values, strictly increasing";
        return Err(v.bad(&path, msg, "e.g. [1, 8, 64, 256]"));
    }
    Ok(out)
}

fn inline_table(
    v: &mut dyn Values,
    batch: Vec<f64>,
    kv: Vec<f64>,
    decode_ms: Vec<f64>,
    tokens: Vec<f64>,
    prefill_ms: Vec<f64>,
) -> Result<StepTable, Bad> {
    let (b, k, t) = (
        axis(v, "decode_batch", &batch),
        axis(v, "decode_kv_tokens", &kv),
        axis(v, "prefill_tokens", &tokens),
    );
    let (b, k, t) = (b?, k?, t?);
    let mut bad = false;
    if decode_ms.len() != b.len() * k.len() {
        let msg = format!(
            "has {} values; {} batch sizes × {} KV sizes need {}",
            decode_ms.len(),
            b.len(),
            k.len(),
            b.len() * k.len()
        );
        v.bad(
            "engine.step_time.decode_ms",
            msg,
            "one row of KV sizes per batch size, row after row",
        );
        bad = true;
    }
    if prefill_ms.len() != t.len() {
        let msg = format!(
            "has {} values for {} prefill sizes",
            prefill_ms.len(),
            t.len()
        );
        v.bad(
            "engine.step_time.prefill_ms",
            msg,
            "one time per value of prefill_tokens",
        );
        bad = true;
    }
    if bad {
        return Err(Bad);
    }
    Ok(StepTable {
        decode_batch: b,
        decode_kv_tokens: k,
        decode_ps: decode_ms.into_iter().map(ps).collect(),
        prefill_tokens: t,
        prefill_ps: prefill_ms.into_iter().map(ps).collect(),
        source: "inline".into(),
    })
}

fn bad(
    line: u64,
    field: Option<usize>,
    message: impl Into<String>,
    hint: impl Into<String>,
) -> DataError {
    DataError {
        at: Some(At { line, field }),
        column: None,
        message: message.into(),
        hint: hint.into(),
    }
}

/// Read a table CSV. `name` is the file as the user wrote it (the table's `source`).
pub fn load(path: &Path, name: &str) -> Result<StepTable, Vec<DataError>> {
    let table = datafile::read(path).map_err(|e| vec![e])?;
    if table.format != Format::Csv {
        return Err(vec![DataError {
            at: None,
            column: None,
            message: "is not a CSV file".into(),
            hint: "a step-time table is CSV with the columns step, batch, kv_tokens, tokens, ms"
                .into(),
        }]);
    }
    let mut errors = Vec::new();
    for (i, c) in table.columns.iter().enumerate() {
        if !COLUMNS.contains(&c.as_str()) {
            let hint = match did_you_mean(c, COLUMNS) {
                Some(close) => format!("did you mean `{close}`?"),
                None => format!("the columns are {}", COLUMNS.join(", ")),
            };
            errors.push(bad(1, Some(i + 1), format!("unknown column `{c}`"), hint));
        }
    }
    for required in ["step", "ms"] {
        if table.column(required).is_none() {
            let hint = "the header must name step, batch, kv_tokens, tokens and ms";
            errors.push(bad(1, None, format!("has no column `{required}`"), hint));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let col = |name: &str| table.column(name);
    let mut decode: BTreeMap<(u64, u64), (u64, u64)> = BTreeMap::new();
    let mut prefill: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut failed = 0usize;
    for (at, cells) in &table.rows {
        let line = at.line;
        let cell =
            |name: &str| col(name).map_or((&Cell::Empty, None), |i| (&cells[i], Some(i + 1)));
        let mut report = |e: DataError| {
            failed += 1;
            if errors.len() < MAX_REPORTED {
                errors.push(e);
            }
        };
        let (ms_cell, ms_field) = cell("ms");
        let ms = match ms_cell {
            Cell::Number(x) if x.is_finite() && (0.0..=MAX_MS).contains(x) => *x,
            other => {
                let hint = "a step time in milliseconds, from 0 to 1,000,000";
                report(bad(
                    line,
                    ms_field,
                    format!("ms: {} is not a step time", other.render()),
                    hint,
                ));
                continue;
            }
        };
        let int = |name: &str, lo: u64, hi: u64| -> Result<u64, DataError> {
            let (c, field) = cell(name);
            match c {
                Cell::Number(x) if x.fract() == 0.0 && (lo as f64..=hi as f64).contains(x) => {
                    Ok(*x as u64)
                }
                other => Err(bad(
                    line,
                    field,
                    format!(
                        "{name}: {} is not a whole number from {lo} to {hi}",
                        other.render()
                    ),
                    format!("a {name} row needs its {name}"),
                )),
            }
        };
        let (step, step_field) = cell("step");
        match step {
            Cell::Text(s) if s == "decode" => {
                let (b, k) = match (int("batch", 1, MAX_BATCH), int("kv_tokens", 0, MAX_KV)) {
                    (Ok(b), Ok(k)) => (b, k),
                    (Err(e), _) | (_, Err(e)) => {
                        report(DataError {
                            hint: "a decode row gives batch, kv_tokens and ms".into(),
                            ..e
                        });
                        continue;
                    }
                };
                if let Some((first, _)) = decode.insert((b, k), (line, ps(ms))) {
                    report(bad(line, None, format!("repeats the decode point at batch {b} and kv_tokens {k} (line {first})"), "give each point once"));
                }
            }
            Cell::Text(s) if s == "prefill" => match int("tokens", 1, MAX_KV) {
                Ok(t) => {
                    if let Some((first, _)) = prefill.insert(t, (line, ps(ms))) {
                        report(bad(
                            line,
                            None,
                            format!("repeats the prefill point at {t} tokens (line {first})"),
                            "give each point once",
                        ));
                    }
                }
                Err(e) => report(DataError {
                    hint: "a prefill row gives tokens and ms".into(),
                    ..e
                }),
            },
            other => report(bad(
                line,
                step_field,
                format!("step: {} is neither decode nor prefill", other.render()),
                "each row is a decode point (batch, kv_tokens, ms) or a prefill point (tokens, ms)",
            )),
        }
    }
    if failed > errors.len() {
        let more = failed - errors.len();
        errors.push(DataError {
            at: None,
            column: None,
            message: format!("and {more} more bad rows"),
            hint: "fix the rows above first".into(),
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    grid(name, decode, prefill)
}

/// The table from its points: decode rows must fill the grid of their batch and KV sizes.
fn grid(
    name: &str,
    decode: BTreeMap<(u64, u64), (u64, u64)>,
    prefill: BTreeMap<u64, (u64, u64)>,
) -> Result<StepTable, Vec<DataError>> {
    let whole = |message: String, hint: &str| DataError {
        at: None,
        column: None,
        message,
        hint: hint.into(),
    };
    let mut batch: Vec<u64> = decode.keys().map(|k| k.0).collect();
    let mut kv: Vec<u64> = decode.keys().map(|k| k.1).collect();
    batch.dedup();
    kv.sort_unstable();
    kv.dedup();
    let mut errors = Vec::new();
    if batch.len() < 2 || kv.len() < 2 {
        let msg = format!("has decode points at {} batch sizes and {} KV sizes; the table needs at least two of each", batch.len(), kv.len());
        errors.push(whole(msg, "measure each batch size at two KV sizes or more, e.g. batch 1 and 64 at kv_tokens 0 and 200000"));
    }
    if prefill.len() < 2 {
        let msg = format!(
            "has {} prefill points; the table needs at least two",
            prefill.len()
        );
        errors.push(whole(
            msg,
            "add prefill rows at two token counts or more, e.g. 512 and 8192",
        ));
    }
    let mut decode_ps = Vec::with_capacity(batch.len() * kv.len());
    for &b in &batch {
        for &k in &kv {
            match decode.get(&(b, k)) {
                Some(&(_, t)) => decode_ps.push(t),
                None if errors.len() < MAX_REPORTED => errors.push(whole(
                    format!("has no decode point at batch {b} and kv_tokens {k}"),
                    "the decode rows must fill a grid: every batch size at every KV size",
                )),
                None => {}
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(StepTable {
        decode_batch: batch,
        decode_kv_tokens: kv,
        decode_ps,
        prefill_tokens: prefill.keys().copied().collect(),
        prefill_ps: prefill.values().map(|v| v.1).collect(),
        source: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> Result<StepTable, Vec<DataError>> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        std::fs::write(&p, text).unwrap();
        load(&p, "t.csv")
    }

    #[test]
    fn a_grid_is_read_in_order_whatever_the_row_order() {
        let t = load_text(
            "step,batch,kv_tokens,tokens,ms\nprefill,,,8192,240\ndecode,64,0,,12\ndecode,1,100,,8.5\n\
             decode,1,0,,8\ndecode,64,100,,12.5\nprefill,,,512,21\n",
        )
        .unwrap();
        assert_eq!(t.decode_batch, vec![1, 64]);
        assert_eq!(t.decode_kv_tokens, vec![0, 100]);
        assert_eq!(
            t.decode_ps,
            vec![8_000_000_000, 8_500_000_000, 12_000_000_000, 12_500_000_000]
        );
        assert_eq!(t.prefill_tokens, vec![512, 8192]);
        assert_eq!(t.prefill_ps, vec![21_000_000_000, 240_000_000_000]);
    }

    #[test]
    fn bad_rows_are_reported_at_their_lines() {
        let e = load_text(
            "step,batch,kv_tokens,tokens,ms\ndecode,1,0,,8\ndecode,x,0,,8\nprefil,,,5,1\nprefill,,,512,-1\ndecode,1,0,,9\n",
        )
        .unwrap_err();
        let lines: Vec<(Option<u64>, &str)> = e
            .iter()
            .map(|e| (e.at.map(|a| a.line), e.message.as_str()))
            .collect();
        assert_eq!(
            lines[0],
            (
                Some(3),
                "batch: \"x\" is not a whole number from 1 to 16777216"
            )
        );
        assert_eq!(
            lines[1],
            (Some(4), "step: \"prefil\" is neither decode nor prefill")
        );
        assert_eq!(lines[2], (Some(5), "ms: -1 is not a step time"));
        assert_eq!(
            lines[3],
            (
                Some(6),
                "repeats the decode point at batch 1 and kv_tokens 0 (line 2)"
            )
        );
    }

    #[test]
    fn a_decode_row_of_batch_zero_is_refused_at_its_line() {
        let e = load_text(
            "step,batch,kv_tokens,tokens,ms\ndecode,1,0,,8\ndecode,0,100,,8\n\
             decode,64,0,,12\ndecode,64,100,,12\nprefill,,,512,21\nprefill,,,8192,240\n",
        )
        .unwrap_err();
        let got: Vec<(Option<u64>, &str)> = e
            .iter()
            .map(|e| (e.at.map(|a| a.line), e.message.as_str()))
            .collect();
        assert_eq!(
            got[0],
            (Some(3), "batch: 0 is not a whole number from 1 to 16777216")
        );
    }

    #[test]
    fn a_hole_in_the_grid_and_a_short_axis_are_refused() {
        let e = load_text("step,batch,kv_tokens,tokens,ms\ndecode,1,0,,8\ndecode,1,100,,8\ndecode,64,0,,12\nprefill,,,512,21\n")
            .unwrap_err();
        let msgs: Vec<&str> = e.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            msgs,
            vec![
                "has 1 prefill points; the table needs at least two",
                "has no decode point at batch 64 and kv_tokens 100"
            ]
        );
        let e = load_text(
            "step,batch,kv_tokens,tokens,ms\ndecode,1,0,,8\nprefill,,,1,2\nprefill,,,2,3\n",
        )
        .unwrap_err();
        assert!(
            e[0].message.contains("1 batch sizes and 1 KV sizes"),
            "{e:?}"
        );
    }

    #[test]
    fn unknown_columns_get_a_suggestion() {
        let e = load_text("step,batch,kv_token,tokens,ms\n").unwrap_err();
        assert_eq!(e[0].message, "unknown column `kv_token`");
        assert_eq!(e[0].hint, "did you mean `kv_tokens`?");
    }

    #[test]
    fn a_step_time_of_exactly_the_longest_accepted_is_read() {
        // MAX_MS = 1,000,000 ms = 10¹⁵ ps.
        let t = load_text(
            "step,batch,kv_tokens,tokens,ms\ndecode,1,0,,8\ndecode,1,100,,8\ndecode,64,0,,12\n\
             decode,64,100,,12\nprefill,,,512,21\nprefill,,,8192,1000000\n",
        )
        .unwrap();
        assert_eq!(t.prefill_ps, vec![21_000_000_000, 1_000_000_000_000_000]);
    }

    #[test]
    fn a_decode_grid_with_one_kv_size_is_refused_however_many_batch_sizes() {
        let e = load_text(
            "step,batch,kv_tokens,tokens,ms\ndecode,1,0,,8\ndecode,64,0,,12\n\
             prefill,,,512,21\nprefill,,,8192,240\n",
        )
        .unwrap_err();
        let msgs: Vec<&str> = e.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            msgs,
            vec!["has decode points at 2 batch sizes and 1 KV sizes; the table needs at least two of each"]
        );
    }
}
