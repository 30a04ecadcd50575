//! Built-in catalog of GPUs and models, extensible with a user file.
//!
//! The data lives beside this file in `gpus.toml` (`[[gpu]]` tables) and `models.toml`
//! (`[[model]]` tables) and is compiled into the binary. Each entry carries a `source` naming
//! where its figures come from. A user catalog file has the same schema, may hold both kinds of
//! tables, and extends the built-in catalog: an entry whose `name` equals an existing name
//! (case-insensitively) replaces that entry, any other entry is added.
//!
//! Lookups ([`Catalog::gpu`], [`Catalog::model`]) accept a name or any alias, in any case;
//! [`Catalog::suggest_gpu`] and [`Catalog::suggest_model`] offer the closest name for a typo.
//!
//! Besides the facts, [`Model`] derives what the memory model and a roofline step-time model need:
//! KV bytes per token under tensor parallelism (SGLang's rules), parameter counts by component,
//! and weight bytes in total and per GPU.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::diagnostic::{closest, line_col};

/// The built-in GPU table (`src/catalog/gpus.toml`).
const GPUS_TOML: &str = include_str!("gpus.toml");
/// The built-in model table (`src/catalog/models.toml`).
const MODELS_TOML: &str = include_str!("models.toml");

/// Weights per FP32 scale in DeepSeek-style block FP8 (128 × 128 blocks).
const FP8_BLOCK_WEIGHTS: u64 = 128 * 128;

// ---------------------------------------------------------------------------------------------
// GPUs

/// One GPU model: memory, bandwidth, compute peaks, interconnect and an indicative price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// Key used in scenarios, lowercase and hyphenated (`"h100"`, `"rtx-pro-6000"`).
    pub name: String,
    /// Other accepted spellings (`"h100-sxm"`); matched case-insensitively like `name`.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Human-readable name for reports.
    pub display: String,
    /// Total memory as `nvidia-smi --query-gpu=memory.total` reports it, in MiB.
    pub memory_mib: u64,
    /// Peak memory bandwidth in GB/s (10⁹ B/s).
    pub hbm_bandwidth_gb_per_s: f64,
    /// Dense (no 2:4 sparsity) BF16 tensor throughput, TFLOP/s.
    pub bf16_dense_tflops: f64,
    /// Dense FP8 tensor throughput, TFLOP/s; 0 when the GPU has no FP8 tensor cores.
    pub fp8_dense_tflops: f64,
    /// GPU-to-GPU link kind (`"nvlink4"`, `"pcie5"`, `"infinity-fabric"`).
    pub interconnect: String,
    /// GPU-to-GPU bandwidth per GPU and per direction, GB/s.
    pub interconnect_gb_per_s: f64,
    /// Estimated latency of one small (decode-sized) all-reduce across the node's GPUs, µs.
    pub collective_latency_us: f64,
    /// Indicative on-demand price per GPU-hour in US dollars; a default the user overrides.
    pub price_usd_per_hour: f64,
    /// Where the figures come from.
    #[serde(default)]
    pub source: String,
}

impl Gpu {
    /// Total memory in bytes (`memory_mib × 2²⁰`).
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mib << 20
    }

    /// The first thing wrong with this entry, if any.
    fn problem(&self) -> Option<String> {
        if self.name.trim().is_empty() {
            return Some("name must not be empty".into());
        }
        if self.display.trim().is_empty() {
            return Some("display must not be empty".into());
        }
        if self.memory_mib == 0 {
            return Some("memory_mib must be > 0".into());
        }
        let positive = [
            ("hbm_bandwidth_gb_per_s", self.hbm_bandwidth_gb_per_s),
            ("bf16_dense_tflops", self.bf16_dense_tflops),
            ("interconnect_gb_per_s", self.interconnect_gb_per_s),
            ("collective_latency_us", self.collective_latency_us),
        ];
        let non_negative = [
            ("fp8_dense_tflops", self.fp8_dense_tflops),
            ("price_usd_per_hour", self.price_usd_per_hour),
        ];
        positive_and_finite(&positive, &non_negative)
    }
}

// ---------------------------------------------------------------------------------------------
// Models

/// How a model's attention stores its KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionKind {
    /// Grouped-query (or multi-head) attention: `kv_heads` K and V heads of `head_dim` each.
    Gqa,
    /// DeepSeek's multi-head latent attention: one compressed latent of
    /// `kv_lora_rank + qk_rope_head_dim` values per token and layer.
    Mla,
}

/// Storage format of a released checkpoint's weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WeightDtype {
    /// Every weight in BF16 (2 bytes).
    #[serde(rename = "bf16")]
    Bf16,
    /// DeepSeek-style FP8: every linear layer except the MoE router in FP8 with one FP32 scale per
    /// 128 × 128 block; embeddings, LM head and router in BF16.
    #[serde(rename = "fp8")]
    Fp8,
    /// Routed experts in INT4 with one BF16 scale per group of 32 weights (compressed-tensors
    /// `pack-quantized`, symmetric); attention, shared experts, dense layers, embeddings, LM head
    /// and vision tower in BF16 (Kimi-K2.5, Kimi-K2-Thinking).
    #[serde(rename = "int4-experts")]
    Int4Experts,
}

/// One model: architecture facts from its `config.json`, sizes, and the released dtype.
///
/// Fields that do not apply to a model are 0 (e.g. `kv_lora_rank` of a GQA model, `num_experts`
/// of a dense one); [`Catalog`] rejects entries that mix the kinds up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Key used in scenarios, lowercase and hyphenated (`"llama-3.1-8b"`, `"kimi-k2.5"`).
    pub name: String,
    /// Other accepted spellings, e.g. the Hugging Face id; matched case-insensitively.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Human-readable name for reports.
    pub display: String,
    /// Transformer layers (`num_hidden_layers`), without multi-token-prediction modules.
    pub layers: u32,
    /// Attention kind, which decides the KV-cache layout.
    pub attention: AttentionKind,
    /// Query heads (`num_attention_heads`).
    pub q_heads: u32,
    /// GQA: key/value heads (`num_key_value_heads`); 0 for MLA.
    #[serde(default)]
    pub kv_heads: u32,
    /// GQA: dimension of each K and V head; 0 for MLA.
    #[serde(default)]
    pub head_dim: u32,
    /// MLA: rank of the compressed KV latent; 0 for GQA.
    #[serde(default)]
    pub kv_lora_rank: u32,
    /// MLA: dimension of the decoupled RoPE key, stored next to the latent; 0 for GQA.
    #[serde(default)]
    pub qk_rope_head_dim: u32,
    /// MLA: per-head query/key dimension without RoPE; 0 for GQA.
    #[serde(default)]
    pub qk_nope_head_dim: u32,
    /// MLA: per-head value dimension; 0 for GQA.
    #[serde(default)]
    pub v_head_dim: u32,
    /// MLA: rank of the compressed query (0 when queries are not compressed, and for GQA).
    #[serde(default)]
    pub q_lora_rank: u32,
    /// Width of the residual stream.
    pub hidden_size: u32,
    /// Width of a dense FFN layer (the config value; unused when no layer is dense).
    pub intermediate_size: u32,
    /// Vocabulary size (rows of the embedding and of the LM head).
    pub vocab_size: u32,
    /// Whether the LM head shares the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Longest context the released config allows (`max_position_embeddings`), tokens.
    pub context_len: u32,
    /// Total parameters as published, billions.
    pub total_params_b: f64,
    /// Parameters active per token as published, billions.
    pub active_params_b: f64,
    /// Routed experts per MoE layer; 0 for a dense model.
    #[serde(default)]
    pub num_experts: u32,
    /// Routed experts each token uses per MoE layer; 0 for a dense model.
    #[serde(default)]
    pub experts_per_token: u32,
    /// Always-active shared experts per MoE layer, each of `moe_intermediate_size`.
    #[serde(default)]
    pub shared_experts: u32,
    /// FFN width of one expert; 0 for a dense model.
    #[serde(default)]
    pub moe_intermediate_size: u32,
    /// Dense layers before the MoE layers: 0 when every layer is MoE, `layers` for a dense model.
    pub first_dense_layers: u32,
    /// Multi-token-prediction modules shipped in the checkpoint (`num_nextn_predict_layers`);
    /// they count in `checkpoint_gb` but are not loaded for plain serving.
    #[serde(default)]
    pub mtp_layers: u32,
    /// Storage format of the released weights.
    pub weight_dtype: WeightDtype,
    /// Size of the released weights in GB (10⁹ bytes).
    pub checkpoint_gb: f64,
    /// Whether the model has a vision tower (SGLang then lowers its default static fraction).
    #[serde(default)]
    pub multimodal: bool,
    /// Vision tower layers; 0 without one.
    #[serde(default)]
    pub vision_layers: u32,
    /// Vision tower hidden size; 0 without one.
    #[serde(default)]
    pub vision_hidden_size: u32,
    /// Vision tower (and projector) parameters, billions; 0 without one.
    #[serde(default)]
    pub vision_params_b: f64,
    /// Where the figures come from.
    #[serde(default)]
    pub source: String,
}

