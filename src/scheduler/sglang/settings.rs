//! SGLang's section of `[engine]`: its flags and environment variables, with SGLang 0.5.23's
//! defaults (`server_args.py`) and its request limits (`managers/scheduler.py`).

use crate::memory::need::sglang_max_running_requests;
use crate::memory::{sglang_memory_bucket, HardwareSpec, ModelSpec, PoolSettings};
use crate::settings::{keys, Bad, Values, When};
use crate::workload::dist::MAX_TOKENS_PER_REQUEST as MAX_TOKENS;
use crate::workload::WorkloadSpec;

const SGLANG: When = When::Engine(&["sglang"], "SGLang");

keys! {
/// SGLang's keys in `[engine]`.
KEYS:
"engine.page_size" [Integer(1, 4096), Int(1), SGLANG, "tokens"]
    "KV page size (64 for MLA models on B200)", e.g. "1";
"engine.max_running_requests" [Integer(1, 1 << 24), Derived("4096, or SGLang's estimate from model.context_len"), SGLANG, ""]
    "the most requests running at once; capped at half the pool, as SGLang does", e.g. "4096";
"engine.chunked_prefill_size" [IntegerOrOff(1, 1 << 24), Derived("SGLang's default for the GPU's memory (8192 without a GPU)"), SGLANG, "tokens"]
    "tokens per prefill chunk, or -1 to disable chunking", e.g. "8192";
"engine.max_prefill_tokens" [Integer(1, 1 << 24), Int(16384), SGLANG, "tokens"]
    "token budget of one prefill batch", e.g. "16384";
"engine.schedule_policy" [OneOf(&["fcfs", "lof", "random", "lpm", "dfs-weight"]), Word("fcfs"), SGLANG, ""]
    "the waiting queue's order: arrival, longest output first, shuffled, longest cached prefix first, or a walk of the radix tree weighted by waiting requests (the last two order like fcfs with the radix cache disabled)", e.g. r#""lpm""#;
"engine.decode_log_interval" [Integer(1, 1 << 20), Int(40), SGLANG, ""]
    "decode steps between `Decode batch` log lines", e.g. "40";
"engine.init_new_token_ratio" [Number(Fraction), Num(0.7), SGLANG, ""]
    "SGLANG_INIT_NEW_TOKEN_RATIO: the admission estimate's first ratio", e.g. "0.7";
"engine.min_new_token_ratio_factor" [Number(Fraction), Num(0.14), SGLANG, ""]
    "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR: the ratio's floor is init × factor", e.g. "0.14";
"engine.new_token_ratio_decay_steps" [Integer(1, 1 << 30), Int(600), SGLANG, ""]
    "SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS: decode steps from init to the floor", e.g. "600";
"engine.clip_max_new_tokens" [Integer(1, MAX_TOKENS as u64), Int(4096), SGLANG, "tokens"]
    "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION", e.g. "4096";
"engine.cuda_graph_max_bs" [Integer(0, 1 << 20), Derived("SGLang's default for the GPU (256 without a GPU)"), SGLANG, ""]
    "largest decode batch replayed as a CUDA graph (the log's `cuda graph` field, and the memory heuristic)", e.g. "512";
"engine.disable_radix_cache" [Bool, Flag(false), SGLANG, ""]
    "--disable-radix-cache: no prefix cache (the workload's shared prefixes are prefilled every time); ignore_eos requests are then admitted by add_one_req_ignore_eos", e.g. "true";
"engine.disable_overlap_schedule" [Bool, Flag(false), SGLANG, ""]
    "--disable-overlap-schedule: the step-by-step event loop, each batch decided after the previous result (by default the next batch is decided while one runs)", e.g. "true";
"engine.enable_mixed_chunk" [Bool, Flag(false), SGLANG, ""]
    "--enable-mixed-chunk: the running requests decode inside prefill batches", e.g. "true";
"engine.schedule_conservativeness" [Number(Positive), Num(1.0), SGLANG, ""]
    "--schedule-conservativeness: the first new_token_ratio is min(init_new_token_ratio × it, 1)", e.g. "1.3";
}

