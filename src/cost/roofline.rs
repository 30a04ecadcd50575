//! The roofline step-time model: step times predicted from the catalog's datasheet figures, for
//! hardware nobody has profiled yet.
//!
//! Per GPU, for a decode step of `B` running requests attending `K` KV tokens in all:
//!
//! * **bytes read** = the weights every step reads, stored as the served checkpoint stores them
//!   (`model.weight_dtype`, by default the released format) — attention, dense layers, shared
//!   experts, router, LM head: [`Model::dense_read_bytes_per_gpu`] — + the routed experts the batch
//!   touches — under uniform routing a layer's `E` experts, `k` per token, are touched
//!   `E·(1 − (1 − k/E)^B)` distinct times in expectation, each costing
//!   [`Model::expert_bytes_per_gpu`] — + the KV cache, `K × KV bytes per token` (per GPU, with
//!   SGLang's TP rules: MLA's latent is read whole on every GPU);
//! * **FLOPs** = `B × 2 × active parameters / TP` + attention over the context,
//!   `K × 4 × heads × head width × layers / TP` (scores and weighted values); with FP8 weights
//!   on a GPU with FP8 tensor cores the weight matmuls run at the FP8 rate;
//! * **time** = `max(bytes / (bandwidth × η_bw), FLOPs / (BF16 peak × η_c))` + the tensor-parallel
//!   all-reduces — two per layer, each `latency + 2(TP − 1)/TP × B × hidden × 2 B / link
//!   bandwidth` — + a fixed per-step overhead.
//!
//! A prefill batch of `T` new tokens over `n` requests computes `T × 2 × active/TP` plus the
//! causal attention, `2 × T²/n × heads × head width × layers / TP` (the batch's requests taken as
//! equally long), reads the weights once (all experts a batch of `T` tokens touches), and pays the
//! same all-reduces with `T` tokens.
//!
//! Defaults (each overridable in `[engine.step_time]`), rules of thumb rather than measurements:
//! * `η_bw = 0.75` — serving stacks reach roughly 60–85 % of peak memory bandwidth in decode,
//!   well-tuned CUDA stacks (vLLM, TensorRT-LLM) 70–85 % ("model bandwidth utilization",
//!   <https://www.open-source-ai.tech/glossary/model-bandwidth-utilization>);
//! * `η_c = 0.5` — the top of the 30–50 % model-FLOPs utilization quoted for inference prefill
//!   (<https://zeroentropy.dev/concepts/mfu/>); prefill is a small share of a decode-heavy
//!   workload's time, so this matters mostly for long prompts and short answers;
//! * 2 ms of per-step overhead for scheduling, sampling and launches between CUDA-graph replays,
//!   and 5 ms per prefill batch — servesim's own assumptions, not sourced; calibrate them away
//!   when a measured point exists.
//!
//! An optional calibration point — one `Decode batch` line of the real server's log: its `gen
//! throughput`, `#running-req` and `#token` — scales every step time by one factor so the model
//! reproduces that line, leaving its shape intact. SGLang's `gen throughput` is the decode
//! tokens of the last 40 steps over the wall time since the previous line, prefill batches
//! included (`managers/scheduler_components/metrics_reporter.py`), so the point is matched with
//! the same quantity: decode steps of `running` requests plus the prefill of the requests that
//! replace the ones finishing ([`Roofline::logged_gen_tok_per_s`]).

use serde::Serialize;

use super::{one_by_one, MixedStep, RooflineChoice, StepTimeModel};
use crate::catalog::{Attention, Gpu, Model};
use crate::settings::{keys, Bad, Values, When};
use crate::time::{round_below_2_52, SimDuration, TWO_52};
use crate::workload::WorkloadSpec;

const ROOFLINE: When = When::If("engine.step_time.model", &["roofline"]);

