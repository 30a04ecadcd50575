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

/// With shared prefixes, explain says what the cache bought (or that it is off), in the engine's
/// own keys.
#[test]
fn explain_tells_what_the_prefix_cache_bought() {
    let path = root().join("scenarios/teaching/system-prompt.toml");
    let load = |set: &[&str]| {
        let sets: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        sc_mod::load(&Source::read(&path).unwrap(), &sets).unwrap()
    };
    let mut on = load(&[]);
    on.workload.requests = 400;
    let (text, s) = explain_of(&on, Some("sp.toml"), Format::Text);
    let c = s.prefix_cache.expect("the workload shares prefixes");
    assert!(c.enabled && c.cached_tokens > 0);
    let text = text
        .replace('\n', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(text.contains("What the prefix cache bought"), "{text}");
    assert!(
        text.contains("servesim sweep sp.toml --vary engine.disable_radix_cache=false,true"),
        "{text}"
    );
    let mut off = load(&["engine.disable_radix_cache=true"]);
    off.workload.requests = 400;
    let (text, s) = explain_of(&off, None, Format::Text);
    assert!(!s.prefix_cache.unwrap().enabled);
    let text = text
        .replace('\n', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(text.contains("the engine's prefix cache is off"), "{text}");
    let mut vllm = load(&["engine.kind=\"vllm\"", "engine.enable_prefix_caching=false"]);
    vllm.workload.requests = 400;
    let (text, _) = explain_of(&vllm, None, Format::Text);
    let text = text
        .replace('\n', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("engine.enable_prefix_caching=true,false"),
        "{text}"
    );
}
