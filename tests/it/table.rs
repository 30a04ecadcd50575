//! `[engine.step_time] model = "table"` (issue 14, item 2): measured step times, interpolated;
//! the same table as the roofline's calibration.

use assert_cmd::Command;
use servesim::cost::roofline::Roofline;
use servesim::scenario::{self as sc_mod, Source, StepTimeSpec};

use crate::{root, run, scenario};

/// A small closed-loop workload after `step_time` (an `[engine.step_time]` table).
fn with_step_time(step_time: &str) -> String {
    format!(
        r#"
name = "table"
seed = 3
[engine]
kv_capacity_tokens = 300000
chunked_prefill_size = 2048
{step_time}
[workload]
requests = 600
prompt_tokens = {{ dist = "lognormal", mean = 900, cv = 1.0 }}
output_tokens = {{ dist = "lognormal", mean = 150, cv = 1.0 }}
[client]
mode = "closed"
concurrency = 48
"#
    )
}

#[test]
fn a_table_made_of_the_linear_models_points_runs_exactly_like_the_linear_model() {
    // Linear: decode 12 ms + 0.3 ms per request + 60 ns per KV token; prefill 8 ms + 60 µs per
    // token. The table holds that model's values at batch 1 and 101, KV 0 and 1,000,000, and
    // prefills of 1 and 1,001 tokens; extended linearly, it is the same plane everywhere.
    let linear = scenario(&with_step_time(
        "[engine.step_time]\ndecode_base_ms = 12.0\ndecode_per_seq_ms = 0.3\ndecode_per_kv_token_ns = 60.0\n\
         prefill_base_ms = 8.0\nprefill_per_token_us = 60.0",
    ));
    let table = scenario(&with_step_time(
        "[engine.step_time]\nmodel = \"table\"\ndecode_batch = [1, 101]\ndecode_kv_tokens = [0, 1000000]\n\
         decode_ms = [12.3, 72.3, 42.3, 102.3]\nprefill_tokens = [1, 1001]\nprefill_ms = [8.06, 68.06]",
    ));
    assert!(matches!(table.engine.step_time, StepTimeSpec::Table(_)));
    let (a, b) = (run(&linear), run(&table));
    assert_eq!(a.requests.len(), 600);
    assert!(a.requests == b.requests, "per-request times differ");
    assert_eq!(a.counters.decode_steps, b.counters.decode_steps);
}

#[test]
fn a_bent_table_is_not_the_linear_model() {
    // The same corners, but batch 16 costs 2 ms less than the plane through them: runs must
    // differ (the table is really read between its points).
    let plane = "decode_batch = [1, 101]\ndecode_kv_tokens = [0, 1000000]\ndecode_ms = [12.3, 72.3, 42.3, 102.3]";
    let bent = "decode_batch = [1, 16, 101]\ndecode_kv_tokens = [0, 1000000]\n\
                decode_ms = [12.3, 72.3, 14.8, 74.8, 42.3, 102.3]";
    let table = |decode: &str| {
        scenario(&with_step_time(&format!(
            "[engine.step_time]\nmodel = \"table\"\n{decode}\nprefill_tokens = [1, 1001]\nprefill_ms = [8.06, 68.06]"
        )))
    };
    let (a, b) = (run(&table(plane)), run(&table(bent)));
    let end = |r: &servesim::metrics::RunResult| r.requests.iter().map(|q| q.done_ns).max();
    assert!(
        end(&b) < end(&a),
        "the cheaper middle of the table did not shorten the run"
    );
}

/// The roofline of Llama-3.1-8B on one H100, with `extra` in `[engine.step_time]`.
fn roofline_scenario(extra: &str) -> String {
    format!(
        r#"
name = "roofline"
[hardware]
gpu = "h100"
[model]
name = "llama-3.1-8b"
[engine]
kv_capacity_tokens = 400000
[engine.step_time]
model = "roofline"
{extra}
[workload]
requests = 100
prompt_tokens = {{ dist = "constant", value = 500 }}
output_tokens = {{ dist = "constant", value = 100 }}
[client]
concurrency = 16
"#
    )
}

fn roofline_of(text: &str, dir: &std::path::Path) -> Roofline {
    let src = Source {
        name: "roofline.toml".into(),
        base_dir: dir.to_path_buf(),
        text: text.into(),
    };
    match sc_mod::load(&src, &[]).map(|s| s.engine.step_time) {
        Ok(StepTimeSpec::Roofline(r)) => *r,
        Ok(other) => panic!("expected the roofline, got {other:?}"),
        Err(e) => panic!("{:?}", e.problems),
    }
}

