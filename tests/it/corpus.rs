//! The bad-input corpus: every case ends with a clear message and the documented exit code,
//! never a panic. The exact message of each case is pinned by a snapshot
//! (`tests/it/snapshots/it__corpus__*.snap`); `tests/README.md` lists the classes.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

use crate::root;

fn corpus_dir() -> PathBuf {
    root().join("tests/corpus")
}

/// Run servesim in `dir`; return (exit code, stderr, stdout).
fn servesim(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("servesim")
        .unwrap()
        .current_dir(dir)
        .env("RUST_BACKTRACE", "0")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn check_failure(name: &str, code: i32, want_code: i32, stderr: &str) {
    assert_eq!(code, want_code, "{name}: exit code\n{stderr}");
    assert!(!stderr.contains("panicked"), "{name} panicked:\n{stderr}");
    assert!(stderr.starts_with("error: "), "{name}: {stderr}");
    assert!(stderr.contains("hint: "), "{name} gives no hint:\n{stderr}");
    insta::assert_snapshot!(name.to_string(), stderr);
}

#[test]
fn every_bad_scenario_file_is_refused_with_its_exact_message() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 40, "the corpus has {} files", cases.len());
    for case in cases {
        let file = case.file_name().unwrap().to_str().unwrap().to_string();
        let (code, stderr, stdout) = servesim(&corpus_dir(), &["run", &file]);
        assert!(stdout.is_empty(), "{file}: printed a report:\n{stdout}");
        check_failure(
            case.file_stem().unwrap().to_str().unwrap(),
            code,
            2,
            &stderr,
        );
        // `check` reports the same problems.
        let (code, check_err, _) = servesim(&corpus_dir(), &["check", &file]);
        assert_eq!(code, 2, "{file}");
        assert_eq!(check_err, stderr, "{file}: check and run disagree");
    }
}

