//! `server.log`: the engine's log lines in SGLang's own format, with simulated timestamps, so
//! tools written for real logs read it.
//!
//! Format of SGLang 0.5.23 (`utils/common.py: configure_logger`,
//! `managers/scheduler_components/metrics_reporter.py`): `[YYYY-MM-DD HH:MM:SS TP0] message`,
//! the ` TP0` part only when tensor parallelism is above 1. Simulated time 0 is printed as
//! 2026-01-01 00:00:00.

use std::fmt::Write;

use crate::scheduler::LogRecord;
use crate::time::SimTime;

/// Days from 1970-01-01 to 2026-01-01.
const EPOCH_DAYS: i64 = 20454;

/// The log text for these records.
pub fn render(records: &[LogRecord], tensor_parallel: u32) -> String {
    let prefix = if tensor_parallel > 1 { " TP0" } else { "" };
    let mut out = String::new();
    for rec in records {
        let (at, msg) = match rec {
            LogRecord::Prefill {
                at,
                new_seq,
                new_token,
                cached_token,
                token_usage,
                running_req,
                queue_req,
                pending_token,
                input_tok_per_s,
            } => (
                *at,
                format!(
                    "Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached_token}, \
                     token usage: {token_usage:.2}, #running-req: {running_req}, #queue-req: {queue_req}, \
                     #pending-token: {pending_token}, cuda graph: False, input throughput (token/s): {input_tok_per_s:.2}"
                ),
            ),
            LogRecord::Decode {
                at,
                running_req,
                token,
                token_usage,
                cuda_graph,
                gen_tok_per_s,
                queue_req,
            } => (
                *at,
                format!(
                    "Decode batch, #running-req: {running_req}, #token: {token}, token usage: {token_usage:.2}, \
                     cuda graph: {}, gen throughput (token/s): {gen_tok_per_s:.2}, #queue-req: {queue_req}",
                    if *cuda_graph { "True" } else { "False" }
                ),
            ),
            LogRecord::Retract {
                at,
                retracted,
                new_tokens_gained,
                ratio_before,
                ratio_after,
            } => (
                *at,
                format!(
                    "KV cache pool is full. Retract requests. #retracted_reqs: {retracted}, \
                     #new_tokens_gained: {new_tokens_gained}, #new_token_ratio: {ratio_before:.4} -> {ratio_after:.4}"
                ),
            ),
        };
        let _ = writeln!(out, "[{}{prefix}] {msg}", timestamp(at));
    }
    out
}

/// `YYYY-MM-DD HH:MM:SS` for a simulated instant (whole seconds, like SGLang's default).
pub fn timestamp(at: SimTime) -> String {
    let secs = (at.as_ns() / 1_000_000_000) as i64;
    let (y, m, d) = civil_from_days(EPOCH_DAYS + secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_start_on_new_year_2026_and_roll_over() {
        assert_eq!(timestamp(SimTime::ZERO), "2026-01-01 00:00:00");
        assert_eq!(
            timestamp(SimTime::from_ns(
                86_400_000_000_000 * 59 + 3_661_000_000_000
            )),
            "2026-03-01 01:01:01"
        );
    }

    #[test]
    fn decode_line_has_sglang_fields() {
        let text = render(
            &[LogRecord::Decode {
                at: SimTime::from_ns(1_500_000_000),
                running_req: 50,
                token: 104_000,
                token_usage: 0.8952,
                cuda_graph: true,
                gen_tok_per_s: 851.234,
                queue_req: 100,
            }],
            8,
        );
        assert_eq!(
            text,
            "[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 50, #token: 104000, token usage: 0.90, \
             cuda graph: True, gen throughput (token/s): 851.23, #queue-req: 100\n"
        );
    }
}
