//! Step-time models: how long one scheduler iteration takes.
//!
//! The scheduler asks for the duration of a decode step (given the batch size and the KV tokens
//! attended) or of a prefill batch (given the tokens computed), and for the runs of decode steps
//! that fast-forward takes at once. The models — linear, the roofline and a measured table —
//! are behind one trait, [`StepTimeModel`], built by one `match` ([`from_spec`]).

pub mod floors;
pub mod linear;
pub mod one_by_one;
pub mod roofline;
pub mod table;

use crate::memory::{HardwareSpec, MemoryDerivation, MemoryModel, ModelSpec};
pub use floors::FloorLine;

use crate::settings::{keys, Bad, Values};
use crate::time::SimDuration;
use crate::workload::WorkloadSpec;

keys! {
/// `[engine.step_time]` (each model declares its own coefficients).
KEYS:
"engine.step_time" [Table, Derived("the roofline when hardware.gpu and model.name are catalog entries; otherwise the linear model with servesim's made-up defaults below, flagged in every report"), All, ""]
    "the cost of one scheduler iteration", e.g. "[engine.step_time]";
"engine.step_time.model" [OneOf(&["linear", "roofline", "table"]), Word("linear"), All, ""]
    "linear coefficients, a roofline from the catalog's GPU and model (hardware.gpu, model.name), or a table of measured step times (written by `servesim calibrate --table`)", e.g. r#""roofline""#;
}

/// `[engine.step_time]`.
#[derive(Clone, Debug, PartialEq)]
pub enum StepTimeSpec {
    /// The linear model with coefficients the scenario gives (servesim's defaults for any it
    /// leaves out).
    Linear(linear::LinearStepTime),
    /// The linear model with none of its coefficients given: servesim's made-up defaults, which
    /// describe no hardware.
    LinearDefaults(linear::LinearStepTime),
    /// The roofline model, resolved against the catalog's GPU and model.
    Roofline(Box<roofline::Roofline>),
    /// Measured step times, interpolated.
    Table(Box<table::StepTable>),
}

/// Why the roofline predicts the step times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RooflineChoice {
    /// The scenario asks for it (`engine.step_time.model = "roofline"`).
    Asked,
    /// The scenario has no `[engine.step_time]` and names a catalog GPU and model.
    Default,
}

