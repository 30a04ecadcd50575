//! vLLM's section of `[engine]`: its flags, with vLLM 0.33's defaults (`engine/arg_utils.py:
//! get_batch_defaults`, `config/scheduler.py`, `config/cache.py`; `engine-semantics.md` §4).

use serde::Serialize;

use crate::memory::{HardwareSpec, ModelSpec, PoolSettings};
use crate::settings::{keys, Bad, Values, When};

const VLLM: When = When::Engine(&["vllm"], "vLLM");
/// vLLM's default block size for most attention backends (`config/cache.py`).
pub const DEFAULT_BLOCK_SIZE: u32 = 16;

keys! {
/// vLLM's keys in `[engine]`.
KEYS:
"engine.max_num_seqs" [Integer(1, 1 << 24), Derived("vLLM 0.33's for the GPU: 1024 with 70 GiB or more, else 256 (without a GPU: 1024, as on an H100)"), VLLM, ""]
    "--max-num-seqs: the most requests running at once", e.g. "256";
"engine.max_num_batched_tokens" [Integer(1, 1 << 24), Derived("vLLM 0.33's for the GPU: 16384 with 160 GiB or more, 8192 with 70 GiB or more but not an A100, else 2048 (without a GPU: 8192, as on an H100); with chunked prefill off, at least max_model_len"), VLLM, "tokens"]
    "--max-num-batched-tokens: the token budget of one step", e.g. "8192";
"engine.enable_chunked_prefill" [Bool, Flag(true), VLLM, ""]
    "--enable-chunked-prefill: prompts are computed in chunks within the step's token budget, beside the decodes", e.g. "false";
"engine.long_prefill_token_threshold" [Integer(0, 1 << 24), Int(0), VLLM, "tokens"]
    "--long-prefill-token-threshold: the most prompt tokens one request computes in a step (0: no cap)", e.g. "2048";
"engine.block_size" [Integer(1, 4096), Int(DEFAULT_BLOCK_SIZE as u64), VLLM, "tokens"]
    "vLLM's KV block size", e.g. "16";
"engine.num_gpu_blocks_override" [Integer(2, 1 << 40), Absent("none: the blocks come from memory"), VLLM, ""]
    "--num-gpu-blocks-override: KV blocks in all, vLLM's null block 0 included, so the pool holds (n − 1) × block_size tokens", e.g. "7262";
"engine.async_scheduling" [Bool, Flag(true), VLLM, ""]
    "--async-scheduling: step k + 1 is scheduled before step k's output is processed", e.g. "false";
"engine.scheduler_reserve_full_isl" [Bool, Flag(true), VLLM, ""]
    "admit a waiting request only if blocks for its whole known sequence are free", e.g. "false";
"engine.max_model_len" [Integer(1, 1 << 31), Derived("model.context_len (without one: no limit)"), VLLM, "tokens"]
    "--max-model-len: the longest request, prompt and output", e.g. "32768";
"engine.enable_prefix_caching" [Bool, Flag(true), VLLM, ""]
    "--enable-prefix-caching: reuse the KV of full blocks still cached: shared prefixes, and a preempted request's own blocks not yet reused", e.g. "false";
}

/// vLLM's settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VllmSettings {
    /// `--max-num-seqs`.
    pub max_num_seqs: u32,
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: u32,
    /// `--enable-chunked-prefill`.
    pub enable_chunked_prefill: bool,
    /// `--long-prefill-token-threshold` (0: no cap).
    pub long_prefill_token_threshold: u32,
    /// `--block-size`.
    pub block_size: u32,
    /// `--num-gpu-blocks-override`: total blocks, the null block included.
    pub num_gpu_blocks_override: Option<u64>,
    /// `--async-scheduling`.
    pub async_scheduling: bool,
    /// `scheduler_reserve_full_isl`.
    pub scheduler_reserve_full_isl: bool,
    /// `--max-model-len`; `None`: no limit (no model in the scenario).
    pub max_model_len: Option<u64>,
    /// `--enable-prefix-caching`.
    pub enable_prefix_caching: bool,
}

