//! Models: architecture facts from `config.json`, and what the memory model and the roofline
//! derive from them — KV bytes per token under tensor parallelism (SGLang's rules), parameters
//! by component, weight bytes in total and per GPU.
//!
//! The schema makes an inconsistent entry unwritable: the attention is a tagged table holding
//! exactly the sizes its kind has ([`Attention`]), and the experts and the vision tower are
//! optional tables ([`Moe`], [`VisionTower`]) rather than fields that are 0 when they do not
//! apply. What the types cannot say (sizes > 0, `experts_per_token ≤ num_experts`, …) is
//! checked by [`Model::problem`].

use serde::{Deserialize, Deserializer, Serialize};

use super::error::attention_is_a_table;
use super::positive_and_finite;

/// Weights per FP32 scale in DeepSeek-style block FP8 (128 × 128 blocks).
const FP8_BLOCK_WEIGHTS: u64 = 128 * 128;

/// How a model's attention stores its KV cache, with the sizes of that kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Attention {
    /// Grouped-query (or multi-head) attention: `kv_heads` K and V heads of `head_dim` each.
    Gqa {
        /// Key/value heads (`num_key_value_heads`).
        kv_heads: u32,
        /// Dimension of each K and V head.
        head_dim: u32,
    },
    /// DeepSeek's multi-head latent attention: one compressed latent of
    /// `kv_lora_rank + qk_rope_head_dim` values per token and layer.
    Mla {
        /// Rank of the compressed KV latent.
        kv_lora_rank: u32,
        /// Dimension of the decoupled RoPE key, stored next to the latent.
        qk_rope_head_dim: u32,
        /// Per-head query/key dimension without RoPE.
        qk_nope_head_dim: u32,
        /// Per-head value dimension.
        v_head_dim: u32,
        /// Rank of the compressed query; `None` when queries are not compressed.
        #[serde(default)]
        q_lora_rank: Option<u32>,
    },
}

/// The routed experts of a mixture-of-experts model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Moe {
    /// Routed experts per MoE layer (`num_experts`, `n_routed_experts` or `num_local_experts`).
    pub num_experts: u32,
    /// Routed experts each token uses per MoE layer (`num_experts_per_tok`).
    pub experts_per_token: u32,
    /// Always-active shared experts per MoE layer (`n_shared_experts`), each of
    /// `moe_intermediate_size`.
    #[serde(default)]
    pub shared_experts: u32,
    /// FFN width of one expert.
    pub moe_intermediate_size: u32,
    /// Dense layers before the MoE layers (`first_k_dense_replace`); 0 when every layer is MoE.
    #[serde(default)]
    pub first_dense_layers: u32,
}

/// A vision tower (and its projector).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VisionTower {
    /// Layers.
    pub layers: u32,
    /// Hidden size.
    pub hidden_size: u32,
    /// Parameters of the tower and projector, billions.
    pub params_b: f64,
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
    /// Every linear layer (attention, dense FFNs, shared and routed experts) in INT4 with one BF16
    /// scale per group of 32 weights (AWQ / GPTQ-style W4A16); router, embeddings, LM head and
    /// vision tower in BF16.
    #[serde(rename = "int4")]
    Int4,
    /// Routed experts in INT4 with one BF16 scale per group of 32 weights (compressed-tensors
    /// `pack-quantized`, symmetric); attention, shared experts, dense layers, embeddings, LM head
    /// and vision tower in BF16 (Kimi-K2.5, Kimi-K2-Thinking).
    #[serde(rename = "int4-experts")]
    Int4Experts,
}

impl WeightDtype {
    /// Every format, in the order documentation lists them.
    pub const ALL: [WeightDtype; 4] = [
        WeightDtype::Bf16,
        WeightDtype::Fp8,
        WeightDtype::Int4,
        WeightDtype::Int4Experts,
    ];

    /// The name as written in catalogs and scenarios (`model.weight_dtype`).
    pub fn as_str(self) -> &'static str {
        match self {
            WeightDtype::Bf16 => "bf16",
            WeightDtype::Fp8 => "fp8",
            WeightDtype::Int4 => "int4",
            WeightDtype::Int4Experts => "int4-experts",
        }
    }

    /// The format named `name` (as [`WeightDtype::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == name)
    }

    /// Whether the linear layers other than the routed experts are FP8, so that a GPU with FP8
    /// tensor cores runs their matmuls at its FP8 rate (SGLang's block-FP8 W8A8 path).
    pub fn fp8_matmuls(self) -> bool {
        self == WeightDtype::Fp8
    }
}

