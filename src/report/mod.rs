//! Reports: pure functions from a run (and its analysis) to text, JSON, CSV and log bytes.
//! Only the CLI writes files.

pub mod explain;
pub mod memory;
pub mod plots;
pub mod requests;
pub mod server_log;
pub mod summary;
pub mod text;
pub mod timeseries;

pub use summary::{summarize, Summary};

/// What servesim simplifies, printed with every report so nobody mistakes the model for the
/// engine.
pub const SIMPLIFICATIONS: &[&str] = &[
    "no shared prompt prefixes: the radix cache never hits, so finished requests' KV counts as free",
    "SGLang's non-overlapped event loop: scheduling takes no time and results are processed before the next batch",
    "no mixed chunks, speculative decoding, priority preemption or data-parallel attention",
    "the network and tokenizer take no time: a request arrives at the server the moment it is sent",
    "step times come from the scenario's step-time model, not from a GPU",
];