/// A model's parameters by component, whole model (all layers, all ranks).
///
/// Norm weights and biases are left out: they are below 0.01 % of every catalog model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ParamCounts {
    /// Attention projections that tensor parallelism splits evenly: Q and O for GQA; for MLA the
    /// query up-projection (`q_b`, or the whole Q projection without `q_lora_rank`), the KV
    /// up-projection `kv_b` and O.
    pub attention_sharded: u64,
    /// GQA's K and V projections, split by KV head (replicated when there are fewer KV heads than
    /// ranks); 0 for MLA.
    pub attention_kv: u64,
    /// MLA's down-projections `q_a` and `kv_a` (with the RoPE key), which SGLang keeps whole on
    /// every rank (`ReplicatedLinear` in `models/deepseek_v2.py`); 0 for GQA.
    pub attention_replicated: u64,
    /// FFNs of the dense layers.
    pub dense_ffn: u64,
    /// Shared experts of the MoE layers.
    pub shared_experts: u64,
    /// Routed experts of the MoE layers.
    pub routed_experts: u64,
    /// MoE router (gate) matrices.
    pub router: u64,
    /// Input embedding.
    pub embedding: u64,
    /// LM head (0 when tied to the embedding).
    pub lm_head: u64,
    /// Vision tower and projector.
    pub vision: u64,
    /// Multi-token-prediction modules (in the checkpoint, not loaded for serving).
    pub mtp: u64,
}

impl ParamCounts {
    /// All attention projections.
    pub fn attention(&self) -> u64 {
        self.attention_sharded + self.attention_kv + self.attention_replicated
    }

    /// Everything a server loads: all components except the MTP modules.
    pub fn loaded(&self) -> u64 {
        self.attention()
            + self.dense_ffn
            + self.shared_experts
            + self.routed_experts
            + self.router
            + self.embedding
            + self.lm_head
            + self.vision
    }
}

/// How one group of weights is stored.
#[derive(Clone, Copy, Debug)]
enum Storage {
    /// 2 bytes per weight.
    Bf16,
    /// 1 byte per weight plus one 4-byte scale per 128 × 128 block.
    Fp8Block,
    /// Half a byte per weight plus one 2-byte scale per 32 weights: 9/16 byte per weight.
    Int4Group32,
}

impl Storage {
    /// Bytes holding `params` weights (scales rounded up).
    fn bytes(self, params: u64) -> u64 {
        match self {
            Storage::Bf16 => 2 * params,
            Storage::Fp8Block => params + (4 * params).div_ceil(FP8_BLOCK_WEIGHTS),
            Storage::Int4Group32 => (9 * params).div_ceil(16),
        }
    }
}

impl Model {
    /// Whether the model has routed experts.
    pub fn is_moe(&self) -> bool {
        self.num_experts > 0
    }

    /// Number of MoE layers (`layers − first_dense_layers`; 0 for a dense model).
    pub fn moe_layers(&self) -> u32 {
        if self.is_moe() {
            self.layers - self.first_dense_layers
        } else {
            0
        }
    }

    /// KV heads each tensor-parallel rank stores for a GQA model: `max(1, kv_heads / tp)`, so
    /// heads are split across ranks and replicated when there are fewer heads than ranks
    /// (SGLang `configs/model_config.py: get_num_kv_heads`). For MLA it is 1: the single latent,
    /// whole on every rank. `tp = 0` is read as 1.
    pub fn kv_heads_per_rank(&self, tp: u32) -> u32 {
        (self.kv_heads / tp.max(1)).max(1)
    }

    /// KV-cache bytes one token occupies on one GPU — SGLang's `cell_size` — with tensor
    /// parallelism `tp` (attention TP = TP: no DP attention, no decode context parallelism) and a
    /// KV dtype of `kv_dtype_bytes` bytes (2 for the default `auto` with BF16 models, 1 for
    /// `fp8_e4m3`/`fp8_e5m2`).
    ///
    /// * GQA: `max(1, kv_heads / tp) × (head_dim + v_head_dim) × layers × bytes`, with K and V both
    ///   `head_dim` wide — i.e. `max(1, kv_heads / tp) × 2 × head_dim × layers × bytes`. Heads are
    ///   sharded across ranks and replicated when `kv_heads < tp`.
    /// * MLA: `(kv_lora_rank + qk_rope_head_dim) × layers × bytes`, **not** divided by `tp`: with
    ///   plain TP every rank stores the whole compressed latent of every token.
    ///
    /// Sources (SGLang 0.5.23, see `../shared/spec/engine-semantics.md` §1.2):
    /// `model_executor/pool_configurator.py: DefaultPoolConfigurator._compute_cell_size` (older:
    /// `model_executor/model_runner_kv_cache_mixin.py: get_cell_size_per_token`) and
    /// `configs/model_config.py: get_num_kv_heads`. `tp = 0` is read as 1.
    pub fn kv_bytes_per_token(&self, tp: u32, kv_dtype_bytes: u32) -> u64 {
        let layers = u64::from(self.layers);
        let bytes = u64::from(kv_dtype_bytes);
        match self.attention {
            AttentionKind::Gqa => {
                let heads = u64::from(self.kv_heads_per_rank(tp));
                heads * 2 * u64::from(self.head_dim) * layers * bytes
            }
            AttentionKind::Mla => {
                u64::from(self.kv_lora_rank + self.qk_rope_head_dim) * layers * bytes
            }
        }
    }

    /// Parameters of one expert (gate, up and down projections): `3 × hidden × moe_intermediate`.
    pub fn expert_params(&self) -> u64 {
        3 * u64::from(self.hidden_size) * u64::from(self.moe_intermediate_size)
    }

    /// Parameters by component, computed from the architecture fields (not from
    /// `total_params_b`). Every FFN and expert is gated (gate, up, down).
    pub fn param_counts(&self) -> ParamCounts {
        let h = u64::from(self.hidden_size);
        let layers = u64::from(self.layers);
        let q_heads = u64::from(self.q_heads);
        // Attention parameters of one layer: (sharded, K/V by head, replicated).
        let (sharded, kv, replicated) = match self.attention {
            AttentionKind::Gqa => {
                let q_width = q_heads * u64::from(self.head_dim);
                let kv_width = u64::from(self.kv_heads) * u64::from(self.head_dim);
                // Q and O are q_width × hidden each; K and V are kv_width × hidden each.
                (2 * h * q_width, 2 * h * kv_width, 0)
            }
            AttentionKind::Mla => {
                let qk_head = u64::from(self.qk_nope_head_dim + self.qk_rope_head_dim);
                let q_lora = u64::from(self.q_lora_rank);
                let kv_lora = u64::from(self.kv_lora_rank);
                let (q_up, q_down) = if q_lora > 0 {
                    (q_lora * q_heads * qk_head, h * q_lora)
                } else {
                    (h * q_heads * qk_head, 0)
                };
                let kv_down = h * (kv_lora + u64::from(self.qk_rope_head_dim));
                let kv_up = kv_lora * q_heads * u64::from(self.qk_nope_head_dim + self.v_head_dim);
                let o = q_heads * u64::from(self.v_head_dim) * h;
                (q_up + kv_up + o, 0, q_down + kv_down)
            }
        };
        let dense_layers = if self.is_moe() {
            u64::from(self.first_dense_layers)
        } else {
            layers
        };
        let moe_layers = u64::from(self.moe_layers());
        let dense_ffn_one = 3 * h * u64::from(self.intermediate_size);
        let expert = self.expert_params();
        let router_one = u64::from(self.num_experts) * h;
        let embedding = u64::from(self.vocab_size) * h;
        let attention_one = sharded + kv + replicated;
        // An MTP module is one more decoder layer (MoE when the model is) plus a 2h → h
        // projection of the concatenated embedding and hidden state; it shares embedding and head.
        let mtp_ffn = if self.is_moe() {
            (u64::from(self.num_experts) + u64::from(self.shared_experts)) * expert + router_one
        } else {
            dense_ffn_one
        };
        let mtp = u64::from(self.mtp_layers) * (attention_one + mtp_ffn + 2 * h * h);
        ParamCounts {
            attention_sharded: layers * sharded,
            attention_kv: layers * kv,
            attention_replicated: layers * replicated,
            dense_ffn: dense_layers * dense_ffn_one,
            shared_experts: moe_layers * u64::from(self.shared_experts) * expert,
            routed_experts: moe_layers * u64::from(self.num_experts) * expert,
            router: moe_layers * router_one,
            embedding,
            lm_head: if self.tie_word_embeddings {
                0
            } else {
                embedding
            },
            vision: (self.vision_params_b * 1e9).round() as u64,
            mtp,
        }
    }

