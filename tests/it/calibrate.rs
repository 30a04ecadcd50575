//! `servesim calibrate` (issue 14, item 1): logs servesim wrote calibrate back to the step
//! times that produced them; a hand-made log in SGLang 0.5.23's format fits and reports its
//! quality; the fragment pastes into a valid scenario.

use assert_cmd::Command;
use servesim::calibrate::{self, fit::Term, Calibration, LogText, Options};
use servesim::engine::{self, RunOptions};
use servesim::report::server_log;
use servesim::scenario::StepTimeSpec;

use crate::{root, scenario};

/// The linear model the logs are written with, in the fragment's units.
const TRUE: [f64; 5] = [12.0, 0.3, 60.0, 8.0, 60.0];
const UNITS: [f64; 5] = [1e3, 1e3, 1e9, 1e3, 1e6];

/// servesim's server.log of a closed loop at `concurrency` with prompts of mean `prompt`;
/// `engine` is extra `[engine]` lines.
fn server_log(concurrency: u32, prompt: u32, engine: &str) -> LogText {
    server_log_of(
        concurrency,
        prompt,
        &format!("kv_capacity_tokens = 1000000\n{engine}"),
        700,
    )
}

/// The same with `engine` the whole `[engine]` section and `requests` requests.
fn server_log_of(concurrency: u32, prompt: u32, engine: &str, requests: u32) -> LogText {
    let sc = scenario(&format!(
        r#"
name = "round trip"
seed = {concurrency}{prompt}
[engine]
{engine}
[engine.step_time]
decode_base_ms = {}
decode_per_seq_ms = {}
decode_per_kv_token_ns = {}
prefill_base_ms = {}
prefill_per_token_us = {}
[workload]
requests = {requests}
prompt_tokens = {{ dist = "lognormal", mean = {prompt}, cv = 1.0 }}
output_tokens = {{ dist = "lognormal", mean = 300, cv = 1.0 }}
[client]
mode = "closed"
concurrency = {concurrency}
"#,
        TRUE[0], TRUE[1], TRUE[2], TRUE[3], TRUE[4]
    ));
    let r = engine::run(
        &sc,
        &RunOptions {
            keep_log: true,
            ..RunOptions::default()
        },
    )
    .unwrap();
    LogText {
        name: format!("c{concurrency}-p{prompt}.log"),
        text: server_log::render(sc.engine.kind(), &r.log, 1),
    }
}

fn logs(engine: &str) -> Vec<LogText> {
    let mut out = Vec::new();
    for c in [4, 32, 128] {
        for p in [300, 3000] {
            out.push(server_log(c, p, engine));
        }
    }
    out
}

/// Each coefficient within `tolerance` of the truth.
fn assert_close(c: &Calibration, tolerance: f64) {
    for j in 0..5 {
        let got = c.fit.terms[j].value() * UNITS[j];
        let err = (got - TRUE[j]).abs() / TRUE[j];
        assert!(
            err < tolerance,
            "{}: {got} vs {} ({:.2} %)\n{}",
            calibrate::fit::TERMS[j],
            TRUE[j],
            100.0 * err,
            calibrate::fragment::report(c)
        );
    }
}

#[test]
fn sglang_logs_servesim_wrote_calibrate_back_within_two_percent() {
    let c = calibrate::calibrate(&logs("chunked_prefill_size = 2048"), Options::default()).unwrap();
    assert_eq!(c.engine, servesim::scenario::EngineKind::Sglang);
    assert_close(&c, 0.02);
    assert!(c.fit.r_squared > 0.999, "{}", c.fit.r_squared);
    // Left out: the first window of each log, and the drain at the end, where the batch
    // shrinks inside windows.
    let first = c
        .skipped
        .iter()
        .filter(|s| s.reason.starts_with("the first"))
        .count();
    assert_eq!(first, 6);
    assert!(
        c.skipped.len() * 20 < c.fit.used,
        "{} skipped of {}",
        c.skipped.len(),
        c.fit.used
    );
}

