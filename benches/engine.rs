//! Whole-run benchmarks of the simulator (engine only: no I/O, no report rendering), with both
//! steppings: fast-forward (the default) and the step-by-step reference.
//!
//! `cargo bench --bench engine`. Throughput is reported in simulated output tokens per second
//! for the case study (under SGLang, under vLLM, and priced by the roofline model) and in
//! simulated requests per second for the short-response workload.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
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

fn short_responses(c: &mut Criterion) {
    let mut g = c.benchmark_group("short_responses");
    g.sample_size(10);
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/short-responses.toml");
    let source = Source::read(&path).expect("the scenario file");
    let n = 1_000_000u64;
    let sc = load(&source, n);
    g.throughput(Throughput::Elements(n));
    for s in [Stepping::FastForward, Stepping::StepByStep] {
        g.bench_function(format!("{n}_requests/{}", stepping_name(s)), |b| {
            b.iter(|| engine::run(&sc, &opts(s)).expect("run"))
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    case_study,
    vllm_case_study,
    roofline_case_study,
    short_responses
);
criterion_main!(benches);
