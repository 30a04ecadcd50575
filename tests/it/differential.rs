//! The fast-forward engine against the step-by-step reference: identical completion times,
//! summary JSON, time series and server log. A mismatch is a bug in one of them.

use proptest::prelude::*;
use servesim::analysis;
use servesim::engine::{self, RunOptions, Stepping};
use servesim::report::{server_log, summary, timeseries};
use servesim::scenario::{self as sc_mod, Scenario, Source};

use crate::{cases, root};

/// A random differential test's check: `text` run both ways gives the same outputs (a failure
/// for proptest to shrink, not a panic).
fn same_both_ways(text: &str) -> Result<(), TestCaseError> {
    let sc = crate::scenario(text);
    let fast = outputs(&sc, Stepping::FastForward);
    let slow = outputs(&sc, Stepping::StepByStep);
    prop_assert_eq!(slow.4, 0);
    prop_assert!(fast.3 == slow.3, "per-request times differ");
    prop_assert_eq!(fast.0, slow.0);
    prop_assert!(fast.1 == slow.1, "time series differs");
    prop_assert_eq!(fast.2, slow.2);
    Ok(())
}

type Outputs = (
    String,
    Vec<u8>,
    String,
    Vec<servesim::metrics::RequestRecord>,
    u64,
);

/// Everything a run writes, its per-request records, and the steps it fast-forwarded.
fn outputs(sc: &Scenario, stepping: Stepping) -> Outputs {
    let r = engine::run(
        sc,
        &RunOptions {
            stepping,
            keep_log: true,
            keep_requests: true,
            ..RunOptions::default()
        },
    )
    .expect("the run finishes");
    let a = analysis::analyse(&r);
    let s = summary::summarize(sc, &r, &a);
    (
        summary::to_json(&s),
        timeseries::to_csv(&r, sc.workload.shares_prefixes()),
        server_log::render(sc.engine.kind(), &r.log, 8),
        r.requests,
        r.counters.fast_forwarded_steps,
    )
}

/// Returns the share of decode steps the fast engine skipped.
fn assert_same(sc: &Scenario, what: &str) -> f64 {
    let fast = outputs(sc, Stepping::FastForward);
    let slow = outputs(sc, Stepping::StepByStep);
    assert_eq!(slow.4, 0);
    assert!(fast.3 == slow.3, "{what}: per-request times differ");
    assert!(fast.0 == slow.0, "{what}: summary JSON differs");
    assert!(fast.1 == slow.1, "{what}: time series differs");
    assert!(fast.2 == slow.2, "{what}: server log differs");
    let steps: u64 = serde_json::from_str::<serde_json::Value>(&fast.0).unwrap()["totals"]
        ["decode_steps"]
        .as_u64()
        .unwrap();
    fast.4 as f64 / steps.max(1) as f64
}

fn scenario_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            scenario_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
}

#[test]
fn every_scenario_runs_identically_with_both_engines() {
    let mut files = Vec::new();
    scenario_files(&root().join("scenarios"), &mut files);
    files.sort();
    assert!(files.len() >= 10);
    let mut skipped = Vec::new();
    for f in files {
        let src = Source::read(&f).unwrap();
        // Enough requests to go well past the start-up; fewer than the files' own, to keep the
        // debug-build suite quick.
        let sc = sc_mod::load(&src, &["workload.requests=1500".to_string()]).unwrap();
        skipped.push((
            f.display().to_string(),
            assert_same(&sc, &f.display().to_string()),
        ));
    }
    // The comparison means something only if the fast engine did skip: in the case study most
    // decode steps are skipped.
    let b2 = skipped
        .iter()
        .find(|(f, _)| f.ends_with("case-study-b2.toml"))
        .unwrap();
    assert!(b2.1 > 0.5, "{skipped:?}");
    // vLLM preempts every few steps once its pool is full: the runs go on through the
    // preemptions (and the stats lines), so most of its steps are skipped too.
    let vllm = skipped
        .iter()
        .find(|(f, _)| f.ends_with("case-study-b2-vllm.toml"))
        .unwrap();
    eprintln!(
        "vLLM case study: {:.1} % of the decode steps fast-forwarded",
        100.0 * vllm.1
    );
    assert!(vllm.1 > 0.8, "{skipped:?}");
}

/// A run stopped by `run.max_events` stops at the same batch, instant and count both ways, for
/// either engine and either loop (a fast-forward run takes no more steps than the bound
/// leaves, and the bound is checked again after it).
#[test]
fn a_bound_on_batches_stops_both_engines_at_the_same_batch() {
    for (file, loops) in [
        ("case-study-b2.toml", "engine.disable_overlap_schedule"),
        ("case-study-b2-vllm.toml", "engine.async_scheduling"),
    ] {
        let src = Source::read(&root().join("scenarios").join(file)).unwrap();
        for flag in [false, true] {
            for bound in [400, 1000] {
                let sets = [format!("run.max_events={bound}"), format!("{loops}={flag}")];
                let sc = sc_mod::load(&src, &sets).unwrap();
                let what = format!("{file} with {loops} = {flag}, {bound} batches");
                assert_stopped_alike(&sc, &what);
            }
        }
    }
}

/// `sc` stopped by its `run.max_events` bound, both ways, with the same error (which tells the
/// batch and the instant it stopped at).
fn assert_stopped_alike(sc: &Scenario, what: &str) {
    let stop = |stepping| {
        let opts = RunOptions {
            stepping,
            ..RunOptions::default()
        };
        let e = engine::run(sc, &opts).expect_err("the bound stops the run");
        assert!(matches!(e, engine::SimError::TooManyBatches { .. }), "{e}");
        e.to_string()
    };
    let (fast, slow) = (stop(Stepping::FastForward), stop(Stepping::StepByStep));
    assert_eq!(fast, slow, "{what}");
}

