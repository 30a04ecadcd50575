//! Where step times come from (issue 13, items 1, 2 and 7): the roofline by default for a
//! catalog GPU and model, loud words for made-up ones, a calibration on the quantity a log line
//! shows, and the weights' format in both the memory model and the bytes the roofline reads.

use servesim::analysis;
use servesim::cost::roofline::Roofline;
use servesim::scenario::{self as sc_mod, Scenario, Source, StepTimeSpec};

use crate::{root, scenario};

/// Issue 13's reproduction: Llama-3.1-70B on 4 × H100 at TP 4, 200 slots, prompts lognormal
/// 1,000 cv 0.8, responses lognormal 300 cv 1.5; `step_time` is the `[engine.step_time]`
/// table, if any.
fn llama_70b(step_time: &str, extra: &str) -> String {
    format!(
        r#"
name = "Llama-3.1-70B on 4xH100 TP4, 200 slots"
seed = 1
[hardware]
gpu = "h100"
num_gpus = 4
tensor_parallel = 4
[model]
name = "llama-3.1-70b"
{extra}
[engine]
kind = "sglang"
{step_time}
[workload]
requests = 5000
prompt_tokens = {{ dist = "lognormal", mean = 1000, cv = 0.8 }}
output_tokens = {{ dist = "lognormal", mean = 300, cv = 1.5 }}
[client]
mode = "closed"
concurrency = 200
"#
    )
}

fn roofline(sc: &Scenario) -> &Roofline {
    match &sc.engine.step_time {
        StepTimeSpec::Roofline(r) => r,
        other => panic!("expected the roofline, got {other:?}"),
    }
}

fn steady_req_per_s(sc: &Scenario) -> f64 {
    analysis::analyse(&crate::run(sc))
        .steady()
        .expect("a steady state")
        .span
        .req_per_s
}

#[test]
fn a_calibration_point_from_servesims_own_run_is_a_no_op() {
    // Uncalibrated, the run's steady state is 8.033 req/s over the window that starts when
    // the start-up has cleared (8.036 over the earlier fixed-fraction window, 8.048 before
    // SGLang's overlapped loop became the default); the issue's point is 2,336.4 output tok/s at 200 running and
    // 283,310 KV tokens. Fed back as a calibration point, it used to scale every
    // step by ×3.01 (the log's gen throughput includes the prefill batches; the old
    // calibration took it for pure decode and priced prefill again on top): 2.66 req/s.
    let plain = scenario(&llama_70b("[engine.step_time]\nmodel = \"roofline\"", ""));
    let uncalibrated = steady_req_per_s(&plain);
    assert!((uncalibrated - 8.033).abs() < 0.001, "{uncalibrated}");
    let point = "calibration = { gen_tok_per_s = 2336.4, running = 200, kv_tokens = 283310 }";
    let sc = scenario(&llama_70b(
        &format!("[engine.step_time]\nmodel = \"roofline\"\n{point}"),
        "",
    ));
    let r = roofline(&sc);
    assert!((r.scale - 1.0).abs() < 0.02, "scale ×{}", r.scale);
    let calibrated = steady_req_per_s(&sc);
    assert!(
        (calibrated / uncalibrated - 1.0).abs() < 0.02,
        "{calibrated} vs {uncalibrated}"
    );
    // The old reading — 200 tokens per decode step at 2,336.4 tok/s — is ×3.01 the decode step.
    let decode_only = 200.0 / 2336.4 / (r.decode_breakdown(200, 283_310).total_s / r.scale);
    assert!((decode_only - 3.01).abs() < 0.01, "{decode_only}");
    // Half the throughput observed: every step twice as long.
    let half = scenario(&llama_70b(
        "[engine.step_time]\nmodel = \"roofline\"\ncalibration = { gen_tok_per_s = 1168.2, running = 200, kv_tokens = 283310 }",
        "",
    ));
    assert!((roofline(&half).scale / r.scale - 2.0).abs() < 1e-9);
    assert!(sc
        .engine
        .step_time
        .describe()
        .contains("calibrated ×1.008 on 2336.4 tok/s at 200 running and 283310 KV tokens"));
}

#[test]
fn a_calibration_point_without_its_kv_tokens_is_refused() {
    // The KV tokens in use used to be assumed silently (each request halfway through its
    // response); the log line has them (`#token`).
    let text = llama_70b(
        "[engine.step_time]\nmodel = \"roofline\"\ncalibration = { gen_tok_per_s = 2336.4, running = 200 }",
        "",
    );
    let src = Source {
        name: "x.toml".into(),
        base_dir: root(),
        text,
    };
    let e = sc_mod::load(&src, &[]).unwrap_err();
    assert_eq!(e.problems.len(), 1);
    let line = e.problem_line(&e.problems[0]);
    assert!(
        line.contains("engine.step_time.calibration.kv_tokens: required key is missing"),
        "{line}"
    );
    assert!(e.problems[0].hint.as_ref().unwrap().contains("#token"));
}

