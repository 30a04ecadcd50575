//! What a run stopped by `run.max_sim_s` does at the bound.

use servesim::engine::{self, RunOptions};
use servesim::metrics::RunResult;
use servesim::scenario::{self, Source};

/// Run `toml` (with `trace.csv` holding `trace`) keeping its log.
fn run_with_trace(toml: &str, trace: &str) -> RunResult {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    let src = Source {
        name: "bounds.toml".into(),
        base_dir: dir.path().to_path_buf(),
        text: toml.into(),
    };
    let sc = scenario::load(&src, &[]).unwrap_or_else(|e| panic!("{:?}", e.problems));
    engine::run(
        &sc,
        &RunOptions {
            keep_log: true,
            ..RunOptions::default()
        },
    )
    .expect("the run stops at its bound")
}

/// vLLM prints its stats line every 10 s on its own clock, idle or not. Request 0 is answered
/// within half a second; request 1 comes at 30 s, after the 15 s bound: the line due at 10 s
/// is printed, the one due at 20 s is not (the run has stopped by then).
#[test]
fn no_vllm_stats_line_is_printed_after_max_sim_s() {
    let toml = "name = \"bound\"\n[run]\nmax_sim_s = 15\n[engine]\nkind = \"vllm\"\nnum_gpu_blocks_override = 1000\nblock_size = 16\n[engine.step_time]\ndecode_base_ms = 10.0\nprefill_per_token_us = 20.0\n[workload]\ntrace = \"trace.csv\"\n[client]\nmode = \"trace\"\n";
    let r = run_with_trace(
        toml,
        "prompt_tokens,output_tokens,arrival_s\n100,20,0.0\n100,20,30.0\n",
    );
    let at_s: Vec<f64> = r.log.iter().map(|l| l.at().as_secs_f64()).collect();
    assert!(at_s.iter().all(|&t| t <= 15.0), "{at_s:?}");
    assert!(at_s.contains(&10.0), "{at_s:?}");
}