/// The golden cases with shared prefixes (trace-driven, the radix cache on), both ways.
#[test]
fn golden_prefix_cases_run_identically_with_both_engines() {
    let dir = root().join("tests/fixtures/golden/sglang");
    let mut n = 0;
    let mut skipped = 0.0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if !p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("prefix-")
        {
            continue;
        }
        let src = Source::read(&p.join("scenario.toml")).unwrap();
        let sc = sc_mod::load(&src, &[]).unwrap();
        skipped += assert_same(&sc, &p.display().to_string());
        n += 1;
    }
    assert!(n >= 6, "only {n} prefix cases");
    assert!(skipped > 0.0, "the fast engine skipped nothing");
}

/// Workloads whose requests share prefixes, with the radix cache on or off.
fn random_prefix_scenario() -> impl Strategy<Value = String> {
    (
        (4_000u64..40_000, 0u32..5, prop_oneof![Just(1u64), Just(1), Just(4)], 1u32..64),
        (1u32..400, 1u32..600, 0u32..2, any::<u64>()),
        (1u32..3000, 0.01f64..0.6, 1u32..600, 0.01f64..0.4),
        (1u32..30, any::<(bool, bool, bool, bool)>()),
    )
        .prop_map(|((kv, policy, page, conc), (pmax, omax, client, seed), (p1, s1, p2, s2), (req, (no_overlap, mixed, no_radix, eos)))| {
            let kv = kv.max(u64::from(pmax + p1.max(p2 + 100)) + 4096 + 16);
            let policy = ["fcfs", "lof", "random", "lpm", "dfs-weight"][policy as usize];
            let client = match client {
                0 => format!("mode = \"closed\"\nconcurrency = {conc}"),
                _ => "mode = \"poisson\"\nrate_per_s = 8.0".to_string(),
            };
            format!(
                r#"
name = "diff-prefix"
seed = {seed}
[run]
observe_at_s = [1.5, 7.0]
window_s = 5
timeseries_interval_s = 0.5
[engine]
kv_capacity_tokens = {kv}
page_size = {page}
schedule_policy = "{policy}"
decode_log_interval = 7
disable_overlap_schedule = {no_overlap}
enable_mixed_chunk = {mixed}
disable_radix_cache = {no_radix}
chunked_prefill_size = 2048
[engine.step_time]
decode_base_ms = 10.0
decode_per_seq_ms = 0.3
decode_per_kv_token_ns = 20.0
prefill_base_ms = 3.0
prefill_per_token_us = 20.0
[workload]
requests = {}
prompt_tokens = {{ dist = "uniform", min = 1, max = {pmax} }}
output_tokens = {{ dist = "lognormal", mean = {omax}, cv = 0.8 }}
max_new_tokens = 2000
ignore_eos = {eos}
prefix_groups = {{ sys = {{ tokens = {p1}, share = {s1} }}, tools = {{ tokens = {{ dist = "uniform", min = 100, max = {} }}, share = {s2} }} }}
[client]
{client}
"#,
                req * 10,
                p2 + 100
            )
        })
}

/// Step times of the linear model (a run of its steps is priced on a line), as scenario text.
const LINEAR_STEPS: &str = "[engine.step_time]\ndecode_base_ms = 10.0\ndecode_per_seq_ms = 0.3\n\
    decode_per_kv_token_ns = 20.7\nprefill_base_ms = 3.0\nprefill_per_token_us = 20.0\n";

/// Step times of the roofline (a run of its steps is priced step by step), as scenario text.
const ROOFLINE_STEPS: &str = "[hardware]\ngpu = \"h200\"\n[model]\nname = \"llama-3.1-8b\"\n\
    [engine.step_time]\nmodel = \"roofline\"\n";