keys! {
/// The roofline's settings in `[engine.step_time]`.
KEYS:
"engine.step_time.bandwidth_efficiency" [Number(Fraction), Num(DEFAULT_BANDWIDTH_EFFICIENCY), ROOFLINE, ""]
    "the fraction of peak memory bandwidth reached", e.g. "0.75";
"engine.step_time.compute_efficiency" [Number(Fraction), Num(DEFAULT_COMPUTE_EFFICIENCY), ROOFLINE, ""]
    "the fraction of peak compute reached", e.g. "0.5";
"engine.step_time.decode_overhead_ms" [Number(Within(0.0, 1e6)), Num(DEFAULT_DECODE_OVERHEAD_MS), ROOFLINE, "ms"]
    "overhead per decode step", e.g. "2";
"engine.step_time.prefill_overhead_ms" [Number(Within(0.0, 1e6)), Num(DEFAULT_PREFILL_OVERHEAD_MS), ROOFLINE, "ms"]
    "overhead per prefill batch", e.g. "5";
"engine.step_time.calibration" [Table, Absent("none"), ROOFLINE, ""]
    "scale the roofline to one Decode batch line of the real server's log (its gen throughput includes the prefill batches between decode steps, and so does the model it is matched with)", e.g. "{ gen_tok_per_s = 850, running = 50, kv_tokens = 104000 }";
"engine.step_time.calibration.gen_tok_per_s" [Number(Within(1e-6, 1e12)), Required, All, "tok/s"]
    "the line's gen throughput (token/s)", e.g. "850";
"engine.step_time.calibration.running" [Integer(1, 1 << 24), Required, All, ""]
    "the line's #running-req", e.g. "50";
"engine.step_time.calibration.kv_tokens" [Integer(0, 1 << 40), Required, All, "tokens"]
    "the line's #token: KV tokens in use (or token usage × the pool)", e.g. "104000";
"engine.step_time.calibration_table" [Text, Absent("none"), ROOFLINE, ""]
    "scale the roofline by the one factor that best matches a table of measured step times (a CSV in the format of model = \"table\", relative to the scenario; least squares on the relative error of every point)", e.g. r#""measured.csv""#;
}

/// Default fraction of peak memory bandwidth reached.
pub const DEFAULT_BANDWIDTH_EFFICIENCY: f64 = 0.75;
/// Default fraction of dense BF16 peak reached.
pub const DEFAULT_COMPUTE_EFFICIENCY: f64 = 0.5;
/// Default per-decode-step overhead, ms.
pub const DEFAULT_DECODE_OVERHEAD_MS: f64 = 2.0;
/// Default per-prefill-batch overhead, ms.
pub const DEFAULT_PREFILL_OVERHEAD_MS: f64 = 5.0;

/// The model's parameters, all per GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Roofline {
    /// GPU name, for reports.
    pub gpu: String,
    /// Model name, for reports.
    pub model: String,
    /// Tensor parallelism.
    pub tensor_parallel: u32,
    /// Weight bytes read on every step.
    pub dense_read_bytes: f64,
    /// Bytes of one routed expert of one layer.
    pub expert_bytes: f64,
    /// Routed experts per MoE layer (0 for a dense model).
    pub routed_experts: f64,
    /// Experts each token is routed to.
    pub experts_per_token: f64,
    /// MoE layers.
    pub moe_layers: f64,
    /// KV bytes per token.
    pub kv_bytes_per_token: f64,
    /// FLOPs per generated token: `2 × active parameters / TP`.
    pub flops_per_token: f64,
    /// The time of a weight-matmul FLOP relative to a BF16 one: `BF16 peak / FP8 peak` when the
    /// weights are FP8 and the GPU has FP8 tensor cores (SGLang's W8A8 block-FP8 kernels), else
    /// 1 (BF16 weights, and INT4 weights dequantised to BF16 as W4A16 kernels do).
    pub matmul_time_factor: f64,
    /// Attention FLOPs per (token, context token) pair, full (non-causal) form:
    /// `4 × heads × head width × layers / TP`.
    pub attention_flops_per_pair: f64,
    /// Transformer layers (two all-reduces each).
    pub layers: f64,
    /// Hidden size, in elements (the all-reduced activation width).
    pub hidden_size: f64,
    /// Peak memory bandwidth.
    pub bandwidth_bytes_per_s: f64,
    /// Dense BF16 peak.
    pub peak_flops_per_s: f64,
    /// GPU-to-GPU bandwidth per direction.
    pub link_bytes_per_s: f64,
    /// Latency of one small all-reduce.
    pub collective_latency_s: f64,
    /// Fraction of peak bandwidth reached.
    pub bandwidth_efficiency: f64,
    /// Fraction of peak compute reached.
    pub compute_efficiency: f64,
    /// Fixed cost of a decode step.
    pub decode_overhead_s: f64,
    /// Fixed cost of a prefill batch.
    pub prefill_overhead_s: f64,
    /// Calibration factor applied to every step (1 without calibration).
    pub scale: f64,
    /// Why the roofline is used: asked for, or the default for a catalog GPU and model.
    pub choice: RooflineChoice,
    /// What the model was calibrated on, if anything.
    pub calibration: Option<Calibration>,
}

