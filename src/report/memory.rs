//! `servesim memory`: the KV-budget derivation as a table, and the verdict.

use std::fmt::Write;

use serde::Serialize;

use super::text::thousands;
use crate::memory::prompts_fit;
use crate::memory::{EngineSources, MemorySources, SglangSources, VllmSources};
use crate::memory::{SglangMemory, SlackNeed, VllmMemory};
use crate::scenario::{MemoryDerivation, MemoryModel};
use crate::scenario::{PolicySpec, Scenario};

/// The derivation, term by term.
pub fn derivation(m: &MemoryModel, scenario_name: &str) -> String {
    let mut w = String::new();
    let engine = match m.derivation {
        MemoryDerivation::Sglang(_) => "SGLang",
        MemoryDerivation::Vllm(_) => "vLLM",
    };
    let _ = writeln!(w, "servesim memory — {scenario_name}");
    let _ = writeln!(
        w,
        "{} on {} (TP {}), {engine}; every figure is per GPU",
        m.model, m.gpu, m.tensor_parallel
    );
    let _ = writeln!(w);
    match (&m.derivation, &m.sources.engine) {
        (MemoryDerivation::Sglang(s), EngineSources::Sglang(own)) => {
            sglang_table(&mut w, &m.sources, own, s)
        }
        (MemoryDerivation::Vllm(v), EngineSources::Vllm(own)) => {
            vllm_table(&mut w, &m.sources, own, v)
        }
        _ => panic!(
            "invariant broken: a memory model's engine sources are those of its derivation's engine"
        ),
    }
    w
}

/// How many requests fit in a server's KV pool at once when requests share prefixes, without
/// and with the engine's prefix cache (`None` for a workload that shares nothing).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AtOnce {
    /// The pool runs use (the derived one, or the pin).
    pub pool_tokens: u64,
    /// `max_running_requests` (SGLang) or `max_num_seqs` (vLLM): no more run at once.
    pub slot_limit: u64,
    /// The prompts' mean length, the prefix included.
    pub mean_prompt_tokens: f64,
    /// Each request holding its whole prompt and one token: `min(slot limit, pool / (mean
    /// prompt + 1))`.
    pub without_cache: u64,
    /// The engine's cache: `radix cache` or `prefix caching`.
    pub cache: &'static str,
    /// Whether it is on.
    pub cache_on: bool,
    /// Every group's prefix, held once (a drawn length by its mean).
    pub resident_prefix_tokens: f64,
    /// A request's mean prompt beyond its prefix.
    pub mean_own_prompt_tokens: f64,
    /// With the cache on (`None` when off): `min(slot limit, (pool − prefixes) / (mean own
    /// prompt + 1))`, or the count without the cache when that is larger.
    pub with_cache: Option<u64>,
    /// What the count with the cache assumes.
    pub assumption: &'static str,
}

/// What the cache assumes when it counts the requests that fit.
const AT_ONCE_ASSUMES: &str = "the prefixes stay resident (held once, shared by every request of their group) and the pool holds only prompts and one token each";

/// [`AtOnce`] for `sc`, when its requests share prefixes.
pub fn at_once(sc: &Scenario) -> Option<AtOnce> {
    let cached = sc.workload.cached_prefixes()?;
    let (cache, cache_on) = match &sc.engine.policy {
        PolicySpec::Sglang(s) => ("radix cache", !s.disable_radix_cache),
        PolicySpec::Vllm(v) => ("prefix caching", v.enable_prefix_caching),
    };
    let pool = sc.engine.kv_capacity_tokens;
    let slots = u64::from(sc.engine.policy.max_running_requests());
    let (prompt, _) = sc.workload.mean_lengths();
    Some(AtOnce {
        pool_tokens: pool,
        slot_limit: slots,
        mean_prompt_tokens: prompt,
        without_cache: prompts_fit(pool, prompt, None).min(slots),
        cache,
        cache_on,
        resident_prefix_tokens: cached.resident_tokens,
        mean_own_prompt_tokens: cached.mean_own_prompt_tokens,
        with_cache: cache_on.then(|| prompts_fit(pool, prompt, Some(cached)).min(slots)),
        assumption: AT_ONCE_ASSUMES,
    })
}

