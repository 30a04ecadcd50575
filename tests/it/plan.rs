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
    // Saturated (four candidates, 1,000 requests, to keep the searches short), every server
    // keeps the concurrency that finishes its share soonest: the hardware binds, and the
    // rows are the same whatever the scenario's concurrency.
    let four = [
        "--gpus",
        "h100,rtx-pro-6000",
        "--counts",
        "4,8",
        "--tp",
        "4",
    ];
    let small = |extra: &[&str]| {
        let mut args = vec!["--set", "workload.requests=1000"];
        args.extend(extra);
        plan(&four, &args)
    };
    let (s64, quiet) = small(&["--set", "client.concurrency=64", "--load", "saturate"]);
    let (s256, _) = small(&["--set", "client.concurrency=256", "--load", "saturate"]);
    let (c64, _) = small(&["--set", "client.concurrency=64"]);
    assert_eq!(s64.len(), 4);
    assert_eq!(binding(&s64, "client_concurrency"), 0);
    assert_eq!(s64, s256);
    assert!(!quiet.contains("concurrency binds"), "{quiet}");
    for r in &s64 {
        // In flight: at most max_running_requests (SGLang's clamp(pool / 131,072 × 512, 2048,
        // 4096) for a 128K context), the 600-token prompts the pool holds (402,912 / 601 = 670
        // on an H100 at TP 4) and the server's share of the 1,000 requests.
        let kv = r["kv_capacity_tokens"].as_u64().unwrap();
        let max_running = (kv * 512 / 131_072).clamp(2048, 4096);
        let share = 1000 / r["replicas"].as_u64().unwrap();
        let in_flight = r["concurrency_per_server"].as_u64().unwrap();
        assert!(in_flight <= (kv / 601).min(max_running).min(share), "{r}");
        assert!(in_flight > 32, "{r}");
        let scenario = c64
            .iter()
            .find(|x| order(std::slice::from_ref(*x)) == order(std::slice::from_ref(r)))
            .unwrap();
        // Full servers finish the job sooner than servers the client starves.
        assert!(
            r["time_to_finish_s"].as_f64().unwrap()
                < scenario["time_to_finish_s"].as_f64().unwrap(),
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

/// `servesim run` of the plan scenario on one server of `gpu` × `tp` with 2,000 requests (or
/// `requests`) and the given client: its summary JSON.
fn direct(gpu: &str, tp: u32, requests: u64, client: &str) -> Value {
    let out = Command::cargo_bin("servesim")
        .unwrap()
        .current_dir(root())
        .env("RUST_BACKTRACE", "0")
        .args([
            "run",
            "scenarios/plan-llama-3.1-70b.toml",
            "--json",
            "--set",
        ])
        .arg(format!("hardware.gpu=\"{gpu}\""))
        .arg("--set")
        .arg(format!("hardware.num_gpus={tp}"))
        .arg("--set")
        .arg(format!("hardware.tensor_parallel={tp}"))
        .arg("--set")
        .arg(format!("workload.requests={requests}"))
        .arg("--set")
        .arg(format!("client={client}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_candidates_saturating_concurrency_is_the_smallest_that_finishes_soonest() {
    // Four L40S at TP 4 hold 35,923 KV tokens: 59 of the 600-token prompts (35,923 / 601),
    // far below SGLang's 2,048 slots. The search tries 59, 42, 30 and 22 (each ⌈previous / √2⌉):
    // the first three finish the 2,000 requests at the same instant — the queue never empties
    // and the KV budget holds the batch at ~22 — and 22 later, so 30 is taken.
    let (rows, _) = plan(
        &["--gpus", "l40s", "--counts", "4"],
        &["--load", "saturate"],
    );
    let r = &rows[0];
    assert_eq!(r["kv_capacity_tokens"], 35_923);
    assert_eq!(r["concurrency_per_server"], 30);
    assert_eq!(r["binding"], "kv_budget");
    // The search's runs, as the JSON lists them: down by √2 until a run takes a tenth longer
    // than the soonest.
    let steps = r["saturation_search"].as_array().unwrap();
    let tried: Vec<u64> = steps
        .iter()
        .map(|s| s["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(tried[..4], [59, 42, 30, 22]);
    let times: Vec<f64> = steps
        .iter()
        .map(|s| s["time_to_finish_s"].as_f64().unwrap())
        .collect();
    let soonest = r["time_to_finish_s"].as_f64().unwrap();
    assert!(times[..3].iter().all(|&t| t == soonest), "{times:?}");
    assert!(times[3..].iter().all(|&t| t > 1.002 * soonest), "{times:?}");
    assert!(*times.last().unwrap() > soonest / 0.9, "{times:?}");
    assert!(
        times[..times.len() - 1].iter().all(|&t| t <= soonest / 0.9),
        "{times:?}"
    );
    // Direct runs: the plan's time is the run's at 30; twice as many in flight run the very
    // same batches; at 22 the client binds and the job takes longer.
    let closed = |c: u64| {
        direct(
            "l40s",
            4,
            2000,
            &format!("{{ mode = \"closed\", concurrency = {c} }}"),
        )
    };
    let time = |run: &Value| run["totals"]["sim_duration_s"].as_f64().unwrap();
    let (at, double, below) = (closed(30), closed(60), closed(22));
    assert_eq!(time(&at), r["time_to_finish_s"].as_f64().unwrap());
    assert_eq!(time(&double), time(&at));
    assert_eq!(at["binding"]["constraint"], "kv_budget");
    assert_eq!(below["binding"]["constraint"], "client_concurrency");
    assert!(
        time(&below) > 1.002 * time(&at),
        "{} vs {}",
        time(&below),
        time(&at)
    );
}

#[test]
fn under_vllm_the_search_stops_short_of_overfilling_the_pool() {
    // vLLM admits a request when its prompt fits and preempts when the running ones cannot
    // grow: on four H100s (494,032 KV tokens, 822 of the prompts) 822 in flight preempt
    // hundreds of times and finish later than the concurrency the search picks.
    let (rows, _) = plan(
        &["--gpus", "h100", "--counts", "4"],
        &["--set", "engine.kind=\"vllm\"", "--load", "saturate"],
    );
    let r = &rows[0];
    assert_eq!(r["kv_capacity_tokens"], 494_032);
    let picked = r["concurrency_per_server"].as_u64().unwrap();
    assert!(picked < 822, "{r}");
    let vllm = |c: u64| {
        let out = Command::cargo_bin("servesim")
            .unwrap()
            .current_dir(root())
            .args(["run", "scenarios/plan-llama-3.1-70b.toml", "--json"])
            .args([
                "--set",
                "engine.kind=\"vllm\"",
                "--set",
                "workload.requests=2000",
            ])
            .arg("--set")
            .arg(format!("client.concurrency={c}"))
            .output()
            .unwrap();
        assert!(out.status.success());
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let (at, full) = (vllm(picked), vllm(822));
    let time = |run: &Value| run["totals"]["sim_duration_s"].as_f64().unwrap();
    assert_eq!(time(&at), r["time_to_finish_s"].as_f64().unwrap());
    assert!(time(&at) < time(&full), "{} vs {}", time(&at), time(&full));
    assert_eq!(at["totals"]["retractions"], 0);
    assert!(full["totals"]["retractions"].as_u64().unwrap() > 100);
    // The client is the limit at the pick only because more would overfill the pool: the
    // row says the KV budget.
    assert_eq!(r["binding"], "kv_budget");
}

#[test]
fn the_slo_rate_holds_in_a_direct_run_the_rate_above_it_does_not_and_looser_bounds_allow_more() {
    let one = ["--gpus", "h100", "--counts", "4"];
    let search = |tpot_ms: &str| {
        let (rows, _) = plan(
            &one,
            &["--slo-ttft-p99-s", "2", "--slo-tpot-p99-ms", tpot_ms],
        );
        assert_eq!(rows.len(), 1);
        rows[0].clone()
    };
    let r = search("60");
    let found = r["slo_req_per_s"].as_f64().unwrap();
    let missed = r["missed_req_per_s"].as_f64().unwrap();
    let full = r["saturated_req_per_s"].as_f64().unwrap();
    // Bisected between full / 64 and full, to full / 128.
    assert!(found < missed && missed <= full, "{r}");
    assert!(missed - found <= full / 128.0, "{r}");
    // One server: its rate is the candidate's. A direct run at the rate found (2,000 requests,
    // as the probes) meets both bounds with the very p99s reported; at the rate above, not.
    let poisson = |rate: f64| {
        direct(
            "h100",
            4,
            2000,
            &format!("{{ mode = \"poisson\", rate_per_s = {rate} }}"),
        )
    };
    let p99 = |run: &Value, what: &str| run["latency"][what]["p99"].as_f64().unwrap();
    let at = poisson(found);
    assert_eq!(p99(&at, "ttft_ms"), r["ttft_p99_ms"].as_f64().unwrap());
    assert_eq!(p99(&at, "tpot_ms"), r["tpot_p99_ms"].as_f64().unwrap());
    assert!(p99(&at, "ttft_ms") <= 2000.0 && p99(&at, "tpot_ms") <= 60.0);
    // Tokens per second at that rate: the rate times the run's mean output per request.
    let totals = &at["totals"];
    let per_request =
        totals["output_tokens"].as_f64().unwrap() / totals["requests_completed"].as_f64().unwrap();
    let tok_per_s = r["gen_tok_per_s"].as_f64().unwrap();
    assert!(
        (tok_per_s - found * per_request).abs() < 1e-9 * tok_per_s,
        "{r}"
    );
    let above = poisson(missed);
    assert!(
        p99(&above, "ttft_ms") > 2000.0 || p99(&above, "tpot_ms") > 60.0,
        "{}",
        above["latency"]
    );
    // Monotone in the bounds: a tighter TPOT bound allows no more, a looser one no less.
    let tight = search("50")["slo_req_per_s"].as_f64().unwrap();
    let loose = search("80")["slo_req_per_s"].as_f64().unwrap();
    assert!(tight <= found && found <= loose, "{tight} {found} {loose}");
    assert!(tight < loose);
}

#[test]
fn the_tables_say_the_load_and_an_slo_search_writes_its_csv_and_json() {
    let run = |args: &[&str]| {
        let out = Command::cargo_bin("servesim")
            .unwrap()
            .current_dir(root())
            .env("RUST_BACKTRACE", "0")
            .args([
                "plan",
                "scenarios/plan-llama-3.1-70b.toml",
                "--set",
                "workload.requests=500",
                "--gpus",
                "h100",
                "--counts",
                "4",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (table, warning) = run(&["--set", "client.concurrency=64"]);
    assert!(table.contains("load: the scenario's client"), "{table}");
    assert!(table.contains(" in flight  TTFT p99  TPOT p99 "), "{table}");
    assert!(
        warning.contains("warning: the client's concurrency binds 1 of 1 feasible candidates"),
        "{warning}"
    );
    let (table, quiet) = run(&["--set", "workload.requests=2000", "--load", "saturate"]);
    assert!(table.contains("load: every server kept full"), "{table}");
    // In flight: 670, 474, 336 and 238 tried; 336 the smallest finishing soonest.
    assert!(table.contains(" 336 "), "{table}");
    assert!(table.contains("the KV budget"), "{table}");
    assert!(!quiet.contains("warning"), "{quiet}");
    // 500 requests from a client keeping 600 in flight: all at once, one burst, said so.
    let (table, burst) = run(&["--set", "client.concurrency=600"]);
    assert!(table.contains(" 600 "), "{table}");
    assert!(
        burst.contains(
            "warning: 1 candidate(s) keep their whole share of the 500 requests in flight at once"
        ),
        "{burst}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let (table, _) = run(&["--slo-tpot-p99-ms", "60", "--out", out]);
    assert!(
        table.contains("the highest Poisson arrival rate with p99 TPOT ≤ 60 ms"),
        "{table}"
    );
    assert!(
        table.contains(" full req/s  SLO req/s  misses at  gen tok/s "),
        "{table}"
    );
    let csv = std::fs::read_to_string(dir.path().join("plan.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cell = |k: &str| row[header.iter().position(|h| *h == k).unwrap()];
    assert_eq!(cell("gpu"), "h100");
    assert_eq!(cell("feasible"), "true");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("plan.json")).unwrap())
            .unwrap();
    let rate = json[0]["slo_req_per_s"].as_f64().unwrap();
    assert_eq!(cell("slo_req_per_s"), format!("{rate:.4}"));
    assert!(table.contains(&format!(" {rate:.2} ")), "{table}");
}

#[test]
fn saturation_starts_from_the_requests_a_cached_prefix_lets_fit() {
    // 100 requests per server, each a 20,000-token system prompt then 200 tokens of its own,
    // on four H200s at TP 4 (a 1,196,589-token pool). Each holding its own copy, the pool
    // holds ⌊1,196,589 / 20,201⌋ = 59 at once; with the radix cache holding the prompt once,
    // ⌊(1,196,589 − 20,000) / 201⌋ = 5,853: the whole share of 100.
    let first = |cache_off: &str| {
        let (rows, _) = plan(
            &["--gpus", "h200", "--counts", "4", "--tp", "4"],
            &[
                "--load",
                "saturate",
                "--set",
                "workload.requests=100",
                "--set",
                "workload.prompt_tokens={ dist = \"constant\", value = 200 }",
                "--set",
                "workload.output_tokens={ dist = \"constant\", value = 20 }",
                "--set",
                "workload.prefix_groups={ sys = { tokens = 20000, share = 1.0 } }",
                "--set",
                &format!("engine.disable_radix_cache={cache_off}"),
            ],
        );
        assert_eq!(rows[0]["kv_capacity_tokens"], 1_196_589);
        rows[0]["saturation_search"][0]["concurrency"].as_u64()
    };
    assert_eq!(first("false"), Some(100));
    assert_eq!(first("true"), Some(59));
}

/// `plan` of one H100×4 candidate with 40 requests and `extra`: the reason its row gives for
/// being infeasible (the row must be).
fn infeasible_with_40_requests(extra: &[&str]) -> String {
    let one = ["--gpus", "h100", "--counts", "4", "--tp", "4"];
    let mut args = vec!["--set", "workload.requests=40"];
    args.extend(extra);
    let (rows, _) = plan(&one, &args);
    assert_eq!(rows[0]["feasible"], false, "{}", rows[0]);
    rows[0]["reason"].as_str().unwrap().to_string()
}

#[test]
fn a_saturation_search_whose_every_run_stops_at_max_sim_s_says_so() {
    // 40 requests cannot all be answered in 0.5 s: no rung of the ladder finishes.
    let reason = infeasible_with_40_requests(&["--set", "run.max_sim_s=0.5", "--load", "saturate"]);
    assert_eq!(
        reason,
        "stopped at run.max_sim_s before every request was answered"
    );
}

#[test]
fn an_slo_probe_stopped_at_max_sim_s_misses_the_slo_and_says_so() {
    // At λ_sat / 64 a probe of 40 requests needs more than 30 s to send them all: it misses
    // the SLO for that, though the p99s of the requests answered are within the bounds.
    let reason =
        infeasible_with_40_requests(&["--set", "run.max_sim_s=30", "--slo-ttft-p99-s", "2"]);
    assert!(
        reason.contains("misses p99 TTFT ≤ 2 s even lightly loaded")
            && reason.contains("the probe stopped at run.max_sim_s before every request"),
        "{reason}"
    );
}

#[test]
fn an_slo_probe_with_rejected_requests_misses_the_slo_and_says_so() {
    // Prompts up to 200,000 tokens: those longer than the model's 131,072-token context are
    // rejected at any rate, so no bound is met however loose.
    let reason = infeasible_with_40_requests(&[
        "--set",
        "workload.prompt_tokens={ dist = \"uniform\", min = 100, max = 200000 }",
        "--slo-ttft-p99-s",
        "1000",
    ]);
    assert!(
        reason.contains("misses p99 TTFT ≤ 1000 s even lightly loaded")
            && reason.contains("18 of the probe's requests were rejected"),
        "{reason}"
    );
}

#[test]
fn an_slo_that_holds_at_saturation_does_not_bind_and_the_rate_is_the_saturated_one() {
    let one = ["--gpus", "h100", "--counts", "4"];
    let (rows, _) = plan(&one, &["--slo-ttft-p99-s", "100000"]);
    let r = &rows[0];
    assert_eq!(r["feasible"], true, "{r}");
    assert_eq!(r["slo_req_per_s"], r["saturated_req_per_s"], "{r}");
    assert_eq!(r["missed_req_per_s"], Value::Null, "{r}");
}

#[test]
fn a_probe_sends_each_servers_share_of_the_requests_up_to_two_thousand() {
    // Two servers: 3,001 requests give each a share of 1,501 (rounded up), 4,003 one of
    // 2,002, of which a probe sends 2,000. A direct run of one server with that many requests
    // at the rate found has the reported p99s and mean output.
    let two = ["--gpus", "h100", "--counts", "8", "--tp", "4"];
    for (requests, probe) in [(3001, 1501), (4003, 2000)] {
        let (rows, _) = plan(
            &two,
            &[
                "--set",
                &format!("workload.requests={requests}"),
                "--slo-ttft-p99-s",
                "2",
                "--slo-tpot-p99-ms",
                "60",
            ],
        );
        let r = &rows[0];
        assert_eq!(r["replicas"], 2, "{r}");
        let rate = r["slo_req_per_s"].as_f64().unwrap() / 2.0;
        let at = direct(
            "h100",
            4,
            probe,
            &format!("{{ mode = \"poisson\", rate_per_s = {rate} }}"),
        );
        let p99 = |what: &str| at["latency"][what]["p99"].as_f64().unwrap();
        assert_eq!(p99("ttft_ms"), r["ttft_p99_ms"].as_f64().unwrap(), "{r}");
        assert_eq!(p99("tpot_ms"), r["tpot_p99_ms"].as_f64().unwrap(), "{r}");
        let totals = &at["totals"];
        let per_request = totals["output_tokens"].as_f64().unwrap()
            / totals["requests_completed"].as_f64().unwrap();
        let tok_per_s = r["gen_tok_per_s"].as_f64().unwrap();
        assert!(
            (tok_per_s - 2.0 * rate * per_request).abs() < 1e-9 * tok_per_s,
            "{requests} requests: {tok_per_s} vs {}",
            2.0 * rate * per_request
        );
    }
}

#[test]
fn the_saturated_rate_is_the_highest_of_the_ladders_runs_each_of_at_least_2000_requests() {
    // Four L40S hold 59 of the 600-token prompts at once (35,923 / 601). The SLO search's
    // saturation runs send at least 2,000 requests each (four times the 59 would be 236) at
    // 59, 42, 30, 22 and 16 in flight; 16's rate is below 0.9 of the best and ends the
    // ladder. 42's rate is the highest and 30's within 0.2 % of it, so the search settles
    // on 30; λ_sat is still the highest rate, 42's.
    let (rows, _) = plan(
        &["--gpus", "l40s", "--counts", "4", "--tp", "4"],
        &["--slo-ttft-p99-s", "2"],
    );
    let saturated = rows[0]["saturated_req_per_s"].as_f64().unwrap();
    let rate = |c: u64, requests: u64| {
        let closed = format!("{{ mode = \"closed\", concurrency = {c} }}");
        let run = direct("l40s", 4, requests, &closed);
        run["steady_state"]["req_per_s"].as_f64().unwrap()
    };
    let rates = [59, 42, 30, 22, 16].map(|c| rate(c, 2000));
    let best = rates.iter().copied().fold(0.0, f64::max);
    assert_eq!(saturated, best, "{rates:?}");
    assert_eq!(rates[1], best, "{rates:?}");
    assert!(rates[2] < best && rates[2] >= 0.998 * best, "{rates:?}");
    assert!(
        rates[3] < 0.998 * best && rates[4] < 0.9 * best,
        "{rates:?}"
    );
    // Runs of 236 requests would give another rate.
    let short = [59, 42, 30, 22].map(|c| rate(c, 236));
    assert!(short.iter().all(|&r| r != saturated), "{short:?}");
}

#[test]
fn a_traces_saturation_runs_send_no_more_requests_than_it_has_rows() {
    // 300 rows, fewer than the 2,000 requests a saturation run sends otherwise.
    let dir = tempfile::tempdir().unwrap();
    let mut rows = String::from("prompt_tokens,output_tokens,arrival_s\n");
    for i in 0..300u64 {
        let (prompt, output) = (100 + i * 397 % 1100, 20 + i * 211 % 780);
        rows.push_str(&format!("{prompt},{output},{}\n", i as f64 * 0.5));
    }
    std::fs::write(dir.path().join("rows.csv"), rows).unwrap();
    // The plan scenario's model and engine, its lengths and client the trace's.
    let scenario = "name = \"plan over a trace\"\n\
                    [hardware]\ngpu = \"h100\"\nnum_gpus = 4\ntensor_parallel = 4\n\
                    [model]\nname = \"llama-3.1-70b\"\n\
                    [engine]\nkind = \"sglang\"\n\
                    [engine.step_time]\nmodel = \"roofline\"\n\
                    [workload]\nrequests = 300\ntrace = \"rows.csv\"\nmax_new_tokens = 4096\n\
                    [client]\nmode = \"trace\"\n";
    std::fs::write(dir.path().join("plan.toml"), scenario).unwrap();
    let out = Command::cargo_bin("servesim")
        .unwrap()
        .current_dir(dir.path())
        .env("RUST_BACKTRACE", "0")
        .args(["plan", "plan.toml", "--gpus", "h100", "--counts", "4"])
        .args(["--tp", "4", "--slo-ttft-p99-s", "2", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &rows[0];
    assert_eq!(r["feasible"], true, "{r}");
    let (found, full) = (
        r["slo_req_per_s"].as_f64(),
        r["saturated_req_per_s"].as_f64(),
    );
    assert!(found.unwrap() > 0.0 && found <= full, "{r}");
}
