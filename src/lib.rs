//! servesim: a discrete-event simulator of batched LLM serving.
//!
//! # Reading guide
//!
//! Read these three files first:
//!
//! 1. [`engine`] — the event loop and the one owner of all mutable state.
//! 2. [`scheduler::sglang`] — SGLang's admission, chunked prefill, retraction and logging, each
//!    rule citing the SGLang source file it follows; [`scheduler::vllm`] is vLLM's V1 scheduler
//!    (token budget, blocks, preemption, async scheduling) in the same form.
//! 3. [`analysis`] — how the steady state, its confidence interval and the convergence of the
//!    lifetime average are derived from a run.
//!
//! # Concepts
//!
//! * Simulated time is integer nanoseconds ([`time`]); seconds appear only at the edges.
//! * A scenario ([`scenario`]) is read in two layers: a TOML tree that remembers positions, then
//!   a validated [`scenario::Scenario`]; every problem is reported at once. Each section declares
//!   its keys beside the type it builds, in the language of [`settings`].
//! * Randomness comes from named streams derived from the scenario's seed ([`rng`]).
//! * The client ([`workload::client`]) decides when requests are sent; the scheduler decides
//!   what the GPU runs; the step-time model ([`cost`]) decides how long it takes; the KV pool
//!   ([`kv`]) bounds what fits.
//! * The recorder ([`metrics`]) turns the run into plain data; [`analysis`] and [`report`] are
//!   pure functions of that data.
//! * Three views of one run: the server's log (`gen throughput`, running, queued, token usage),
//!   the client's lifetime average, and the client's windowed rate — plus the steady state.

#![warn(missing_docs)]

pub mod analysis;
pub mod calibrate;
pub mod catalog;
pub mod cli;
pub mod compare;
pub mod cost;
pub mod csv_rows;
pub mod diagnostic;
pub mod engine;
pub mod files;
pub mod kv;
pub mod memory;
pub mod metrics;
pub mod plan;
pub mod report;
pub mod request;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod scheduler;
pub mod settings;
pub mod sweep;
pub mod time;
pub mod workload;
