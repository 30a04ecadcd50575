//! Same scenario and seed: byte-identical outputs — also when the lengths were drawn ahead for
//! runs that share them (`workload::Predrawn`).

use std::sync::Arc;

use proptest::prelude::*;
use servesim::analysis;
use servesim::engine::{self, RunOptions};
use servesim::report::{server_log, summary, timeseries};
use servesim::scenario::{self, Source};
use servesim::workload::Predrawn;

fn outputs(sets: &[&str]) -> (String, Vec<u8>, String) {
    outputs_with(sets, None)
}

/// The run's summary JSON, time series and log, the first `kept` lengths drawn ahead (`None`:
/// drawn as it goes).
fn outputs_with(sets: &[&str], kept: Option<u64>) -> (String, Vec<u8>, String) {
    let src = Source::builtin_b2();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let sc = scenario::load(&src, &sets).unwrap();
    let predrawn = kept.map(|n| {
        let p = Predrawn::new(sc.seed, &sc.workload, n).unwrap();
        assert!(p.serves(sc.seed, &sc.workload), "the draws are this run's");
        Arc::new(p)
    });
    let r = engine::run(
        &sc,
        &RunOptions {
            keep_log: true,
            predrawn,
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

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::cases(12), .. ProptestConfig::default() })]
    /// Any number of draws made ahead — none, some, all the run sends, more — gives the run of
    /// its own draws, whatever the distributions, the client and shared prefixes.
    #[test]
    fn lengths_drawn_ahead_give_the_same_run(
        seed in 0u64..1_000,
        kept in prop_oneof![Just(0u64), 1u64..600, Just(600), 601u64..2_000],
        normal in any::<bool>(),
        poisson in any::<bool>(),
        prefixes in any::<bool>(),
    ) {
        let mut sets = vec![format!("seed={seed}"), "workload.requests=600".to_string()];
        if normal {
            // Truncated: a draw takes a varying number of words.
            sets.push(r#"workload.prompt_tokens={ dist = "normal", mean = 900, std = 700, min = 500, max = 1500 }"#.into());
        }
        if poisson {
            sets.push(r#"client={ mode = "poisson", rate_per_s = 40 }"#.into());
        }
        if prefixes {
            sets.push("workload.prefix_groups={ a = { tokens = 300, share = 0.5 }, b = { tokens = 90, share = 0.3 } }".into());
        }
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        prop_assert_eq!(outputs_with(&sets, Some(kept)), outputs(&sets));
    }
}