/// [`AtOnce`] in words: two lines and the assumption.
pub fn at_once_text(a: &AtOnce) -> String {
    let mut w = String::new();
    let _ = writeln!(
        w,
        "requests at once in the {}-token pool (at most {} by the slot limit):",
        thousands(a.pool_tokens),
        thousands(a.slot_limit)
    );
    row(
        &mut w,
        "each holding its whole prompt",
        thousands(a.without_cache),
        format!(
            "pool / (mean prompt {} + 1): every request its own copy of its prefix",
            thousands(a.mean_prompt_tokens.round() as u64)
        ),
    );
    match a.with_cache {
        Some(n) => {
            row(
                &mut w,
                &format!("with the {} on", a.cache),
                thousands(n),
                format!(
                    "(pool − {} prefix tokens held once) / (mean own prompt {} + 1)",
                    thousands(a.resident_prefix_tokens.round() as u64),
                    thousands(a.mean_own_prompt_tokens.round() as u64)
                ),
            );
            let _ = writeln!(w, "  assumes {}", a.assumption);
        }
        None => {
            let _ = writeln!(
                w,
                "  the {} is off: each request holds its own copy of its prefix",
                a.cache
            );
        }
    }
    w
}

fn row(w: &mut String, term: &str, value: String, from: impl std::fmt::Display) {
    let _ = writeln!(w, "  {term:<36} {value:>18}   {from}");
}

fn sglang_table(w: &mut String, src: &MemorySources, own: &SglangSources, s: &SglangMemory) {
    let i = &s.inputs;
    row(
        w,
        "GPU memory (nvidia-smi)",
        format!("{} MiB", thousands(i.gpu_memory_mib)),
        &src.gpu_memory,
    );
    row(
        w,
        "memory before weights, M_pre",
        format!("{:.2} GiB", i.memory_before_weights_gib),
        &own.memory_before_weights,
    );
    row(
        w,
        "mem_fraction_static, f",
        format!("{:.3}", i.mem_fraction_static),
        &own.mem_fraction_static,
    );
    row(
        w,
        "static budget, M_pre × f",
        format!("{:.2} GiB", s.static_gib),
        "weights + KV pool",
    );
    row(
        w,
        "weights, W",
        format!("{:.2} GiB", i.weight_gib_per_gpu),
        &src.weights,
    );
    row(
        w,
        "KV pool, M_pre × f − W",
        format!("{:.2} GiB", s.kv_pool_gib),
        "KVCacheConfigurator._profile_available_bytes",
    );
    row(
        w,
        "KV bytes per token, cell",
        format!("{} B", thousands(i.kv_bytes_per_token)),
        &src.kv_bytes_per_token,
    );
    row(
        w,
        "max_total_num_tokens",
        thousands(s.max_total_num_tokens),
        format!("floor(pool / cell / page {}) × page", i.page_size_tokens),
    );
    row(
        w,
        "slack, (1 − f) × M_pre",
        format!("{:.2} GiB", s.slack_gib),
        "activations, CUDA graphs, buffers",
    );
    row(
        w,
        "needed in the slack",
        format!("{:.2} GiB", s.need_gib),
        &own.slack_need,
    );
    if let Some(t) = &s.need_terms {
        let terms = [
            (
                t.workspace_gib,
                "constant metadata and attention workspace".to_string(),
            ),
            (
                t.activations_gib,
                format!("activations: {}", t.activations_for),
            ),
            (
                t.cuda_graphs_gib,
                format!("CUDA graphs: {}", t.cuda_graphs_for),
            ),
            (
                t.logits_buffer_gib,
                "the decode graphs' FP32 logits buffer".to_string(),
            ),
            (
                t.req_to_token_gib,
                format!("request-to-token table: {}", t.req_to_token_for),
            ),
        ];
        for (gib, what) in terms {
            let _ = writeln!(w, "  {:<36} {:>18}     {gib:.2} GiB {what}", "", "");
        }
    }
    if let SlackNeed::Heuristic(h) = &i.need {
        let _ = writeln!(
            w,
            "  {:<36} {:>18}   = {:.0} MiB constant + {:.0} activations + {:.0} TP buffers + {:.0} CUDA graphs,",
            "", "", h.constant_mib, h.activations_mib, h.tp_buffers_mib, h.cuda_graphs_mib
        );
        let _ = writeln!(
            w,
            "  {:<36} {:>18}     less the {:.2} GiB in use before the weights load",
            "",
            "",
            i.gpu_memory_mib as f64 / 1024.0 - i.memory_before_weights_gib
        );
    }
    let _ = writeln!(w);
    let margin = s.slack_gib - s.need_gib;
    let _ = writeln!(
        w,
        "verdict: {} — the slack {} the need by {:.2} GiB; largest safe fraction {:.3}, out of memory above {:.3}",
        s.verdict.as_str(),
        if margin >= 0.0 { "exceeds" } else { "falls short of" },
        margin.abs(),
        s.largest_safe_fraction,
        s.oom_above_fraction
    );
    let _ = writeln!(
        w,
        "raising f by 0.01 adds {:.2} GiB ({} tokens) to the pool and takes it from the slack",
        0.01 * i.memory_before_weights_gib,
        thousands(
            (0.01 * i.memory_before_weights_gib * crate::memory::GIB / i.kv_bytes_per_token as f64)
                as u64
        )
    );
}

