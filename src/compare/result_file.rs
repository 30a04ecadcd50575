//! Reading a benchmark result file: SGLang's `bench_serving` (`--output-file`, one JSON object
//! per line, appended; per-request details with `--output-details`) or vLLM's
//! `vllm bench serve` (`--save-result --save-detailed`, one JSON object).
//!
//! What is read, by key (each a JSON array with one element per request, in send order):
//! `input_lens`, `output_lens`, `ttfts` (seconds), `itls` (seconds, one array per request),
//! optionally `latencies` (vLLM; SGLang writes none, and E2E is then `ttft + Σ itl`),
//! `start_times` and `queue_times` (vLLM), `errors` (a non-empty string marks a failed
//! request); and the scalars `duration`, `request_rate` (a number, `"inf"`, or Python's
//! `Infinity` that SGLang's `json.dumps` writes), `max_concurrency`, `burstiness`, `backend`,
//! `model_id`, `date`, and labels a run may carry (`gpu`, `tp`).

use std::path::Path;

use serde_json::Value;
use thiserror::Error;

use super::Sample;

/// Why a result file cannot be read.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ResultFileError {
    /// The file cannot be read.
    #[error("cannot read `{path}`: {message}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// A line is not JSON.
    #[error("line {line} is not JSON: {message}")]
    NotJson {
        /// 1-based line (the whole file for a single JSON document).
        line: usize,
        /// serde_json's message.
        message: String,
    },
    /// The file holds no result.
    #[error("the file holds no result object")]
    Empty,
    /// A key is missing.
    #[error("`{key}` is missing{why}")]
    Missing {
        /// The key path.
        key: String,
        /// Why it is needed.
        why: String,
    },
    /// A value has the wrong type or is out of range.
    #[error("`{key}` is {found}, expected {expected}")]
    Bad {
        /// The key path, with the index (`ttfts[3]`).
        key: String,
        /// What was found.
        found: String,
        /// What was expected.
        expected: &'static str,
    },
    /// Per-request arrays of different lengths.
    #[error("`{key}` has {len} elements and `input_lens` has {expected}: the per-request arrays must have one element per request")]
    Lengths {
        /// The key.
        key: String,
        /// Its length.
        len: usize,
        /// `input_lens`' length.
        expected: usize,
    },
    /// No request succeeded.
    #[error("no request of the file succeeded (every `errors` entry is set or every output length is 0)")]
    NoSuccess,
}

impl ResultFileError {
    /// How to fix it.
    pub fn hint(&self) -> &'static str {
        match self {
            ResultFileError::Io { .. } => "give the path of a result file",
            ResultFileError::NotJson { .. } | ResultFileError::Empty => {
                "give the file written by `python -m sglang.bench_serving --output-file F --output-details` or `vllm bench serve --save-result --save-detailed`"
            }
            ResultFileError::Missing { .. } => {
                "save the per-request details: bench_serving's --output-details, vllm bench serve's --save-detailed"
            }
            ResultFileError::Bad { .. } | ResultFileError::Lengths { .. } => {
                "the file may have been edited or cut; write it again with the benchmark"
            }
            ResultFileError::NoSuccess => "there is nothing to compare: run the benchmark again",
        }
    }
}

/// The arrival process of the benchmark run.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrivals {
    /// Each request's own start time (vLLM's `start_times` minus its `queue_times`), seconds
    /// from the first.
    Given(Vec<f64>),
    /// `--request-rate R` (Poisson, or gamma with `burstiness` ≠ 1); the seed is unknown.
    Rate {
        /// Requests per second.
        rate_per_s: f64,
        /// vLLM's `--burstiness` (gamma shape); 1 for Poisson and for SGLang.
        burstiness: f64,
    },
    /// `--request-rate inf`: everything at once (under `max_concurrency`).
    AllAtOnce,
}

