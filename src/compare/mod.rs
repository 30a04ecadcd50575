//! `servesim compare`: replay the requests of a benchmark result file (SGLang's
//! `bench_serving`, vLLM's `vllm bench serve`) through a scenario and set bench_serving's
//! metrics of the measurement and of the simulation side by side; and the same metrics of any
//! run as a result file of its own (`run --format bench-json`).
//!
//! * [`result_file`] — reading a result file, with errors that name the key path.
//! * [`metrics`] — bench_serving's metric definitions, from per-request samples.
//! * [`bench_json`] — a run written with bench_serving's keys.
//!
//! How the replay sends the requests (the scenario's workload and client are replaced; its
//! engine, hardware, model, step-time model and off-GPU overheads stay): every successful
//! request of the file, in send order, with its own prompt length and exactly its measured
//! output length (`ignore_eos`, `max_new_tokens` = that length). Arrivals:
//!
//! * the file's own start times when it has them (vLLM's `start_times` less `queue_times`,
//!   i.e. when each request was ready; a `max_concurrency` still caps requests in flight);
//! * else at `request_rate`: Poisson (gamma with vLLM's `burstiness` ≠ 1) drawn with the
//!   scenario's seed — bench_serving's own seed is not in the file, so the arrival times differ
//!   from the measured ones though their law is the same — under `max_concurrency` if set;
//! * else (`request_rate` inf) all at once, through `max_concurrency` slots (a closed loop
//!   without think time), or every request at t = 0 without a limit.
//!
//! Failed requests are left out, as bench_serving leaves them out of its metrics.

pub mod bench_json;
pub mod metrics;
pub mod result_file;

use std::sync::Arc;

use serde::Serialize;

pub use metrics::{BenchMetrics, LatencyCdfs, Sample, Spread};
pub use result_file::{Arrivals, BenchFile, ResultFileError};

use crate::engine::{self, RunOptions, SimError, Stepping};
use crate::metrics::RunResult;
use crate::scenario::{ClientSpec, Scenario};
use crate::time::{SimDuration, SimTime};
use crate::workload::trace::TraceRow;
use crate::workload::{Lengths, WorkloadSpec};

/// The scenario that replays `file`'s requests: `base` with its workload and client replaced.
pub fn replay_scenario(base: &Scenario, file: &BenchFile, file_name: &str) -> Scenario {
    let mut sc = base.clone();
    let given = match &file.arrivals {
        Arrivals::Given(at) => Some(at),
        _ => None,
    };
    let mut rows: Vec<TraceRow> = (file.samples.iter().enumerate())
        .map(|(i, s)| TraceRow {
            prompt_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            arrival: given.map(|at| {
                SimTime::ZERO
                    + SimDuration::from_secs_f64(at[i]).expect("invariant: arrivals are ≥ 0")
            }),
            max_new_tokens: Some(s.output_tokens),
            ignore_eos: Some(true),
        })
        .collect();
    // The trace client sends in file order at non-decreasing times.
    rows.sort_by_key(|r| r.arrival);
    let n = rows.len();
    sc.workload = WorkloadSpec {
        requests: n as u64,
        lengths: Lengths::Trace {
            file: file_name.to_string(),
            rows: Arc::from(rows),
            has_arrivals: given.is_some(),
        },
        max_new_tokens: None,
        ignore_eos: true,
    };
    let concurrency = file.max_concurrency;
    sc.client = match file.arrivals {
        Arrivals::Given(_) => ClientSpec::Trace { concurrency },
        Arrivals::Rate {
            rate_per_s,
            burstiness,
        } if burstiness != 1.0 => ClientSpec::Gamma {
            rate_per_s,
            burstiness,
            concurrency,
        },
        Arrivals::Rate { rate_per_s, .. } => ClientSpec::Poisson {
            rate_per_s,
            concurrency,
        },
        Arrivals::AllAtOnce => ClientSpec::Closed {
            concurrency: concurrency.unwrap_or(n as u32),
            think_time: SimDuration::ZERO,
        },
    };
    sc
}

/// Run `sc` keeping what bench_serving's metrics need: every request and every token time.
pub fn run_for_bench(sc: &Scenario) -> Result<RunResult, SimError> {
    engine::run(
        sc,
        &RunOptions {
            keep_requests: true,
            keep_token_times: true,
            stepping: Stepping::StepByStep,
            ..RunOptions::default()
        },
    )
}