/// Cases that are about the command line, not a scenario file.
#[test]
fn bad_command_lines_are_refused_with_their_exact_message() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("not-utf8.toml"), b"name = \"caf\xe9\"\n").unwrap();
    std::fs::create_dir(dir.join("a-directory.toml")).unwrap();
    // An output directory where `run --out` would write its summary: a directory of that name.
    std::fs::create_dir_all(dir.join("an-out/summary.json")).unwrap();
    std::fs::write(dir.join("a-file"), b"").unwrap();
    let good = root().join("scenarios/case-study-b2.toml");
    // Copies that a wrong output path could replace (never the repository's own files).
    std::fs::copy(&good, dir.join("b2.toml")).unwrap();
    std::fs::copy(&good, dir.join("summary.json")).unwrap();
    std::os::unix::fs::symlink("no-such-dir/r.csv", dir.join("dangling.csv")).unwrap();
    std::fs::copy(
        root().join("tests/fixtures/bench/vllm-0.33.0.json"),
        dir.join("compare.json"),
    )
    .unwrap();
    let good = good.to_str().unwrap();
    let plan = root().join("scenarios/plan-llama-3.1-70b.toml");
    let plan = plan.to_str().unwrap();
    let vllm = root().join("tests/fixtures/vllm.toml");
    let vllm = vllm.to_str().unwrap();
    let cases: &[(&str, &[&str], i32)] = &[
        (
            "cli-set-unknown-path",
            &["run", good, "--set", "engine.kv_capacity=1000"],
            2,
        ),
        (
            "cli-set-wrong-type",
            &["run", good, "--set", "client.concurrency=\"many\""],
            2,
        ),
        (
            "cli-set-through-a-value",
            &["run", good, "--set", "name.first=x"],
            2,
        ),
        (
            "cli-set-without-equals",
            &["run", good, "--set", "client.concurrency"],
            2,
        ),
        ("cli-set-empty-key", &["run", good, "--set", "=3"], 2),
        (
            "cli-vary-empty",
            &["sweep", good, "--vary", "client.concurrency="],
            2,
        ),
        (
            "cli-vary-infinite",
            &["sweep", good, "--vary", "client.concurrency=1:1e18:1"],
            2,
        ),
        (
            "cli-vary-zero-step",
            &[
                "sweep",
                good,
                "--vary",
                "engine.mem_fraction_static=0.8:0.9:0",
            ],
            2,
        ),
        (
            "cli-vary-backwards",
            &[
                "sweep",
                good,
                "--vary",
                "engine.mem_fraction_static=0.9:0.8:0.01",
            ],
            2,
        ),
        (
            "cli-vary-unknown-key",
            &["sweep", good, "--vary", "engine.kv_capacity=1,2"],
            2,
        ),
        (
            "cli-vary-wrong-type",
            &["sweep", good, "--vary", "client.concurrency=a,b"],
            2,
        ),
        (
            "cli-shard-invalid",
            &[
                "sweep",
                good,
                "--vary",
                "client.concurrency=1,2",
                "--shard",
                "3/3",
            ],
            2,
        ),
        (
            "cli-jobs-zero",
            &[
                "sweep",
                good,
                "--vary",
                "client.concurrency=1,2",
                "--jobs",
                "0",
            ],
            2,
        ),
        (
            "cli-plan-unknown-gpu",
            &["plan", plan, "--gpus", "h100,h1000", "--counts", "8"],
            2,
        ),
        (
            "cli-plan-zero-count",
            &["plan", plan, "--gpus", "h100", "--counts", "0,8"],
            2,
        ),
        (
            "cli-plan-bad-price",
            &[
                "plan",
                plan,
                "--gpus",
                "h100",
                "--counts",
                "8",
                "--price",
                "h100=cheap",
            ],
            2,
        ),
        (
            "cli-plan-zero-deadline",
            &[
                "plan",
                plan,
                "--gpus",
                "h100",
                "--counts",
                "8",
                "--deadline-h",
                "0",
            ],
            2,
        ),
        (
            "cli-plan-zero-slo",
            &[
                "plan",
                plan,
                "--gpus",
                "h100",
                "--counts",
                "8",
                "--slo-tpot-p99-ms",
                "0",
            ],
            2,
        ),
        (
            "cli-plan-target-rate-without-slo",
            &[
                "plan",
                plan,
                "--gpus",
                "h100",
                "--counts",
                "8",
                "--target-rate",
                "20",
            ],
            2,
        ),
        ("cli-missing-file", &["run", "no-such-scenario.toml"], 2),
        (
            "cli-scenario-is-a-directory",
            &["run", "a-directory.toml"],
            2,
        ),
        ("cli-scenario-not-utf8", &["run", "not-utf8.toml"], 2),
        ("cli-out-is-a-file", &["run", good, "--out", "a-file"], 2),
        (
            "cli-out-under-a-file",
            &["run", good, "--out", "a-file/sub"],
            2,
        ),
        (
            "cli-requests-csv-under-a-file",
            &["run", good, "--requests-csv", "a-file/r.csv"],
            2,
        ),
        (
            "cli-run-vllm-pool-smaller-than-a-prompt",
            &[
                "run",
                vllm,
                "--set",
                "engine.kv_capacity_tokens=96",
                "--set",
                "workload.requests=2",
            ],
            1,
        ),
        ("cli-memory-without-inputs", &["memory", good], 2),
        (
            "cli-catalog-missing-file",
            &["catalog", "--file", "no-such-catalog.toml"],
            2,
        ),
        (
            "cli-merge-not-a-shard",
            &["merge", "a-directory.toml", "--out", "merged"],
            2,
        ),
        // Grids (issue 15, class 2).
        (
            "cli-vary-twice",
            &[
                "sweep",
                good,
                "--vary",
                "client.concurrency=1,2",
                "--vary",
                "client.concurrency=3:4:1",
            ],
            2,
        ),
        (
            "cli-jobs-above-the-cap",
            &[
                "sweep",
                good,
                "--vary",
                "client.concurrency=1,2",
                "--jobs",
                "1000000",
            ],
            2,
        ),
        (
            "cli-vary-integer-range-too-long",
            &["sweep", good, "--vary", "seed=1:100000000000000000000:1"],
            2,
        ),
        // Found by the fuzzer (its own grid check multiplied the axes' lengths in usize): four
        // axes of 100,000 values each make 10²⁰ points, past a 64-bit count.
        (
            "cli-vary-grid-past-a-64-bit-count",
            &[
                "sweep",
                good,
                "--vary",
                "seed=1:100000:1",
                "--vary",
                "client.concurrency=1:100000:1",
                "--vary",
                "workload.requests=1:100000:1",
                "--vary",
                "run.max_events=1:100000:1",
            ],
            2,
        ),
        // Output paths (class 4): checked before the run, inputs never replaced.
        (
            "cli-requests-csv-is-the-scenario",
            &["run", "b2.toml", "--requests-csv", "b2.toml"],
            2,
        ),
        (
            "cli-out-file-is-the-scenario",
            &["run", "summary.json", "--out", "."],
            2,
        ),
        (
            "cli-requests-csv-is-a-directory",
            &["run", good, "--requests-csv", "a-directory.toml"],
            2,
        ),
        (
            "cli-requests-csv-is-an-out-file",
            &[
                "run",
                good,
                "--out",
                "new/out",
                "--requests-csv",
                "new/out/timeseries.csv",
            ],
            2,
        ),
        (
            "cli-out-file-is-a-directory",
            &["run", good, "--out", "an-out"],
            2,
        ),
        (
            "cli-requests-csv-link-into-nowhere",
            &["run", good, "--requests-csv", "dangling.csv"],
            2,
        ),
        (
            "cli-compare-out-is-the-result-file",
            &["compare", "compare.json", "--scenario", good, "--out", "."],
            2,
        ),
        // Files that never end (class 8).
        ("cli-scenario-dev-zero", &["run", "/dev/zero"], 2),
    ];
    for (name, args, want) in cases {
        let (code, stderr, _) = servesim(dir, args);
        let normalised = stderr.replace(good, "<b2>");
        check_failure(name, code, *want, &normalised);
    }
    // Nothing was written by any failing case.
    let mut left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec![
            "a-directory.toml",
            "a-file",
            "an-out",
            "b2.toml",
            "compare.json",
            "dangling.csv",
            "not-utf8.toml",
            "summary.json"
        ]
    );
    let b2 = std::fs::read(root().join("scenarios/case-study-b2.toml")).unwrap();
    for copy in ["b2.toml", "summary.json"] {
        assert_eq!(std::fs::read(dir.join(copy)).unwrap(), b2, "{copy}");
    }
    assert_eq!(
        std::fs::read(dir.join("compare.json")).unwrap(),
        std::fs::read(root().join("tests/fixtures/bench/vllm-0.33.0.json")).unwrap()
    );
}

