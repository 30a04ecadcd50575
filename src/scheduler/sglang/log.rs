//! SGLang's log lines (0.5.23, `managers/scheduler_components/metrics_reporter.py`:
//! `report_prefill_stats`, `report_decode_stats`; the retraction warning of
//! `managers/scheduler.py: update_running_batch`), rendered from engine-neutral records, and the
//! window behind the `Decode batch` line's `gen throughput`.

use super::Sglang;
use crate::scheduler::{LogRecord, ServerSample, StepKind, Words};
use crate::time::SimTime;

/// How reports speak of SGLang.
pub const WORDS: Words = Words {
    engine: "SGLang",
    eviction: "retraction",
    evictions: "retractions",
    evicted: "retracted",
    evicts: "retracts",
    latest_stats_line: "SGLang's last Decode log line",
    stats_line_in_figure: "SGLang's latest Decode log line",
    stats_lines: "Decode lines",
    kv_usage: "token usage",
    kv_usage_column: "token",
    kv_usage_axis: "KV token usage (fraction)",
    kv_usage_source: "SGLang's #token / max_total_num_tokens",
    gen_throughput: "gen throughput",
    running_at_server: "running at the server (decode batch + prefill)",
    prefill_step: "prefill batch",
    prefill_steps: "prefill batches",
    decode_step: "decode step",
    decode_steps: "decode steps",
    bench_client: "bench_serving",
    bench_client_in_figure: "sglang.bench_serving",
    slot_limit_key: "max_running_requests",
    memory_fraction: "static fraction",
    memory_fraction_sweep: "engine.mem_fraction_static=0.80:0.95:0.01",
    admission_rule: "(SGLang admits a request only if the free KV, minus a reservation for the running requests' future tokens, also holds the new request's prompt and clipped max_new_tokens: memory binds before the pool is full.)",
};

/// One record as SGLang prints it: `[YYYY-MM-DD HH:MM:SS TP0] message` (`utils/common.py:
/// configure_logger`; the ` TP0` only with tensor parallelism above 1).
pub fn log_line(rec: &LogRecord, tensor_parallel: u32) -> String {
    let w = rec.at().wall_clock();
    format!(
        "[{:04}-{:02}-{:02} {:02}:{:02}:{:02}{}] {}",
        w.year,
        w.month,
        w.day,
        w.hour,
        w.minute,
        w.second,
        if tensor_parallel > 1 { " TP0" } else { "" },
        message(rec)
    )
}

/// The message of one record.
fn message(rec: &LogRecord) -> String {
    match rec {
        LogRecord::Batch(s) => format!(
            "Prefill batch, #new-seq: {}, #new-token: {}, #cached-token: {}, token usage: {:.2}, \
             #running-req: {}, #queue-req: {}, #pending-token: {}, cuda graph: {}, \
             input throughput (token/s): {:.2}",
            s.new_seqs,
            s.new_tokens,
            s.cached_tokens,
            s.token_usage(),
            s.running,
            s.queued,
            s.pending_tokens,
            python_bool(s.cuda_graph),
            s.input_tok_per_s
        ),
        LogRecord::Stats(s) => format!(
            "Decode batch, #running-req: {}, #token: {}, token usage: {:.2}, cuda graph: {}, \
             gen throughput (token/s): {:.2}, #queue-req: {}",
            s.running,
            s.kv_used_tokens,
            s.token_usage(),
            python_bool(s.cuda_graph),
            s.gen_tok_per_s,
            s.queued
        ),
        LogRecord::Evict(e) => format!(
            "KV cache pool is full. Retract requests. #retracted_reqs: {}, #new_tokens_gained: {}, \
             #new_token_ratio: {:.4} -> {:.4}",
            e.requests, e.tokens_freed, e.ratio_before, e.ratio_after
        ),
        // Records SGLang's model does not produce.
        LogRecord::Interval(_) | LogRecord::KvCache(_) => String::new(),
    }
}

fn python_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

impl Sglang {
    /// Print the `Prefill batch` line of a batch whose result is processed now
    /// (`report_prefill_stats`): the token usage after its allocation and releases, and the
    /// input throughput since the previous prefill line (the first since the start).
    pub(super) fn log_prefill(
        &mut self,
        now: SimTime,
        log: Option<Box<ServerSample>>,
        out: &mut crate::scheduler::Outbox,
    ) {
        let Some(mut s) = log else {
            return;
        };
        let dt = now.saturating_since(self.last_prefill_log_at).as_secs_f64();
        s.at = now;
        s.queued = self.queue_at_launch;
        s.kv_used_tokens = self.kv.used_tokens();
        s.input_tok_per_s = if dt > 0.0 {
            s.new_tokens as f64 / dt
        } else {
            0.0
        };
        self.last_prefill_log_at = now;
        out.log.push(LogRecord::Batch(*s));
    }

    /// Append a `Decode batch` record for the decode step that ends at `at` with `batch` running
    /// requests and `kv_used_tokens` in use, and restart the throughput window: `gen throughput`
    /// is the decode tokens since the previous Decode line over the time since it
    /// (`report_decode_stats`), so it includes the prefill batches in between.
    pub(super) fn log_decode(
        &mut self,
        log: &mut Vec<LogRecord>,
        at: SimTime,
        batch: u64,
        kv_used_tokens: u64,
    ) {
        let dt = at.saturating_since(self.last_decode_log_at).as_secs_f64();
        log.push(LogRecord::Stats(ServerSample {
            at,
            kind: StepKind::Decode,
            running: batch,
            queued: self.queue_at_launch,
            kv_used_tokens,
            kv_capacity_tokens: self.kv.capacity_tokens(),
            new_seqs: 0,
            new_tokens: 0,
            cached_tokens: 0,
            pending_tokens: 0,
            gen_tok_per_s: if dt > 0.0 {
                self.decode_tokens_since_log as f64 / dt
            } else {
                0.0
            },
            input_tok_per_s: 0.0,
            cuda_graph: batch <= self.p.graph_max_bs,
        }));
        self.decode_tokens_since_log = 0;
        self.last_decode_log_at = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_line_has_sglang_fields() {
        let line = log_line(
            &LogRecord::Stats(ServerSample {
                at: SimTime::from_ns(1_500_000_000),
                kind: StepKind::Decode,
                running: 50,
                queued: 100,
                kv_used_tokens: 104_000,
                kv_capacity_tokens: 116_171,
                new_seqs: 0,
                new_tokens: 0,
                cached_tokens: 0,
                pending_tokens: 0,
                gen_tok_per_s: 851.234,
                input_tok_per_s: 0.0,
                cuda_graph: true,
            }),
            8,
        );
        assert_eq!(
            line,
            "[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 50, #token: 104000, token usage: 0.90, cuda graph: True, \
             gen throughput (token/s): 851.23, #queue-req: 100"
        );
    }
}
