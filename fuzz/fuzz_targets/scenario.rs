//! Fuzz scenario parsing, overrides, validation and (for valid scenarios) a short run.
//!
//! The input is scenario text; lines of the form `#set KEY=VALUE` (TOML comments) are also
//! applied as `--set` overrides. Valid scenarios are run with at most 40 requests and 200,000
//! scheduler batches, so that every input finishes quickly. Any panic is a bug.

#![no_main]

use libfuzzer_sys::fuzz_target;
use servesim::engine::{self, RunOptions};
use servesim::scenario::{self, Source};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let sets: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#set "))
        .map(str::to_string)
        .collect();
    let src = Source {
        name: "fuzz.toml".into(),
        // No files next to it: CSV and catalog references fail cleanly.
        base_dir: std::path::PathBuf::from("/nonexistent-servesim-fuzz"),
        text: text.to_string(),
    };
    let Ok(sc) = scenario::load(&src, &sets) else {
        return;
    };
    let mut small = sets.clone();
    small.push(format!("workload.requests={}", sc.workload.requests.min(40)));
    small.push("run.max_events=200000".into());
    small.push(format!(
        "run.max_sim_s={}",
        sc.run.max_sim.map_or(3600.0, |d| d.as_secs_f64().min(3600.0))
    ));
    if let Ok(sc) = scenario::load(&src, &small) {
        let _ = engine::run(&sc, &RunOptions::default());
    }
});
