//! Scenarios: the TOML contract of `shared/spec/scenario.md`, read in two layers.
//!
//! 1. [`tree`]: the file parsed into a tree that remembers where each value came from, with the
//!    `--set` overrides applied.
//! 2. [`validate`]: the tree checked against [`schema`] — where every key is declared once,
//!    with its type, range, default, unit, engine or mode, meaning and example — then assembled
//!    in dependency order (`build.rs`) into a [`Scenario`]; every problem is collected with its
//!    key path, position, bad value and a hint. A `Scenario` is valid by construction.

mod build;
pub mod derive;
pub mod error;
pub mod schema;
pub mod tree;
pub mod validate;

use std::path::{Path, PathBuf};

pub use error::{LoadError, Location, Problem, ScenarioError};
// The specs built from `[engine.step_time]` and `[client]` live with the code that runs them.
pub use crate::cost::linear::LinearStepTime;
pub use crate::cost::StepTimeSpec;
pub use crate::workload::client::ClientSpec;

use crate::time::{SimDuration, SimTime};
use crate::workload::dist::LengthDist;

/// The built-in case-study scenario (B2), the default of `servesim run`.
pub const BUILTIN_B2: &str = include_str!("../../scenarios/case-study-b2.toml");
/// Its display name.
pub const BUILTIN_B2_NAME: &str = "scenarios/case-study-b2.toml (built-in)";

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Shown in reports.
    pub name: String,
    /// Optional longer text shown in reports.
    pub description: Option<String>,
    /// Master seed of every random stream.
    pub seed: u64,
    /// Run control and observation.
    pub run: RunSpec,
    /// Hardware, when given.
    pub hardware: Option<HardwareSpec>,
    /// Model, when given.
    pub model: Option<ModelSpec>,
    /// The serving engine.
    pub engine: EngineSpec,
    /// What the client sends.
    pub workload: WorkloadSpec,
    /// How the client sends it.
    pub client: ClientSpec,
    /// The memory model, when the scenario has its inputs (hardware and model).
    pub memory: Option<MemoryModel>,
}

/// The KV budget derived from memory, with where each term came from.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MemoryModel {
    /// The GPU, as shown in reports.
    pub gpu: String,
    /// The model, as shown in reports.
    pub model: String,
    /// Tensor parallelism.
    pub tensor_parallel: u32,
    /// The derivation.
    pub derivation: MemoryDerivation,
    /// Where each term came from; its engine terms are those of `derivation`'s engine.
    pub sources: derive::MemorySources,
}

/// The engine-specific derivation.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "engine", rename_all = "snake_case")]
pub enum MemoryDerivation {
    /// SGLang's static-fraction rule.
    Sglang(crate::memory::SglangMemory),
    /// vLLM's utilisation rule.
    Vllm(crate::memory::VllmMemory),
}

impl MemoryModel {
    /// The KV pool in tokens the derivation gives.
    pub fn kv_tokens(&self) -> u64 {
        match &self.derivation {
            MemoryDerivation::Sglang(m) => m.max_total_num_tokens,
            MemoryDerivation::Vllm(m) => m.kv_tokens,
        }
    }

    /// The out-of-memory verdict (SGLang only).
    pub fn verdict(&self) -> Option<crate::memory::Verdict> {
        match &self.derivation {
            MemoryDerivation::Sglang(m) => Some(m.verdict),
            MemoryDerivation::Vllm(_) => None,
        }
    }
}

/// `[run]`.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Stop at this simulated time even if requests remain.
    pub max_sim: Option<SimDuration>,
    /// Snapshot the three views at these times (sorted, distinct).
    pub observe_at: Vec<SimTime>,
    /// The client's windowed-rate window.
    pub window: SimDuration,
    /// Initial spacing of the time series (doubled whenever it would exceed its point budget).
    pub timeseries_interval: SimDuration,
    /// Stop with an error after this many scheduler batches (prefill batches + decode steps).
    pub max_events: u64,
}

/// `[hardware]`.
#[derive(Clone, Debug)]
pub struct HardwareSpec {
    /// Catalog name of the GPU, if given.
    pub gpu: Option<String>,
    /// The catalog entry of `gpu`.
    pub gpu_entry: Option<crate::catalog::Gpu>,
    /// GPU memory as `nvidia-smi` reports it, if given (else the catalog's).
    pub memory_mib: Option<u64>,
    /// Free memory per GPU after the CUDA context and NCCL are up, before the weights load
    /// (SGLang's `M_pre`), if given.
    pub memory_before_weights_gib: Option<f64>,
    /// GPUs serving the model.
    pub num_gpus: u32,
    /// Tensor-parallel size.
    pub tensor_parallel: u32,
}

/// `[model]`.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// Catalog name of the model, if given.
    pub name: Option<String>,
    /// The catalog entry of `name`.
    pub entry: Option<crate::catalog::Model>,
    /// KV bytes per token per GPU, if given.
    pub kv_bytes_per_token: Option<u64>,
    /// Weights resident per GPU (GiB), if given.
    pub weight_gib_per_gpu: Option<f64>,
    /// The model's context length (tokens), given or from the catalog; it caps request lengths.
    pub context_len: Option<u64>,
}

