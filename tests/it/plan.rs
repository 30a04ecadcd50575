//! `servesim plan` at the hardware's own load and under a latency target (issue 13, item 11).

use assert_cmd::Command;
use serde_json::Value;

use crate::root;

/// The candidates of most tests: three GPUs, 4 or 8 of them, TP 4 or 8 (nine candidates).
const NINE: [&str; 6] = [
    "--gpus",
    "h100,h200,rtx-pro-6000",
    "--counts",
    "4,8",
    "--tp",
    "4,8",
];

/// `plan` on the Llama-3.1-70B scenario with 2,000 requests: its JSON rows and stderr.
fn plan(candidates: &[&str], extra: &[&str]) -> (Vec<Value>, String) {
    let mut args = vec![
        "plan",
        "scenarios/plan-llama-3.1-70b.toml",
        "--set",
        "workload.requests=2000",
        "--json",
    ];
    args.extend(candidates);
    args.extend(extra);
    let out = Command::cargo_bin("servesim")
        .unwrap()
        .current_dir(root())
        .env("RUST_BACKTRACE", "0")
        .args(&args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    (rows.as_array().unwrap().clone(), stderr)
}

fn order(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| format!("{}×{}/TP{}", r["gpu"], r["num_gpus"], r["tensor_parallel"]))
        .collect()
}

fn binding(rows: &[Value], b: &str) -> usize {
    rows.iter().filter(|r| r["binding"] == b).count()
}

#[test]
fn saturating_each_candidate_ranks_the_hardware_not_the_clients_concurrency() {
    // The observation: the scenario's concurrency (here 64 or 256), split over the
    // servers, binds nearly every candidate, and the ranking moves with it.
    let (c64, warn64) = plan(&NINE, &["--set", "client.concurrency=64"]);
    let (c256, _) = plan(&NINE, &["--set", "client.concurrency=256"]);
    assert_eq!(c64.len(), 9);
    assert_eq!(binding(&c64, "client_concurrency"), 9);
    assert_eq!(binding(&c256, "client_concurrency"), 9);
    assert_ne!(order(&c64), order(&c256));
    assert!(
        warn64.contains("warning: the client's concurrency binds 9 of 9 feasible candidates")
            && warn64.contains("--load saturate"),
        "{warn64}"
    );
    let eight = c64
        .iter()
        .find(|r| r["num_gpus"] == 8 && r["tensor_parallel"] == 4)
        .unwrap();
    assert_eq!(eight["concurrency_per_server"], 32);
    // Saturated, every server keeps max_running_requests in flight: the KV budget binds, and
    // the ranking is the same whatever the scenario's concurrency.
    let (s64, quiet) = plan(
        &NINE,
        &["--set", "client.concurrency=64", "--load", "saturate"],
    );
    let (s256, _) = plan(
        &NINE,
        &["--set", "client.concurrency=256", "--load", "saturate"],
    );
    assert_eq!(binding(&s64, "client_concurrency"), 0);
    assert_eq!(binding(&s64, "kv_budget"), 9);
    assert_eq!(order(&s64), order(&s256));
    assert!(!quiet.contains("warning"), "{quiet}");
    for r in &s64 {
        // In flight: max_running_requests (SGLang's clamp(pool / 131,072 × 512, 2048, 4096)
        // for a 128K context) or the 600-token prompts the pool holds, the fewer: 402,912 / 601
        // = 670 on an H100 at TP 4.
        let kv = r["kv_capacity_tokens"].as_u64().unwrap();
        let max_running = (kv * 512 / 131_072).clamp(2048, 4096);
        assert_eq!(
            r["concurrency_per_server"].as_u64().unwrap(),
            (kv / 601).min(max_running),
            "{r}"
        );
        let scenario = c64
            .iter()
            .find(|x| order(&[(*x).clone()]) == order(&[r.clone()]))
            .unwrap();
        // Full servers finish the job no later than servers the client starves.
        assert!(
            r["time_to_finish_s"].as_f64().unwrap()
                <= scenario["time_to_finish_s"].as_f64().unwrap(),
            "{r} vs {scenario}"
        );
    }
}

#[test]
fn the_slo_search_finds_the_highest_rate_within_p99_ttft_and_tpot() {
    let two = ["--gpus", "h100,rtx-pro-6000", "--counts", "4"];
    let (rows, _) = plan(
        &two,
        &[
            "--slo-ttft-p99-s",
            "2",
            "--slo-tpot-p99-ms",
            "50",
            "--target-rate",
            "5",
        ],
    );
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r["feasible"], true, "{r}");
        let rate = r["slo_req_per_s"].as_f64().unwrap();
        let full = r["saturated_req_per_s"].as_f64().unwrap();
        assert!(rate > 0.0 && rate <= full, "{r}");
        assert!(r["ttft_p99_ms"].as_f64().unwrap() <= 2000.0, "{r}");
        assert!(r["tpot_p99_ms"].as_f64().unwrap() <= 50.0, "{r}");
        assert_eq!(r["meets_target"].as_bool().unwrap(), rate >= 5.0);
    }
    // Those reaching 5 req/s come first (four H100s, ~7.6 req/s), fewest GPUs and then the
    // cheapest per hour first; the rest by rate (four RTX PRO 6000s, ~1 req/s).
    let meets: Vec<&Value> = rows
        .iter()
        .take_while(|r| r["meets_target"] == true)
        .collect();
    assert!(!meets.is_empty() && meets.len() < rows.len());
    let key = |r: &Value| {
        (
            r["num_gpus"].as_u64().unwrap(),
            r["usd_per_hour"].as_f64().unwrap(),
        )
    };
    assert!(meets.windows(2).all(|w| key(w[0]) <= key(w[1])));
    let rest: Vec<f64> = rows[meets.len()..]
        .iter()
        .map(|r| r["slo_req_per_s"].as_f64().unwrap())
        .collect();
    assert!(rest.windows(2).all(|w| w[0] >= w[1]), "{rest:?}");
    // A bound nobody meets: every row says why.
    let (rows, _) = plan(&two, &["--slo-tpot-p99-ms", "1"]);
    for r in &rows {
        assert_eq!(r["feasible"], false);
        assert!(
            r["reason"]
                .as_str()
                .unwrap()
                .contains("misses p99 TPOT ≤ 1 ms even lightly loaded"),
            "{r}"
        );
    }
}

#[test]
fn the_slo_flags_are_checked_before_anything_runs() {
    let run = |args: &[&str]| {
        Command::cargo_bin("servesim")
            .unwrap()
            .current_dir(root())
            .env("RUST_BACKTRACE", "0")
            .args([
                "plan",
                "scenarios/plan-llama-3.1-70b.toml",
                "--gpus",
                "h100",
                "--counts",
                "4",
            ])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--slo-ttft-p99-s", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a positive number of seconds"));
    let out = run(&["--target-rate", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--target-rate needs an SLO"));
    let out = run(&["--slo-ttft-p99-s", "2", "--deadline-h", "24"]);
    assert_eq!(out.status.code(), Some(2));
}