/// A request that reaches the server on the very nanosecond a decode step ends: a run of decode
/// steps stops before that step (every step of a run ends before the next event), and the two
/// events at that instant are taken as the step-by-step path takes them. Request 0 alone: its
/// `k`-th decode step ends when it would complete with `k + 1` output tokens (a run without the
/// second request tells when), and request 1 is sent then; request 0 goes on past that step,
/// or finishes with it. Then a third request arrives as the step that gives request 1 its first
/// token ends. For a run on the model's line (linear), one priced step by step (roofline) and
/// one in the model's closed form (a table whose runs cross a KV segment), under both engines
/// (vLLM's long quiet stretches among them).
#[test]
fn a_request_arriving_as_a_decode_step_ends_is_taken_as_step_by_step() {
    let dir = tempfile::tempdir().unwrap();
    let models = [
        LINEAR_STEPS,
        ROOFLINE_STEPS,
        "[engine.step_time]\nmodel = \"table\"\ndecode_batch = [1, 4]\n\
         decode_kv_tokens = [0, 120, 100000]\ndecode_ms = [10, 10.5, 30, 12, 13, 40]\n\
         prefill_tokens = [1, 1000]\nprefill_ms = [3, 23]\n",
    ];
    // SGLang with its overlapped loop or without; vLLM with async scheduling or without.
    let engines = [
        "disable_overlap_schedule = false",
        "disable_overlap_schedule = true",
        "kind = \"vllm\"\nasync_scheduling = true",
        "kind = \"vllm\"\nasync_scheduling = false",
    ];
    let scenario = |model: &str, rows: &str, engine: &str| {
        let trace = dir.path().join("trace.csv");
        let header = "prompt_tokens,output_tokens,arrival_s";
        std::fs::write(&trace, format!("{header}\n{rows}")).unwrap();
        let text = format!(
            "name = \"an arrival at a step's end\"\n{model}[engine]\nkv_capacity_tokens = 100000\n\
             {engine}\n[workload]\ntrace = \"trace.csv\"\n[client]\nmode = \"trace\"\n"
        );
        let src = Source {
            name: "an arrival at a step's end".to_string(),
            base_dir: dir.path().to_path_buf(),
            text,
        };
        sc_mod::load(&src, &[]).unwrap()
    };
    for model in models {
        for engine in engines {
            for k in [3u64, 10, 31, 100] {
                // When request 0's k-th decode step ends.
                let rows = format!("100,{},0\n", k + 1);
                let alone = outputs(&scenario(model, &rows, engine), Stepping::StepByStep);
                let at_ns = alone.3[0].done_ns;
                let at_s = format!("{}.{:09}", at_ns / 1_000_000_000, at_ns % 1_000_000_000);
                // Request 0 goes on past the step, or finishes with it.
                for output in [200, k + 1] {
                    let rows = format!("100,{output},0\n40,5,{at_s}\n");
                    let sc = scenario(model, &rows, engine);
                    let what = format!("{model}{engine}: step {k}, request 0 of {output}");
                    assert_same(&sc, &what);
                    // The arrival is on the step's end indeed, and the run before it was taken
                    // at once.
                    let fast = outputs(&sc, Stepping::FastForward);
                    let second = fast.3.iter().find(|r| r.seq == 1);
                    assert_eq!(second.map(|r| r.arrived_ns), Some(at_ns), "{what}");
                    assert!(fast.4 > 0, "{what}: nothing fast-forwarded");
                }
                // A request sent 1 µs after that step ends is admitted by a later step, which
                // gives it its first token; a third request arrives as that step ends.
                let at_s = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
                let rows = format!("100,200,0\n40,5,{}\n", at_s(at_ns + 1000));
                let two = outputs(&scenario(model, &rows, engine), Stepping::StepByStep);
                let first = two
                    .3
                    .iter()
                    .find(|r| r.seq == 1)
                    .and_then(|r| r.first_token_ns);
                let first = first.expect("request 1 answered");
                let rows = format!("{rows}30,5,{}\n", at_s(first));
                let what = format!("{model}{engine}: step {k}, a third request");
                assert_same(&scenario(model, &rows, engine), &what);
            }
        }
    }
}

/// Steps of one duration (10 ms, as the prefill) and a request arriving as one of them ends: the
/// step before request 0's last (a run's last step when the decision at its launch sets request
/// 0 aside as finishing by length, under the overlapped loop), or its last. A run of steps that
/// never get shorter ends before the arrival even when `most` of the longest would end on it.
#[test]
fn a_request_arriving_as_a_step_of_one_duration_ends_is_taken_as_step_by_step() {
    let dir = tempfile::tempdir().unwrap();
    for engine in [
        "disable_overlap_schedule = false",
        "disable_overlap_schedule = true",
    ] {
        for (n, at) in [(20, 19), (20, 20), (101, 100), (101, 101)] {
            // Request 0 gets its k-th token at k × 10 ms; request 1 arrives with its `at`-th.
            let rows = format!(
                "prompt_tokens,output_tokens,arrival_s\n100,{n},0\n40,5,{}.{:02}\n",
                at / 100,
                at % 100
            );
            std::fs::write(dir.path().join("trace.csv"), rows).unwrap();
            let text = format!(
                "name = \"arrivals at steps' ends\"\n[engine]\nkv_capacity_tokens = 100000\n{engine}\n\
                 [engine.step_time]\ndecode_base_ms = 10.0\ndecode_per_seq_ms = 0.0\n\
                 decode_per_kv_token_ns = 0.0\nprefill_base_ms = 10.0\nprefill_per_token_us = 0.0\n\
                 [workload]\ntrace = \"trace.csv\"\nignore_eos = true\n[client]\nmode = \"trace\"\n"
            );
            let src = Source {
                name: "arrivals at steps' ends".to_string(),
                base_dir: dir.path().to_path_buf(),
                text,
            };
            let what = format!("{engine}: request 1 with request 0's token {at} of {n}");
            let share = assert_same(&sc_mod::load(&src, &[]).unwrap(), &what);
            assert!(share > 0.0, "{what}: nothing fast-forwarded");
        }
    }
}

#[test]
fn a_table_of_step_times_from_a_csv_runs_identically_with_both_engines() {
    let src = Source::read(&root().join("tests/fixtures/table/table.toml")).unwrap();
    let sc = sc_mod::load(&src, &["workload.requests=1500".to_string()]).unwrap();
    assert!(matches!(
        sc.engine.step_time,
        sc_mod::StepTimeSpec::Table(_)
    ));
    let skipped = assert_same(&sc, "tests/fixtures/table/table.toml");
    assert!(skipped > 0.5, "the fast engine skipped only {skipped}");
    // vLLM prices every step as a mixed one.
    let sets = [
        "workload.requests=1500".to_string(),
        "engine.kind=\"vllm\"".to_string(),
    ];
    let sc = sc_mod::load(&src, &sets).unwrap();
    let skipped = assert_same(&sc, "tests/fixtures/table/table.toml under vLLM");
    assert!(skipped > 0.1, "the fast engine skipped only {skipped}");
}

