//! A run written as SGLang's `bench_serving` writes its result file with `--output-details`
//! (`run --format bench-json`): the same keys, in the same order, with the same types, so
//! `jq` or `diff` set servesim's file beside a measured one. Keys servesim has no value for
//! (`tag`, the dataset's arguments, `server_info`, `accept_length`) are `null`; `request_rate`
//! is `"inf"` where bench_serving's `json.dumps` writes `Infinity`, which JSON has not.
//! `generated_texts` are empty strings: servesim generates no text.

use serde::Serialize;

use super::metrics::{BenchMetrics, Sample};
use crate::scenario::{ClientSpec, Scenario};

/// `request_rate`: a number or `"inf"`.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Rate {
    /// Requests per second.
    PerS(f64),
    /// `"inf"`.
    Inf(&'static str),
}

/// bench_serving's result object, key by key (SGLang 0.5.23, `--output-details`): the fields
/// are its keys, written by [`BenchJson::to_line`].
#[derive(Clone, Debug, Serialize)]
pub struct BenchJson {
    tag: Option<String>,
    backend: String,
    dataset_name: String,
    request_rate: Rate,
    max_concurrency: Option<u32>,
    sharegpt_output_len: Option<u32>,
    random_input_len: Option<u32>,
    random_output_len: Option<u32>,
    random_range_ratio: Option<f64>,
    server_info: Option<()>,
    duration: f64,
    completed: u64,
    total_input_tokens: u64,
    total_input_text_tokens: u64,
    total_input_vision_tokens: u64,
    total_output_tokens: u64,
    total_output_tokens_retokenized: u64,
    request_throughput: f64,
    input_throughput: f64,
    output_throughput: f64,
    total_throughput: f64,
    mean_e2e_latency_ms: f64,
    median_e2e_latency_ms: f64,
    std_e2e_latency_ms: f64,
    p90_e2e_latency_ms: f64,
    p95_e2e_latency_ms: f64,
    p99_e2e_latency_ms: f64,
    mean_ttft_ms: f64,
    median_ttft_ms: f64,
    std_ttft_ms: f64,
    p90_ttft_ms: f64,
    p95_ttft_ms: f64,
    p99_ttft_ms: f64,
    mean_tpot_ms: f64,
    median_tpot_ms: f64,
    std_tpot_ms: f64,
    p90_tpot_ms: f64,
    p95_tpot_ms: f64,
    p99_tpot_ms: f64,
    mean_itl_ms: f64,
    median_itl_ms: f64,
    std_itl_ms: f64,
    p90_itl_ms: f64,
    p95_itl_ms: f64,
    p99_itl_ms: f64,
    concurrency: f64,
    accept_length: Option<f64>,
    max_output_tokens_per_s: f64,
    max_concurrent_requests: u64,
    input_lens: Vec<u32>,
    output_lens: Vec<u32>,
    ttfts: Vec<f64>,
    itls: Vec<Vec<f64>>,
    generated_texts: Vec<String>,
    errors: Vec<String>,
}

impl BenchJson {
    /// The result file of a run of `sc` whose completed requests are `samples`.
    pub fn new(sc: &Scenario, samples: &[Sample], duration_s: f64) -> BenchJson {
        let m = BenchMetrics::of(samples, duration_s);
        let (rate, cap) = match sc.client {
            ClientSpec::Poisson {
                rate_per_s,
                concurrency,
            }
            | ClientSpec::Gamma {
                rate_per_s,
                concurrency,
                ..
            } => (Rate::PerS(rate_per_s), concurrency),
            ClientSpec::Closed { concurrency, .. } => (Rate::Inf("inf"), Some(concurrency)),
            ClientSpec::Trace { concurrency } => (Rate::Inf("inf"), concurrency),
        };
        BenchJson {
            tag: None,
            backend: "servesim".into(),
            dataset_name: "servesim".into(),
            request_rate: rate,
            max_concurrency: cap,
            sharegpt_output_len: None,
            random_input_len: None,
            random_output_len: None,
            random_range_ratio: None,
            server_info: None,
            duration: m.duration_s,
            completed: m.completed,
            total_input_tokens: m.total_input_tokens,
            total_input_text_tokens: m.total_input_tokens,
            total_input_vision_tokens: 0,
            total_output_tokens: m.total_output_tokens,
            total_output_tokens_retokenized: m.total_output_tokens,
            request_throughput: m.request_throughput,
            input_throughput: m.input_throughput,
            output_throughput: m.output_throughput,
            total_throughput: m.total_throughput,
            mean_e2e_latency_ms: m.e2e.mean,
            median_e2e_latency_ms: m.e2e.median,
            std_e2e_latency_ms: m.e2e.std,
            p90_e2e_latency_ms: m.e2e.p90,
            p95_e2e_latency_ms: m.e2e.p95,
            p99_e2e_latency_ms: m.e2e.p99,
            mean_ttft_ms: m.ttft.mean,
            median_ttft_ms: m.ttft.median,
            std_ttft_ms: m.ttft.std,
            p90_ttft_ms: m.ttft.p90,
            p95_ttft_ms: m.ttft.p95,
            p99_ttft_ms: m.ttft.p99,
            mean_tpot_ms: m.tpot.mean,
            median_tpot_ms: m.tpot.median,
            std_tpot_ms: m.tpot.std,
            p90_tpot_ms: m.tpot.p90,
            p95_tpot_ms: m.tpot.p95,
            p99_tpot_ms: m.tpot.p99,
            mean_itl_ms: m.itl.mean,
            median_itl_ms: m.itl.median,
            std_itl_ms: m.itl.std,
            p90_itl_ms: m.itl.p90,
            p95_itl_ms: m.itl.p95,
            p99_itl_ms: m.itl.p99,
            concurrency: m.concurrency,
            accept_length: None,
            max_output_tokens_per_s: m.max_output_tokens_per_s,
            max_concurrent_requests: m.max_concurrent_requests,
            input_lens: samples.iter().map(|s| s.input_tokens).collect(),
            output_lens: samples.iter().map(|s| s.output_tokens).collect(),
            ttfts: samples.iter().map(|s| s.ttft_s).collect(),
            itls: samples.iter().map(|s| s.itls_s.clone()).collect(),
            generated_texts: vec![String::new(); samples.len()],
            errors: vec![String::new(); samples.len()],
        }
    }

    /// One line of JSON, as bench_serving appends it.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("invariant: the result serializes");
        s.push('\n');
        s
    }
}
