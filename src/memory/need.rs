//! What an engine allocates outside its weights and KV pool, per GPU, derived from the model's
//! shapes and the engine's settings the way SGLang 0.5.23 and vLLM 0.33.0 size those
//! allocations. This is what SGLang's slack `(1 − f) · M_pre` must hold, and what vLLM
//! subtracts from its budget after profiling.
//!
//! Every term names the engine file that allocates it:
//!
//! * **workspace** — SGLang's "constant meta data (e.g., from attention backend)", 512 MiB
//!   (`arg_groups/memory_hook.py: handle_gpu_memory_settings`), which holds FlashInfer's
//!   384 MiB workspace (`environ.py: SGLANG_FLASHINFER_WORKSPACE_SIZE`).
//! * **activations** — the largest transient of one forward pass: a prefill chunk of
//!   `chunked_prefill_size` tokens (`max_prefill_tokens` with chunking off), or a decode batch
//!   larger than the CUDA graphs, run eagerly, with its logits and sampler
//!   (`layers/logits_processor.py`: BF16 LM-head output cast to FP32; `layers/sampler.py`: one
//!   FP32 working copy for top-k/top-p). The live tensors of a layer are counted from its
//!   shapes ([`ForwardShapes`]). The decode batch is as large as `max_running_requests`, the
//!   client's requests in flight and the prompts the pool holds allow ([`ClientLoad`]): the
//!   verdict is for this scenario's load, not for one SGLang never sees.
//! * **CUDA graphs** — the decode graphs' shared pool holds one forward of the largest
//!   captured batch (`model_executor/runner/decode_cuda_graph_runner.py`), and every captured
//!   graph adds its own memory: 8 MiB each, SGLang's own figure for a graph's non-torch memory
//!   (`reserve_for_graph_mb`), for the decode batch sizes of
//!   `arg_groups/cuda_graph_hook.py: generate_decode_cuda_graph_batch_sizes` and the prefill
//!   token counts of `generate_prefill_cuda_graph_batch_sizes` (prefill graphs are on by default
//!   on CUDA in 0.5.23; for MLA SGLang reserves 1.5 GiB for them instead).
//! * **logits buffer** — the FP32 `(max_bs, vocab)` buffer the decode graphs write into
//!   (`model_executor/graph_shared_output.py: GraphSharedOutput.get_logits_buffer`).
//! * **request-to-token table** — `(max_running_requests + 1) × (context_len + 4)` int32
//!   (`mem_cache/memory_pool.py: ReqToTokenPool`, sized in
//!   `mem_cache/kv_cache_configurator.py: _build_default_req_pool`), allocated after the KV
//!   pool was sized, so out of the slack.
//!
//! The communicators (NCCL, custom all-reduce) are set up before SGLang measures `M_pre`
//! (`engine-semantics.md` §1.1), so they are in the memory before the weights, not here. Not
//! counted: the allocator's fragmentation, speculative decoding, DP attention, DeepEP buffers,
//! image encoders at work — the verdict's margin is there for what is not modelled.
//!
//! vLLM measures instead of guessing (`v1/worker/gpu_worker.py: determine_available_memory`):
//! its profiling run is a forward of `max_num_batched_tokens` tokens followed by the sampler on
//! `min(max_num_seqs, max_num_batched_tokens)` rows (`v1/worker/gpu_model_runner.py:
//! profile_run`, `_dummy_sampler_run`), and its CUDA-graph estimate is the first (largest)
//! capture plus each further graph (`profile_cudagraph_memory`), over the capture sizes of
//! `config/vllm.py` — [`vllm_activation_peak_gib`] and [`vllm_cuda_graph_gib`] size the same
//! runs from the model.

use serde::Serialize;

use super::GIB;
use crate::catalog::{Attention, Model};
use crate::workload::{CachedPrefixes, WorkloadSpec};