/// The completed requests of a run as a benchmark client sees them (the off-GPU overheads
/// included), in send order, and the benchmark's duration: from the start to the last
/// response.
///
/// A request's later tokens come one per decode round after its first: its `k`-th token is
/// the engine's `(k − 1)`-th decode round after its first token, reaching the client as the
/// scenario's overheads say. A request retracted and resumed is not in the rounds it waits
/// through; its gaps are then taken as equal (its E2E and TPOT stay exact).
pub fn simulated(sc: &Scenario, r: &RunResult) -> (Vec<Sample>, f64) {
    let o = &sc.overhead;
    let rounds = &r.decode_round_ns;
    let ns = |x: u64| x as f64 / 1e9;
    let mut out = Vec::new();
    let mut end_ns = 0;
    // In send order, as the benchmark clients list them.
    let mut done: Vec<_> = r.requests.iter().filter(|q| q.completed).collect();
    done.sort_by_key(|q| q.seq);
    for q in done {
        end_ns = end_ns.max(q.done_ns);
        let first = q
            .first_token_ns
            .expect("invariant: a completed request has a first token");
        let n = q.output_tokens as usize;
        let engine_first = first - o.to_client(1).as_ns();
        let from = rounds.partition_point(|&t| t <= engine_first);
        let mine = rounds.get(from..from + n.saturating_sub(1));
        let itls_s: Vec<f64> = match mine {
            Some(mine) if q.retractions == 0 => {
                let times = std::iter::once(engine_first).chain(mine.iter().copied());
                let times: Vec<u64> = times.collect();
                times
                    .windows(2)
                    .map(|w| ns(w[1] - w[0] + o.per_token.as_ns()))
                    .collect()
            }
            _ => {
                let gap = ns(q.done_ns - first) / (n.max(2) - 1) as f64;
                vec![gap; n.saturating_sub(1)]
            }
        };
        out.push(Sample {
            input_tokens: q.prompt_tokens,
            output_tokens: q.output_tokens,
            ttft_s: ns(first - q.sent_ns),
            itls_s,
            e2e_s: ns(q.done_ns - q.sent_ns),
            start_s: Some(ns(q.sent_ns)),
        });
    }
    (out, ns(end_ns))
}

/// One compared figure.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// bench_serving's key.
    pub key: &'static str,
    /// In the result file.
    pub measured: f64,
    /// By servesim.
    pub simulated: f64,
    /// (simulated − measured) / measured, in percent; `None` when measured is 0.
    pub error_pct: Option<f64>,
}

/// The measurement and the simulation side by side.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The tool that wrote the file.
    pub tool: &'static str,
    /// `backend`, `model_id` and `date` of the file, when it gives them.
    pub backend: Option<String>,
    /// The model the benchmark served.
    pub model_id: Option<String>,
    /// When it ran.
    pub date: Option<String>,
    /// How the replay placed the arrivals.
    pub arrivals: String,
    /// Requests replayed, and failed ones left out.
    pub requests: usize,
    /// Failed requests of the file.
    pub failed: usize,
    /// Each figure.
    pub rows: Vec<Row>,
    /// The per-request samples (for the figure), not serialized.
    #[serde(skip)]
    pub measured: Vec<Sample>,
    /// The simulated samples.
    #[serde(skip)]
    pub simulated: Vec<Sample>,
}

/// A scenario for `file` from the catalog, when the file names a model and a GPU the catalog
/// knows (the benchmark clients record the model; the GPU only when the run was labelled with
/// `--metadata gpu=…`): the engine of its backend, the roofline step-time model uncalibrated —
/// a pure prediction from datasheets. `None` with the reason otherwise.
pub fn default_scenario_text(file: &BenchFile) -> Result<String, String> {
    let catalog = crate::catalog::Catalog::builtin_ref();
    let model_id = file
        .model_id
        .as_deref()
        .ok_or("it does not name the model")?;
    let model = catalog
        .lookup_model(model_id.rsplit('/').next().unwrap_or(model_id))
        .or_else(|_| catalog.lookup_model(model_id))
        .map_err(|_| format!("the catalog does not know its model `{model_id}`"))?;
    let gpu_name = file.gpu.as_deref().ok_or(
        "it does not name the GPU (the benchmark clients record it only when told: vllm bench serve --metadata gpu=h100 tp=8)",
    )?;
    let gpu = catalog
        .lookup_gpu(gpu_name)
        .map_err(|_| format!("the catalog does not know its GPU `{gpu_name}`"))?;
    let tp = file.tensor_parallel.unwrap_or(1);
    let kind = match file.backend.as_deref() {
        Some(b) if b.starts_with("vllm") => "vllm",
        _ => "sglang",
    };
    Ok(format!(
        "name = \"{model} on {tp}x {gpu}, from the result file\"\n\
         [hardware]\ngpu = \"{gpu}\"\nnum_gpus = {tp}\ntensor_parallel = {tp}\n\
         [model]\nname = \"{model}\"\n\
         [engine]\nkind = \"{kind}\"\n\
         [engine.step_time]\nmodel = \"roofline\"\n\
         [workload]\nrequests = 1\nprompt_tokens = {{ dist = \"constant\", value = 1 }}\n\
         output_tokens = {{ dist = \"constant\", value = 1 }}\n\
         [client]\nconcurrency = 1\n",
        model = model.name,
        gpu = gpu.name,
    ))
}

