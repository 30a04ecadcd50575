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

/// bench_serving's result object, key by key (SGLang 0.5.23, `--output-details`).
#[derive(Clone, Debug, Serialize)]
#[allow(missing_docs)]
pub struct BenchJson {
    pub tag: Option<String>,
    pub backend: String,
    pub dataset_name: String,
    pub request_rate: Rate,
    pub max_concurrency: Option<u32>,
    pub sharegpt_output_len: Option<u32>,
    pub random_input_len: Option<u32>,
    pub random_output_len: Option<u32>,
    pub random_range_ratio: Option<f64>,
    pub server_info: Option<()>,
    pub duration: f64,
    pub completed: u64,
    pub total_input_tokens: u64,
    pub total_input_text_tokens: u64,
    pub total_input_vision_tokens: u64,
    pub total_output_tokens: u64,
    pub total_output_tokens_retokenized: u64,
    pub request_throughput: f64,
    pub input_throughput: f64,
    pub output_throughput: f64,
    pub total_throughput: f64,
    pub mean_e2e_latency_ms: f64,
    pub median_e2e_latency_ms: f64,
    pub std_e2e_latency_ms: f64,
    pub p90_e2e_latency_ms: f64,
    pub p95_e2e_latency_ms: f64,
    pub p99_e2e_latency_ms: f64,
    pub mean_ttft_ms: f64,
    pub median_ttft_ms: f64,
    pub std_ttft_ms: f64,
    pub p90_ttft_ms: f64,
    pub p95_ttft_ms: f64,
    pub p99_ttft_ms: f64,
    pub mean_tpot_ms: f64,
    pub median_tpot_ms: f64,
    pub std_tpot_ms: f64,
    pub p90_tpot_ms: f64,
    pub p95_tpot_ms: f64,
    pub p99_tpot_ms: f64,
    pub mean_itl_ms: f64,
    pub median_itl_ms: f64,
    pub std_itl_ms: f64,
    pub p90_itl_ms: f64,
    pub p95_itl_ms: f64,
    pub p99_itl_ms: f64,
    pub concurrency: f64,
    pub accept_length: Option<f64>,
    pub max_output_tokens_per_s: f64,
    pub max_concurrent_requests: u64,
    pub input_lens: Vec<u32>,
    pub output_lens: Vec<u32>,
    pub ttfts: Vec<f64>,
    pub itls: Vec<Vec<f64>>,
    pub generated_texts: Vec<String>,
    pub errors: Vec<String>,
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