/// Runs whose simulated time would pass 2⁶³ ns (~292 years) stop with exit code 1 (they used to
/// saturate the clock and exit 0); `check` accepts them: every input is within its bounds.
#[test]
fn runs_past_the_representable_time_stop_with_a_message() {
    let dir = corpus_dir().join("runtime");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 3, "{} runtime cases", cases.len());
    for case in cases {
        let file = case.file_name().unwrap().to_str().unwrap().to_string();
        let (code, stderr, stdout) = servesim(&dir, &["run", &file]);
        assert!(stdout.is_empty(), "{file}: printed a report:\n{stdout}");
        let stem = case.file_stem().unwrap().to_str().unwrap();
        check_failure(&format!("runtime-{stem}"), code, 1, &stderr);
        let (code, _, _) = servesim(&dir, &["check", &file]);
        assert_eq!(code, 0, "{file}: check");
    }
}

/// `merge` takes the shards of one sweep only, and never writes over a shard.
#[test]
fn shards_of_other_sweeps_are_not_merged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let tiny = "name = \"tiny\"\n[engine]\nkv_capacity_tokens = 100000\n[workload]\nrequests = 4\nprompt_tokens = { dist = \"constant\", value = 100 }\noutput_tokens = { dist = \"constant\", value = 50 }\n[client]\nconcurrency = 1\n";
    std::fs::write(dir.join("s.toml"), tiny).unwrap();
    // The same name and keys, another text.
    std::fs::write(dir.join("edited.toml"), format!("{tiny}# edited\n")).unwrap();
    let shard = |out: &str, file: &str, vary: &str, shard: &str, extra: &[&str]| {
        let mut args = vec![
            "sweep", file, "--vary", vary, "--shard", shard, "--out", out,
        ];
        args.extend(extra);
        let (code, stderr, _) = servesim(dir, &args);
        assert_eq!(code, 0, "{out}: {stderr}");
    };
    let vary = "client.concurrency=1,2";
    shard("a", "s.toml", vary, "0/2", &[]);
    shard("b", "s.toml", vary, "1/2", &[]);
    shard("other-set", "s.toml", vary, "1/2", &["--set", "seed=2"]);
    shard("other-text", "edited.toml", vary, "1/2", &[]);
    shard("other-axis", "s.toml", "client.concurrency=1,3", "1/2", &[]);
    let cases: &[(&str, &[&str])] = &[
        (
            "cli-merge-other-sets",
            &["merge", "a", "other-set", "--out", "m"],
        ),
        (
            "cli-merge-other-scenario-text",
            &["merge", "a", "other-text", "--out", "m"],
        ),
        (
            "cli-merge-other-axes",
            &["merge", "a", "other-axis", "--out", "m"],
        ),
        ("cli-merge-into-a-shard", &["merge", "a", "b", "--out", "b"]),
    ];
    let before = std::fs::read(dir.join("b/sweep.csv")).unwrap();
    for (name, args) in cases {
        let (code, stderr, _) = servesim(dir, args);
        check_failure(name, code, 2, &stderr);
    }
    assert!(!dir.join("m").exists());
    assert_eq!(std::fs::read(dir.join("b/sweep.csv")).unwrap(), before);
    // The shards of one sweep still merge.
    let (code, stderr, _) = servesim(dir, &["merge", "a", "b", "--out", "m"]);
    assert_eq!(code, 0, "{stderr}");
}

