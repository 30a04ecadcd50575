//! `servesim calibrate`: step times fitted to a real server's log.
//!
//! * [`parse_sglang`] and [`parse_vllm`] read the engines' logs as they print them (prefixes,
//!   timestamps and all) and as servesim writes them (`server.log`): the start-up lines (the KV
//!   pool, the echoed server arguments) and the periodic lines.
//! * [`fit`] turns the periodic lines into equations on the quantity each line really reports
//!   (SGLang: the wall time of a window of decode steps and the prefill batches between them;
//!   vLLM: the busy time of a stats window) and solves them by non-negative least squares.
//! * [`fragment`] writes the result as a scenario fragment and reports the fit's quality.
//!
//! Every problem with a log is a [`LogError`] naming the file and line, what is wrong and how
//! to fix it.

pub mod fit;
pub mod fragment;
pub mod parse_sglang;
pub mod parse_vllm;
pub mod table;

use std::path::Path;

use crate::scenario::EngineKind;

/// A log line: the file (index into the logs read) and its 1-based line number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct At {
    /// Index of the file among the logs read.
    pub file: usize,
    /// 1-based line number.
    pub line: u64,
}

/// A problem with a log: where, what, and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", where_(.file, .line))]
pub struct LogError {
    /// The file as given.
    pub file: String,
    /// The line, when the problem is one line.
    pub line: Option<u64>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

fn where_(file: &str, line: &Option<u64>) -> String {
    match line {
        Some(l) => format!("{file}:{l}"),
        None => file.to_string(),
    }
}

impl LogError {
    /// A problem at one line of `file`.
    pub fn at(file: &str, line: u64, message: impl Into<String>, hint: impl Into<String>) -> Self {
        LogError {
            file: file.into(),
            line: Some(line),
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// A problem with the whole of `file`.
    pub fn whole(file: &str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        LogError {
            file: file.into(),
            line: None,
            message: message.into(),
            hint: hint.into(),
        }
    }
}

/// A setting read from a log's start-up lines, as a scenario key.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// The scenario key, e.g. `engine.chunked_prefill_size`.
    pub key: &'static str,
    /// Its value as TOML, e.g. `8192` or `"fcfs"`.
    pub value: String,
    /// Where it was read: the log's words and line.
    pub from: String,
}

/// What a log's start-up lines say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Startup {
    /// Settings servesim has keys for (the KV pool first when the log gives it).
    pub settings: Vec<Setting>,
    /// Other facts worth reporting (free memory, weights), one sentence each.
    pub notes: Vec<String>,
}

impl Startup {
    /// Set `key` (a later line wins: a restarted server's log describes the last start).
    pub fn set(&mut self, key: &'static str, value: String, from: String) {
        self.settings.retain(|s| s.key != key);
        self.settings.push(Setting { key, value, from });
    }

    /// The value of `key`, if read.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|s| s.key == key)
            .map(|s| s.value.as_str())
    }
}

/// A log read into memory: its name as given and its text.
#[derive(Clone, Debug)]
pub struct LogText {
    /// The path as the user gave it.
    pub name: String,
    /// The text.
    pub text: String,
}

/// The largest server log read: a wrong path (`/dev/zero`, a disk image) is refused with an
/// error instead of filling the memory.
pub const MAX_LOG_BYTES: u64 = 1 << 30;

/// Read a log file (at most [`MAX_LOG_BYTES`]): it must be non-empty UTF-8 text.
pub fn read_log(path: &Path) -> Result<LogText, LogError> {
    let name = path.display().to_string();
    let bytes = crate::files::read_capped(path, MAX_LOG_BYTES).map_err(|e| {
        LogError::whole(
            &name,
            format!("cannot be read: {e}"),
            "check the path of the server log",
        )
    })?;
    log_text(name, bytes)
}