/// Bytes of one BF16 activation element.
const ACT_BYTES: f64 = 2.0;
/// Bytes per logits element while sampling: the BF16 LM-head output, its FP32 cast, and one
/// FP32 working copy of the sampler.
const SAMPLER_BYTES: f64 = 2.0 + 4.0 + 4.0;
/// SGLang's constant metadata and attention workspace, MiB.
const WORKSPACE_MIB: f64 = 512.0;
/// Memory of one captured CUDA graph besides the shared pool, MiB (SGLang's figure).
const PER_GRAPH_MIB: f64 = 8.0;
/// SGLang's reservation for MLA prefill graphs, MiB.
const MLA_PREFILL_GRAPHS_MIB: f64 = 1536.0;

/// The shapes of a forward pass on one GPU that decide its activation memory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ForwardShapes {
    /// Peak live activation bytes per token in one layer: the residual stream (hidden state and
    /// residual) plus the larger of the attention's tensors and the FFN's (or the MoE kernel's
    /// intermediate caches).
    pub bytes_per_token: f64,
    /// Vocabulary size (logits columns).
    pub vocab: f64,
}

impl ForwardShapes {
    /// The shapes of `model` at tensor parallelism `tp`.
    ///
    /// Per token, in elements: the residual stream `2h`; GQA attention `q/TP` query, `kv`
    /// key and value heads per rank and the output, each `head_dim` wide; MLA (prefill runs it
    /// as multi-head attention) the expanded keys, values and queries of `heads/TP` heads plus
    /// the latents; a dense FFN its gate-up output and activation, `3 × intermediate/TP`; a MoE
    /// layer `k` routed rows of the fused kernel's caches, `k × max(3N, N + h)` with
    /// `N = moe_intermediate/TP` (`layers/moe/moe_runner/triton_utils/fused_moe.py`), plus the
    /// FP32 router logits.
    pub fn new(model: &Model, tp: u32) -> Self {
        let tp = f64::from(tp.max(1));
        let h = f64::from(model.hidden_size);
        let heads = f64::from(model.q_heads) / tp;
        let attention = match model.attention {
            Attention::Gqa { head_dim, .. } => {
                let kv = f64::from(model.kv_heads_per_rank(tp as u32));
                (2.0 * heads + 2.0 * kv) * f64::from(head_dim)
            }
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                qk_nope_head_dim,
                v_head_dim,
                q_lora_rank,
            } => {
                let qk = f64::from(qk_nope_head_dim + qk_rope_head_dim);
                heads * (3.0 * qk + 2.0 * f64::from(v_head_dim))
                    + f64::from(kv_lora_rank + qk_rope_head_dim)
                    + f64::from(q_lora_rank.unwrap_or(0))
            }
        };
        let dense = if model.dense_layers() > 0 {
            3.0 * f64::from(model.intermediate_size) / tp
        } else {
            0.0
        };
        let moe = model.moe.map_or(0.0, |m| {
            let n = f64::from(m.moe_intermediate_size) / tp;
            let routed = f64::from(m.experts_per_token) * (3.0 * n).max(n + h)
                + 2.0 * f64::from(m.num_experts);
            let shared = 3.0 * f64::from(m.shared_experts) * n;
            routed.max(shared)
        });
        ForwardShapes {
            bytes_per_token: ACT_BYTES * (2.0 * h + attention.max(dense).max(moe)),
            vocab: f64::from(model.vocab_size),
        }
    }

    /// Peak activation bytes of a forward over `tokens` tokens.
    pub fn forward_bytes(&self, tokens: u64) -> f64 {
        tokens as f64 * self.bytes_per_token
    }

    /// Bytes of the logits and the sampler for `rows` rows.
    pub fn sampler_bytes(&self, rows: u64) -> f64 {
        rows as f64 * self.vocab * SAMPLER_BYTES
    }
}

/// SGLang's decode CUDA-graph batch sizes up to `max_bs`
/// (`generate_decode_cuda_graph_batch_sizes`, without speculative decoding).
pub fn sglang_decode_graph_sizes(max_bs: u32) -> Vec<u32> {
    let mut sizes: Vec<u32> = [1, 2, 4, 8, 12]
        .into_iter()
        .chain((16..=256).step_by(8))
        .chain((272..512).step_by(16))
        .chain((512..=max_bs.max(512)).step_by(32))
        .filter(|&b| b <= max_bs)
        .collect();
    if max_bs > 0 && !sizes.contains(&max_bs) {
        sizes.push(max_bs);
    }
    sizes
}

