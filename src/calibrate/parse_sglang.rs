//! SGLang's log (0.5.23, and the older `Prefill batch.` form), as SGLang prints it
//! (`[2026-01-01 00:00:01 TP0] …`) or as servesim writes it.
//!
//! * `Prefill batch, #new-seq: 2, #new-token: 1536, #cached-token: 0, token usage: 0.05,
//!   #running-req: 30, …` (`scheduler_components/metrics_reporter.py: report_prefill_stats`)
//! * `Decode batch, #running-req: 32, #token: 41234, token usage: 0.35, cuda graph: True,
//!   gen throughput (token/s): 1503.22, #queue-req: 0` (`report_decode_stats`), printed every
//!   `decode_log_interval` decode steps; `gen throughput` is the decode tokens since the
//!   previous Decode line over the wall time since it.
//! * `KV cache pool is full. Retract requests. …` (`scheduler.py: update_running_batch`)
//! * Start-up: `max_total_num_tokens=…, chunked_prefill_size=…, max_prefill_tokens=…,
//!   max_running_requests=…, context_len=…, available_gpu_mem=… GB` (`managers/scheduler.py`),
//!   `KV Cache is allocated. dtype: …, #tokens: …` (`mem_cache/memory_pool.py`),
//!   `Load weight end. … avail mem=… GB, mem usage=… GB.` (`model_executor/model_runner.py`)
//!   and `server_args=…` (`entrypoints/engine.py`: a dict in 0.5.23, `ServerArgs(…)` before).

use super::{fields, At, LogError, LogText, Startup};

/// One periodic line.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A prefill batch.
    Prefill(Prefill),
    /// A `Decode batch` line.
    Decode(Decode),
    /// A retraction.
    Retract(At),
}

/// A `Prefill batch` line.
#[derive(Clone, Debug, PartialEq)]
pub struct Prefill {
    /// Where.
    pub at: At,
    /// `#new-seq`.
    pub new_seqs: u64,
    /// `#new-token`: tokens computed.
    pub new_tokens: u64,
    /// `#running-req`: the decode batch when it was scheduled (the new requests excluded).
    pub running: u64,
}

/// A `Decode batch` line.
#[derive(Clone, Debug, PartialEq)]
pub struct Decode {
    /// Where.
    pub at: At,
    /// `#running-req`: the batch of the logged step.
    pub running: u64,
    /// `#token`: KV tokens in use.
    pub kv_tokens: u64,
    /// `gen throughput (token/s)`.
    pub gen_tok_per_s: f64,
}

/// An SGLang log, read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SglangLog {
    /// Start-up lines.
    pub startup: Startup,
    /// Periodic lines, in order, by data-parallel rank (`[… DP1 TP8]`; rank 0 without DP):
    /// each DP group's scheduler logs its own batches.
    pub ranks: Vec<(u32, Vec<Event>)>,
}

impl SglangLog {
    /// Every periodic line, rank after rank.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.ranks.iter().flat_map(|(_, e)| e)
    }
}

/// The data-parallel rank in a line's prefix (`[2026-01-01 00:00:01 DP1 TP8] …`), 0 without.
fn dp_rank(line: &str) -> u32 {
    let Some(prefix) = line.strip_prefix('[').and_then(|l| l.split(']').next()) else {
        return 0;
    };
    prefix
        .split(' ')
        .find_map(|w| w.strip_prefix("DP").and_then(|d| d.parse().ok()))
        .unwrap_or(0)
}

/// Whether a line is one of SGLang's periodic lines.
pub fn is_sglang(line: &str) -> bool {
    marker(line, "Decode batch").is_some() || marker(line, "Prefill batch").is_some()
}

/// The text after `what` (and its optional ` [iter]`, and `,` or `.`), if the line holds it.
fn marker<'a>(line: &'a str, what: &str) -> Option<&'a str> {
    let rest = &line[line.find(what)? + what.len()..];
    let rest = match rest.strip_prefix(" [") {
        Some(r) => &r[r.find(']')? + 1..],
        None => rest,
    };
    rest.strip_prefix([',', '.']).map(str::trim_start)
}

