//! Same scenario and seed: byte-identical outputs.

use servesim::analysis;
use servesim::engine::{self, RunOptions};
use servesim::report::{server_log, summary, timeseries};
use servesim::scenario::{self, Source};

fn outputs(sets: &[&str]) -> (String, Vec<u8>, String) {
    let src = Source::builtin_b2();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sc = scenario::load(&src, &sets).unwrap();
    let r = engine::run(
        &sc,
        &RunOptions {
            keep_log: true,
            ..RunOptions::default()
        },
    )
    .unwrap();
    let a = analysis::analyse(&r);
    let s = summary::summarize(&sc, &r, &a);
    (
        summary::to_json(&s),
        timeseries::to_csv(&r, sc.workload.shares_prefixes()),
        server_log::render(sc.engine.kind(), &r.log, 8),
    )
}

#[test]
fn the_same_seed_gives_byte_identical_json_csv_and_log() {
    let a = outputs(&["workload.requests=600", "engine.schedule_policy=random"]);
    let b = outputs(&["workload.requests=600", "engine.schedule_policy=random"]);
    assert_eq!(a.0, b.0);
    assert_eq!(a.1, b.1);
    assert_eq!(a.2, b.2);
}

#[test]
fn another_seed_gives_another_run() {
    let a = outputs(&["workload.requests=600"]);
    let b = outputs(&["workload.requests=600", "seed=99"]);
    assert_ne!(a.0, b.0);
}
