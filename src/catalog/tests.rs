//! The catalog's unit tests: sizes computed by hand, the built-in data, lookups, user files.

use super::model::Storage;
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
q_heads = 4
attention = { kind = "gqa", kv_heads = 2, head_dim = 8 }
hidden_size = 32
intermediate_size = 64
vocab_size = 100
context_len_tokens = 1024
total_params_b = 0.000025
active_params_b = 0.000025
weight_dtype = "bf16"
checkpoint_gb = 0.00005

[[model]]
name = "tiny-mla-moe"
display = "Tiny MLA MoE"
layers = 3
q_heads = 4
attention = { kind = "mla", kv_lora_rank = 16, qk_rope_head_dim = 4, qk_nope_head_dim = 8, v_head_dim = 8, q_lora_rank = 12 }
hidden_size = 32
intermediate_size = 64
vocab_size = 100
context_len_tokens = 1024
total_params_b = 0.00004
active_params_b = 0.00003
moe = { num_experts = 4, experts_per_token = 2, shared_experts = 1, moe_intermediate_size = 16, first_dense_layers = 1 }
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
            rel(active_b, m.active_params_b) < 0.1 || rel(with_embedding, m.active_params_b) < 0.1,
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
            "mi300x",
            "a100-40gb"
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
    assert_eq!(c.gpu("a100-80gb").unwrap().fp8_dense_tflops, None);
    assert_eq!(c.gpu("h100").unwrap().fp8_dense_tflops, Some(1979.0));
}