/// One model: architecture facts from its `config.json`, sizes, and the released dtype.
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
    /// Query heads (`num_attention_heads`).
    pub q_heads: u32,
    /// The attention kind and its sizes, which decide the KV-cache layout.
    #[serde(deserialize_with = "attention_table")]
    pub attention: Attention,
    /// Width of the residual stream.
    pub hidden_size: u32,
    /// Width of a dense FFN layer (the config value; unused when no layer is dense).
    pub intermediate_size: u32,
    /// Vocabulary size (rows of the embedding and of the LM head).
    pub vocab_size: u32,
    /// Whether the LM head shares the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Longest context the released config allows (`max_position_embeddings`).
    pub context_len_tokens: u32,
    /// Total parameters as published, billions.
    pub total_params_b: f64,
    /// Parameters active per token as published, billions.
    pub active_params_b: f64,
    /// The routed experts; `None` for a dense model.
    #[serde(default)]
    pub moe: Option<Moe>,
    /// Multi-token-prediction modules shipped in the checkpoint (`num_nextn_predict_layers`);
    /// they count in `checkpoint_gb` but are not loaded for plain serving.
    #[serde(default)]
    pub mtp_layers: u32,
    /// Storage format of the released weights.
    pub weight_dtype: WeightDtype,
    /// Size of the released weights in GB (10⁹ bytes).
    pub checkpoint_gb: f64,
    /// The vision tower; `None` for a text-only model. With one, SGLang lowers its default
    /// static fraction.
    #[serde(default)]
    pub vision: Option<VisionTower>,
    /// Where the figures come from.
    #[serde(default)]
    pub source: String,
}

