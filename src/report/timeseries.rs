//! `timeseries.csv`: one row per time-series point.

use crate::metrics::RunResult;

/// The CSV columns, in order (the contract's columns first).
pub const COLUMNS: &[&str] = &[
    "t_s",
    "running",
    "queued",
    "kv_used_tokens",
    "token_usage",
    "gen_tok_per_s",
    "completed",
    "lifetime_req_per_s",
    "window_req_per_s",
    "in_flight",
    "generated_tokens",
];

/// The time series as CSV bytes.
pub fn to_csv(r: &RunResult) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(COLUMNS)
        .expect("invariant: writing to memory cannot fail");
    for s in &r.samples {
        w.write_record([
            format!("{:.3}", s.t_s),
            s.running.to_string(),
            s.queued.to_string(),
            s.kv_used_tokens.to_string(),
            format!("{:.4}", s.token_usage),
            format!("{:.2}", s.gen_tok_per_s),
            s.completed.to_string(),
            format!("{:.6}", s.lifetime_req_per_s),
            format!("{:.6}", s.window_req_per_s),
            s.in_flight.to_string(),
            s.generated_tokens.to_string(),
        ])
        .expect("invariant: writing to memory cannot fail");
    }
    w.into_inner()
        .expect("invariant: flushing memory cannot fail")
}
