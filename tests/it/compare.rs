//! `servesim compare` and `run --format bench-json`: bench_serving's metrics and key names,
//! checked against result files written with SGLang 0.5.23's and vLLM 0.33.0's own metric code
//! (`tests/fixtures/bench/generate.py`).

use std::collections::BTreeMap;

use assert_cmd::Command;
use serde_json::Value;
use servesim::compare::{result_file, BenchMetrics};

use crate::root;

fn fixture(name: &str) -> std::path::PathBuf {
    root().join("tests/fixtures/bench").join(name)
}

/// The fixture's JSON object (SGLang's `Infinity` read as a string).
fn object(name: &str) -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let text = text.replace("Infinity", "\"inf\"");
    match serde_json::from_str(&text).unwrap() {
        Value::Object(o) => o,
        _ => panic!("{name} is not an object"),
    }
}

fn servesim(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("servesim")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SCENARIO: &str = r#"
name = "bench"
[engine]
kv_capacity_tokens = 100000
[engine.step_time]
decode_base_ms = 10.0
decode_per_seq_ms = 0.5
decode_per_kv_token_ns = 1.0
prefill_base_ms = 5.0
prefill_per_token_us = 50.0
[workload]
requests = 30
prompt_tokens = { dist = "lognormal", mean = 300, cv = 0.5 }
output_tokens = { dist = "lognormal", mean = 40, cv = 0.5 }
ignore_eos = true
[client]
concurrency = 4
network_rtt_ms = 1.0
request_overhead_ms = 20.0
per_token_overhead_ms = 0.1
"#;

#[test]
fn our_metrics_of_the_per_request_details_are_the_benchmark_clients_own() {
    for (name, keys) in [
        (
            "sglang-0.5.23.jsonl",
            ["total_throughput", "mean_e2e_latency_ms"],
        ),
        (
            "vllm-0.33.0.json",
            ["total_token_throughput", "mean_ttft_ms"],
        ),
    ] {
        let file = result_file::load(&fixture(name)).unwrap();
        let want = object(name);
        let m = BenchMetrics::of(&file.samples, file.duration_s);
        let mut ours: BTreeMap<String, f64> = m
            .compared()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        ours.insert("total_token_throughput".into(), m.total_throughput);
        for (stat, s) in [("std", &m.ttft), ("p99", &m.ttft)] {
            ours.insert(
                format!("{stat}_ttft_ms"),
                if stat == "std" { s.std } else { s.p99 },
            );
        }
        let mut checked = 0;
        for (k, v) in &ours {
            // vLLM names E2E e2el and reports it only when asked; SGLang has every key.
            let Some(w) = want.get(k).and_then(Value::as_f64) else {
                continue;
            };
            assert!(
                (v - w).abs() <= 1e-9 * w.abs().max(1.0),
                "{name} {k}: ours {v}, theirs {w}"
            );
            checked += 1;
        }
        assert!(checked >= 12, "{name}: only {checked} keys compared");
        assert!(keys.iter().all(|k| want.contains_key(*k)));
        assert_eq!((file.samples.len(), file.failed), (5, 1));
    }
    // vLLM's file gives send times; SGLang's does not.
    let v = result_file::load(&fixture("vllm-0.33.0.json")).unwrap();
    assert!(matches!(v.arrivals, result_file::Arrivals::Given(_)));
    assert_eq!(
        v.model_id.as_deref(),
        Some("meta-llama/Llama-3.1-8B-Instruct")
    );
}

#[test]
fn bench_json_has_bench_servings_keys_with_its_types() {
    let tmp = tempfile::tempdir().unwrap();
    let sc = tmp.path().join("bench.toml");
    std::fs::write(&sc, SCENARIO).unwrap();
    let (code, out, err) = servesim(&["run", sc.to_str().unwrap(), "--format", "bench-json"]);
    assert_eq!(code, 0, "{err}");
    let ours: serde_json::Map<String, Value> = serde_json::from_str(&out).unwrap();
    let theirs = object("sglang-0.5.23.jsonl");
    let keys = |o: &serde_json::Map<String, Value>| o.keys().cloned().collect::<Vec<_>>();
    let mut ours_sorted = keys(&ours);
    let mut theirs_sorted = keys(&theirs);
    ours_sorted.sort();
    theirs_sorted.sort();
    assert_eq!(ours_sorted, theirs_sorted);
    let kind = |v: &Value| match v {
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Object(_) => "object",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    };
    for (k, v) in &theirs {
        let o = &ours[k];
        if !v.is_null() && !o.is_null() && k != "request_rate" {
            assert_eq!(kind(o), kind(v), "{k}");
        }
    }
    assert_eq!(ours["completed"], 30);
}

#[test]
fn a_run_compared_with_itself_has_no_error_and_both_fixtures_compare() {
    let tmp = tempfile::tempdir().unwrap();
    let vllm = SCENARIO.replace("[engine]\n", "[engine]\nkind = \"vllm\"\n");
    for (name, text) in [("sglang.toml", SCENARIO), ("vllm.toml", vllm.as_str())] {
        let sc = tmp.path().join(name);
        std::fs::write(&sc, text).unwrap();
        let sc = sc.to_str().unwrap();
        let (_, line, _) = servesim(&["run", sc, "--format", "bench-json"]);
        let result = tmp.path().join("result.jsonl");
        std::fs::write(&result, line).unwrap();
        let args = [
            "compare",
            result.to_str().unwrap(),
            "--scenario",
            sc,
            "--json",
        ];
        let (code, out, err) = servesim(&args);
        assert_eq!(code, 0, "{name}: {err}");
        let c: Value = serde_json::from_str(&out).unwrap();
        let rows = c["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 15);
        for r in rows {
            let e = r["error_pct"].as_f64().unwrap();
            assert!(e.abs() < 1e-6, "{name}: {r}");
        }
    }
    let sc = tmp.path().join("sglang.toml");
    let sc = sc.to_str().unwrap();
    for f in ["sglang-0.5.23.jsonl", "vllm-0.33.0.json"] {
        let out_dir = tmp.path().join(f);
        let path = fixture(f);
        let args = ["compare", path.to_str().unwrap(), "--scenario", sc, "--out"];
        let (code, out, err) = servesim(&[&args[..], &[out_dir.to_str().unwrap()]].concat());
        assert_eq!(code, 0, "{f}: {err}");
        assert!(
            out.contains("p99_itl_ms") && out.contains("5 requests (1 failed"),
            "{out}"
        );
        for file in ["compare.json", "compare-cdf.png", "compare-cdf.svg"] {
            assert!(out_dir.join(file).exists(), "{f}: {file}");
        }
    }
}

#[test]
fn a_file_labelled_with_its_gpu_is_replayed_through_the_catalog_without_a_scenario() {
    let text = std::fs::read_to_string(fixture("vllm-0.33.0.json")).unwrap();
    let labelled = text.replace(
        "\"num_prompts\": 6,",
        "\"num_prompts\": 6, \"gpu\": \"h100\", \"tp\": \"1\",",
    );
    assert_ne!(labelled, text);
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("labelled.json");
    std::fs::write(&f, labelled).unwrap();
    let (code, out, err) = servesim(&["compare", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("(catalog)") && out.contains("mean_ttft_ms"),
        "{out}"
    );
    assert!(err.contains("uncalibrated roofline"), "{err}");
    let (code, _, err) = servesim(&["compare", fixture("vllm-0.33.0.json").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("it does not name the GPU"), "{err}");
}

#[test]
fn a_scenario_of_another_model_than_the_result_files_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let result = fixture("vllm-0.33.0.json");
    let mut warnings = Vec::new();
    for model in ["llama-3.1-70b", "llama-3.1-8b"] {
        let sc = tmp.path().join(format!("{model}.toml"));
        std::fs::write(&sc, format!("{SCENARIO}[model]\nname = \"{model}\"\n")).unwrap();
        let args = ["compare", result.to_str().unwrap(), "--scenario"];
        let (code, out, err) = servesim(&[&args[..], &[sc.to_str().unwrap()]].concat());
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("asking for exactly its measured output (ignore_eos"));
        warnings.push(err.contains("warning: the result file measured `meta-llama/Llama-3.1-8B-Instruct` (catalog model llama-3.1-8b) but the scenario's model is llama-3.1-70b"));
    }
    assert_eq!(warnings, [true, false]);
}
