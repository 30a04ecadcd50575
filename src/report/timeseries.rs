//! `timeseries.csv`: one row per time-series point.

use serde::Serialize;

use crate::csv_rows::{self, Fixed};
use crate::metrics::{RunResult, Sample};

/// One row of `timeseries.csv`; the field names are the columns (the contract's first).
#[derive(Debug, Default, Serialize)]
pub struct Row {
    /// Simulated seconds.
    pub t_s: Fixed<3>,
    /// Requests admitted and not finished.
    pub running: u64,
    /// Requests in the server's queue.
    pub queued: u64,
    /// KV slots in use.
    pub kv_used_tokens: u64,
    /// `kv_used_tokens / capacity`.
    pub token_usage: Fixed<4>,
    /// The latest Decode log line's gen throughput.
    pub gen_tok_per_s: Fixed<2>,
    /// Responses received so far.
    pub completed: u64,
    /// `completed / t`.
    pub lifetime_req_per_s: Fixed<6>,
    /// Completions in the last window, per second.
    pub window_req_per_s: Fixed<6>,
    /// Requests sent and not answered.
    pub in_flight: u64,
    /// Output tokens generated so far.
    pub generated_tokens: u64,
}

impl From<&Sample> for Row {
    fn from(s: &Sample) -> Self {
        Row {
            t_s: Fixed(s.t_s),
            running: s.running,
            queued: s.queued,
            kv_used_tokens: s.kv_used_tokens,
            token_usage: Fixed(s.token_usage),
            gen_tok_per_s: Fixed(s.gen_tok_per_s),
            completed: s.completed,
            lifetime_req_per_s: Fixed(s.lifetime_req_per_s),
            window_req_per_s: Fixed(s.window_req_per_s),
            in_flight: s.in_flight,
            generated_tokens: s.generated_tokens,
        }
    }
}

/// The time series as CSV bytes: the points on the scenario's `run.timeseries_interval_s`
/// grid and the end of the run.
pub fn to_csv(r: &RunResult) -> Vec<u8> {
    csv_rows::rows_to_bytes(r.output_samples().iter().map(Row::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_are_the_documented_ones() {
        assert_eq!(
            csv_rows::header::<Row>().join(","),
            "t_s,running,queued,kv_used_tokens,token_usage,gen_tok_per_s,completed,lifetime_req_per_s,window_req_per_s,in_flight,generated_tokens"
        );
    }
}