impl StepTimeSpec {
    /// Read `[engine.step_time]`. Without the table, the roofline when the scenario names a
    /// catalog GPU and model, else the linear model's made-up defaults. The roofline needs the
    /// catalog's GPU and model, the KV bytes per token (from the memory model when there is
    /// one) and, to calibrate, the workload's mean lengths and the prefill chunk
    /// (`prefill_chunk_tokens`).
    pub fn read(
        v: &mut dyn Values,
        hardware: Option<&HardwareSpec>,
        model: Option<&ModelSpec>,
        memory: Option<&MemoryModel>,
        workload: Option<&WorkloadSpec>,
        prefill_chunk_tokens: u64,
    ) -> Result<Self, Bad> {
        let gpu = hardware.and_then(|h| h.gpu_entry.as_ref());
        let entry = model.and_then(|m| m.entry.as_ref());
        let given = v.has("engine.step_time")?;
        let model_key = match given {
            true => v.get::<String>("engine.step_time.model")?,
            false => String::new(),
        };
        let choice = match (given, gpu, entry) {
            (true, ..) if model_key == "table" => {
                return Ok(StepTimeSpec::Table(Box::new(table::read::read(v)?)));
            }
            (true, ..) if model_key == "roofline" => RooflineChoice::Asked,
            (false, Some(_), Some(_)) => RooflineChoice::Default,
            (table, ..) => {
                let l = linear::LinearStepTime::read(v)?;
                let mut given = false;
                for key in linear::COEFFICIENTS {
                    given |= table && v.opt::<f64>(&format!("engine.step_time.{key}"))?.is_some();
                }
                return Ok(match given {
                    true => StepTimeSpec::Linear(l),
                    false => StepTimeSpec::LinearDefaults(l),
                });
            }
        };
        let settings = roofline::RooflineSettings::read(v)?;
        let (Some(gpu), Some(entry)) = (gpu, entry) else {
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
        let mut roofline = roofline::Roofline::new(gpu, entry, tp, kv_bytes, settings);
        roofline.choice = choice;
        let calibrated = roofline::calibration(v, workload, Some(prefill_chunk_tokens), roofline)?;
        Ok(StepTimeSpec::Roofline(Box::new(calibrated)))
    }

    /// The model, as reports name it: its terms, and for the linear model's defaults that
    /// nothing measured them.
    pub fn describe(&self) -> String {
        let d = from_spec(self).describe();
        match self {
            StepTimeSpec::LinearDefaults(_) => format!("{d} — {MADE_UP}"),
            _ => d,
        }
    }

    /// Where the step times come from, in a few words (the summary's `step_time_source`).
    pub fn source(&self) -> &'static str {
        match self {
            StepTimeSpec::Linear(_) => "linear, coefficients given by the scenario",
            StepTimeSpec::LinearDefaults(_) => "linear, servesim's made-up defaults",
            StepTimeSpec::Table(_) => "table of measured step times",
            StepTimeSpec::Roofline(r) => match (r.choice, r.calibration.is_some()) {
                (RooflineChoice::Asked, false) => "roofline from datasheets, uncalibrated",
                (RooflineChoice::Asked, true) => "roofline from datasheets, calibrated",
                (RooflineChoice::Default, false) => {
                    "roofline from datasheets, uncalibrated (the default for a catalog GPU and model)"
                }
                (RooflineChoice::Default, true) => {
                    "roofline from datasheets, calibrated (the default for a catalog GPU and model)"
                }
            },
        }
    }

    /// A warning when the step times describe no hardware (the linear model's defaults).
    pub fn warning(&self) -> Option<String> {
        match self {
            StepTimeSpec::LinearDefaults(_) => Some(format!(
                "step times are {MADE_UP}: every time, rate and latency of this run is illustrative only; \
                 name a catalog GPU and model (hardware.gpu, model.name) to predict them with the roofline, \
                 or give [engine.step_time] coefficients fitted to your server"
            )),
            _ => None,
        }
    }
}

/// What the linear model's defaults are.
const MADE_UP: &str = "servesim's made-up linear defaults (35 ms + 0.3 ms per running request per decode step, 10 ms + 120 µs per token per prefill), not measured on any hardware";

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
        one_by_one::total(steps, |i| self.decode(batch, kv_first + batch * i))
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
        one_by_one::within(most, budget, |i| self.decode(batch, kv_first + batch * i))
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
        one_by_one::weighted(steps, w_first, w_slope, |i| {
            self.decode(batch, kv_first + batch * i)
        })
    }

    /// Whether [`decode_run`](Self::decode_run), [`decode_run_within`](Self::decode_run_within)
    /// and [`decode_run_weighted`](Self::decode_run_weighted) are closed forms (O(log steps)
    /// each for the linear model, O(KV segments + log steps) for a table: no loop over the
    /// steps). Without one a run is priced once, step by step, with
    /// [`decode_ends_within`](Self::decode_ends_within).
    fn closed_form_runs(&self) -> bool {
        false
    }

    /// Whether a decode step of `batch` requests never gets shorter as its KV grows: then the
    /// steps of a run are non-decreasing, and its durations can be searched.
    fn decode_non_decreasing(&self, _batch: u64) -> bool {
        false
    }

    /// The run of [`decode_run_within`](Self::decode_run_within) priced once, step by step:
    /// pushes each step's end (ns from the run's start) to `ends` and returns the steps taken.
    /// A model may price its steps faster than [`decode`](Self::decode) one by one, with
    /// exactly its values.
    fn decode_ends_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
        ends: &mut Vec<u64>,
    ) -> u64 {
        one_by_one::ends_within(most, budget, ends, |i| {
            self.decode(batch, kv_first + batch * i)
        })
    }

    /// The `steps` decode steps of a constant `batch` from `kv_first` as one line of floors,
    /// each step exactly [`decode`](Self::decode)'s, when the model has one for the whole run
    /// (the default: none). [`DecodeSteps`] then answers for the run — a step, a prefix's
    /// time, the steps ended by a time — in a few integer operations each, without calling the
    /// model.
    fn decode_floor_line(&self, _batch: u64, _kv_first: u64, _steps: u64) -> Option<FloorLine> {
        None
    }

    /// A one-line description for reports.
    fn describe(&self) -> String;
}