/// SGLang's prefill CUDA-graph token counts up to `max_tokens`
/// (`generate_prefill_cuda_graph_batch_sizes`).
pub fn sglang_prefill_graph_sizes(max_tokens: u32) -> Vec<u32> {
    (4..=32)
        .step_by(4)
        .chain((48..=256).step_by(16))
        .chain((288..=512).step_by(32))
        .chain((576..=1024).step_by(64))
        .chain((1280..=4096).step_by(256))
        .chain((4608..=max_tokens.max(4608)).step_by(512))
        .filter(|&t| t <= max_tokens)
        .collect()
}

/// SGLang's `max_running_requests` for a pool of `pool_tokens`
/// (`mem_cache/kv_cache_configurator.py: resolve_max_num_reqs`): the given value, or the
/// estimate from the context length, `clamp(pool / context × 512, 2048, 4096)` (4096 without
/// one), capped at half the pool.
pub fn sglang_max_running_requests(
    given: Option<u64>,
    pool_tokens: u64,
    context_len: Option<u64>,
) -> u64 {
    let estimated = match context_len {
        Some(ctx) => ((pool_tokens as f64 / ctx as f64 * 512.0) as u64).clamp(2048, 4096),
        None => 4096,
    };
    given.unwrap_or(estimated).min((pool_tokens / 2).max(1))
}

/// What the scenario's client and workload let the decode batch reach, besides the engine's
/// limit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ClientLoad {
    /// The most requests in flight: the client's concurrency, or all its requests.
    pub max_in_flight: u64,
    /// The prompts' mean length: a running request holds at least its prompt and one token of
    /// the pool.
    pub mean_prompt_tokens: f64,
    /// With shared prefixes and the engine's prefix cache on: what the prompts need with the
    /// prefixes held once ([`prompts_fit`]).
    #[serde(skip)]
    pub cached_prefixes: Option<CachedPrefixes>,
}

impl ClientLoad {
    /// The load of workload `w` sent by a client that keeps at most `concurrency` requests in
    /// flight (`None`: no limit; prefixes counted as cached: see [`ClientLoad::with_cache`]).
    pub fn new(w: &WorkloadSpec, concurrency: Option<u32>) -> Self {
        ClientLoad {
            max_in_flight: concurrency.map_or(w.requests, |n| w.requests.min(u64::from(n))),
            mean_prompt_tokens: w.mean_lengths().0,
            cached_prefixes: w.cached_prefixes(),
        }
    }

    /// The same load with the engine's prefix cache `on` or off (off: every request holds its
    /// own copy of its prefix).
    pub fn with_cache(self, on: bool) -> Self {
        ClientLoad {
            cached_prefixes: self.cached_prefixes.filter(|_| on),
            ..self
        }
    }

    /// The largest decode batch a pool of `pool_tokens` can hold under this load, at most
    /// `limit` (the engine's): `min(limit, in flight, prompts that fit)` ([`prompts_fit`]).
    pub fn largest_batch(load: Option<&Self>, limit: u64, pool_tokens: u64) -> u64 {
        match load {
            None => limit,
            Some(l) => {
                let fits = prompts_fit(pool_tokens, l.mean_prompt_tokens, l.cached_prefixes);
                limit.min(l.max_in_flight).min(fits)
            }
        }
    }
}

/// How many requests' prompts a pool of `pool_tokens` holds at once, each with one token to
/// decode into: `pool / (mean prompt + 1)`. With a prefix cache keeping the shared prefixes
/// (`cached`), each prefix is held once and each request adds only its own tokens,
/// `(pool − prefixes) / (mean own prompt + 1)` — the larger of the two, since an engine evicts
/// the prefixes that do not pay for themselves. At least 1.
pub fn prompts_fit(
    pool_tokens: u64,
    mean_prompt_tokens: f64,
    cached: Option<CachedPrefixes>,
) -> u64 {
    let pool = pool_tokens as f64;
    let plain = (pool / (mean_prompt_tokens.max(0.0) + 1.0)) as u64;
    let shared = cached.map_or(0, |c| {
        ((pool - c.resident_tokens).max(0.0) / (c.mean_own_prompt_tokens.max(0.0) + 1.0)) as u64
    });
    plain.max(shared).max(1)
}

