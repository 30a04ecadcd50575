//! `[engine]`: what every engine has — its KV pool and the pool's element type (declared with
//! the memory model, [`crate::memory::resolve`]), its step-time model ([`crate::cost`]) — and
//! one settings section per engine ([`PolicySpec`]), each declared, read and defaulted in its
//! engine's folder. `engine.kind` picks the section: the one place a kind becomes settings.

use super::{sglang, vllm};
use crate::cost::StepTimeSpec;
use crate::memory::{HardwareSpec, KvCacheDtype, KvSource, ModelSpec, PoolSettings};
use crate::settings::{keys, Bad, Values};
use crate::workload::WorkloadSpec;

keys! {
/// `[engine]` and its kind.
KEYS:
"engine" [Table, Required, All, ""]
    "the serving engine: its kind, KV budget and scheduler settings", e.g. "[engine]";
"engine.kind" [OneOf(&["sglang", "vllm"]), Word("sglang"), All, ""]
    "the engine: SGLang's scheduler, or vLLM's V1 scheduler (`src/scheduler/vllm/`)", e.g. r#""vllm""#;
}

/// The engine kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// SGLang's scheduler (`engine-semantics.md` §2).
    Sglang,
    /// vLLM's V1 scheduler (`engine-semantics.md` §4).
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

    fn read(v: &dyn Values) -> Result<Self, Bad> {
        Ok(match v.get::<String>("engine.kind")?.as_str() {
            "vllm" => EngineKind::Vllm,
            _ => EngineKind::Sglang,
        })
    }
}

/// `[engine]`: the settings every engine has, and its own.
#[derive(Clone, Debug)]
pub struct EngineSpec {
    /// The KV pool in tokens (whole pages or blocks).
    pub kv_capacity_tokens: u64,
    /// Where it came from.
    pub kv_source: KvSource,
    /// The KV cache's element type.
    pub kv_cache_dtype: KvCacheDtype,
    /// Step-time model.
    pub step_time: StepTimeSpec,
    /// The engine's own settings; the variant is the engine.
    pub policy: PolicySpec,
}

impl EngineSpec {
    /// Which engine.
    pub fn kind(&self) -> EngineKind {
        self.policy.kind()
    }
}

/// One settings section per engine.
#[derive(Clone, Debug)]
pub enum PolicySpec {
    /// SGLang's flags.
    Sglang(sglang::settings::SglangSettings),
    /// vLLM's flags.
    Vllm(vllm::settings::VllmSettings),
}

impl PolicySpec {
    /// The engine's settings that the KV pool depends on (read before the pool is known).
    pub fn pool(
        v: &mut dyn Values,
        hw: Option<&HardwareSpec>,
        model: Option<&ModelSpec>,
    ) -> Result<PoolSettings, Bad> {
        v.has("engine")?;
        match EngineKind::read(v)? {
            EngineKind::Sglang => sglang::settings::SglangSettings::pool(v, hw),
            EngineKind::Vllm => vllm::settings::VllmSettings::pool(v, hw, model),
        }
    }

    /// Read the engine's settings for a pool of `kv_tokens`.
    pub fn read(
        v: &mut dyn Values,
        hw: Option<&HardwareSpec>,
        model: Option<&ModelSpec>,
        kv_tokens: u64,
    ) -> Result<Self, Bad> {
        Ok(match EngineKind::read(v)? {
            EngineKind::Sglang => PolicySpec::Sglang(sglang::settings::SglangSettings::read(
                v, hw, model, kv_tokens,
            )?),
            EngineKind::Vllm => PolicySpec::Vllm(vllm::settings::VllmSettings::read(v, hw, model)?),
        })
    }

    /// Refuse, before running, a workload the engine would refuse entirely (`context_len`:
    /// the model's).
    pub fn check_workload(
        &self,
        v: &mut dyn Values,
        kv_tokens: u64,
        context_len: Option<u64>,
        workload: &WorkloadSpec,
    ) -> Result<(), Bad> {
        match self {
            PolicySpec::Sglang(s) => s.check_workload(v, kv_tokens, context_len, workload),
            PolicySpec::Vllm(_) => Ok(()),
        }
    }

    /// Which engine.
    pub fn kind(&self) -> EngineKind {
        match self {
            PolicySpec::Sglang(_) => EngineKind::Sglang,
            PolicySpec::Vllm(_) => EngineKind::Vllm,
        }
    }

    /// The most requests running at once (SGLang's `max_running_requests`, vLLM's
    /// `max_num_seqs`).
    pub fn max_running_requests(&self) -> u32 {
        match self {
            PolicySpec::Sglang(s) => s.max_running_requests,
            PolicySpec::Vllm(s) => s.max_num_seqs,
        }
    }
}
