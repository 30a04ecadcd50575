//! The built-in scenarios: every file validates and runs; the case studies reproduce the
//! figures of `shared/spec/product.md`.

use servesim::analysis;
use servesim::engine::{self, RunOptions};
use servesim::report::summary;
use servesim::scenario::{self, Source};

use crate::root;

fn summary_of(path: &str) -> summary::Summary {
    let src = Source::read(&root().join(path)).unwrap();
    let sc = scenario::load(&src, &[]).unwrap();
    let r = engine::run(&sc, &RunOptions::default()).unwrap();
    summary::summarize(&sc, &r, &analysis::analyse(&r))
}

#[test]
fn every_scenario_file_is_valid() {
    let mut n = 0;
    for entry in walk(&root().join("scenarios")) {
        let src = Source::read(&entry).unwrap();
        if let Err(e) = scenario::load(&src, &[]) {
            panic!("{} is invalid: {:?}", entry.display(), e.problems);
        }
        n += 1;
    }
    assert!(n >= 2);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn case_study_b2_reproduces_the_observed_figures() {
    let s = summary_of("scenarios/case-study-b2.toml");
    assert!(!s.observations.is_empty());
    for o in &s.observations {
        assert!(o.t_s <= 900.0, "observed within the first 15 minutes");
        assert!((46..=56).contains(&o.running), "{o:?}");
        assert!((94..=104).contains(&o.queued), "{o:?}");
        assert!((0.85..=0.96).contains(&o.token_usage), "{o:?}");
        assert!((780.0..=890.0).contains(&o.gen_tok_per_s), "{o:?}");
        assert!((0.08..=0.12).contains(&o.lifetime_req_per_s), "{o:?}");
        // The windowed and steady rates are about twice the lifetime rate.
        let w = o.window_req_per_s / o.lifetime_req_per_s;
        let st = s.steady_state.req_per_s.unwrap() / o.lifetime_req_per_s;
        assert!((1.5..=2.6).contains(&w), "window/lifetime {w} in {o:?}");
        assert!((1.5..=2.6).contains(&st), "steady/lifetime {st}");
    }
    assert!(s.steady_state.reliable);
}

#[test]
fn case_study_b1_lifetime_matches_the_server_throughput() {
    let s = summary_of("scenarios/case-study-b1.toml");
    assert!(!s.observations.is_empty());
    for o in &s.observations {
        assert!((0.45..=0.55).contains(&o.lifetime_req_per_s), "{o:?}");
        let rel = (o.effective_tok_per_s / o.gen_tok_per_s - 1.0).abs();
        assert!(
            rel <= 0.10,
            "effective {} vs gen {} in {o:?}",
            o.effective_tok_per_s,
            o.gen_tok_per_s
        );
    }
}

#[test]
fn the_roofline_predicts_the_case_study_throughput_within_35_percent() {
    let s = summary_of("scenarios/case-study-b2-roofline.toml");
    assert!(!s.observations.is_empty());
    for o in &s.observations {
        let rel = o.gen_tok_per_s / 850.0 - 1.0;
        assert!(
            rel.abs() <= 0.35,
            "{} tok/s at t = {} s",
            o.gen_tok_per_s,
            o.t_s
        );
        assert!((40..=60).contains(&o.running), "{o:?}");
    }
}
