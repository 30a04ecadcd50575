//! `servesim explain`: snapshot of the text for a small scenario, and what it must say for the
//! case study and the teaching scenarios.

use servesim::analysis::{self, Constraint};
use servesim::engine::{self, RunOptions};
use servesim::report::explain::{self, Context, Format};
use servesim::report::summary;
use servesim::scenario::{self as sc_mod, Source};

use crate::{root, scenario};

fn explain_of(
    sc: &servesim::scenario::Scenario,
    arg: Option<&str>,
    fmt: Format,
) -> (String, summary::Summary) {
    let r = engine::run(sc, &RunOptions::default()).unwrap();
    let a = analysis::analyse(&r);
    let s = summary::summarize(sc, &r, &a);
    let ctx = Context {
        scenario_arg: arg.map(str::to_string),
        has_memory_model: sc.memory.is_some(),
        kv_capacity_tokens: sc.engine.kv_capacity_tokens,
        mem_fraction_static: sc.memory.as_ref().and_then(|m| m.mem_fraction_static()),
        rate_per_s: None,
    };
    (explain::render(&s, &ctx, fmt), s)
}

const SMALL: &str = r#"
name = "small"
seed = 5
[run]
observe_at_s = [20]
[engine]
kv_capacity_tokens = 20000
[engine.step_time]
decode_base_ms = 10.0
decode_per_seq_ms = 0.5
prefill_base_ms = 5.0
prefill_per_token_us = 20.0
[workload]
requests = 400
prompt_tokens = { dist = "constant", value = 200 }
output_tokens = { dist = "lognormal", mean = 600, cv = 0.3 }
max_new_tokens = 2048
[client]
concurrency = 32
"#;

#[test]
fn the_explanation_of_a_small_run_is_stable() {
    let (text, _) = explain_of(&scenario(SMALL), Some("small.toml"), Format::Text);
    insta::assert_snapshot!("explain_small_text", text);
    let (md, _) = explain_of(&scenario(SMALL), Some("small.toml"), Format::Markdown);
    insta::assert_snapshot!("explain_small_markdown", md);
}

#[test]
fn b2_is_explained_as_about_half_with_its_reasons() {
    let src = Source::builtin_b2();
    let sc = sc_mod::load(&src, &[]).unwrap();
    let (text, s) = explain_of(&sc, None, Format::Text);
    let o = &s.observations[0];
    let ratio = o.lifetime_req_per_s / s.steady_state.req_per_s;
    assert!((0.35..=0.65).contains(&ratio));
    assert!(text.contains("— about half of it —"), "{text}");
    // The numbers it states are this run's.
    assert!(text.contains(&format!("{:.3} req/s", o.lifetime_req_per_s)));
    assert!(text.contains(&format!(
        "{:.3} req/s (95 % interval",
        s.steady_state.req_per_s
    )));
    assert!(text.contains(&format!(
        "The first response arrived only at t = {:.0} s",
        s.first_completion_s.unwrap()
    )));
    // (The text is wrapped: compare with its words joined by single spaces.)
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("1 − d/T"));
    assert!(text.contains(&format!(
        "20 × d = {}",
        thousands(s.convergence.estimated_s.round() as u64)
    )));
    assert!(text.contains("What binds the batch: the KV budget"));
    assert!(text.contains("servesim sweep"));
}

fn thousands(n: u64) -> String {
    servesim::report::text::thousands(n)
}

fn binding_of(path: &str) -> Constraint {
    let src = Source::read(&root().join(path)).unwrap();
    let sc = sc_mod::load(&src, &[]).unwrap();
    let (text, s) = explain_of(&sc, Some(path), Format::Text);
    assert!(text.contains(&format!(
        "What binds the batch: {}",
        s.binding.constraint.describe()
    )));
    s.binding.constraint
}

#[test]
fn teaching_scenarios_name_the_right_binding_constraint() {
    assert_eq!(
        binding_of("scenarios/teaching/kv-bound.toml"),
        Constraint::KvBudget
    );
    assert_eq!(
        binding_of("scenarios/teaching/concurrency-bound.toml"),
        Constraint::ClientConcurrency
    );
    assert_eq!(
        binding_of("scenarios/teaching/poisson-arrivals.toml"),
        Constraint::StepTime
    );
    assert_eq!(
        binding_of("scenarios/teaching/littles-law.toml"),
        Constraint::StepTime
    );
}

#[test]
fn a_slot_limit_is_named_when_it_binds() {
    let text = SMALL.replace(
        "kv_capacity_tokens = 20000",
        "kv_capacity_tokens = 200000\nmax_running_requests = 8",
    );
    let (out, s) = explain_of(&scenario(&text), None, Format::Text);
    assert_eq!(s.binding.constraint, Constraint::MaxRunningRequests);
    assert!(out.contains("max_running_requests = 8"));
}
