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
    std::fs::write(dir.join("a-file"), b"").unwrap();
    let good = root().join("scenarios/case-study-b2.toml");
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
    assert_eq!(left, vec!["a-directory.toml", "a-file", "not-utf8.toml"]);
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
