//! Step-time models: how long one scheduler iteration takes.
//!
//! The scheduler asks for the duration of a decode step (given the batch size and the KV tokens
//! attended) or of a prefill batch (given the tokens computed). Models are behind one small
//! trait so that the roofline model can join the linear one.

pub mod linear;
pub mod roofline;

use crate::time::SimDuration;

/// `[engine.step_time]`.
#[derive(Clone, Debug, PartialEq)]
pub enum StepTimeSpec {
    /// The linear model.
    Linear(linear::LinearStepTime),
    /// The roofline model, resolved against the catalog's GPU and model.
    Roofline(Box<roofline::Roofline>),
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