#[test]
fn the_non_overlapped_loop_calibrates_back_within_two_percent() {
    let logs = logs("chunked_prefill_size = 2048\ndisable_overlap_schedule = true");
    assert_close(
        &calibrate::calibrate(&logs, Options::default()).unwrap(),
        0.02,
    );
}

#[test]
fn chunked_and_mixed_prefill_calibrate_back_within_two_percent() {
    // Prompts of 3,000 tokens in chunks of 512: most Prefill lines are chunks.
    let c = calibrate::calibrate(&logs("chunked_prefill_size = 512"), Options::default()).unwrap();
    assert_close(&c, 0.02);
    // Mixed chunks: each prefill batch also decodes the running batch.
    let mixed = logs("chunked_prefill_size = 512\nenable_mixed_chunk = true");
    let c = calibrate::calibrate(
        &mixed,
        Options {
            mixed_chunk: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert_close(&c, 0.02);
    // Read as if unmixed, the decode rows go unpriced: the fit is worse.
    let wrong = calibrate::calibrate(&mixed, Options::default()).unwrap();
    assert!(
        wrong.fit.rms_relative > c.fit.rms_relative,
        "{} vs {}",
        wrong.fit.rms_relative,
        c.fit.rms_relative
    );
}

/// vLLM's logs at concurrencies 8, 32 and 96 and prompts of 500 and 2,000 tokens (8,000
/// requests each: a stats line every 10 s gives fewer windows than SGLang's Decode lines, and
/// its KV cache usage has one decimal).
fn vllm_logs(engine: &str) -> Vec<LogText> {
    let mut out = Vec::new();
    for c in [8, 32, 96] {
        for p in [500, 2000] {
            let section = format!("kind = \"vllm\"\nkv_capacity_tokens = 400000\n{engine}");
            out.push(server_log_of(c, p, &section, 8000));
        }
    }
    out
}

#[test]
fn vllm_logs_servesim_wrote_calibrate_back_within_two_percent() {
    // vLLM's steps are mixed: prefill_base is not one of their terms.
    let check = |c: &Calibration| {
        assert_eq!(c.engine, servesim::scenario::EngineKind::Vllm);
        assert_eq!(c.startup.get("engine.kv_capacity_tokens"), Some("400000"));
        assert_eq!(c.fit.terms[3], Term::Absent);
        for j in [0, 1, 2, 4] {
            let got = c.fit.terms[j].value() * UNITS[j];
            let err = (got - TRUE[j]).abs() / TRUE[j];
            assert!(
                err < 0.02,
                "{}: {got} ({:.2} %)\n{}",
                calibrate::fit::TERMS[j],
                100.0 * err,
                calibrate::fragment::report(c)
            );
        }
    };
    check(&calibrate::calibrate(&vllm_logs(""), Options::default()).unwrap());
    // Chunked: a step takes at most 1,024 tokens, so most prompts take several steps.
    check(
        &calibrate::calibrate(
            &vllm_logs("max_num_batched_tokens = 1024"),
            Options::default(),
        )
        .unwrap(),
    );
}

fn excerpt() -> LogText {
    calibrate::read_log(&root().join("tests/fixtures/logs/sglang-0.5.23-excerpt.log")).unwrap()
}

#[test]
fn a_real_format_sglang_excerpt_fits_and_reports_its_quality() {
    let c = calibrate::calibrate(&[excerpt()], Options::default()).unwrap();
    assert_eq!(c.startup.get("engine.kv_capacity_tokens"), Some("470997"));
    assert_eq!(c.startup.get("engine.chunked_prefill_size"), Some("8192"));
    assert_eq!(c.startup.get("engine.mem_fraction_static"), Some("0.836"));
    // The generator's model (tests/fixtures/logs/make_sglang_excerpt.py), with 1.5 % noise:
    // decode 7.2 ms + 0.085 ms per request + 21 ns per KV token; prefill 9.5 ms + 48 µs per token.
    let truth = [7.2, 0.085, 21.0, 9.5, 48.0];
    let got: Vec<f64> = (0..5).map(|j| c.fit.terms[j].value() * UNITS[j]).collect();
    // The decode terms and the per-token prefill cost within 5 %; the prefill batch's fixed
    // cost, which few windows hold enough prefills to tell apart, within 30 %.
    for (j, tolerance) in [(0, 0.05), (1, 0.05), (2, 0.05), (3, 0.3), (4, 0.05)] {
        assert!(
            (got[j] - truth[j]).abs() < tolerance * truth[j],
            "{j}: {got:?}\n{}",
            calibrate::fragment::report(&c)
        );
    }
    assert!(c.fit.r_squared > 0.999, "{}", c.fit.r_squared);
    assert!(c.fit.rms_relative < 0.01);
    let report = calibrate::fragment::report(&c);
    for words in [
        "windows: 55 used, 9 skipped (1 the first Decode batch line of its log",
        "8 the batch changed by more than a tenth",
        "quality: R² 0.999",
        "ranges: batch 4–128 requests",
    ] {
        assert!(report.contains(words), "{words}:\n{report}");
    }
}

#[test]
fn the_fragment_pastes_into_a_valid_scenario() {
    let c = calibrate::calibrate(&[excerpt()], Options::default()).unwrap();
    let text = format!(
        "name = \"pasted\"\n{}\n[workload]\nrequests = 10\nprompt_tokens = {{ dist = \"constant\", value = 100 }}\n\
         output_tokens = {{ dist = \"constant\", value = 10 }}\n[client]\nconcurrency = 2\n",
        calibrate::fragment::fragment(&c, None)
    );
    let sc = scenario(&text);
    let StepTimeSpec::Linear(l) = &sc.engine.step_time else {
        panic!("{:?}", sc.engine.step_time)
    };
    // Six significant digits in the fragment.
    let close = |got: u64, j: usize, scale: f64| {
        let want = c.fit.terms[j].value() * scale;
        assert!((got as f64 - want).abs() < 1e-5 * want, "{got} vs {want}");
    };
    close(l.decode_base_ns, 0, 1e9);
    close(l.decode_per_seq_ns, 1, 1e9);
    close(l.prefill_per_token_ps, 4, 1e12);
    assert!(matches!(c.fit.terms[0], Term::Fitted { .. }));
}

#[test]
fn the_cli_reports_and_writes_the_fragment() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("calibrated.toml");
    let o = Command::cargo_bin("servesim")
        .unwrap()
        .args([
            "calibrate",
            root()
                .join("tests/fixtures/logs/sglang-0.5.23-excerpt.log")
                .to_str()
                .unwrap(),
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.starts_with("servesim calibrate — SGLang log: "),
        "{stdout}"
    );
    assert!(stdout.contains("decode_per_kv_token_ns"), "{stdout}");
    let fragment = std::fs::read_to_string(&out).unwrap();
    assert!(
        fragment.contains("[engine.step_time]\nmodel = \"linear\"\n"),
        "{fragment}"
    );
    assert!(
        fragment.contains("kv_capacity_tokens = 470997"),
        "{fragment}"
    );
}

#[test]
fn a_real_format_vllm_excerpt_fits_and_flags_what_it_cannot_pin_down() {
    let log =
        calibrate::read_log(&root().join("tests/fixtures/logs/vllm-0.33.0-excerpt.log")).unwrap();
    let c = calibrate::calibrate(&[log], Options::default()).unwrap();
    assert_eq!(c.engine, servesim::scenario::EngineKind::Vllm);
    // "GPU KV cache size: 1,095,248 tokens" less the null block of 16.
    assert_eq!(c.startup.get("engine.kv_capacity_tokens"), Some("1095232"));
    assert_eq!(c.startup.get("engine.max_num_seqs"), Some("256"));
    // The generator's model (tests/fixtures/logs/make_vllm_excerpt.py): 6.8 ms + 0.07 ms per
    // decode + 45 µs per prompt token + 18 ns per KV token, 1.5 % noise per step.
    let truth = [6.8, 0.07, 18.0, 0.0, 45.0];
    let got: Vec<f64> = (0..5).map(|j| c.fit.terms[j].value() * UNITS[j]).collect();
    for (j, tolerance) in [(0, 0.05), (1, 0.05), (2, 0.25), (4, 0.05)] {
        assert!(
            (got[j] - truth[j]).abs() < tolerance * truth[j],
            "{j}: {got:?}"
        );
    }
    // 55 ten-second windows, KV usage to one decimal: the per-KV cost is flagged.
    assert!(c.fit.terms[2].poorly_determined());
    let report = calibrate::fragment::report(&c);
    assert!(
        report.contains("warning: decode_per_kv_token_ns is poorly determined"),
        "{report}"
    );
    assert!(
        report.contains("prefill_base_ms                     —  not a term of vLLM's steps"),
        "{report}"
    );
    let fragment = calibrate::fragment::fragment(&c, None);
    assert!(fragment.contains("kind = \"vllm\""), "{fragment}");
}

#[test]
fn a_table_from_servesims_logs_holds_the_linear_models_step_times() {
    use servesim::cost::StepTimeModel;
    let c = calibrate::calibrate(&logs("chunked_prefill_size = 2048"), Options::default()).unwrap();
    let csv = calibrate::table::csv(&c).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("steps.csv"), &csv).unwrap();
    let table =
        servesim::cost::table::read::load(&dir.path().join("steps.csv"), "steps.csv").unwrap();
    // Batch sizes 1, 2, 4, … up to the largest the logs show.
    assert_eq!(table.decode_batch[..4], [1, 2, 4, 8], "{csv}");
    let linear = |b: u64, k: u64| 1e-3 * (TRUE[0] + TRUE[1] * b as f64) + 1e-9 * TRUE[2] * k as f64;
    for (b, k, seconds) in table.decode_points() {
        let err = (seconds - linear(b, k)).abs() / linear(b, k);
        assert!(
            err < 0.03,
            "decode at batch {b}, KV {k}: {seconds} vs {} ({:.1} %)\n{csv}",
            linear(b, k),
            100.0 * err
        );
    }
    for (t, seconds) in table.prefill_points() {
        let want = 1e-3 * TRUE[3] + 1e-6 * TRUE[4] * t as f64;
        assert!(
            (seconds - want).abs() < 0.03 * want,
            "prefill of {t}: {seconds} vs {want}"
        );
    }
    // Between the points it is the linear model to within the same few per cent.
    let (got, want) = (table.decode(24, 100_000).as_secs_f64(), linear(24, 100_000));
    assert!((got - want).abs() < 0.03 * want, "{got} vs {want}");
}

#[test]
fn the_cli_writes_a_table_and_a_fragment_that_uses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let excerpt = root().join("tests/fixtures/logs/sglang-0.5.23-excerpt.log");
    let o = Command::cargo_bin("servesim")
        .unwrap()
        .current_dir(tmp.path())
        .args([
            "calibrate",
            excerpt.to_str().unwrap(),
            "--table",
            "steps.csv",
            "--out",
            "calibrated.toml",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let fragment = std::fs::read_to_string(tmp.path().join("calibrated.toml")).unwrap();
    assert!(
        fragment.contains("model = \"table\"\ntable = \"steps.csv\""),
        "{fragment}"
    );
    // The fragment, pasted into a scenario beside the table, runs.
    let scenario = format!(
        "name = \"pasted\"\n{fragment}\n[workload]\nrequests = 50\nprompt_tokens = {{ dist = \"constant\", value = 500 }}\n\
         output_tokens = {{ dist = \"constant\", value = 50 }}\n[client]\nconcurrency = 8\n"
    );
    std::fs::write(tmp.path().join("pasted.toml"), scenario).unwrap();
    let o = Command::cargo_bin("servesim")
        .unwrap()
        .current_dir(tmp.path())
        .args(["run", "pasted.toml"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(
        report.contains("step time table (steps.csv): decode at "),
        "{report}"
    );
}
