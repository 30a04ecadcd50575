//! Fuzz scenario parsing, overrides, grids, data files, validation and (for valid scenarios) a
//! short run of either engine with its reports.
//!
//! The input is scenario text, with optional lines (TOML comments, so scenario files seed it):
//!
//! * `#set KEY=VALUE` — applied as `--set` overrides;
//! * `#vary KEY=SPEC` — parsed as `--vary` axes; the grid's first point is applied as overrides;
//! * `#step-by-step` — run the reference engine instead of fast-forward;
//! * `#bench` — keep every request and its token times and build `run --format bench-json`'s line;
//! * `#--- data` — everything after this line is a data file, readable from the scenario as
//!   `d.csv`, `d.jsonl`, `d.ndjson`, `d.json` or `d.toml` (traces, lengths files, `empirical`
//!   columns, step-time tables, catalogs); the data files of `tests/corpus/` sit beside it.
//!
//! Valid scenarios are run with at most 40 requests and 200,000 scheduler batches, so that every
//! input finishes quickly; then analysed and summarized (JSON, text, time series, server log, requests CSV).
//! A fast-forwarded run is then run again step by step, and everything it wrote must be the
//! same bytes (the differential tests' rule, on inputs nobody wrote by hand). Any panic is a bug.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use servesim::engine::{self, RunOptions, Stepping};
use servesim::scenario::{self, Source};
use servesim::{analysis, compare, report, sweep};

const DATA_MARK: &str = "#--- data\n";
const DATA_NAMES: [&str; 5] = ["d.csv", "d.jsonl", "d.ndjson", "d.json", "d.toml"];

/// A directory of this process: `d` (rewritten for every input), links to it under the names
/// above, and copies of the corpus's data files.
fn data_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("servesim-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("d"), b"").unwrap();
        for n in DATA_NAMES {
            let _ = std::fs::remove_file(dir.join(n));
            std::os::unix::fs::symlink("d", dir.join(n)).unwrap();
        }
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus");
        for e in std::fs::read_dir(corpus).into_iter().flatten().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "csv") {
                let _ = std::fs::copy(&p, dir.join(p.file_name().unwrap()));
            }
        }
        dir
    })
}

fn marked<'a>(text: &'a str, mark: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    text.lines().filter_map(move |l| l.strip_prefix(mark))
}

fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l.trim_end() == line)
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let (text, file) = match input.split_once(DATA_MARK) {
        Some((t, f)) => (t, f),
        None => (input, ""),
    };
    let dir = data_dir();
    std::fs::write(dir.join("d"), file).unwrap();
    let mut sets: Vec<String> = marked(text, "#set ").map(str::to_string).collect();
    let axes: Vec<sweep::Axis> = marked(text, "#vary ")
        .filter_map(|a| sweep::parse_vary(a).ok())
        .collect();
    if !axes.is_empty() && axes.iter().map(|a| a.values.len() as f64).product::<f64>() <= 1e4 {
        if let Ok(points) = sweep::points(&axes) {
            sets.extend(points.into_iter().next().unwrap_or_default());
        }
    }
    let src = Source {
        name: "fuzz.toml".into(),
        base_dir: dir.to_path_buf(),
        text: text.to_string(),
    };
    let Ok(sc) = scenario::load(&src, &sets) else {
        return;
    };
    if let Some(m) = &sc.memory {
        let _ = report::memory::derivation(m, &sc.name);
    }
    let mut small = sets.clone();
    small.push(format!("workload.requests={}", sc.workload.requests.min(40)));
    small.push("run.max_events=200000".into());
    small.push(format!(
        "run.max_sim_s={}",
        sc.run.max_sim.map_or(3600.0, |d| d.as_secs_f64().min(3600.0))
    ));
    let Ok(sc) = scenario::load(&src, &small) else {
        return;
    };
    let bench = has_line(text, "#bench");
    let step_by_step = has_line(text, "#step-by-step") || bench;
    let first = run_and_report(&sc, &src.name, step_by_step, bench);
    // Differential: a fast-forwarded run that finished must write exactly what the step-by-step
    // reference writes (unless the reference runs out of `run.max_events` batches first).
    if let (false, Some(fast)) = (step_by_step, first) {
        if let Some(slow) = run_and_report(&sc, &src.name, true, false) {
            assert!(fast.rows == slow.rows, "requests CSV differs from step by step");
            assert!(fast.summary == slow.summary, "summary JSON differs from step by step");
            assert!(fast.series == slow.series, "time series differs from step by step");
            assert!(fast.log == slow.log, "server log differs from step by step");
        }
    }
});

/// What a run writes.
struct Written {
    summary: String,
    series: Vec<u8>,
    log: String,
    rows: Vec<u8>,
}

/// Run `sc` (fast-forwarded or step by step) and build every report; `None` if the run stopped
/// with an error (e.g. out of batches).
fn run_and_report(sc: &scenario::Scenario, name: &str, step_by_step: bool, bench: bool) -> Option<Written> {
    let opts = RunOptions {
        stepping: if step_by_step {
            Stepping::StepByStep
        } else {
            Stepping::FastForward
        },
        keep_log: true,
        keep_requests: bench,
        keep_token_times: bench,
        ..RunOptions::default()
    };
    let kind = sc.engine.kind();
    let header = report::requests::header(servesim::scheduler::words(kind));
    let mut rows = servesim::csv_rows::writer(Vec::new(), &header).unwrap();
    let mut row = |r: &servesim::metrics::RequestRecord| {
        rows.serialize(report::requests::Row::from(r)).unwrap();
    };
    let result = engine::run_with_sink(sc, &opts, Some(&mut row)).ok()?;
    let a = analysis::analyse(&result);
    let summary = report::summary::summarize(sc, &result, &a);
    let json = report::summary::to_json(&summary);
    let _ = report::text::render(&summary, name);
    let series = report::timeseries::to_csv(&result, sc.workload.shares_prefixes());
    let tp = sc.hardware.as_ref().map_or(1, |h| h.tensor_parallel);
    let log = report::server_log::render(kind, &result.log, tp);
    if bench {
        let (samples, duration_s) = compare::simulated(sc, &result);
        let _ = compare::bench_json::BenchJson::new(sc, &samples, duration_s).to_line();
    }
    Some(Written {
        summary: json,
        series,
        log,
        rows: rows.into_inner().unwrap(),
    })
}
