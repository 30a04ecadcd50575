//! vLLM's log (V1 engine, 0.33.0), as vLLM prints it (`(APIServer pid=7) INFO 05-10 12:34:56
//! [loggers.py:335] …`) or as servesim writes it.
//!
//! * The stats line, every `VLLM_LOG_STATS_INTERVAL` = 10 s (`v1/metrics/loggers.py:
//!   LoggingStatLogger.log`): `Engine 000: Avg prompt throughput: 812.3 tokens/s, Avg
//!   generation throughput: 2411.0 tokens/s, Running: 64 reqs, Waiting: 12 reqs, [Preemptions:
//!   N, ]GPU KV cache usage: 87.5%, …` — averages over the window since the previous line.
//! * Start-up: `GPU KV cache size: 1,234,567 tokens, …` (`v1/core/kv_cache_utils.py:
//!   update_kv_cache_capacity`; older versions: `# GPU blocks: N`), `non-default args: {…}`
//!   (`entrypoints/common/startup.py`), `Available KV cache memory: … GiB` and `Model loading
//!   took … GiB memory` (`v1/worker/`).

use super::parse_sglang::{arg_value, toml_value, Kind};
use super::{fields, At, LogError, LogText, Startup};

/// `VLLM_LOG_STATS_INTERVAL`, seconds: the window of every stats line.
pub const INTERVAL_S: f64 = 10.0;

/// vLLM's default block size (tokens), when the log's arguments do not give one.
const DEFAULT_BLOCK_SIZE: u64 = 16;

/// The marker of a stats line.
const STATS: &str = "Avg prompt throughput: ";

/// One stats line.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Where.
    pub at: At,
    /// `Avg prompt throughput` (tokens/s).
    pub prompt_tok_per_s: f64,
    /// `Avg generation throughput` (tokens/s).
    pub gen_tok_per_s: f64,
    /// `Running` (decoding or prefilling).
    pub running: u64,
    /// `Waiting`.
    pub waiting: u64,
    /// `Preemptions` (0 when the line has none).
    pub preemptions: u64,
    /// `GPU KV cache usage`, as a fraction.
    pub kv_usage: f64,
    /// The window's length, seconds ([`INTERVAL_S`]).
    pub window_s: f64,
}

/// A vLLM log, read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VllmLog {
    /// Start-up lines.
    pub startup: Startup,
    /// The KV pool in tokens, from the start-up lines.
    pub pool_tokens: Option<u64>,
    /// Stats lines, in order.
    pub stats: Vec<Stats>,
}

/// Whether a line is vLLM's stats line or its KV cache size line.
pub fn is_vllm(line: &str) -> bool {
    line.contains(STATS) || line.contains("KV cache size: ")
}

