//! `[engine]`'s memory keys, where each term of the memory model comes from — an explicit key,
//! a catalog entry, the engine's own default or servesim's assumption, and the report says
//! which ([`MemorySources`]: one field per term) — and the KV budget: given, or derived.

use std::fmt;

use serde::ser::{Serialize, Serializer};

use super::need::{
    vllm_activation_peak_gib, vllm_cuda_graph_gib, ClientLoad, ForwardShapes, SglangNeed,
};
use super::{sglang_default_fraction, HeuristicReserve, SglangInputs, SlackNeed, VllmInputs, GIB};
use super::{HardwareSpec, MemoryDerivation, MemoryModel, ModelSpec};
use crate::catalog::Attention;
use crate::settings::{keys, Bad, Values, When};

const SGLANG: When = When::Engine(&["sglang"], "SGLang");
const VLLM: When = When::Engine(&["vllm"], "vLLM");
const MEM: crate::settings::Range = crate::settings::Range::Within(0.0, 16384.0);
/// The largest KV pool accepted (10⁹ tokens; a full 8 × B200 node holds about 10⁷).
pub const MAX_KV_TOKENS: u64 = 1_000_000_000;

keys! {
/// `[engine]`'s keys of the KV budget and the memory model.
KEYS:
"engine.kv_capacity_tokens" [Integer(1, MAX_KV_TOKENS), Derived("from memory (hardware and model), or vLLM's num_gpu_blocks_override"), All, "tokens"]
    "the KV pool, floored to whole pages or blocks: SGLang's max_total_num_tokens from its startup log; vLLM's usable blocks × block_size", e.g. "116171";
"engine.kv_cache_dtype" [OneOf(&["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]), Word("auto"), All, ""]
    "the KV cache's element type (\"auto\": 2 bytes)", e.g. r#""fp8_e4m3""#;
"engine.mem_fraction_static" [Number(Fraction), Derived("SGLang 0.5.23's default for the GPU"), SGLANG, ""]
    "the fraction of GPU memory for weights and the KV pool", e.g. "0.85";
"engine.observed_free_gib" [Number(MEM), Absent("none"), SGLANG, "GiB"]
    "free memory per GPU seen with nvidia-smi while serving: the slack need is then measured, not guessed", e.g. "4.66";
"engine.observed_free_at_fraction" [Number(Fraction), Derived("the scenario's mem_fraction_static"), SGLANG, ""]
    "the mem_fraction_static the free memory was seen at", e.g. "0.85";
"engine.gpu_memory_utilization" [Number(Fraction), Num(VLLM_DEFAULT_UTILIZATION), VLLM, ""]
    "vLLM's --gpu-memory-utilization", e.g. "0.9";
"engine.activation_peak_gib" [Number(MEM), Derived("from the catalog model: a forward of max_num_batched_tokens tokens or the sampler on max_num_seqs rows, the larger (1.2 without a catalog model)"), VLLM, "GiB"]
    "activation peak of vLLM's profiling run, from its startup log", e.g. "1.2";
"engine.non_torch_gib" [Number(MEM), Num(VLLM_DEFAULT_NON_TORCH_GIB), VLLM, "GiB"]
    "non-torch memory (NCCL, cuBLAS), from vLLM's startup log (assumed if absent)", e.g. "0.6";
"engine.cuda_graph_gib" [Number(MEM), Derived("from the catalog model: the largest capture's pool and 8 MiB per graph over vLLM's capture sizes (0.7 without a catalog model)"), VLLM, "GiB"]
    "CUDA-graph memory, from vLLM's startup log", e.g. "0.7";
}

/// The KV cache's element type (`engine.kv_cache_dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvCacheDtype {
    /// The model's dtype (2 bytes).
    Auto,
    /// bfloat16.
    Bf16,
    /// float16.
    Fp16,
    /// FP8 E4M3.
    Fp8E4m3,
    /// FP8 E5M2.
    Fp8E5m2,
}

impl KvCacheDtype {
    /// Read `engine.kv_cache_dtype`.
    pub fn read(v: &dyn Values) -> Result<Self, Bad> {
        Ok(match v.get::<String>("engine.kv_cache_dtype")?.as_str() {
            "bf16" => KvCacheDtype::Bf16,
            "fp16" => KvCacheDtype::Fp16,
            "fp8_e4m3" => KvCacheDtype::Fp8E4m3,
            "fp8_e5m2" => KvCacheDtype::Fp8E5m2,
            _ => KvCacheDtype::Auto,
        })
    }

    /// The name as written in scenarios.
    pub fn as_str(self) -> &'static str {
        match self {
            KvCacheDtype::Auto => "auto",
            KvCacheDtype::Bf16 => "bf16",
            KvCacheDtype::Fp16 => "fp16",
            KvCacheDtype::Fp8E4m3 => "fp8_e4m3",
            KvCacheDtype::Fp8E5m2 => "fp8_e5m2",
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> u32 {
        match self {
            KvCacheDtype::Fp8E4m3 | KvCacheDtype::Fp8E5m2 => 1,
            _ => 2,
        }
    }
}

/// What of an engine's own settings the KV pool depends on (read by the engine's settings
/// section before the pool is known).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PoolSettings {
    /// SGLang: its pages, and what its memory heuristic sizes.
    Sglang {
        /// `page_size`.
        page_size: u32,
        /// The chunk SGLang's activation estimate sizes (`max_prefill_tokens` when chunking is
        /// off).
        activation_tokens: u64,
        /// The decode CUDA-graph max batch size.
        graph_max_bs: u32,
        /// `max_running_requests`, when given (it sizes the request table and the largest
        /// decode batch).
        max_running_requests: Option<u64>,
    },
    /// vLLM: its blocks, and the batch limits its profiling run is sized by.
    Vllm {
        /// `block_size`.
        block_size: u32,
        /// `num_gpu_blocks_override`: total blocks, vLLM's null block 0 included.
        num_gpu_blocks_override: Option<u64>,
        /// `max_num_seqs`, given or defaulted.
        max_num_seqs: u32,
        /// `max_num_batched_tokens`, given or defaulted.
        max_num_batched_tokens: u32,
    },
}

impl PoolSettings {
    /// The most prompt tokens one forward computes: SGLang's chunk (`max_prefill_tokens` with
    /// chunking off), vLLM's step budget.
    pub fn prefill_tokens_per_forward(self) -> u64 {
        match self {
            PoolSettings::Sglang {
                activation_tokens, ..
            } => activation_tokens,
            PoolSettings::Vllm {
                max_num_batched_tokens,
                ..
            } => u64::from(max_num_batched_tokens),
        }
    }

    /// The pool's unit: tokens, its name, and the key that sets it.
    fn unit(self) -> (u64, &'static str, &'static str) {
        match self {
            PoolSettings::Sglang { page_size, .. } => (u64::from(page_size), "page", "page_size"),
            PoolSettings::Vllm { block_size, .. } => (u64::from(block_size), "block", "block_size"),
        }
    }
}

/// Where the KV budget came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvSource {
    /// `engine.kv_capacity_tokens` was given.
    Given,
    /// vLLM's `engine.num_gpu_blocks_override` was given.
    BlocksOverride,
    /// Derived by the memory model.
    Derived,
}

impl KvSource {
    /// `given`, `derived from memory` or `num_gpu_blocks_override`.
    pub fn as_str(self) -> &'static str {
        match self {
            KvSource::Given => "given",
            KvSource::BlocksOverride => "num_gpu_blocks_override",
            KvSource::Derived => "derived from memory",
        }
    }
}

