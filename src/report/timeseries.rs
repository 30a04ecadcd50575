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

/// The columns a workload that shares prompt prefixes adds after [`Row`]'s.
#[derive(Debug, Default, Serialize)]
pub struct PrefixColumns {
    /// Prompt tokens of the requests completed so far.
    pub completed_prompt_tokens: u64,
    /// Of them, those found in the prefix cache at their first admission.
    pub completed_cached_tokens: u64,
}

/// The time series as CSV bytes: the points on the scenario's `run.timeseries_interval_s`
/// grid and the end of the run; a workload that shares prompt prefixes (`shares_prefixes`)
/// gets the [`PrefixColumns`] too.
pub fn to_csv(r: &RunResult, shares_prefixes: bool) -> Vec<u8> {
    if !shares_prefixes {
        return csv_rows::rows_to_bytes(r.output_samples().iter().map(Row::from));
    }
    let mut header = csv_rows::header::<Row>();
    header.extend(csv_rows::header::<PrefixColumns>());
    csv_rows::to_bytes(
        &header,
        r.output_samples().iter().map(|s| {
            (
                Row::from(s),
                PrefixColumns {
                    completed_prompt_tokens: s.completed_prompt_tokens,
                    completed_cached_tokens: s.completed_cached_tokens,
                },
            )
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_sharing_prefixes_adds_the_cache_columns() {
        let text = "name = \"t\"\n[engine]\nkv_capacity_tokens = 20000\n[workload]\nrequests = 30\n\
                    prompt_tokens = { dist = \"constant\", value = 100 }\n\
                    output_tokens = { dist = \"constant\", value = 20 }\n\
                    prefix_groups = { sys = { tokens = 500, share = 1.0 } }\n[client]\nconcurrency = 4\n";
        let src = crate::scenario::Source {
            name: "t.toml".into(),
            base_dir: std::path::PathBuf::from("."),
            text: text.into(),
        };
        let sc = crate::scenario::load(&src, &[]).unwrap();
        let r = crate::engine::run(&sc, &crate::engine::RunOptions::default()).unwrap();
        let plain = String::from_utf8(to_csv(&r, false)).unwrap();
        let shared = String::from_utf8(to_csv(&r, true)).unwrap();
        let (p, s) = (
            plain.lines().next().unwrap(),
            shared.lines().next().unwrap(),
        );
        assert_eq!(
            s,
            format!("{p},completed_prompt_tokens,completed_cached_tokens")
        );
        assert_eq!(plain.lines().count(), shared.lines().count());
        // By the end, every request found the prefix but the first four, sent together and
        // admitted in one prefill batch (each computes it, as in SGLang).
        let last: Vec<u64> = shared
            .lines()
            .last()
            .unwrap()
            .split(',')
            .rev()
            .take(2)
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!((last[1], last[0]), (30 * 600, 26 * 500));
    }

    #[test]
    fn the_columns_are_the_documented_ones() {
        assert_eq!(
            csv_rows::header::<Row>().join(","),
            "t_s,running,queued,kv_used_tokens,token_usage,gen_tok_per_s,completed,lifetime_req_per_s,window_req_per_s,in_flight,generated_tokens"
        );
    }
}
