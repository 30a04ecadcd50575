//! `servesim explain`: snapshot of the text for a small scenario; every sentence of every
//! teaching scenario (and of runs in the other regimes) checked against the run's numbers
//! (`explain_check.rs`); the binding constraint named; the what-if changes something.

use servesim::analysis::Constraint;
use servesim::engine::{self, RunOptions};
use servesim::report::explain::{self, Context, Format};
use servesim::report::summary::{self, Summary};
use servesim::scenario::{self as sc_mod, Scenario, Source};

use crate::explain_check::{sentences, Check};
use crate::{root, scenario};

fn explain_of(sc: &Scenario, arg: Option<&str>, sets: &[String], fmt: Format) -> (String, Summary) {
    let (r, a) = engine::run_analysed(sc, &RunOptions::default()).unwrap();
    let s = summary::summarize(sc, &r, &a);
    let ctx = Context::new(sc, arg.map(str::to_string), sets);
    (explain::render(&s, &ctx, fmt), s)
}

fn load(path: &str, sets: &[String]) -> Scenario {
    let src = Source::read(&root().join(path)).unwrap();
    sc_mod::load(&src, sets).unwrap()
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
    let (text, _) = explain_of(&scenario(SMALL), Some("small.toml"), &[], Format::Text);
    insta::assert_snapshot!("explain_small_text", text);
    let (md, _) = explain_of(&scenario(SMALL), Some("small.toml"), &[], Format::Markdown);
    insta::assert_snapshot!("explain_small_markdown", md);
}

/// Check every sentence and heading of a run's explanation; returns the summary.
fn check_all(sc: &Scenario, arg: &str, sets: &[String]) -> (Summary, Vec<usize>) {
    let (md, s) = explain_of(sc, Some(arg), sets, Format::Markdown);
    let (all, headings, commands) = sentences(&md);
    let mut check = Check::new(&s);
    for sentence in &all {
        check.sentence(sentence);
    }
    let matched = check.matched;
    let b = &s.analysis.binding;
    let over = match b.measured_over {
        "steady window" => "",
        "overloaded window" => " (while overloaded)",
        _ => " (over the whole run)",
    };
    let binds = format!("What binds the batch: {}{over}", b.constraint.describe());
    assert!(headings.iter().any(|h| h.ends_with(&binds)), "{headings:?}");
    assert_eq!(commands.len(), 1, "{md}");
    (s, matched)
}

#[test]
fn every_sentence_of_every_teaching_scenario_holds_for_its_run() {
    let mut teaching: Vec<(String, Vec<String>)> =
        std::fs::read_dir(root().join("scenarios/teaching"))
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(root()).unwrap().display().to_string();
                (rel, Vec::new())
            })
            .collect();
    teaching.sort();
    assert_eq!(teaching.len(), 7, "{teaching:?}");
    // The other regimes, from the same scenarios: the lesson of littles-law.toml past the
    // server's capacity, and a first try with no more requests than concurrency.
    teaching.push((
        "scenarios/teaching/littles-law.toml".into(),
        vec!["client.rate_per_s=40".into()],
    ));
    teaching.push((
        "scenarios/teaching/concurrency-bound.toml".into(),
        vec!["workload.requests=16".into()],
    ));
    // Off-GPU overheads add their own paragraph.
    teaching.push((
        "scenarios/teaching/kv-bound.toml".into(),
        vec![
            "client.network_rtt_ms=2".into(),
            "client.request_overhead_ms=30".into(),
            "client.per_token_overhead_ms=0.5".into(),
        ],
    ));
    let mut regimes = Vec::new();
    let mut overheads = 0;
    for (path, sets) in &teaching {
        let sc = load(path, sets);
        let (s, _) = check_all(&sc, path, sets);
        regimes.push(s.steady_state.status);
        overheads += usize::from(s.overhead.is_some());
    }
    assert_eq!(overheads, 1);
    for r in ["steady", "overloaded", "no_steady_window"] {
        assert!(regimes.contains(&r), "no {r} run among {regimes:?}");
    }
}