/// What SGLang's slack must hold, derived from the model and the engine settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SglangNeed {
    /// The model's forward-pass shapes on one GPU.
    pub shapes: ForwardShapes,
    /// Tokens of the largest prefill forward: `chunked_prefill_size`, or `max_prefill_tokens`
    /// with chunking off.
    pub prefill_tokens: u64,
    /// The largest decode batch replayed as a CUDA graph (`cuda_graph_max_bs`).
    pub cuda_graph_max_bs: u32,
    /// Whether the model uses MLA (SGLang then reserves 1.5 GiB for prefill graphs).
    pub mla: bool,
    /// `engine.max_running_requests`, when given.
    pub max_running_requests: Option<u64>,
    /// The model's context length (each row of the request-to-token table).
    pub context_len_tokens: u64,
    /// What the scenario's client lets the decode batch reach; `None`: the engine's limit.
    pub load: Option<Box<ClientLoad>>,
}

/// The terms of the memory outside the weights and the KV pool, per GPU, GiB.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlackTerms {
    /// Constant metadata and the attention backend's workspace.
    pub workspace_gib: f64,
    /// The largest transient of a forward pass.
    pub activations_gib: f64,
    /// What the largest transient is, in words.
    pub activations_for: String,
    /// CUDA graphs: their shared pool and each graph's own memory.
    pub cuda_graphs_gib: f64,
    /// How many graphs, in words.
    pub cuda_graphs_for: String,
    /// The persistent FP32 logits buffer of the decode graphs.
    pub logits_buffer_gib: f64,
    /// SGLang's request-to-token table.
    pub req_to_token_gib: f64,
    /// Its shape, in words.
    pub req_to_token_for: String,
    /// The `max_running_requests` the table and the largest decode batch are sized by.
    pub max_running_requests: u64,
}

impl SlackTerms {
    /// The sum, GiB.
    pub fn total_gib(&self) -> f64 {
        self.workspace_gib
            + self.activations_gib
            + self.cuda_graphs_gib
            + self.logits_buffer_gib
            + self.req_to_token_gib
    }
}

impl SglangNeed {
    /// The terms for a KV pool of `pool_tokens` (which decides SGLang's default
    /// `max_running_requests`).
    pub fn terms(&self, pool_tokens: u64) -> SlackTerms {
        let s = &self.shapes;
        let running = sglang_max_running_requests(
            self.max_running_requests,
            pool_tokens,
            Some(self.context_len_tokens),
        );
        let max_bs = u64::from(self.cuda_graph_max_bs).min(running);
        let prefill = s.forward_bytes(self.prefill_tokens);
        // A decode batch above the largest graph runs eagerly: its activations, logits and
        // sampler are allocated outside the graph pool.
        let batch = ClientLoad::largest_batch(self.load.as_deref(), running, pool_tokens);
        let eager = (batch > max_bs).then(|| s.forward_bytes(batch) + s.sampler_bytes(batch));
        let (activations, activations_for) = match eager {
            Some(e) if e > prefill => (
                e,
                format!("a decode batch of {batch} requests beyond the CUDA graphs, with its logits and sampler"),
            ),
            _ => (prefill, format!("a prefill forward of {} tokens", self.prefill_tokens)),
        };
        let decode = sglang_decode_graph_sizes(max_bs as u32).len();
        let graph_pool = s.forward_bytes(max_bs);
        let (prefill_graphs_mib, prefill_graphs) = if self.mla {
            (
                MLA_PREFILL_GRAPHS_MIB,
                "1.5 GiB for MLA prefill graphs".to_string(),
            )
        } else {
            let n = sglang_prefill_graph_sizes(self.prefill_tokens.min(u64::from(u32::MAX)) as u32)
                .len();
            (n as f64 * PER_GRAPH_MIB, format!("{n} prefill"))
        };
        let graphs_mib = decode as f64 * PER_GRAPH_MIB + prefill_graphs_mib;
        SlackTerms {
            workspace_gib: WORKSPACE_MIB / 1024.0,
            activations_gib: activations / GIB,
            activations_for,
            cuda_graphs_gib: (graph_pool + graphs_mib * 1024.0 * 1024.0) / GIB,
            cuda_graphs_for: format!("{decode} decode up to {max_bs}, {prefill_graphs}"),
            logits_buffer_gib: max_bs as f64 * s.vocab * 4.0 / GIB,
            req_to_token_gib: (running + 1) as f64 * (self.context_len_tokens + 4) as f64 * 4.0
                / GIB,
            req_to_token_for: format!(
                "{} rows × {} tokens of context + 4, int32",
                running + 1,
                self.context_len_tokens
            ),
            max_running_requests: running,
        }
    }
}

