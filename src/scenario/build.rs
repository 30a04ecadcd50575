//! The scenario assembled from checked values, in dependency order: catalog, hardware, model,
//! workload, client, then the engine — its memory derivation, KV budget and step-time model —
//! with the checks that span several keys. Each value is read by its path with
//! [`Reader::get`] (given or declared default) or [`Reader::opt`] (given or absent).

use super::validate::{Bad, Reader};
use super::*;
use crate::catalog::Catalog;
use crate::cost::roofline::{Roofline, RooflineSettings};
use crate::memory::sglang_memory_bucket;

/// Parse, apply `--set` overrides, check every value, and build. Every problem is reported.
pub(super) fn load(source: &Source, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let invalid = |problems| ScenarioError {
        source_name: source.name.clone(),
        problems,
    };
    let mut reader = Reader::read(source, sets).map_err(invalid)?;
    let built = build(&mut reader);
    let mut problems = reader.into_problems();
    match built {
        Ok(scenario) if problems.is_empty() => Ok(scenario),
        _ => {
            debug_assert!(
                !problems.is_empty(),
                "invariant: a failed build recorded a problem"
            );
            if problems.is_empty() {
                let message = "invalid scenario".to_string();
                let (key_path, location) = (String::new(), Location::None);
                problems.push(Problem {
                    key_path,
                    location,
                    message,
                    value: None,
                    hint: None,
                });
            }
            Err(invalid(problems))
        }
    }
}

fn secs(x: f64) -> SimDuration {
    SimDuration::from_secs_f64(x).expect("invariant: seconds were range-checked")
}

/// Assemble the scenario: the independent parts first, each on its own so that every problem
/// is found, then the parts that depend on them.
fn build(v: &mut Reader) -> Result<Scenario, Bad> {
    // The built-in catalog, extended by the scenario's `catalog = "file.toml"` if it can be read.
    let user_catalog = match v.opt::<String>("catalog") {
        Ok(Some(file)) => Catalog::with_user_file(&v.source.base_dir.join(file)).map_err(|e| {
            let hint = "a TOML file of [[gpu]] and [[model]] entries, relative to the scenario (see `servesim catalog`)";
            v.bad("catalog", format!("cannot be used: {e}"), hint)
        }),
        _ => Err(Bad),
    };
    let catalog = user_catalog.as_ref().unwrap_or(Catalog::builtin_ref());
    let run = run(v);
    let hardware = hardware(v, catalog);
    let model = model(v, catalog);
    let workload = workload(v);
    let client = client(v);
    let (hardware, model) = (hardware?, model?);
    let (engine, memory) = engine(v, hardware.as_ref(), model.as_ref(), workload.as_ref().ok())?;
    let workload = workload?;
    // SGLang refuses prompts of max_req_len − 5 tokens or more (`managers/scheduler.py`). If
    // every prompt would be refused there is nothing to simulate: say so before running. (When
    // only some are, the run refuses and counts them, as SGLang does.)
    let pool = engine.kv_capacity_tokens;
    let max_req_len = model
        .as_ref()
        .and_then(|m| m.context_len)
        .map_or(pool - 1, |c| (c - 1).min(pool - 1));
    let max_input = max_req_len.saturating_sub(5);
    let smallest = u64::from(workload.prompt_tokens.smallest());
    if smallest >= max_input {
        let msg = format!(
            "every prompt has at least {smallest} tokens, but SGLang refuses prompts of {max_input} tokens or more \
             (max_req_len − 5, with max_req_len = min(context_len − 1, KV pool − 1) = {max_req_len}): every request would be refused"
        );
        let hint = "shorten the prompts, or raise engine.kv_capacity_tokens (or the memory that derives it)";
        let at = "workload.prompt_tokens";
        return Err(v.fail(at, at, msg, hint));
    }
    Ok(Scenario {
        name: v.get("name")?,
        description: v.opt("description")?,
        seed: v.get("seed")?,
        run: run?,
        hardware,
        model,
        engine,
        workload,
        client: client?,
        memory,
    })
}

fn run(v: &Reader) -> Result<RunSpec, Bad> {
    let observe_at_s = v.opt::<Vec<f64>>("run.observe_at_s")?.unwrap_or_default();
    let mut observe_at: Vec<SimTime> = observe_at_s
        .into_iter()
        .map(|s| SimTime::from_secs_f64(s).expect("invariant: range-checked"))
        .collect();
    observe_at.sort();
    observe_at.dedup();
    Ok(RunSpec {
        max_sim: v.opt("run.max_sim_s")?.map(secs),
        observe_at,
        window: secs(v.get("run.window_s")?),
        timeseries_interval: secs(v.get("run.timeseries_interval_s")?),
        max_events: v.get("run.max_events")?,
    })
}