#[test]
fn every_sentence_of_the_vllm_case_study_holds_in_vllms_words() {
    // 3,000 of its 20,000 requests: hours of steady state, a quicker test.
    let path = "scenarios/case-study-b2-vllm.toml";
    let shorter = ["workload.requests=3000".to_string()];
    let sc = load(path, &shorter);
    let (s, _) = check_all(&sc, path, &shorter);
    let (text, _) = explain_of(&sc, Some(path), &shorter, Format::Markdown);
    assert!(
        text.contains("KV cache usage") && !text.contains("token usage"),
        "{text}"
    );
    assert!(
        text.contains("preempted") && !text.contains("retracted"),
        "{text}"
    );
    // Its pool is derived from memory: vLLM's memory knob is the what-if.
    assert_eq!(s.kv_capacity_source, "derived from memory");
    assert!(
        text.contains("--vary engine.gpu_memory_utilization=0.85:0.95:0.01"),
        "{text}"
    );
    // With the blocks pinned, the blocks are.
    let sets = [
        shorter[0].clone(),
        "engine.num_gpu_blocks_override=4000".to_string(),
    ];
    let (text, _) = explain_of(&load(path, &sets), Some(path), &sets, Format::Markdown);
    assert!(
        text.contains("--vary engine.num_gpu_blocks_override=2000:8000:2000"),
        "{text}"
    );
}

#[test]
fn b2_is_explained_as_about_half_with_its_reasons() {
    let src = Source::builtin_b2();
    let sc = sc_mod::load(&src, &[]).unwrap();
    let (s, _) = check_all(&sc, "scenarios/case-study-b2.toml", &[]);
    let (text, _) = explain_of(&sc, None, &[], Format::Markdown);
    let o = &s.observations[0];
    let rate = s.analysis.steady().unwrap().span.req_per_s;
    assert!((0.35..=0.65).contains(&(o.lifetime_req_per_s / rate)));
    assert!(text.contains("— about half of it."), "{text}");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("1 − d/T"));
    assert!(text.contains("What binds the batch: the KV budget"));
    // The case study pins the pool it saw (max_total_num_tokens): the pool is the knob, not
    // the static fraction.
    assert!(text.contains("--vary engine.kv_capacity_tokens="), "{text}");
    // With the memory model and no pin, the static fraction is.
    let src = Source::read(&root().join("scenarios/case-study-b2-memory.toml")).unwrap();
    let (text, _) = explain_of(
        &sc_mod::load(&src, &[]).unwrap(),
        None,
        &[],
        Format::Markdown,
    );
    assert!(
        text.contains("--vary engine.mem_fraction_static=0.80:0.95:0.01"),
        "{text}"
    );
}

fn binding_of(path: &str) -> Constraint {
    let (s, _) = check_all(&load(path, &[]), path, &[]);
    s.analysis.binding.constraint
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
    let sc = scenario(&text);
    let (s, _) = check_all(&sc, "small.toml", &[]);
    assert_eq!(
        s.analysis.binding.constraint,
        Constraint::MaxRunningRequests
    );
    let (out, _) = explain_of(&sc, None, &[], Format::Text);
    assert!(out.contains("max_running_requests = 8"));
}

/// The what-if's command, its varied key and the last value it tries.
fn what_if(md: &str) -> (String, String, String) {
    let (_, _, commands) = sentences(md);
    let cmd = commands[0].clone();
    let arg = cmd
        .split(" --vary ")
        .nth(1)
        .or_else(|| cmd.rsplit(" --set ").next())
        .unwrap()
        .trim_matches('\'')
        .to_string();
    let axis = servesim::sweep::parse_vary(&arg).unwrap();
    (cmd, axis.key, axis.values.last().unwrap().clone())
}