/// A log from its bytes (see [`read_log`]).
pub fn log_text(name: String, bytes: Vec<u8>) -> Result<LogText, LogError> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(LogError::whole(
            &name,
            "is empty",
            "give the server's log: SGLang's stdout/stderr, or vLLM's (with stats logging on)",
        ));
    }
    let binary = |bytes: &[u8], offset: usize| {
        let line = 1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count() as u64;
        LogError::at(
            &name,
            line,
            format!("is not a text log (binary data at byte {offset})"),
            "give the server's text log, uncompressed (e.g. `zcat server.log.gz > server.log`)",
        )
    };
    if let Some(offset) = bytes.iter().position(|&b| b == 0) {
        return Err(binary(&bytes, offset));
    }
    match std::str::from_utf8(&bytes) {
        Ok(_) => Ok(LogText {
            text: String::from_utf8(bytes).expect("invariant: checked as UTF-8 just above"),
            name,
        }),
        Err(e) => Err(binary(&bytes, e.valid_up_to())),
    }
}

/// The engine whose lines a log holds, if any: SGLang's `Prefill batch` / `Decode batch`, or
/// vLLM's stats line (`Avg prompt throughput: …`) or KV cache size.
pub fn detect(text: &str) -> Option<EngineKind> {
    for line in text.lines() {
        if parse_sglang::is_sglang(line) {
            return Some(EngineKind::Sglang);
        }
        if parse_vllm::is_vllm(line) {
            return Some(EngineKind::Vllm);
        }
    }
    None
}

/// The `name: value` fields of a log message after its marker, split at `", "` (a trailing
/// comma or period, as older versions print, is dropped).
pub(crate) fn fields(rest: &str) -> Vec<(&str, &str)> {
    rest.split(", ")
        .filter_map(|part| part.split_once(": "))
        .map(|(k, v)| (k.trim(), v.trim().trim_end_matches([',', '.'])))
        .collect()
}

/// What `calibrate` found.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The engine whose logs were read.
    pub engine: EngineKind,
    /// The logs, as given.
    pub files: Vec<String>,
    /// What was read, in a sentence.
    pub read: String,
    /// Start-up settings (a later log's win).
    pub startup: Startup,
    /// The fit.
    pub fit: fit::Fit,
    /// Windows left out, and why.
    pub skipped: Vec<fit::Skipped>,
    /// The ranges the windows cover, in words.
    pub ranges: String,
    /// How the equations were made, in words.
    pub method: String,
    /// The windows used.
    pub equations: Vec<fit::Equation>,
    /// The smallest and largest prefill, tokens (SGLang: its Prefill lines; vLLM: up to its
    /// step's token budget).
    pub prefill_tokens: (u64, u64),
}

/// Options of [`calibrate`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// The engine; detected from the logs when `None`.
    pub engine: Option<EngineKind>,
    /// SGLang's `decode_log_interval`; from the log's server arguments when `None`, else 40.
    pub decode_log_interval: Option<u64>,
    /// SGLang ran with `--enable-mixed-chunk` (also read from the log's server arguments).
    pub mixed_chunk: bool,
}

/// SGLang's default `decode_log_interval`.
pub const SGLANG_DECODE_LOG_INTERVAL: u64 = 40;

fn min_max(xs: impl Iterator<Item = u64>) -> (u64, u64) {
    xs.fold((u64::MAX, 0), |(lo, hi), x| (lo.min(x), hi.max(x)))
}