/// What a roofline was scaled to match.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Calibration {
    /// One log line.
    Point(CalibrationPoint),
    /// A table of measured step times.
    Table(TableCalibration),
}

/// A table of measured step times the roofline was scaled to, and how well it then matches.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableCalibration {
    /// The table's file.
    pub source: String,
    /// Points matched (decode and prefill).
    pub points: usize,
    /// Root-mean-square relative error of the scaled roofline over the points.
    pub rms_relative_error: f64,
}

/// One point observed on the real server — a `Decode batch` log line — and what the workload
/// says about the prefill its throughput includes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CalibrationPoint {
    /// The line's `gen throughput (token/s)`.
    pub gen_tok_per_s: f64,
    /// The line's `#running-req`.
    pub running: u64,
    /// The line's `#token`: KV tokens in use.
    pub kv_tokens: u64,
    /// The workload's mean prompt length: what each replacement request prefills.
    pub mean_prompt_tokens: f64,
    /// The workload's mean response length: decode tokens per completion, plus the first one,
    /// which the prefill produces.
    pub mean_output_tokens: f64,
    /// The prefill chunk (`chunked_prefill_size`), if prompts are chunked.
    pub prefill_chunk_tokens: Option<u64>,
}

/// The terms of one step, seconds (before `scale`, except `total`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Breakdown {
    /// Reading weights.
    pub weights_s: f64,
    /// Reading the KV cache.
    pub kv_s: f64,
    /// `weights + kv` (the memory side of the roofline).
    pub memory_s: f64,
    /// The compute side.
    pub compute_s: f64,
    /// Tensor-parallel all-reduces.
    pub communication_s: f64,
    /// Fixed overhead.
    pub overhead_s: f64,
    /// Distinct routed experts touched per MoE layer.
    pub experts_touched: f64,
    /// `(max(memory, compute) + communication + overhead) × scale`.
    pub total_s: f64,
}

/// The efficiency and overhead settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RooflineSettings {
    /// Fraction of peak memory bandwidth reached.
    pub bandwidth_efficiency: f64,
    /// Fraction of peak compute reached.
    pub compute_efficiency: f64,
    /// Per-decode-step overhead, ms.
    pub decode_overhead_ms: f64,
    /// Per-prefill-batch overhead, ms.
    pub prefill_overhead_ms: f64,
}

impl RooflineSettings {
    /// Read the roofline's settings.
    pub fn read(v: &dyn Values) -> Result<Self, Bad> {
        let get = |key: &str| v.get::<f64>(&format!("engine.step_time.{key}"));
        Ok(RooflineSettings {
            bandwidth_efficiency: get("bandwidth_efficiency")?,
            compute_efficiency: get("compute_efficiency")?,
            decode_overhead_ms: get("decode_overhead_ms")?,
            prefill_overhead_ms: get("prefill_overhead_ms")?,
        })
    }
}