fn hardware(v: &mut Reader, catalog: &Catalog) -> Result<Option<HardwareSpec>, Bad> {
    if !v.has("hardware")? {
        return Ok(None);
    }
    let gpu: Option<String> = v.opt("hardware.gpu")?;
    let gpu_entry = match gpu.as_deref().map(|name| (name, catalog.gpu(name))) {
        None => None,
        Some((_, Some(entry))) => Some(entry.clone()),
        Some((name, None)) => {
            let or = "`servesim catalog` lists the GPUs; or give hardware.memory_mib";
            let hint = catalog
                .suggest_gpu(name)
                .map_or(or.to_string(), |s| format!("did you mean \"{s}\"? {or}"));
            return Err(v.bad("hardware.gpu", "is not in the catalog", hint));
        }
    };
    let tensor_parallel: u32 = v.get("hardware.tensor_parallel")?;
    let num_gpus = v.opt("hardware.num_gpus")?.unwrap_or(tensor_parallel);
    if num_gpus % tensor_parallel != 0 {
        let msg =
            format!("tensor_parallel = {tensor_parallel} does not divide num_gpus = {num_gpus}");
        let hint = "each server uses tensor_parallel GPUs; num_gpus must be a multiple of it";
        return Err(v.fail("hardware.tensor_parallel", "hardware", msg, hint));
    }
    Ok(Some(HardwareSpec {
        gpu,
        gpu_entry,
        memory_mib: v.opt("hardware.memory_mib")?,
        memory_before_weights_gib: v.opt("hardware.memory_before_weights_gib")?,
        num_gpus,
        tensor_parallel,
    }))
}

fn model(v: &mut Reader, catalog: &Catalog) -> Result<Option<ModelSpec>, Bad> {
    if !v.has("model")? {
        return Ok(None);
    }
    let name: Option<String> = v.opt("model.name")?;
    let entry = match name.as_deref().map(|name| (name, catalog.model(name))) {
        None => None,
        Some((_, Some(entry))) => Some(entry.clone()),
        Some((name, None)) => {
            let or = "`servesim catalog` lists the models; or give kv_bytes_per_token and weight_gib_per_gpu";
            let hint = catalog
                .suggest_model(name)
                .map_or(or.to_string(), |s| format!("did you mean \"{s}\"? {or}"));
            return Err(v.bad("model.name", "is not in the catalog", hint));
        }
    };
    let context_len = v
        .opt("model.context_len")?
        .or(entry.as_ref().map(|e| u64::from(e.context_len_tokens)));
    Ok(Some(ModelSpec {
        name,
        entry,
        kv_bytes_per_token: v.opt("model.kv_bytes_per_token")?,
        weight_gib_per_gpu: v.opt("model.weight_gib_per_gpu")?,
        context_len,
    }))
}

fn workload(v: &Reader) -> Result<WorkloadSpec, Bad> {
    v.has("workload")?;
    let (prompt_tokens, output_tokens) = (
        v.get("workload.prompt_tokens"),
        v.get("workload.output_tokens"),
    );
    Ok(WorkloadSpec {
        requests: v.get("workload.requests")?,
        prompt_tokens: prompt_tokens?,
        output_tokens: output_tokens?,
        max_new_tokens: v.opt("workload.max_new_tokens")?,
        ignore_eos: v.get("workload.ignore_eos")?,
    })
}

fn client(v: &mut Reader) -> Result<ClientSpec, Bad> {
    v.has("client")?;
    let concurrency: Option<u32> = v.opt("client.concurrency")?;
    Ok(match v.get::<String>("client.mode")?.as_str() {
        "closed" => ClientSpec::Closed {
            concurrency: concurrency.ok_or_else(|| {
                let key = Reader::declared("client.concurrency");
                v.missing("client.concurrency", key, "a closed-loop client needs it: ")
            })?,
            think_time: secs(v.get("client.think_time_s")?),
        },
        "poisson" => ClientSpec::Poisson {
            rate_per_s: v.get("client.rate_per_s")?,
            concurrency,
        },
        _ => ClientSpec::Gamma {
            rate_per_s: v.get("client.rate_per_s")?,
            burstiness: v.get("client.burstiness")?,
            concurrency,
        },
    })
}

