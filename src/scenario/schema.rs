//! Every scenario key, declared once: its dotted path, what it accepts, its default, its unit,
//! the engine or setting it applies to, its meaning and an example.
//!
//! [`KEYS`] drives the reading of a scenario ([`super::validate`]): type and range checks and
//! their wording, the known keys of each table and "did you mean", keys given for the other
//! engine or mode, missing required keys, the defaults and the hints. [`readme`] renders the
//! README's key reference from it. Adding a key is one line here plus the line that reads it
//! (`v.get("engine.new_key")?` in `validate.rs`). Length distributions are one declared type
//! ([`Ty::Dist`]): [`DISTS`] names each one's parameters, [`DIST_PARAMS`] declares them.

use std::fmt::Write;

use super::derive::{VLLM_DEFAULT_ACTIVATION_GIB, VLLM_DEFAULT_BLOCK, VLLM_DEFAULT_GRAPH_GIB};
use super::derive::{VLLM_DEFAULT_NON_TORCH_GIB, VLLM_DEFAULT_UTILIZATION};
use crate::cost::roofline::{DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY};
use crate::cost::roofline::{DEFAULT_DECODE_OVERHEAD_MS, DEFAULT_PREFILL_OVERHEAD_MS};
use crate::workload::dist::MAX_TOKENS_PER_REQUEST as MAX_TOKENS;

/// The most requests one scenario may send (10⁹): far beyond any real job, small enough that a
/// typo such as 10¹⁵ is caught before it runs for days.
pub const MAX_REQUESTS: u64 = 1_000_000_000;
/// The largest KV pool accepted (10⁹ tokens; a full 8 × B200 node holds about 10⁷).
pub const MAX_KV_TOKENS: u64 = 1_000_000_000;
/// The largest concurrency limit accepted.
pub const MAX_CONCURRENCY: u64 = 10_000_000;
/// The longest simulated time accepted (one year).
pub const MAX_SIM_S: f64 = 365.0 * 24.0 * 3600.0;

/// What a key accepts.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    /// A string.
    Text,
    /// `true` or `false`.
    Bool,
    /// An integer in `[min, max]` (an integral float such as `1e5` is accepted).
    Integer(u64, u64),
    /// An integer in `[min, max]`, or `-1` for "off".
    IntegerOrOff(u64, u64),
    /// A finite number in the range.
    Number(Range),
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// An array of finite numbers, each in the range.
    Numbers(Range),
    /// A table of the keys declared below it.
    Table,
    /// A length distribution: an inline table `{ dist = "…", … }` (see [`DISTS`]).
    Dist,
}

/// The range of a number.
#[derive(Clone, Copy, Debug)]
pub enum Range {
    /// Greater than 0.
    Positive,
    /// In (0, 1].
    Fraction,
    /// In `[lo, hi]`; a `lo` of at most 10⁻⁶ (but above 0) reads "greater than 0".
    Within(f64, f64),
}