/// `roofline` scaled to `[engine.step_time.calibration]` if the scenario gives one, matched
/// with the workload's mean lengths and the prefill chunk.
pub fn calibration(
    v: &mut dyn Values,
    workload: Option<&WorkloadSpec>,
    prefill_chunk_tokens: Option<u64>,
    roofline: Roofline,
) -> Result<Roofline, Bad> {
    if let Some(file) = v.opt::<String>("engine.step_time.calibration_table")? {
        if v.has("engine.step_time.calibration")? {
            let msg = "a roofline is calibrated on one log line or on a table, not both";
            return Err(v.bad(
                "engine.step_time.calibration_table",
                msg,
                "remove calibration or calibration_table",
            ));
        }
        let table = super::table::read::load_for(v, "engine.step_time.calibration_table", &file)?;
        return Ok(roofline.calibrated_to_table(&table));
    }
    if !v.has("engine.step_time.calibration")? {
        return Ok(roofline);
    }
    let Some(w) = workload else {
        return Err(Bad); // the workload has problems of its own
    };
    let (prompt, output) = w.mean_lengths();
    let output = match (w.max_new_tokens, w.ignore_eos) {
        (Some(cap), false) => output.min(f64::from(cap)),
        _ => output,
    };
    let point = CalibrationPoint {
        gen_tok_per_s: v.get("engine.step_time.calibration.gen_tok_per_s")?,
        running: v.get("engine.step_time.calibration.running")?,
        kv_tokens: v.get("engine.step_time.calibration.kv_tokens")?,
        mean_prompt_tokens: prompt,
        mean_output_tokens: output,
        prefill_chunk_tokens,
    };
    Ok(roofline.calibrated(point))
}

impl Default for RooflineSettings {
    fn default() -> Self {
        RooflineSettings {
            bandwidth_efficiency: DEFAULT_BANDWIDTH_EFFICIENCY,
            compute_efficiency: DEFAULT_COMPUTE_EFFICIENCY,
            decode_overhead_ms: DEFAULT_DECODE_OVERHEAD_MS,
            prefill_overhead_ms: DEFAULT_PREFILL_OVERHEAD_MS,
        }
    }
}

impl Roofline {
    /// The model for `model` on `gpu` with tensor parallelism `tp` and `kv_bytes_per_token` KV
    /// bytes per token per GPU.
    pub fn new(
        gpu: &Gpu,
        model: &Model,
        tp: u32,
        kv_bytes_per_token: u64,
        s: RooflineSettings,
    ) -> Self {
        let tp = tp.max(1);
        let tpf = f64::from(tp);
        let heads = f64::from(model.q_heads);
        let width = match model.attention {
            Attention::Gqa { head_dim, .. } => f64::from(head_dim),
            // Absorbed MLA decode attends over the latent: scores over kv_lora_rank + rope,
            // values over kv_lora_rank; ≈ the latent width for both.
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => f64::from(kv_lora_rank + qk_rope_head_dim),
        };
        Roofline {
            gpu: gpu.display.clone(),
            model: model.display.clone(),
            tensor_parallel: tp,
            dense_read_bytes: model.dense_read_bytes_per_gpu(tp) as f64,
            expert_bytes: model.expert_bytes_per_gpu(tp) as f64,
            routed_experts: f64::from(model.num_experts()),
            experts_per_token: f64::from(model.experts_per_token()),
            moe_layers: f64::from(model.moe_layers()),
            kv_bytes_per_token: kv_bytes_per_token as f64,
            flops_per_token: 2.0 * model.active_params() as f64 / tpf,
            matmul_time_factor: match gpu.fp8_dense_tflops {
                Some(fp8) if model.weight_dtype.fp8_matmuls() && fp8 > 0.0 => {
                    gpu.bf16_dense_tflops / fp8
                }
                _ => 1.0,
            },
            attention_flops_per_pair: 4.0 * heads * width * f64::from(model.layers) / tpf,
            layers: f64::from(model.layers),
            hidden_size: f64::from(model.hidden_size),
            bandwidth_bytes_per_s: gpu.hbm_bandwidth_gb_per_s * 1e9,
            peak_flops_per_s: gpu.bf16_dense_tflops * 1e12,
            link_bytes_per_s: gpu.interconnect_gb_per_s * 1e9,
            collective_latency_s: gpu.collective_latency_us * 1e-6,
            bandwidth_efficiency: s.bandwidth_efficiency,
            compute_efficiency: s.compute_efficiency,
            decode_overhead_s: s.decode_overhead_ms * 1e-3,
            prefill_overhead_s: s.prefill_overhead_ms * 1e-3,
            scale: 1.0,
            choice: RooflineChoice::Asked,
            calibration: None,
        }
    }