/// The engine, in dependency order: the memory derivation, the KV budget, the step-time model.
fn engine(
    v: &mut Reader,
    hardware: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    workload: Option<&WorkloadSpec>,
) -> Result<(EngineSpec, Option<MemoryModel>), Bad> {
    v.has("engine")?;
    let kind = match v.get::<String>("engine.kind")?.as_str() {
        "vllm" => EngineKind::Vllm,
        _ => EngineKind::Sglang,
    };
    let page_size: u32 = v.get("engine.page_size")?;
    // SGLang's memory-dependent defaults (`server_args.py`), when the GPU is known.
    let bucket = hardware.and_then(|h| {
        let mib = h.memory_mib.or(h.gpu_entry.as_ref().map(|g| g.memory_mib));
        mib.map(|m| sglang_memory_bucket(m, h.tensor_parallel))
    });
    let chunk = v
        .opt("engine.chunked_prefill_size")?
        .unwrap_or(Some(bucket.map_or(8192, |b| b.0)));
    if let Some(c) = chunk.filter(|c| *c < page_size) {
        let msg = format!("chunked_prefill_size = {c} is smaller than page_size = {page_size}");
        let hint = "a chunk must hold at least one page";
        return Err(v.fail("engine.chunked_prefill_size", "engine", msg, hint));
    }
    let max_prefill_tokens: u32 = v.get("engine.max_prefill_tokens")?;
    let cuda_graph_max_bs = v
        .opt("engine.cuda_graph_max_bs")?
        .unwrap_or(bucket.map_or(256, |b| b.1));
    let kv_dtype: String = v.get("engine.kv_cache_dtype")?;
    let keys = derive::EngineMemoryKeys {
        mem_fraction_static: v.opt("engine.mem_fraction_static")?,
        kv_dtype_bytes: if kv_dtype.starts_with("fp8") { 1 } else { 2 },
        kv_dtype,
        observed_free_gib: v.opt("engine.observed_free_gib")?,
        observed_free_at_fraction: v.opt("engine.observed_free_at_fraction")?,
        activation_tokens: u64::from(chunk.unwrap_or(max_prefill_tokens)),
        graph_max_bs: cuda_graph_max_bs,
        page_size,
        gpu_memory_utilization: v.opt("engine.gpu_memory_utilization")?,
        block_size: v.opt("engine.block_size")?,
        activation_peak_gib: v.opt("engine.activation_peak_gib")?,
        non_torch_gib: v.opt("engine.non_torch_gib")?,
        cuda_graph_gib: v.opt("engine.cuda_graph_gib")?,
    };
    // 1. The memory derivation.
    let memory = derive::resolve(kind, hardware, model, &keys);
    // 2. The KV budget: given, or derived.
    let (kv, kv_source) = match (v.opt::<u64>("engine.kv_capacity_tokens")?, &memory) {
        (Some(kv), _) => (kv, KvSource::Given),
        (
            None,
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
            let hint = "raise engine.mem_fraction_static, use more GPUs (hardware.tensor_parallel), or a lighter checkpoint";
            return Err(v.fail("engine.mem_fraction_static", "engine", msg, hint));
        }
        (None, Ok(m)) => (m.kv_tokens(), KvSource::Derived),
        (None, Err(missing)) => {
            let hint = format!(
                "give it (SGLang logs it as max_total_num_tokens), or give {} so servesim derives it",
                missing.0.join(", ")
            );
            let msg = "is missing and cannot be derived from memory";
            return Err(v.fail("engine.kv_capacity_tokens", "engine", msg, hint));
        }
    };
    // SGLang floors the pool to whole pages (`pool_configurator.py`).
    let kv = kv / u64::from(page_size) * u64::from(page_size);
    if kv == 0 {
        let msg = format!("the KV pool holds less than one page of {page_size} tokens");
        let hint = "raise kv_capacity_tokens or lower page_size";
        return Err(v.fail("engine.kv_capacity_tokens", "engine", msg, hint));
    }
    // `resolve_max_num_reqs` (`mem_cache/kv_cache_configurator.py`): the user's value, or the
    // estimate from the context length, is capped at half the pool.
    let estimated = match model.and_then(|m| m.context_len) {
        Some(ctx) => ((kv as f64 / ctx as f64 * 512.0) as u64).clamp(2048, 4096),
        None => 4096,
    };
    let max_running_requests = v
        .opt::<u64>("engine.max_running_requests")?
        .unwrap_or(estimated)
        .min((kv / 2).max(1));
    let memory = memory.ok();
    // 3. The step-time model.
    let step_time = step_time(v, hardware, model, memory.as_ref(), workload)?;
    // 4. The engine.
    let derived_fraction = match &memory {
        Some(MemoryModel {
            derivation: MemoryDerivation::Sglang(s),
            ..
        }) => Some(s.inputs.mem_fraction_static),
        _ => None,
    };
    let spec = EngineSpec {
        kind,
        kv_capacity_tokens: kv,
        kv_source,
        mem_fraction_static: keys.mem_fraction_static.or(derived_fraction),
        page_size,
        max_running_requests: max_running_requests as u32,
        chunked_prefill_size: chunk,
        max_prefill_tokens,
        schedule_policy: match v.get::<String>("engine.schedule_policy")?.as_str() {
            "lof" => SchedulePolicy::Lof,
            "random" => SchedulePolicy::Random,
            _ => SchedulePolicy::Fcfs,
        },
        decode_log_interval: v.get("engine.decode_log_interval")?,
        new_token_ratio: NewTokenRatioSpec {
            init: v.get("engine.init_new_token_ratio")?,
            min_factor: v.get("engine.min_new_token_ratio_factor")?,
            decay_steps: v.get("engine.new_token_ratio_decay_steps")?,
            clip_max_new_tokens: v.get("engine.clip_max_new_tokens")?,
        },
        cuda_graph_max_bs,
        step_time,
    };
    Ok((spec, memory))
}