/// The start-up settings servesim has keys for: `(server argument, key, kind)`.
const ARGS: &[(&str, &str, Kind)] = &[
    (
        "chunked_prefill_size",
        "engine.chunked_prefill_size",
        Kind::IntOrOff,
    ),
    ("max_prefill_tokens", "engine.max_prefill_tokens", Kind::Int),
    (
        "max_running_requests",
        "engine.max_running_requests",
        Kind::Int,
    ),
    ("page_size", "engine.page_size", Kind::Int),
    (
        "schedule_policy",
        "engine.schedule_policy",
        Kind::Word(&["fcfs", "lof", "random"]),
    ),
    (
        "decode_log_interval",
        "engine.decode_log_interval",
        Kind::Int,
    ),
    (
        "mem_fraction_static",
        "engine.mem_fraction_static",
        Kind::Num,
    ),
    ("cuda_graph_max_bs", "engine.cuda_graph_max_bs", Kind::Int),
    (
        "schedule_conservativeness",
        "engine.schedule_conservativeness",
        Kind::Num,
    ),
    (
        "disable_radix_cache",
        "engine.disable_radix_cache",
        Kind::Bool,
    ),
    (
        "disable_overlap_schedule",
        "engine.disable_overlap_schedule",
        Kind::Bool,
    ),
    (
        "enable_mixed_chunk",
        "engine.enable_mixed_chunk",
        Kind::Bool,
    ),
    (
        "kv_cache_dtype",
        "engine.kv_cache_dtype",
        Kind::Word(&["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]),
    ),
    ("tp_size", "hardware.tensor_parallel", Kind::Int),
];

/// How a server argument becomes a TOML value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Int,
    IntOrOff,
    Num,
    Bool,
    Word(&'static [&'static str]),
}

/// `raw` (a Python repr: `8192`, `0.88`, `True`, `'fcfs'`, `None`) as TOML for `kind`, or
/// `None` when servesim has no such value.
pub(crate) fn toml_value(raw: &str, kind: Kind) -> Option<String> {
    let raw = raw.trim().trim_matches(|c| c == '\'' || c == '"');
    match kind {
        Kind::Int => raw
            .parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .map(|n| n.to_string()),
        Kind::IntOrOff => match raw.parse::<i64>().ok()? {
            n if n > 0 => Some(n.to_string()),
            -1 => Some("-1".into()),
            _ => None,
        },
        Kind::Num => raw
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .map(|x| x.to_string()),
        Kind::Bool => match raw {
            "True" | "true" => Some("true".into()),
            "False" | "false" => Some("false".into()),
            _ => None,
        },
        Kind::Word(words) => {
            let w = match raw {
                "bfloat16" => "bf16",
                "float16" => "fp16",
                other => other,
            };
            words.contains(&w).then(|| format!("\"{w}\""))
        }
    }
}

/// The value of `name` in an echoed argument list: `'name': value` (a dict) or `name=value`
/// (a dataclass repr), up to the next `,` or closing bracket.
pub(crate) fn arg_value<'a>(args: &'a str, name: &str) -> Option<&'a str> {
    let patterns = [
        format!("'{name}': "),
        format!("\"{name}\": "),
        format!("{name}="),
    ];
    for p in &patterns {
        let mut from = 0;
        while let Some(i) = args[from..].find(p.as_str()) {
            let start = from + i;
            // A whole name: not the tail of a longer one.
            let before = args[..start].chars().next_back();
            if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
                let rest = &args[start + p.len()..];
                let end = rest.find([',', ')', '}']).unwrap_or(rest.len());
                return Some(rest[..end].trim());
            }
            from = start + p.len();
        }
    }
    None
}

fn number<T: std::str::FromStr>(
    log: &LogText,
    line: u64,
    fields: &[(&str, &str)],
    names: &[&str],
    what: &str,
) -> Result<T, LogError> {
    let raw = fields
        .iter()
        .find(|(k, _)| names.contains(k))
        .map(|(_, v)| *v);
    let hint =
        "the line looks cut short or edited: remove it, or give the log as the server wrote it";
    match raw {
        Some(v) => v.parse().map_err(|_| {
            LogError::at(
                &log.name,
                line,
                format!("a {what} line with `{}: {v}`, not a number", names[0]),
                hint,
            )
        }),
        None => Err(LogError::at(
            &log.name,
            line,
            format!("a {what} line without its `{}` field", names[0]),
            hint,
        )),
    }
}