/// The non-default arguments servesim has keys for: `(argument, key, kind)`.
const ARGS: &[(&str, &str, Kind)] = &[
    ("max_num_seqs", "engine.max_num_seqs", Kind::Int),
    (
        "max_num_batched_tokens",
        "engine.max_num_batched_tokens",
        Kind::Int,
    ),
    (
        "enable_chunked_prefill",
        "engine.enable_chunked_prefill",
        Kind::Bool,
    ),
    ("block_size", "engine.block_size", Kind::Int),
    (
        "gpu_memory_utilization",
        "engine.gpu_memory_utilization",
        Kind::Num,
    ),
    (
        "num_gpu_blocks_override",
        "engine.num_gpu_blocks_override",
        Kind::Int,
    ),
    ("max_model_len", "engine.max_model_len", Kind::Int),
    (
        "enable_prefix_caching",
        "engine.enable_prefix_caching",
        Kind::Bool,
    ),
    ("async_scheduling", "engine.async_scheduling", Kind::Bool),
    (
        "long_prefill_token_threshold",
        "engine.long_prefill_token_threshold",
        Kind::Int,
    ),
    (
        "kv_cache_dtype",
        "engine.kv_cache_dtype",
        Kind::Word(&["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]),
    ),
    (
        "tensor_parallel_size",
        "hardware.tensor_parallel",
        Kind::Int,
    ),
];

/// The first number of a field's value (`"812.3 tokens/s"`, `"64 reqs"`, `"87.5%"`,
/// `"1,234 tokens"`).
fn leading_number(v: &str) -> Option<f64> {
    let s: String = v
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
        .filter(|&c| c != ',')
        .collect();
    s.parse().ok()
}

/// Read a vLLM log. `file` is the log's index among those read.
pub fn parse(log: &LogText, file: usize) -> Result<VllmLog, LogError> {
    let mut out = VllmLog::default();
    // `(value, line)` of `# GPU blocks` and of `KV cache size`.
    let mut blocks: Option<(u64, u64)> = None;
    let mut size: Option<(u64, u64)> = None;
    for (i, line) in log.text.lines().enumerate() {
        let n = i as u64 + 1;
        if let Some(p) = line.find(STATS) {
            let f = fields(&line[p..]);
            let get = |name: &str, required: bool| -> Result<Option<f64>, LogError> {
                let hint = "the line looks cut short or edited: remove it, or give the log as vLLM wrote it";
                match f.iter().find(|(k, _)| k.ends_with(name)) {
                    Some((_, v)) => leading_number(v).map(Some).ok_or_else(|| {
                        LogError::at(
                            &log.name,
                            n,
                            format!("a stats line with `{name}: {v}`, not a number"),
                            hint,
                        )
                    }),
                    None if required => Err(LogError::at(
                        &log.name,
                        n,
                        format!("a stats line without its `{name}` field"),
                        hint,
                    )),
                    None => Ok(None),
                }
            };
            out.stats.push(Stats {
                at: At { file, line: n },
                prompt_tok_per_s: get("Avg prompt throughput", true)?.unwrap_or(0.0),
                gen_tok_per_s: get("Avg generation throughput", true)?.unwrap_or(0.0),
                running: get("Running", true)?.unwrap_or(0.0) as u64,
                waiting: get("Waiting", true)?.unwrap_or(0.0) as u64,
                preemptions: get("Preemptions", false)?.unwrap_or(0.0) as u64,
                kv_usage: get("KV cache usage", true)?.unwrap_or(0.0) / 100.0,
                window_s: INTERVAL_S,
            });
        } else if let Some(p) = line.find("KV cache size: ") {
            if let Some(tokens) = leading_number(&line[p + 15..]) {
                size = Some((tokens as u64, n));
            }
        } else if let Some(p) = line.find("# GPU blocks: ") {
            blocks = leading_number(&line[p + 14..]).map(|b| (b as u64, n));
        } else if let Some(p) = line.find("non-default args: ") {
            let args = &line[p + 18..];
            for (name, key, kind) in ARGS {
                if let Some(v) = arg_value(args, name).and_then(|v| toml_value(v, *kind)) {
                    out.startup.set(
                        key,
                        v.clone(),
                        format!("non-default args {name}={v} (line {n})"),
                    );
                }
            }
        } else if let Some(p) = line
            .find("Available KV cache memory: ")
            .or_else(|| line.find("Model loading took "))
        {
            out.startup
                .notes
                .push(format!("{} (line {n})", line[p..].trim()));
        }
    }
    // The pool servesim means: the usable blocks (all but the null block) × block size, the
    // tokens KV cache usage is a fraction of.
    let block: u64 = out
        .startup
        .get("engine.block_size")
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_BLOCK_SIZE);
    let pool = match (size, blocks) {
        (Some((tokens, n)), _) => Some((
            (tokens / block).saturating_sub(1) * block,
            format!("KV cache size: {tokens} tokens, the null block included (line {n})"),
        )),
        (None, Some((b, n))) => Some((
            b.saturating_sub(1) * block,
            format!("# GPU blocks: {b}, the null block included (line {n})"),
        )),
        (None, None) => None,
    };
    if let Some((tokens, from)) = pool {
        out.pool_tokens = Some(tokens);
        out.startup.set(
            "engine.kv_capacity_tokens",
            tokens.to_string(),
            format!("{from}, × block size {block}"),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_vllm_prints_them() {
        let log = LogText {
            name: "v.log".into(),
            text: "(EngineCore_DP0 pid=311) INFO 05-10 12:30:02 [kv_cache_utils.py:1147] GPU KV cache size: 1,095,232 tokens, Maximum concurrency for 131,072 tokens per request: 8.36x\n\
                   (APIServer pid=7) INFO 05-10 12:30:00 [startup.py:96] non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_num_seqs': 128, 'enable_prefix_caching': False}\n\
                   (APIServer pid=7) INFO 05-10 12:34:56 [loggers.py:335] Engine 000: Avg prompt throughput: 812.3 tokens/s, Avg generation throughput: 2411.0 tokens/s, Running: 64 reqs, Waiting: 12 reqs, Preemptions: 2, GPU KV cache usage: 87.5%, Prefix cache hit rate: 12.0%\n"
                .into(),
        };
        let l = parse(&log, 0).unwrap();
        assert_eq!(l.pool_tokens, Some(1_095_216));
        assert_eq!(l.startup.get("engine.max_num_seqs"), Some("128"));
        assert_eq!(l.startup.get("engine.enable_prefix_caching"), Some("false"));
        let s = &l.stats[0];
        assert_eq!(
            (
                s.prompt_tok_per_s,
                s.gen_tok_per_s,
                s.running,
                s.waiting,
                s.preemptions
            ),
            (812.3, 2411.0, 64, 12, 2)
        );
        assert!((s.kv_usage - 0.875).abs() < 1e-12);
    }

    #[test]
    fn a_stats_line_cut_short_is_an_error_at_its_line() {
        let log = LogText {
            name: "v.log".into(),
            text: "\n(APIServer pid=7) INFO 05-10 12:34:56 [loggers.py:335] Engine 000: Avg prompt throughput: 812.3 tokens/s, Avg generation thr\n".into(),
        };
        let e = parse(&log, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "v.log:2: a stats line without its `Avg generation throughput` field"
        );
    }
}
