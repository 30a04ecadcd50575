//! Resolving the memory model's inputs from a scenario: each term comes from an explicit key, a
//! catalog entry, or SGLang's own default, and the report says which.

use super::{EngineKind, HardwareSpec, MemoryDerivation, MemoryModel, ModelSpec};
use crate::catalog::AttentionKind;
use crate::memory::{
    sglang_default_fraction, HeuristicReserve, SglangInputs, SlackNeed, VllmInputs, GIB,
};

/// The memory-related `[engine]` keys, already type-checked.
#[derive(Clone, Debug, Default)]
pub struct EngineMemoryKeys {
    /// `engine.mem_fraction_static`.
    pub mem_fraction_static: Option<f64>,
    /// Bytes per KV element from `engine.kv_cache_dtype`.
    pub kv_dtype_bytes: u32,
    /// `engine.kv_cache_dtype` as written (`auto` by default).
    pub kv_dtype: String,
    /// `engine.observed_free_gib`.
    pub observed_free_gib: Option<f64>,
    /// `engine.observed_free_at_fraction`.
    pub observed_free_at_fraction: Option<f64>,
    /// Chunk size used by SGLang's activation estimate (`max_prefill_tokens` when chunking is
    /// off).
    pub activation_tokens: u64,
    /// Decode CUDA-graph max batch size.
    pub graph_max_bs: u32,
    /// Page size.
    pub page_size: u32,
    /// `engine.gpu_memory_utilization` (vLLM).
    pub gpu_memory_utilization: Option<f64>,
    /// `engine.block_size` (vLLM).
    pub block_size: Option<u32>,
    /// `engine.activation_peak_gib` (vLLM).
    pub activation_peak_gib: Option<f64>,
    /// `engine.non_torch_gib` (vLLM).
    pub non_torch_gib: Option<f64>,
    /// `engine.cuda_graph_gib` (vLLM).
    pub cuda_graph_gib: Option<f64>,
}

/// vLLM 0.33.0's default `gpu_memory_utilization` (`config/cache.py`).
pub const VLLM_DEFAULT_UTILIZATION: f64 = 0.92;
/// vLLM's default block size for most attention backends (`config/cache.py`).
pub const VLLM_DEFAULT_BLOCK: u32 = 16;
/// Assumed non-torch memory growth (NCCL, cuBLAS workspaces) when not measured, GiB.
pub const VLLM_DEFAULT_NON_TORCH_GIB: f64 = 0.6;
/// Assumed activation peak of vLLM's profiling forward when not measured, GiB.
pub const VLLM_DEFAULT_ACTIVATION_GIB: f64 = 1.2;
/// Assumed CUDA-graph memory when not measured, GiB.
pub const VLLM_DEFAULT_GRAPH_GIB: f64 = 0.7;

/// The CUDA context and NCCL / custom all-reduce buffers allocated before SGLang measures the
/// free memory: an assumption (`engine-semantics.md` §1.8, §9), 1 GiB with one GPU, 2 GiB with
/// tensor parallelism.
pub fn default_pre_weight_overhead_gib(tp: u32) -> f64 {
    if tp > 1 {
        2.0
    } else {
        1.0
    }
}

/// SGLang's factor for multimodal models when the fraction is defaulted
/// (`adjust_mem_fraction_for_vlm`): `0.95 × clamp(1 − 0.1 × (L·H² / (24·1024²) − 1), 0.8, 1.05)`.
pub fn vlm_factor(vision_layers: u32, vision_hidden: u32) -> f64 {
    let size =
        f64::from(vision_layers) * f64::from(vision_hidden).powi(2) / (24.0 * 1024.0 * 1024.0);
    0.95 * (1.0 - 0.1 * (size - 1.0)).clamp(0.8, 1.05)
}