    /// Weights multiplied for each token: all attention, the dense FFNs, per MoE layer the
    /// `experts_per_token` routed plus the shared experts and the router, and the LM head. The
    /// input embedding (a lookup), the vision tower and MTP modules are left out; `2 ×` this is
    /// the matmul FLOPs per token. Publishers' `active_params_b` often include the embedding.
    pub fn active_params(&self) -> u64 {
        let c = self.param_counts();
        let per_token_experts = u64::from(self.moe_layers())
            * u64::from(self.experts_per_token + self.shared_experts)
            * self.expert_params();
        c.attention() + c.dense_ffn + per_token_experts + c.router + c.lm_head
    }

    /// Bytes one routed expert of one MoE layer occupies on one GPU: its three matrices in the
    /// released format, sharded across `tp` ranks (`0` is read as 1); 0 for a dense model.
    pub fn expert_bytes_per_gpu(&self, tp: u32) -> u64 {
        if !self.is_moe() {
            return 0;
        }
        self.expert_storage()
            .bytes(self.expert_params())
            .div_ceil(u64::from(tp.max(1)))
    }

    /// Weight bytes one GPU reads on every decode step whatever the batch: everything it holds
    /// except the routed experts (read only when routed to), the input embedding (a decode step
    /// looks up one row per token; kept when tied to the LM head) and the vision tower (unused
    /// for text).
    pub fn dense_read_bytes_per_gpu(&self, tp: u32) -> u64 {
        let tp64 = u64::from(tp.max(1));
        let c = self.param_counts();
        let routed = self.expert_storage().bytes(c.routed_experts).div_ceil(tp64);
        let embedding = if self.tie_word_embeddings {
            0
        } else {
            Storage::Bf16.bytes(c.embedding).div_ceil(tp64)
        };
        let vision = Storage::Bf16.bytes(c.vision);
        self.weight_bytes_per_gpu(tp)
            .saturating_sub(routed + embedding + vision)
    }

    /// Storage of the linear layers other than routed experts.
    fn linear_storage(&self) -> Storage {
        match self.weight_dtype {
            WeightDtype::Fp8 => Storage::Fp8Block,
            WeightDtype::Bf16 | WeightDtype::Int4Experts => Storage::Bf16,
        }
    }

    /// Storage of the routed experts.
    fn expert_storage(&self) -> Storage {
        match self.weight_dtype {
            WeightDtype::Bf16 => Storage::Bf16,
            WeightDtype::Fp8 => Storage::Fp8Block,
            WeightDtype::Int4Experts => Storage::Int4Group32,
        }
    }

    /// Bytes of the weights a server loads, in the released format ([`WeightDtype`]):
    /// [`ParamCounts::loaded`] with each component in its storage (router, embeddings, LM head
    /// and vision tower always BF16). MTP modules are not included; see
    /// [`Model::checkpoint_bytes_derived`].
    pub fn weight_bytes_total(&self) -> u64 {
        let c = self.param_counts();
        let linear = self.linear_storage();
        linear.bytes(c.attention() + c.dense_ffn + c.shared_experts)
            + self.expert_storage().bytes(c.routed_experts)
            + Storage::Bf16.bytes(c.router + c.embedding + c.lm_head + c.vision)
    }

    /// The checkpoint size the architecture implies: [`Model::weight_bytes_total`] plus the MTP
    /// modules (stored like the linear layers). Compared with `checkpoint_gb` by the tests.
    pub fn checkpoint_bytes_derived(&self) -> u64 {
        self.weight_bytes_total() + self.linear_storage().bytes(self.param_counts().mtp)
    }

    /// Weight bytes resident on one GPU with tensor parallelism `tp` (`0` is read as 1), as
    /// SGLang lays the model out without expert or data parallelism:
    ///
    /// * split evenly across ranks (rounded up): Q/O projections (MLA: `q_b`, `kv_b`, O), dense
    ///   FFNs, shared and routed experts (TP-sharded MoE: every rank holds a slice of every
    ///   expert), the vocabulary-parallel embedding and LM head;
    /// * GQA K/V projections: `max(1, kv_heads / tp)` heads per rank, so replicated when
    ///   `kv_heads < tp` (like the KV cache, [`Model::kv_bytes_per_token`]);
    /// * whole on every rank: MLA's `q_a`/`kv_a` down-projections (`ReplicatedLinear` in
    ///   SGLang's `models/deepseek_v2.py`), the MoE router, and the vision tower (assumed
    ///   replicated).
    ///
    /// Norms, biases, quantization metadata other than scales, and any allocation besides the
    /// weights are left out; calibrate against SGLang's `Load weight end … mem usage=` line.
    pub fn weight_bytes_per_gpu(&self, tp: u32) -> u64 {
        let tp = tp.max(1);
        let c = self.param_counts();
        let linear = self.linear_storage();
        let split = linear.bytes(c.attention_sharded + c.dense_ffn + c.shared_experts)
            + self.expert_storage().bytes(c.routed_experts)
            + Storage::Bf16.bytes(c.embedding + c.lm_head);
        let kv_per_rank = match self.attention {
            AttentionKind::Gqa if self.kv_heads > 0 => {
                c.attention_kv / u64::from(self.kv_heads) * u64::from(self.kv_heads_per_rank(tp))
            }
            _ => 0,
        };
        let replicated = linear.bytes(c.attention_replicated + kv_per_rank)
            + Storage::Bf16.bytes(c.router + c.vision);
        split.div_ceil(u64::from(tp)) + replicated
    }