/// Values of `engine.schedule_policy` that name something servesim does not model:
/// `(path, values, hint)`.
pub const NOT_MODELLED: &[(&str, &[&str], &str)] = &[
    ("engine.schedule_policy", &["priority", "hrrn", "routing-key", "shortest-prefill-first"], "an SGLang policy servesim does not model yet; modelled: \"fcfs\", \"lof\", \"random\", \"lpm\", \"dfs-weight\""),
];

/// How the waiting queue is ordered before each admission pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulePolicy {
    /// Arrival order (retracted requests rejoin at the end).
    Fcfs,
    /// Longest `max_new_tokens` first (stable).
    Lof,
    /// A fresh shuffle every pass.
    Random,
    /// Longest cached prefix first (`lpm`; FCFS above 128 waiting requests or without the cache).
    Lpm,
    /// A depth-first walk of the radix tree, heavier subtrees first (`dfs-weight`).
    DfsWeight,
}

impl SchedulePolicy {
    /// The name as written in scenarios and in SGLang's `--schedule-policy`.
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulePolicy::Fcfs => "fcfs",
            SchedulePolicy::Lof => "lof",
            SchedulePolicy::Random => "random",
            SchedulePolicy::Lpm => "lpm",
            SchedulePolicy::DfsWeight => "dfs-weight",
        }
    }
}

/// SGLang's `new_token_ratio` parameters (environment variables in SGLang).
#[derive(Clone, Debug, PartialEq)]
pub struct NewTokenRatioSpec {
    /// `SGLANG_INIT_NEW_TOKEN_RATIO` (0.7).
    pub init: f64,
    /// `SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR` (0.14): the floor is `init × factor`.
    pub min_factor: f64,
    /// `SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS` (600): decode steps from init to the floor.
    pub decay_steps: u32,
    /// `SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION` (4096).
    pub clip_max_new_tokens: u32,
}

/// SGLang's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SglangSettings {
    /// `--page-size`.
    pub page_size: u32,
    /// `--max-running-requests` (after SGLang's own cap to half the pool).
    pub max_running_requests: u32,
    /// `--chunked-prefill-size`; `None` when chunking is disabled (`-1`).
    pub chunked_prefill_size: Option<u32>,
    /// `--max-prefill-tokens`.
    pub max_prefill_tokens: u32,
    /// `--schedule-policy`.
    pub schedule_policy: SchedulePolicy,
    /// `--decode-log-interval`.
    pub decode_log_interval: u32,
    /// The admission estimate's parameters.
    pub new_token_ratio: NewTokenRatioSpec,
    /// Largest decode batch that replays a CUDA graph (only for the log's `cuda graph` field).
    pub cuda_graph_max_bs: u32,
    /// `--disable-radix-cache`.
    pub disable_radix_cache: bool,
    /// `--disable-overlap-schedule`.
    pub disable_overlap_schedule: bool,
    /// `--enable-mixed-chunk`.
    pub enable_mixed_chunk: bool,
    /// `--schedule-conservativeness`: scales the first `new_token_ratio`.
    pub schedule_conservativeness: f64,
}

/// SGLang's memory-dependent defaults (`server_args.py`), when the GPU is known:
/// `(chunked_prefill_size, cuda_graph_max_bs)`.
fn bucket(hw: Option<&HardwareSpec>) -> Option<(u32, u32)> {
    hw.and_then(|h| {
        h.gpu_memory_mib()
            .map(|m| sglang_memory_bucket(m, h.tensor_parallel))
    })
}

fn chunk(v: &dyn Values, hw: Option<&HardwareSpec>) -> Result<Option<u32>, Bad> {
    let default = bucket(hw).map_or(8192, |b| b.0);
    Ok(v.opt("engine.chunked_prefill_size")?
        .unwrap_or(Some(default)))
}

fn graph_max_bs(v: &dyn Values, hw: Option<&HardwareSpec>) -> Result<u32, Bad> {
    let default = bucket(hw).map_or(256, |b| b.1);
    Ok(v.opt("engine.cuda_graph_max_bs")?.unwrap_or(default))
}

