//! The command line, end to end.

use assert_cmd::Command;
use predicates::prelude::*;

use crate::root;

fn servesim() -> Command {
    let mut c = Command::cargo_bin("servesim").unwrap();
    c.current_dir(root());
    c
}

#[test]
fn run_without_a_scenario_prints_the_three_views_for_b2() {
    servesim()
        .args(["run", "--set", "workload.requests=400"])
        .assert()
        .success()
        .stdout(predicate::str::contains("The three views"))
        .stdout(predicate::str::contains("Steady state"))
        .stdout(predicate::str::contains("95 % CI"));
}

#[test]
fn run_json_has_every_key_of_the_summary_contract() {
    let out = servesim()
        .args([
            "run",
            "scenarios/case-study-b2.toml",
            "--json",
            "--set",
            "workload.requests=400",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let need: &[(&str, &[&str])] = &[
        (
            "",
            &[
                "scenario",
                "kv_capacity_tokens",
                "totals",
                "server",
                "steady_state",
                "lifetime",
                "observations",
                "convergence",
                "latency",
            ],
        ),
        ("scenario", &["name", "seed"]),
        (
            "totals",
            &[
                "requests_completed",
                "output_tokens",
                "sim_duration_s",
                "retractions",
            ],
        ),
        (
            "server",
            &[
                "mean_running",
                "mean_queued",
                "mean_token_usage",
                "gen_tok_per_s_mean",
            ],
        ),
        (
            "steady_state",
            &[
                "req_per_s",
                "req_per_s_ci95",
                "output_tok_per_s",
                "start_s",
                "end_s",
                "little_law_req_per_s",
            ],
        ),
        ("lifetime", &["req_per_s"]),
        ("convergence", &["lifetime_within_5pct_at_s", "estimated_s"]),
        ("latency", &["ttft_ms", "tpot_ms", "e2e_ms", "queue_ms"]),
    ];
    for (section, keys) in need {
        let obj = if section.is_empty() { &j } else { &j[section] };
        for k in *keys {
            assert!(obj.get(k).is_some(), "missing {section}.{k}");
        }
    }
    for stats in ["ttft_ms", "tpot_ms", "e2e_ms", "queue_ms"] {
        for k in ["mean", "p50", "p90", "p99"] {
            assert!(j["latency"][stats][k].is_number(), "latency.{stats}.{k}");
        }
    }
    for o in j["observations"].as_array().unwrap() {
        for k in [
            "t_s",
            "lifetime_req_per_s",
            "window_req_per_s",
            "gen_tok_per_s",
            "running",
            "queued",
            "token_usage",
        ] {
            assert!(o.get(k).is_some(), "observation lacks {k}");
        }
    }
    assert_eq!(
        j["steady_state"]["req_per_s_ci95"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn run_out_writes_summary_timeseries_and_a_parseable_server_log() {
    let dir = tempfile::tempdir().unwrap();
    servesim()
        .args(["run", "--set", "workload.requests=300", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    let summary = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
    assert!(serde_json::from_str::<serde_json::Value>(&summary).is_ok());
    let csv = std::fs::read_to_string(dir.path().join("timeseries.csv")).unwrap();
    assert!(csv.starts_with(
        "t_s,running,queued,kv_used_tokens,token_usage,gen_tok_per_s,completed,lifetime_req_per_s,window_req_per_s"
    ));
    assert!(csv.lines().count() > 10);
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    let batch = regex::Regex::new(r"(Prefill|Decode) batch[.,]").unwrap();
    let decode = regex::Regex::new(
        r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Decode batch, #running-req: (\d+), #token: (\d+), token usage: (\d\.\d\d), cuda graph: (True|False), gen throughput \(token/s\): (\d+\.\d\d), #queue-req: (\d+)$",
    )
    .unwrap();
    let prefill = regex::Regex::new(
        r"^\[[^\]]+\] Prefill batch, #new-seq: \d+, #new-token: \d+, #cached-token: \d+, token usage: \d\.\d\d, #running-req: \d+, #queue-req: \d+, #pending-token: \d+, cuda graph: (True|False), input throughput \(token/s\): \d+\.\d\d$",
    )
    .unwrap();
    let (mut d, mut p) = (0, 0);
    for line in log.lines() {
        if batch.is_match(line) {
            if line.contains("Decode") {
                assert!(decode.is_match(line), "bad decode line: {line}");
                d += 1;
            } else {
                assert!(prefill.is_match(line), "bad prefill line: {line}");
                p += 1;
            }
        } else {
            assert!(
                line.contains("KV cache pool is full. Retract requests."),
                "unexpected line: {line}"
            );
        }
    }
    assert!(d > 10 && p > 10);
}

#[test]
fn a_malformed_scenario_exits_2_naming_every_bad_key_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "name = \"bad\"\n[engine]\nkv_capacity_tokens = 1000\n[workload]\nrequests = 10\nprompt_tokens = { dist = \"constant\", value = 5 }\noutput_tokens = { dist = \"lognormal\", mean = 5 }\n[client]\nconcurency = 4\n",
    )
    .unwrap();
    servesim()
        .arg("run")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("error: scenario"))
        .stderr(predicate::str::contains(
            "bad.toml:9:1: client.concurency: unknown key in [client]",
        ))
        .stderr(predicate::str::contains(
            "hint: did you mean `client.concurrency`?",
        ))
        .stderr(predicate::str::contains(
            "workload.output_tokens.cv: required key is missing",
        ))
        .stderr(predicate::str::contains(":7:17:"))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn a_bad_set_is_reported_like_a_bad_key() {
    servesim()
        .args([
            "run",
            "--set",
            "client.concurrency=0",
            "--set",
            "engine.schedule_policy=lifo",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "override `client.concurrency=0`: client.concurrency = 0: must be at least 1",
        ))
        .stderr(predicate::str::contains(
            "engine.schedule_policy = \"lifo\": unknown value",
        ))
        .stderr(predicate::str::contains("did you mean \"lof\"?"));
}

#[test]
fn check_accepts_the_built_in_scenarios() {
    servesim()
        .args([
            "check",
            "scenarios/case-study-b2.toml",
            "scenarios/case-study-b1.toml",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("ok: scenarios/case-study-b2.toml"));
}

#[test]
fn a_missing_file_exits_2() {
    servesim()
        .args(["run", "no/such/file.toml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "error: cannot read scenario `no/such/file.toml`",
        ));
}

#[test]
fn a_sharded_sweep_merges_into_the_unsharded_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = |extra: &[&str], out: &std::path::Path| {
        servesim()
            .args([
                "sweep",
                "scenarios/case-study-b2.toml",
                "--set",
                "workload.requests=300",
                "--vary",
                "client.concurrency=10:160:10",
                "--vary",
                "engine.schedule_policy=fcfs,lof",
                "--out",
            ])
            .arg(out)
            .args(extra)
            .assert()
            .success();
    };
    let whole = tmp.path().join("whole");
    sweep(&["--jobs", "2"], &whole);
    let mut shard_dirs = Vec::new();
    for i in 0..3 {
        let d = tmp.path().join(format!("shard{i}"));
        sweep(&["--shard", &format!("{i}/3"), "--jobs", "1"], &d);
        shard_dirs.push(d);
    }
    let merged = tmp.path().join("merged");
    servesim()
        .arg("merge")
        .args(&shard_dirs)
        .arg("--out")
        .arg(&merged)
        .assert()
        .success();
    let a = std::fs::read(whole.join("sweep.csv")).unwrap();
    let b = std::fs::read(merged.join("sweep.csv")).unwrap();
    assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
    let text = String::from_utf8(a).unwrap();
    assert_eq!(text.lines().count(), 1 + 32);
    assert!(text.starts_with(
        "client.concurrency,engine.schedule_policy,kv_capacity_tokens,oom_verdict,steady_req_per_s,steady_req_per_s_ci_low,steady_req_per_s_ci_high,gen_tok_per_s,mean_running,ttft_p50_ms,ttft_p99_ms,e2e_p50_ms,e2e_p99_ms,time_to_finish_s"
    ));
    // A missing shard is refused.
    servesim()
        .arg("merge")
        .args(&shard_dirs[..2])
        .arg("--out")
        .arg(tmp.path().join("partial"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("shard 2/3 is missing"));
}

#[test]
fn bad_vary_specs_exit_2_with_a_clear_message() {
    for (spec, msg) in [
        (
            "engine.mem_fraction_static=0.9:0.8:0.01",
            "the range is empty",
        ),
        (
            "engine.mem_fraction_static=0.8:0.9:0",
            "the step must be a finite number greater than 0",
        ),
        ("engine.mem_fraction_static=", "has no values"),
        (
            "engine.mem_fraction_static=0:1e300:1",
            "has more than 1000000 values",
        ),
        ("engine.no_such_key=1,2", "unknown key in [engine]"),
        (
            "engine.kv_capacity_tokns=1,2",
            "did you mean `engine.kv_capacity_tokens`?",
        ),
        (
            "client.concurrency=a,b",
            "expected an integer, found a string",
        ),
    ] {
        servesim()
            .args(["sweep", "scenarios/case-study-b2.toml", "--vary", spec])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(msg))
            .stderr(predicate::str::contains("panicked").not());
    }
}

#[test]
fn memory_prints_the_derivation_the_verdict_and_a_range() {
    servesim()
        .args([
            "memory",
            "scenarios/case-study-b2-memory.toml",
            "--vary",
            "engine.mem_fraction_static=0.85,0.95",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("max_total_num_tokens"))
        .stdout(predicate::str::contains("verdict: safe"))
        .stdout(predicate::str::contains("out of memory above 0.900"))
        .stdout(
            predicate::str::is_match(
                r"engine.mem_fraction_static=0.95 +16.96 +259,152 +2.23× .* oom",
            )
            .unwrap(),
        );
}

#[test]
fn memory_counts_a_cached_system_prompt_once() {
    // The teaching scenario: a 150,000-token pool, a 2,000-token system prompt on every request
    // and ~200 tokens of its own. ⌊150,000 / (2,200 + 1)⌋ = 68 without the radix cache,
    // ⌊(150,000 − 2,000) / (200 + 1)⌋ = 736 with it.
    let args = ["memory", "scenarios/teaching/system-prompt.toml"];
    servesim()
        .args(args)
        .assert()
        .success()
        .stdout(predicate::str::is_match(r"each holding its whole prompt +68 ").unwrap())
        .stdout(predicate::str::is_match(r"with the radix cache on +736 ").unwrap())
        .stdout(predicate::str::contains(
            "assumes the prefixes stay resident",
        ));
    let out = servesim()
        .args(args)
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let a = &j["requests_at_once"];
    assert_eq!(
        (a["without_cache"].as_u64(), a["with_cache"].as_u64()),
        (Some(68), Some(736))
    );
    assert_eq!(a["cache_on"], true);
    servesim()
        .args(args)
        .args(["--set", "engine.disable_radix_cache=true"])
        .assert()
        .success()
        .stdout(predicate::str::contains("the radix cache is off"))
        .stdout(predicate::str::contains("with the radix cache on").not());
    // A workload without shared prefixes gets no such lines.
    servesim()
        .args(["memory", "scenarios/case-study-b2-memory.toml"])
        .assert()
        .success()
        .stdout(predicate::str::contains("requests at once").not());
}

#[test]
fn memory_without_hardware_and_model_exits_2() {
    servesim()
        .args([
            "memory",
            "scenarios/case-study-b1.toml",
            "--set",
            "model.name=kimi-k2.5",
            "--set",
            "hardware.gpu=h1000",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean \"h100\""));
}

#[test]
fn catalog_lists_gpus_and_models() {
    servesim()
        .arg("catalog")
        .assert()
        .success()
        .stdout(predicate::str::contains("rtx-pro-6000"))
        .stdout(predicate::str::contains("kimi-k2.5"))
        .stdout(predicate::str::contains("70,272"));
}

#[test]
fn a_16_point_sweep_over_the_fraction_finishes_with_a_monotone_budget() {
    let out = servesim()
        .args([
            "sweep",
            "scenarios/case-study-b2-memory.toml",
            "--set",
            "workload.requests=200",
            "--vary",
            "engine.mem_fraction_static=0.80:0.95:0.01",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 16);
    let kv: Vec<u64> = rows
        .iter()
        .map(|r| r["kv_capacity_tokens"].as_u64().unwrap())
        .collect();
    assert!(kv.windows(2).all(|w| w[0] < w[1]), "{kv:?}");
    let verdicts: Vec<&str> = rows
        .iter()
        .map(|r| r["oom_verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts[0], "safe");
    assert_eq!(verdicts[15], "oom");
}

#[test]
fn plan_ranks_candidates_writes_its_files_and_lists_the_infeasible_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = servesim()
        .args([
            "plan",
            "scenarios/plan-llama-3.1-70b.toml",
            "--gpus",
            "h100,l40s,h200",
            "--counts",
            "2,4",
            "--deadline-h",
            "24",
            "--price",
            "h100=2.0",
            "--set",
            "workload.requests=2000",
            "--json",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 6);
    // Every row names its candidate; a feasible one has its metrics, an infeasible one only
    // the reason (no zeroed metrics).
    for r in rows {
        for k in [
            "gpu",
            "num_gpus",
            "tensor_parallel",
            "feasible",
            "price_usd_per_gpu_hour",
        ] {
            assert!(r.get(k).is_some(), "missing {k} in {r}");
        }
        let metrics = [
            "kv_capacity_tokens",
            "gen_tok_per_s",
            "steady_req_per_s",
            "time_to_finish_s",
            "cost_usd",
            "usd_per_m_output_tokens",
        ];
        if r["feasible"] == true {
            assert!(r.get("reason").is_none(), "{r}");
            for k in metrics {
                assert!(r[k].is_number(), "missing {k} in {r}");
            }
        } else {
            assert!(r["reason"].is_string(), "{r}");
            for k in metrics {
                assert!(r.get(k).is_none(), "{k} in infeasible {r}");
            }
        }
    }
    // 70B in BF16 does not fit two 48 GB cards: listed, with the reason.
    let l40s2 = rows
        .iter()
        .find(|r| r["gpu"] == "l40s" && r["num_gpus"] == 2)
        .unwrap();
    assert_eq!(l40s2["feasible"], false);
    assert!(l40s2["reason"]
        .as_str()
        .unwrap()
        .contains("leave no KV cache"));
    // Feasible ones come first, cheapest first, with the price given.
    let feasible: Vec<&serde_json::Value> = rows.iter().filter(|r| r["feasible"] == true).collect();
    assert!(feasible.len() >= 3);
    let costs: Vec<f64> = feasible
        .iter()
        .filter(|r| r["meets_deadline"] == true)
        .map(|r| r["cost_usd"].as_f64().unwrap())
        .collect();
    assert!(costs.windows(2).all(|w| w[0] <= w[1]));
    let h100 = feasible.iter().find(|r| r["gpu"] == "h100").unwrap();
    assert_eq!(h100["price_usd_per_gpu_hour"], 2.0);
    let expected = h100["time_to_finish_s"].as_f64().unwrap() / 3600.0 * 4.0 * 2.0;
    assert!((h100["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-6 * expected.max(1.0));
    for f in ["plan.csv", "plan.json", "plan.png", "plan.svg"] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
}

#[test]
fn plan_refuses_a_scenario_that_pins_the_budget_and_unknown_gpus() {
    servesim()
        .args([
            "plan",
            "scenarios/case-study-b2.toml",
            "--gpus",
            "h100",
            "--counts",
            "8",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("engine.kv_capacity_tokens is set"));
    servesim()
        .args([
            "plan",
            "scenarios/plan-kimi-k2.5.toml",
            "--gpus",
            "h1000",
            "--counts",
            "8",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean \"h100\"?"));
}

#[test]
fn memory_derives_vllm_blocks_by_hand_and_says_when_vllm_would_not_start() {
    // By hand: 81,920 MiB × 0.9 = 72 GiB requested; 40 GiB weights + 0.6 + 1.2 + 0.7 GiB
    // measured terms (vLLM defaults) = 42.5 GiB; KV = 29.5 GiB = 31,675,383,808 B; one block
    // = 16 × 100,000 B; floor(31,675,383,808 / 1,600,000) = 19,797 blocks = 316,752 tokens.
    let args = |weights: &str| {
        vec![
            "memory".to_string(),
            "tests/fixtures/vllm.toml".into(),
            "--set".into(),
            "engine.kind=vllm".into(),
            "--set".into(),
            "hardware.memory_mib=81920".into(),
            "--set".into(),
            format!("model.weight_gib_per_gpu={weights}"),
            "--set".into(),
            "model.kv_bytes_per_token=100000".into(),
            "--set".into(),
            "engine.gpu_memory_utilization=0.9".into(),
        ]
    };
    servesim()
        .args(args("40"))
        .assert()
        .success()
        .stdout(predicate::str::is_match(r"KV cache +29\.50 GiB").unwrap())
        .stdout(predicate::str::is_match(r"blocks +19,797 ").unwrap())
        .stdout(predicate::str::is_match(r"GPU KV cache size +316,752 tokens").unwrap())
        .stdout(predicate::str::is_match(r"left unused by vLLM +8\.00 GiB").unwrap())
        .stdout(predicate::str::contains(
            "verdict: starts, with 316,752 tokens",
        ));
    // 70 GiB of weights: 72.5 GiB used > 72 GiB requested. One block needs
    // (72.5 GiB + 1.6 MB) / 80 GiB = 0.90627…, so "at least 0.907".
    servesim()
        .args(args("70"))
        .assert()
        .success()
        .stdout(predicate::str::is_match(r"blocks +0 ").unwrap())
        .stdout(predicate::str::contains(
            "vLLM refuses to start (\"No available memory for the cache blocks\"",
        ))
        .stdout(predicate::str::contains(
            "raise gpu_memory_utilization to at least 0.907",
        ));
}

#[test]
fn plan_prints_a_table_with_the_infeasible_candidates_and_their_reason() {
    servesim()
        .args([
            "plan",
            "scenarios/plan-llama-3.1-70b.toml",
            "--gpus",
            "l40s,h100",
            "--counts",
            "2,4",
            "--set",
            "workload.requests=200",
            "--jobs",
            "2",
        ])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(r"(?m)^ GPU +GPUs +TP +reps +KV tokens .* binds / why not$")
                .unwrap(),
        )
        .stdout(
            predicate::str::is_match(
                r"(?m)^ h100 +4 +4 +1 +402912 +\d+ +[\d.]+ +[\d.]+ .*s  the \w",
            )
            .unwrap(),
        )
        .stdout(
            predicate::str::is_match(
                r"(?m)^ l40s +2 +2 +1 +— +infeasible: the weights .* leave no KV cache",
            )
            .unwrap(),
        );
}

/// More servers than requests: each would simulate one request and the totals count requests
/// that do not exist (it reported 10⁸ req/s); the candidate is infeasible, with the reason.
#[test]
fn plan_refuses_more_servers_than_requests() {
    servesim()
        .args([
            "plan",
            "scenarios/plan-llama-3.1-70b.toml",
            "--gpus",
            "h100",
            "--counts",
            "64",
            "--tp",
            "4,64",
            "--set",
            "workload.requests=4",
            "--jobs",
            "1",
        ])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(
                r"(?m)^ h100 +64 +4 +16 +— +infeasible: 16 servers for 4 requests: some would get none$",
            )
            .unwrap(),
        )
        .stdout(predicate::str::is_match(r"(?m)^ h100 +64 +64 +1 +\d+ ").unwrap());
}

/// A workload that shares prompt prefixes adds `cached_tokens` to the requests CSV and two
/// cumulative columns to `timeseries.csv`.
#[test]
fn a_prefix_workload_adds_the_cache_columns() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("requests.csv");
    let out = dir.path().join("out");
    servesim()
        .args([
            "run",
            "scenarios/teaching/system-prompt.toml",
            "--set",
            "workload.requests=200",
            "--no-plots",
            "--out",
        ])
        .arg(&out)
        .arg("--requests-csv")
        .arg(&csv)
        .assert()
        .success();
    let text = std::fs::read_to_string(&csv).unwrap();
    let header = text.lines().next().unwrap();
    assert!(header.ends_with(",completed,cached_tokens"), "{header}");
    // Every request but those of the first prefill batch finds the 2,000-token prompt.
    let hits = text
        .lines()
        .skip(1)
        .filter(|l| l.ends_with(",2000"))
        .count();
    assert!(hits >= 180, "{hits} hits");
    let ts = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    assert!(ts
        .lines()
        .next()
        .unwrap()
        .ends_with(",completed_prompt_tokens,completed_cached_tokens"));
}
