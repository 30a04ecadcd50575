//! The engine section: common settings plus one section per engine, each with its engine's
//! defaults and rules — vLLM 0.33's defaults by GPU, its null block, SGLang's request limits
//! applied to SGLang only, and the summary's `engine` section for either.

use servesim::memory::KvSource;
use servesim::report::summary::EngineInfo;
use servesim::scenario::{PolicySpec, Scenario};
use servesim::scheduler::sglang::settings::SglangSettings;
use servesim::scheduler::vllm::settings::VllmSettings;

use crate::scenario;

const WORKLOAD: &str = "[workload]\nrequests = 10\n\
    prompt_tokens = { dist = \"constant\", value = 100 }\n\
    output_tokens = { dist = \"constant\", value = 10 }\n[client]\nconcurrency = 4\n";

/// A scenario's text: `hardware`, then `engine` as the engine section, then [`WORKLOAD`].
fn scenario_text(hardware: &str, engine: &str) -> String {
    format!("name = \"x\"\n{hardware}\n[engine]\n{engine}\n{WORKLOAD}")
}

fn load(hardware: &str, engine: &str) -> Scenario {
    scenario(&scenario_text(hardware, engine))
}

fn vllm(sc: &Scenario) -> &VllmSettings {
    match &sc.engine.policy {
        PolicySpec::Vllm(s) => s,
        PolicySpec::Sglang(_) => panic!("a vLLM scenario"),
    }
}

fn sglang(sc: &Scenario) -> &SglangSettings {
    match &sc.engine.policy {
        PolicySpec::Sglang(s) => s,
        PolicySpec::Vllm(_) => panic!("an SGLang scenario"),
    }
}

/// The first problem's message of a scenario `text` that must be refused.
fn refused(text: &str) -> String {
    let src = servesim::scenario::Source {
        name: "t.toml".into(),
        base_dir: ".".into(),
        text: text.to_string(),
    };
    let e = servesim::scenario::load(&src, &[]).unwrap_err();
    e.problems[0].message.clone()
}

#[test]
fn vllms_batch_defaults_follow_the_gpus_memory_and_name() {
    // `get_batch_defaults` for `vllm serve`: (max_num_seqs, max_num_batched_tokens).
    let engine = "kind = \"vllm\"\nkv_capacity_tokens = 100000";
    for (gpu, want) in [
        ("b200", (1024, 16384)),
        ("h100", (1024, 8192)),
        ("rtx-pro-6000", (1024, 8192)),
        ("a100-80gb", (256, 2048)),
        ("l40s", (256, 2048)),
    ] {
        let sc = load(&format!("[hardware]\ngpu = \"{gpu}\""), engine);
        let s = vllm(&sc);
        assert_eq!((s.max_num_seqs, s.max_num_batched_tokens), want, "{gpu}");
    }
    // Without a GPU: an H100's.
    let s = vllm(&load("", engine)).clone();
    assert_eq!((s.max_num_seqs, s.max_num_batched_tokens), (1024, 8192));
    assert!(s.enable_chunked_prefill && s.async_scheduling && s.scheduler_reserve_full_isl);
    assert!(s.enable_prefix_caching);
    assert_eq!((s.block_size, s.long_prefill_token_threshold), (16, 0));
    assert_eq!((s.max_model_len, s.num_gpu_blocks_override), (None, None));
}

#[test]
fn without_chunked_prefill_vllms_step_budget_holds_a_whole_request() {
    let sc = load(
        "[model]\ncontext_len = 32768",
        "kind = \"vllm\"\nkv_capacity_tokens = 100000\nenable_chunked_prefill = false",
    );
    assert_eq!(vllm(&sc).max_model_len, Some(32768));
    assert_eq!(vllm(&sc).max_num_batched_tokens, 32768);
    let given = load(
        "[model]\ncontext_len = 32768",
        "kind = \"vllm\"\nkv_capacity_tokens = 100000\nmax_model_len = 4096\nenable_chunked_prefill = false",
    );
    assert_eq!(vllm(&given).max_num_batched_tokens, 8192);
}

#[test]
fn vllms_pool_leaves_out_the_null_block() {
    // num_gpu_blocks_override = 1001 blocks of 16: block 0 is the null block.
    let sc = load("", "kind = \"vllm\"\nnum_gpu_blocks_override = 1001");
    assert_eq!(sc.engine.kv_capacity_tokens, 16_000);
    assert_eq!(sc.engine.kv_source, KvSource::BlocksOverride);
    // Derived from memory: the memory model's blocks, less the null block.
    let sc = load(
        "[hardware]\nmemory_mib = 81920\n[model]\nkv_bytes_per_token = 100000\nweight_gib_per_gpu = 40",
        "kind = \"vllm\"\ngpu_memory_utilization = 0.9",
    );
    let m = sc.memory.as_ref().unwrap();
    assert_eq!(m.kv_tokens(), 19_797 * 16);
    assert_eq!(sc.engine.kv_capacity_tokens, 19_796 * 16);
    assert_eq!(sc.engine.kv_source, KvSource::Derived);
}