/// A key's default.
#[derive(Clone, Copy, Debug)]
pub enum DefaultValue {
    /// The key must be given (where it applies).
    Required,
    /// No value: what absence means.
    Absent(&'static str),
    /// Computed from other keys (in `build.rs`): how.
    Derived(&'static str),
    /// An integer.
    Int(u64),
    /// A number.
    Num(f64),
    /// A string (of a [`Ty::OneOf`] key).
    Word(&'static str),
    /// A boolean.
    Flag(bool),
}

/// Where a key applies.
#[derive(Clone, Copy, Debug)]
pub enum When {
    /// Always.
    All,
    /// With `engine.kind = "sglang"`.
    Sglang,
    /// With `engine.kind = "vllm"`.
    Vllm,
    /// When the key at the path holds one of the values.
    If(&'static str, &'static [&'static str]),
}

/// One declared key.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// Dotted path (relative to the distribution's table for [`DIST_PARAMS`]).
    pub path: &'static str,
    /// What it accepts.
    pub ty: Ty,
    /// Its default.
    pub default: DefaultValue,
    /// Where it applies.
    pub when: When,
    /// Its unit (empty when it has none or the name says it).
    pub unit: &'static str,
    /// What it means, in one line.
    pub meaning: &'static str,
    /// An example value, as TOML.
    pub example: &'static str,
}

/// `"path" [type, default, applies to, "unit"] "meaning", e.g. "example";`
macro_rules! keys {
    ($(#[$doc:meta])* $name:ident: $($path:literal [$ty:expr, $def:expr, $when:expr, $unit:literal] $meaning:literal, e.g. $ex:literal;)*) => {
        $(#[$doc])*
        #[allow(unused_imports)]
        pub const $name: &[Key] = {
            use DefaultValue::*; use Range::*; use Ty::*; use When::*;
            &[$(Key { path: $path, ty: $ty, default: $def, when: $when, unit: $unit, meaning: $meaning, example: $ex }),*]
        };
    };
}

const OPEN: When = When::If("client.mode", &["poisson", "gamma"]);
const LINEAR: When = When::If("engine.step_time.model", &["linear"]);
const ROOFLINE: When = When::If("engine.step_time.model", &["roofline"]);
const MEM: Range = Range::Within(0.0, 16384.0);

keys! {
/// Every scenario key, in the order of the README's reference.
KEYS:
"name" [Text, Required, All, ""] "shown in reports", e.g. r#""B2 opencodeinstruct""#;
"description" [Text, Absent("none"), All, ""]
    "a longer text shown in reports", e.g. r#""Case study B2""#;
"seed" [Integer(0, u64::MAX), Int(1), All, ""]
    "master seed of every random stream (never entropy)", e.g. "7";
"catalog" [Text, Absent("none"), All, ""]
    "a TOML file of [[gpu]] and [[model]] entries (relative to the scenario) that extends the built-in catalog", e.g. r#""my-gpus.toml""#;
"run" [Table, Absent("all defaults"), All, ""] "run control and observation", e.g. "[run]";
"run.max_sim_s" [Number(Within(1e-9, MAX_SIM_S)), Absent("none"), All, "s"]
    "stop at this simulated time even if requests remain", e.g. "36000";
"run.observe_at_s" [Numbers(Within(0.0, MAX_SIM_S)), Absent("[]"), All, "s"]
    "snapshot the three views at these times", e.g. "[300, 600, 1800]";
"run.window_s" [Number(Within(1e-3, MAX_SIM_S)), Num(60.0), All, "s"]
    "the client's windowed-rate window", e.g. "60";
"run.timeseries_interval_s" [Number(Within(1e-3, MAX_SIM_S)), Num(1.0), All, "s"]
    "initial time-series spacing, doubled whenever the series would exceed 4,096 points", e.g. "1";
"run.max_events" [Integer(1, 1_000_000_000_000), Int(2_000_000_000), All, ""]
    "stop with an error after this many scheduler batches (prefill batches + decode steps)", e.g. "2000000000";
"hardware" [Table, Absent("none"), All, ""]
    "the GPUs; needed to derive the KV budget or to predict step times", e.g. "[hardware]";
"hardware.gpu" [Text, Absent("none"), All, ""]
    "a GPU of the catalog (`servesim catalog`)", e.g. r#""h100""#;
"hardware.memory_mib" [Integer(1, 16 << 20), Derived("the catalog's"), All, "MiB"]
    "GPU memory as nvidia-smi reports it", e.g. "97887";
"hardware.memory_before_weights_gib" [Number(Within(0.001, 16384.0)), Derived("GPU memory − 1 GiB (TP 1) or − 2 GiB (TP > 1)"), Sglang, "GiB"]
    "SGLang's M_pre: free memory per GPU after the CUDA context and NCCL, before the weights load", e.g. "93.6";
"hardware.num_gpus" [Integer(1, 4096), Derived("tensor_parallel"), All, ""]
    "GPUs serving the model", e.g. "8";
"hardware.tensor_parallel" [Integer(1, 4096), Int(1), All, ""]
    "tensor-parallel size: splits the weights and GQA KV heads; above 1, log lines carry SGLang's ` TP0`", e.g. "8";
"model" [Table, Absent("none"), All, ""]
    "the model; needed to derive the KV budget or to predict step times", e.g. "[model]";
"model.name" [Text, Absent("none"), All, ""]
    "a model of the catalog (`servesim catalog`)", e.g. r#""llama-3.1-8b""#;
"model.kv_bytes_per_token" [Integer(1, 1 << 30), Derived("the catalog's, with SGLang's TP rules"), All, "bytes"]
    "KV cache bytes per token per GPU", e.g. "70272";
"model.weight_gib_per_gpu" [Number(Within(0.0, 1e6)), Derived("the catalog model's parameters, sharded over TP"), All, "GiB"]
    "weights resident on each GPU", e.g. "72.3";
"model.context_len" [Integer(2, 1 << 31), Derived("the catalog's"), All, "tokens"]
    "the model's context length; caps request lengths as SGLang does (min(context − 1, pool − 1))", e.g. "262144";
"engine" [Table, Required, All, ""]
    "the serving engine: its kind, KV budget and scheduler settings", e.g. "[engine]";
"engine.kind" [OneOf(&["sglang", "vllm"]), Word("sglang"), All, ""]
    "the engine; \"vllm\" has a memory model (`servesim memory`) but no scheduler yet", e.g. r#""sglang""#;
"engine.kv_capacity_tokens" [Integer(1, MAX_KV_TOKENS), Derived("from memory (hardware and model)"), All, "tokens"]
    "the KV pool: SGLang's max_total_num_tokens from its startup log, floored to whole pages", e.g. "116171";
"engine.mem_fraction_static" [Number(Fraction), Derived("SGLang 0.5.23's default for the GPU"), Sglang, ""]
    "the fraction of GPU memory for weights and the KV pool", e.g. "0.85";
"engine.kv_cache_dtype" [OneOf(&["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]), Word("auto"), All, ""]
    "the KV cache's element type (\"auto\": 2 bytes)", e.g. r#""fp8_e4m3""#;
"engine.observed_free_gib" [Number(MEM), Absent("none"), Sglang, "GiB"]
    "free memory per GPU seen with nvidia-smi while serving: the slack need is then measured, not guessed", e.g. "4.66";
"engine.observed_free_at_fraction" [Number(Fraction), Derived("the scenario's mem_fraction_static"), Sglang, ""]
    "the mem_fraction_static the free memory was seen at", e.g. "0.85";
"engine.page_size" [Integer(1, 4096), Int(1), Sglang, "tokens"]
    "KV page size (64 for MLA models on B200)", e.g. "1";
"engine.max_running_requests" [Integer(1, 1 << 24), Derived("4096, or SGLang's estimate from model.context_len"), Sglang, ""]
    "the most requests running at once; capped at half the pool, as SGLang does", e.g. "4096";
"engine.chunked_prefill_size" [IntegerOrOff(1, 1 << 24), Derived("SGLang's default for the GPU's memory (8192 without a GPU)"), Sglang, "tokens"]
    "tokens per prefill chunk, or -1 to disable chunking", e.g. "8192";
"engine.max_prefill_tokens" [Integer(1, 1 << 24), Int(16384), Sglang, "tokens"]
    "token budget of one prefill batch", e.g. "16384";
"engine.schedule_policy" [OneOf(&["fcfs", "lof", "random"]), Word("fcfs"), Sglang, ""]
    "the waiting queue's order: arrival, longest output first, or shuffled", e.g. r#""lof""#;
"engine.decode_log_interval" [Integer(1, 1 << 20), Int(40), Sglang, ""]
    "decode steps between `Decode batch` log lines", e.g. "40";
"engine.init_new_token_ratio" [Number(Fraction), Num(0.7), Sglang, ""]
    "SGLANG_INIT_NEW_TOKEN_RATIO: the admission estimate's first ratio", e.g. "0.7";
"engine.min_new_token_ratio_factor" [Number(Fraction), Num(0.14), Sglang, ""]
    "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR: the ratio's floor is init × factor", e.g. "0.14";
"engine.new_token_ratio_decay_steps" [Integer(1, 1 << 30), Int(600), Sglang, ""]
    "SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS: decode steps from init to the floor", e.g. "600";
"engine.clip_max_new_tokens" [Integer(1, MAX_TOKENS as u64), Int(4096), Sglang, "tokens"]
    "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION", e.g. "4096";
"engine.cuda_graph_max_bs" [Integer(0, 1 << 20), Derived("SGLang's default for the GPU (256 without a GPU)"), Sglang, ""]
    "largest decode batch replayed as a CUDA graph (the log's `cuda graph` field, and the memory heuristic)", e.g. "512";
"engine.gpu_memory_utilization" [Number(Fraction), Num(VLLM_DEFAULT_UTILIZATION), Vllm, ""]
    "vLLM's --gpu-memory-utilization", e.g. "0.9";
"engine.block_size" [Integer(1, 4096), Int(VLLM_DEFAULT_BLOCK as u64), Vllm, "tokens"]
    "vLLM's KV block size", e.g. "16";
"engine.activation_peak_gib" [Number(MEM), Num(VLLM_DEFAULT_ACTIVATION_GIB), Vllm, "GiB"]
    "activation peak of vLLM's profiling run, from its startup log (assumed if absent)", e.g. "1.2";
"engine.non_torch_gib" [Number(MEM), Num(VLLM_DEFAULT_NON_TORCH_GIB), Vllm, "GiB"]
    "non-torch memory (NCCL, cuBLAS), from vLLM's startup log (assumed if absent)", e.g. "0.6";
"engine.cuda_graph_gib" [Number(MEM), Num(VLLM_DEFAULT_GRAPH_GIB), Vllm, "GiB"]
    "CUDA-graph memory, from vLLM's startup log (assumed if absent)", e.g. "0.7";
"engine.step_time" [Table, Absent("linear, with the defaults below"), All, ""]
    "the cost of one scheduler iteration", e.g. "[engine.step_time]";
"engine.step_time.model" [OneOf(&["linear", "roofline"]), Word("linear"), All, ""]
    "linear coefficients, or a roofline from the catalog's GPU and model (hardware.gpu, model.name)", e.g. r#""roofline""#;
"engine.step_time.decode_base_ms" [Number(Within(0.0, 1e6)), Num(35.0), LINEAR, "ms"]
    "fixed cost of a decode step", e.g. "12.0";
"engine.step_time.decode_per_seq_ms" [Number(Within(0.0, 1e6)), Num(0.3), LINEAR, "ms"]
    "cost per running request in a decode step", e.g. "0.8";
"engine.step_time.decode_per_kv_token_ns" [Number(Within(0.0, 1e9)), Num(0.0), LINEAR, "ns"]
    "cost per KV token attended in a decode step", e.g. "60.0";
"engine.step_time.prefill_base_ms" [Number(Within(0.0, 1e6)), Num(10.0), LINEAR, "ms"]
    "fixed cost of a prefill batch", e.g. "15.0";
"engine.step_time.prefill_per_token_us" [Number(Within(0.0, 1e9)), Num(120.0), LINEAR, "µs"]
    "cost per prefilled token", e.g. "60.0";
"engine.step_time.bandwidth_efficiency" [Number(Fraction), Num(DEFAULT_BANDWIDTH_EFFICIENCY), ROOFLINE, ""]
    "the fraction of peak memory bandwidth reached", e.g. "0.75";
"engine.step_time.compute_efficiency" [Number(Fraction), Num(DEFAULT_COMPUTE_EFFICIENCY), ROOFLINE, ""]
    "the fraction of peak compute reached", e.g. "0.5";
"engine.step_time.decode_overhead_ms" [Number(Within(0.0, 1e6)), Num(DEFAULT_DECODE_OVERHEAD_MS), ROOFLINE, "ms"]
    "overhead per decode step", e.g. "2";
"engine.step_time.prefill_overhead_ms" [Number(Within(0.0, 1e6)), Num(DEFAULT_PREFILL_OVERHEAD_MS), ROOFLINE, "ms"]
    "overhead per prefill batch", e.g. "5";
"engine.step_time.calibration" [Table, Absent("none"), ROOFLINE, ""]
    "scale the roofline to one point observed on the real server", e.g. "{ gen_tok_per_s = 850, running = 50 }";
"engine.step_time.calibration.gen_tok_per_s" [Number(Within(1e-6, 1e12)), Required, All, "tok/s"]
    "the gen throughput observed", e.g. "850";
"engine.step_time.calibration.running" [Integer(1, 1 << 24), Required, All, ""]
    "the running requests at that moment", e.g. "50";
"engine.step_time.calibration.kv_tokens" [Integer(0, 1 << 40), Derived("each running request halfway through its response"), All, "tokens"]
    "KV tokens in use at that moment", e.g. "100000";
"workload" [Table, Required, All, ""] "what the client sends", e.g. "[workload]";
"workload.requests" [Integer(1, MAX_REQUESTS), Required, All, ""]
    "requests the client sends in all", e.g. "20000";
"workload.prompt_tokens" [Dist, Required, All, "tokens"]
    "prompt lengths", e.g. r#"{ dist = "lognormal", mean = 300, cv = 0.5 }"#;
"workload.output_tokens" [Dist, Required, All, "tokens"]
    "natural response lengths (where the model would stop by itself)", e.g. r#"{ dist = "lognormal", mean = 4116, cv = 0.2 }"#;
"workload.max_new_tokens" [Integer(1, MAX_TOKENS as u64), Absent("none: the client omits max_tokens"), All, "tokens"]
    "the max_tokens each request asks for", e.g. "16384";
"workload.ignore_eos" [Bool, Flag(false), All, ""]
    "every request runs to max_new_tokens (asking for its sampled length, as the bench clients do)", e.g. "true";
"client" [Table, Required, All, ""]
    "how the client sends: its mode, and its concurrency or rate", e.g. "[client]";
"client.mode" [OneOf(&["closed", "poisson", "gamma"]), Word("closed"), All, ""]
    "\"closed\": a semaphore of concurrency slots, all firing at t = 0; \"poisson\", \"gamma\": open loop at rate_per_s", e.g. r#""poisson""#;
"client.concurrency" [Integer(1, MAX_CONCURRENCY), Absent("required when closed; no cap when open"), All, ""]
    "the client's concurrency limit (an asyncio semaphore)", e.g. "150";
"client.rate_per_s" [Number(Within(1e-9, 1e9)), Required, OPEN, ""]
    "mean arrivals per second", e.g. "2.0";
"client.burstiness" [Number(Within(1e-3, 1e3)), Num(1.0), When::If("client.mode", &["gamma"]), ""]
    "gamma shape: 1 = Poisson, < 1 burstier, > 1 more regular", e.g. "0.5";
"client.think_time_s" [Number(Within(0.0, MAX_SIM_S)), Num(0.0), When::If("client.mode", &["closed"]), "s"]
    "pause between a completion and the slot's next send", e.g. "0.5";
}

/// One length distribution: the parameters it needs and accepts (besides `dist`).
#[derive(Clone, Copy, Debug)]
pub struct Dist {
    /// The value of `dist`.
    pub name: &'static str,
    /// Parameters it needs.
    pub required: &'static [&'static str],
    /// Parameters it accepts.
    pub optional: &'static [&'static str],
    /// What it draws.
    pub meaning: &'static str,
}

macro_rules! dists {
    ($($name:literal [$($req:literal),*] [$($opt:literal),*] $meaning:literal;)*) => {
        /// The length distributions. Every draw is rounded and clamped to `[min, max]`: token
        /// counts are integers of at least 1.
        pub const DISTS: &[Dist] = &[$(Dist { name: $name, required: &[$($req),*], optional: &[$($opt),*], meaning: $meaning }),*];
        const DIST_NAMES: &[&str] = &[$($name),*];
    };
}

dists! {
"constant" ["value"] ["min", "max"] "always `value`";
"uniform" ["min", "max"] [] "integers uniform on `[min, max]`";
"normal" ["mean", "std"] ["min", "max"] "truncated to `[min, max]`";
"lognormal" ["mean", "cv"] ["min", "max"] "mean and cv of the result, not of the underlying normal";
"gamma" ["mean", "cv"] ["min", "max"] "shape 1/cv², scale mean × cv²";
"exponential" ["mean"] ["min", "max"] "rate 1/mean";
"empirical" [] ["values", "file", "column", "min", "max"] "resamples `values`, or the CSV `column` of `file`";
}

const TOKENS: Ty = Ty::Integer(1, MAX_TOKENS as u64);

keys! {
/// The parameters of the length distributions (paths relative to the distribution's table).
DIST_PARAMS:
"dist" [OneOf(DIST_NAMES), Required, All, ""]
    "the distribution (table above)", e.g. r#""lognormal""#;
"value" [Number(Within(1.0, MAX_TOKENS as f64)), Required, All, "tokens"]
    "the constant length", e.g. "1024";
"mean" [Number(Positive), Required, All, "tokens"] "the mean length", e.g. "300";
"std" [Number(Positive), Required, All, "tokens"]
    "the standard deviation (for a fixed length use dist = \"constant\")", e.g. "100";
"cv" [Number(Within(1e-6, 100.0)), Required, All, ""]
    "coefficient of variation (std / mean) of the result", e.g. "0.5";
"min" [TOKENS, Int(1), All, "tokens"] "the smallest length drawn", e.g. "1";
"max" [TOKENS, Int(MAX_TOKENS as u64), All, "tokens"] "the largest length drawn", e.g. "16384";
"values" [Numbers(Positive), Absent("none"), All, "tokens"]
    "the lengths to resample", e.g. "[120, 4096, 900]";
"file" [Text, Absent("none"), All, ""]
    "a CSV file with a header row, relative to the scenario (with column)", e.g. r#""lengths.csv""#;
"column" [Text, Absent("none"), All, ""]
    "the CSV column holding token counts", e.g. r#""completion_tokens""#;
}

/// Values of a [`Ty::OneOf`] key that name something servesim does not model: `(path, values,
/// hint)`.
pub const NOT_MODELLED: &[(&str, &[&str], &str)] = &[
    ("engine.schedule_policy", &["lpm", "dfs-weight"], "a cache-aware SGLang policy: without shared prompt prefixes (servesim has none) it orders requests like \"fcfs\"; use \"fcfs\""),
    ("engine.schedule_policy", &["priority", "hrrn", "routing-key", "shortest-prefill-first"], "an SGLang policy servesim does not model yet; modelled: \"fcfs\", \"lof\", \"random\""),
];

/// The declaration of the key at `path`.
pub fn key(path: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.path == path)
}

impl Key {
    /// The last segment of the path.
    pub fn leaf(&self) -> &'static str {
        self.path.rsplit('.').next().unwrap_or(self.path)
    }

    /// The path of the table holding the key (empty at the top level).
    pub fn parent(&self) -> &'static str {
        self.path.rsplit_once('.').map_or("", |(p, _)| p)
    }

    /// The hint shown with a bad value: meaning, what it accepts, example.
    pub fn hint(&self) -> String {
        format!(
            "{}: {}, e.g. {}",
            self.meaning,
            self.accepts(),
            self.example
        )
    }

    /// What it accepts, with its unit: `integer 1 – 4096 (tokens)`.
    pub fn accepts(&self) -> String {
        match self.unit {
            "" => self.ty.describe(),
            unit => format!("{} ({unit})", self.ty.describe()),
        }
    }

    /// Whether it must be given (where it applies).
    pub fn required(&self) -> bool {
        matches!(self.default, DefaultValue::Required)
    }
}

impl Range {
    /// Why `x` is outside the range, if it is.
    pub fn check(self, x: f64) -> Option<String> {
        match self {
            Range::Positive if x <= 0.0 => Some("must be greater than 0".into()),
            Range::Fraction if !(x > 0.0 && x <= 1.0) => Some("must be in (0, 1]".into()),
            Range::Within(lo, hi) if !(lo..=hi).contains(&x) => Some(if lo > 0.0 && lo <= 1e-6 {
                format!("must be greater than 0 and at most {hi}")
            } else {
                format!("must be between {lo} and {hi}")
            }),
            _ => None,
        }
    }

    fn describe(self) -> String {
        match self {
            Range::Positive => "> 0".into(),
            Range::Fraction => "in (0, 1]".into(),
            Range::Within(lo, hi) if lo > 0.0 && lo <= 1e-6 => format!("> 0, ≤ {hi}"),
            Range::Within(lo, hi) => format!("{lo} – {hi}"),
        }
    }
}

impl Ty {
    /// What a value of this type is called in "expected …, found …".
    pub fn expected(self) -> &'static str {
        match self {
            Ty::Text | Ty::OneOf(_) => "a string",
            Ty::Bool => "a boolean",
            Ty::Integer(..) | Ty::IntegerOrOff(..) => "an integer",
            Ty::Number(_) => "a number",
            Ty::Numbers(_) => "an array of numbers",
            Ty::Table | Ty::Dist => "a table",
        }
    }

    fn describe(self) -> String {
        let int = |lo: u64, hi: u64| match hi {
            u64::MAX => format!("integer ≥ {lo}"),
            _ => format!("integer {lo} – {hi}"),
        };
        match self {
            Ty::Integer(lo, hi) => int(lo, hi),
            Ty::IntegerOrOff(lo, hi) => format!("{} or -1", int(lo, hi)),
            Ty::Number(r) => format!("number {}", r.describe()),
            Ty::Numbers(r) => format!("array of numbers {}", r.describe()),
            Ty::OneOf(names) => format!("one of {}", quoted(names)),
            Ty::Dist => "length distribution".into(),
            other => other.expected().trim_start_matches("a ").into(),
        }
    }
}

impl When {
    /// The key this depends on and the values it needs there (`None` for [`When::All`]).
    pub fn condition(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            When::All => None,
            When::Sglang => Some(("engine.kind", &["sglang"])),
            When::Vllm => Some(("engine.kind", &["vllm"])),
            When::If(key, values) => Some((key, values)),
        }
    }

    /// Where it applies, for the README: "all", "SGLang", "vLLM", `client.mode = "gamma"`.
    pub fn describe(self) -> String {
        match self {
            When::All => "all".into(),
            When::Sglang => "SGLang".into(),
            When::Vllm => "vLLM".into(),
            When::If(key, values) => format!("{key} = {}", quoted(values).replace(", ", " or ")),
        }
    }

    /// The message and hint for the key at `path` given where it does not apply, the setting
    /// it depends on holding `actual`.
    pub fn mismatch(self, path: &str, actual: &str) -> (String, String) {
        let (setting, _) = self
            .condition()
            .expect("invariant: the key does not always apply");
        let what = match self {
            When::Sglang => "an SGLang setting",
            When::Vllm => "a vLLM setting",
            _ => {
                let leaf = path.rsplit('.').next().unwrap_or(path);
                let hint = format!(
                    "{leaf} is for {}; remove it or change {setting}",
                    self.describe()
                );
                return (format!("does not apply to {setting} = \"{actual}\""), hint);
            }
        };
        let msg = format!("is {what}; this scenario's {setting} is \"{actual}\"");
        (msg, format!("remove it, or change {setting}"))
    }
}

/// `"a", "b", "c"`.
pub fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn default_text(d: DefaultValue) -> String {
    match d {
        DefaultValue::Required => "required".into(),
        DefaultValue::Absent(s) => s.into(),
        DefaultValue::Derived(how) => format!("derived: {how}"),
        DefaultValue::Int(i) => i.to_string(),
        DefaultValue::Num(x) => x.to_string(),
        DefaultValue::Word(w) => format!("`\"{w}\"`"),
        DefaultValue::Flag(b) => b.to_string(),
    }
}

/// The README's key reference: one row per key, then the distributions and their parameters.
pub fn readme() -> String {
    let head = "| key | accepts | default | for | meaning | example |\n|---|---|---|---|---|---|\n";
    let row = |k: &Key| {
        let applies = match k.when {
            When::All => "all".into(),
            When::Sglang => "SGLang".into(),
            When::Vllm => "vLLM".into(),
            when => when.describe(),
        };
        let (default, meaning) = (default_text(k.default), k.meaning.replace('|', "\\|"));
        format!(
            "| `{}` | {} | {default} | {applies} | {meaning} | `{}` |\n",
            k.path,
            k.accepts(),
            k.example
        )
    };
    let mut out = String::from(head);
    KEYS.iter().for_each(|k| out += &row(k));
    out += "\nLength distributions are inline tables `{ dist = \"…\", … }`; every one also takes \
            the clamps `min` and `max`.\n\n| dist | needs | draws |\n|---|---|---|\n";
    for d in DISTS {
        let needs: Vec<String> = d.required.iter().map(|p| format!("`{p}`")).collect();
        let needs = if needs.is_empty() {
            "`values`, or `file` and `column`".into()
        } else {
            needs.join(", ")
        };
        let _ = writeln!(out, "| `{}` | {needs} | {} |", d.name, d.meaning);
    }
    out += &format!("\n{}", head.replacen("key", "parameter", 1));
    DIST_PARAMS.iter().for_each(|k| out += &row(k));
    out
}
