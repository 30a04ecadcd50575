//! `--requests-csv`: one row per answered request.

use serde::Serialize;

use crate::csv_rows::{self, Fixed};
use crate::metrics::RequestRecord;
use crate::scheduler::Words;

/// One row of the requests CSV; the field names are the columns. Times are seconds since the
/// start with 6 decimals, durations milliseconds with 3; a refused request has no first token
/// and no queue time.
#[derive(Debug, Default, Serialize)]
pub struct Row {
    /// Send order, from 0.
    pub seq: u64,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Output tokens generated.
    pub output_tokens: u32,
    /// When it was sent.
    pub sent_s: Fixed<6>,
    /// When its first token came.
    pub first_token_s: Option<Fixed<6>>,
    /// When its response was complete.
    pub done_s: Fixed<6>,
    /// Time to first token.
    pub ttft_ms: Option<Fixed<3>>,
    /// End to end.
    pub e2e_ms: Fixed<3>,
    /// In the server's queue before its first admission.
    pub queue_ms: Option<Fixed<3>>,
    /// Waiting for a client slot before it was sent.
    pub client_wait_ms: Fixed<3>,
    /// Times evicted (retracted, preempted); the column takes the engine's word ([`header`]).
    pub retractions: u32,
    /// False if the server refused or aborted it.
    pub completed: bool,
}

/// The column a workload that shares prompt prefixes adds after [`Row`]'s: the prompt tokens
/// the request found in the prefix cache at its first admission.
pub const CACHED_COLUMN: &str = "cached_tokens";

/// The columns, in the engine's words: the evictions column is `retractions` for SGLang and
/// `preemptions` for vLLM.
pub fn header(words: Words) -> Vec<String> {
    csv_rows::header::<Row>()
        .into_iter()
        .map(|c| {
            if c == "retractions" {
                words.evictions.to_string()
            } else {
                c
            }
        })
        .collect()
}

fn secs(ns: u64) -> Fixed<6> {
    Fixed(ns as f64 / 1e9)
}

fn ms(ns: u64) -> Fixed<3> {
    Fixed(ns as f64 / 1e6)
}

impl From<&RequestRecord> for Row {
    fn from(r: &RequestRecord) -> Self {
        Row {
            seq: r.seq,
            prompt_tokens: r.prompt_tokens,
            output_tokens: r.output_tokens,
            sent_s: secs(r.sent_ns),
            first_token_s: r.first_token_ns.map(secs),
            done_s: secs(r.done_ns),
            ttft_ms: r.first_token_ns.map(|f| ms(f - r.sent_ns)),
            e2e_ms: ms(r.done_ns - r.sent_ns),
            queue_ms: r.admitted_ns.map(|a| ms(a - r.arrived_ns)),
            client_wait_ms: ms(r.sent_ns - r.ready_ns),
            retractions: r.retractions,
            completed: r.completed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_request_has_empty_first_token_and_queue_cells() {
        let r = RequestRecord {
            seq: 7,
            prompt_tokens: 10,
            output_tokens: 0,
            ready_ns: 1_000_000,
            sent_ns: 1_500_000,
            arrived_ns: 1_500_000,
            admitted_ns: None,
            first_token_ns: None,
            done_ns: 2_000_000,
            retractions: 0,
            cached_tokens: 0,
            completed: false,
        };
        let got = String::from_utf8(csv_rows::rows_to_bytes([Row::from(&r)])).unwrap();
        assert_eq!(
            got,
            "seq,prompt_tokens,output_tokens,sent_s,first_token_s,done_s,ttft_ms,e2e_ms,queue_ms,client_wait_ms,retractions,completed\n\
             7,10,0,0.001500,,0.002000,,0.500,,0.500,0,false\n"
        );
    }

    #[test]
    fn the_evictions_column_takes_the_engines_word() {
        use crate::scheduler::{words, EngineKind};
        let sglang = header(words(EngineKind::Sglang));
        let vllm = header(words(EngineKind::Vllm));
        assert_eq!(sglang, csv_rows::header::<Row>());
        assert_eq!(sglang[10], "retractions");
        assert_eq!(vllm[10], "preemptions");
    }
}
