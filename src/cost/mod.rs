//! Step-time models: how long one scheduler iteration takes.
//!
//! The scheduler asks for the duration of a decode step (given the batch size and the KV tokens
//! attended) or of a prefill batch (given the tokens computed). Models are behind one small
//! trait so that the roofline model can join the linear one.

pub mod linear;
pub mod roofline;

use crate::memory::{HardwareSpec, MemoryDerivation, MemoryModel, ModelSpec};
use crate::settings::{keys, Bad, Values};
use crate::time::SimDuration;
use crate::workload::WorkloadSpec;

keys! {
/// `[engine.step_time]` (each model declares its own coefficients).
KEYS:
"engine.step_time" [Table, Absent("linear, with the defaults below"), All, ""]
    "the cost of one scheduler iteration", e.g. "[engine.step_time]";
"engine.step_time.model" [OneOf(&["linear", "roofline"]), Word("linear"), All, ""]
    "linear coefficients, or a roofline from the catalog's GPU and model (hardware.gpu, model.name)", e.g. r#""roofline""#;
}

/// `[engine.step_time]`.
#[derive(Clone, Debug, PartialEq)]
pub enum StepTimeSpec {
    /// The linear model.
    Linear(linear::LinearStepTime),
    /// The roofline model, resolved against the catalog's GPU and model.
    Roofline(Box<roofline::Roofline>),
}

impl StepTimeSpec {
    /// Read `[engine.step_time]`. The roofline needs the catalog's GPU and model, the KV bytes
    /// per token (from the memory model when there is one) and, to calibrate without the KV in
    /// use, the workload's mean lengths.
    pub fn read(
        v: &mut dyn Values,
        hardware: Option<&HardwareSpec>,
        model: Option<&ModelSpec>,
        memory: Option<&MemoryModel>,
        workload: Option<&WorkloadSpec>,
    ) -> Result<Self, Bad> {
        if v.get::<String>("engine.step_time.model")? == "linear" {
            return Ok(StepTimeSpec::Linear(linear::LinearStepTime::read(v)?));
        }
        let settings = roofline::RooflineSettings::read(v)?;
        let gpu = hardware.and_then(|h| h.gpu_entry.as_ref());
        let (Some(gpu), Some(entry)) = (gpu, model.and_then(|m| m.entry.as_ref())) else {
            let msg = "\"roofline\" predicts step times from the catalog's GPU and model, and this scenario names no catalog GPU or model";
            let hint = "set hardware.gpu and model.name (see `servesim catalog`), or use model = \"linear\"";
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
        let roofline = roofline::Roofline::new(gpu, entry, tp, kv_bytes, settings);
        let calibrated = roofline::calibration(v, workload, roofline)?;
        Ok(StepTimeSpec::Roofline(Box::new(calibrated)))
    }
}

/// One forward pass that mixes decode rows (one token each) with chunks of prompt tokens —
/// vLLM's every step, and SGLang's with `--enable-mixed-chunk`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MixedStep {
    /// Requests decoding one token.
    pub decode_seqs: u64,
    /// KV tokens the decode rows attend (their contexts, this step's token included).
    pub decode_kv_tokens: u64,
    /// Requests computing prompt (or recomputed) tokens.
    pub prefill_seqs: u64,
    /// Prompt tokens computed.
    pub prefill_tokens: u64,
    /// KV tokens the prefill rows attend: Σ (tokens computed before + this step's).
    pub prefill_kv_tokens: u64,
}

/// The cost of one scheduler iteration.
pub trait StepTimeModel: Send + Sync {
    /// Duration of one decode step of `batch` requests (≥ 1) attending `kv_tokens` tokens in
    /// total (the batch's context lengths after this step's slot was allocated). At least 1 ns.
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration;

    /// Duration of one prefill (extend) batch of `seqs` requests computing `extend_tokens` new
    /// tokens in total. At least 1 ns.
    fn prefill(&self, seqs: u64, extend_tokens: u64) -> SimDuration;

    /// Duration of one mixed forward pass. With no prompt tokens it equals
    /// [`decode`](Self::decode) of the decode rows. At least 1 ns.
    fn mixed(&self, step: MixedStep) -> SimDuration;

    /// Total duration of `steps` consecutive decode steps of a constant `batch`, the first
    /// attending `kv_first` tokens and each later one `batch` more. Must equal the sum of
    /// [`decode`](Self::decode) over those steps exactly; the default adds them one by one.
    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        let mut total = SimDuration::ZERO;
        for i in 0..steps {
            total = total + self.decode(batch, kv_first + batch * i);
        }
        total
    }

    /// The longest prefix of such a run, at most `most` steps, whose total stays below `budget`:
    /// its length and total. The default prices the steps once each, in one pass (never
    /// [`decode_run`](Self::decode_run) inside a search, which would be quadratic for a model
    /// without a closed form); a model with one may search it instead.
    fn decode_run_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
    ) -> (u64, SimDuration) {
        let mut total = SimDuration::ZERO;
        for i in 0..most {
            let next = total + self.decode(batch, kv_first + batch * i);
            if next >= budget {
                return (i, total);
            }
            total = next;
        }
        (most, total)
    }

    /// Like [`decode_run`](Self::decode_run), and also `Σ_j (w_first + w_slope·j) × d_j` in
    /// ns × weight units, where `d_j` is the duration of step `j` (from 0): the exact time
    /// integral of a quantity that grows by `w_slope` per step (the KV pool's use). The default
    /// adds step by step.
    fn decode_run_weighted(
        &self,
        batch: u64,
        kv_first: u64,
        steps: u64,
        w_first: u64,
        w_slope: u64,
    ) -> (SimDuration, u128) {
        let mut total = SimDuration::ZERO;
        let mut weighted = 0u128;
        for i in 0..steps {
            let d = self.decode(batch, kv_first + batch * i);
            weighted += u128::from(w_first + w_slope * i) * u128::from(d.as_ns());
            total = total + d;
        }
        (total, weighted)
    }

    /// A one-line description for reports.
    fn describe(&self) -> String;
}

/// Build the model a scenario asks for.
pub fn from_spec(spec: &StepTimeSpec) -> Box<dyn StepTimeModel> {
    match spec {
        StepTimeSpec::Linear(l) => Box::new(linear::Linear::new(l.clone())),
        StepTimeSpec::Roofline(r) => Box::new((**r).clone()),
    }
}