    /// Expected distinct experts per MoE layer touched by `tokens` tokens under uniform routing.
    pub fn experts_touched(&self, tokens: f64) -> f64 {
        if self.routed_experts == 0.0 {
            return 0.0;
        }
        self.routed_experts
            * (1.0 - (1.0 - self.experts_per_token / self.routed_experts).powf(tokens))
    }

    fn all_reduce(&self, tokens: f64) -> f64 {
        let tp = f64::from(self.tensor_parallel);
        if self.tensor_parallel <= 1 {
            return 0.0;
        }
        let bytes = tokens * self.hidden_size * 2.0;
        2.0 * self.layers
            * (self.collective_latency_s + 2.0 * (tp - 1.0) / tp * bytes / self.link_bytes_per_s)
    }

    fn finish(&self, mut b: Breakdown) -> Breakdown {
        b.memory_s = b.weights_s + b.kv_s;
        b.total_s = (b.memory_s.max(b.compute_s) + b.communication_s + b.overhead_s) * self.scale;
        b
    }

    /// The terms of a decode step of `batch` requests attending `kv_tokens` tokens.
    pub fn decode_breakdown(&self, batch: u64, kv_tokens: u64) -> Breakdown {
        let b = batch as f64;
        let touched = self.experts_touched(b);
        let weights = self.dense_read_bytes + touched * self.moe_layers * self.expert_bytes;
        let bw = self.bandwidth_bytes_per_s * self.bandwidth_efficiency;
        let flops = b * self.flops_per_token * self.matmul_time_factor
            + kv_tokens as f64 * self.attention_flops_per_pair;
        self.finish(Breakdown {
            weights_s: weights / bw,
            kv_s: kv_tokens as f64 * self.kv_bytes_per_token / bw,
            compute_s: flops / (self.peak_flops_per_s * self.compute_efficiency),
            communication_s: self.all_reduce(b),
            overhead_s: self.decode_overhead_s,
            experts_touched: touched,
            ..Breakdown::default()
        })
    }

    /// The terms of a prefill batch of `seqs` requests computing `tokens` new tokens.
    pub fn prefill_breakdown(&self, seqs: u64, tokens: u64) -> Breakdown {
        self.prefill_terms(seqs.max(1) as f64, tokens as f64)
    }

    /// [`Roofline::prefill_breakdown`] of `n` requests (≥ 1, possibly fractional: a mean)
    /// computing `t` tokens.
    fn prefill_terms(&self, n: f64, t: f64) -> Breakdown {
        let touched = self.experts_touched(t);
        let weights = self.dense_read_bytes + touched * self.moe_layers * self.expert_bytes;
        // Causal attention: half of the full T²/n pairs.
        let flops = t * self.flops_per_token * self.matmul_time_factor
            + 0.5 * t * t / n * self.attention_flops_per_pair;
        self.finish(Breakdown {
            weights_s: weights / (self.bandwidth_bytes_per_s * self.bandwidth_efficiency),
            kv_s: 0.0,
            compute_s: flops / (self.peak_flops_per_s * self.compute_efficiency),
            communication_s: self.all_reduce(t),
            overhead_s: self.prefill_overhead_s,
            experts_touched: touched,
            ..Breakdown::default()
        })
    }