/// The largest of `0, 1, …, hi` that satisfies `ok`, which holds for a prefix of them that
/// includes 0: a galloping search from `guess` (any value; clamped to `hi`), O(log of its
/// distance to the answer) calls.
pub fn last_true(hi: u64, guess: u64, ok: impl Fn(u64) -> bool) -> u64 {
    // `lo` satisfies it; nothing above `up` does.
    let (mut lo, mut up) = (0u64, hi);
    let mut probe = guess.min(hi);
    let mut step = 1u64;
    while lo < up {
        let holds = ok(probe);
        match holds {
            true => lo = lo.max(probe),
            false => up = up.min(probe.saturating_sub(1)),
        }
        let next = match holds {
            true => probe.saturating_add(step),
            false => probe.saturating_sub(step),
        };
        if next < lo || next > up || next == probe {
            break;
        }
        probe = next;
        step = step.saturating_mul(2);
    }
    while lo < up {
        let mid = lo + (up - lo).div_ceil(2);
        match ok(mid) {
            true => lo = mid,
            false => up = mid - 1,
        }
    }
    lo
}

/// A run of decode steps of a constant `batch`, step `j` (from 0) attending
/// `kv_first + batch·j` KV tokens: each step's duration and the time to the end of any prefix,
/// from the model's closed form ([`StepTimeModel::closed_form_runs`]) or from the steps' ends
/// priced once ([`StepTimeModel::decode_ends_within`]) — O(1) or O(log steps) each, never a
/// loop over the steps.
#[derive(Clone, Copy)]
pub struct DecodeSteps<'a> {
    model: &'a dyn StepTimeModel,
    batch: u64,
    kv_first: u64,
    steps: u64,
    /// Where the answers come from.
    priced: Priced<'a>,
    /// The run's duration, ns, when known.
    total: Option<u64>,
}

/// How a [`DecodeSteps`] knows its steps.
#[derive(Clone, Copy)]
enum Priced<'a> {
    /// Each step's end, ns from the run's start (a model without a closed form).
    Ends(&'a [u64]),
    /// The model's line of floors ([`StepTimeModel::decode_floor_line`]).
    Line(FloorLine),
    /// The model's closed forms, asked each time.
    Model,
}

impl<'a> DecodeSteps<'a> {
    /// The run of `steps` steps; `ends`: their ends from
    /// [`StepTimeModel::decode_ends_within`], or empty when the model has a closed form.
    pub fn new(
        model: &'a dyn StepTimeModel,
        batch: u64,
        kv_first: u64,
        steps: u64,
        ends: &'a [u64],
    ) -> Self {
        debug_assert!(
            ends.len() as u64 == steps || (ends.is_empty() && model.closed_form_runs()),
            "invariant: a run without a closed form comes with its steps' ends"
        );
        let priced = match ends {
            [] => match model.decode_floor_line(batch, kv_first, steps) {
                Some(line) if steps > 0 => {
                    debug_assert_eq!(line.steps(), steps);
                    Priced::Line(line)
                }
                _ => Priced::Model,
            },
            ends => Priced::Ends(ends),
        };
        DecodeSteps {
            model,
            batch,
            kv_first,
            steps,
            priced,
            total: None,
        }
    }