/// `servesim calibrate` on logs it cannot use: every case names the file (and line), what is
/// wrong and how to fix it, with exit code 2.
#[test]
fn bad_logs_are_refused_with_their_exact_message() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let decode = |n: u32| {
        format!(
            "[2026-11-20 14:03:{:02}] Decode batch, #running-req: 8, #token: 9000, token usage: 0.02, cuda graph: True, \
             gen throughput (token/s): 512.00, #queue-req: 0\n",
            n % 60
        )
    };
    let prefill = "[2026-11-20 14:03:01] Prefill batch, #new-seq: 1, #new-token: 700, #cached-token: 0, token usage: 0.01, \
                   #running-req: 7, #queue-req: 0, #pending-token: 0, cuda graph: True, input throughput (token/s): 800.00\n";
    let files: &[(&str, Vec<u8>)] = &[
        ("empty.log", b"\n\n".to_vec()),
        (
            "binary.log",
            b"[2026-11-20 14:03:01] Decode batch\x00\x01\x02".to_vec(),
        ),
        (
            "not-a-log.log",
            b"name = \"a scenario, not a log\"\n[workload]\nrequests = 10\n".to_vec(),
        ),
        (
            "too-few.log",
            (0..4).map(decode).collect::<String>().into_bytes(),
        ),
        ("no-decode.log", prefill.repeat(5).into_bytes()),
        (
            "one-batch.log",
            (0..12)
                .map(|n| format!("{prefill}{}", decode(n)))
                .collect::<String>()
                .into_bytes(),
        ),
        (
            "truncated.log",
            format!(
                "{}{}[2026-11-20 14:03:09] Decode batch, #running-req: 8, #token: 90",
                decode(1),
                prefill
            )
            .into_bytes(),
        ),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let cases: &[(&str, &[&str])] = &[
        ("cli-calibrate-empty", &["calibrate", "empty.log"]),
        ("cli-calibrate-binary", &["calibrate", "binary.log"]),
        ("cli-calibrate-not-a-log", &["calibrate", "not-a-log.log"]),
        ("cli-calibrate-too-few-lines", &["calibrate", "too-few.log"]),
        (
            "cli-calibrate-no-decode-lines",
            &["calibrate", "no-decode.log"],
        ),
        (
            "cli-calibrate-truncated-line",
            &["calibrate", "truncated.log"],
        ),
        ("cli-calibrate-missing-file", &["calibrate", "no-such.log"]),
        (
            "cli-calibrate-wrong-engine",
            &["calibrate", "too-few.log", "--engine", "vllm"],
        ),
        (
            "cli-calibrate-table-one-batch-size",
            &["calibrate", "one-batch.log", "--table", "t.csv"],
        ),
    ];
    for (name, args) in cases {
        let (code, stderr, stdout) = servesim(dir, args);
        assert!(stdout.is_empty(), "{name}: printed {stdout}");
        check_failure(name, code, 2, &stderr);
    }
}