/// Read an SGLang log. `file` is the log's index among those read.
pub fn parse(log: &LogText, file: usize) -> Result<SglangLog, LogError> {
    let mut out = SglangLog::default();
    let mut ranks: std::collections::BTreeMap<u32, Vec<Event>> = Default::default();
    for (i, line) in log.text.lines().enumerate() {
        let n = i as u64 + 1;
        let at = At { file, line: n };
        let events = ranks.entry(dp_rank(line)).or_default();
        if let Some(rest) = marker(line, "Decode batch") {
            let f = fields(rest);
            events.push(Event::Decode(Decode {
                at,
                running: number(log, n, &f, &["#running-req"], "Decode batch")?,
                kv_tokens: number(log, n, &f, &["#token", "#full token"], "Decode batch")?,
                gen_tok_per_s: number(log, n, &f, &["gen throughput (token/s)"], "Decode batch")?,
            }));
        } else if let Some(rest) = marker(line, "Prefill batch") {
            let f = fields(rest);
            events.push(Event::Prefill(Prefill {
                at,
                new_seqs: number(log, n, &f, &["#new-seq"], "Prefill batch")?,
                new_tokens: number(log, n, &f, &["#new-token"], "Prefill batch")?,
                running: number(log, n, &f, &["#running-req"], "Prefill batch")?,
            }));
        } else if line.contains("KV cache pool is full. Retract requests.") {
            events.push(Event::Retract(at));
        } else {
            startup_line(&mut out.startup, line, n);
        }
    }
    out.ranks = ranks.into_iter().filter(|(_, e)| !e.is_empty()).collect();
    Ok(out)
}