/// The KV pool in tokens, floored to whole pages or blocks, and where it came from: given,
/// vLLM's block override, or the memory model's.
pub fn kv_budget(
    v: &mut dyn Values,
    memory: &Result<MemoryModel, Missing>,
    pool: PoolSettings,
) -> Result<(u64, KvSource), Bad> {
    let (unit, unit_name, unit_key) = pool.unit();
    let given: Option<u64> = v.opt("engine.kv_capacity_tokens")?;
    let (kv, source) = match (given, pool, memory) {
        (
            Some(kv),
            PoolSettings::Vllm {
                num_gpu_blocks_override: Some(n),
                ..
            },
            _,
        ) if kv != (n - 1) * unit => {
            let msg = format!(
                "disagrees with num_gpu_blocks_override = {n}: (n − 1) × block_size = {} tokens (block 0 is vLLM's null block)",
                (n - 1) * unit
            );
            return Err(v.bad(
                "engine.kv_capacity_tokens",
                msg,
                "give one of them, or make them agree",
            ));
        }
        (Some(kv), ..) => (kv, KvSource::Given),
        (
            None,
            PoolSettings::Vllm {
                num_gpu_blocks_override: Some(n),
                ..
            },
            _,
        ) => ((n - 1) * unit, KvSource::BlocksOverride),
        (
            None,
            _,
            Ok(MemoryModel {
                derivation: MemoryDerivation::Sglang(s),
                ..
            }),
        ) if s.max_total_num_tokens == 0 => {
            let (i, static_gib) = (&s.inputs, s.static_gib);
            let msg = format!(
                "the weights ({:.1} GiB per GPU) leave no KV cache: the static budget is {:.3} × {:.1} GiB = {static_gib:.1} GiB",
                i.weight_gib_per_gpu, i.mem_fraction_static, i.memory_before_weights_gib
            );
            let hint = if i.weight_gib_per_gpu >= i.memory_before_weights_gib {
                // No fraction helps: the weights alone exceed the memory.
                "the weights exceed the memory before weights: use more GPUs (hardware.tensor_parallel), GPUs with more memory, or a lighter checkpoint"
            } else {
                "raise engine.mem_fraction_static, use more GPUs (hardware.tensor_parallel), or a lighter checkpoint"
            };
            return Err(v.fail("engine.mem_fraction_static", "engine", msg, hint));
        }
        (
            None,
            _,
            Ok(MemoryModel {
                derivation: MemoryDerivation::Sglang(s),
                ..
            }),
        ) => (s.max_total_num_tokens, KvSource::Derived),
        // vLLM's block 0 is the null block: the usable pool is one block less.
        (
            None,
            _,
            Ok(MemoryModel {
                derivation: MemoryDerivation::Vllm(m),
                ..
            }),
        ) if m.num_blocks < 2 => {
            let msg = format!(
                "the memory leaves {} KV block(s), and vLLM needs one besides its null block: vLLM would not start",
                m.num_blocks
            );
            let i = &m.inputs;
            let block_bytes = (i.kv_bytes_per_token * u64::from(i.block_size_tokens)) as f64;
            let two_blocks = m.min_utilization_for_one_block
                + block_bytes / (i.gpu_memory_mib as f64 * 1024.0 * 1024.0);
            let hint = if two_blocks <= 1.0 {
                format!(
                    "raise engine.gpu_memory_utilization to at least {two_blocks:.3}, use more GPUs, or a lighter checkpoint"
                )
            } else {
                // No utilization helps: the GPU's memory is too small.
                format!(
                    "even gpu_memory_utilization = 1 leaves too little of the GPU's {} MiB: use more GPUs (hardware.tensor_parallel), GPUs with more memory, or a lighter checkpoint",
                    i.gpu_memory_mib
                )
            };
            return Err(v.fail("engine.gpu_memory_utilization", "engine", msg, hint));
        }
        (
            None,
            _,
            Ok(MemoryModel {
                derivation: MemoryDerivation::Vllm(m),
                ..
            }),
        ) => ((m.num_blocks - 1) * unit, KvSource::Derived),
        (None, _, Err(missing)) => {
            let give = match pool {
                PoolSettings::Sglang { .. } => "give it (SGLang logs it as max_total_num_tokens)",
                PoolSettings::Vllm { .. } => "give it or engine.num_gpu_blocks_override",
            };
            let hint = format!(
                "{give}, or give {} so servesim derives it",
                missing.0.join(", ")
            );
            let msg = "is missing and cannot be derived from memory";
            return Err(v.fail("engine.kv_capacity_tokens", "engine", msg, hint));
        }
    };
    // SGLang floors the pool to whole pages (`pool_configurator.py`); vLLM allocates blocks.
    let kv = kv / unit * unit;
    if kv == 0 {
        let msg = format!("the KV pool holds less than one {unit_name} of {unit} tokens");
        let hint = format!("raise kv_capacity_tokens or lower {unit_key}");
        return Err(v.fail("engine.kv_capacity_tokens", "engine", msg, hint));
    }
    Ok((kv, source))
}