    /// The first thing wrong with this entry, if any.
    fn problem(&self) -> Option<String> {
        if self.name.trim().is_empty() {
            return Some("name must not be empty".into());
        }
        if self.display.trim().is_empty() {
            return Some("display must not be empty".into());
        }
        let required = [
            ("layers", self.layers),
            ("q_heads", self.q_heads),
            ("hidden_size", self.hidden_size),
            ("vocab_size", self.vocab_size),
            ("context_len", self.context_len),
        ];
        if let Some((key, _)) = required.iter().find(|(_, v)| *v == 0) {
            return Some(format!("{key} must be > 0"));
        }
        let gqa_fields = [("kv_heads", self.kv_heads), ("head_dim", self.head_dim)];
        let mla_fields = [
            ("kv_lora_rank", self.kv_lora_rank),
            ("qk_rope_head_dim", self.qk_rope_head_dim),
            ("qk_nope_head_dim", self.qk_nope_head_dim),
            ("v_head_dim", self.v_head_dim),
        ];
        let (needed, foreign, kind, other) = match self.attention {
            AttentionKind::Gqa => (&gqa_fields[..], &mla_fields[..], "gqa", "mla"),
            AttentionKind::Mla => (&mla_fields[..], &gqa_fields[..], "mla", "gqa"),
        };
        if let Some((key, _)) = needed.iter().find(|(_, v)| *v == 0) {
            return Some(format!("{key} must be > 0 for attention = \"{kind}\""));
        }
        if let Some((key, _)) = foreign.iter().find(|(_, v)| *v != 0) {
            return Some(format!("{key} applies only to attention = \"{other}\""));
        }
        if self.attention == AttentionKind::Gqa {
            if self.q_lora_rank != 0 {
                return Some("q_lora_rank applies only to attention = \"mla\"".into());
            }
            if self.q_heads % self.kv_heads != 0 {
                return Some(format!(
                    "q_heads ({}) must be a multiple of kv_heads ({})",
                    self.q_heads, self.kv_heads
                ));
            }
        }
        if self.first_dense_layers > self.layers {
            return Some(format!(
                "first_dense_layers ({}) exceeds layers ({})",
                self.first_dense_layers, self.layers
            ));
        }
        if self.is_moe() {
            if self.experts_per_token == 0 || self.experts_per_token > self.num_experts {
                return Some(format!(
                    "experts_per_token must be between 1 and num_experts ({})",
                    self.num_experts
                ));
            }
            if self.moe_intermediate_size == 0 {
                return Some("moe_intermediate_size must be > 0 for a MoE model".into());
            }
            if self.first_dense_layers == self.layers {
                return Some(
                    "a MoE model needs at least one MoE layer (first_dense_layers < layers)".into(),
                );
            }
            if self.first_dense_layers > 0 && self.intermediate_size == 0 {
                return Some("intermediate_size must be > 0 when there are dense layers".into());
            }
        } else {
            let moe_only = [
                ("experts_per_token", self.experts_per_token),
                ("shared_experts", self.shared_experts),
                ("moe_intermediate_size", self.moe_intermediate_size),
            ];
            if let Some((key, _)) = moe_only.iter().find(|(_, v)| *v != 0) {
                return Some(format!(
                    "{key} applies only to MoE models (num_experts > 0)"
                ));
            }
            if self.first_dense_layers != self.layers {
                return Some(format!(
                    "a dense model has first_dense_layers = layers ({})",
                    self.layers
                ));
            }
            if self.intermediate_size == 0 {
                return Some("intermediate_size must be > 0 for a dense model".into());
            }
        }
        if let Some(p) = positive_and_finite(
            &[
                ("total_params_b", self.total_params_b),
                ("active_params_b", self.active_params_b),
                ("checkpoint_gb", self.checkpoint_gb),
            ],
            &[("vision_params_b", self.vision_params_b)],
        ) {
            return Some(p);
        }
        if self.active_params_b > self.total_params_b {
            return Some("active_params_b exceeds total_params_b".into());
        }
        let vision = [
            self.vision_layers != 0,
            self.vision_hidden_size != 0,
            self.vision_params_b != 0.0,
        ];
        if self.multimodal && vision.contains(&false) {
            return Some(
                "a multimodal model needs vision_layers, vision_hidden_size and vision_params_b"
                    .into(),
            );
        }
        if !self.multimodal && vision.contains(&true) {
            return Some("vision_* fields need multimodal = true".into());
        }
        None
    }
}

/// The first float that is not finite or out of range: `positive` must be > 0, `non_negative`
/// ≥ 0.
fn positive_and_finite(positive: &[(&str, f64)], non_negative: &[(&str, f64)]) -> Option<String> {
    for (key, v) in positive {
        if !v.is_finite() || *v <= 0.0 {
            return Some(format!("{key} must be a finite number > 0, not {v}"));
        }
    }
    for (key, v) in non_negative {
        if !v.is_finite() || *v < 0.0 {
            return Some(format!("{key} must be a finite number >= 0, not {v}"));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Errors

/// Which table an entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A `[[gpu]]` entry.
    Gpu,
    /// A `[[model]]` entry.
    Model,
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EntryKind::Gpu => "GPU",
            EntryKind::Model => "model",
        })
    }
}

/// A line and column in a catalog file, both counted from 1 (columns in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
}

impl Position {
    /// The position of byte offset `at` in `text`.
    fn of(text: &str, at: usize) -> Self {
        let (line, column) = line_col(text, at);
        Position { line, column }
    }
}

/// `origin:line:column: ` or `origin: `.
fn place(origin: &str, position: &Option<Position>) -> String {
    match position {
        Some(p) => format!("{origin}:{}:{}: ", p.line, p.column),
        None => format!("{origin}: "),
    }
}

/// Why a catalog could not be loaded, or a name not found.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The user catalog file could not be read.
    #[error("cannot read catalog file `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not follow the `[[gpu]]`/`[[model]]` schema.
    #[error("{}{message}", place(origin, position))]
    Syntax {
        /// The file (or `<built-in …>`).
        origin: String,
        /// Where the parser stopped, when it says.
        position: Option<Position>,
        /// The parser's message.
        message: String,
    },
    /// An entry parses but its values are inconsistent.
    #[error("{}{kind} `{name}`: {message}", place(origin, position))]
    Invalid {
        /// The file (or `<built-in …>`).
        origin: String,
        /// Where the entry is.
        position: Option<Position>,
        /// GPU or model.
        kind: EntryKind,
        /// The entry's name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A name or alias is used by two entries of the same kind.
    #[error(
        "{}{kind} `{name}`: `{key}` is already a name or alias of {kind} `{other}`",
        place(origin, position)
    )]
    Duplicate {
        /// The file (or `<built-in …>`) of the entry that repeats the key.
        origin: String,
        /// Where that entry is.
        position: Option<Position>,
        /// GPU or model.
        kind: EntryKind,
        /// The entry that repeats the key.
        name: String,
        /// The repeated name or alias.
        key: String,
        /// The entry that already had it.
        other: String,
    },
    /// A lookup found no entry with that name or alias.
    #[error(
        "unknown {kind} `{name}`{}",
        suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default()
    )]
    Unknown {
        /// GPU or model.
        kind: EntryKind,
        /// The name asked for.
        name: String,
        /// The closest known name, if one is close.
        suggestion: Option<String>,
    },
}

// ---------------------------------------------------------------------------------------------
// The catalog

/// The schema of a catalog file: any number of `[[gpu]]` and `[[model]]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    #[serde(default)]
    gpu: Vec<Spanned<Gpu>>,
    #[serde(default)]
    model: Vec<Spanned<Model>>,
}

/// GPUs and models by name. Built from the built-in data, optionally extended by a user file.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalog {
    /// GPUs, built-in order first, then user additions.
    pub gpus: Vec<Gpu>,
    /// Models, built-in order first, then user additions.
    pub models: Vec<Model>,
}

/// What [`Catalog`] needs to know about an entry to merge and look it up.
trait Entry: Clone {
    const KIND: EntryKind;
    fn name(&self) -> &str;
    fn aliases(&self) -> &[String];
    fn problem(&self) -> Option<String>;
}