fn random_scenario() -> impl Strategy<Value = String> {
    (
        (1_000u64..40_000, 0u32..3, prop_oneof![Just(1u64), Just(1), Just(4)], 1u32..200),
        (1u32..600, 1u32..800, any::<bool>(), 0u32..3, 1u32..48),
        (1.0f64..30.0, 0.0f64..2.0, 0.0f64..120.0, 0.1f64..20.0),
        (1u32..40, any::<u64>(), any::<(bool, bool, bool)>(), 0.5f64..1.5),
        (1u32..200, prop_oneof![Just(0.5f64), Just(0.3), Just(2.5), Just(7.0)]),
    )
        .prop_map(|((kv, policy, page, conc), (pmax, omax, eos, client, dli), (db, ds, dk, rate), (req, seed, (no_overlap, mixed, no_radix), conservativeness), (before, points_s))| {
            // An observation just before 20 s, often inside a run and in the step of a
            // time-series point.
            let observe = 20.0 - f64::from(before) / 10_000.0;
            let kv = kv.max(u64::from(pmax) + 4096 + 16);
            let policy = ["fcfs", "lof", "random"][policy as usize];
            let client = match client {
                0 => format!("mode = \"closed\"\nconcurrency = {conc}"),
                1 => format!("mode = \"poisson\"\nrate_per_s = {rate}"),
                _ => format!("mode = \"gamma\"\nrate_per_s = {rate}\nburstiness = 0.3\nconcurrency = {conc}"),
            };
            format!(
                r#"
name = "diff"
seed = {seed}
[run]
observe_at_s = [1.5, 7.0, {observe}, 30.0]
window_s = 5
timeseries_interval_s = {points_s}
[engine]
kv_capacity_tokens = {kv}
page_size = {page}
schedule_policy = "{policy}"
decode_log_interval = {dli}
disable_overlap_schedule = {no_overlap}
enable_mixed_chunk = {mixed}
disable_radix_cache = {no_radix}
schedule_conservativeness = {conservativeness}
[engine.step_time]
decode_base_ms = {db}
decode_per_seq_ms = {ds}
decode_per_kv_token_ns = {dk}
prefill_base_ms = 3.0
prefill_per_token_us = 20.0
[workload]
requests = {}
prompt_tokens = {{ dist = "uniform", min = 1, max = {pmax} }}
output_tokens = {{ dist = "lognormal", mean = {omax}, cv = 0.8 }}
max_new_tokens = 3000
ignore_eos = {eos}
[client]
{client}
"#,
                req * 10
            )
        })
}

/// A random scenario priced by an inline table (random axes and times, so that runs cross
/// KV segments and the table is extended outside its points).
fn random_table_scenario() -> impl Strategy<Value = String> {
    (
        (random_scenario(), proptest::collection::btree_set(1u32..300, 2..5)),
        (proptest::collection::btree_set(0u32..60_000, 2..5), proptest::collection::vec(1.0f64..40.0, 16)),
        (1.0f64..30.0, 1.0f64..90.0),
    )
        .prop_map(|((text, batch), (kv, times), (p0, p1))| {
            let (batch, kv): (Vec<u32>, Vec<u32>) = (batch.into_iter().collect(), kv.into_iter().collect());
            let ms = &times[..batch.len() * kv.len()];
            let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
            let floats = |v: &[f64]| v.iter().map(|x| format!("{x:.6}")).collect::<Vec<_>>().join(", ");
            let start = text.find("[engine.step_time]").unwrap();
            let end = text.find("[workload]").unwrap();
            let table = format!(
                "[engine.step_time]\nmodel = \"table\"\ndecode_batch = [{}]\ndecode_kv_tokens = [{}]\ndecode_ms = [{}]\n\
                 prefill_tokens = [64, 1024]\nprefill_ms = [{p0:.6}, {:.6}]\n",
                list(&batch),
                list(&kv),
                floats(ms),
                p0 + p1,
            );
            format!("{}{table}{}", &text[..start], &text[end..])
        })
}

/// A random scenario of `scenarios` priced by the roofline from the catalog (a GPU, a model and
/// a layout that hold the weights; the KV pool stays the scenario's): its runs are priced step
/// by step, in floating point, and their bounds found on those steps.
fn on_roofline(scenarios: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    const SERVERS: [(&str, u32, &str); 6] = [
        ("h200", 1, "llama-3.1-8b"),
        ("h100", 2, "llama-3.1-8b"),
        ("l40s", 1, "llama-3.1-8b"),
        ("h100", 4, "llama-3.1-70b"),
        ("h200", 8, "llama-3.1-70b"),
        ("rtx-pro-6000", 8, "kimi-k2.5"),
    ];
    (scenarios, 0..SERVERS.len()).prop_map(|(text, server)| {
        let (gpu, tp, model) = SERVERS[server];
        let start = text.find("[engine]").unwrap();
        let step_time = text.find("[engine.step_time]").unwrap();
        let end = text.find("[workload]").unwrap();
        format!(
            "{}[hardware]\ngpu = \"{gpu}\"\nnum_gpus = {tp}\ntensor_parallel = {tp}\n[model]\nname = \"{model}\"\n\
             {}[engine.step_time]\nmodel = \"roofline\"\n{}",
            &text[..start],
            &text[start..step_time],
            &text[end..],
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), .. ProptestConfig::default() })]

    #[test]
    fn random_roofline_scenarios_run_identically_with_both_engines(text in on_roofline(random_scenario())) {
        same_both_ways(&text)?;
    }

    #[test]
    fn random_table_scenarios_run_identically_with_both_engines(text in random_table_scenario()) {
        same_both_ways(&text)?;
    }
}

