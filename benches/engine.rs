//! Whole-run benchmarks of the simulator (engine only: no I/O, no report rendering).
//!
//! `cargo bench --bench engine` — throughput is reported in simulated requests per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use servesim::engine::{self, RunOptions};
use servesim::scenario::{self, Scenario, Source};

fn b2(requests: u64) -> Scenario {
    let sets = vec![format!("workload.requests={requests}")];
    scenario::load(&Source::builtin_b2(), &sets).expect("the built-in scenario is valid")
}

fn whole_runs(c: &mut Criterion) {
    let mut g = c.benchmark_group("b2_case_study");
    g.sample_size(10);
    let n = 20_000u64;
    let sc = b2(n);
    g.throughput(Throughput::Elements(n));
    g.bench_function(format!("{n}_requests"), |b| {
        b.iter(|| engine::run(&sc, &RunOptions::default()).expect("run"))
    });
    g.finish();
}

criterion_group!(benches, whole_runs);
criterion_main!(benches);