#[test]
fn a_table_calibrates_the_roofline_by_its_one_best_factor() {
    let dir = tempfile::tempdir().unwrap();
    let plain = roofline_of(&roofline_scenario(""), dir.path());
    // A table measured on a server 1.5 × slower than the roofline everywhere.
    let mut csv = String::from("step,batch,kv_tokens,tokens,ms\n");
    for b in [1u64, 8, 64, 256] {
        for k in [0u64, 100_000, 400_000] {
            let ms = 1.5e3 * plain.decode_breakdown(b, k).total_s;
            csv += &format!("decode,{b},{k},,{ms:.9}\n");
        }
    }
    for t in [256u64, 2048, 8192] {
        let ms = 1.5e3 * plain.prefill_breakdown(1, t).total_s;
        csv += &format!("prefill,,,{t},{ms:.9}\n");
    }
    std::fs::write(dir.path().join("measured.csv"), &csv).unwrap();
    let cal = roofline_of(
        &roofline_scenario("calibration_table = \"measured.csv\""),
        dir.path(),
    );
    assert!((cal.scale - 1.5).abs() < 1e-6, "{}", cal.scale);
    let d = servesim::cost::StepTimeModel::describe(&cal);
    assert!(
        d.contains("calibrated ×1.500 on the 15 points of measured.csv (RMS error 0.0 %"),
        "{d}"
    );
    // Not with a calibration point as well.
    let both = roofline_scenario(
        "calibration_table = \"measured.csv\"\ncalibration = { gen_tok_per_s = 850, running = 50, kv_tokens = 104000 }",
    );
    let src = Source {
        name: "roofline.toml".into(),
        base_dir: dir.path().to_path_buf(),
        text: both,
    };
    let e = sc_mod::load(&src, &[]).unwrap_err();
    let lines: Vec<String> = e.problems.iter().map(|p| e.problem_line(p)).collect();
    assert!(
        lines
            .join("\n")
            .contains("on one log line or on a table, not both"),
        "{lines:?}"
    );
}

#[test]
fn check_names_the_table_and_its_ranges() {
    let out = Command::cargo_bin("servesim")
        .unwrap()
        .args([
            "check",
            root()
                .join("tests/fixtures/table/table.toml")
                .to_str()
                .unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("step times: table (steps.csv): decode at 4 batch sizes (1–256) × 2 KV sizes (0–200000 tokens), prefill at 3 sizes (512–8192 tokens)"),
        "{stdout}"
    );
}

/// The problems of a scenario that must be refused, one line each.
fn refused(text: &str) -> String {
    let src = Source {
        name: "t.toml".into(),
        base_dir: ".".into(),
        text: text.into(),
    };
    let e = sc_mod::load(&src, &[]).expect_err("the scenario is refused");
    let lines: Vec<String> = e.problems.iter().map(|p| e.problem_line(p)).collect();
    lines.join("\n")
}

/// An inline table of these batch sizes and decode times (KV sizes 0 and 100,000).
fn inline_table(batch: &str, decode_ms: &str) -> String {
    with_step_time(&format!(
        "[engine.step_time]\nmodel = \"table\"\ndecode_batch = {batch}\n\
         decode_kv_tokens = [0, 100000]\ndecode_ms = {decode_ms}\n\
         prefill_tokens = [512, 8192]\nprefill_ms = [21.0, 240.0]"
    ))
}

#[test]
fn an_inline_axis_needs_two_values_strictly_increasing() {
    scenario(&inline_table("[1, 8]", "[8.0, 9.0, 10.0, 11.0]"));
    for (batch, decode_ms) in [
        ("[8]", "[8.0, 9.0]"),
        ("[1, 8, 8]", "[8.0, 9.0, 10.0, 11.0, 10.0, 11.0]"),
    ] {
        let e = refused(&inline_table(batch, decode_ms));
        assert!(
            e.contains("engine.step_time.decode_batch")
                && e.contains("must hold at least two values, strictly increasing"),
            "{batch}: {e}"
        );
    }
}

#[test]
fn inline_decode_times_must_fill_the_grid_exactly() {
    // 2 batch sizes × 2 KV sizes: 4 values, not 3 and not 5.
    for decode_ms in ["[8.0, 9.0, 10.0]", "[8.0, 9.0, 10.0, 11.0, 12.0]"] {
        let e = refused(&inline_table("[1, 8]", decode_ms));
        assert!(
            e.contains("engine.step_time.decode_ms")
                && e.contains("2 batch sizes × 2 KV sizes need 4"),
            "{decode_ms}: {e}"
        );
    }
}