/// Shrunk cases the random differential tests once failed on, kept as they were: their seeds
/// in `tests/proptest-regressions/differential.txt` were drawn from the strategies before they
/// changed, so they no longer give these scenarios. SGLang's random scenario; a vLLM one with
/// shared prefixes (whose runs the fast-forward now declines, every one: it checks the
/// declining); and vLLM's stats line due at 20 s with an observation just before it (its
/// shrunk case had shares of 0, which the scenario refuses: here without prefixes).
#[test]
fn earlier_random_failures_run_identically_with_both_engines() {
    let cases: [(&str, f64); 3] = [
        (
            r#"
name = "diff"
seed = 18441725134979
[run]
observe_at_s = [1.5, 7.0, 30.0]
window_s = 5
timeseries_interval_s = 0.5
[engine]
kv_capacity_tokens = 4113
page_size = 1
schedule_policy = "fcfs"
decode_log_interval = 1
disable_overlap_schedule = false
enable_mixed_chunk = false
disable_radix_cache = false
schedule_conservativeness = 0.5
[engine.step_time]
decode_base_ms = 1
decode_per_seq_ms = 0
decode_per_kv_token_ns = 0
prefill_base_ms = 3.0
prefill_per_token_us = 20.0
[workload]
requests = 10
prompt_tokens = { dist = "uniform", min = 1, max = 1 }
output_tokens = { dist = "lognormal", mean = 579, cv = 0.8 }
max_new_tokens = 3000
ignore_eos = false
[client]
mode = "poisson"
rate_per_s = 3.753627249775011
"#,
            0.5,
        ),
        (
            r#"
name = "diff-vllm"
seed = 9139155376332559495
[run]
observe_at_s = [1.5, 7.0, 30.0]
window_s = 5
timeseries_interval_s = 0.5
[engine]
kind = "vllm"
num_gpu_blocks_override = 3629
block_size = 1
max_num_seqs = 5
max_num_batched_tokens = 3627
max_model_len = 3627
enable_chunked_prefill = false
long_prefill_token_threshold = 0
scheduler_reserve_full_isl = false
async_scheduling = false
enable_prefix_caching = true
[engine.step_time]
decode_base_ms = 1
decode_per_seq_ms = 0
decode_per_kv_token_ns = 0
prefill_per_token_us = 20.0
[workload]
requests = 270
prompt_tokens = { dist = "uniform", min = 1, max = 1 }
output_tokens = { dist = "lognormal", mean = 235, cv = 0.8 }
max_new_tokens = 3000
ignore_eos = false
prefix_groups = { sys = { tokens = 626, share = 0.009297680822910367 }, tools = { tokens = { dist = "uniform", min = 100, max = 164 }, share = 0.00008183836581626904 } }
[client]
mode = "closed"
concurrency = 5
"#,
            0.0,
        ),
        (
            r#"
name = "diff-vllm"
seed = 586839163866573911
[run]
observe_at_s = [1.5, 7.0, 19.9999, 30.0]
window_s = 5
timeseries_interval_s = 0.5
[engine]
kind = "vllm"
num_gpu_blocks_override = 196
block_size = 16
max_num_seqs = 1
max_num_batched_tokens = 3102
max_model_len = 3102
enable_chunked_prefill = false
long_prefill_token_threshold = 0
scheduler_reserve_full_isl = false
async_scheduling = false
enable_prefix_caching = false
[engine.step_time]
decode_base_ms = 28.79654551906046
decode_per_seq_ms = 0.4985456714407789
decode_per_kv_token_ns = 0
prefill_per_token_us = 20.0
[workload]
requests = 10
prompt_tokens = { dist = "uniform", min = 1, max = 1 }
output_tokens = { dist = "lognormal", mean = 148, cv = 0.8 }
max_new_tokens = 3000
ignore_eos = false
[client]
mode = "gamma"
rate_per_s = 7.058762283061085
burstiness = 0.3
concurrency = 1
"#,
            0.5,
        ),
    ];
    for (i, (text, least)) in cases.into_iter().enumerate() {
        let share = assert_same(&crate::scenario(text), &format!("earlier failure {i}"));
        assert!(
            share >= least,
            "case {i}: only {share} of its steps fast-forwarded"
        );
    }
}

/// A lone request (a prompt of 100 tokens, then `output` tokens) from one closed-loop client,
/// its prefill and every decode step lasting `step_ms` whatever the batch; `run` and `engine`
/// are more lines of those tables.
fn lone_request(run: &str, engine: &str, step_ms: f64, output: u64) -> Scenario {
    crate::scenario(&format!(
        r#"
name = "a lone request"
[run]
{run}
[engine]
kv_capacity_tokens = 100000
{engine}
[engine.step_time]
decode_base_ms = {step_ms:?}
decode_per_seq_ms = 0.0
decode_per_kv_token_ns = 0.0
prefill_base_ms = {step_ms:?}
prefill_per_token_us = 0.0
[workload]
requests = 1
prompt_tokens = {{ dist = "uniform", min = 100, max = 100 }}
output_tokens = {{ dist = "uniform", min = {output}, max = {output} }}
[client]
mode = "closed"
concurrency = 1
"#
    ))
}

/// Time-series points and log lines on the very instants steps end: a run whose last step ends
/// on a point, after points inside it (every step's end one, at the shorter interval), and
/// SGLang's decode lines and vLLM's stats line stamped at points. Steps and prefills of 10 ms: a
/// lone request of `n` tokens ends at `n` × 10 ms, its 49th decode step at 0.5 s.
#[test]
fn points_and_lines_at_the_ends_of_steps_are_taken_as_step_by_step() {
    for engine in [
        "disable_overlap_schedule = false\ndecode_log_interval = 7",
        "disable_overlap_schedule = true\ndecode_log_interval = 7",
        "kind = \"vllm\"\nasync_scheduling = true",
        "kind = \"vllm\"\nasync_scheduling = false",
    ] {
        for (n, points_s) in [(100, 0.5), (1200, 0.5), (1200, 0.01)] {
            let run = format!("timeseries_interval_s = {points_s}");
            let sc = lone_request(&run, engine, 10.0, n);
            let what = format!("{engine}: {n} tokens, points every {points_s} s");
            let share = assert_same(&sc, &what);
            assert!(
                share > 0.5,
                "{what}: only {share} of the steps fast-forwarded"
            );
        }
    }
}

