//! Whole-run benchmarks of the simulator (engine only: no I/O, no report rendering):
//! fast-forward (the default), and the step-by-step reference beside it for the case study
//! under SGLang (linear and roofline step times), for vLLM's at 10,000 requests and at 8 in
//! flight, and for the short-response workload; the case study priced by a table, and vLLM's at
//! 100,000 requests, are fast-forwarded only.
//!
//! `cargo bench --bench engine`. Throughput is reported in simulated output tokens per second
//! for the case study at its full concurrency (under SGLang, under vLLM, priced by the roofline
//! model and by a table) and in simulated requests per second for the short-response workload
//! and the vLLM case study at 8 in flight.

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use servesim::engine::{self, RunOptions, Stepping};
use servesim::scenario::{self, Scenario, Source};

fn load(source: &Source, requests: u64) -> Scenario {
    let sets = vec![format!("workload.requests={requests}")];
    scenario::load(source, &sets).expect("the scenario is valid")
}

fn opts(stepping: Stepping) -> RunOptions {
    RunOptions {
        stepping,
        ..RunOptions::default()
    }
}

fn stepping_name(s: Stepping) -> &'static str {
    match s {
        Stepping::FastForward => "fast_forward",
        Stepping::StepByStep => "step_by_step",
    }
}

fn case_study(c: &mut Criterion) {
    let mut g = c.benchmark_group("b2_case_study");
    g.sample_size(10);
    for n in [10_000u64, 100_000] {
        let sc = load(&Source::builtin_b2(), n);
        // Output tokens are a property of the scenario and seed: measure them once.
        let tokens = engine::run(&sc, &RunOptions::default())
            .expect("run")
            .totals
            .output_tokens;
        g.throughput(Throughput::Elements(tokens));
        for s in [Stepping::FastForward, Stepping::StepByStep] {
            g.bench_function(format!("{n}_requests/{}", stepping_name(s)), |b| {
                b.iter(|| engine::run(&sc, &opts(s)).expect("run"))
            });
        }
    }
    g.finish();
}

fn vllm_case_study(c: &mut Criterion) {
    let mut g = c.benchmark_group("b2_case_study_vllm");
    g.sample_size(10);
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/case-study-b2-vllm.toml");
    let source = Source::read(&path).expect("the scenario file");
    for n in [10_000u64, 100_000] {
        let sc = load(&source, n);
        let tokens = engine::run(&sc, &RunOptions::default())
            .expect("run")
            .totals
            .output_tokens;
        g.throughput(Throughput::Elements(tokens));
        // The step-by-step reference only at the smaller size: it takes seconds at the larger.
        let steppings: &[Stepping] = if n <= 10_000 {
            &[Stepping::FastForward, Stepping::StepByStep]
        } else {
            &[Stepping::FastForward]
        };
        for &s in steppings {
            g.bench_function(format!("{n}_requests/{}", stepping_name(s)), |b| {
                b.iter(|| engine::run(&sc, &opts(s)).expect("run"))
            });
        }
    }
    g.finish();
}

/// vLLM's long quiet stretches: the B2 case study with 8 requests in flight, so that hundreds of
/// turns pass between two events (`scheduler/vllm/stretch.rs` takes each stretch at once).
fn vllm_long_stretches(c: &mut Criterion) {
    let mut g = c.benchmark_group("b2_vllm_concurrency_8");
    g.sample_size(10);
    let n = 2_000u64;
    let sets = vec![
        format!("workload.requests={n}"),
        "client.concurrency=8".to_string(),
    ];
    let sc = scenario::load(&scenario_file("case-study-b2-vllm.toml"), &sets)
        .expect("the scenario is valid");
    both_steppings(&mut g, n, &sc);
    g.finish();
}

/// The case study priced by the roofline model (no closed form: its runs are priced step by
/// step, once each).
fn roofline_case_study(c: &mut Criterion) {
    let mut g = c.benchmark_group("b2_case_study_roofline");
    g.sample_size(10);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/case-study-b2-roofline.toml");
    let source = Source::read(&path).expect("the scenario file");
    for n in [10_000u64, 100_000] {
        let sc = load(&source, n);
        let tokens = engine::run(&sc, &RunOptions::default())
            .expect("run")
            .totals
            .output_tokens;
        g.throughput(Throughput::Elements(tokens));
        for s in [Stepping::FastForward, Stepping::StepByStep] {
            g.bench_function(format!("{n}_requests/{}", stepping_name(s)), |b| {
                b.iter(|| engine::run(&sc, &opts(s)).expect("run"))
            });
        }
    }
    g.finish();
}

/// The case study priced by a table of step times (the linear model's own, at the table's
/// corners: closed-form runs per KV segment).
fn table_case_study(c: &mut Criterion) {
    let mut g = c.benchmark_group("b2_case_study_table");
    g.sample_size(10);
    let b2 = Source::builtin_b2();
    let (at, end) = (
        b2.text
            .find("[engine.step_time]")
            .expect("B2 has step times"),
        b2.text.find("[workload]").expect("B2 has a workload"),
    );
    // decode = 12 ms + 0.8 ms per request + 60 ns per KV token; prefill = 15 ms + 60 µs/token.
    let table = r#"[engine.step_time]
model = "table"
decode_batch = [1, 512]
decode_kv_tokens = [0, 200000]
decode_ms = [12.8, 24.8, 421.6, 433.6]
prefill_tokens = [1, 16384]
prefill_ms = [15.06, 998.04]

"#;
    let source = Source {
        text: format!("{}{table}{}", &b2.text[..at], &b2.text[end..]),
        ..b2
    };
    for n in [10_000u64, 100_000] {
        let sc = load(&source, n);
        let tokens = engine::run(&sc, &RunOptions::default())
            .expect("run")
            .totals
            .output_tokens;
        g.throughput(Throughput::Elements(tokens));
        g.bench_function(format!("{n}_requests/fast_forward"), |b| {
            b.iter(|| engine::run(&sc, &opts(Stepping::FastForward)).expect("run"))
        });
    }
    g.finish();
}

fn short_responses(c: &mut Criterion) {
    let mut g = c.benchmark_group("short_responses");
    g.sample_size(10);
    let n = 1_000_000u64;
    let sc = load(&scenario_file("short-responses.toml"), n);
    both_steppings(&mut g, n, &sc);
    g.finish();
}

/// A scenario file of the repository's `scenarios/`.
fn scenario_file(name: &str) -> Source {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    Source::read(&path).expect("the scenario file")
}

/// `sc`, of `n` requests, fast-forwarded and step by step, in requests per second.
fn both_steppings(g: &mut BenchmarkGroup<'_, WallTime>, n: u64, sc: &Scenario) {
    g.throughput(Throughput::Elements(n));
    for s in [Stepping::FastForward, Stepping::StepByStep] {
        g.bench_function(format!("{n}_requests/{}", stepping_name(s)), |b| {
            b.iter(|| engine::run(sc, &opts(s)).expect("run"))
        });
    }
}

criterion_group!(
    benches,
    case_study,
    vllm_case_study,
    vllm_long_stretches,
    roofline_case_study,
    table_case_study,
    short_responses
);
criterion_main!(benches);