    /// The terms of a mixed step (see [`MixedStep`]): the weights are read once for all the
    /// step's tokens; decode rows attend their contexts; a prefill chunk of `T` tokens over `n`
    /// requests ending at `K` context tokens attends `T·(K − T/2)/n` pairs (the requests taken
    /// as equally long) and reads the `K − T` tokens cached before it.
    pub fn mixed_breakdown(&self, step: MixedStep) -> Breakdown {
        let decode = step.decode_seqs as f64;
        let t = step.prefill_tokens as f64;
        let k = step.prefill_kv_tokens as f64;
        let n = step.prefill_seqs.max(1) as f64;
        let tokens = decode + t;
        let touched = self.experts_touched(tokens);
        let weights = self.dense_read_bytes + touched * self.moe_layers * self.expert_bytes;
        let bw = self.bandwidth_bytes_per_s * self.bandwidth_efficiency;
        let kv_read = step.decode_kv_tokens as f64 + (k - t).max(0.0);
        let pairs = step.decode_kv_tokens as f64 + t * (k - 0.5 * t).max(0.0) / n;
        let flops = tokens * self.flops_per_token * self.matmul_time_factor
            + pairs * self.attention_flops_per_pair;
        self.finish(Breakdown {
            weights_s: weights / bw,
            kv_s: kv_read * self.kv_bytes_per_token / bw,
            compute_s: flops / (self.peak_flops_per_s * self.compute_efficiency),
            communication_s: self.all_reduce(tokens),
            overhead_s: self.decode_overhead_s,
            experts_touched: touched,
            ..Breakdown::default()
        })
    }

    /// The `gen throughput` SGLang would log at this point: decode tokens over wall time with
    /// the prefill batches in between. In a steady state each of the `running` requests
    /// finishes after `mean output − 1` decode steps (its first token comes from its prefill),
    /// so `c = running / (mean output − 1)` requests finish per decode step on average, and as
    /// many new ones are prefilled. Finishing requests taken as Poisson, a prefill batch
    /// follows a step with probability `1 − e^{−c}` and holds `c / (1 − e^{−c})` prompts of
    /// the mean length, split into chunks of at most `chunk` tokens:
    ///
    /// ```text
    /// gen = running / (decode(running, kv) + (1 − e^{−c}) × prefill(batch))
    /// ```
    pub fn logged_gen_tok_per_s(&self, p: &CalibrationPoint) -> f64 {
        let b = p.running.max(1) as f64;
        let decode = self.decode_breakdown(p.running.max(1), p.kv_tokens).total_s;
        let c = b / (p.mean_output_tokens - 1.0).max(1.0);
        let batches_per_step = 1.0 - (-c).exp();
        let requests = c / batches_per_step;
        let tokens = requests * p.mean_prompt_tokens.max(1.0);
        let pieces = match p.prefill_chunk_tokens {
            Some(chunk) if chunk > 0 => (tokens / chunk as f64).ceil().max(1.0),
            _ => 1.0,
        };
        let batch = pieces
            * self
                .prefill_terms((requests / pieces).max(1.0), tokens / pieces)
                .total_s;
        b / (decode + batches_per_step * batch)
    }

    /// Scale every step so that the model logs `point`'s gen throughput at its running
    /// requests and KV tokens ([`Roofline::logged_gen_tok_per_s`]).
    pub fn calibrated(mut self, point: CalibrationPoint) -> Self {
        self.scale = 1.0;
        self.scale = self.logged_gen_tok_per_s(&point) / point.gen_tok_per_s;
        self.calibration = Some(Calibration::Point(point));
        self
    }

    /// Scale every step by the one factor `s` that best matches the table's points: with
    /// `q` = roofline ÷ measured at each decode point (batch, KV) and prefill point (tokens, as
    /// one request), `s = Σ q / Σ q²` minimises `Σ (s·q − 1)²`, the relative errors.
    pub fn calibrated_to_table(mut self, table: &super::table::StepTable) -> Self {
        self.scale = 1.0;
        let decode = table
            .decode_points()
            .map(|(b, k, t)| (self.decode_breakdown(b, k).total_s, t));
        let prefill = table
            .prefill_points()
            .map(|(n, t)| (self.prefill_breakdown(1, n).total_s, t));
        let q: Vec<f64> = decode
            .chain(prefill)
            .filter(|&(_, t)| t > 0.0)
            .map(|(r, t)| r / t)
            .collect();
        let (sum, sum_sq) = q.iter().fold((0.0, 0.0), |(a, b), x| (a + x, b + x * x));
        self.scale = if sum_sq > 0.0 { sum / sum_sq } else { 1.0 };
        let mse = q
            .iter()
            .map(|x| (self.scale * x - 1.0).powi(2))
            .sum::<f64>()
            / q.len().max(1) as f64;
        self.calibration = Some(Calibration::Table(TableCalibration {
            source: table.source.clone(),
            points: q.len(),
            rms_relative_error: mse.sqrt(),
        }));
        self
    }
}