impl Entry for Gpu {
    const KIND: EntryKind = EntryKind::Gpu;
    fn name(&self) -> &str {
        &self.name
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn problem(&self) -> Option<String> {
        Gpu::problem(self)
    }
}

impl Entry for Model {
    const KIND: EntryKind = EntryKind::Model;
    fn name(&self) -> &str {
        &self.name
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn problem(&self) -> Option<String> {
        Model::problem(self)
    }
}

/// Names are compared trimmed and lowercased.
fn normalize(name: &str) -> String {
    name.trim().to_lowercase()
}

/// Whether `entry` answers to `query` (already normalized) by name or alias.
fn answers_to<E: Entry>(entry: &E, query: &str) -> bool {
    normalize(entry.name()) == query || entry.aliases().iter().any(|a| normalize(a) == query)
}

/// Validate `new` entries of one file and merge them into `list`: a new entry replaces the entry
/// of the same name, others are appended. Afterwards every name and alias must be unique.
fn merge<E: Entry>(
    list: &mut Vec<E>,
    new: Vec<Spanned<E>>,
    text: &str,
    origin: &str,
) -> Result<(), CatalogError> {
    let mut added: Vec<(String, Option<Position>)> = Vec::new();
    for spanned in new {
        let position = Some(Position::of(text, spanned.span().start));
        let entry = spanned.into_inner();
        if let Some(message) = entry.problem() {
            return Err(CatalogError::Invalid {
                origin: origin.to_string(),
                position,
                kind: E::KIND,
                name: entry.name().to_string(),
                message,
            });
        }
        let key = normalize(entry.name());
        if let Some((_, first)) = added.iter().find(|(k, _)| *k == key) {
            let line = first
                .map(|p| format!(" (first at line {})", p.line))
                .unwrap_or_default();
            return Err(CatalogError::Invalid {
                origin: origin.to_string(),
                position,
                kind: E::KIND,
                name: entry.name().to_string(),
                message: format!("defined twice in this file{line}"),
            });
        }
        match list.iter_mut().find(|e| normalize(e.name()) == key) {
            Some(slot) => *slot = entry,
            None => list.push(entry),
        }
        added.push((key, position));
    }
    // Every key (name or alias) must lead to one entry. Report against a new entry when one is
    // involved, so the message points into the file being merged.
    let position_of = |name: &str| {
        added
            .iter()
            .find(|(k, _)| *k == normalize(name))
            .and_then(|(_, p)| *p)
    };
    // Check this file's entries first, so that a clash is reported against the entry being
    // merged (with its line) rather than against the entry it collides with.
    let is_new = |e: &E| added.iter().any(|(k, _)| *k == normalize(e.name()));
    let order = (0..list.len())
        .filter(|&i| is_new(&list[i]))
        .chain((0..list.len()).filter(|&i| !is_new(&list[i])));
    for i in order {
        let entry = &list[i];
        let keys = std::iter::once(entry.name()).chain(entry.aliases().iter().map(String::as_str));
        for key in keys {
            let k = normalize(key);
            if k.is_empty() {
                return Err(CatalogError::Invalid {
                    origin: origin.to_string(),
                    position: position_of(entry.name()),
                    kind: E::KIND,
                    name: entry.name().to_string(),
                    message: "aliases must not be empty".into(),
                });
            }
            let clash = list
                .iter()
                .enumerate()
                .find(|(j, other)| *j != i && answers_to(*other, &k));
            let own_twice = entry
                .aliases()
                .iter()
                .map(|a| normalize(a))
                .chain(std::iter::once(normalize(entry.name())))
                .filter(|a| *a == k)
                .count()
                > 1;
            if let Some((_, other)) = clash {
                return Err(CatalogError::Duplicate {
                    origin: origin.to_string(),
                    position: position_of(entry.name()),
                    kind: E::KIND,
                    name: entry.name().to_string(),
                    key: key.to_string(),
                    other: other.name().to_string(),
                });
            }
            if own_twice {
                return Err(CatalogError::Duplicate {
                    origin: origin.to_string(),
                    position: position_of(entry.name()),
                    kind: E::KIND,
                    name: entry.name().to_string(),
                    key: key.to_string(),
                    other: entry.name().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// The closest name or alias to `query` among `entries`, as the entry's canonical name, if it
/// is close enough to be a typo.
fn suggest<'a, E: Entry + 'a>(
    entries: impl Iterator<Item = &'a E> + Clone,
    query: &str,
) -> Option<&'a str> {
    let query = normalize(query);
    let keys = || {
        entries.clone().flat_map(|e| {
            std::iter::once(e.name())
                .chain(e.aliases().iter().map(String::as_str))
                .map(move |key| (normalize(key), e.name()))
        })
    };
    // A name that starts with what was typed ("a100" → "a100-80gb") beats a near spelling.
    keys()
        .find(|(key, _)| key.starts_with(&query))
        .map(|(_, name)| name)
        .or_else(|| closest(&query, keys()))
}

impl Catalog {
    /// A catalog with no entries (the starting point for [`Catalog::extend_from_str`]).
    pub fn empty() -> Self {
        Catalog {
            gpus: Vec::new(),
            models: Vec::new(),
        }
    }

    /// The built-in catalog, parsed once from the data compiled into the binary.
    ///
    /// # Panics
    ///
    /// If the built-in data is malformed — a broken internal invariant that the unit tests
    /// rule out.
    pub fn builtin() -> Self {
        Self::builtin_ref().clone()
    }

    /// The built-in catalog, shared (see [`Catalog::builtin`]).
    pub fn builtin_ref() -> &'static Catalog {
        static BUILTIN: OnceLock<Catalog> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            let mut catalog = Catalog::empty();
            let parsed = catalog
                .extend_from_str(GPUS_TOML, "<built-in src/catalog/gpus.toml>")
                .and_then(|()| {
                    catalog.extend_from_str(MODELS_TOML, "<built-in src/catalog/models.toml>")
                });
            if let Err(e) = parsed {
                panic!("invariant broken: the built-in catalog data must parse and validate: {e}");
            }
            catalog
        })
    }

    /// The built-in catalog extended by the user catalog file at `path` (same `[[gpu]]` /
    /// `[[model]]` schema): an entry whose name equals an existing name replaces that entry,
    /// other entries are added. Errors name the file and, where the parser gives one, the line
    /// and column.
    pub fn with_user_file(path: &Path) -> Result<Self, CatalogError> {
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut catalog = Catalog::builtin();
        catalog.extend_from_str(&text, &path.display().to_string())?;
        Ok(catalog)
    }

    /// Merge the entries of catalog text `text` (named `origin` in errors) into this catalog, as
    /// [`Catalog::with_user_file`] does. On error the catalog is left unchanged.
    pub fn extend_from_str(&mut self, text: &str, origin: &str) -> Result<(), CatalogError> {
        let file: CatalogFile = toml::from_str(text).map_err(|e| CatalogError::Syntax {
            origin: origin.to_string(),
            position: e.span().map(|s| Position::of(text, s.start)),
            message: e.message().trim_end().to_string(),
        })?;
        let mut next = self.clone();
        merge(&mut next.gpus, file.gpu, text, origin)?;
        merge(&mut next.models, file.model, text, origin)?;
        *self = next;
        Ok(())
    }

    /// The GPU with this name or alias (case-insensitive).
    pub fn gpu(&self, name: &str) -> Option<&Gpu> {
        let query = normalize(name);
        self.gpus.iter().find(|g| answers_to(*g, &query))
    }

    /// The model with this name or alias (case-insensitive).
    pub fn model(&self, name: &str) -> Option<&Model> {
        let query = normalize(name);
        self.models.iter().find(|m| answers_to(*m, &query))
    }

    /// The GPU with this name or alias, or an [`CatalogError::Unknown`] with a suggestion.
    pub fn lookup_gpu(&self, name: &str) -> Result<&Gpu, CatalogError> {
        self.gpu(name).ok_or_else(|| CatalogError::Unknown {
            kind: EntryKind::Gpu,
            name: name.to_string(),
            suggestion: self.suggest_gpu(name).map(str::to_string),
        })
    }

    /// The model with this name or alias, or an [`CatalogError::Unknown`] with a suggestion.
    pub fn lookup_model(&self, name: &str) -> Result<&Model, CatalogError> {
        self.model(name).ok_or_else(|| CatalogError::Unknown {
            kind: EntryKind::Model,
            name: name.to_string(),
            suggestion: self.suggest_model(name).map(str::to_string),
        })
    }

    /// The name of the GPU whose name or alias is closest to `name`, if it is close enough to
    /// be a typo ("did you mean").
    pub fn suggest_gpu(&self, name: &str) -> Option<&str> {
        suggest(self.gpus.iter(), name)
    }

    /// The name of the model whose name or alias is closest to `name`, if it is close enough to
    /// be a typo ("did you mean").
    pub fn suggest_model(&self, name: &str) -> Option<&str> {
        suggest(self.models.iter(), name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin_model(name: &str) -> Model {
        Catalog::builtin()
            .model(name)
            .unwrap_or_else(|| panic!("built-in model {name}"))
            .clone()
    }

    /// A catalog holding only the entries of `text` (plus the built-ins when `with_builtin`).
    fn catalog_from(text: &str) -> Catalog {
        let mut c = Catalog::empty();
        c.extend_from_str(text, "test.toml")
            .expect("test catalog parses");
        c
    }

    // -----------------------------------------------------------------------------------------
    // KV bytes per token, computed by hand

    #[test]
    fn kv_llama_3_1_8b_at_tp1_and_tp8() {
        let m = builtin_model("llama-3.1-8b");
        // TP1: 8 KV heads × 2 (K and V) × 128 head_dim × 32 layers × 2 B (BF16)
        //    = 8 × 2 × 128 × 32 × 2 = 131,072 B.
        assert_eq!(m.kv_bytes_per_token(1, 2), 131_072);
        // TP8: 8 / 8 = 1 head per rank → 1 × 2 × 128 × 32 × 2 = 16,384 B.
        assert_eq!(m.kv_bytes_per_token(8, 2), 16_384);
        // FP8 KV halves it: 1 × 2 × 128 × 32 × 1 = 8,192 B.
        assert_eq!(m.kv_bytes_per_token(8, 1), 8_192);
    }

    #[test]
    fn kv_qwen3_235b_at_tp8_replicates_its_four_kv_heads() {
        let m = builtin_model("qwen3-235b-a22b");
        // TP1: 4 heads × 2 × 128 × 94 layers × 2 B = 192,512 B.
        assert_eq!(m.kv_bytes_per_token(1, 2), 192_512);
        // TP4: 4 / 4 = 1 head per rank → 1 × 2 × 128 × 94 × 2 = 48,128 B.
        assert_eq!(m.kv_bytes_per_token(4, 2), 48_128);
        // TP8: 4 / 8 = 0 → max(1, 0) = 1 head per rank (each head on 2 ranks)
        //    → 1 × 2 × 128 × 94 × 2 = 48,128 B, not 24,064.
        assert_eq!(m.kv_heads_per_rank(8), 1);
        assert_eq!(m.kv_bytes_per_token(8, 2), 48_128);
    }

    #[test]
    fn kv_mla_is_replicated_not_divided_by_tp() {
        for name in ["deepseek-v3", "kimi-k2", "kimi-k2.5"] {
            let m = builtin_model(name);
            // (kv_lora_rank 512 + qk_rope_head_dim 64) × 61 layers × 2 B = 576 × 122 = 70,272 B,
            // the same on every rank whatever the TP.
            assert_eq!(m.kv_bytes_per_token(1, 2), 70_272, "{name} TP1");
            assert_eq!(m.kv_bytes_per_token(8, 2), 70_272, "{name} TP8");
            // FP8 KV: 576 × 61 × 1 = 35,136 B.
            assert_eq!(m.kv_bytes_per_token(8, 1), 35_136, "{name} TP8 FP8");
        }
    }

    #[test]
    fn kv_qwen2_5_7b_at_tp4() {
        let m = builtin_model("qwen2.5-7b");
        // 4 KV heads / TP4 = 1 per rank → 1 × 2 × 128 × 28 layers × 2 B = 14,336 B.
        assert_eq!(m.kv_bytes_per_token(4, 2), 14_336);
        // TP8 replicates: still 1 head per rank → 14,336 B.
        assert_eq!(m.kv_bytes_per_token(8, 2), 14_336);
        // TP1: 4 × 2 × 128 × 28 × 2 = 57,344 B.
        assert_eq!(m.kv_bytes_per_token(1, 2), 57_344);
    }

    #[test]
    fn kv_of_every_model_matches_the_reference_table() {
        // engine-semantics.md §6: whole-model BF16 bytes per token and per GPU at TP8.
        let table: [(&str, u64, u64); 13] = [
            ("llama-3.1-8b", 131_072, 16_384),
            ("llama-3.1-70b", 327_680, 40_960),
            ("llama-3.1-405b", 516_096, 64_512),
            ("qwen2.5-7b", 57_344, 14_336),
            ("qwen2.5-32b", 262_144, 32_768),
            ("qwen2.5-72b", 327_680, 40_960),
            ("qwen3-32b", 262_144, 32_768),
            ("qwen3-30b-a3b", 98_304, 24_576),
            ("qwen3-235b-a22b", 192_512, 48_128),
            ("mixtral-8x7b", 131_072, 16_384),
            ("deepseek-v3", 70_272, 70_272),
            ("kimi-k2", 70_272, 70_272),
            ("kimi-k2.5", 70_272, 70_272),
        ];
        let catalog = Catalog::builtin();
        assert_eq!(catalog.models.len(), table.len());
        for (name, tp1, tp8) in table {
            let m = catalog.model(name).unwrap();
            assert_eq!(m.kv_bytes_per_token(1, 2), tp1, "{name} TP1");
            assert_eq!(m.kv_bytes_per_token(8, 2), tp8, "{name} TP8");
        }
    }

    // -----------------------------------------------------------------------------------------
    // Parameters and weight bytes, on tiny models computed by hand

    const TINY: &str = r#"
[[model]]
name = "tiny-gqa"
display = "Tiny GQA"
layers = 2
attention = "gqa"
q_heads = 4
kv_heads = 2
head_dim = 8
hidden_size = 32
intermediate_size = 64
vocab_size = 100
context_len = 1024
total_params_b = 0.000025
active_params_b = 0.000025
first_dense_layers = 2
weight_dtype = "bf16"
checkpoint_gb = 0.00005

[[model]]
name = "tiny-mla-moe"
display = "Tiny MLA MoE"
layers = 3
attention = "mla"
q_heads = 4
kv_lora_rank = 16
qk_rope_head_dim = 4
qk_nope_head_dim = 8
v_head_dim = 8
q_lora_rank = 12
hidden_size = 32
intermediate_size = 64
vocab_size = 100
context_len = 1024
total_params_b = 0.00004
active_params_b = 0.00003
num_experts = 4
experts_per_token = 2
shared_experts = 1
moe_intermediate_size = 16
first_dense_layers = 1
weight_dtype = "int4-experts"
checkpoint_gb = 0.00006
"#;

    #[test]
    fn weights_of_a_tiny_gqa_model_by_hand() {
        let c = catalog_from(TINY);
        let m = c.model("tiny-gqa").unwrap();
        // Per layer: Q and O 2 × 32 × (4 × 8) = 2,048; K and V 2 × 32 × (2 × 8) = 1,024;
        // FFN 3 × 32 × 64 = 6,144. Two layers. Embedding and LM head 100 × 32 = 3,200 each.
        let p = m.param_counts();
        assert_eq!(p.attention_sharded, 4_096);
        assert_eq!(p.attention_kv, 2_048);
        assert_eq!(p.dense_ffn, 12_288);
        assert_eq!((p.embedding, p.lm_head), (3_200, 3_200));
        // 4,096 + 2,048 + 12,288 + 6,400 = 24,832 params × 2 B = 49,664 B.
        assert_eq!(p.loaded(), 24_832);
        assert_eq!(m.weight_bytes_total(), 49_664);
        assert_eq!(m.weight_bytes_per_gpu(1), 49_664);
        // TP4: split (4,096 + 12,288 + 6,400) × 2 B = 45,568 B / 4 = 11,392 B; K/V: 2 heads over
        // 4 ranks → 1 head per rank = 1,024 params = 2,048 B. 11,392 + 2,048 = 13,440 B.
        assert_eq!(m.weight_bytes_per_gpu(4), 13_440);
        // TP2: 1 head per rank, no replication: exactly half of 49,664.
        assert_eq!(m.weight_bytes_per_gpu(2), 24_832);
        // KV: TP1 2 × 2 × 8 × 2 layers × 2 B = 128; TP4 → 1 head → 64.
        assert_eq!(m.kv_bytes_per_token(1, 2), 128);
        assert_eq!(m.kv_bytes_per_token(4, 2), 64);
    }

    #[test]
    fn weights_of_a_tiny_mla_moe_model_by_hand() {
        let c = catalog_from(TINY);
        let m = c.model("tiny-mla-moe").unwrap();
        // Per layer: q_a 32 × 12 = 384 and kv_a 32 × (16 + 4) = 640 replicated (1,024);
        // q_b 12 × 4 × (8 + 4) = 576, kv_b 16 × 4 × (8 + 8) = 1,024, O 4 × 8 × 32 = 1,024
        // sharded (2,624). Three layers: 7,872 sharded, 3,072 replicated.
        let p = m.param_counts();
        assert_eq!(p.attention_sharded, 7_872);
        assert_eq!(p.attention_replicated, 3_072);
        assert_eq!(p.attention_kv, 0);
        // One dense layer 3 × 32 × 64 = 6,144; expert 3 × 32 × 16 = 1,536; two MoE layers:
        // routed 2 × 4 × 1,536 = 12,288, shared 2 × 1,536 = 3,072, router 2 × 4 × 32 = 256.
        assert_eq!(p.dense_ffn, 6_144);
        assert_eq!(p.routed_experts, 12_288);
        assert_eq!(p.shared_experts, 3_072);
        assert_eq!(p.router, 256);
        // Bytes: BF16 linear (7,872 + 3,072 + 6,144 + 3,072) × 2 = 40,320; INT4 experts
        // 12,288 × 9/16 = 6,912; BF16 router, embedding, head (256 + 6,400) × 2 = 13,312.
        assert_eq!(m.weight_bytes_total(), 40_320 + 6_912 + 13_312);
        // TP2: split (7,872 + 6,144 + 3,072) × 2 + 6,912 + 6,400 × 2 = 53,888 → 26,944 per
        // rank; replicated q_a/kv_a 3,072 × 2 = 6,144 and router 512 → 33,600 B.
        assert_eq!(m.weight_bytes_per_gpu(2), 33_600);
        // Active: attention 10,944 + dense 6,144 + 2 layers × (2 + 1) × 1,536 + router 256
        // + LM head 3,200 = 29,760.
        assert_eq!(m.active_params(), 29_760);
        // KV: (16 + 4) × 3 layers × 2 B = 120, whatever the TP.
        assert_eq!(m.kv_bytes_per_token(1, 2), 120);
        assert_eq!(m.kv_bytes_per_token(8, 2), 120);
    }

    #[test]
    fn storage_formats_by_hand() {
        // FP8 block: 16,384 weights = 16,384 B + one 4-byte scale.
        assert_eq!(Storage::Fp8Block.bytes(16_384), 16_388);
        // INT4 group 32: 32 weights = 16 B + one 2-byte scale.
        assert_eq!(Storage::Int4Group32.bytes(32), 18);
        assert_eq!(Storage::Bf16.bytes(32), 64);
    }

    #[test]
    fn llama_3_1_8b_weights_by_hand() {
        let m = builtin_model("llama-3.1-8b");
        // Per layer: Q, O 2 × 4096² = 33,554,432; K, V 2 × 4096 × 1024 = 8,388,608;
        // FFN 3 × 4096 × 14336 = 176,160,768 → 218,103,808 × 32 = 6,979,321,856.
        // Embedding + LM head 2 × 128,256 × 4,096 = 1,050,673,152. Total 8,029,995,008.
        assert_eq!(m.param_counts().loaded(), 8_029_995_008);
        assert_eq!(m.weight_bytes_total(), 16_059_990_016);
        // TP8 divides everything evenly (8 KV heads): 16,059,990,016 / 8.
        assert_eq!(m.weight_bytes_per_gpu(8), 2_007_498_752);
    }

    #[test]
    fn derived_sizes_agree_with_the_published_figures() {
        for m in Catalog::builtin().models {
            let p = m.param_counts();
            let total_b = (p.loaded() - p.vision) as f64 / 1e9;
            let rel = |a: f64, b: f64| (a - b).abs() / b;
            assert!(
                rel(total_b, m.total_params_b) < 0.02,
                "{}: {total_b:.2}B from the architecture vs {} published",
                m.name,
                m.total_params_b
            );
            // Publishers may count the input embedding as active; allow for it.
            let active_b = m.active_params() as f64 / 1e9;
            let with_embedding = active_b + p.embedding as f64 / 1e9;
            assert!(
                rel(active_b, m.active_params_b) < 0.1
                    || rel(with_embedding, m.active_params_b) < 0.1,
                "{}: {active_b:.2}B active vs {} published",
                m.name,
                m.active_params_b
            );
            let checkpoint_gb = m.checkpoint_bytes_derived() as f64 / 1e9;
            assert!(
                rel(checkpoint_gb, m.checkpoint_gb) < 0.015,
                "{}: {checkpoint_gb:.1} GB from the architecture vs checkpoint_gb {}",
                m.name,
                m.checkpoint_gb
            );
            // Per-GPU weights shrink with TP but never below an even split.
            let one = m.weight_bytes_per_gpu(1);
            assert_eq!(one, m.weight_bytes_total(), "{}", m.name);
            let eight = m.weight_bytes_per_gpu(8);
            assert!(eight >= one / 8 && eight < one, "{}", m.name);
        }
    }

    #[test]
    fn kimi_k2_5_replicates_its_mla_down_projections_router_and_vision_tower() {
        let m = builtin_model("kimi-k2.5");
        // Replicated per rank, BF16: q_a + kv_a 7,168 × (1,536 + 576) × 61 = 923,467,776
        // params; router 384 × 7,168 × 60 = 165,150,720; vision 0.4e9.
        let replicated = 2 * (923_467_776 + 165_150_720 + 400_000_000);
        let split = m.weight_bytes_total() - replicated;
        assert_eq!(m.weight_bytes_per_gpu(8), split.div_ceil(8) + replicated);
        // About 77 GB (71.7 GiB) per GPU at TP8.
        let gib = m.weight_bytes_per_gpu(8) as f64 / (1u64 << 30) as f64;
        assert!((71.0..72.5).contains(&gib), "{gib}");
    }

    // -----------------------------------------------------------------------------------------
    // The built-in data

    #[test]
    fn every_builtin_entry_parses_and_validates() {
        let c = Catalog::builtin();
        let gpus: Vec<&str> = c.gpus.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            gpus,
            [
                "a100-80gb",
                "h100",
                "h200",
                "b200",
                "l40s",
                "rtx-pro-6000",
                "mi300x"
            ]
        );
        let models: Vec<&str> = c.models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            models,
            [
                "llama-3.1-8b",
                "llama-3.1-70b",
                "llama-3.1-405b",
                "qwen2.5-7b",
                "qwen2.5-32b",
                "qwen2.5-72b",
                "qwen3-32b",
                "qwen3-30b-a3b",
                "qwen3-235b-a22b",
                "mixtral-8x7b",
                "deepseek-v3",
                "kimi-k2",
                "kimi-k2.5"
            ]
        );
        for g in &c.gpus {
            assert_eq!(g.problem(), None, "{}", g.name);
            assert!(!g.source.is_empty(), "{} has no source", g.name);
        }
        for m in &c.models {
            assert_eq!(m.problem(), None, "{}", m.name);
            assert!(!m.source.is_empty(), "{} has no source", m.name);
        }
    }

    #[test]
    fn builtin_names_are_lowercase_hyphenated_and_all_keys_unique() {
        let c = Catalog::builtin();
        let is_key = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "-._/".contains(ch))
        };
        let mut gpu_keys = Vec::new();
        for g in &c.gpus {
            assert!(is_key(&g.name) && !g.name.contains('/'), "{}", g.name);
            gpu_keys.push(g.name.clone());
            gpu_keys.extend(g.aliases.iter().cloned());
        }
        let mut model_keys = Vec::new();
        for m in &c.models {
            assert!(is_key(&m.name) && !m.name.contains('/'), "{}", m.name);
            model_keys.push(m.name.clone());
            model_keys.extend(m.aliases.iter().cloned());
        }
        for keys in [gpu_keys, model_keys] {
            for k in &keys {
                assert!(is_key(k), "`{k}` is not lowercase");
            }
            let mut sorted = keys.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), keys.len(), "a name or alias repeats");
        }
    }