/// vLLM's capture sizes for its CUDA graphs (`config/vllm.py`, no speculative decoding): 1, 2,
/// 4, every 8 up to 248, every 16 from 256, up to `min(2 × max_num_seqs, 512,
/// max_num_batched_tokens)`, plus `max_num_batched_tokens` when it is within that.
pub fn vllm_capture_sizes(max_num_seqs: u32, max_num_batched_tokens: u32) -> Vec<u32> {
    let max = (2 * u64::from(max_num_seqs))
        .min(512)
        .min(u64::from(max_num_batched_tokens)) as u32;
    let mut sizes: Vec<u32> = [1, 2, 4].into_iter().filter(|&s| s <= max).collect();
    if max >= 8 {
        sizes.extend((8..(max + 1).min(256)).step_by(8));
    }
    if max >= 256 {
        sizes.extend((256..=max).step_by(16));
    }
    if max_num_batched_tokens <= max && !sizes.contains(&max_num_batched_tokens) {
        sizes.push(max_num_batched_tokens);
    }
    sizes
}

/// The transient peak of vLLM's profiling run, GiB: the larger of a forward of
/// `max_num_batched_tokens` tokens and the sampler on `min(max_num_seqs, max_num_batched_tokens)`
/// rows with their last hidden states.
pub fn vllm_activation_peak_gib(
    shapes: &ForwardShapes,
    max_num_seqs: u32,
    max_num_batched_tokens: u32,
) -> f64 {
    let rows = u64::from(max_num_seqs.min(max_num_batched_tokens));
    let forward = shapes.forward_bytes(u64::from(max_num_batched_tokens));
    let sampler = shapes.sampler_bytes(rows) + shapes.forward_bytes(rows);
    forward.max(sampler) / GIB
}