fn vllm_table(w: &mut String, src: &MemorySources, own: &VllmSources, v: &VllmMemory) {
    let i = &v.inputs;
    row(
        w,
        "GPU memory (nvidia-smi)",
        format!("{} MiB", thousands(i.gpu_memory_mib)),
        &src.gpu_memory,
    );
    row(
        w,
        "gpu_memory_utilization",
        format!("{:.3}", i.gpu_memory_utilization),
        &own.gpu_memory_utilization,
    );
    row(
        w,
        "requested, ceil(total × util)",
        format!("{:.2} GiB", v.requested_gib),
        "Worker.determine_available_memory",
    );
    row(
        w,
        "weights",
        format!("{:.2} GiB", i.weight_gib_per_gpu),
        &src.weights,
    );
    row(
        w,
        "non-torch memory",
        format!("{:.2} GiB", i.non_torch_gib),
        &own.non_torch,
    );
    row(
        w,
        "activation peak",
        format!("{:.2} GiB", i.activation_peak_gib),
        &own.activation_peak,
    );
    row(
        w,
        "CUDA graphs",
        format!("{:.2} GiB", i.cuda_graph_gib),
        &own.cuda_graphs,
    );
    row(
        w,
        "KV cache",
        format!("{:.2} GiB", v.kv_gib),
        "requested − the four above",
    );
    row(
        w,
        "KV bytes per token",
        format!("{} B", thousands(i.kv_bytes_per_token)),
        &src.kv_bytes_per_token,
    );
    row(
        w,
        "blocks",
        thousands(v.num_blocks),
        format!("floor(KV / (cell × block {}))", i.block_size_tokens),
    );
    row(
        w,
        "GPU KV cache size",
        format!("{} tokens", thousands(v.kv_tokens)),
        "blocks × block size",
    );
    row(
        w,
        "left unused by vLLM",
        format!("{:.2} GiB", v.headroom_gib),
        "total − requested",
    );
    let _ = writeln!(w);
    if v.starts() {
        let _ = writeln!(
            w,
            "  verdict: starts, with {} tokens of KV cache (vLLM also refuses to start when one \
             request of max_model_len tokens does not fit; servesim does not check that yet)",
            thousands(v.kv_tokens)
        );
    } else if v.min_utilization_for_one_block <= 1.0 {
        let _ = writeln!(
            w,
            "  verdict: vLLM refuses to start (\"No available memory for the cache blocks\", \
             check_enough_kv_cache_memory); raise gpu_memory_utilization to at least {:.3}, \
             or use more GPUs",
            (v.min_utilization_for_one_block * 1000.0).ceil() / 1000.0
        );
    } else {
        let _ = writeln!(
            w,
            "  verdict: vLLM refuses to start (\"No available memory for the cache blocks\", \
             check_enough_kv_cache_memory) at any gpu_memory_utilization: the weights and \
             measured terms alone exceed the GPU; use more GPUs (a larger tensor_parallel) or a \
             smaller model"
        );
    }
}