    #[test]
    fn gpu_memory_is_what_nvidia_smi_reports() {
        // engine-semantics.md §1.4 / §7 (MI300X: rocm-smi 206,141,652,992 B = 196,592 MiB).
        let c = Catalog::builtin();
        let expected = [
            ("a100-80gb", 81_920),
            ("h100", 81_559),
            ("h200", 143_771),
            ("b200", 183_359),
            ("l40s", 46_068),
            ("rtx-pro-6000", 97_887),
            ("mi300x", 196_592),
        ];
        for (name, mib) in expected {
            assert_eq!(c.gpu(name).unwrap().memory_mib, mib, "{name}");
        }
        assert_eq!(c.gpu("mi300x").unwrap().memory_bytes(), 206_141_652_992);
        assert_eq!(c.gpu("a100-80gb").unwrap().fp8_dense_tflops, 0.0);
    }

    #[test]
    fn kimi_k2_5_facts() {
        let m = builtin_model("kimi-k2.5");
        assert_eq!(m.weight_dtype, WeightDtype::Int4Experts);
        assert!(m.multimodal);
        assert_eq!((m.vision_layers, m.vision_hidden_size), (27, 1152));
        assert_eq!(m.context_len, 262_144);
        assert_eq!(
            (m.num_experts, m.experts_per_token, m.shared_experts),
            (384, 8, 1)
        );
        assert_eq!((m.first_dense_layers, m.moe_layers()), (1, 60));
    }

