//! Golden traces: workloads run through the engines' own scheduler code (SGLang 0.5.23, vLLM
//! 0.33.0, driven on a CPU by `scripts/golden/`), replayed through servesim and compared request
//! by request — first token and finish within 1 ms (far below one step, so any different
//! decision shows), the same number of evictions (retractions / preemptions), and, where the
//! oracle recorded them, the same prompt tokens found cached at the first admission.
//!
//! Each case is a directory of `tests/fixtures/golden/<engine>/`: `scenario.toml` (the case as a
//! servesim scenario, replaying `workload.csv`) and the oracle's `requests.csv` — or, for a case
//! where the engine raises out of memory, `crash.csv`: when (within 1 ms), the tokens its batch
//! asked for and the tokens free, which servesim's run must stop with.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use servesim::engine::{self, RunOptions, SimError};
use servesim::metrics::{RequestRecord, RunResult};
use servesim::scenario::{self, Source};

use crate::root;

/// One second in nanoseconds.
const NS: f64 = 1e9;
/// The tolerance on a time: 1 ms.
const TOLERANCE_S: f64 = 1e-3;

/// What the oracle recorded for one request.
#[derive(Debug)]
struct Expected {
    first_token_s: Option<f64>,
    finish_s: Option<f64>,
    evictions: u32,
    /// Prompt tokens found cached at the first admission, where the oracle recorded them.
    cached_tokens: Option<u32>,
}

fn cases(engine: &str) -> Vec<PathBuf> {
    let dir = root().join("tests/fixtures/golden").join(engine);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("scenario.toml").exists())
        .collect();
    out.sort();
    out
}

/// The oracle's `requests.csv`, by request index. SGLang's names the evictions `retractions`,
/// vLLM's `num_preemptions`.
fn expected(dir: &Path) -> BTreeMap<u64, Expected> {
    let mut reader = csv::Reader::from_path(dir.join("requests.csv")).unwrap();
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let id = col("id").unwrap();
    let first = col("first_token").unwrap();
    let finish = col("finish").unwrap();
    let evictions = col("retractions").or(col("num_preemptions")).unwrap();
    let cached = col("cached_tokens").or(col("num_cached_tokens"));
    let time = |s: &str| (!s.is_empty()).then(|| s.parse::<f64>().unwrap());
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            (
                r[id].parse().unwrap(),
                Expected {
                    first_token_s: time(&r[first]),
                    finish_s: time(&r[finish]),
                    evictions: r[evictions].parse().unwrap_or(0),
                    cached_tokens: cached.and_then(|c| r[c].parse().ok()),
                },
            )
        })
        .collect()
}

/// A case where the engine raised out of memory: servesim's run must stop with the same numbers
/// at the same instant.
fn crash_differences(dir: &Path, run: Result<RunResult, SimError>) -> Vec<String> {
    let mut reader = csv::Reader::from_path(dir.join("crash.csv")).unwrap();
    let row = reader.records().next().unwrap().unwrap();
    let (at_s, need, free): (f64, u64, u64) = (
        row[0].parse().unwrap(),
        row[1].parse().unwrap(),
        row[2].parse().unwrap(),
    );
    match run {
        Err(SimError::OutOfMemory {
            at_s: got_at,
            need_tokens,
            free_tokens,
            ..
        }) if (got_at - at_s).abs() <= TOLERANCE_S
            && (need_tokens, free_tokens) == (need, free) =>
        {
            Vec::new()
        }
        other => vec![format!(
            "the engine runs out of memory at {at_s} s asking for {need} tokens with {free} free; servesim: {}",
            match other {
                Ok(_) => "the run ended normally".to_string(),
                Err(e) => e.to_string(),
            }
        )],
    }
}

/// Replay one case; the differences from the oracle, one line each.
fn differences(dir: &Path) -> Vec<String> {
    let src = Source::read(&dir.join("scenario.toml")).unwrap();
    let sc = scenario::load(&src, &[]).unwrap_or_else(|e| {
        let lines: Vec<String> = e.problems.iter().map(|p| e.problem_line(p)).collect();
        panic!("{}: {}", dir.display(), lines.join("\n"))
    });
    let horizon_s = sc.run.max_sim.map(|d| d.as_secs_f64());
    let run = engine::run(
        &sc,
        &RunOptions {
            keep_requests: true,
            ..RunOptions::default()
        },
    );
    if dir.join("crash.csv").exists() {
        return crash_differences(dir, run);
    }
    let r = run.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let got: BTreeMap<u64, &RequestRecord> = r.requests.iter().map(|q| (q.seq, q)).collect();
    let mut out = Vec::new();
    for (id, want) in expected(dir) {
        // The oracle finishes the step that crosses its horizon; servesim stops at it. Compare
        // only what both saw before the horizon.
        let before = |t: Option<f64>| t.filter(|&t| horizon_s.is_none_or(|h| t < h));
        let want_first = before(want.first_token_s);
        let want_finish = before(want.finish_s);
        let rec = got.get(&id);
        let got_first = rec.and_then(|q| q.first_token_ns).map(|ns| ns as f64 / NS);
        let got_finish = rec.filter(|q| q.completed).map(|q| q.done_ns as f64 / NS);
        let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() <= TOLERANCE_S,
            (None, None) => true,
            _ => false,
        };
        // A request unfinished by the horizon has no record here: its first token is unknown.
        let first_ok = rec.is_none() && want_finish.is_none() || close(want_first, got_first);
        let finish_ok = close(want_finish, got_finish);
        let evictions_ok =
            want_finish.is_none() || rec.is_some_and(|q| q.retractions == want.evictions);
        let got_cached = rec.map(|q| q.cached_tokens);
        let cached_ok = want_finish.is_none()
            || want.cached_tokens.is_none()
            || want.cached_tokens == got_cached;
        if !(first_ok && finish_ok && evictions_ok && cached_ok) {
            out.push(format!(
                "request {id}: first token {want_first:?} vs {got_first:?}, finish {want_finish:?} vs {got_finish:?}, evictions {} vs {:?}, cached {:?} vs {got_cached:?}",
                want.evictions,
                rec.map(|q| q.retractions),
                want.cached_tokens,
            ));
        }
    }
    out
}

fn check(engine: &str, skip: &[&str]) {
    let all = cases(engine);
    assert!(!all.is_empty(), "no {engine} golden cases");
    let mut failures = Vec::new();
    let mut compared = 0;
    for dir in &all {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if skip.iter().any(|s| name.starts_with(s)) {
            continue;
        }
        compared += 1;
        let diff = differences(dir);
        if !diff.is_empty() {
            let shown: Vec<&String> = diff.iter().take(5).collect();
            failures.push(format!(
                "{engine}/{name}: {} requests differ, e.g.\n    {}",
                diff.len(),
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n    ")
            ));
        }
    }
    assert!(compared >= 6, "only {compared} {engine} cases compared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn sglang_golden_traces_match_request_by_request() {
    check("sglang", &[]);
}

#[test]
fn vllm_golden_traces_match_request_by_request() {
    check("vllm", &[]);
}