/// `attention` as a table (an internally tagged [`Attention`]), with a clear message for the flat
/// schema's `attention = "gqa"`.
fn attention_table<'de, D: Deserializer<'de>>(d: D) -> Result<Attention, D::Error> {
    use serde::de::{self, MapAccess, Visitor};
    struct Table;
    impl<'de> Visitor<'de> for Table {
        type Value = Attention;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a table `{ kind = \"gqa\", … }` or `{ kind = \"mla\", … }`")
        }
        fn visit_str<E: de::Error>(self, kind: &str) -> Result<Attention, E> {
            Err(E::custom(attention_is_a_table(kind)))
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Attention, A::Error> {
            Attention::deserialize(de::value::MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_any(Table)
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
pub(super) enum Storage {
    /// 2 bytes per weight.
    Bf16,
    /// 1 byte per weight plus one 4-byte scale per 128 × 128 block.
    Fp8Block,
    /// Half a byte per weight plus one 2-byte scale per 32 weights: 9/16 byte per weight.
    Int4Group32,
}

impl Storage {
    /// Bytes holding `params` weights (scales rounded up).
    pub(super) fn bytes(self, params: u64) -> u64 {
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
        self.moe.is_some()
    }

    /// Number of MoE layers (`layers − first_dense_layers`; 0 for a dense model).
    pub fn moe_layers(&self) -> u32 {
        self.moe
            .map_or(0, |moe| self.layers.saturating_sub(moe.first_dense_layers))
    }

    /// Number of dense layers (all of them for a dense model).
    pub fn dense_layers(&self) -> u32 {
        self.moe.map_or(self.layers, |moe| moe.first_dense_layers)
    }

    /// Routed experts per MoE layer (0 for a dense model).
    pub fn num_experts(&self) -> u32 {
        self.moe.map_or(0, |moe| moe.num_experts)
    }

    /// Routed experts each token uses per MoE layer (0 for a dense model).
    pub fn experts_per_token(&self) -> u32 {
        self.moe.map_or(0, |moe| moe.experts_per_token)
    }

    /// Shared experts per MoE layer (0 for a dense model).
    fn shared_experts(&self) -> u32 {
        self.moe.map_or(0, |moe| moe.shared_experts)
    }

    /// KV heads each tensor-parallel rank stores for a GQA model: `max(1, kv_heads / tp)`, so
    /// heads are split across ranks and replicated when there are fewer heads than ranks
    /// (SGLang `configs/model_config.py: get_num_kv_heads`). For MLA it is 1: the single latent,
    /// whole on every rank. `tp = 0` is read as 1.
    pub fn kv_heads_per_rank(&self, tp: u32) -> u32 {
        match self.attention {
            Attention::Gqa { kv_heads, .. } => (kv_heads / tp.max(1)).max(1),
            Attention::Mla { .. } => 1,
        }
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
            Attention::Gqa { head_dim, .. } => {
                let heads = u64::from(self.kv_heads_per_rank(tp));
                heads * 2 * u64::from(head_dim) * layers * bytes
            }
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => u64::from(kv_lora_rank + qk_rope_head_dim) * layers * bytes,
        }
    }

    /// Parameters of one expert (gate, up and down projections): `3 × hidden × moe_intermediate`;
    /// 0 for a dense model.
    pub fn expert_params(&self) -> u64 {
        self.moe.map_or(0, |moe| {
            3 * u64::from(self.hidden_size) * u64::from(moe.moe_intermediate_size)
        })
    }

    /// Parameters by component, computed from the architecture fields (not from
    /// `total_params_b`). Every FFN and expert is gated (gate, up, down).
    pub fn param_counts(&self) -> ParamCounts {
        let h = u64::from(self.hidden_size);
        let layers = u64::from(self.layers);
        let q_heads = u64::from(self.q_heads);
        // Attention parameters of one layer: (sharded, K/V by head, replicated).
        let (sharded, kv, replicated) = match self.attention {
            Attention::Gqa { kv_heads, head_dim } => {
                let q_width = q_heads * u64::from(head_dim);
                let kv_width = u64::from(kv_heads) * u64::from(head_dim);
                // Q and O are q_width × hidden each; K and V are kv_width × hidden each.
                (2 * h * q_width, 2 * h * kv_width, 0)
            }
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                qk_nope_head_dim,
                v_head_dim,
                q_lora_rank,
            } => {
                let qk_head = u64::from(qk_nope_head_dim + qk_rope_head_dim);
                let kv_lora = u64::from(kv_lora_rank);
                let (q_up, q_down) = match q_lora_rank {
                    Some(q_lora) => {
                        let q_lora = u64::from(q_lora);
                        (q_lora * q_heads * qk_head, h * q_lora)
                    }
                    None => (h * q_heads * qk_head, 0),
                };
                let kv_down = h * (kv_lora + u64::from(qk_rope_head_dim));
                let kv_up = kv_lora * q_heads * u64::from(qk_nope_head_dim + v_head_dim);
                let o = q_heads * u64::from(v_head_dim) * h;
                (q_up + kv_up + o, 0, q_down + kv_down)
            }
        };
        let dense_layers = u64::from(self.dense_layers());
        let moe_layers = u64::from(self.moe_layers());
        let dense_ffn_one = 3 * h * u64::from(self.intermediate_size);
        let expert = self.expert_params();
        let num_experts = u64::from(self.num_experts());
        let shared_experts = u64::from(self.shared_experts());
        let router_one = num_experts * h;
        let embedding = u64::from(self.vocab_size) * h;
        let attention_one = sharded + kv + replicated;
        // An MTP module is one more decoder layer (MoE when the model is) plus a 2h → h
        // projection of the concatenated embedding and hidden state; it shares embedding and head.
        let mtp_ffn = if self.is_moe() {
            (num_experts + shared_experts) * expert + router_one
        } else {
            dense_ffn_one
        };
        let mtp = u64::from(self.mtp_layers) * (attention_one + mtp_ffn + 2 * h * h);
        ParamCounts {
            attention_sharded: layers * sharded,
            attention_kv: layers * kv,
            attention_replicated: layers * replicated,
            dense_ffn: dense_layers * dense_ffn_one,
            shared_experts: moe_layers * shared_experts * expert,
            routed_experts: moe_layers * num_experts * expert,
            router: moe_layers * router_one,
            embedding,
            lm_head: if self.tie_word_embeddings {
                0
            } else {
                embedding
            },
            vision: self.vision.map_or(0, |v| (v.params_b * 1e9).round() as u64),
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
            * u64::from(self.experts_per_token() + self.shared_experts())
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
            WeightDtype::Int4 => Storage::Int4Group32,
            WeightDtype::Bf16 | WeightDtype::Int4Experts => Storage::Bf16,
        }
    }

    /// Storage of the routed experts.
    fn expert_storage(&self) -> Storage {
        match self.weight_dtype {
            WeightDtype::Bf16 => Storage::Bf16,
            WeightDtype::Fp8 => Storage::Fp8Block,
            WeightDtype::Int4 | WeightDtype::Int4Experts => Storage::Int4Group32,
        }
    }

    /// This model with its weights stored as `dtype` (a quantised variant of the checkpoint):
    /// weight bytes in memory and bytes read per step follow it.
    pub fn with_weight_dtype(&self, dtype: WeightDtype) -> Model {
        Model {
            weight_dtype: dtype,
            ..self.clone()
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
            Attention::Gqa { kv_heads, .. } if kv_heads > 0 => {
                c.attention_kv / u64::from(kv_heads) * u64::from(self.kv_heads_per_rank(tp))
            }
            _ => 0,
        };
        let replicated = linear.bytes(c.attention_replicated + kv_per_rank)
            + Storage::Bf16.bytes(c.router + c.vision);
        split.div_ceil(u64::from(tp)) + replicated
    }

    /// The first thing wrong with this entry that its types do not rule out, if any: sizes of 0,
    /// counts that do not fit together, parameter figures out of range.
    pub(super) fn problem(&self) -> Option<String> {
        if self.name.trim().is_empty() {
            return Some("name must not be empty".into());
        }
        if self.display.trim().is_empty() {
            return Some("display must not be empty".into());
        }
        let mut sizes = vec![
            ("layers", self.layers),
            ("q_heads", self.q_heads),
            ("hidden_size", self.hidden_size),
            ("vocab_size", self.vocab_size),
            ("context_len_tokens", self.context_len_tokens),
        ];
        match self.attention {
            Attention::Gqa { kv_heads, head_dim } => sizes.extend([
                ("attention.kv_heads", kv_heads),
                ("attention.head_dim", head_dim),
            ]),
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                qk_nope_head_dim,
                v_head_dim,
                q_lora_rank,
            } => {
                sizes.extend([
                    ("attention.kv_lora_rank", kv_lora_rank),
                    ("attention.qk_rope_head_dim", qk_rope_head_dim),
                    ("attention.qk_nope_head_dim", qk_nope_head_dim),
                    ("attention.v_head_dim", v_head_dim),
                ]);
                if q_lora_rank == Some(0) {
                    return Some(
                        "attention.q_lora_rank must be > 0; leave it out when queries are not compressed"
                            .into(),
                    );
                }
            }
        }
        if self.dense_layers() > 0 {
            sizes.push((
                "intermediate_size (the dense layers' FFN width)",
                self.intermediate_size,
            ));
        }
        if let Some(moe) = &self.moe {
            sizes.extend([
                ("moe.num_experts", moe.num_experts),
                ("moe.moe_intermediate_size", moe.moe_intermediate_size),
            ]);
        }
        if let Some(v) = &self.vision {
            sizes.extend([
                ("vision.layers", v.layers),
                ("vision.hidden_size", v.hidden_size),
            ]);
        }
        if let Some((key, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Some(format!("{key} must be > 0"));
        }
        if let Attention::Gqa { kv_heads, .. } = self.attention {
            if self.q_heads % kv_heads != 0 {
                return Some(format!(
                    "q_heads ({}) must be a multiple of attention.kv_heads ({kv_heads})",
                    self.q_heads
                ));
            }
        }
        if let Some(moe) = &self.moe {
            if moe.experts_per_token == 0 || moe.experts_per_token > moe.num_experts {
                return Some(format!(
                    "moe.experts_per_token must be between 1 and moe.num_experts ({})",
                    moe.num_experts
                ));
            }
            if moe.first_dense_layers >= self.layers {
                return Some(format!(
                    "moe.first_dense_layers ({}) must be below layers ({}): a MoE model needs at least one MoE layer (a dense model has no `moe`)",
                    moe.first_dense_layers, self.layers
                ));
            }
        }
        let mut positive = vec![
            ("total_params_b", self.total_params_b),
            ("active_params_b", self.active_params_b),
            ("checkpoint_gb", self.checkpoint_gb),
        ];
        positive.extend(self.vision.map(|v| ("vision.params_b", v.params_b)));
        if let Some(p) = positive_and_finite(&positive, &[]) {
            return Some(p);
        }
        if self.active_params_b > self.total_params_b {
            return Some("active_params_b exceeds total_params_b".into());
        }
        None
    }
}