/// Found by the fuzzer: a CSV data file's rows were numbered by counting line breaks from the
/// start of the file for every row (about 100 s of `check` at 50,000 rows in a debug build). A bad
/// cell on the last row of a 200,000-row trace, blank and CRLF lines among them, is now found in
/// one pass, at its exact line.
#[test]
fn a_bad_row_at_the_end_of_a_long_trace_is_found_at_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut csv = String::from("prompt_tokens,output_tokens,arrival_s\n");
    for i in 0..200_000u32 {
        csv.push_str(&format!("100,50,{}.{:02}\n", i / 100, i % 100));
        if i % 1000 == 0 {
            csv.push_str("\r\n\n");
        }
    }
    csv.push_str("100,many,2000.00\n");
    std::fs::write(tmp.path().join("long.csv"), csv).unwrap();
    std::fs::write(
        tmp.path().join("trace-bad-row-at-the-end-of-a-long-file.toml"),
        "name = \"long trace\"\n[engine]\nkv_capacity_tokens = 100000\n[workload]\ntrace = \"long.csv\"\n[client]\nmode = \"trace\"\n",
    )
    .unwrap();
    let (code, stderr, stdout) = servesim(
        tmp.path(),
        &["check", "trace-bad-row-at-the-end-of-a-long-file.toml"],
    );
    assert!(stdout.is_empty(), "{stdout}");
    check_failure("trace-bad-row-at-the-end-of-a-long-file", code, 2, &stderr);
}

#[test]
fn a_run_that_cannot_progress_stops_with_a_diagnosis() {
    let tmp = tempfile::tempdir().unwrap();
    // The requests ask for their 5,000 tokens (ignore_eos), which SGLang caps to what the empty
    // pool holds (here 1000 − 100 − 1 − 1 = 898), so the general admission rule always takes a
    // request alone; but the rule
    // for ignore_eos requests with the radix cache disabled then asks for 1000 − 101 − 898 = 1
    // token more than 1 to spare, and never admits it: SGLang itself would hang.
    std::fs::write(
        tmp.path().join("stuck.toml"),
        "name = \"stuck\"\n[engine]\nkv_capacity_tokens = 1000\ndisable_radix_cache = true\n[workload]\nrequests = 3\nprompt_tokens = { dist = \"constant\", value = 100 }\noutput_tokens = { dist = \"constant\", value = 5000 }\nignore_eos = true\n[client]\nconcurrency = 2\n",
    )
    .unwrap();
    let (code, stderr, _) = servesim(tmp.path(), &["run", "stuck.toml", "--out", "out"]);
    check_failure("runtime-stuck", code, 1, &stderr);
    assert!(!tmp.path().join("out/summary.json").exists());
    // A bound on batches stops a long run with its own message.
    let good = root().join("scenarios/case-study-b2.toml");
    let (code, stderr, _) = servesim(
        tmp.path(),
        &[
            "run",
            good.to_str().unwrap(),
            "--set",
            "run.max_events=1000",
        ],
    );
    check_failure("runtime-max-events", code, 1, &stderr);
}