/// Fit the step times to `logs` (see the module doc).
pub fn calibrate(logs: &[LogText], options: Options) -> Result<Calibration, LogError> {
    let first = logs.first().ok_or_else(|| {
        LogError::whole("calibrate", "no log given", "give one or more server logs")
    })?;
    let mut engine = options.engine;
    for log in logs {
        let found = detect(&log.text);
        match (engine, found) {
            (_, None) => {
                return Err(LogError::whole(
                    &log.name,
                    "holds no SGLang `Prefill batch` / `Decode batch` lines and no vLLM stats lines",
                    "give the server's own log at log level info (SGLang's, or vLLM's with stats logging on); servesim's server.log works too",
                ))
            }
            (None, Some(k)) => engine = Some(k),
            (Some(want), Some(k)) if want != k => {
                let name = |k: EngineKind| if k == EngineKind::Sglang { "SGLang" } else { "vLLM" };
                return Err(LogError::whole(
                    &log.name,
                    format!("is {} log, not {}", if k == EngineKind::Sglang { "an SGLang" } else { "a vLLM" }, name(want)),
                    "calibrate logs of one engine at a time (or drop --engine to detect it)",
                ));
            }
            _ => {}
        }
    }
    let engine = engine.expect("invariant: every log was detected or the engine given");
    let files: Vec<String> = logs.iter().map(|l| l.name.clone()).collect();
    let mut startup = Startup::default();
    let merge = |startup: &mut Startup, s: &Startup, name: &str| {
        // "(line 12)" becomes "(server.log:12)".
        let located = |words: &str| words.replace("(line ", &format!("({name}:"));
        for x in &s.settings {
            startup.set(x.key, x.value.clone(), located(&x.from));
        }
        startup.notes.extend(s.notes.iter().map(|n| located(n)));
    };
    let (equations, skipped, read, ranges, method, prefill_tokens) = match engine {
        EngineKind::Sglang => {
            let mut parsed = Vec::new();
            for (i, log) in logs.iter().enumerate() {
                let p = parse_sglang::parse(log, i)?;
                merge(&mut startup, &p.startup, &log.name);
                parsed.push(p);
            }
            sglang_inputs(logs, &parsed, &startup, options)?
        }
        EngineKind::Vllm => {
            let mut parsed = Vec::new();
            for (i, log) in logs.iter().enumerate() {
                let p = parse_vllm::parse(log, i)?;
                merge(&mut startup, &p.startup, &log.name);
                parsed.push(p);
            }
            vllm_inputs(logs, &parsed)?
        }
    };
    let fit = fit::solve(&equations).map_err(|e| {
        let why = match skipped.is_empty() {
            true => String::new(),
            false => format!(
                " ({} left out: {})",
                skipped.len(),
                skipped_reasons(&skipped)
            ),
        };
        LogError::whole(
            &first.name,
            format!("{read}: {e}{why}"),
            "log a longer run: each window is the stretch between two periodic lines",
        )
    })?;
    // The KV pool first; the rest as the logs gave them.
    startup
        .settings
        .sort_by_key(|x| x.key != "engine.kv_capacity_tokens");
    Ok(Calibration {
        engine,
        files,
        read,
        startup,
        fit,
        skipped,
        ranges,
        method,
        equations,
        prefill_tokens,
    })
}

fn skipped_reasons(skipped: &[fit::Skipped]) -> String {
    let mut r: Vec<&str> = skipped.iter().map(|s| s.reason).collect();
    r.dedup();
    r.join("; ")
}

type Inputs = (
    Vec<fit::Equation>,
    Vec<fit::Skipped>,
    String,
    String,
    String,
    (u64, u64),
);