/// A benchmark result file, read.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchFile {
    /// Which tool wrote it: `vllm bench serve` (it writes `date` and `model_id`) or
    /// `sglang.bench_serving`.
    pub tool: &'static str,
    /// `backend`.
    pub backend: Option<String>,
    /// `model_id` (vLLM), or `server_info.model_path` (SGLang).
    pub model_id: Option<String>,
    /// `date` (vLLM).
    pub date: Option<String>,
    /// The GPU, when the run was labelled with it (`vllm bench serve --metadata gpu=…`, which
    /// vLLM writes as a top-level key; `gpu` or `hardware`).
    pub gpu: Option<String>,
    /// GPUs of the server, when labelled (`--metadata tp=…`; `tp`, `tensor_parallel` or
    /// `tensor_parallel_size`).
    pub tensor_parallel: Option<u32>,
    /// `duration` (s).
    pub duration_s: f64,
    /// `max_concurrency`.
    pub max_concurrency: Option<u32>,
    /// How requests were sent.
    pub arrivals: Arrivals,
    /// Every successful request, in send order.
    pub samples: Vec<Sample>,
    /// Requests that failed (left out of the replay, as bench_serving leaves them out of its
    /// metrics).
    pub failed: usize,
    /// For a file of several results (SGLang appends one per run): which line was read, of
    /// how many.
    pub line: (usize, usize),
}

/// Replace Python's `Infinity`, `-Infinity` and `NaN` (which `json.dumps` writes and JSON
/// does not have) outside strings by `"inf"`, `"-inf"` and `null`.
fn python_literals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_str, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_str {
            in_str = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if c == '"' {
            in_str = true;
        } else {
            let swap = [
                ("-Infinity", "\"-inf\""),
                ("Infinity", "\"inf\""),
                ("NaN", "null"),
            ];
            if let Some((from, to)) = swap.iter().find(|(f, _)| rest.starts_with(f)) {
                out.push_str(to);
                rest = &rest[from.len()..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The largest result file read (bytes): far above bench_serving's details for 10⁶ requests.
pub const MAX_RESULT_FILE_BYTES: u64 = 1 << 30;

/// Read a result file. A file of several JSON lines (SGLang appends one per run) gives its
/// last line.
pub fn load(path: &Path) -> Result<BenchFile, ResultFileError> {
    // bench_serving's details may sit on one line: a size cap, not a line cap.
    let text =
        crate::files::read_text(path, MAX_RESULT_FILE_BYTES).map_err(|e| ResultFileError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    parse(&text)
}

/// Read a result file's text.
pub fn parse(text: &str) -> Result<BenchFile, ResultFileError> {
    let text = python_literals(text);
    let whole: Result<Value, _> = serde_json::from_str(&text);
    let (v, line) = match whole {
        Ok(v) => (v, (1, 1)),
        Err(whole_err) => {
            let lines: Vec<(usize, &str)> = (text.lines().enumerate())
                .filter(|(_, l)| !l.trim().is_empty())
                .collect();
            let Some(&(last, _)) = lines.last() else {
                return Err(ResultFileError::Empty);
            };
            if lines.len() == 1 {
                let message = whole_err.to_string();
                return Err(ResultFileError::NotJson { line: 1, message });
            }
            for &(i, l) in &lines {
                serde_json::from_str::<Value>(l).map_err(|e| ResultFileError::NotJson {
                    line: i + 1,
                    message: e.to_string(),
                })?;
            }
            let v = serde_json::from_str(lines[lines.len() - 1].1).expect("invariant: checked");
            (v, (last + 1, lines.len()))
        }
    };
    let Value::Object(_) = v else {
        return Err(bad("(the top level)", &v, "a JSON object"));
    };
    read(&v, line)
}

fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("\"{s}\""),
        Value::Array(a) => format!("an array of {}", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

fn bad(key: &str, v: &Value, expected: &'static str) -> ResultFileError {
    ResultFileError::Bad {
        key: key.into(),
        found: kind(v),
        expected,
    }
}

fn missing(key: &str, why: &str) -> ResultFileError {
    ResultFileError::Missing {
        key: key.into(),
        why: why.into(),
    }
}

/// A number ≥ 0.
fn seconds(v: &Value, key: &str) -> Result<f64, ResultFileError> {
    match v.as_f64() {
        Some(x) if x >= 0.0 && x.is_finite() => Ok(x),
        _ => Err(bad(key, v, "a number of seconds, 0 or more")),
    }
}

/// An array of per-request values, of `n` elements when `n` is given.
fn array<'v>(
    o: &'v Value,
    key: &str,
    n: Option<usize>,
) -> Result<Option<&'v Vec<Value>>, ResultFileError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => match n {
            Some(n) if a.len() != n => Err(ResultFileError::Lengths {
                key: key.into(),
                len: a.len(),
                expected: n,
            }),
            _ => Ok(Some(a)),
        },
        Some(v) => Err(bad(key, v, "an array with one element per request")),
    }
}

fn need<'v>(o: &'v Value, key: &str, n: Option<usize>) -> Result<&'v Vec<Value>, ResultFileError> {
    array(o, key, n)?.ok_or_else(|| missing(key, ": the per-request details are needed"))
}