#[test]
fn the_what_if_changes_something_and_keeps_the_overrides() {
    let cases: [(&str, &[&str]); 5] = [
        // Pins kv_capacity_tokens: the memory settings would change nothing.
        ("scenarios/teaching/kv-bound.toml", &["seed=4"]),
        (
            "scenarios/teaching/concurrency-bound.toml",
            &["workload.requests=2000"],
        ),
        (
            "scenarios/teaching/littles-law.toml",
            &["client.rate_per_s=40", "workload.requests=4000"],
        ),
        (
            "scenarios/teaching/all-at-once.toml",
            &["workload.requests=400"],
        ),
        (
            "scenarios/teaching/poisson-arrivals.toml",
            &["run.window_s=30"],
        ),
    ];
    for (path, sets) in cases {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let sc = load(path, &sets);
        let (md, s) = explain_of(&sc, Some(path), &sets, Format::Markdown);
        let (cmd, key, value) = what_if(&md);
        for set in &sets {
            let k = set.split('=').next().unwrap();
            assert!(
                k == key || cmd.contains(&format!("--set {set}")),
                "{cmd} drops --set {set}"
            );
        }
        assert_ne!(
            key, "engine.mem_fraction_static",
            "{path}: pins the KV budget"
        );
        let mut with: Vec<String> = sets
            .iter()
            .filter(|s| !s.starts_with(&key))
            .cloned()
            .collect();
        with.push(format!("{key}={value}"));
        let (r, a) = engine::run_analysed(&load(path, &with), &RunOptions::default()).unwrap();
        let after = summary::summarize(&load(path, &with), &r, &a);
        let changed = after.kv_capacity_tokens != s.kv_capacity_tokens
            || after.steady_state.req_per_s != s.steady_state.req_per_s
            || after.steady_state.status != s.steady_state.status
            || after.totals.totals.sim_duration_s != s.totals.totals.sim_duration_s;
        assert!(changed, "{cmd}: {key}={value} changes nothing");
        if key == "workload.requests" {
            assert_eq!(after.steady_state.status, "steady", "{cmd}");
        }
    }
}

#[test]
fn explain_out_writes_a_self_contained_html_handout() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.toml");
    std::fs::write(&path, SMALL).unwrap();
    let out = dir.path().join("handout");
    let printed = assert_cmd::Command::cargo_bin("servesim")
        .unwrap()
        .args([
            "explain",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--set", "client.concurrency=32"])
        .assert()
        .success();
    let text = String::from_utf8(printed.get_output().stdout.clone()).unwrap();
    assert!(text.starts_with("Why the client and the server disagree — small"));
    let names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["explain.html"]);
    let page = std::fs::read_to_string(out.join("explain.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    // Self-contained: every src is inline data, no link, no stylesheet or script from
    // elsewhere, no URL at all.
    let lower = page.to_lowercase();
    for needle in [
        "href=", "<link", "<script", "@import", "url(", "http:", "https:", "://",
    ] {
        assert!(!lower.contains(needle), "{needle}");
    }
    let srcs: Vec<&str> = page.split("src=\"").skip(1).collect();
    assert_eq!(srcs.len(), 3, "three figures");
    for s in srcs {
        let data = s
            .strip_prefix("data:image/png;base64,")
            .expect("inline PNG data");
        let b64 = &data[..data.find('"').unwrap()];
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);
    }
    // The text: the same sections and sentences as the explanation (HTML-escaped), and the
    // scenario with its overrides.
    let sc = crate::scenario(SMALL);
    let (md, _) = explain_of(&sc, None, &[], Format::Markdown);
    for line in md.lines().filter(|l| l.starts_with("## ")) {
        let h = servesim::report::doc::escape_html(&line[3..]);
        assert!(page.contains(&format!("<h2>{h}</h2>")), "{h}");
    }
    let (html, _) = explain_of(
        &sc,
        Some(path.to_str().unwrap()),
        &["client.concurrency=32".to_string()],
        Format::Html,
    );
    assert!(page.contains(&html), "the page holds the explanation");
    assert!(
        page.contains("<h2>The scenario</h2>") && page.contains("with --set client.concurrency=32")
    );
    assert!(page.contains("kv_capacity_tokens = 20000"));
}
