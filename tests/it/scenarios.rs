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
    // Under SGLang's defaults the batch moves in waves, and the case study's snapshot (46–56
    // running, 94–101 queued, usage 0.85–0.96, 780–890 tok/s, 0.1 req/s) is one moment of them.
    // At the scenario's observation times the batch and the client match it; usage and gen
    // throughput sit near the edges of their bands there (the README's table says which are
    // out and why), and match in the steady state.
    let s = summary_of("scenarios/case-study-b2.toml");
    assert!(!s.observations.is_empty());
    for o in &s.observations {
        assert!(o.t_s <= 900.0, "observed within the first 15 minutes");
        assert!((46..=56).contains(&o.running), "{o:?}");
        assert!((94..=104).contains(&o.queued), "{o:?}");
        assert!((0.08..=0.12).contains(&o.lifetime_req_per_s), "{o:?}");
        // The server is busy at about the logged rate, the client sees half the steady rate.
        assert!((765.0..=935.0).contains(&o.gen_tok_per_s), "{o:?}");
        let st = s.steady_state.req_per_s.unwrap() / o.lifetime_req_per_s;
        assert!((1.5..=2.6).contains(&st), "steady/lifetime {st}");
    }
    assert!(s.steady_state.reliable);
    assert!((0.85..=0.96).contains(&s.steady_state.mean_token_usage.unwrap()));
    assert!((780.0..=890.0).contains(&s.steady_state.output_tok_per_s.unwrap()));
    // And the whole snapshot holds at once at some moment of the first ramp.
    let src = Source::read(&root().join("scenarios/case-study-b2.toml")).unwrap();
    let sc = scenario::load(&src, &[]).unwrap();
    let r = engine::run(&sc, &RunOptions::default()).unwrap();
    let at_once = r.samples.iter().filter(|p| p.t_s <= 600.0).find(|p| {
        (46..=56).contains(&p.running)
            && (94..=104).contains(&p.queued)
            && (0.85..=0.96).contains(&p.token_usage)
            && (780.0..=890.0).contains(&p.gen_tok_per_s)
            && (0.08..=0.12).contains(&p.lifetime_req_per_s)
    });
    assert!(at_once.is_some(), "no moment matches the whole snapshot");
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
    }
    // With the case study's batch: about 50 running (the instants above catch the waves).
    assert!((40.0..=60.0).contains(&s.steady_state.mean_running.unwrap()));
    assert!((s.steady_state.output_tok_per_s.unwrap() / 850.0 - 1.0).abs() <= 0.35);
}