/// vLLM's stats line due on the very nanosecond a long quiet stretch ends (every 10 s from 0):
/// request 0 alone is sent so that one of its decode turns ends at 10 s (a run without the
/// second request tells when, relative to its arrival), and request 1 arrives 1 µs later, within
/// the next turn, so the stretch stops at 10 s; the line must come out where and as the
/// step-by-step path prints it. For a stretch on the model's line (linear) and one priced turn
/// by turn (roofline, where printing it inside the stretch read past the stretch's turn ends),
/// with async scheduling or without.
#[test]
fn a_stats_line_due_as_a_long_stretch_ends_is_taken_as_step_by_step() {
    let dir = tempfile::tempdir().unwrap();
    let models = [LINEAR_STEPS, ROOFLINE_STEPS];
    let scenario = |model: &str, rows: &str, engine: &str| {
        let header = "prompt_tokens,output_tokens,arrival_s";
        std::fs::write(dir.path().join("trace.csv"), format!("{header}\n{rows}")).unwrap();
        let text = format!(
            "name = \"a stats line at a stretch's end\"\n{model}[engine]\nkind = \"vllm\"\n\
             kv_capacity_tokens = 100000\n{engine}\n[workload]\ntrace = \"trace.csv\"\n\
             [client]\nmode = \"trace\"\n"
        );
        let src = Source {
            name: "a stats line at a stretch's end".to_string(),
            base_dir: dir.path().to_path_buf(),
            text,
        };
        sc_mod::load(&src, &[]).unwrap()
    };
    let at_s = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let ten_s = 10_000_000_000;
    for model in models {
        for engine in ["async_scheduling = true", "async_scheduling = false"] {
            // When request 0's 300th decode turn ends, counted from its arrival.
            let alone = outputs(
                &scenario(model, "100,301,0\n", engine),
                Stepping::StepByStep,
            );
            let sent_ns = ten_s - alone.3[0].done_ns;
            let what = format!("{model}{engine}");
            let rows = format!("100,301,{}\n", at_s(sent_ns));
            let alone = outputs(&scenario(model, &rows, engine), Stepping::StepByStep);
            assert_eq!(alone.3[0].done_ns, ten_s, "{what}: the turn ends at 10 s");
            let rows = format!("100,2000,{}\n40,5,{}\n", at_s(sent_ns), at_s(ten_s + 1000));
            let sc = scenario(model, &rows, engine);
            assert_same(&sc, &what);
            assert!(
                outputs(&sc, Stepping::FastForward).4 > 0,
                "{what}: nothing fast-forwarded"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), .. ProptestConfig::default() })]

    #[test]
    fn random_scenarios_run_identically_with_both_engines(text in random_scenario()) {
        same_both_ways(&text)?;
    }

    #[test]
    fn random_prefix_scenarios_run_identically_with_both_engines(text in random_prefix_scenario()) {
        same_both_ways(&text)?;
    }
}

#[test]
fn vllms_golden_cases_run_identically_with_both_engines() {
    // Sync and async scheduling, preemption, chunking: the oracle's workloads.
    let dir = root().join("tests/fixtures/golden/vllm");
    let mut shares = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path().join("scenario.toml");
        if !p.exists() {
            continue;
        }
        let sc = sc_mod::load(&Source::read(&p).unwrap(), &[]).unwrap();
        let name = p
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        shares.push((name.clone(), assert_same(&sc, &name)));
    }
    eprintln!("{shares:?}");
    assert!(shares.len() >= 12, "{shares:?}");
    let sync = shares
        .iter()
        .find(|(n, _)| n == "max-num-seqs-binding")
        .unwrap();
    let asynchronous = shares
        .iter()
        .find(|(n, _)| n == "async-open-poisson")
        .unwrap();
    assert!(sync.1 > 0.2 && asynchronous.1 > 0.2, "{shares:?}");
    // Prefix caching without shared prefixes (preempted requests hitting their own blocks)
    // is fast-forwarded through its preemptions too.
    for name in ["cache-preempt-closed", "cache-async-preempt-closed"] {
        let share = shares.iter().find(|(n, _)| n == name).unwrap();
        assert!(share.1 > 0.5, "{shares:?}");
    }
}

fn random_vllm_scenario() -> impl Strategy<Value = String> {
    random_vllm_scenario_with(false)
}

/// Workloads whose requests share prefixes, vLLM's prefix caching on or off.
fn random_vllm_prefix_scenario() -> impl Strategy<Value = String> {
    random_vllm_scenario_with(true)
}

