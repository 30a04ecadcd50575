//! `--requests-csv`: one row per answered request.

use crate::metrics::RequestRecord;

/// The columns, in order.
pub const COLUMNS: &[&str] = &[
    "seq",
    "prompt_tokens",
    "output_tokens",
    "sent_s",
    "first_token_s",
    "done_s",
    "ttft_ms",
    "e2e_ms",
    "queue_ms",
    "client_wait_ms",
    "retractions",
    "completed",
];

fn secs(ns: u64) -> String {
    format!("{:.6}", ns as f64 / 1e9)
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// One row for a request.
pub fn row(r: &RequestRecord) -> Vec<String> {
    let opt = |v: Option<u64>, f: fn(u64) -> String| v.map_or(String::new(), f);
    vec![
        r.seq.to_string(),
        r.prompt_tokens.to_string(),
        r.output_tokens.to_string(),
        secs(r.sent_ns),
        opt(r.first_token_ns, secs),
        secs(r.done_ns),
        opt(r.first_token_ns.map(|f| f - r.sent_ns), ms),
        ms(r.done_ns - r.sent_ns),
        opt(r.admitted_ns.map(|a| a - r.sent_ns), ms),
        ms(r.sent_ns - r.ready_ns),
        r.retractions.to_string(),
        r.completed.to_string(),
    ]
}