/// A request between chunks takes a whole chunk even when SGLang's admission budget is spent
/// (`PrefillBudget.available_chunk_tokens`); if the running requests hold the rest of the pool,
/// SGLang's `alloc_token_slots` raises and the server stops. The run stops there too, with
/// SGLang's words, exit code 1 and no output — on both paths (it used to panic on an invariant of
/// the KV pool). The golden case `sglang/chunk-out-of-memory` has SGLang's own code do the same
/// (with SGLang's default ratios, which this case sets otherwise to keep the arithmetic short).
///
/// By hand: a pool of 870 tokens, chunks of 8, mixed chunks; request 0 (4 prompt tokens, asking
/// for 2,000, capped to 870 − 4 − 1 − 1 = 864) and request 1 (800) arrive at once. The first
/// batch takes request 0 whole and 4 tokens of request 1 (8 in use). From then on each mixed
/// batch gives request 0 its decode token and request 1 a chunk of 8 − 1 = 7, while request 0's
/// reservation stays min(863, clip 4) × 0.7 = 2.8 (a ratio of 0.7 that never decays): 107 such
/// batches leave 870 − 8 − 107 × 8 = 6 free, the next chunk is cut to ⌊6 − 1 − 2.8⌋ = 2 (3 free
/// after it and the decode token), and then the budget is 3 − 1 − 2.8 < 0: request 1 takes a
/// whole chunk of 7 with 3 free. 108 batches of 3.16 ms (3 ms + 20 µs × 8 tokens) and one of
/// 3.06 ms: t = 0.344 s.
#[test]
fn a_chunk_that_outgrows_the_pool_stops_the_run_as_sglang_runs_out_of_memory() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("oom.toml"),
        "name = \"oom\"\n[engine]\nkv_capacity_tokens = 870\npage_size = 1\nchunked_prefill_size = 8\nenable_mixed_chunk = true\ndisable_radix_cache = true\ndisable_overlap_schedule = true\ninit_new_token_ratio = 0.7\nmin_new_token_ratio_factor = 1.0\nclip_max_new_tokens = 4\n[engine.step_time]\ndecode_base_ms = 10.0\nprefill_base_ms = 3.0\nprefill_per_token_us = 20.0\n[workload]\ntrace = \"trace.csv\"\nmax_new_tokens = 2000\n[client]\nmode = \"trace\"\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("trace.csv"),
        "prompt_tokens,output_tokens,arrival_s\n4,2000,0.0\n800,10,0.0\n",
    )
    .unwrap();
    let (code, stderr, stdout) = servesim(tmp.path(), &["run", "oom.toml", "--out", "out"]);
    assert!(stdout.is_empty(), "printed a report:\n{stdout}");
    check_failure("runtime-chunk-out-of-memory", code, 1, &stderr);
    assert!(!tmp.path().join("out/summary.json").exists());
    let (code, step_by_step, _) = servesim(tmp.path(), &["run", "oom.toml", "--step-by-step"]);
    assert_eq!((code, step_by_step), (1, stderr));
    let (code, _, _) = servesim(tmp.path(), &["check", "oom.toml"]);
    assert_eq!(code, 0, "check");
    // A sweep names the point, then gives the run's message, cause and hint.
    let (code, stderr, _) = servesim(
        tmp.path(),
        &[
            "sweep",
            "oom.toml",
            "--vary",
            "engine.kv_capacity_tokens=870,2000",
            "--no-plots",
        ],
    );
    check_failure("runtime-chunk-out-of-memory-sweep", code, 1, &stderr);
}

#[test]
fn bad_benchmark_result_files_are_refused_with_the_key_path() {
    let tmp = tempfile::tempdir().unwrap();
    let good =
        std::fs::read_to_string(root().join("tests/fixtures/bench/vllm-0.33.0.json")).unwrap();
    let scenario = root().join("scenarios/case-study-b2.toml");
    let scenario = scenario.to_str().unwrap();
    let cases: &[(&str, String)] = &[
        ("compare-not-json", "bench_serving finished\n".to_string()),
        (
            "compare-no-details",
            good.replace("\"itls\"", "\"itl_list\""),
        ),
        (
            "compare-lengths-differ",
            good.replace(
                "\"output_lens\": [4, 3, 1, 5, 0, 2]",
                "\"output_lens\": [4, 3, 1, 5, 0]",
            ),
        ),
        (
            "compare-negative-ttft",
            good.replace("\"ttfts\": [0.05,", "\"ttfts\": [-0.05,"),
        ),
    ];
    for (name, text) in cases {
        assert_ne!(text, &good, "{name}: the fixture did not change");
        let f = tmp.path().join("result.json");
        std::fs::write(&f, text).unwrap();
        let (code, stderr, stdout) = servesim(
            tmp.path(),
            &["compare", "result.json", "--scenario", scenario],
        );
        assert!(stdout.is_empty(), "{name}: {stdout}");
        check_failure(name, code, 2, &stderr);
    }
    std::fs::write(tmp.path().join("result.json"), &good).unwrap();
    let (code, stderr, _) = servesim(tmp.path(), &["compare", "result.json"]);
    check_failure("compare-without-scenario", code, 2, &stderr);
}