fn random_vllm_scenario_with(prefixes: bool) -> impl Strategy<Value = String> {
    (
        (40u64..3_000, prop_oneof![Just(16u32), Just(1), Just(7)], 1u32..64, 1u32..4096),
        (1u32..1500, 1u32..600, any::<bool>(), 0u32..3, 1u32..60),
        (any::<bool>(), any::<bool>(), any::<bool>(), prop_oneof![Just(0u32), 1u32..300]),
        (1.0f64..30.0, 0.0f64..2.0, 0.0f64..120.0, 0.1f64..20.0),
        (1u32..40, any::<u64>(), 1u32..200),
        ((1u32..2000, 0.01f64..0.6, 1u32..600, 0.01f64..0.4), any::<bool>()),
    )
        .prop_map(
            move |((blocks, block, seqs, batched), (pmax, omax, eos, client, conc), (chunked, full, asynchronous, threshold), (db, ds, dk, rate), (req, seed, before), ((p1, s1, p2, s2), caching))| {
                // Prompts: their own part and at most the longest prefix.
                let shared = if prefixes { p1.max(p2 + 100) } else { 0 };
                let pmax_all = pmax + shared;
                // The pool and the step budget hold at least one whole request.
                let blocks = blocks.max(u64::from((pmax_all + 3000).div_ceil(block)) + 2);
                let batched = if chunked { batched } else { batched.max(pmax_all + 3000) };
                let (caching, groups) = if prefixes {
                    (
                        format!("enable_prefix_caching = {caching}"),
                        format!("prefix_groups = {{ sys = {{ tokens = {p1}, share = {s1} }}, tools = {{ tokens = {{ dist = \"uniform\", min = 100, max = {} }}, share = {s2} }} }}", p2 + 100),
                    )
                } else {
                    // Without shared prefixes, caching on (the default) or off.
                    (format!("enable_prefix_caching = {caching}"), String::new())
                };
                // An observation just before the point and the stats line due at 20 s, often
                // in the same step as both.
                let observe = 20.0 - f64::from(before) / 10_000.0;
                let client = match client {
                    0 => format!("mode = \"closed\"\nconcurrency = {conc}"),
                    1 => format!("mode = \"poisson\"\nrate_per_s = {rate}"),
                    _ => format!("mode = \"gamma\"\nrate_per_s = {rate}\nburstiness = 0.3\nconcurrency = {conc}"),
                };
                format!(
                    r#"
name = "diff-vllm"
seed = {seed}
[run]
observe_at_s = [1.5, 7.0, {observe}, 30.0]
window_s = 5
timeseries_interval_s = 0.5
[engine]
kind = "vllm"
num_gpu_blocks_override = {blocks}
block_size = {block}
max_num_seqs = {seqs}
max_num_batched_tokens = {batched}
max_model_len = {}
enable_chunked_prefill = {chunked}
long_prefill_token_threshold = {threshold}
scheduler_reserve_full_isl = {full}
async_scheduling = {asynchronous}
{caching}
[engine.step_time]
decode_base_ms = {db}
decode_per_seq_ms = {ds}
decode_per_kv_token_ns = {dk}
prefill_per_token_us = 20.0
[workload]
requests = {}
prompt_tokens = {{ dist = "uniform", min = 1, max = {pmax} }}
output_tokens = {{ dist = "lognormal", mean = {omax}, cv = 0.8 }}
max_new_tokens = 3000
ignore_eos = {eos}
{groups}
[client]
{client}
"#,
                    pmax_all + 3000,
                    req * 10
                )
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), .. ProptestConfig::default() })]

    #[test]
    fn random_vllm_scenarios_run_identically_with_both_engines(text in random_vllm_scenario()) {
        same_both_ways(&text)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), .. ProptestConfig::default() })]

    #[test]
    fn random_vllm_roofline_scenarios_run_identically_with_both_engines(text in on_roofline(random_vllm_scenario())) {
        same_both_ways(&text)?;
    }
}

proptest! {
    // Step by step with a block pool is the slow path of the debug build: fewer cases.
    #![proptest_config(ProptestConfig { cases: cases(16), .. ProptestConfig::default() })]

    #[test]
    fn random_vllm_prefix_scenarios_run_identically_with_both_engines(text in random_vllm_prefix_scenario()) {
        same_both_ways(&text)?;
    }
}

/// The summary JSON without its inter-token latencies (every `itl_ms`, at any depth).
fn without_itl(json: &str) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("itl_ms");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    strip(&mut v);
    v
}

/// A run that does not time the gaps between tokens (as `plan`'s) leaves both ITL distributions
/// empty and changes nothing else — summary, time series, log, per-request records — for every
/// scenario, fast-forwarded, and for the case study's SGLang and vLLM runs step by step too.
#[test]
fn untimed_token_gaps_leave_only_the_itl_empty() {
    use servesim::metrics::TokenGaps;
    let mut files = Vec::new();
    scenario_files(&root().join("scenarios"), &mut files);
    files.sort();
    let mut untimed_any = 0;
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let src = Source::read(&f).unwrap();
        let sc = sc_mod::load(&src, &["workload.requests=600".to_string()]).unwrap();
        let mut steppings = vec![Stepping::FastForward];
        if name == "case-study-b2.toml" || name == "case-study-b2-vllm.toml" {
            steppings.push(Stepping::StepByStep);
        }
        for stepping in steppings {
            let run = |token_gaps| {
                let opts = RunOptions {
                    stepping,
                    keep_log: true,
                    keep_requests: true,
                    token_gaps,
                    ..RunOptions::default()
                };
                let r = engine::run(&sc, &opts).expect("the run finishes");
                let a = analysis::analyse(&r);
                let s = summary::summarize(&sc, &r, &a);
                let itl = (r.latency.itl_ms.count(), r.steady_latency.itl_ms.count());
                let out = (
                    without_itl(&summary::to_json(&s)),
                    timeseries::to_csv(&r, sc.workload.shares_prefixes()),
                    server_log::render(sc.engine.kind(), &r.log, 8),
                    r.requests,
                );
                (out, itl)
            };
            let (timed, timed_itl) = run(TokenGaps::Timed);
            let (untimed, untimed_itl) = run(TokenGaps::Untimed);
            let what = format!("{name}, {stepping:?}");
            assert_eq!(untimed_itl, (0, 0), "{what}: untimed gaps were recorded");
            assert!(timed_itl.0 + timed_itl.1 > 0, "{what}: no gap timed");
            assert!(
                timed.0 == untimed.0,
                "{what}: summary differs beyond the ITL"
            );
            assert!(timed.1 == untimed.1, "{what}: time series differs");
            assert!(timed.2 == untimed.2, "{what}: server log differs");
            assert!(timed.3 == untimed.3, "{what}: per-request records differ");
            untimed_any += 1;
        }
    }
    assert!(untimed_any >= 12);
}