    /// The run that `line` describes, each of its steps [`decode`](StepTimeModel::decode)'s
    /// for `batch` requests from `kv_first` (a prefix of
    /// [`StepTimeModel::decode_floor_line`]'s line for a longer run, say).
    pub fn from_line(
        model: &'a dyn StepTimeModel,
        batch: u64,
        kv_first: u64,
        line: FloorLine,
    ) -> Self {
        DecodeSteps {
            model,
            batch,
            kv_first,
            steps: line.steps(),
            priced: Priced::Line(line),
            total: None,
        }
    }

    /// The same run, whose duration is known to be `total` ns (saves pricing it again).
    pub fn with_total(self, total: u64) -> Self {
        debug_assert_eq!(self.elapsed(self.steps), total);
        DecodeSteps {
            total: Some(total),
            ..self
        }
    }

    /// Steps in the run.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Requests in each step.
    pub fn batch(&self) -> u64 {
        self.batch
    }

    /// The duration of step `j`, ns.
    #[inline]
    pub fn duration(&self, j: u64) -> u64 {
        match self.priced {
            Priced::Line(line) => line.duration(j),
            Priced::Ends(ends) => {
                let j = j as usize;
                ends[j] - if j == 0 { 0 } else { ends[j - 1] }
            }
            Priced::Model => (self.model)
                .decode(self.batch, self.kv_first + self.batch * j)
                .as_ns(),
        }
    }

    /// The time from the run's start to the end of its first `n` steps, ns.
    #[inline(always)]
    pub fn elapsed(&self, n: u64) -> u64 {
        match (self.priced, n) {
            (_, 0) => 0,
            (_, n) if n == self.steps && self.total.is_some() => self.total.unwrap_or(0),
            (Priced::Line(line), n) => line.elapsed(n),
            (Priced::Ends(ends), n) => ends[n as usize - 1],
            (Priced::Model, n) => (self.model.decode_run(self.batch, self.kv_first, n)).as_ns(),
        }
    }

    /// How many of the steps end at most `t` ns after the run's start.
    pub fn ended_by(&self, t: u64) -> u64 {
        match self.priced {
            Priced::Line(line) => line.within(t.saturating_add(1)),
            Priced::Ends(ends) => ends.partition_point(|&e| e <= t) as u64,
            Priced::Model => {
                let budget = SimDuration::from_ns(t.saturating_add(1));
                (self.model)
                    .decode_run_within(self.batch, self.kv_first, self.steps, budget)
                    .0
            }
        }
    }

    /// The run's line of floors, when the model gave one ([`StepTimeModel::decode_floor_line`]).
    pub fn line(&self) -> Option<&FloorLine> {
        match &self.priced {
            Priced::Line(line) => Some(line),
            _ => None,
        }
    }

    /// Each step's end, ns from the run's start, when the run was priced step by step
    /// ([`StepTimeModel::decode_ends_within`]).
    pub fn ends(&self) -> Option<&'a [u64]> {
        match self.priced {
            Priced::Ends(ends) => Some(ends),
            _ => None,
        }
    }

    /// Whether the steps' durations are non-decreasing.
    pub fn non_decreasing(&self) -> bool {
        self.model.decode_non_decreasing(self.batch)
    }
}

/// Build the model a scenario asks for.
pub fn from_spec(spec: &StepTimeSpec) -> Box<dyn StepTimeModel> {
    match spec {
        StepTimeSpec::Linear(l) | StepTimeSpec::LinearDefaults(l) => {
            Box::new(linear::Linear::new(l.clone()))
        }
        StepTimeSpec::Roofline(r) => Box::new(roofline::PricedRoofline::new((**r).clone())),
        StepTimeSpec::Table(t) => Box::new(table::PricedTable::new((**t).clone())),
    }
}

#[cfg(test)]
pub(crate) mod tests;