impl SglangSettings {
    /// What SGLang's KV pool depends on: its pages and what its memory heuristic sizes.
    pub fn pool(v: &mut dyn Values, hw: Option<&HardwareSpec>) -> Result<PoolSettings, Bad> {
        let page_size: u32 = v.get("engine.page_size")?;
        let chunk = chunk(v, hw)?;
        if let Some(c) = chunk.filter(|c| *c < page_size) {
            let msg = format!("chunked_prefill_size = {c} is smaller than page_size = {page_size}");
            let hint = "a chunk must hold at least one page";
            return Err(v.fail("engine.chunked_prefill_size", "engine", msg, hint));
        }
        let max_prefill_tokens: u32 = v.get("engine.max_prefill_tokens")?;
        Ok(PoolSettings::Sglang {
            page_size,
            activation_tokens: u64::from(chunk.unwrap_or(max_prefill_tokens)),
            graph_max_bs: graph_max_bs(v, hw)?,
            max_running_requests: v.opt("engine.max_running_requests")?,
        })
    }

    /// Read SGLang's settings for a pool of `kv_tokens`.
    pub fn read(
        v: &mut dyn Values,
        hw: Option<&HardwareSpec>,
        model: Option<&ModelSpec>,
        kv_tokens: u64,
    ) -> Result<Self, Bad> {
        // `resolve_max_num_reqs` (`mem_cache/kv_cache_configurator.py`): the user's value, or
        // the estimate from the context length, is capped at half the pool.
        let max_running_requests = sglang_max_running_requests(
            v.opt("engine.max_running_requests")?,
            kv_tokens,
            model.and_then(|m| m.context_len),
        );
        Ok(SglangSettings {
            page_size: v.get("engine.page_size")?,
            max_running_requests: max_running_requests as u32,
            chunked_prefill_size: chunk(v, hw)?,
            max_prefill_tokens: v.get("engine.max_prefill_tokens")?,
            schedule_policy: match v.get::<String>("engine.schedule_policy")?.as_str() {
                "lof" => SchedulePolicy::Lof,
                "random" => SchedulePolicy::Random,
                "lpm" => SchedulePolicy::Lpm,
                "dfs-weight" => SchedulePolicy::DfsWeight,
                _ => SchedulePolicy::Fcfs,
            },
            decode_log_interval: v.get("engine.decode_log_interval")?,
            new_token_ratio: NewTokenRatioSpec {
                init: v.get("engine.init_new_token_ratio")?,
                min_factor: v.get("engine.min_new_token_ratio_factor")?,
                decay_steps: v.get("engine.new_token_ratio_decay_steps")?,
                clip_max_new_tokens: v.get("engine.clip_max_new_tokens")?,
            },
            cuda_graph_max_bs: graph_max_bs(v, hw)?,
            disable_radix_cache: v.get("engine.disable_radix_cache")?,
            disable_overlap_schedule: v.get("engine.disable_overlap_schedule")?,
            enable_mixed_chunk: v.get("engine.enable_mixed_chunk")?,
            schedule_conservativeness: v.get("engine.schedule_conservativeness")?,
        })
    }

    /// SGLang refuses prompts of `max_req_len − 5` tokens or more (`managers/scheduler.py`). If
    /// every prompt would be refused there is nothing to simulate: say so before running.
    /// (When only some are, the run refuses and counts them, as SGLang does.)
    pub fn check_workload(
        &self,
        v: &mut dyn Values,
        kv_tokens: u64,
        context_len: Option<u64>,
        workload: &WorkloadSpec,
    ) -> Result<(), Bad> {
        let pool = kv_tokens;
        let max_req_len = context_len.map_or(pool - 1, |c| (c - 1).min(pool - 1));
        let max_input = max_req_len.saturating_sub(5);
        let smallest = u64::from(workload.smallest_prompt());
        if smallest < max_input {
            return Ok(());
        }
        let msg = format!(
            "every prompt has at least {smallest} tokens, but SGLang refuses prompts of {max_input} tokens or more \
             (max_req_len − 5, with max_req_len = min(context_len − 1, KV pool − 1) = {max_req_len}): every request would be refused"
        );
        let hint =
            "shorten the prompts, or raise engine.kv_capacity_tokens (or the memory that derives it)";
        let at = workload.prompts_key();
        Err(v.fail(at, at, msg, hint))
    }
}