#[test]
fn a_catalog_gpu_and_model_without_step_times_run_on_the_roofline() {
    // Issue 13, item 2: without [engine.step_time] this scenario ran on the linear model's
    // made-up defaults (35 ms + 0.3 ms per request): 3.80 req/s instead of 8.05.
    let default = scenario(&llama_70b("", ""));
    let asked = scenario(&llama_70b("[engine.step_time]\nmodel = \"roofline\"", ""));
    let (d, a) = (roofline(&default), roofline(&asked));
    assert_eq!(
        d.decode_breakdown(200, 283_310),
        a.decode_breakdown(200, 283_310)
    );
    let rate = steady_req_per_s(&default);
    assert!((rate - 8.033).abs() < 0.001, "{rate}");
    assert_eq!(
        default.engine.step_time.source(),
        "roofline from datasheets, uncalibrated (the default for a catalog GPU and model)"
    );
    assert!(default.engine.step_time.warning().is_none());
    // The linear defaults still exist, said loudly when used.
    let linear = scenario(&llama_70b("[engine.step_time]\nmodel = \"linear\"", ""));
    assert!(matches!(
        linear.engine.step_time,
        StepTimeSpec::LinearDefaults(_)
    ));
    let rate = steady_req_per_s(&linear);
    assert!((rate - 3.80).abs() < 0.01, "{rate}");
    assert_eq!(
        linear.engine.step_time.source(),
        "linear, servesim's made-up defaults"
    );
    assert!(linear.engine.step_time.describe().contains("made-up"));
    assert!(linear
        .engine
        .step_time
        .warning()
        .unwrap()
        .contains("not measured on any hardware"));
    // Coefficients given: the linear model, as the scenario says.
    let given = scenario(&llama_70b("[engine.step_time]\ndecode_base_ms = 20", ""));
    assert!(matches!(given.engine.step_time, StepTimeSpec::Linear(_)));
    assert!(given.engine.step_time.warning().is_none());
}