/// The engine kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// SGLang's scheduler (`engine-semantics.md` §2).
    Sglang,
    /// vLLM: its memory model only, for now (`servesim memory`).
    Vllm,
}

impl EngineKind {
    /// `sglang` or `vllm`.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Sglang => "sglang",
            EngineKind::Vllm => "vllm",
        }
    }
}

/// How the waiting queue is ordered before each admission pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulePolicy {
    /// Arrival order (retracted requests rejoin at the end).
    Fcfs,
    /// Longest `max_new_tokens` first (stable).
    Lof,
    /// A fresh shuffle every pass.
    Random,
}

impl SchedulePolicy {
    /// The name as written in scenarios and in SGLang's `--schedule-policy`.
    pub fn as_str(self) -> &'static str {
        match self {
            SchedulePolicy::Fcfs => "fcfs",
            SchedulePolicy::Lof => "lof",
            SchedulePolicy::Random => "random",
        }
    }
}

/// SGLang's `new_token_ratio` parameters (environment variables in SGLang).
#[derive(Clone, Debug, PartialEq)]
pub struct NewTokenRatioSpec {
    /// `SGLANG_INIT_NEW_TOKEN_RATIO` (0.7).
    pub init: f64,
    /// `SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR` (0.14): the floor is `init × factor`.
    pub min_factor: f64,
    /// `SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS` (600): decode steps from init to the floor.
    pub decay_steps: u32,
    /// `SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION` (4096).
    pub clip_max_new_tokens: u32,
}

/// Where the KV budget came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvSource {
    /// `engine.kv_capacity_tokens` was given.
    Given,
    /// Derived by the memory model.
    Derived,
}

impl KvSource {
    /// `given` or `derived`.
    pub fn as_str(self) -> &'static str {
        match self {
            KvSource::Given => "given",
            KvSource::Derived => "derived from memory",
        }
    }
}

/// `[engine]`.
#[derive(Clone, Debug)]
pub struct EngineSpec {
    /// Which engine.
    pub kind: EngineKind,
    /// `max_total_num_tokens`: the KV pool in tokens (a multiple of `page_size`).
    pub kv_capacity_tokens: u64,
    /// Where the budget came from.
    pub kv_source: KvSource,
    /// `--mem-fraction-static`, if given (used by the memory model).
    pub mem_fraction_static: Option<f64>,
    /// `--page-size`.
    pub page_size: u32,
    /// `--max-running-requests` (after SGLang's own cap to half the pool).
    pub max_running_requests: u32,
    /// `--chunked-prefill-size`; `None` when chunking is disabled (`-1`).
    pub chunked_prefill_size: Option<u32>,
    /// `--max-prefill-tokens`.
    pub max_prefill_tokens: u32,
    /// `--schedule-policy`.
    pub schedule_policy: SchedulePolicy,
    /// `--decode-log-interval`.
    pub decode_log_interval: u32,
    /// The admission estimate's parameters.
    pub new_token_ratio: NewTokenRatioSpec,
    /// Largest decode batch that replays a CUDA graph (only for the log's `cuda graph` field).
    pub cuda_graph_max_bs: u32,
    /// Step-time model.
    pub step_time: StepTimeSpec,
}

/// `[workload]`.
#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    /// Requests the client sends in all.
    pub requests: u64,
    /// Prompt lengths.
    pub prompt_tokens: LengthDist,
    /// Natural response lengths (where the model would stop by itself).
    pub output_tokens: LengthDist,
    /// The `max_tokens` the client asks for; `None` when the client omits it (SGLang then
    /// allows up to the request-length limit).
    pub max_new_tokens: Option<u32>,
    /// `ignore_eos`: every request runs to its `max_new_tokens`.
    pub ignore_eos: bool,
}

/// A scenario's text and the name to show for it.
#[derive(Clone, Debug)]
pub struct Source {
    /// Name shown in messages (the path as given, or the built-in's name).
    pub name: String,
    /// Directory against which relative paths (CSV files) are resolved.
    pub base_dir: PathBuf,
    /// The TOML text.
    pub text: String,
}

impl Source {
    /// Read a scenario file.
    pub fn read(path: &Path) -> Result<Source, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|e| LoadError::NotUtf8 {
            path: path.to_path_buf(),
            offset: e.utf8_error().valid_up_to(),
        })?;
        Ok(Source {
            name: path.display().to_string(),
            base_dir: path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from(".")),
            text,
        })
    }

    /// The built-in B2 case-study scenario.
    pub fn builtin_b2() -> Source {
        Source {
            name: BUILTIN_B2_NAME.to_string(),
            base_dir: PathBuf::from("."),
            text: BUILTIN_B2.to_string(),
        }
    }
}

/// Parse, apply `--set` overrides, and validate. Every problem is reported at once.
pub fn load(source: &Source, sets: &[String]) -> Result<Scenario, ScenarioError> {
    build::load(source, sets)
}