fn read(o: &Value, line: (usize, usize)) -> Result<BenchFile, ResultFileError> {
    let input = need(o, "input_lens", None)?;
    let n = Some(input.len());
    let output = need(o, "output_lens", n)?;
    let ttfts = need(o, "ttfts", n)?;
    let itls = need(o, "itls", n)?;
    let latencies = array(o, "latencies", n)?;
    let errors = array(o, "errors", n)?;
    let tokens = |a: &Vec<Value>, key: &str, i: usize, min: u64| match a[i].as_u64() {
        Some(x) if x >= min && x <= u64::from(u32::MAX) => Ok(x as u32),
        _ => Err(bad(
            &format!("{key}[{i}]"),
            &a[i],
            "a whole number of tokens",
        )),
    };
    let mut samples = Vec::new();
    let mut kept = Vec::new();
    for i in 0..input.len() {
        let failed = errors.is_some_and(|e| e[i].as_str().is_some_and(|s| !s.is_empty()));
        let output_tokens = tokens(output, "output_lens", i, 0)?;
        if failed || output_tokens == 0 {
            continue;
        }
        let key = format!("itls[{i}]");
        let gaps = match &itls[i] {
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(j, x)| seconds(x, &format!("{key}[{j}]")))
                .collect::<Result<Vec<f64>, _>>()?,
            v => return Err(bad(&key, v, "an array of inter-token gaps in seconds")),
        };
        let ttft_s = seconds(&ttfts[i], &format!("ttfts[{i}]"))?;
        let e2e_s = match latencies {
            Some(l) => seconds(&l[i], &format!("latencies[{i}]"))?,
            None => ttft_s + gaps.iter().sum::<f64>(),
        };
        samples.push(Sample {
            input_tokens: tokens(input, "input_lens", i, 1)?,
            output_tokens,
            ttft_s,
            itls_s: gaps,
            e2e_s,
            start_s: None,
        });
        kept.push(i);
    }
    if samples.is_empty() {
        return Err(ResultFileError::NoSuccess);
    }
    let failed = input.len() - samples.len();
    let duration_s = match o.get("duration") {
        Some(v) => match seconds(v, "duration")? {
            d if d > 0.0 => d,
            _ => return Err(bad("duration", v, "a positive number of seconds")),
        },
        None => return Err(missing("duration", ": the throughputs are over it")),
    };
    let max_concurrency = match o.get("max_concurrency") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(c) if (1..=u64::from(u32::MAX)).contains(&c) => Some(c as u32),
            _ => {
                return Err(bad(
                    "max_concurrency",
                    v,
                    "null or a whole number, at least 1",
                ))
            }
        },
    };
    let arrivals = arrivals(o, n, &kept)?;
    let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    let vllm = o.get("model_id").is_some() || o.get("date").is_some();
    Ok(BenchFile {
        tool: if vllm {
            "vllm bench serve"
        } else {
            "sglang.bench_serving"
        },
        backend: text("backend"),
        model_id: text("model_id").or_else(|| {
            let info = o.get("server_info")?;
            info.get("model_path")?.as_str().map(str::to_string)
        }),
        date: text("date"),
        gpu: text("gpu").or_else(|| text("hardware")),
        tensor_parallel: ["tp", "tensor_parallel", "tensor_parallel_size"]
            .iter()
            .find_map(|k| match o.get(*k)? {
                Value::String(s) => s.parse().ok(),
                v => v.as_u64().and_then(|n| u32::try_from(n).ok()),
            }),
        duration_s,
        max_concurrency,
        arrivals,
        samples,
        failed,
        line,
    })
}