fn servesim(args: &[&str]) -> (String, String) {
    let out = assert_cmd::Command::cargo_bin("servesim")
        .unwrap()
        .current_dir(root())
        .env("RUST_BACKTRACE", "0")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn made_up_step_times_are_named_in_check_the_report_and_the_summary() {
    // A GPU known by its memory only: no roofline, so servesim's linear defaults.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("s.toml");
    let text = "name = \"made up\"\n[hardware]\nmemory_mib = 81559\n[model]\nkv_bytes_per_token = 131072\nweight_gib_per_gpu = 15\ncontext_len = 131072\n[engine]\nmem_fraction_static = 0.85\n[workload]\nrequests = 100\nprompt_tokens = { dist = \"constant\", value = 100 }\noutput_tokens = { dist = \"constant\", value = 100 }\n[client]\nconcurrency = 8\n";
    std::fs::write(&f, text).unwrap();
    let f = f.to_str().unwrap();
    let made_up =
        "servesim's made-up linear defaults (35 ms + 0.3 ms per running request per decode step";
    let (stdout, _) = servesim(&["check", f]);
    assert!(
        stdout.contains("  step times: linear: decode 35.000 ms"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  warning: step times are {made_up}")),
        "{stdout}"
    );
    let (stdout, stderr) = servesim(&["run", f]);
    assert!(stdout.contains(&format!("step time linear: decode 35.000 ms + 0.3000 ms/seq + 0.0000 ns/KV token; prefill 10.000 ms + 120.000 µs/token — {made_up}")), "{stdout}");
    assert!(
        stderr.contains(&format!("warning: step times are {made_up}")),
        "{stderr}"
    );
    let (json, _) = servesim(&["run", f, "--json"]);
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        j["engine"]["step_time_source"],
        "linear, servesim's made-up defaults"
    );
    // The built-in case study gives its coefficients: no warning.
    let (stdout, _) = servesim(&["check", "scenarios/case-study-b2.toml"]);
    assert!(!stdout.contains("warning"), "{stdout}");
    let (json, _) = servesim(&[
        "run",
        "scenarios/plan-llama-3.1-70b.toml",
        "--set",
        "workload.requests=300",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        j["engine"]["step_time_source"],
        "roofline from datasheets, uncalibrated"
    );
}

#[test]
fn the_weight_format_drives_the_memory_and_the_bytes_the_roofline_reads() {
    // Issue 13, item 7: model.weight_gib_per_gpu = 16.5 grew the pool, but the roofline still
    // read BF16 weights. model.weight_dtype drives both.
    let bf16 = scenario(&llama_70b("", ""));
    let fp8 = scenario(&llama_70b("", "weight_dtype = \"fp8\""));
    let int4 = scenario(&llama_70b("", "weight_dtype = \"int4\""));
    let w = |sc: &Scenario| match &sc.memory.as_ref().unwrap().derivation {
        servesim::scenario::MemoryDerivation::Sglang(s) => s.inputs.weight_gib_per_gpu,
        _ => panic!("SGLang"),
    };
    // 70.6 B parameters over 4 GPUs: 32.85 GiB in BF16; in FP8 one byte each (plus a scale per
    // 128 × 128 block) with the BF16 embedding and LM head: 16.92 GiB; INT4 with a BF16 scale
    // per 32: 9.94 GiB.
    assert!((w(&bf16) - 32.85).abs() < 0.01, "{}", w(&bf16));
    assert!((w(&fp8) - 16.92).abs() < 0.01, "{}", w(&fp8));
    assert!((w(&int4) - 9.94).abs() < 0.01, "{}", w(&int4));
    assert!(fp8.engine.kv_capacity_tokens > bf16.engine.kv_capacity_tokens * 3 / 2);
    // The roofline reads those bytes: the weights' share of a decode step halves in FP8 and the
    // matmuls run at the H100's FP8 rate (1,979 vs 989 TFLOP/s).
    let (rb, r8, r4) = (roofline(&bf16), roofline(&fp8), roofline(&int4));
    let (b, e, q) = (
        rb.decode_breakdown(200, 283_310),
        r8.decode_breakdown(200, 283_310),
        r4.decode_breakdown(200, 283_310),
    );
    assert!(
        (e.weights_s / b.weights_s - 0.51).abs() < 0.01,
        "{}",
        e.weights_s / b.weights_s
    );
    assert!(
        (q.weights_s / b.weights_s - 0.30).abs() < 0.01,
        "{}",
        q.weights_s / b.weights_s
    );
    assert_eq!(e.kv_s, b.kv_s);
    assert!((r8.matmul_time_factor - 989.0 / 1979.0).abs() < 1e-12);
    assert_eq!(r4.matmul_time_factor, 1.0);
    assert!(steady_req_per_s(&fp8) > 1.4 * steady_req_per_s(&bf16));
    // The weights given without their format: the memory model takes them, and the note says
    // which format they fit.
    let given = scenario(&llama_70b("", "weight_gib_per_gpu = 16.5"));
    let note = given.model.as_ref().unwrap().weights_note(4).unwrap();
    assert!(
        note.contains("Llama 3.1 70B in bf16 is 32.9 GiB per GPU at TP 4")
            && note.contains("set model.weight_dtype = \"fp8\""),
        "{note}"
    );
    let agree = scenario(&llama_70b(
        "",
        "weight_dtype = \"fp8\"\nweight_gib_per_gpu = 16.5",
    ));
    assert!(agree.model.as_ref().unwrap().weights_note(4).is_none());
    // A format needs a catalog model.
    let src = Source {
        name: "x.toml".into(),
        base_dir: root(),
        text: "name = \"x\"\n[hardware]\ngpu = \"h100\"\n[model]\nkv_bytes_per_token = 1000\nweight_gib_per_gpu = 10\nweight_dtype = \"fp8\"\n[engine]\n[workload]\nrequests = 1\nprompt_tokens = { dist = \"constant\", value = 10 }\noutput_tokens = { dist = \"constant\", value = 10 }\n[client]\nconcurrency = 1\n".into(),
    };
    let e = sc_mod::load(&src, &[]).unwrap_err();
    assert!(
        e.problem_line(&e.problems[0]).contains(
            "model.weight_dtype = \"fp8\": a weight format needs the model's architecture"
        ),
        "{}",
        e.problem_line(&e.problems[0])
    );
}

#[test]
fn weights_far_from_every_other_format_get_no_format_to_switch_to() {
    // Llama 3.1 70B in bf16 is 32.9 GiB per GPU at TP 4 (the test above). 45 GiB given is
    // 37 % more (beyond the 25 % the note allows), and bf16 itself is the format closest to
    // it: no other format explains the figure, so the note asks to check it instead of
    // suggesting the format already in use.
    let sc = scenario(&llama_70b("", "weight_gib_per_gpu = 45.0"));
    let note = sc.model.as_ref().unwrap().weights_note(4).unwrap();
    assert!(
        note.contains("Llama 3.1 70B in bf16 is 32.9 GiB per GPU at TP 4")
            && note.ends_with("check the figure, or set model.weight_dtype to the served format"),
        "{note}"
    );
}
