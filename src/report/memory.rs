//! `servesim memory` and `servesim catalog`: the KV-budget derivation as a table, the verdict,
//! a range of settings, and the catalog listings.

use std::fmt::Write;

use super::text::thousands;
use crate::catalog::{Attention, Catalog};
use crate::memory::{SglangMemory, SlackNeed, VllmMemory};
use crate::scenario::derive::{EngineSources, MemorySources, SglangSources, VllmSources};
use crate::scenario::{MemoryDerivation, MemoryModel};

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

/// One row of `servesim memory --vary`.
pub struct RangeRow {
    /// The overrides of this point.
    pub sets: Vec<String>,
    /// Its memory model.
    pub memory: MemoryModel,
}

/// The table of a range of settings, relative to the scenario's own derivation.
pub fn range_table(base: &MemoryModel, rows: &[RangeRow]) -> String {
    let mut w = String::new();
    let base_tokens = base.kv_tokens().max(1) as f64;
    let base_f = match &base.derivation {
        MemoryDerivation::Sglang(s) => Some(s.inputs.mem_fraction_static),
        MemoryDerivation::Vllm(_) => None,
    };
    let _ = writeln!(
        w,
        "{:<40} {:>9} {:>12} {:>9} {:>9} {:>9} {:>8}",
        "setting", "pool GiB", "KV tokens", "vs base", "slack GiB", "need GiB", "verdict"
    );
    for r in rows {
        let (pool, slack, need, verdict) = match &r.memory.derivation {
            MemoryDerivation::Sglang(s) => (
                s.kv_pool_gib,
                format!("{:.2}", s.slack_gib),
                format!("{:.2}", s.need_gib),
                s.verdict.as_str(),
            ),
            MemoryDerivation::Vllm(v) => (v.kv_gib, "—".into(), "—".into(), "—"),
        };
        let _ = writeln!(
            w,
            "{:<40} {:>9.2} {:>12} {:>8.2}× {:>9} {:>9} {:>8}",
            r.sets.join(" "),
            pool,
            thousands(r.memory.kv_tokens()),
            r.memory.kv_tokens() as f64 / base_tokens,
            slack,
            need,
            verdict
        );
    }
    if let Some(f0) = base_f {
        let _ = writeln!(
            w,
            "\"vs base\" is the pool relative to f = {f0:.3}; scaling the pool by the ratio of fractions would \
             wrongly predict f / {f0:.3} (e.g. {:.2}× at 0.95)",
            0.95 / f0
        );
    }
    w
}

/// The catalog as two tables.
pub fn catalog(c: &Catalog) -> String {
    let mut w = String::new();
    let _ = writeln!(w, "GPUs");
    let _ = writeln!(
        w,
        "  {:<14} {:<34} {:>9} {:>8} {:>9} {:>8} {:>16} {:>7}",
        "name", "", "MiB", "HBM GB/s", "BF16 TF/s", "FP8 TF/s", "interconnect GB/s", "$/h"
    );
    for g in &c.gpus {
        let _ = writeln!(
            w,
            "  {:<14} {:<34} {:>9} {:>8.0} {:>9.0} {:>8.0} {:>9} {:>6.0} {:>7.2}",
            g.name,
            g.display,
            g.memory_mib,
            g.hbm_bandwidth_gb_per_s,
            g.bf16_dense_tflops,
            g.fp8_dense_tflops.unwrap_or(0.0),
            g.interconnect,
            g.interconnect_gb_per_s,
            g.price_usd_per_hour
        );
    }
    let _ = writeln!(w);
    let _ = writeln!(w, "Models");
    let _ = writeln!(
        w,
        "  {:<16} {:>6} {:<24} {:>10} {:>10} {:>8} {:>14} {:>12} {:>12}",
        "name",
        "layers",
        "attention",
        "params B",
        "active B",
        "experts",
        "weights",
        "KV B/token",
        "KV B/tok TP8"
    );
    for m in &c.models {
        let attn = match m.attention {
            Attention::Gqa { kv_heads, head_dim } => {
                format!("GQA {}q/{kv_heads}kv × {head_dim}", m.q_heads)
            }
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => format!("MLA {kv_lora_rank}+{qk_rope_head_dim}"),
        };
        let experts = match &m.moe {
            Some(moe) => format!("{}/{}", moe.experts_per_token, moe.num_experts),
            None => "dense".into(),
        };
        let dtype = serde_json::to_value(m.weight_dtype)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = writeln!(
            w,
            "  {:<16} {:>6} {:<24} {:>10.1} {:>10.1} {:>8} {:>14} {:>12} {:>12}",
            m.name,
            m.layers,
            attn,
            m.total_params_b,
            m.active_params_b,
            experts,
            format!("{:.0} GB {dtype}", m.checkpoint_gb),
            thousands(m.kv_bytes_per_token(1, 2)),
            thousands(m.kv_bytes_per_token(8, 2))
        );
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "Sources and assumptions are in the data files (src/catalog/*.toml); prices are indicative \
         on-demand figures to override. Extend or override entries with a TOML file of your own: \
         `catalog = \"my-catalog.toml\"` in a scenario, or `servesim catalog --file my-catalog.toml`."
    );
    w
}