fn arrivals(o: &Value, n: Option<usize>, kept: &[usize]) -> Result<Arrivals, ResultFileError> {
    if let Some(starts) = array(o, "start_times", n)? {
        let queue = array(o, "queue_times", n)?;
        let mut at = Vec::with_capacity(kept.len());
        for &i in kept {
            let s = seconds(&starts[i], &format!("start_times[{i}]"))?;
            let q = match queue {
                Some(q) => seconds(&q[i], &format!("queue_times[{i}]"))?,
                None => 0.0,
            };
            at.push(s - q);
        }
        let first = at.iter().copied().fold(f64::INFINITY, f64::min);
        return Ok(Arrivals::Given(at.iter().map(|t| t - first).collect()));
    }
    let burstiness = match o.get("burstiness") {
        None | Some(Value::Null) => 1.0,
        Some(v) => match v.as_f64() {
            Some(b) if b > 0.0 && b.is_finite() => b,
            _ => return Err(bad("burstiness", v, "a positive number")),
        },
    };
    match o.get("request_rate") {
        None | Some(Value::Null) => Err(missing(
            "request_rate",
            ": the arrival process follows from it",
        )),
        Some(Value::String(s)) if s == "inf" => Ok(Arrivals::AllAtOnce),
        Some(v) => match v.as_f64() {
            Some(r) if r > 0.0 && r.is_finite() => Ok(Arrivals::Rate {
                rate_per_s: r,
                burstiness,
            }),
            _ => Err(bad(
                "request_rate",
                v,
                "a positive number or \"inf\" (\"trace\" needs vLLM's start_times)",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"{"backend": "sglang", "request_rate": Infinity, "max_concurrency": 2,
        "duration": 2.0, "input_lens": [10, 20], "output_lens": [3, 0], "ttfts": [0.1, 0.0],
        "itls": [[0.02, 0.03], []], "errors": ["", "boom"], "server_info": {"model_path": "m"}}"#;

    #[test]
    fn sglang_files_with_python_infinity_read_and_failed_requests_are_left_out() {
        let f = parse(ONE).unwrap();
        assert_eq!(f.tool, "sglang.bench_serving");
        assert_eq!(f.arrivals, Arrivals::AllAtOnce);
        assert_eq!((f.samples.len(), f.failed), (1, 1));
        assert!((f.samples[0].e2e_s - 0.15).abs() < 1e-12);
        assert_eq!(f.model_id.as_deref(), Some("m"));
        assert_eq!(
            python_literals(r#"["Infinity", -Infinity, NaN]"#),
            r#"["Infinity", "-inf", null]"#
        );
    }

    #[test]
    fn the_last_line_of_appended_results_is_read_and_bad_values_name_their_key() {
        let two = format!("{}\n{}\n", ONE.replace('\n', " "), ONE.replace('\n', " "));
        assert_eq!(parse(&two).unwrap().line, (2, 2));
        let e = parse(&ONE.replace("[0.1, 0.0]", "[-0.1, 0.0]")).unwrap_err();
        assert!(e.to_string().starts_with("`ttfts[0]` is -0.1"), "{e}");
        let e = parse(&ONE.replace("[3, 0]", "[3]")).unwrap_err();
        assert!(
            matches!(
                e,
                ResultFileError::Lengths {
                    len: 1,
                    expected: 2,
                    ..
                }
            ),
            "{e}"
        );
        let e = parse(&ONE.replace("\"ttfts\"", "\"ttft\"")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`ttfts` is missing: the per-request details are needed"
        );
        assert!(matches!(
            parse("{oops"),
            Err(ResultFileError::NotJson { line: 1, .. })
        ));
    }
}