/// Why the memory model cannot be built: the inputs that are missing.
#[derive(Clone, Debug, PartialEq)]
pub struct Missing(pub Vec<&'static str>);

/// Resolve every term and derive the budget.
pub fn resolve(
    kind: EngineKind,
    hw: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    keys: &EngineMemoryKeys,
) -> Result<MemoryModel, Missing> {
    let mut missing = Vec::new();
    let mut sources: Vec<(String, String)> = Vec::new();
    let tp = hw.map_or(1, |h| h.tensor_parallel);
    let gpu_mib = match hw {
        Some(HardwareSpec {
            memory_mib: Some(m),
            ..
        }) => {
            sources.push(("GPU memory".into(), "hardware.memory_mib".into()));
            Some(*m)
        }
        Some(HardwareSpec {
            gpu_entry: Some(g), ..
        }) => {
            sources.push(("GPU memory".into(), format!("catalog: {}", g.display)));
            Some(g.memory_mib)
        }
        _ => {
            missing.push("hardware.gpu or hardware.memory_mib");
            None
        }
    };
    let entry = model.and_then(|m| m.entry.as_ref());
    let kv_bytes = match (model.and_then(|m| m.kv_bytes_per_token), entry) {
        (Some(b), _) => {
            sources.push((
                "KV bytes per token".into(),
                "model.kv_bytes_per_token".into(),
            ));
            Some(b)
        }
        (None, Some(e)) => {
            let attn = match e.attention {
                AttentionKind::Mla => "MLA latent, whole on every GPU",
                AttentionKind::Gqa => "GQA heads split across TP ranks",
            };
            sources.push((
                "KV bytes per token".into(),
                format!(
                    "catalog: {} at TP {tp}, {} KV ({attn})",
                    e.display, keys.kv_dtype
                ),
            ));
            Some(e.kv_bytes_per_token(tp, keys.kv_dtype_bytes))
        }
        _ => {
            missing.push("model.name or model.kv_bytes_per_token");
            None
        }
    };
    let weights = match (model.and_then(|m| m.weight_gib_per_gpu), entry) {
        (Some(w), _) => {
            sources.push(("weights per GPU".into(), "model.weight_gib_per_gpu".into()));
            Some(w)
        }
        (None, Some(e)) => {
            sources.push((
                "weights per GPU".into(),
                format!("catalog: {} parameters, sharded over TP {tp}", e.display),
            ));
            Some(e.weight_bytes_per_gpu(tp) as f64 / GIB)
        }
        _ => {
            missing.push("model.name or model.weight_gib_per_gpu");
            None
        }
    };
    if !missing.is_empty() {
        return Err(Missing(missing));
    }
    let (gpu_mib, kv_bytes, weights) = (
        gpu_mib.expect("invariant: checked above"),
        kv_bytes.expect("invariant: checked above"),
        weights.expect("invariant: checked above"),
    );
    let gpu = hw
        .and_then(|h| h.gpu_entry.as_ref())
        .map_or(format!("{gpu_mib} MiB GPU"), |g| g.display.clone());
    let model_name = entry.map_or("model".to_string(), |e| e.display.clone());
    let derivation = match kind {
        EngineKind::Sglang => {
            let m_pre = match hw.and_then(|h| h.memory_before_weights_gib) {
                Some(m) => {
                    sources.push((
                        "memory before weights".into(),
                        "hardware.memory_before_weights_gib".into(),
                    ));
                    m
                }
                None => {
                    let o = default_pre_weight_overhead_gib(tp);
                    sources.push((
                        "memory before weights".into(),
                        format!("GPU memory − {o} GiB (CUDA context + NCCL, assumed)"),
                    ));
                    gpu_mib as f64 / 1024.0 - o
                }
            };
            let mla = entry.is_some_and(|e| e.attention == AttentionKind::Mla);
            let reserve =
                HeuristicReserve::sglang(keys.activation_tokens, tp, mla, keys.graph_max_bs);
            let f = match keys.mem_fraction_static {
                Some(f) => {
                    sources.push((
                        "mem_fraction_static".into(),
                        "engine.mem_fraction_static".into(),
                    ));
                    f
                }
                None => {
                    let factor = match entry {
                        Some(e) if e.multimodal => {
                            vlm_factor(e.vision_layers, e.vision_hidden_size)
                        }
                        _ => 1.0,
                    };
                    sources.push((
                        "mem_fraction_static".into(),
                        if factor < 1.0 {
                            format!("SGLang 0.5.23's default for this GPU, × {factor:.3} for a vision model")
                        } else {
                            "SGLang 0.5.23's default for this GPU".into()
                        },
                    ));
                    sglang_default_fraction(gpu_mib, &reserve, factor)
                }
            };
            let need = match keys.observed_free_gib {
                Some(free) => {
                    let at = keys.observed_free_at_fraction.unwrap_or(f);
                    sources.push((
                        "slack need".into(),
                        format!("observed: {free} GiB free per GPU at mem_fraction_static {at}"),
                    ));
                    SlackNeed::Observed {
                        free_gib: free,
                        at_fraction: at,
                    }
                }
                None => {
                    sources.push((
                        "slack need".into(),
                        "SGLang 0.5.23's reservation heuristic (conservative; give engine.observed_free_gib if you measured it)".into(),
                    ));
                    SlackNeed::Heuristic(reserve)
                }
            };
            MemoryDerivation::Sglang(
                SglangInputs {
                    gpu_memory_mib: gpu_mib,
                    memory_before_weights_gib: m_pre,
                    weight_gib_per_gpu: weights,
                    kv_bytes_per_token: kv_bytes,
                    page_size: keys.page_size,
                    mem_fraction_static: f,
                    need,
                }
                .derive(),
            )
        }
        EngineKind::Vllm => {
            let pick = |v: Option<f64>,
                        key: &str,
                        default: f64,
                        sources: &mut Vec<(String, String)>,
                        what: &str| {
                match v {
                    Some(x) => {
                        sources.push((what.to_string(), format!("engine.{key}")));
                        x
                    }
                    None => {
                        sources.push((
                            what.to_string(),
                            format!("assumed {default} (measure it from vLLM's startup log)"),
                        ));
                        default
                    }
                }
            };
            let util = keys
                .gpu_memory_utilization
                .unwrap_or(VLLM_DEFAULT_UTILIZATION);
            sources.push((
                "gpu_memory_utilization".into(),
                if keys.gpu_memory_utilization.is_some() {
                    "engine.gpu_memory_utilization".into()
                } else {
                    "vLLM 0.33.0's default".into()
                },
            ));
            let non_torch = pick(
                keys.non_torch_gib,
                "non_torch_gib",
                VLLM_DEFAULT_NON_TORCH_GIB,
                &mut sources,
                "non-torch memory",
            );
            let act = pick(
                keys.activation_peak_gib,
                "activation_peak_gib",
                VLLM_DEFAULT_ACTIVATION_GIB,
                &mut sources,
                "activation peak",
            );
            let graphs = pick(
                keys.cuda_graph_gib,
                "cuda_graph_gib",
                VLLM_DEFAULT_GRAPH_GIB,
                &mut sources,
                "CUDA graphs",
            );
            MemoryDerivation::Vllm(
                VllmInputs {
                    gpu_memory_mib: gpu_mib,
                    gpu_memory_utilization: util,
                    weight_gib_per_gpu: weights,
                    non_torch_gib: non_torch,
                    activation_peak_gib: act,
                    cuda_graph_gib: graphs,
                    kv_bytes_per_token: kv_bytes,
                    block_size: keys.block_size.unwrap_or(VLLM_DEFAULT_BLOCK),
                }
                .derive(),
            )
        }
    };
    Ok(MemoryModel {
        gpu,
        model: model_name,
        tensor_parallel: tp,
        derivation,
        sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vision_factor_of_kimi_k25_is_about_0_91() {
        assert!((vlm_factor(27, 1152) - 0.910).abs() < 0.001);
    }
}