/// vLLM's long quiet stretches — few requests with long outputs, hundreds of turns between
/// events — which the fast engine takes as runs of their own (`scheduler/vllm/stretch.rs`):
/// every step-time model, both loops, blocks of 16, 1 and 7 tokens, the prefix cache on and
/// off, with time-series points, observations and stats lines inside the stretches (some in
/// one step), and a pool small enough that some stretches end in a preemption.
#[test]
fn vllms_long_quiet_stretches_run_identically_with_both_engines() {
    let src = Source::read(&root().join("scenarios/case-study-b2-vllm.toml")).unwrap();
    let (at, end) = (
        src.text.find("[engine.step_time]").unwrap(),
        src.text.find("[workload]").unwrap(),
    );
    let table = "[engine.step_time]\nmodel = \"table\"\ndecode_batch = [1, 64]\n\
                 decode_kv_tokens = [0, 20000]\ndecode_ms = [12.8, 24.8, 40.6, 53.6]\n\
                 prefill_tokens = [1, 16384]\nprefill_ms = [15.06, 998.04]\n\n";
    let models = [
        ("linear", src.text[at..end].to_string()),
        (
            "roofline",
            "[engine.step_time]\nmodel = \"roofline\"\n\n".to_string(),
        ),
        ("table", table.to_string()),
    ];
    let mut fast = Vec::new();
    for (model, step_time) in &models {
        let text = format!("{}{step_time}{}", &src.text[..at], &src.text[end..]);
        let source = Source {
            text,
            ..src.clone()
        };
        for (asynchronous, block, caching, concurrency, blocks) in [
            (false, 16, true, 1, 4000),
            (true, 16, true, 3, 4000),
            (true, 1, false, 2, 9000),
            (false, 7, false, 3, 1300),
            (true, 7, true, 4, 1400),
            (false, 16, false, 6, 700),
        ] {
            let sets = [
                "workload.requests=12".to_string(),
                "workload.output_tokens={ dist = \"lognormal\", mean = 1500, cv = 0.5, min = 1, max = 6000 }".to_string(),
                // Some just before a stats line and a point (every 10 s): both fall in the
                // step after the observation.
                "run.observe_at_s=[3.3, 29.995, 41.7, 59.9995, 89.99]".to_string(),
                "run.timeseries_interval_s=2.5".to_string(),
                format!("engine.async_scheduling={asynchronous}"),
                format!("engine.block_size={block}"),
                format!("engine.enable_prefix_caching={caching}"),
                format!("engine.num_gpu_blocks_override={blocks}"),
                format!("client.concurrency={concurrency}"),
            ];
            let sc = sc_mod::load(&source, &sets).unwrap();
            let what = format!("{model}, {sets:?}");
            fast.push(assert_same(&sc, &what));
        }
    }
    // Nearly every step is taken at once.
    assert!(fast.iter().all(|&f| f > 0.9), "{fast:?}");
}

/// vLLM with async scheduling and chunked prefill off, a token budget that binds: a request
/// whose last token (by `max_tokens`) is already in flight is not scheduled in its last turn,
/// and so leaves its token of the budget to WAITING's head, whose whole prompt then fits — an
/// admission in the same turn as a completion. Prompts just under the budget, so that RUNNING's
/// decodes leave room for the head only when one of them is not scheduled.
#[test]
fn a_request_finishing_by_length_leaves_its_budget_to_an_admission_under_async_scheduling() {
    for seed in 0..4 {
        let text = format!(
            r#"
name = "budget left by an unscheduled request"
seed = {seed}
[engine]
kind = "vllm"
kv_capacity_tokens = 100000
block_size = 16
max_num_seqs = 16
max_num_batched_tokens = 64
enable_chunked_prefill = false
async_scheduling = true
[engine.step_time]
decode_base_ms = 10.0
decode_per_seq_ms = 0.0
decode_per_kv_token_ns = 0.0
prefill_base_ms = 10.0
prefill_per_token_us = 0.0
[workload]
requests = 60
prompt_tokens = {{ dist = "uniform", min = 56, max = 62 }}
output_tokens = {{ dist = "uniform", min = 30, max = 90 }}
max_new_tokens = 90
ignore_eos = true
[client]
mode = "poisson"
rate_per_s = 40
"#
        );
        let what = format!("seed {seed}");
        let share = assert_same(&crate::scenario(&text), &what);
        assert!(
            share > 0.3,
            "{what}: only {share} of the steps fast-forwarded"
        );
    }
}

/// A `run.max_events` bound that falls a few dozen steps into vLLM's decode: the run's quiet
/// turns take all the steps the bound leaves (fewer than a long stretch's), and the run stops
/// there, before its next turn, as step by step stops. A lone request of 1000 tokens, with
/// async scheduling or without.
#[test]
fn a_bound_on_batches_inside_quiet_turns_stops_vllm_at_the_same_batch() {
    for engine in ["async_scheduling = true", "async_scheduling = false"] {
        for bound in [20, 50] {
            let vllm = format!("kind = \"vllm\"\n{engine}");
            let sc = lone_request(&format!("max_events = {bound}"), &vllm, 10.0, 1000);
            assert_stopped_alike(&sc, &format!("{engine}, {bound} batches"));
        }
    }
}

/// vLLM's stats lines (every 10 s) when a single decode turn spans one and ends on the next:
/// steps of exactly 10 s, so that each turn from a multiple of 10 s prints the line due at its
/// start and ends on the instant the next is due, which the next turn prints, after this one's
/// output, as step by step. With async scheduling or without.
#[test]
fn a_stats_line_due_as_a_turn_of_ten_seconds_ends_is_taken_as_step_by_step() {
    for engine in ["async_scheduling = true", "async_scheduling = false"] {
        let sc = lone_request("", &format!("kind = \"vllm\"\n{engine}"), 10_000.0, 8);
        let share = assert_same(&sc, engine);
        assert!(
            share > 0.5,
            "{engine}: only {share} of the steps fast-forwarded"
        );
    }
}
