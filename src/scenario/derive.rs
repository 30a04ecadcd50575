//! Resolving the memory model's inputs from a scenario: each term comes from an explicit key, a
//! catalog entry, the engine's own default or servesim's assumption, and the report says which
//! ([`MemorySources`]: one field per term).

use std::fmt;

use serde::ser::{Serialize, Serializer};

use super::{EngineKind, HardwareSpec, MemoryDerivation, MemoryModel, ModelSpec};
use crate::catalog::Attention;
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

/// Where one term of the memory model came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// Given by this scenario key (`hardware.memory_mib`).
    Key(&'static str),
    /// Measured and given (`engine.observed_free_gib`): free memory per GPU while serving at a
    /// fraction.
    Observed {
        /// Free memory per GPU, GiB.
        free_gib: f64,
        /// The `mem_fraction_static` it was seen at.
        at_fraction: f64,
    },
    /// Derived from a catalog entry; the text names the entry and what was taken from it.
    Catalog(String),
    /// The engine's own default, named with its version.
    EngineDefault(String),
    /// servesim's assumption, with how to replace it.
    Assumption(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Key(key) => f.write_str(key),
            Source::Observed {
                free_gib,
                at_fraction,
            } => write!(
                f,
                "observed: {free_gib} GiB free per GPU at mem_fraction_static {at_fraction}"
            ),
            Source::Catalog(what) => write!(f, "catalog: {what}"),
            Source::EngineDefault(text) | Source::Assumption(text) => f.write_str(text),
        }
    }
}

/// Where every term of a memory model came from: one field per term, so that a term cannot be
/// derived or reported without its source.
///
/// Serialised as `[[term, source], …]` in derivation order.
#[derive(Clone, Debug, PartialEq)]
pub struct MemorySources {
    /// GPU memory as `nvidia-smi` reports it.
    pub gpu_memory: Source,
    /// KV bytes per token per GPU.
    pub kv_bytes_per_token: Source,
    /// Weights resident per GPU.
    pub weights: Source,
    /// The engine's own terms; the same engine as the model's [`MemoryDerivation`].
    pub engine: EngineSources,
}

/// The sources of the terms only one engine has.
#[derive(Clone, Debug, PartialEq)]
pub enum EngineSources {
    /// SGLang's terms.
    Sglang(SglangSources),
    /// vLLM's terms.
    Vllm(VllmSources),
}

/// Where SGLang's own terms came from.
#[derive(Clone, Debug, PartialEq)]
pub struct SglangSources {
    /// `M_pre`, the free memory before the weights load.
    pub memory_before_weights: Source,
    /// `mem_fraction_static`.
    pub mem_fraction_static: Source,
    /// What must fit in the slack.
    pub slack_need: Source,
}

/// Where vLLM's own terms came from.
#[derive(Clone, Debug, PartialEq)]
pub struct VllmSources {
    /// `gpu_memory_utilization`.
    pub gpu_memory_utilization: Source,
    /// Non-torch memory.
    pub non_torch: Source,
    /// The profiling forward's activation peak.
    pub activation_peak: Source,
    /// CUDA-graph memory.
    pub cuda_graphs: Source,
}

impl MemorySources {
    /// `(term, source)` in derivation order, the term as the JSON output names it.
    pub fn terms(&self) -> Vec<(&'static str, &Source)> {
        let mut terms = vec![
            ("GPU memory", &self.gpu_memory),
            ("KV bytes per token", &self.kv_bytes_per_token),
            ("weights per GPU", &self.weights),
        ];
        match &self.engine {
            EngineSources::Sglang(s) => terms.extend([
                ("memory before weights", &s.memory_before_weights),
                ("mem_fraction_static", &s.mem_fraction_static),
                ("slack need", &s.slack_need),
            ]),
            EngineSources::Vllm(v) => terms.extend([
                ("gpu_memory_utilization", &v.gpu_memory_utilization),
                ("non-torch memory", &v.non_torch),
                ("activation peak", &v.activation_peak),
                ("CUDA graphs", &v.cuda_graphs),
            ]),
        }
        terms
    }
}

impl Serialize for MemorySources {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(
            self.terms()
                .into_iter()
                .map(|(term, source)| (term, source.to_string())),
        )
    }
}