/// A decode step of one batch size as two lines in its context: the step's memory time
/// (weights, then the KV cache read) and its compute time (the batch's FLOPs, then attention),
/// each with the all-reduces and the overhead, as `fixed + kv × per-token` seconds. A step
/// lasts the larger of the two, scaled: `max(memory, compute) × scale`, rounded to the
/// nanosecond. These are [`Roofline::decode_breakdown`]'s terms, grouped so that a step costs
/// two float operations a line and a multiplication, no division (every run's steps are priced
/// one by one, and both paths through the steps price them with these same operations). The
/// breakdown adds the same terms in another order: its total can differ from a step's in the
/// last bit of the float, so by 1 ns at most where the rounding falls on it.
#[derive(Clone, Copy, Debug)]
struct DecodeAt {
    memory_fixed_s: f64,
    memory_s_per_kv_token: f64,
    compute_fixed_s: f64,
    compute_s_per_kv_token: f64,
    /// `scale × 10⁹`: the step's nanoseconds per second of the larger line.
    ns_per_s: f64,
    /// Whether every term is finite (then so is every step's value), kept with them.
    finite: bool,
}

impl DecodeAt {
    /// Whether every term is finite.
    fn terms_finite(&self) -> bool {
        [
            self.memory_fixed_s,
            self.memory_s_per_kv_token,
            self.compute_fixed_s,
            self.compute_s_per_kv_token,
            self.ns_per_s,
        ]
        .iter()
        .all(|x| x.is_finite())
    }

    /// The step's memory time attending `kv` tokens, its all-reduces and overhead included.
    #[inline(always)]
    fn memory_s(&self, kv: f64) -> f64 {
        self.memory_fixed_s + kv * self.memory_s_per_kv_token
    }

    /// The step's compute time attending `kv` tokens, its all-reduces and overhead included.
    #[inline(always)]
    fn compute_s(&self, kv: f64) -> f64 {
        self.compute_fixed_s + kv * self.compute_s_per_kv_token
    }

    /// The step's time attending `kv_tokens` tokens.
    fn duration(&self, kv_tokens: u64) -> SimDuration {
        self.duration_at(kv_tokens as f64)
    }

    /// [`duration`](Self::duration) of the step attending `kv` tokens, given as a float (what
    /// `kv_tokens as f64` gives: a run steps it exactly while it stays below 2⁵³).
    fn duration_at(&self, kv: f64) -> SimDuration {
        to_duration_ns(self.memory_s(kv).max(self.compute_s(kv)) * self.ns_per_s)
    }
}

/// 2⁵³: below it every integer is a float, and the sum of two such floats is exact.
const EXACT_INTEGERS: u64 = 1 << 53;

impl Roofline {
    fn decode_at(&self, batch: u64) -> DecodeAt {
        let b = batch as f64;
        let touched = self.experts_touched(b);
        let weights = self.dense_read_bytes + touched * self.moe_layers * self.expert_bytes;
        let bw = self.bandwidth_bytes_per_s * self.bandwidth_efficiency;
        let flops_per_s = self.peak_flops_per_s * self.compute_efficiency;
        let batch_flops = b * self.flops_per_token * self.matmul_time_factor;
        let apart = self.all_reduce(b) + self.decode_overhead_s;
        let mut at = DecodeAt {
            memory_fixed_s: weights / bw + apart,
            memory_s_per_kv_token: self.kv_bytes_per_token / bw,
            compute_fixed_s: batch_flops / flops_per_s + apart,
            compute_s_per_kv_token: self.attention_flops_per_pair / flops_per_s,
            ns_per_s: self.scale * 1e9,
            finite: false,
        };
        at.finite = at.terms_finite();
        at
    }
}

fn to_duration(s: f64) -> SimDuration {
    to_duration_ns(s * 1e9)
}