    // -----------------------------------------------------------------------------------------
    // Lookups

    #[test]
    fn lookups_accept_names_and_aliases_in_any_case() {
        let c = Catalog::builtin();
        assert_eq!(c.gpu("H100-SXM").unwrap().name, "h100");
        assert_eq!(
            c.gpu(" RTX-PRO-6000-Blackwell ").unwrap().name,
            "rtx-pro-6000"
        );
        assert_eq!(c.gpu("mi300x").unwrap().name, "mi300x");
        assert_eq!(
            c.model("meta-llama/Llama-3.1-8B-Instruct").unwrap().name,
            "llama-3.1-8b"
        );
        assert_eq!(c.model("moonshotai/Kimi-K2.5").unwrap().name, "kimi-k2.5");
        assert_eq!(c.model("KIMI-K2.5").unwrap().name, "kimi-k2.5");
        assert!(
            c.gpu("llama-3.1-8b").is_none(),
            "GPUs and models are separate"
        );
        assert!(c.model("h100").is_none());
    }

    #[test]
    fn unknown_names_get_a_suggestion() {
        let c = Catalog::builtin();
        assert_eq!(c.suggest_gpu("h1000"), Some("h100"));
        assert_eq!(c.suggest_gpu("rtx-pro-600"), Some("rtx-pro-6000"));
        assert_eq!(c.suggest_model("llama-3-8b"), Some("llama-3.1-8b"));
        assert_eq!(c.suggest_model("kimi-k2.6"), Some("kimi-k2.5"));
        // An alias that is close leads to its entry's name.
        assert_eq!(c.suggest_gpu("h100-sxm4"), Some("h100"));
        assert_eq!(c.suggest_model("gpt-4"), None);
        let e = c.lookup_gpu("h1000").unwrap_err();
        assert_eq!(e.to_string(), "unknown GPU `h1000` (did you mean `h100`?)");
        let e = c.lookup_model("gpt-4").unwrap_err();
        assert_eq!(e.to_string(), "unknown model `gpt-4`");
        assert_eq!(c.lookup_model("Qwen/Qwen3-32B").unwrap().name, "qwen3-32b");
    }