/// `get_batch_defaults` for `vllm serve` (the API server): `(max_num_seqs,
/// max_num_batched_tokens)` for the scenario's GPU; without one, an H100's.
fn batch_defaults(hw: Option<&HardwareSpec>) -> (u32, u32) {
    let Some(mib) = hw.and_then(HardwareSpec::gpu_memory_mib) else {
        return (1024, 8192);
    };
    let a100 = hw.and_then(|h| h.gpu_entry.as_ref()).is_some_and(|g| {
        (g.name.clone() + &g.display)
            .to_lowercase()
            .contains("a100")
    });
    match mib {
        m if m >= 160 * 1024 => (1024, 16384),
        m if m >= 70 * 1024 && !a100 => (1024, 8192),
        _ => (256, 2048),
    }
}

/// `(max_num_seqs, max_num_batched_tokens)`: given, or vLLM's defaults for the GPU.
fn batch_limits(
    v: &dyn Values,
    hw: Option<&HardwareSpec>,
    max_model_len: Option<u64>,
) -> Result<(u32, u32), Bad> {
    let (seqs, tokens) = batch_defaults(hw);
    // Without chunked prefill a whole prompt must fit in one step's budget.
    let default_tokens = match (
        v.get::<bool>("engine.enable_chunked_prefill")?,
        max_model_len,
    ) {
        (false, Some(len)) => u64::from(tokens).max(len) as u32,
        _ => tokens,
    };
    Ok((
        v.opt("engine.max_num_seqs")?.unwrap_or(seqs),
        v.opt("engine.max_num_batched_tokens")?
            .unwrap_or(default_tokens),
    ))
}

fn max_model_len(v: &dyn Values, model: Option<&ModelSpec>) -> Result<Option<u64>, Bad> {
    Ok(v.opt("engine.max_model_len")?
        .or(model.and_then(|m| m.context_len)))
}

impl VllmSettings {
    /// What vLLM's KV pool depends on: its blocks, and the batch limits its profiling run and
    /// CUDA graphs are sized by.
    pub fn pool(
        v: &mut dyn Values,
        hw: Option<&HardwareSpec>,
        model: Option<&ModelSpec>,
    ) -> Result<PoolSettings, Bad> {
        let (max_num_seqs, max_num_batched_tokens) = batch_limits(v, hw, max_model_len(v, model)?)?;
        Ok(PoolSettings::Vllm {
            block_size: v.get("engine.block_size")?,
            num_gpu_blocks_override: v.opt("engine.num_gpu_blocks_override")?,
            max_num_seqs,
            max_num_batched_tokens,
        })
    }

    /// Read vLLM's settings.
    pub fn read(
        v: &mut dyn Values,
        hw: Option<&HardwareSpec>,
        model: Option<&ModelSpec>,
    ) -> Result<Self, Bad> {
        let enable_chunked_prefill = v.get("engine.enable_chunked_prefill")?;
        let max_model_len = max_model_len(v, model)?;
        let (max_num_seqs, max_num_batched_tokens) = batch_limits(v, hw, max_model_len)?;
        Ok(VllmSettings {
            max_num_seqs,
            max_num_batched_tokens,
            enable_chunked_prefill,
            long_prefill_token_threshold: v.get("engine.long_prefill_token_threshold")?,
            block_size: v.get("engine.block_size")?,
            num_gpu_blocks_override: v.opt("engine.num_gpu_blocks_override")?,
            async_scheduling: v.get("engine.async_scheduling")?,
            scheduler_reserve_full_isl: v.get("engine.scheduler_reserve_full_isl")?,
            max_model_len,
            enable_prefix_caching: v.get("engine.enable_prefix_caching")?,
        })
    }
}