/// When the result file names a model the catalog knows and the scenario names another one,
/// the warning to print (a replay through another model's step times compares nothing).
pub fn model_mismatch(file: &BenchFile, sc: &crate::scenario::Scenario) -> Option<String> {
    let catalog = crate::catalog::Catalog::builtin_ref();
    let id = file.model_id.as_deref()?;
    let measured = catalog
        .lookup_model(id.rsplit('/').next().unwrap_or(id))
        .or_else(|_| catalog.lookup_model(id))
        .ok()?;
    let replayed = sc.model.as_ref()?.name.as_deref()?;
    (measured.name != replayed).then(|| {
        format!(
            "the result file measured `{id}` (catalog model {}) but the scenario's model is {replayed}: the replay predicts another model's server",
            measured.name
        )
    })
}

/// How `file`'s arrivals are replayed, in words.
pub fn arrivals_in_words(file: &BenchFile) -> String {
    let cap = match file.max_concurrency {
        Some(c) => format!(", at most {c} in flight (max_concurrency)"),
        None => String::new(),
    };
    match &file.arrivals {
        Arrivals::Given(_) => format!("each request when it was ready (start_times − queue_times){cap}"),
        Arrivals::Rate { rate_per_s, burstiness } if *burstiness != 1.0 => format!(
            "gamma arrivals at {rate_per_s} req/s, burstiness {burstiness}, with the scenario's seed (the file has no send times){cap}"
        ),
        Arrivals::Rate { rate_per_s, .. } => format!(
            "Poisson arrivals at {rate_per_s} req/s with the scenario's seed (the file has no send times){cap}"
        ),
        Arrivals::AllAtOnce => match file.max_concurrency {
            Some(c) => format!("request_rate inf: {c} slots, each sending its next request as soon as the last one is answered"),
            None => "request_rate inf: every request at t = 0".to_string(),
        },
    }
}

/// Replay `file` through `base` and compare.
pub fn compare(base: &Scenario, file: &BenchFile, file_name: &str) -> Result<Comparison, SimError> {
    let sc = replay_scenario(base, file, file_name);
    let r = run_for_bench(&sc)?;
    let (sim, duration_s) = simulated(&sc, &r);
    let measured = BenchMetrics::of(&file.samples, file.duration_s);
    let simulated = BenchMetrics::of(&sim, duration_s.max(f64::MIN_POSITIVE));
    let rows = (measured.compared().into_iter().zip(simulated.compared()))
        .map(|((key, m), (_, s))| Row {
            key,
            measured: m,
            simulated: s,
            error_pct: (m != 0.0).then(|| (s - m) / m * 100.0),
        })
        .collect();
    Ok(Comparison {
        tool: file.tool,
        backend: file.backend.clone(),
        model_id: file.model_id.clone(),
        date: file.date.clone(),
        arrivals: arrivals_in_words(file),
        requests: file.samples.len(),
        failed: file.failed,
        rows,
        measured: file.samples.clone(),
        simulated: sim,
    })
}

/// The comparison as a text table.
pub fn render(c: &Comparison, scenario_name: &str) -> String {
    use std::fmt::Write;
    let mut w = String::new();
    let opt = |x: &Option<String>| x.clone().unwrap_or_else(|| "?".into());
    let _ = writeln!(
        w,
        "{} result (backend {}, model {}, date {}) replayed through `{scenario_name}`",
        c.tool,
        opt(&c.backend),
        opt(&c.model_id),
        opt(&c.date)
    );
    let _ = writeln!(
        w,
        "{} requests ({} failed, left out); arrivals: {}",
        c.requests, c.failed, c.arrivals
    );
    let _ = writeln!(
        w,
        "each request sent with its measured prompt and asking for exactly its measured output (ignore_eos, max_new_tokens = that length), as the benchmark client sends them"
    );
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "{:<24} {:>14} {:>14} {:>9}",
        "metric", "measured", "servesim", "error"
    );
    for r in &c.rows {
        let err = match r.error_pct {
            Some(e) => format!("{e:+.1}%"),
            None => "-".into(),
        };
        let _ = writeln!(
            w,
            "{:<24} {:>14.2} {:>14.2} {:>9}",
            r.key, r.measured, r.simulated, err
        );
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "bench_serving's definitions: TPOT = (E2E − TTFT) / (output − 1) over requests with more than one output token; ITL pools every inter-token gap; throughputs over the benchmark's duration (servesim's: to its last response)"
    );
    w
}
