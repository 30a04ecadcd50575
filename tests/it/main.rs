//! servesim's integration tests, in one binary.

mod bounds;
mod calibrate;
mod cli;
mod compare;
mod corpus;
mod determinism;
mod differential;
mod engines;
mod explain;
mod explain_check;
mod faults;
mod golden;
mod hand;
mod invariants;
mod lengths_file;
mod memory;
mod outputs;
mod overhead;
mod plan;
mod plots;
mod queueing;
mod scenarios;
mod schema;
mod scorecard;
mod steady;
mod step_time;
mod table;
mod trace;

use std::path::PathBuf;

use servesim::engine::{self, RunOptions};
use servesim::metrics::RunResult;
use servesim::scenario::{self, Scenario, Source};

/// A scenario from TOML text (panics with the rendered problems if invalid).
pub fn scenario(text: &str) -> Scenario {
    let src = Source {
        name: "test.toml".into(),
        base_dir: PathBuf::from("."),
        text: text.into(),
    };
    match scenario::load(&src, &[]) {
        Ok(s) => s,
        Err(e) => {
            let lines: Vec<String> = e.problems.iter().map(|p| e.problem_line(p)).collect();
            panic!("test scenario is invalid:\n{}", lines.join("\n"))
        }
    }
}

/// Run with request records and the log kept.
pub fn run(sc: &Scenario) -> RunResult {
    engine::run(
        sc,
        &RunOptions {
            keep_log: true,
            keep_requests: true,
            ..RunOptions::default()
        },
    )
    .expect("the run finishes")
}

/// Run `toml` with `trace.csv` (beside it, in a temporary directory) holding `trace`, keeping
/// its log and requests.
pub fn run_with_trace(toml: &str, trace: &str) -> RunResult {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    let src = Source {
        name: "test.toml".into(),
        base_dir: dir.path().to_path_buf(),
        text: toml.into(),
    };
    let sc = scenario::load(&src, &[]).unwrap_or_else(|e| panic!("{:?}", e.problems));
    run(&sc)
}

/// The cases of a random test: `n`, or proptest's `PROPTEST_CASES` when it is set — for a soak
/// of thousands in a release build (`tests/README.md`).
pub fn cases(n: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n)
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