/// `[engine.step_time]`: linear coefficients, or a roofline from the catalog's GPU and model.
fn step_time(
    v: &mut Reader,
    hardware: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    memory: Option<&MemoryModel>,
    workload: Option<&WorkloadSpec>,
) -> Result<StepTimeSpec, Bad> {
    let get = |v: &Reader, key: &str| v.get::<f64>(&format!("engine.step_time.{key}"));
    if v.get::<String>("engine.step_time.model")? == "linear" {
        let (ns, ps) = (
            |ms: f64| (ms * 1e6).round() as u64,
            |x: f64, scale: f64| (x * scale).round() as u64,
        );
        return Ok(StepTimeSpec::Linear(LinearStepTime {
            decode_base_ns: ns(get(v, "decode_base_ms")?),
            decode_per_seq_ns: ns(get(v, "decode_per_seq_ms")?),
            decode_per_kv_token_ps: ps(get(v, "decode_per_kv_token_ns")?, 1e3),
            prefill_base_ns: ns(get(v, "prefill_base_ms")?),
            prefill_per_token_ps: ps(get(v, "prefill_per_token_us")?, 1e6),
        }));
    }
    let settings = RooflineSettings {
        bandwidth_efficiency: get(v, "bandwidth_efficiency")?,
        compute_efficiency: get(v, "compute_efficiency")?,
        decode_overhead_ms: get(v, "decode_overhead_ms")?,
        prefill_overhead_ms: get(v, "prefill_overhead_ms")?,
    };
    let gpu = hardware.and_then(|h| h.gpu_entry.as_ref());
    let (Some(gpu), Some(entry)) = (gpu, model.and_then(|m| m.entry.as_ref())) else {
        let msg = "\"roofline\" predicts step times from the catalog's GPU and model, and this scenario names no catalog GPU or model";
        let hint =
            "set hardware.gpu and model.name (see `servesim catalog`), or use model = \"linear\"";
        return Err(v.bad("engine.step_time.model", msg, hint));
    };
    let tp = hardware.map_or(1, |h| h.tensor_parallel);
    let kv_bytes = match (
        memory.map(|m| &m.derivation),
        model.and_then(|m| m.kv_bytes_per_token),
    ) {
        (Some(MemoryDerivation::Sglang(s)), _) => s.inputs.kv_bytes_per_token,
        (Some(MemoryDerivation::Vllm(m)), _) => m.inputs.kv_bytes_per_token,
        (None, Some(b)) => b,
        (None, None) => entry.kv_bytes_per_token(tp, 2),
    };
    let roofline = Roofline::new(gpu, entry, tp, kv_bytes, settings);
    if !v.has("engine.step_time.calibration")? {
        return Ok(StepTimeSpec::Roofline(Box::new(roofline)));
    }
    let gen_tok_per_s = v.get("engine.step_time.calibration.gen_tok_per_s")?;
    let running: u64 = v.get("engine.step_time.calibration.running")?;
    let kv_tokens = match (v.opt("engine.step_time.calibration.kv_tokens")?, workload) {
        (Some(k), _) => k,
        // Without the KV in use, assume each running request is halfway through its response.
        (None, Some(w)) => {
            let per_request = w.prompt_tokens.nominal_mean() + w.output_tokens.nominal_mean() / 2.0;
            (running as f64 * per_request).round() as u64
        }
        (None, None) => return Err(Bad), // the workload has problems of its own
    };
    Ok(StepTimeSpec::Roofline(Box::new(roofline.calibrated(
        gen_tok_per_s,
        running,
        kv_tokens,
    ))))
}
