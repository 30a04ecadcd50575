//! The scenario assembled from checked values, in dependency order: catalog, hardware, model,
//! workload, client, then the engine — the settings its KV pool depends on, the memory model,
//! the KV budget, the step-time model, its own settings — and the workload checked against the
//! engine. Each section reads its own keys (the `read` functions beside each spec).

use super::*;
use crate::catalog::Catalog;
use crate::memory::{resolve, ClientLoad, KvCacheDtype};
use crate::scheduler::PolicySpec;
use crate::settings::{keys, Bad, Values};

keys! {
/// The top-level keys (the sections declare theirs beside their specs).
TOP:
"name" [Text, Required, All, ""] "shown in reports", e.g. r#""B2 opencodeinstruct""#;
"description" [Text, Absent("none"), All, ""]
    "a longer text shown in reports", e.g. r#""Case study B2""#;
"seed" [Integer(0, u64::MAX), Int(1), All, ""]
    "master seed of every random stream (never entropy)", e.g. "7";
"catalog" [Text, Absent("none"), All, ""]
    "a TOML file of [[gpu]] and [[model]] entries (relative to the scenario) that extends the built-in catalog", e.g. r#""my-gpus.toml""#;
}

/// Assemble the scenario: the independent parts first, each on its own so that every problem
/// is found, then the parts that depend on them.
pub(super) fn build(v: &mut dyn Values) -> Result<Scenario, Bad> {
    // The built-in catalog, extended by the scenario's `catalog = "file.toml"` if it can be read.
    let user_catalog = match v.opt::<String>("catalog") {
        Ok(Some(file)) => Catalog::with_user_file(&v.input(&file)).map_err(|e| {
            let hint = "a TOML file of [[gpu]] and [[model]] entries, relative to the scenario (see `servesim catalog`)";
            v.bad("catalog", format!("cannot be used: {e}"), hint)
        }),
        _ => Err(Bad),
    };
    let catalog = user_catalog.as_ref().unwrap_or(Catalog::builtin_ref());
    let run = RunSpec::read(v);
    let hardware = HardwareSpec::read(v, catalog);
    let model = ModelSpec::read(v, catalog);
    let workload = WorkloadSpec::read(v);
    let client = ClientSpec::read(v, workload.as_ref().ok());
    let overhead = Overhead::read(v);
    let (hardware, model) = (hardware?, model?);
    let load = match (&workload, &client) {
        (Ok(w), Ok(c)) => Some(ClientLoad::new(w, c.concurrency())),
        _ => None,
    };
    let (hw, m) = (hardware.as_ref(), model.as_ref());
    let (engine, memory) = engine(v, hw, m, workload.as_ref().ok(), load)?;
    let workload = workload?;
    let (kv, context_len) = (engine.kv_capacity_tokens, m.and_then(|m| m.context_len));
    let policy = &engine.policy;
    policy.check_workload(v, kv, context_len, &workload)?;
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
        overhead: overhead?,
        memory,
        inputs: Vec::new(),
    })
}

/// The engine, in dependency order: the settings its pool depends on, the memory model (whose
/// verdict weighs the largest decode batch the client's `load` allows), the KV budget, the
/// step-time model, then the engine's own settings for that pool.
fn engine(
    v: &mut dyn Values,
    hardware: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    workload: Option<&WorkloadSpec>,
    load: Option<ClientLoad>,
) -> Result<(EngineSpec, Option<MemoryModel>), Bad> {
    let pool = PolicySpec::pool(v, hardware, model)?;
    let kv_cache_dtype = KvCacheDtype::read(v)?;
    let memory = resolve::read(v, hardware, model, kv_cache_dtype, pool, load)?;
    let (kv_capacity_tokens, kv_source) = resolve::kv_budget(v, &memory, pool)?;
    let memory = memory.ok();
    let chunk = pool.prefill_tokens_per_forward();
    let step_time = StepTimeSpec::read(v, hardware, model, memory.as_ref(), workload, chunk)?;
    let policy = PolicySpec::read(v, hardware, model, kv_capacity_tokens)?;
    let spec = EngineSpec {
        kv_capacity_tokens,
        kv_source,
        kv_cache_dtype,
        step_time,
        policy,
    };
    Ok((spec, memory))
}
