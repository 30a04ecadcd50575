//! What a run stopped by `run.max_sim_s` does at the bound.

use crate::run_with_trace;

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

/// A stats line due exactly at `run.max_sim_s` is printed (the bound is inclusive): with the
/// bound at 20 s, the lines due at 10 and 20 s are.
#[test]
fn a_vllm_stats_line_due_exactly_at_max_sim_s_is_printed() {
    let toml = "name = \"bound\"\n[run]\nmax_sim_s = 20\n[engine]\nkind = \"vllm\"\nnum_gpu_blocks_override = 1000\nblock_size = 16\n[engine.step_time]\ndecode_base_ms = 10.0\nprefill_per_token_us = 20.0\n[workload]\ntrace = \"trace.csv\"\n[client]\nmode = \"trace\"\n";
    let r = run_with_trace(
        toml,
        "prompt_tokens,output_tokens,arrival_s\n100,20,0.0\n100,20,30.0\n",
    );
    let at_s: Vec<f64> = r.log.iter().map(|l| l.at().as_secs_f64()).collect();
    assert!(at_s.contains(&10.0) && at_s.contains(&20.0), "{at_s:?}");
    assert!(at_s.iter().all(|&t| t <= 20.0), "{at_s:?}");
}

/// The bound is inclusive: what happens at `run.max_sim_s` exactly is simulated, as the stats
/// lines due then are printed. Request 0 is answered at some instant T (read from a run without
/// the bound); with `max_sim_s = T` it is answered, and with the bound 1 ns earlier it is not.
#[test]
fn a_request_answered_exactly_at_max_sim_s_is_answered() {
    let toml = |bound: &str| {
        format!(
            "name = \"bound\"\n{bound}[engine]\nkv_capacity_tokens = 10000\npage_size = 1\n[engine.step_time]\ndecode_base_ms = 10.0\nprefill_per_token_us = 20.0\n[workload]\ntrace = \"trace.csv\"\n[client]\nmode = \"trace\"\n"
        )
    };
    let trace = "prompt_tokens,output_tokens,arrival_s\n100,20,0.0\n100,20,30.0\n";
    let free = run_with_trace(&toml(""), trace);
    let done_ns = free.requests[0].done_ns;
    assert!(done_ns < 30_000_000_000, "{done_ns}");
    let at = |ns: u64| {
        let r = run_with_trace(
            &toml(&format!("[run]\nmax_sim_s = {:e}\n", ns as f64 / 1e9)),
            trace,
        );
        (r.totals.requests_completed, r.stop)
    };
    assert_eq!(at(done_ns), (1, servesim::metrics::StopReason::MaxSimTime));
    assert_eq!(at(done_ns - 1).0, 0);
}

/// A request arriving exactly at `run.max_sim_s` is sent; one arriving 1 µs later is not.
#[test]
fn a_request_arriving_exactly_at_max_sim_s_is_sent() {
    let toml = "name = \"bound\"\n[run]\nmax_sim_s = 15\n[engine]\nkv_capacity_tokens = 10000\npage_size = 1\n[engine.step_time]\ndecode_base_ms = 10.0\nprefill_per_token_us = 20.0\n[workload]\ntrace = \"trace.csv\"\n[client]\nmode = \"trace\"\n";
    let sent = |trace: &str| run_with_trace(toml, trace).totals.requests_sent;
    assert_eq!(
        sent("prompt_tokens,output_tokens,arrival_s\n100,20,0.0\n100,20,15.0\n"),
        2
    );
    assert_eq!(
        sent("prompt_tokens,output_tokens,arrival_s\n100,20,0.0\n100,20,15.000001\n"),
        1
    );
}