/// vLLM 0.33.0's default `gpu_memory_utilization` (`config/cache.py`).
pub const VLLM_DEFAULT_UTILIZATION: f64 = 0.92;
/// Assumed non-torch memory growth (NCCL, cuBLAS workspaces) when not measured, GiB.
pub const VLLM_DEFAULT_NON_TORCH_GIB: f64 = 0.6;
/// Assumed activation peak of vLLM's profiling forward when neither measured nor derivable, GiB.
pub const VLLM_DEFAULT_ACTIVATION_GIB: f64 = 1.2;
/// Assumed CUDA-graph memory when neither measured nor derivable, GiB.
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

/// Read the memory keys of `[engine]`, resolve every term and derive the budget: `Ok(Err(…))`
/// names the inputs that are missing.
pub fn read(
    v: &mut dyn Values,
    hw: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    kv_cache_dtype: KvCacheDtype,
    pool: PoolSettings,
    load: Option<ClientLoad>,
) -> Result<Result<MemoryModel, Missing>, Bad> {
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
                e.display,
                kv_cache_dtype.as_str()
            ));
            Some((e.kv_bytes_per_token(tp, kv_cache_dtype.bytes()), source))
        }
        _ => {
            missing.push("model.name or model.kv_bytes_per_token");
            None
        }
    };
    let weights = match (model.and_then(|m| m.weight_gib_per_gpu), entry) {
        (Some(w), _) => Some((w, Source::Key("model.weight_gib_per_gpu"))),
        (None, Some(e)) => {
            let format = match model.and_then(|m| m.weight_dtype) {
                Some(d) => format!("{} (model.weight_dtype)", d.as_str()),
                None => format!("{}, as released", e.weight_dtype.as_str()),
            };
            let source = Source::Catalog(format!(
                "{} parameters in {format}, sharded over TP {tp}",
                e.display
            ));
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
        return Ok(Err(Missing(missing)));
    };
    let gpu = hw
        .and_then(|h| h.gpu_entry.as_ref())
        .map_or(format!("{gpu_mib} MiB GPU"), |g| g.display.clone());
    let model_name = entry.map_or("model".to_string(), |e| e.display.clone());
    let (derivation, engine_sources) = match pool {
        PoolSettings::Sglang {
            page_size,
            activation_tokens,
            graph_max_bs,
            max_running_requests,
        } => {
            let gpu_gib = gpu_mib as f64 / 1024.0;
            let (m_pre, memory_before_weights) = match hw.and_then(|h| h.memory_before_weights_gib)
            {
                Some(m) if m > gpu_gib => {
                    let msg = format!(
                        "is more than the GPU's memory: {gpu_mib} MiB = {gpu_gib:.3} GiB ({gpu_memory})"
                    );
                    let hint = "give the free memory SGLang logs before the weights load (\"Load weight begin. avail mem=… GB\"), at most the GPU's memory";
                    return Err(v.bad("hardware.memory_before_weights_gib", msg, hint));
                }
                Some(m) => (m, Source::Key("hardware.memory_before_weights_gib")),
                None => {
                    let o = default_pre_weight_overhead_gib(tp);
                    if gpu_gib <= o {
                        let msg = format!(
                            "leaves nothing after the {o} GiB assumed for the CUDA context and NCCL"
                        );
                        let hint = "give the GPU's memory as nvidia-smi reports it, or hardware.memory_before_weights_gib";
                        return Err(match gpu_memory {
                            Source::Key(key) => v.bad(key, msg, hint),
                            _ => v.fail(
                                "hardware.gpu",
                                "hardware",
                                format!("{gpu_mib} MiB ({gpu_memory}) {msg}"),
                                hint,
                            ),
                        });
                    }
                    (
                        gpu_gib - o,
                        Source::Assumption(format!(
                            "GPU memory − {o} GiB (CUDA context + NCCL, assumed)"
                        )),
                    )
                }
            };
            let mla = entry.is_some_and(|e| matches!(e.attention, Attention::Mla { .. }));
            let radix_cache = !v.get::<bool>("engine.disable_radix_cache")?;
            let reserve = HeuristicReserve::sglang(activation_tokens, tp, mla, graph_max_bs);
            let (f, mem_fraction_static) = match v.opt("engine.mem_fraction_static")? {
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
            let (need, slack_need) = match v.opt("engine.observed_free_gib")? {
                Some(free_gib) => {
                    let at_fraction = v.opt("engine.observed_free_at_fraction")?.unwrap_or(f);
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
                None => match (entry, model.and_then(|m| m.context_len)) {
                    // The radix cache holds a shared prefix once for all its requests
                    // (`mem_cache/unified_radix_cache.py`): more of them fit in the pool at once.
                    (Some(e), Some(context_len_tokens)) => (
                        SlackNeed::Derived(SglangNeed {
                            shapes: ForwardShapes::new(e, tp),
                            prefill_tokens: activation_tokens,
                            cuda_graph_max_bs: graph_max_bs,
                            mla,
                            max_running_requests,
                            context_len_tokens,
                            load: load.map(|l| Box::new(l.with_cache(radix_cache))),
                        }),
                        Source::Catalog(format!(
                            "{}'s shapes and the engine settings, as SGLang 0.5.23 allocates (give engine.observed_free_gib if you measured it)",
                            e.display
                        )),
                    ),
                    _ => (
                        SlackNeed::Heuristic(reserve),
                        Source::EngineDefault(
                            "SGLang 0.5.23's reservation heuristic: no catalog model to derive it from (conservative; give engine.observed_free_gib if you measured it)".into(),
                        ),
                    ),
                },
            };
            let memory = SglangInputs {
                gpu_memory_mib: gpu_mib,
                memory_before_weights_gib: m_pre,
                weight_gib_per_gpu: weights,
                kv_bytes_per_token: kv_bytes,
                page_size_tokens: page_size,
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
        PoolSettings::Vllm {
            block_size,
            max_num_seqs,
            max_num_batched_tokens,
            ..
        } => {
            // A measured term given by its key; or derived from the catalog model as vLLM's
            // profiling sizes it; or servesim's assumption.
            let shapes = entry.map(|e| ForwardShapes::new(e, tp));
            let pick = |key: &'static str,
                        default: f64,
                        derive: fn(&ForwardShapes, u32, u32) -> f64,
                        how: &str| {
                Ok(match (v.opt::<f64>(key)?, &shapes, entry) {
                    (Some(x), ..) => (x, Source::Key(key)),
                    (None, Some(s), Some(e)) => (
                        derive(s, max_num_seqs, max_num_batched_tokens),
                        Source::Catalog(format!(
                            "{how} of {}, max_num_seqs {max_num_seqs}, max_num_batched_tokens {max_num_batched_tokens} (measure it from vLLM's startup log)",
                            e.display
                        )),
                    ),
                    _ => (
                        default,
                        Source::Assumption(format!(
                            "assumed {default} (measure it from vLLM's startup log)"
                        )),
                    ),
                })
            };
            let (util, gpu_memory_utilization) = match v.opt("engine.gpu_memory_utilization")? {
                Some(u) => (u, Source::Key("engine.gpu_memory_utilization")),
                None => (
                    VLLM_DEFAULT_UTILIZATION,
                    Source::EngineDefault("vLLM 0.33.0's default".into()),
                ),
            };
            let (non_torch_gib, non_torch) = match v.opt::<f64>("engine.non_torch_gib")? {
                Some(x) => (x, Source::Key("engine.non_torch_gib")),
                None => (
                    VLLM_DEFAULT_NON_TORCH_GIB,
                    Source::Assumption(format!(
                        "assumed {VLLM_DEFAULT_NON_TORCH_GIB} (measure it from vLLM's startup log)"
                    )),
                ),
            };
            let (activation_peak_gib, activation_peak) = pick(
                "engine.activation_peak_gib",
                VLLM_DEFAULT_ACTIVATION_GIB,
                vllm_activation_peak_gib,
                "profiling run (profile_run, _dummy_sampler_run)",
            )?;
            let (cuda_graph_gib, cuda_graphs) = pick(
                "engine.cuda_graph_gib",
                VLLM_DEFAULT_GRAPH_GIB,
                vllm_cuda_graph_gib,
                "capture sizes (profile_cudagraph_memory)",
            )?;
            let memory = VllmInputs {
                gpu_memory_mib: gpu_mib,
                gpu_memory_utilization: util,
                weight_gib_per_gpu: weights,
                non_torch_gib,
                activation_peak_gib,
                cuda_graph_gib,
                kv_bytes_per_token: kv_bytes,
                block_size_tokens: block_size,
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
    Ok(Ok(MemoryModel {
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
    }))
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

    #[test]
    fn the_vision_factor_is_clamped_between_0_8_and_1_05_before_its_0_95() {
        // A tower of 24 layers of 1024 is size 1: 0.95 × 1. Size 0.25 (6 layers of 1024)
        // would be 1.075, clamped to 1.05: 0.9975. Size 4 would be 0.7, clamped to 0.8: 0.76.
        assert_eq!(vlm_factor(24, 1024), 0.95);
        assert_eq!(vlm_factor(6, 1024), 0.95 * 1.05);
        assert_eq!(vlm_factor(96, 1024), 0.95 * 0.8);
    }
}