/// vLLM's CUDA-graph estimate, GiB: the first capture (the largest size, which sizes the
/// shared pool) plus each further graph, for its piecewise graphs of every capture size and its
/// full decode graphs of the sizes up to `max_num_seqs` (the default `FULL_AND_PIECEWISE`
/// mode).
pub fn vllm_cuda_graph_gib(
    shapes: &ForwardShapes,
    max_num_seqs: u32,
    max_num_batched_tokens: u32,
) -> f64 {
    let sizes = vllm_capture_sizes(max_num_seqs, max_num_batched_tokens);
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let full = sizes.iter().filter(|&&s| s <= max_num_seqs).count();
    let graphs = sizes.len() + full;
    (shapes.forward_bytes(u64::from(largest)) + graphs as f64 * PER_GRAPH_MIB * 1024.0 * 1024.0)
        / GIB
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn model(name: &str) -> Model {
        Catalog::builtin().model(name).unwrap().clone()
    }

    #[test]
    fn the_graph_size_lists_are_the_engines() {
        let d = sglang_decode_graph_sizes(256);
        assert_eq!(d.len(), 36);
        assert_eq!(&d[..6], &[1, 2, 4, 8, 12, 16]);
        assert_eq!(*d.last().unwrap(), 256);
        let d512 = sglang_decode_graph_sizes(512);
        assert_eq!(d512.len(), 36 + 15 + 1);
        assert_eq!(sglang_decode_graph_sizes(100).last(), Some(&100));
        let p = sglang_prefill_graph_sizes(8192);
        assert_eq!(p.len(), 8 + 14 + 8 + 8 + 12 + 8);
        assert_eq!(*p.last().unwrap(), 8192);
        let v = vllm_capture_sizes(1024, 8192);
        assert_eq!(v.len(), 3 + 31 + 17);
        assert_eq!(*v.last().unwrap(), 512);
        assert_eq!(vllm_capture_sizes(256, 2048).len(), 51);
        assert_eq!(vllm_capture_sizes(16, 2048), [1, 2, 4, 8, 16, 24, 32]);
    }

    #[test]
    fn a_dense_layer_by_hand() {
        // Llama-3.1-8B at TP 1: residual 2 × 4096; attention (2 × 32 + 2 × 8) × 128 = 10 240;
        // FFN 3 × 14 336 = 43 008 — the FFN is the peak: (8192 + 43 008) × 2 B = 102 400 B.
        let s = ForwardShapes::new(&model("llama-3.1-8b"), 1);
        assert_eq!(s.bytes_per_token, 102_400.0);
        // A chunk of 8192 tokens: 0.78 GiB.
        assert!((s.forward_bytes(8192) / GIB - 0.78125).abs() < 1e-12);
        // At TP 4 the FFN and the heads split, the residual stream does not.
        let s4 = ForwardShapes::new(&model("llama-3.1-8b"), 4);
        assert_eq!(s4.bytes_per_token, 2.0 * (8192.0 + 3.0 * 14_336.0 / 4.0));
    }

    #[test]
    fn a_moe_layer_counts_the_fused_kernels_caches() {
        // Qwen3-30B-A3B at TP 1: k = 8 rows of max(3 × 768, 768 + 2048) = 2816, plus 2 × 128
        // for the FP32 router logits: 22 784; residual 4096.
        let s = ForwardShapes::new(&model("qwen3-30b-a3b"), 1);
        assert_eq!(s.bytes_per_token, 2.0 * (4096.0 + 8.0 * 2816.0 + 256.0));
    }

    #[test]
    fn attention_wider_than_the_ffn_counts_both_keys_and_values() {
        // Llama-3.1-8B's shapes with an FFN of 1024: the FFN's 3 × 1024 = 3072 falls below the
        // attention's (2 × 32 query/output + 2 × 8 key/value heads) × 128 = 10 240, which is the
        // peak: (8192 + 10 240) × 2 B = 36 864 B.
        let mut m = model("llama-3.1-8b");
        m.intermediate_size = 1024;
        assert_eq!(ForwardShapes::new(&m, 1).bytes_per_token, 36_864.0);
    }

    #[test]
    fn mla_prefill_attention_counts_queries_keys_and_their_products_by_hand() {
        // DeepSeek-V3 at TP 1 (it does not fit one GPU; the shapes do not care): 128 heads of
        // qk 128 + 64 = 192 and v 128, so 128 × (3 × 192 + 2 × 128) = 106 496, plus the latents
        // 512 + 64 and the query LoRA 1536: 108 608. That beats the dense FFN, 3 × 18 432 =
        // 55 296, and the MoE layer, 8 × max(3 × 2048, 2048 + 7168) + 2 × 256 = 74 240.
        // Residual 2 × 7168 = 14 336: (14 336 + 108 608) × 2 B = 245 888 B.
        let s = ForwardShapes::new(&model("deepseek-v3"), 1);
        assert_eq!(s.bytes_per_token, 245_888.0);
    }

    #[test]
    fn shared_experts_wider_than_the_routed_rows_are_the_peak() {
        // Qwen3-30B-A3B's shapes with 2 routed experts a token and 8 shared ones: the routed
        // rows, 2 × max(3 × 768, 768 + 2048) + 2 × 128 = 5888, fall below the shared experts'
        // 3 × 8 × 768 = 18 432, which also beats the attention's (64 + 8) × 128 = 9216:
        // (4096 + 18 432) × 2 B = 45 056 B.
        let mut m = model("qwen3-30b-a3b");
        let moe = m.moe.as_mut().unwrap();
        moe.experts_per_token = 2;
        moe.shared_experts = 8;
        assert_eq!(ForwardShapes::new(&m, 1).bytes_per_token, 45_056.0);
    }

    #[test]
    fn sglangs_running_requests_are_capped_at_half_the_pool() {
        // A pool of 3000 tokens: the estimate 3000 / 131 072 × 512 = 11 is raised to 2048, then
        // capped at 3000 / 2 = 1500; a given 5000 too; a given 100 stays; a pool of 1 allows 1.
        let ctx = Some(131_072);
        assert_eq!(sglang_max_running_requests(None, 3000, ctx), 1500);
        assert_eq!(sglang_max_running_requests(Some(5000), 3000, ctx), 1500);
        assert_eq!(sglang_max_running_requests(Some(100), 3000, ctx), 100);
        assert_eq!(sglang_max_running_requests(None, 1, ctx), 1);
    }

    #[test]
    fn sglangs_estimate_of_running_requests_lies_between_2048_and_4096() {
        // Contexts of 131 072 tokens: a pool of 6 of them gives 6 × 512 = 3072; of 20, 10 240,
        // cut to 4096; of 1, 512, raised to 2048. Without a context length, 4096.
        let ctx = Some(131_072);
        assert_eq!(sglang_max_running_requests(None, 6 * 131_072, ctx), 3072);
        assert_eq!(sglang_max_running_requests(None, 20 * 131_072, ctx), 4096);
        assert_eq!(sglang_max_running_requests(None, 131_072, ctx), 2048);
        assert_eq!(sglang_max_running_requests(None, 20 * 131_072, None), 4096);
    }

    #[test]
    fn a_client_never_has_more_requests_in_flight_than_it_sends() {
        use crate::workload::Lengths;
        let w = WorkloadSpec {
            requests: 100,
            lengths: Lengths::Rows {
                file: "rows.csv".into(),
                rows: std::sync::Arc::from(vec![(100, 50)]),
            },
            max_new_tokens: None,
            ignore_eos: false,
            prefix_groups: Vec::new(),
        };
        // 100 requests under a concurrency of 1000: 100 in flight at most; of 10: 10.
        assert_eq!(ClientLoad::new(&w, Some(1000)).max_in_flight, 100);
        assert_eq!(ClientLoad::new(&w, Some(10)).max_in_flight, 10);
        assert_eq!(ClientLoad::new(&w, None).max_in_flight, 100);
        assert_eq!(ClientLoad::new(&w, None).mean_prompt_tokens, 100.0);
    }

    #[test]
    fn a_decode_batch_as_large_as_the_largest_graph_runs_in_the_graph() {
        // Llama-3.1-8B, chunks of 2048 tokens, graphs up to 256: a batch of 256 replays the
        // largest graph, so the peak is the prefill, 2048 × 102 400 B; a batch of 257 runs
        // eagerly, 257 × (102 400 + 128 256 × 10) B = 355 934 720 B, more than the prefill's
        // 209 715 200 B.
        let need = |in_flight: u64| SglangNeed {
            shapes: ForwardShapes::new(&model("llama-3.1-8b"), 1),
            prefill_tokens: 2048,
            cuda_graph_max_bs: 256,
            mla: false,
            max_running_requests: None,
            context_len_tokens: 131_072,
            load: Some(Box::new(ClientLoad {
                max_in_flight: in_flight,
                mean_prompt_tokens: 100.0,
                cached_prefixes: None,
            })),
        };
        let t = need(256).terms(400_000);
        assert!(
            (t.activations_gib - 2048.0 * 102_400.0 / GIB).abs() < 1e-12,
            "{t:?}"
        );
        assert!(t.activations_for.contains("prefill forward of 2048 tokens"));
        let t = need(257).terms(400_000);
        assert!(
            (t.activations_gib - 355_934_720.0 / GIB).abs() < 1e-12,
            "{t:?}"
        );
    }

    #[test]
    fn vllm_captures_max_num_batched_tokens_when_it_is_the_largest_size() {
        // max_num_seqs 256, max_num_batched_tokens 100: the largest size is min(512, 512, 100) =
        // 100: 1, 2, 4, every 8 up to 96 (12 sizes), and 100 itself.
        let v = vllm_capture_sizes(256, 100);
        assert_eq!(v.len(), 3 + 12 + 1);
        assert_eq!(&v[v.len() - 2..], &[96, 100]);
    }

    #[test]
    fn vllms_sampler_rows_are_at_most_max_num_batched_tokens() {
        // max_num_seqs 1024 but 512 tokens a step: the dummy sampler runs on 512 rows,
        // 512 × (128 256 × 10 + 102 400) B = 709 099 520 B, above the forward's 512 × 102 400 B.
        let s = ForwardShapes::new(&model("llama-3.1-8b"), 1);
        let peak = vllm_activation_peak_gib(&s, 1024, 512);
        assert!((peak - 709_099_520.0 / GIB).abs() < 1e-12, "{peak}");
    }

    #[test]
    fn sglang_terms_for_llama_on_one_h100() {
        let need = SglangNeed {
            shapes: ForwardShapes::new(&model("llama-3.1-8b"), 1),
            prefill_tokens: 8192,
            cuda_graph_max_bs: 256,
            mla: false,
            max_running_requests: None,
            context_len_tokens: 131_072,
            load: None,
        };
        let t = need.terms(400_000);
        // 400 000 / 131 072 × 512 = 1562 → 2048 running; the table is 2049 × 131 076 × 4 B.
        assert_eq!(t.max_running_requests, 2048);
        assert!((t.req_to_token_gib - 2049.0 * 131_076.0 * 4.0 / GIB).abs() < 1e-12);
        // An eager decode batch of 2048: 2048 × (102 400 + 128 256 × 10) B beats the prefill's
        // 8192 × 102 400 B.
        let eager = 2048.0 * (102_400.0 + 128_256.0 * 10.0) / GIB;
        assert!((t.activations_gib - eager).abs() < 1e-12, "{t:?}");
        // 36 decode and 58 prefill graphs of 8 MiB, and the pool of a 256-token forward.
        let graphs = (256.0 * 102_400.0 + 94.0 * 8.0 * 1024.0 * 1024.0) / GIB;
        assert!((t.cuda_graphs_gib - graphs).abs() < 1e-12);
        assert!((t.logits_buffer_gib - 256.0 * 128_256.0 * 4.0 / GIB).abs() < 1e-12);
        // A user cap below the graphs removes the eager batch: the prefill chunk is the peak.
        let capped = SglangNeed {
            max_running_requests: Some(128),
            ..need.clone()
        }
        .terms(400_000);
        assert!((capped.activations_gib - 8192.0 * 102_400.0 / GIB).abs() < 1e-12);
        assert!(capped.total_gib() < t.total_gib());
        // So does a client that keeps 100 requests in flight, and a pool that holds only 250
        // prompts of 1,599 tokens: the batch never leaves the graphs.
        for (in_flight, pool) in [(100, 400_000), (5000, 400_000)] {
            let load = ClientLoad {
                max_in_flight: in_flight,
                mean_prompt_tokens: 1599.0,
                cached_prefixes: None,
            };
            let t = SglangNeed {
                load: Some(Box::new(load)),
                ..need.clone()
            }
            .terms(pool);
            assert!((t.activations_gib - 8192.0 * 102_400.0 / GIB).abs() < 1e-12);
        }
        // But when 1,500 of those 1,599 tokens are a prefix the radix cache holds once, the
        // pool holds ⌊(400,000 − 1,500) / (99 + 1)⌋ = 3,985 requests: the batch reaches the
        // 2,048 slots and runs eagerly, as above.
        let cached = ClientLoad {
            max_in_flight: 5000,
            mean_prompt_tokens: 1599.0,
            cached_prefixes: Some(CachedPrefixes {
                resident_tokens: 1500.0,
                mean_own_prompt_tokens: 99.0,
            }),
        };
        let with_cache = |on: bool| {
            SglangNeed {
                load: Some(Box::new(cached.with_cache(on))),
                ..need.clone()
            }
            .terms(400_000)
            .activations_gib
        };
        assert!((with_cache(true) - eager).abs() < 1e-12);
        assert!((with_cache(false) - 8192.0 * 102_400.0 / GIB).abs() < 1e-12);
        // With 1,000 in flight and short prompts the batch of 1,000 runs eagerly.
        let load = ClientLoad {
            max_in_flight: 1000,
            mean_prompt_tokens: 100.0,
            cached_prefixes: None,
        };
        let t = SglangNeed {
            load: Some(Box::new(load)),
            ..need
        }
        .terms(400_000);
        assert!((t.activations_gib - 1000.0 * (102_400.0 + 1_282_560.0) / GIB).abs() < 1e-12);
    }
}