#[test]
fn a_given_pool_is_floored_to_whole_blocks_or_pages() {
    // 1,000 tokens are 62 whole blocks of 16, 992 tokens (vLLM allocates blocks), or 15 whole
    // pages of 64, 960 tokens (SGLang floors its pool to pages: `pool_configurator.py`).
    let sc = load(
        "",
        "kind = \"vllm\"\nkv_capacity_tokens = 1000\nblock_size = 16",
    );
    assert_eq!(sc.engine.kv_capacity_tokens, 992);
    assert_eq!(sc.engine.kv_source, KvSource::Given);
    let sc = load("", "kv_capacity_tokens = 1000\npage_size = 64");
    assert_eq!(sc.engine.kv_capacity_tokens, 960);
    // Less than one page is no pool.
    let text = scenario_text("", "kv_capacity_tokens = 63\npage_size = 64");
    assert_eq!(
        refused(&text),
        "the KV pool holds less than one page of 64 tokens"
    );
}

#[test]
fn sglangs_request_limits_apply_to_sglang_only() {
    // Prompts of 4,000 tokens in a pool of 2,000: SGLang refuses every one (max_req_len − 5);
    // vLLM has no such rule.
    let text = |kind: &str| {
        format!(
            "name = \"x\"\n[engine]\nkind = \"{kind}\"\nkv_capacity_tokens = 2000\n{}",
            WORKLOAD.replace("value = 100 }", "value = 4000 }")
        )
    };
    let e = refused(&text("sglang"));
    assert!(e.contains("SGLang refuses prompts"), "{e}");
    let sc = scenario(&text("vllm"));
    assert_eq!(vllm(&sc).max_num_seqs, 1024);
}

#[test]
fn sglangs_new_flags_are_read_with_sglangs_defaults() {
    let s = sglang(&load("", "kv_capacity_tokens = 100000")).clone();
    assert!(!s.disable_radix_cache && !s.disable_overlap_schedule && !s.enable_mixed_chunk);
    assert_eq!(s.schedule_conservativeness, 1.0);
    let sc = load(
        "",
        "kv_capacity_tokens = 100000\ndisable_radix_cache = true\ndisable_overlap_schedule = true\n\
         enable_mixed_chunk = true\nschedule_conservativeness = 1.3",
    );
    let s = sglang(&sc);
    assert!(s.disable_radix_cache && s.disable_overlap_schedule && s.enable_mixed_chunk);
    assert_eq!(s.schedule_conservativeness, 1.3);
    // Not modelled yet: scheduling does not change.
    assert_eq!(s.new_token_ratio.init, 0.7);
}

#[test]
fn the_summarys_engine_section_names_each_engines_own_settings() {
    let sc = load(
        "",
        "kind = \"vllm\"\nkv_capacity_tokens = 100000\nmax_num_seqs = 64",
    );
    let j = serde_json::to_value(EngineInfo::new(&sc.engine)).unwrap();
    assert_eq!(j["kind"], "vllm");
    assert_eq!(j["max_num_seqs"], 64);
    assert_eq!(j["block_size"], 16);
    assert!(j.get("schedule_policy").is_none(), "{j}");
    // SGLang's: the keys the summary has always had, in their order.
    let sc = load("", "kv_capacity_tokens = 100000");
    let text = serde_json::to_string(&EngineInfo::new(&sc.engine)).unwrap();
    let at = |k: &str| {
        text.find(&format!("\"{k}\":"))
            .unwrap_or_else(|| panic!("{k}: {text}"))
    };
    let order = [
        "kind",
        "schedule_policy",
        "page_size",
        "max_running_requests",
        "chunked_prefill_size",
        "max_prefill_tokens",
        "decode_log_interval",
        "step_time",
    ];
    assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{text}");
    assert!(!text.contains("disable_radix_cache"), "{text}");
}

#[test]
fn sglang_refuses_a_workload_whose_shortest_prompt_is_max_req_len_minus_five() {
    // A pool of 1,000 tokens: max_req_len = 999, and prompts of 999 − 5 = 994 tokens or more
    // are refused; 993 is admitted.
    let text = |prompt: u32| {
        format!(
            "name = \"x\"\n[engine]\nkv_capacity_tokens = 1000\n{}",
            WORKLOAD.replace("value = 100 }", &format!("value = {prompt} }}"))
        )
    };
    let e = refused(&text(994));
    assert!(
        e.contains("SGLang refuses prompts of 994 tokens or more"),
        "{e}"
    );
    scenario(&text(993));
}

#[test]
fn sglangs_chunk_may_be_one_page_but_not_less() {
    // A chunk must hold at least one page: 16 tokens with pages of 16 is accepted, 15 is not.
    let sc = load(
        "",
        "kv_capacity_tokens = 100000\npage_size = 16\nchunked_prefill_size = 16",
    );
    assert_eq!(sglang(&sc).chunked_prefill_size, Some(16));
    let e = refused(&scenario_text(
        "",
        "kv_capacity_tokens = 100000\npage_size = 16\nchunked_prefill_size = 15",
    ));
    assert!(e.contains("smaller than page_size"), "{e}");
}

#[test]
fn without_a_gpu_sglang_chunks_prompts_by_8192_and_replays_graphs_up_to_256() {
    // With no GPU memory to go by, the keys' declared defaults: SGLang's (`server_args.py`)
    // for 60–160 GiB at TP below 4, an H100's or an H200's.
    let sc = load("", "kv_capacity_tokens = 100000");
    let s = sglang(&sc);
    assert_eq!(
        (s.chunked_prefill_size, s.cuda_graph_max_bs),
        (Some(8192), 256)
    );
}