fn sglang_inputs(
    logs: &[LogText],
    parsed: &[parse_sglang::SglangLog],
    startup: &Startup,
    options: Options,
) -> Result<Inputs, LogError> {
    use parse_sglang::Event;
    let decodes = || {
        parsed
            .iter()
            .flat_map(|p| p.events())
            .filter_map(|e| match e {
                Event::Decode(d) => Some(d),
                _ => None,
            })
    };
    let prefills = || {
        parsed
            .iter()
            .flat_map(|p| p.events())
            .filter_map(|e| match e {
                Event::Prefill(p) => Some(p),
                _ => None,
            })
    };
    let (n_decode, n_prefill) = (decodes().count(), prefills().count());
    if n_decode == 0 {
        return Err(LogError::whole(
            &logs[0].name,
            format!("has {n_prefill} Prefill batch lines but no Decode batch lines"),
            "SGLang prints a Decode batch line every decode_log_interval (40) decode steps: log a longer run, or start the server with a smaller --decode-log-interval",
        ));
    }
    let interval = options
        .decode_log_interval
        .or_else(|| {
            startup
                .get("engine.decode_log_interval")
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(SGLANG_DECODE_LOG_INTERVAL);
    let mixed = options.mixed_chunk || startup.get("engine.enable_mixed_chunk") == Some("true");
    let (equations, skipped) = fit::sglang_equations(parsed, interval, mixed);
    let read = format!("{n_decode} Decode batch lines and {n_prefill} Prefill batch lines");
    let used: std::collections::BTreeSet<At> = equations.iter().map(|e| e.at).collect();
    let used_decodes = || decodes().filter(|d| used.contains(&d.at));
    let (b, k) = (
        min_max(used_decodes().map(|d| d.running)),
        min_max(used_decodes().map(|d| d.kv_tokens)),
    );
    let (pb, pt) = (
        min_max(equations.iter().map(|e| e.x[3] as u64)),
        min_max(prefills().map(|p| p.new_tokens)),
    );
    let ranges = match equations.is_empty() {
        true => "none".into(),
        false => format!(
            "batch {} requests, KV {} tokens (at the Decode lines); {} prefill batches per window, of {} tokens",
            fragment::span(b.0, b.1),
            fragment::span(k.0, k.1),
            fragment::span(pb.0, pb.1),
            if n_prefill == 0 { "no".into() } else { fragment::span(pt.0, pt.1) },
        ),
    };
    let method = format!(
        "non-negative least squares on the wall time of each window of {interval} decode steps and the prefill batches logged inside it{}; \
         decode tokens = {interval} × the mean #running-req of the two Decode lines, time = tokens ÷ gen throughput; weighted by 1/time",
        if mixed { " (mixed chunks: each prefill batch also computes one token per running request)" } else { "" }
    );
    let prefill_tokens = if n_prefill == 0 { (1, 1) } else { pt };
    Ok((equations, skipped, read, ranges, method, prefill_tokens))
}

fn vllm_inputs(logs: &[LogText], parsed: &[parse_vllm::VllmLog]) -> Result<Inputs, LogError> {
    let n: usize = parsed.iter().map(|p| p.stats.len()).sum();
    if n == 0 {
        return Err(LogError::whole(
            &logs[0].name,
            "has no vLLM stats lines (`Avg prompt throughput: …`)",
            "vLLM prints them every 10 s at log level info unless --disable-log-stats: log a run of a minute or more",
        ));
    }
    let (equations, skipped) = fit::vllm_equations(parsed);
    let read = format!("{n} stats lines");
    let used: std::collections::BTreeSet<At> = equations.iter().map(|e| e.at).collect();
    let stats = || {
        parsed
            .iter()
            .flat_map(|p| &p.stats)
            .filter(|s| used.contains(&s.at))
    };
    let r = min_max(stats().map(|s| s.running));
    let u = min_max(stats().map(|s| (s.kv_usage * 1000.0).round() as u64));
    let p = min_max(stats().map(|s| s.prompt_tok_per_s.round() as u64));
    let ranges = match equations.is_empty() {
        true => "none".into(),
        false => format!(
            "running {} requests, KV cache usage {:.1}–{:.1} %, prompt throughput {} tokens/s",
            fragment::span(r.0, r.1),
            u.0 as f64 / 10.0,
            u.1 as f64 / 10.0,
            fragment::span(p.0, p.1),
        ),
    };
    let method = "non-negative least squares on each 10 s stats window's busy time: generation tokens ÷ running = steps, \
                  each pricing the running requests, the window's prompt tokens and its KV; weighted by 1/time"
        .to_string();
    // A step's prompt tokens: up to vLLM's token budget (8,192 by default on an H100).
    let budget = parsed
        .iter()
        .rev()
        .find_map(|p| p.startup.get("engine.max_num_batched_tokens"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(8192);
    Ok((
        equations,
        skipped,
        read,
        ranges,
        method,
        (64.min(budget), budget),
    ))
}