fn startup_line(s: &mut Startup, line: &str, n: u64) {
    if let Some(i) = line.find("max_total_num_tokens=") {
        let args = &line[i..];
        if let Some(v) =
            arg_value(args, "max_total_num_tokens").and_then(|v| toml_value(v, Kind::Int))
        {
            s.set(
                "engine.kv_capacity_tokens",
                v.clone(),
                format!("max_total_num_tokens={v} (line {n})"),
            );
        }
        for (name, key, kind) in &ARGS[..3] {
            if let Some(v) = arg_value(args, name).and_then(|v| toml_value(v, *kind)) {
                s.set(key, v.clone(), format!("{name}={v} (line {n})"));
            }
        }
        if let Some(v) = arg_value(args, "available_gpu_mem") {
            s.notes.push(format!(
                "available GPU memory after the KV pool: {v} (line {n})"
            ));
        }
    } else if let Some(i) = line
        .find("#tokens: ")
        .filter(|_| line.contains("KV Cache is allocated") || line.contains("KV cache allocated"))
    {
        let digits: String = line[i + 9..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Some(v) = toml_value(&digits, Kind::Int) {
            if s.get("engine.kv_capacity_tokens").is_none() {
                s.set(
                    "engine.kv_capacity_tokens",
                    v.clone(),
                    format!("KV Cache is allocated, #tokens: {v} (line {n})"),
                );
            }
        }
    } else if let Some(i) = line.find("Load weight end.") {
        s.notes.push(format!("{} (line {n})", line[i..].trim()));
    } else if let Some(i) = line.find("server_args=") {
        let args = &line[i + "server_args=".len()..];
        for (name, key, kind) in ARGS {
            if let Some(v) = arg_value(args, name).and_then(|v| toml_value(v, *kind)) {
                s.set(key, v.clone(), format!("server_args {name}={v} (line {n})"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(text: &str) -> LogText {
        LogText {
            name: "s.log".into(),
            text: text.into(),
        }
    }

    #[test]
    fn lines_as_sglang_and_servesim_print_them() {
        let l = parse(
            &log(
                "[2026-01-01 00:00:01 TP0] Prefill batch, #new-seq: 2, #new-token: 1536, #cached-token: 0, token usage: 0.05, \
                 #running-req: 30, #queue-req: 4, #pending-token: 900, cuda graph: True, input throughput (token/s): 12000.00\n\
                 [2025-09-03 05:49:04] Decode batch. #running-req: 1, #token: 501, token usage: 0.02, cuda graph: True, gen throughput (token/s): 65.75, #queue-req: 0,\n\
                 Prefill batch. #new-seq: 1, #new-token: 115, #cached-token: 351, token usage: 0.02, #running-req: 0, #queue-req: 0,\n",
            ),
            0,
        )
        .unwrap();
        let events: Vec<&Event> = l.events().collect();
        assert_eq!(events.len(), 3);
        assert_eq!(
            *events[0],
            Event::Prefill(Prefill {
                at: At { file: 0, line: 1 },
                new_seqs: 2,
                new_tokens: 1536,
                running: 30
            })
        );
        assert_eq!(
            *events[1],
            Event::Decode(Decode {
                at: At { file: 0, line: 2 },
                running: 1,
                kv_tokens: 501,
                gen_tok_per_s: 65.75
            })
        );
    }

    #[test]
    fn each_data_parallel_rank_is_a_stream_of_its_own() {
        let line = |dp: u32, n: u32| {
            format!(
                "[2026-01-01 00:00:0{n} DP{dp} TP{}] Decode batch, #running-req: {}, #token: 9, gen throughput (token/s): 1.00\n",
                dp * 4,
                10 + dp
            )
        };
        let text = [line(0, 1), line(1, 1), line(0, 2), line(1, 2), line(1, 3)].concat();
        let l = parse(&log(&text), 0).unwrap();
        let sizes: Vec<(u32, usize)> = l.ranks.iter().map(|(r, e)| (*r, e.len())).collect();
        assert_eq!(sizes, vec![(0, 2), (1, 3)]);
        assert_eq!(dp_rank("[2026-01-01 00:00:01 TP3] Decode batch"), 0);
        assert_eq!(dp_rank("Decode batch, #running-req: 1"), 0);
    }

    #[test]
    fn start_up_lines_give_the_pool_and_the_settings() {
        let l = parse(
            &log(
                "[2026-01-01 00:00:00] server_args={'model_path': 'meta-llama/Llama-3.1-8B-Instruct', 'tp_size': 1, 'chunked_prefill_size': 8192, \
                 'max_running_requests': None, 'schedule_policy': 'fcfs', 'page_size': 1, 'mem_fraction_static': 0.88, 'disable_radix_cache': False}\n\
                 [2026-01-01 00:00:09] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 471000, K size: 28.75 GB, V size: 28.75 GB\n\
                 [2026-01-01 00:00:12] max_total_num_tokens=470997, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, available_gpu_mem=8.27 GB\n",
            ),
            0,
        )
        .unwrap();
        let s = &l.startup;
        assert_eq!(s.get("engine.kv_capacity_tokens"), Some("470997"));
        assert_eq!(s.get("engine.chunked_prefill_size"), Some("8192"));
        assert_eq!(s.get("engine.max_running_requests"), Some("4096"));
        assert_eq!(s.get("engine.schedule_policy"), Some("\"fcfs\""));
        assert_eq!(s.get("engine.mem_fraction_static"), Some("0.88"));
        assert_eq!(s.get("engine.disable_radix_cache"), Some("false"));
        assert_eq!(s.get("hardware.tensor_parallel"), Some("1"));
        assert!(s.notes[0].contains("8.27 GB"), "{:?}", s.notes);
    }

    #[test]
    fn a_line_cut_short_is_an_error_at_its_line() {
        let e = parse(
            &log("[2026-01-01 00:00:01] Decode batch, #running-req: 5, #token: 900, token usage: 0.01, cuda gr\n"),
            0,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.log:1: a Decode batch line without its `gen throughput (token/s)` field"
        );
        let e = parse(
            &log("Decode batch, #running-req: 5x, #token: 9, gen throughput (token/s): 1\n"),
            0,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "a Decode batch line with `#running-req: 5x`, not a number"
        );
    }

    #[test]
    fn argument_values_are_found_by_whole_name() {
        let args = "ServerArgs(model_path='x', max_prefill_tokens=16384, chunked_prefill_size=-1, page_size=16)";
        assert_eq!(arg_value(args, "chunked_prefill_size"), Some("-1"));
        assert_eq!(arg_value(args, "prefill_tokens"), None);
        assert_eq!(toml_value("-1", Kind::IntOrOff).as_deref(), Some("-1"));
        assert_eq!(toml_value("None", Kind::Int), None);
    }
}