/// [`to_duration`] of `x / 10⁹` seconds: `x` rounded to the nanosecond, at least 1.
fn to_duration_ns(x: f64) -> SimDuration {
    // The usual case without a library call ([`round_below_2_52`]), at least 1.
    if (0.5..TWO_52).contains(&x) {
        return SimDuration::from_ns(round_below_2_52(x));
    }
    let ns = x.round();
    SimDuration::from_ns(if ns.is_finite() && ns >= 1.0 {
        ns.min(u64::MAX as f64 / 2.0) as u64
    } else {
        1
    })
}

impl StepTimeModel for Roofline {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        self.decode_at(batch).duration(kv_tokens)
    }

    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        let at = self.decode_at(batch);
        one_by_one::total(steps, |i| at.duration(kv_first + batch * i))
    }

    fn decode_run_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
    ) -> (u64, SimDuration) {
        let at = self.decode_at(batch);
        one_by_one::within(most, budget, |i| at.duration(kv_first + batch * i))
    }

    fn decode_run_weighted(
        &self,
        batch: u64,
        kv_first: u64,
        steps: u64,
        w_first: u64,
        w_slope: u64,
    ) -> (SimDuration, u128) {
        let at = self.decode_at(batch);
        one_by_one::weighted(steps, w_first, w_slope, |i| {
            at.duration(kv_first + batch * i)
        })
    }

    /// With non-negative terms and scale every operation on the KV is monotone, rounding
    /// included.
    fn decode_non_decreasing(&self, _batch: u64) -> bool {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        let non_negative = |x: f64| x.is_finite() && x >= 0.0;
        positive(self.bandwidth_bytes_per_s * self.bandwidth_efficiency)
            && positive(self.peak_flops_per_s * self.compute_efficiency)
            && positive(self.scale)
            && non_negative(self.kv_bytes_per_token)
            && non_negative(self.attention_flops_per_pair)
    }

    fn decode_ends_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
        ends: &mut Vec<u64>,
    ) -> u64 {
        let at = self.decode_at(batch);
        let last = batch
            .checked_mul(most)
            .and_then(|k| k.checked_add(kv_first));
        if last.is_none_or(|k| k >= EXACT_INTEGERS) {
            return one_by_one::ends_within(most, budget, ends, |i| {
                at.duration(kv_first + batch * i)
            });
        }
        // Every context of the run is below 2⁵³: the float one is stepped by exact additions
        // (the same value as `as f64` of each), and the steps are summed in u64 as
        // `SimDuration` does, saturating.
        let (step, budget) = (batch as f64, budget.as_ns());
        let mut kv = kv_first as f64;
        let mut total = 0u64;
        for i in 0..most {
            let next = total.saturating_add(at.duration_at(kv).as_ns());
            if next >= budget {
                return i;
            }
            total = next;
            ends.push(total);
            kv += step;
        }
        most
    }

    fn prefill(&self, seqs: u64, extend_tokens: u64) -> SimDuration {
        to_duration(self.prefill_breakdown(seqs, extend_tokens).total_s)
    }

    fn mixed(&self, step: MixedStep) -> SimDuration {
        to_duration(self.mixed_breakdown(step).total_s)
    }

    fn describe(&self) -> String {
        let cal = match &self.calibration {
            None => "uncalibrated (predicted from datasheets)".to_string(),
            Some(Calibration::Point(p)) => format!(
                "calibrated ×{:.3} on {} tok/s at {} running and {} KV tokens",
                self.scale, p.gen_tok_per_s, p.running, p.kv_tokens
            ),
            Some(Calibration::Table(t)) => format!(
                "calibrated ×{:.3} on the {} points of {} (RMS error {:.1} % after scaling)",
                self.scale,
                t.points,
                t.source,
                100.0 * t.rms_relative_error
            ),
        };
        let why = match self.choice {
            RooflineChoice::Asked => "",
            RooflineChoice::Default => " (the default for a catalog GPU and model)",
        };
        format!(
            "roofline{why}: {} on {} at TP {}, {:.0} % of bandwidth, {:.0} % of compute, {cal}",
            self.model,
            self.gpu,
            self.tensor_parallel,
            100.0 * self.bandwidth_efficiency,
            100.0 * self.compute_efficiency
        )
    }
}

mod priced;

pub use priced::PricedRoofline;

#[cfg(test)]
mod tests;
