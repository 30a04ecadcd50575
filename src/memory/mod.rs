//! The KV budget: given, or derived from GPU memory term by term, with the out-of-memory
//! verdict — and the `[hardware]` and `[model]` sections and `[engine]`'s memory keys it reads.
//!
//! Files: [`hardware`] reads `[hardware]` and `[model]`; [`resolve`] the memory keys of
//! `[engine]`, where each term of the derivation comes from, and the KV budget; [`sglang`] and
//! [`vllm`] each engine's derivation; [`need`] what the engines allocate besides weights and
//! KV, from the model's shapes.
//!
//! # SGLang (`shared/spec/engine-semantics.md` §1)
//!
//! SGLang measures the free memory per GPU after the CUDA context and NCCL are up and before the
//! weights load (`M_pre`, `distributed/bootstrap.py: measure_pre_model_load_memory`), loads the
//! weights (`W` per GPU), and gives the KV pool what is left of the static fraction
//! (`mem_cache/kv_cache_configurator.py: KVCacheConfigurator._profile_available_bytes`):
//!
//! ```text
//! rest   = (M_pre − W) − M_pre · (1 − mem_fraction_static) = M_pre · f − W
//! tokens = floor(floor(rest · 2^30) / cell / page) · page      (pool_configurator.py)
//! ```
//!
//! The rest of the GPU, `(1 − f) · M_pre`, is the slack that must hold what SGLang allocates
//! outside the static pool: activations of the largest prefill chunk or eager decode batch,
//! CUDA graphs, the logits buffer, the request-to-token table. SGLang does not measure it: it
//! guesses it, ignoring the model, when it picks the default fraction
//! (`arg_groups/memory_hook.py: handle_gpu_memory_settings`). servesim derives it from the
//! model and the settings, term by term ([`need`]), and calls a fraction `oom` when the slack
//! is smaller. Raising `f` by Δ adds `Δ · M_pre` to the pool and takes the same amount from the
//! slack — which is why 0.85 → 0.95 is not "+12 %".
//!
//! # vLLM (§4.1–4.2)
//!
//! vLLM budgets a fraction of the **total** memory and measures what else is used
//! (`v1/worker/gpu_worker.py: Worker.determine_available_memory`):
//!
//! ```text
//! kv     = ceil(total · gpu_memory_utilization) − weights − non-torch − activation peak − CUDA graphs
//! blocks = floor(kv / (cell · block_size)),  tokens = blocks · block_size
//! ```

pub mod hardware;
pub mod need;
pub mod resolve;
pub mod sglang;
pub mod vllm;

use serde::Serialize;

pub use hardware::{HardwareSpec, ModelSpec};
pub use need::{prompts_fit, ClientLoad, ForwardShapes, SglangNeed, SlackTerms};
pub use resolve::{
    EngineSources, KvCacheDtype, KvSource, MemorySources, PoolSettings, SglangSources, Source,
    VllmSources,
};
pub use sglang::{
    sglang_default_fraction, sglang_memory_bucket, HeuristicReserve, SglangInputs, SglangMemory,
    SlackNeed, Verdict,
};
pub use vllm::{VllmInputs, VllmMemory};

/// Bytes per GiB.
pub const GIB: f64 = 1_073_741_824.0;
/// MiB per GiB.
const MIB_PER_GIB: f64 = 1024.0;

/// The KV budget derived from memory, with where each term came from.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryModel {
    /// The GPU, as shown in reports.
    pub gpu: String,
    /// The model, as shown in reports.
    pub model: String,
    /// Tensor parallelism.
    pub tensor_parallel: u32,
    /// The derivation.
    pub derivation: MemoryDerivation,
    /// Where each term came from; its engine terms are those of `derivation`'s engine.
    pub sources: MemorySources,
}

/// The engine-specific derivation.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "engine", rename_all = "snake_case")]
pub enum MemoryDerivation {
    /// SGLang's static-fraction rule.
    Sglang(SglangMemory),
    /// vLLM's utilisation rule.
    Vllm(VllmMemory),
}

impl MemoryModel {
    /// The KV pool in tokens as the engine reports it at start-up (SGLang's
    /// `max_total_num_tokens`, vLLM's "GPU KV cache size": every block, the null block
    /// included).
    pub fn kv_tokens(&self) -> u64 {
        match &self.derivation {
            MemoryDerivation::Sglang(m) => m.max_total_num_tokens,
            MemoryDerivation::Vllm(m) => m.kv_tokens,
        }
    }

    /// The out-of-memory verdict (SGLang only).
    pub fn verdict(&self) -> Option<Verdict> {
        match &self.derivation {
            MemoryDerivation::Sglang(m) => Some(m.verdict),
            MemoryDerivation::Vllm(_) => None,
        }
    }

    /// A warning when the memory settings are predicted to run out of memory (SGLang: the
    /// slack is smaller than what must live in it), naming the largest term and the fraction
    /// that would fit.
    pub fn oom_warning(&self) -> Option<String> {
        let MemoryDerivation::Sglang(m) = &self.derivation else {
            return None;
        };
        if m.verdict != Verdict::Oom {
            return None;
        }
        let largest = m.need_terms.as_ref().map_or(String::new(), |t| {
            let terms = [
                (
                    t.activations_gib,
                    format!("activations for {}", t.activations_for),
                ),
                (
                    t.cuda_graphs_gib,
                    format!("CUDA graphs ({})", t.cuda_graphs_for),
                ),
                (t.req_to_token_gib, "the request-to-token table".to_string()),
                (t.workspace_gib, "the attention workspace".to_string()),
                (t.logits_buffer_gib, "the logits buffer".to_string()),
            ];
            let (gib, what) = terms
                .into_iter()
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .expect("invariant: five terms");
            format!(" (the largest: {gib:.2} GiB of {what})")
        });
        Some(format!(
            "the memory settings are predicted to run out of memory: at mem_fraction_static {:.3} the slack is {:.2} GiB per GPU, \
             but {:.2} GiB must live outside the KV pool{largest}; the largest safe fraction is {:.3} \
             (`servesim memory` shows every term)",
            m.inputs.mem_fraction_static, m.slack_gib, m.need_gib, m.largest_safe_fraction
        ))
    }

    /// SGLang's `mem_fraction_static`, given or defaulted (SGLang only).
    pub fn mem_fraction_static(&self) -> Option<f64> {
        match &self.derivation {
            MemoryDerivation::Sglang(m) => Some(m.inputs.mem_fraction_static),
            MemoryDerivation::Vllm(_) => None,
        }
    }
}