#[test]
fn kimi_k2_5_facts() {
    let m = builtin_model("kimi-k2.5");
    assert_eq!(m.weight_dtype, WeightDtype::Int4Experts);
    let vision = m.vision.expect("a vision tower");
    assert_eq!((vision.layers, vision.hidden_size), (27, 1152));
    assert_eq!(m.context_len_tokens, 262_144);
    let moe = m.moe.expect("experts");
    assert_eq!(
        (moe.num_experts, moe.experts_per_token, moe.shared_experts),
        (384, 8, 1)
    );
    assert_eq!((moe.first_dense_layers, m.moe_layers()), (1, 60));
    assert_eq!(
        m.attention,
        Attention::Mla {
            kv_lora_rank: 512,
            qk_rope_head_dim: 64,
            qk_nope_head_dim: 128,
            v_head_dim: 128,
            q_lora_rank: Some(1536)
        }
    );
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

/// The error of merging `text` into the built-in catalog, as shown.
fn refused(text: &str) -> String {
    let mut c = Catalog::builtin();
    let before = c.clone();
    let e = c.extend_from_str(text, "user.toml").unwrap_err();
    assert_eq!(c, before, "a failed merge leaves the catalog unchanged");
    e.to_string()
}

#[test]
fn entries_that_break_the_schema_are_refused_with_entry_line_and_fix() {
    // A GQA attention without kv_heads: the line of the attention table, the entry, the key.
    let text = TINY.replace("kv_heads = 2, ", "");
    assert_eq!(
        refused(&text),
        "user.toml:7:13: model `tiny-gqa`: missing field `kv_heads`, in \
         `attention = { kind = \"gqa\", head_dim = 8 }`"
    );
    // A size of the other attention kind.
    let text = TINY.replace("head_dim = 8 }", "head_dim = 8, kv_lora_rank = 4 }");
    assert_eq!(
        refused(&text),
        "user.toml:7:13: model `tiny-gqa`: unknown field `kv_lora_rank`, expected `kv_heads` or \
         `head_dim`; `kv_lora_rank` belongs in `attention = { kind = \"mla\", kv_lora_rank = …, \
         qk_rope_head_dim = …, qk_nope_head_dim = …, v_head_dim = …, q_lora_rank = … }` \
         (q_lora_rank optional)"
    );
    // An attention kind that does not exist.
    let text = TINY.replace("kind = \"mla\"", "kind = \"mha\"");
    let e = refused(&text);
    assert!(e.starts_with("user.toml:22:"), "{e}");
    assert!(
        e.contains("model `tiny-mla-moe`: unknown variant `mha`, expected `gqa` or `mla`"),
        "{e}"
    );
    // A value of the wrong type is shown on its line.
    let text = TINY.replace("layers = 3", "layers = \"three\"");
    assert_eq!(
        refused(&text),
        "user.toml:20:10: model `tiny-mla-moe`: invalid type: string \"three\", expected u32, in \
         `layers = \"three\"`"
    );
    // An unknown key inside the experts' table.
    let text = TINY.replace("shared_experts = 1,", "shared = 1,");
    let e = refused(&text);
    assert!(e.starts_with("user.toml:29:"), "{e}");
    assert!(
        e.contains("model `tiny-mla-moe`: unknown field `shared`"),
        "{e}"
    );
}

#[test]
fn the_flat_schema_is_refused_with_where_each_key_went() {
    // `attention = "gqa"` with the sizes beside it, as the flat schema had it.
    let flat = TINY.replace(
        "attention = { kind = \"gqa\", kv_heads = 2, head_dim = 8 }",
        "attention = \"gqa\"\nkv_heads = 2\nhead_dim = 8",
    );
    assert_eq!(
        refused(&flat),
        "user.toml:7:13: model `tiny-gqa`: `attention` is a table naming its kind and sizes, not a \
         string: write `attention = { kind = \"gqa\", kv_heads = …, head_dim = … }`, in \
         `attention = \"gqa\"`"
    );
    // A key that moved into a sub-table.
    let text = TINY.replace(
        "weight_dtype = \"bf16\"",
        "first_dense_layers = 2\nweight_dtype = \"bf16\"",
    );
    let e = refused(&text);
    assert!(
        e.starts_with(
            "user.toml:14:1: model `tiny-gqa`: unknown field `first_dense_layers`, expected one of"
        ),
        "{e}"
    );
    assert!(
        e.ends_with("; `first_dense_layers` belongs in `moe = { …, first_dense_layers = … }` (a dense model has no `moe`)"),
        "{e}"
    );
    let text = TINY.replace(
        "weight_dtype = \"bf16\"",
        "multimodal = false\nweight_dtype = \"bf16\"",
    );
    assert!(refused(&text)
        .contains("`multimodal` is gone: a model with a vision tower has `vision = {"));
    let text = TINY.replace("context_len_tokens = 1024", "context_len = 1024");
    assert!(refused(&text).ends_with("; `context_len` is now `context_len_tokens`"));
}

#[test]
fn values_the_types_allow_but_that_do_not_fit_are_refused_with_the_entry_line() {
    let cases = [
        (TINY.replace("kv_heads = 2", "kv_heads = 0"), "model `tiny-gqa`: attention.kv_heads must be > 0"),
        (
            TINY.replace("kv_heads = 2", "kv_heads = 3"),
            "model `tiny-gqa`: q_heads (4) must be a multiple of attention.kv_heads (3)",
        ),
        (
            TINY.replace("q_lora_rank = 12", "q_lora_rank = 0"),
            "model `tiny-mla-moe`: attention.q_lora_rank must be > 0; leave it out when queries are not compressed",
        ),
        (
            TINY.replace("experts_per_token = 2", "experts_per_token = 5"),
            "model `tiny-mla-moe`: moe.experts_per_token must be between 1 and moe.num_experts (4)",
        ),
        (
            TINY.replace("first_dense_layers = 1", "first_dense_layers = 3"),
            "model `tiny-mla-moe`: moe.first_dense_layers (3) must be below layers (3): a MoE model needs at least one MoE layer (a dense model has no `moe`)",
        ),
        (
            TINY.replace("moe_intermediate_size = 16", "moe_intermediate_size = 0"),
            "model `tiny-mla-moe`: moe.moe_intermediate_size must be > 0",
        ),
        (
            TINY.replace("checkpoint_gb = 0.00006", "checkpoint_gb = 0.00006\nvision = { layers = 2, hidden_size = 0, params_b = 0.1 }"),
            "model `tiny-mla-moe`: vision.hidden_size must be > 0",
        ),
        (
            TINY.replace("active_params_b = 0.000025", "active_params_b = 1"),
            "model `tiny-gqa`: active_params_b exceeds total_params_b",
        ),
    ];
    for (text, want) in cases {
        let e = refused(&text);
        let line = if want.contains("tiny-gqa") { 2 } else { 17 };
        assert_eq!(e, format!("user.toml:{line}:1: {want}"));
    }
    let gpu =
        "[[gpu]]\nname = \"g\"\ndisplay = \"G\"\nmemory_mib = 1\nhbm_bandwidth_gb_per_s = 1\n\
               bf16_dense_tflops = 1\nfp8_dense_tflops = 0\ninterconnect = \"pcie4\"\n\
               interconnect_gb_per_s = 1\ncollective_latency_us = 1\nprice_usd_per_hour = 0\n";
    assert_eq!(
        refused(gpu),
        "user.toml:1:1: GPU `g`: fp8_dense_tflops must be > 0; leave it out when the GPU has no FP8 tensor cores"
    );
}

#[test]
fn a_parser_error_names_the_entry_it_is_in_and_only_that_one() {
    // A GPU between the two models: the error in the second model is not the GPU's.
    let gpu =
        "[[gpu]]\nname = \"g\"\ndisplay = \"G\"\nmemory_mib = 1\nhbm_bandwidth_gb_per_s = 1\n\
               bf16_dense_tflops = 1\ninterconnect = \"pcie4\"\ninterconnect_gb_per_s = 1\n\
               collective_latency_us = 1\nprice_usd_per_hour = 0\n";
    let (first, second) = TINY.split_at(TINY.rfind("[[model]]").unwrap());
    let text = format!(
        "{first}{gpu}\n{}",
        second.replace("layers = 3", "layers = -3")
    );
    let e = refused(&text);
    assert!(e.contains(": model `tiny-mla-moe`: invalid value"), "{e}");
    // An entry without a name is named by its place.
    let text = TINY
        .replace("name = \"tiny-mla-moe\"\n", "")
        .replace("layers = 3", "layers = -3");
    assert!(refused(&text).contains(": model #2 (no name): invalid value"));
    // A table after the entries is no entry's.
    let text = format!("{TINY}\n[extra]\nx = 1\n");
    let e = refused(&text);
    assert!(
        e.starts_with("user.toml:33:2: unknown field `extra`"),
        "{e}"
    );
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

#[test]
fn the_readme_user_catalog_example_is_a_valid_catalog() {
    let readme = include_str!("../../README.md");
    let start = readme
        .find("```toml\n[[model]]")
        .expect("the README shows a user catalog entry")
        + "```toml\n".len();
    let example = &readme[start..start + readme[start..].find("```").unwrap()];
    let c = catalog_from(example);
    let m = c.model("org/my-moe-instruct").unwrap();
    assert_eq!((m.name.as_str(), m.moe_layers()), ("my-moe", 48));
    // The example is Qwen3-30B-A3B's architecture: the same KV bytes per token.
    assert_eq!(
        m.kv_bytes_per_token(1, 2),
        builtin_model("qwen3-30b-a3b").kv_bytes_per_token(1, 2)
    );
}