/// Resolve every term and derive the budget.
pub fn resolve(
    kind: EngineKind,
    hw: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    keys: &EngineMemoryKeys,
) -> Result<MemoryModel, Missing> {
    let mut missing = Vec::new();
    let tp = hw.map_or(1, |h| h.tensor_parallel);
    let gpu_mib = match hw {
        Some(HardwareSpec {
            memory_mib: Some(m),
            ..
        }) => Some((*m, Source::Key("hardware.memory_mib"))),
        Some(HardwareSpec {
            gpu_entry: Some(g), ..
        }) => Some((g.memory_mib, Source::Catalog(g.display.clone()))),
        _ => {
            missing.push("hardware.gpu or hardware.memory_mib");
            None
        }
    };
    let entry = model.and_then(|m| m.entry.as_ref());
    let kv_bytes = match (model.and_then(|m| m.kv_bytes_per_token), entry) {
        (Some(b), _) => Some((b, Source::Key("model.kv_bytes_per_token"))),
        (None, Some(e)) => {
            let attn = match e.attention {
                Attention::Mla { .. } => "MLA latent, whole on every GPU",
                Attention::Gqa { .. } => "GQA heads split across TP ranks",
            };
            let source = Source::Catalog(format!(
                "{} at TP {tp}, {} KV ({attn})",
                e.display, keys.kv_dtype
            ));
            Some((e.kv_bytes_per_token(tp, keys.kv_dtype_bytes), source))
        }
        _ => {
            missing.push("model.name or model.kv_bytes_per_token");
            None
        }
    };
    let weights = match (model.and_then(|m| m.weight_gib_per_gpu), entry) {
        (Some(w), _) => Some((w, Source::Key("model.weight_gib_per_gpu"))),
        (None, Some(e)) => {
            let source = Source::Catalog(format!("{} parameters, sharded over TP {tp}", e.display));
            Some((e.weight_bytes_per_gpu(tp) as f64 / GIB, source))
        }
        _ => {
            missing.push("model.name or model.weight_gib_per_gpu");
            None
        }
    };
    let (Some((gpu_mib, gpu_memory)), Some((kv_bytes, kv_source)), Some((weights, weights_source))) =
        (gpu_mib, kv_bytes, weights)
    else {
        return Err(Missing(missing));
    };
    let gpu = hw
        .and_then(|h| h.gpu_entry.as_ref())
        .map_or(format!("{gpu_mib} MiB GPU"), |g| g.display.clone());
    let model_name = entry.map_or("model".to_string(), |e| e.display.clone());
    let (derivation, engine_sources) = match kind {
        EngineKind::Sglang => {
            let (m_pre, memory_before_weights) = match hw.and_then(|h| h.memory_before_weights_gib)
            {
                Some(m) => (m, Source::Key("hardware.memory_before_weights_gib")),
                None => {
                    let o = default_pre_weight_overhead_gib(tp);
                    (
                        gpu_mib as f64 / 1024.0 - o,
                        Source::Assumption(format!(
                            "GPU memory − {o} GiB (CUDA context + NCCL, assumed)"
                        )),
                    )
                }
            };
            let mla = entry.is_some_and(|e| matches!(e.attention, Attention::Mla { .. }));
            let reserve =
                HeuristicReserve::sglang(keys.activation_tokens, tp, mla, keys.graph_max_bs);
            let (f, mem_fraction_static) = match keys.mem_fraction_static {
                Some(f) => (f, Source::Key("engine.mem_fraction_static")),
                None => {
                    let factor = entry
                        .and_then(|e| e.vision.as_ref())
                        .map_or(1.0, |v| vlm_factor(v.layers, v.hidden_size));
                    let source = Source::EngineDefault(if factor < 1.0 {
                        format!("SGLang 0.5.23's default for this GPU, × {factor:.3} for a vision model")
                    } else {
                        "SGLang 0.5.23's default for this GPU".into()
                    });
                    (sglang_default_fraction(gpu_mib, &reserve, factor), source)
                }
            };
            let (need, slack_need) = match keys.observed_free_gib {
                Some(free_gib) => {
                    let at_fraction = keys.observed_free_at_fraction.unwrap_or(f);
                    (
                        SlackNeed::Observed {
                            free_gib,
                            at_fraction,
                        },
                        Source::Observed {
                            free_gib,
                            at_fraction,
                        },
                    )
                }
                None => (
                    SlackNeed::Heuristic(reserve),
                    Source::EngineDefault(
                        "SGLang 0.5.23's reservation heuristic (conservative; give engine.observed_free_gib if you measured it)".into(),
                    ),
                ),
            };
            let memory = SglangInputs {
                gpu_memory_mib: gpu_mib,
                memory_before_weights_gib: m_pre,
                weight_gib_per_gpu: weights,
                kv_bytes_per_token: kv_bytes,
                page_size_tokens: keys.page_size,
                mem_fraction_static: f,
                need,
            }
            .derive();
            (
                MemoryDerivation::Sglang(memory),
                EngineSources::Sglang(SglangSources {
                    memory_before_weights,
                    mem_fraction_static,
                    slack_need,
                }),
            )
        }
        EngineKind::Vllm => {
            // A measured term given by its key, or servesim's assumption.
            let pick = |given: Option<f64>, key: &'static str, default: f64| match given {
                Some(x) => (x, Source::Key(key)),
                None => (
                    default,
                    Source::Assumption(format!(
                        "assumed {default} (measure it from vLLM's startup log)"
                    )),
                ),
            };
            let (util, gpu_memory_utilization) = match keys.gpu_memory_utilization {
                Some(u) => (u, Source::Key("engine.gpu_memory_utilization")),
                None => (
                    VLLM_DEFAULT_UTILIZATION,
                    Source::EngineDefault("vLLM 0.33.0's default".into()),
                ),
            };
            let (non_torch_gib, non_torch) = pick(
                keys.non_torch_gib,
                "engine.non_torch_gib",
                VLLM_DEFAULT_NON_TORCH_GIB,
            );
            let (activation_peak_gib, activation_peak) = pick(
                keys.activation_peak_gib,
                "engine.activation_peak_gib",
                VLLM_DEFAULT_ACTIVATION_GIB,
            );
            let (cuda_graph_gib, cuda_graphs) = pick(
                keys.cuda_graph_gib,
                "engine.cuda_graph_gib",
                VLLM_DEFAULT_GRAPH_GIB,
            );
            let memory = VllmInputs {
                gpu_memory_mib: gpu_mib,
                gpu_memory_utilization: util,
                weight_gib_per_gpu: weights,
                non_torch_gib,
                activation_peak_gib,
                cuda_graph_gib,
                kv_bytes_per_token: kv_bytes,
                block_size_tokens: keys.block_size.unwrap_or(VLLM_DEFAULT_BLOCK),
            }
            .derive();
            (
                MemoryDerivation::Vllm(memory),
                EngineSources::Vllm(VllmSources {
                    gpu_memory_utilization,
                    non_torch,
                    activation_peak,
                    cuda_graphs,
                }),
            )
        }
    };
    Ok(MemoryModel {
        gpu,
        model: model_name,
        tensor_parallel: tp,
        derivation,
        sources: MemorySources {
            gpu_memory,
            kv_bytes_per_token: kv_source,
            weights: weights_source,
            engine: engine_sources,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_serialise_as_term_and_text_pairs_in_derivation_order() {
        let sources = MemorySources {
            gpu_memory: Source::Key("hardware.memory_mib"),
            kv_bytes_per_token: Source::Catalog("Llama 3.1 8B at TP 1".into()),
            weights: Source::Key("model.weight_gib_per_gpu"),
            engine: EngineSources::Sglang(SglangSources {
                memory_before_weights: Source::Assumption("GPU memory − 1 GiB".into()),
                mem_fraction_static: Source::EngineDefault("SGLang's default".into()),
                slack_need: Source::Observed {
                    free_gib: 4.5,
                    at_fraction: 0.85,
                },
            }),
        };
        let json = serde_json::to_value(&sources).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                ["GPU memory", "hardware.memory_mib"],
                ["KV bytes per token", "catalog: Llama 3.1 8B at TP 1"],
                ["weights per GPU", "model.weight_gib_per_gpu"],
                ["memory before weights", "GPU memory − 1 GiB"],
                ["mem_fraction_static", "SGLang's default"],
                [
                    "slack need",
                    "observed: 4.5 GiB free per GPU at mem_fraction_static 0.85"
                ],
            ])
        );
        let vllm = MemorySources {
            engine: EngineSources::Vllm(VllmSources {
                gpu_memory_utilization: Source::Key("engine.gpu_memory_utilization"),
                non_torch: Source::Key("engine.non_torch_gib"),
                activation_peak: Source::Key("engine.activation_peak_gib"),
                cuda_graphs: Source::Key("engine.cuda_graph_gib"),
            }),
            ..sources
        };
        let terms: Vec<&str> = vllm.terms().into_iter().map(|(t, _)| t).collect();
        assert_eq!(
            terms,
            [
                "GPU memory",
                "KV bytes per token",
                "weights per GPU",
                "gpu_memory_utilization",
                "non-torch memory",
                "activation peak",
                "CUDA graphs"
            ]
        );
    }

    #[test]
    fn the_vision_factor_of_kimi_k25_is_about_0_91() {
        assert!((vlm_factor(27, 1152) - 0.910).abs() < 0.001);
    }
}