    // -----------------------------------------------------------------------------------------
    // User catalog files

    #[test]
    fn a_user_file_overrides_an_entry_and_adds_new_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("my-catalog.toml");
        let text = format!(
            r#"
[[gpu]]
name = "H100"          # same name, any case: replaces the built-in entry
aliases = ["h100-sxm"]
display = "H100 at our negotiated price"
memory_mib = 81559
hbm_bandwidth_gb_per_s = 3350
bf16_dense_tflops = 989
fp8_dense_tflops = 1979
interconnect = "nvlink4"
interconnect_gb_per_s = 450
collective_latency_us = 8
price_usd_per_hour = 1.99
{TINY}"#
        );
        std::fs::write(&path, text).unwrap();
        let builtin = Catalog::builtin();
        let c = Catalog::with_user_file(&path).unwrap();
        assert_eq!(c.gpus.len(), builtin.gpus.len());
        let h100 = c.gpu("h100-sxm").unwrap();
        assert_eq!(h100.price_usd_per_hour, 1.99);
        assert_eq!(h100.display, "H100 at our negotiated price");
        // It keeps its place in the list.
        assert_eq!(c.gpus[1].price_usd_per_hour, 1.99);
        // The replaced entry's other aliases are gone with it.
        assert!(c.gpu("h100-sxm5").is_none());
        assert_eq!(c.models.len(), builtin.models.len() + 2);
        assert_eq!(c.model("tiny-gqa").unwrap().layers, 2);
        assert_eq!(c.model("llama-3.1-8b"), builtin.model("llama-3.1-8b"));
    }

    #[test]
    fn a_malformed_user_file_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(
            &path,
            "[[gpu]]\nname = \"x\"\ndisplay = \"X\"\nmemory_mib = \"lots\"\n",
        )
        .unwrap();
        let e = Catalog::with_user_file(&path).unwrap_err();
        match &e {
            CatalogError::Syntax { position, .. } => {
                assert_eq!(position.map(|p| p.line), Some(4), "{e}");
            }
            other => panic!("expected a syntax error, got {other:?}"),
        }
        let shown = e.to_string();
        assert!(
            shown.starts_with(&format!("{}:4:", path.display())),
            "{shown}"
        );

        // An unknown key is reported at its line too.
        let mut c = Catalog::builtin();
        let e = c
            .extend_from_str("\n[[model]]\nname = \"m\"\nlayrs = 3\n", "typo.toml")
            .unwrap_err();
        assert!(e.to_string().starts_with("typo.toml:4:"), "{e}");
        assert!(e.to_string().contains("layrs"), "{e}");

        // Broken TOML.
        let e = c.extend_from_str("[[gpu]\n", "broken.toml").unwrap_err();
        assert!(e.to_string().starts_with("broken.toml:1:"), "{e}");

        // A missing file.
        let e = Catalog::with_user_file(&dir.path().join("absent.toml")).unwrap_err();
        assert!(matches!(e, CatalogError::Read { .. }), "{e}");
        assert!(e.to_string().contains("absent.toml"), "{e}");
    }

    #[test]
    fn inconsistent_entries_are_refused_with_their_line() {
        // A GQA model without kv_heads, starting on line 3 of the text.
        let text = TINY.replace("kv_heads = 2\n", "");
        let mut c = Catalog::builtin();
        let before = c.clone();
        let e = c.extend_from_str(&text, "user.toml").unwrap_err();
        assert!(
            matches!(&e, CatalogError::Invalid { kind: EntryKind::Model, name, .. } if name == "tiny-gqa"),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("user.toml:2:"), "{e}");
        assert!(e.to_string().contains("kv_heads must be > 0"), "{e}");
        assert_eq!(c, before, "a failed merge leaves the catalog unchanged");

        // MLA fields on a GQA model.
        let text = TINY.replacen("head_dim = 8\n", "head_dim = 8\nkv_lora_rank = 4\n", 1);
        let e = c.extend_from_str(&text, "user.toml").unwrap_err();
        assert!(e.to_string().contains("kv_lora_rank applies only"), "{e}");

        // A dense model must be dense all the way.
        let text = TINY.replacen("first_dense_layers = 2", "first_dense_layers = 1", 1);
        let e = c.extend_from_str(&text, "user.toml").unwrap_err();
        assert!(e.to_string().contains("first_dense_layers = layers"), "{e}");
    }

    #[test]
    fn names_and_aliases_must_stay_unique() {
        let mut c = Catalog::builtin();
        // A new GPU taking an alias of the H100.
        let text = r#"
[[gpu]]
name = "my-gpu"
aliases = ["H100-SXM"]
display = "Mine"
memory_mib = 1
hbm_bandwidth_gb_per_s = 1
bf16_dense_tflops = 1
fp8_dense_tflops = 0
interconnect = "pcie4"
interconnect_gb_per_s = 1
collective_latency_us = 1
price_usd_per_hour = 0
"#;
        let e = c.extend_from_str(text, "user.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "user.toml:2:1: GPU `my-gpu`: `H100-SXM` is already a name or alias of GPU `h100`"
        );
        // The same name twice in one file.
        let twice = format!(
            "{TINY}{}",
            TINY.split("[[model]]")
                .nth(1)
                .map(|t| format!("[[model]]{t}"))
                .unwrap()
        );
        let e = c.extend_from_str(&twice, "user.toml").unwrap_err();
        assert!(e.to_string().contains("defined twice in this file"), "{e}");
    }
}
