//! The validated layer: reads the [`super::tree`] into a [`Scenario`], collecting every
//! problem with its key path, position, bad value and a hint.

use std::path::Path;
use std::sync::Arc;

use super::error::{Location, Problem, ScenarioError};
use super::tree::{self, Node, Origin, SetError, Table, Value};
use super::*;
use crate::catalog::Catalog;
use crate::workload::dist::{LengthDist, Shape, MAX_TOKENS_PER_REQUEST};

/// The most requests one scenario may send (10⁹): far beyond any real job, small enough that a
/// typo such as 10¹⁵ is caught before it runs for days.
pub const MAX_REQUESTS: u64 = 1_000_000_000;
/// The largest KV pool accepted (10⁹ tokens; a full 8 × B200 node holds about 10⁷).
pub const MAX_KV_TOKENS: u64 = 1_000_000_000;
/// The largest concurrency limit accepted.
pub const MAX_CONCURRENCY: u64 = 10_000_000;
/// The longest simulated time accepted (one year).
pub const MAX_SIM_S: f64 = 365.0 * 24.0 * 3600.0;
/// The most values an empirical distribution may hold.
pub const MAX_EMPIRICAL_VALUES: usize = 10_000_000;

/// Default master seed (a fixed constant, never entropy).
pub const DEFAULT_SEED: u64 = 1;
/// Default client window for the windowed rate (seconds).
pub const DEFAULT_WINDOW_S: f64 = 60.0;
/// Default initial time-series spacing (seconds).
pub const DEFAULT_TIMESERIES_INTERVAL_S: f64 = 1.0;
/// Default bound on scheduler batches (about a minute of simulation at worst).
pub const DEFAULT_MAX_EVENTS: u64 = 2_000_000_000;

struct Problems<'s> {
    text: &'s str,
    list: Vec<Problem>,
}

/// Marker: a problem was recorded for this key.
struct Bad;

type Got<T> = Result<Option<T>, Bad>;

impl<'s> Problems<'s> {
    fn push(
        &mut self,
        key_path: &str,
        origin: &Origin,
        message: impl Into<String>,
        value: Option<String>,
        hint: Option<String>,
    ) {
        self.list.push(Problem {
            key_path: key_path.to_string(),
            location: Location::from_origin(origin, self.text),
            message: message.into(),
            value,
            hint,
        });
    }

    fn bad_value(
        &mut self,
        path: &str,
        node: &Node,
        message: impl Into<String>,
        hint: &str,
    ) -> Bad {
        self.push(
            path,
            &node.origin,
            message,
            Some(node.value.render()),
            (!hint.is_empty()).then(|| hint.to_string()),
        );
        Bad
    }
}

/// A table being read: remembers which keys were used so the rest can be reported as unknown.
struct Tbl<'a> {
    path: String,
    table: &'a Table,
    origin: Origin,
    used: Vec<String>,
}

impl<'a> Tbl<'a> {
    fn new(path: &str, table: &'a Table, origin: Origin) -> Self {
        Tbl {
            path: path.to_string(),
            table,
            origin,
            used: Vec::new(),
        }
    }

    fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn get(&mut self, key: &str) -> Option<&'a Node> {
        self.used.push(key.to_string());
        self.table.get(key)
    }

    fn has(&self, key: &str) -> bool {
        self.table.get(key).is_some()
    }

    /// Report every key that was not read, with a "did you mean" hint.
    fn finish(&self, p: &mut Problems, known: &[&str]) {
        for (key, origin, _) in &self.table.entries {
            if self.used.iter().any(|u| u == key) {
                continue;
            }
            let hint = match did_you_mean(key, known) {
                Some(s) => format!("did you mean `{}`?", self.key_path(s)),
                None => format!("known keys here: {}", known.join(", ")),
            };
            let what = if self.path.is_empty() {
                "unknown key at the top level".to_string()
            } else {
                format!("unknown key in [{}]", self.path)
            };
            p.push(&self.key_path(key), origin, what, None, Some(hint));
        }
    }

    fn missing(&self, p: &mut Problems, key: &str, hint: &str) -> Bad {
        let where_ = if self.path.is_empty() {
            "at the top level".to_string()
        } else {
            format!("in [{}]", self.path)
        };
        p.push(
            &self.key_path(key),
            &self.origin,
            format!("required key is missing {where_}"),
            None,
            Some(hint.to_string()),
        );
        Bad
    }
}

pub use crate::diagnostic::did_you_mean;

// ---------------------------------------------------------------------------------------------
// Typed getters. Each returns Ok(None) when the key is absent, Err(Bad) after recording a problem.

fn get_str(t: &mut Tbl, p: &mut Problems, key: &str) -> Got<String> {
    let path = t.key_path(key);
    match t.get(key) {
        None => Ok(None),
        Some(Node {
            value: Value::Str(s),
            ..
        }) => Ok(Some(s.clone())),
        Some(n) => Err(p.bad_value(
            &path,
            n,
            format!("expected a string, found {}", n.value.type_name()),
            "put the value in double quotes",
        )),
    }
}

fn get_bool(t: &mut Tbl, p: &mut Problems, key: &str) -> Got<bool> {
    let path = t.key_path(key);
    match t.get(key) {
        None => Ok(None),
        Some(Node {
            value: Value::Bool(b),
            ..
        }) => Ok(Some(*b)),
        Some(n) => Err(p.bad_value(
            &path,
            n,
            format!("expected a boolean, found {}", n.value.type_name()),
            "write true or false, without quotes",
        )),
    }
}

/// A number (integer or float), which must be finite.
fn node_f64(p: &mut Problems, path: &str, n: &Node) -> Result<f64, Bad> {
    let x = match &n.value {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        other => {
            return Err(p.bad_value(
                path,
                n,
                format!("expected a number, found {}", other.type_name()),
                "write a number without quotes, e.g. 0.5",
            ))
        }
    };
    if !x.is_finite() {
        return Err(p.bad_value(
            path,
            n,
            "must be a finite number",
            "nan and inf are not meaningful here",
        ));
    }
    Ok(x)
}

/// Bounds for a float key.
#[derive(Clone, Copy)]
enum F {
    /// > 0.
    Positive,
    /// In (0, 1].
    Fraction,
    /// In [lo, hi].
    Within(f64, f64),
}

fn check_f64(
    p: &mut Problems,
    path: &str,
    n: &Node,
    x: f64,
    bounds: F,
    hint: &str,
) -> Result<f64, Bad> {
    let msg = match bounds {
        F::Positive if x <= 0.0 => Some("must be greater than 0".to_string()),
        F::Fraction if !(x > 0.0 && x <= 1.0) => Some("must be in (0, 1]".to_string()),
        F::Within(lo, hi) if !(lo..=hi).contains(&x) => Some(if lo <= 1e-6 {
            format!("must be greater than 0 and at most {hi}")
        } else {
            format!("must be between {lo} and {hi}")
        }),
        _ => None,
    };
    match msg {
        Some(m) => Err(p.bad_value(path, n, m, hint)),
        None => Ok(x),
    }
}

fn get_f64(t: &mut Tbl, p: &mut Problems, key: &str, bounds: F, hint: &str) -> Got<f64> {
    let path = t.key_path(key);
    match t.get(key) {
        None => Ok(None),
        Some(n) => {
            let x = node_f64(p, &path, n)?;
            check_f64(p, &path, n, x, bounds, hint).map(Some)
        }
    }
}

/// An integer in `[min, max]`. An integral float (`1e5`) is accepted.
fn node_u64(
    p: &mut Problems,
    path: &str,
    n: &Node,
    min: u64,
    max: u64,
    hint: &str,
) -> Result<u64, Bad> {
    let v: f64 = match &n.value {
        Value::Int(i) => *i as f64,
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 => *f,
        Value::Float(f) if !f.is_finite() => {
            return Err(p.bad_value(path, n, "must be a finite integer", hint));
        }
        Value::Float(_) => {
            return Err(p.bad_value(
                path,
                n,
                "expected an integer, found a fractional number",
                hint,
            ));
        }
        other => {
            return Err(p.bad_value(
                path,
                n,
                format!("expected an integer, found {}", other.type_name()),
                hint,
            ))
        }
    };
    if v < min as f64 {
        let m = if min == 1 {
            "must be at least 1".to_string()
        } else {
            format!("must be at least {min}")
        };
        return Err(p.bad_value(path, n, m, hint));
    }
    if v > max as f64 {
        return Err(p.bad_value(path, n, format!("must be at most {max}"), hint));
    }
    Ok(match &n.value {
        Value::Int(i) => *i as u64,
        _ => v as u64,
    })
}

fn get_u64(t: &mut Tbl, p: &mut Problems, key: &str, min: u64, max: u64, hint: &str) -> Got<u64> {
    let path = t.key_path(key);
    match t.get(key) {
        None => Ok(None),
        Some(n) => node_u64(p, &path, n, min, max, hint).map(Some),
    }
}

fn get_choice<T: Copy>(t: &mut Tbl, p: &mut Problems, key: &str, choices: &[(&str, T)]) -> Got<T> {
    let path = t.key_path(key);
    let node = t.get(key);
    let Some(s) = get_str_node(p, &path, node)? else {
        return Ok(None);
    };
    if let Some((_, v)) = choices.iter().find(|(name, _)| *name == s) {
        return Ok(Some(*v));
    }
    let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
    let hint = match did_you_mean(&s, &names) {
        Some(g) => format!("did you mean \"{g}\"? valid values: {}", quoted(&names)),
        None => format!("valid values: {}", quoted(&names)),
    };
    Err(p.bad_value(
        &path,
        node.expect("invariant: value present"),
        "unknown value",
        &hint,
    ))
}

fn get_str_node(p: &mut Problems, path: &str, node: Option<&Node>) -> Got<String> {
    match node {
        None => Ok(None),
        Some(Node {
            value: Value::Str(s),
            ..
        }) => Ok(Some(s.clone())),
        Some(n) => Err(p.bad_value(
            path,
            n,
            format!("expected a string, found {}", n.value.type_name()),
            "put the value in double quotes",
        )),
    }
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn get_table<'a>(t: &mut Tbl<'a>, p: &mut Problems, key: &str) -> Result<Option<Tbl<'a>>, Bad> {
    let path = t.key_path(key);
    match t.get(key) {
        None => Ok(None),
        Some(Node {
            value: Value::Table(tab),
            origin,
        }) => Ok(Some(Tbl::new(&path, tab, origin.clone()))),
        Some(n) => Err(p.bad_value(
            &path,
            n,
            format!("expected a table, found {}", n.value.type_name()),
            &format!("write it as a [{path}] section or an inline table {{ … }}"),
        )),
    }
}

fn required<T>(t: &Tbl, p: &mut Problems, key: &str, got: Got<T>, hint: &str) -> Option<T> {
    match got {
        Ok(Some(v)) => Some(v),
        Ok(None) => {
            t.missing(p, key, hint);
            None
        }
        Err(Bad) => None,
    }
}

fn ok<T>(got: Got<T>) -> Option<Option<T>> {
    got.ok()
}

fn secs(x: f64) -> SimDuration {
    SimDuration::from_secs_f64(x).expect("invariant: bounds were validated")
}

// ---------------------------------------------------------------------------------------------

pub(super) fn load(source: &Source, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let mut p = Problems {
        text: &source.text,
        list: Vec::new(),
    };
    let fail = |list: Vec<Problem>| ScenarioError {
        source_name: source.name.clone(),
        problems: list,
    };
    let mut root = match tree::parse(&source.text) {
        Ok(t) => t,
        Err(errors) => {
            for e in errors {
                let origin = e.span.map_or(Origin::Unknown, Origin::File);
                p.push(
                    "",
                    &origin,
                    format!("TOML syntax error: {}", e.message),
                    None,
                    Some("see https://toml.io for the syntax; strings need double quotes".into()),
                );
            }
            return Err(fail(p.list));
        }
    };
    for s in sets {
        if let Err(e) = tree::apply_set(&mut root, s) {
            let origin = Origin::Override(s.clone());
            let (key, msg, hint) = match e {
                SetError::MissingEquals => (
                    String::new(),
                    "expected KEY=VALUE".to_string(),
                    "e.g. --set client.concurrency=64".to_string(),
                ),
                SetError::EmptyKey => (
                    String::new(),
                    "the key path is empty or has an empty part".to_string(),
                    "write the dotted path of a scenario key, e.g. engine.page_size".to_string(),
                ),
                SetError::NotATable { prefix, found } => (
                    prefix.clone(),
                    format!("is {found}, so it has no keys below it"),
                    format!("set `{prefix}` itself, or check the path"),
                ),
            };
            p.push(&key, &origin, msg, None, Some(hint));
        }
    }
    let scenario = read_root(&root, source, &mut p);
    match scenario {
        Some(s) if p.list.is_empty() => Ok(s),
        _ => {
            if p.list.is_empty() {
                p.push("", &Origin::Unknown, "invalid scenario", None, None);
            }
            Err(fail(p.list))
        }
    }
}

const ROOT_KEYS: &[&str] = &[
    "name",
    "catalog",
    "description",
    "seed",
    "run",
    "hardware",
    "model",
    "engine",
    "workload",
    "client",
];

/// Where the value at `path` was written (for problems found after its table was read).
fn origin_of(root: &Table, path: &[&str]) -> Origin {
    let mut table = root;
    let mut origin = Origin::Unknown;
    for key in path {
        match table.get(key) {
            Some(node) => {
                origin = node.origin.clone();
                match &node.value {
                    Value::Table(t) => table = t,
                    _ => break,
                }
            }
            None => break,
        }
    }
    origin
}

/// The catalog: the built-in one, extended by the scenario's `catalog = "file.toml"` if given.
fn read_catalog(t: &mut Tbl, p: &mut Problems, base_dir: &Path) -> Option<Catalog> {
    let node = t.table.get("catalog");
    let file = ok(get_str(t, p, "catalog"))??;
    let path = base_dir.join(&file);
    match Catalog::with_user_file(&path) {
        Ok(c) => Some(c),
        Err(e) => {
            p.bad_value(
                "catalog",
                node.expect("invariant: catalog was read"),
                format!("cannot be used: {e}"),
                "a TOML file of [[gpu]] and [[model]] entries, relative to the scenario (see `servesim catalog`)",
            );
            None
        }
    }
}

fn read_root(root: &Table, source: &Source, p: &mut Problems) -> Option<Scenario> {
    let mut t = Tbl::new("", root, Origin::Unknown);
    let name = get_str(&mut t, p, "name");
    let name = required(
        &t,
        p,
        "name",
        name,
        "add name = \"…\" at the top of the file",
    );
    let description = ok(get_str(&mut t, p, "description"));
    let seed = ok(get_u64(
        &mut t,
        p,
        "seed",
        0,
        u64::MAX,
        "a non-negative integer, e.g. 7",
    ));

    let catalog = read_catalog(&mut t, p, &source.base_dir);
    let catalog = catalog.as_ref().unwrap_or_else(|| Catalog::builtin_ref());
    let run = section(&mut t, p, "run").and_then(|s| read_run(s, p));
    let hardware = match section(&mut t, p, "hardware") {
        Some(Some(s)) => read_hardware(s, p, catalog).map(Some),
        Some(None) => Some(None),
        None => None,
    };
    let model = match section(&mut t, p, "model") {
        Some(Some(s)) => read_model(s, p, catalog).map(Some),
        Some(None) => Some(None),
        None => None,
    };
    let workload = match section(&mut t, p, "workload") {
        Some(Some(s)) => read_workload(s, p, &source.base_dir),
        Some(None) => {
            t.missing(
                p,
                "workload",
                "add a [workload] section with requests, prompt_tokens and output_tokens",
            );
            None
        }
        None => None,
    };
    let engine = match section(&mut t, p, "engine") {
        Some(Some(s)) => read_engine(s, p, hardware.as_ref().and_then(Option::as_ref)),
        Some(None) => {
            t.missing(
                p,
                "engine",
                "add an [engine] section with at least kv_capacity_tokens",
            );
            None
        }
        None => None,
    };
    let client = match section(&mut t, p, "client") {
        Some(Some(s)) => read_client(s, p),
        Some(None) => {
            t.missing(
                p,
                "client",
                "add a [client] section, e.g. mode = \"closed\" and concurrency = 150",
            );
            None
        }
        None => None,
    };
    t.finish(p, ROOT_KEYS);
    let (hardware, model) = (hardware?, model?);
    let (mut engine, memory, step) = finish_engine(engine?, hardware.as_ref(), model.as_ref(), p)?;
    let workload = workload?;
    engine.step_time = finish_step_time(
        step,
        hardware.as_ref(),
        model.as_ref(),
        memory.as_ref(),
        &workload,
        p,
    )?;
    // SGLang refuses prompts of max_req_len − 5 tokens or more (`managers/scheduler.py`). If
    // every prompt would be refused there is nothing to simulate: say so before running. (When
    // only some are, the run refuses and counts them, as SGLang does.)
    let max_req_len = model
        .as_ref()
        .and_then(|m| m.context_len)
        .map_or(engine.kv_capacity_tokens - 1, |c| {
            (c - 1).min(engine.kv_capacity_tokens - 1)
        });
    let max_input = max_req_len.saturating_sub(5);
    let smallest = u64::from(workload.prompt_tokens.smallest());
    if smallest >= max_input {
        p.push(
            "workload.prompt_tokens",
            &origin_of(root, &["workload", "prompt_tokens"]),
            format!(
                "every prompt has at least {smallest} tokens, but SGLang refuses prompts of {max_input} tokens or more \
                 (max_req_len − 5, with max_req_len = min(context_len − 1, KV pool − 1) = {max_req_len}): every request would be refused"
            ),
            None,
            Some("shorten the prompts, or raise engine.kv_capacity_tokens (or the memory that derives it)".into()),
        );
        return None;
    }
    Some(Scenario {
        name: name?,
        description: description?,
        seed: seed?.unwrap_or(DEFAULT_SEED),
        run: run?,
        hardware,
        model,
        engine,
        workload,
        client: client?,
        memory,
    })
}

/// `Some(Some(table))`, `Some(None)` if absent, `None` after a problem.
fn section<'a>(t: &mut Tbl<'a>, p: &mut Problems, key: &str) -> Option<Option<Tbl<'a>>> {
    get_table(t, p, key).ok()
}

fn read_run(s: Option<Tbl>, p: &mut Problems) -> Option<RunSpec> {
    let empty = Table::default();
    let mut t = s.unwrap_or_else(|| Tbl::new("run", &empty, Origin::Unknown));
    let max_sim = ok(get_f64(
        &mut t,
        p,
        "max_sim_s",
        F::Within(1e-9, MAX_SIM_S),
        "seconds of simulated time, greater than 0 and at most one year",
    ));
    let window = ok(get_f64(
        &mut t,
        p,
        "window_s",
        F::Within(1e-3, MAX_SIM_S),
        "the client's window in seconds, e.g. 60",
    ));
    let interval = ok(get_f64(
        &mut t,
        p,
        "timeseries_interval_s",
        F::Within(1e-3, MAX_SIM_S),
        "seconds between time-series points, e.g. 1",
    ));
    let max_events = ok(get_u64(
        &mut t,
        p,
        "max_events",
        1,
        1_000_000_000_000,
        "a bound on scheduler batches (prefill batches + decode steps), e.g. 2000000000",
    ));
    let observe = read_observe(&mut t, p);
    t.finish(
        p,
        &[
            "max_sim_s",
            "observe_at_s",
            "window_s",
            "timeseries_interval_s",
            "max_events",
        ],
    );
    Some(RunSpec {
        max_sim: max_sim?.map(secs),
        observe_at: observe?,
        window: secs(window?.unwrap_or(DEFAULT_WINDOW_S)),
        timeseries_interval: secs(interval?.unwrap_or(DEFAULT_TIMESERIES_INTERVAL_S)),
        max_events: max_events?.unwrap_or(DEFAULT_MAX_EVENTS),
    })
}

fn read_observe(t: &mut Tbl, p: &mut Problems) -> Option<Vec<SimTime>> {
    let path = t.key_path("observe_at_s");
    let Some(node) = t.get("observe_at_s") else {
        return Some(Vec::new());
    };
    let Value::Array(items) = &node.value else {
        p.bad_value(
            &path,
            node,
            format!(
                "expected an array of seconds, found {}",
                node.value.type_name()
            ),
            "e.g. observe_at_s = [300, 600, 900]",
        );
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    let mut fine = true;
    for (i, item) in items.iter().enumerate() {
        let ipath = format!("{path}[{i}]");
        match node_f64(p, &ipath, item).and_then(|x| {
            check_f64(
                p,
                &ipath,
                item,
                x,
                F::Within(0.0, MAX_SIM_S),
                "a time in seconds, from 0 to one year",
            )
        }) {
            Ok(x) => out.push(SimTime::from_secs_f64(x).expect("invariant: bounded")),
            Err(Bad) => fine = false,
        }
    }
    out.sort();
    out.dedup();
    fine.then_some(out)
}

fn read_hardware(mut t: Tbl, p: &mut Problems, catalog: &Catalog) -> Option<HardwareSpec> {
    let gpu_path = t.key_path("gpu");
    let gpu_node = t.table.get("gpu");
    let gpu = ok(get_str(&mut t, p, "gpu"));
    let memory = ok(get_u64(
        &mut t,
        p,
        "memory_mib",
        1,
        16 * 1024 * 1024,
        "GPU memory in MiB as nvidia-smi reports it, e.g. 97887",
    ));
    let pre = ok(get_f64(
        &mut t,
        p,
        "memory_before_weights_gib",
        F::Within(0.001, 16384.0),
        "free GiB per GPU before the weights load (SGLang's pre-load measurement), e.g. 93.6",
    ));
    let num_gpus = ok(get_u64(
        &mut t,
        p,
        "num_gpus",
        1,
        4096,
        "number of GPUs, e.g. 8",
    ));
    let tp = ok(get_u64(
        &mut t,
        p,
        "tensor_parallel",
        1,
        4096,
        "tensor-parallel size, e.g. 8",
    ));
    t.finish(p, HARDWARE_KEYS);
    let gpu = gpu?;
    let gpu_entry = match &gpu {
        None => None,
        Some(name) => match catalog.gpu(name) {
            Some(g) => Some(g.clone()),
            None => {
                let node = gpu_node.expect("invariant: gpu was read");
                let hint = match catalog.suggest_gpu(name) {
                    Some(s) => format!("did you mean \"{s}\"? `servesim catalog` lists the GPUs; or give hardware.memory_mib"),
                    None => "`servesim catalog` lists the GPUs; or give hardware.memory_mib".to_string(),
                };
                p.bad_value(&gpu_path, node, "is not in the catalog", &hint);
                return None;
            }
        },
    };
    let (num_gpus, tp) = (num_gpus?, tp?);
    let tp = tp.unwrap_or(1) as u32;
    let num_gpus = num_gpus.map_or(tp, |n| n as u32);
    if num_gpus % tp != 0 {
        p.push(
            "hardware.tensor_parallel",
            &t.origin,
            format!("tensor_parallel = {tp} does not divide num_gpus = {num_gpus}"),
            None,
            Some("each server uses tensor_parallel GPUs; num_gpus must be a multiple of it".into()),
        );
        return None;
    }
    Some(HardwareSpec {
        gpu,
        gpu_entry,
        memory_mib: memory?,
        memory_before_weights_gib: pre?,
        num_gpus,
        tensor_parallel: tp,
    })
}

const HARDWARE_KEYS: &[&str] = &[
    "gpu",
    "memory_mib",
    "memory_before_weights_gib",
    "num_gpus",
    "tensor_parallel",
];

fn read_model(mut t: Tbl, p: &mut Problems, catalog: &Catalog) -> Option<ModelSpec> {
    let name_path = t.key_path("name");
    let name_node = t.table.get("name");
    let name = ok(get_str(&mut t, p, "name"));
    let kv = ok(get_u64(
        &mut t,
        p,
        "kv_bytes_per_token",
        1,
        1 << 30,
        "bytes of KV cache per token per GPU, e.g. 70272",
    ));
    let w = ok(get_f64(
        &mut t,
        p,
        "weight_gib_per_gpu",
        F::Within(0.0, 1e6),
        "GiB of weights resident on each GPU, e.g. 72.3",
    ));
    let ctx = ok(get_u64(
        &mut t,
        p,
        "context_len",
        2,
        1 << 31,
        "the model's context length in tokens, e.g. 262144",
    ));
    t.finish(
        p,
        &[
            "name",
            "kv_bytes_per_token",
            "weight_gib_per_gpu",
            "context_len",
        ],
    );
    let name = name?;
    let entry = match &name {
        None => None,
        Some(n) => match catalog.model(n) {
            Some(m) => Some(m.clone()),
            None => {
                let node = name_node.expect("invariant: name was read");
                let hint = match catalog.suggest_model(n) {
                    Some(s) => format!("did you mean \"{s}\"? `servesim catalog` lists the models; or give kv_bytes_per_token and weight_gib_per_gpu"),
                    None => "`servesim catalog` lists the models; or give kv_bytes_per_token and weight_gib_per_gpu".to_string(),
                };
                p.bad_value(&name_path, node, "is not in the catalog", &hint);
                return None;
            }
        },
    };
    let ctx = ctx?.or(entry.as_ref().map(|e| u64::from(e.context_len_tokens)));
    Some(ModelSpec {
        name,
        entry,
        kv_bytes_per_token: kv?,
        weight_gib_per_gpu: w?,
        context_len: ctx,
    })
}

const ENGINE_KEYS: &[&str] = &[
    "kind",
    "kv_capacity_tokens",
    "mem_fraction_static",
    "kv_cache_dtype",
    "observed_free_gib",
    "observed_free_at_fraction",
    "page_size",
    "max_running_requests",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "schedule_policy",
    "decode_log_interval",
    "init_new_token_ratio",
    "min_new_token_ratio_factor",
    "new_token_ratio_decay_steps",
    "clip_max_new_tokens",
    "cuda_graph_max_bs",
    "gpu_memory_utilization",
    "block_size",
    "activation_peak_gib",
    "non_torch_gib",
    "cuda_graph_gib",
    "step_time",
];

/// The engine as read, before the KV budget and the step-time model are known.
struct EngineDraft {
    spec: EngineSpec,
    step: StepTimeDraft,
    kv_given: Option<u64>,
    max_running_given: Option<u64>,
    keys: derive::EngineMemoryKeys,
    origin: Origin,
}

fn read_engine(
    mut t: Tbl,
    p: &mut Problems,
    hardware: Option<&HardwareSpec>,
) -> Option<EngineDraft> {
    let kind = ok(get_choice(
        &mut t,
        p,
        "kind",
        &[("sglang", EngineKind::Sglang), ("vllm", EngineKind::Vllm)],
    ));
    let page = ok(get_u64(
        &mut t,
        p,
        "page_size",
        1,
        4096,
        "KV page size in tokens: 1 on most GPUs, 64 for MLA models on B200",
    ));
    let kv = ok(get_u64(
        &mut t,
        p,
        "kv_capacity_tokens",
        1,
        MAX_KV_TOKENS,
        "SGLang's max_total_num_tokens, from its startup log line",
    ));
    let frac = ok(get_f64(
        &mut t,
        p,
        "mem_fraction_static",
        F::Fraction,
        "a fraction of GPU memory, e.g. 0.85",
    ));
    let dtype = ok(get_choice(
        &mut t,
        p,
        "kv_cache_dtype",
        &[
            ("auto", 2u32),
            ("bf16", 2),
            ("fp16", 2),
            ("fp8_e4m3", 1),
            ("fp8_e5m2", 1),
        ],
    ));
    let dtype_name = t.table.get("kv_cache_dtype").and_then(|n| match &n.value {
        Value::Str(s) => Some(s.clone()),
        _ => None,
    });
    let free = ok(get_f64(
        &mut t,
        p,
        "observed_free_gib",
        F::Within(0.0, 16384.0),
        "free GiB per GPU seen with nvidia-smi while serving, e.g. 4.66",
    ));
    let free_at = ok(get_f64(
        &mut t,
        p,
        "observed_free_at_fraction",
        F::Fraction,
        "the mem_fraction_static the free memory was seen at, e.g. 0.85",
    ));
    let mrr = ok(get_u64(
        &mut t,
        p,
        "max_running_requests",
        1,
        1 << 24,
        "a request count, e.g. 4096",
    ));
    let chunk_path = t.key_path("chunked_prefill_size");
    let chunk = match t.get("chunked_prefill_size") {
        None => Some(None),
        Some(n) if matches!(n.value, Value::Int(-1)) => Some(Some(None)),
        Some(n) => node_u64(
            p,
            &chunk_path,
            n,
            1,
            1 << 24,
            "tokens per prefill chunk, e.g. 8192, or -1 to disable chunking",
        )
        .ok()
        .map(|v| Some(Some(v as u32))),
    };
    let mpt = ok(get_u64(
        &mut t,
        p,
        "max_prefill_tokens",
        1,
        1 << 24,
        "tokens per prefill batch, e.g. 16384",
    ));
    let policy = read_policy(&mut t, p);
    let dli = ok(get_u64(
        &mut t,
        p,
        "decode_log_interval",
        1,
        1 << 20,
        "decode steps between Decode log lines, e.g. 40",
    ));
    let init = ok(get_f64(
        &mut t,
        p,
        "init_new_token_ratio",
        F::Fraction,
        "SGLANG_INIT_NEW_TOKEN_RATIO, default 0.7",
    ));
    let minf = ok(get_f64(
        &mut t,
        p,
        "min_new_token_ratio_factor",
        F::Fraction,
        "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR, default 0.14",
    ));
    let decay = ok(get_u64(
        &mut t,
        p,
        "new_token_ratio_decay_steps",
        1,
        1 << 30,
        "SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS, default 600",
    ));
    let clip = ok(get_u64(
        &mut t,
        p,
        "clip_max_new_tokens",
        1,
        u64::from(MAX_TOKENS_PER_REQUEST),
        "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION, default 4096",
    ));
    let graph = ok(get_u64(
        &mut t,
        p,
        "cuda_graph_max_bs",
        0,
        1 << 20,
        "largest decode batch captured as a CUDA graph, e.g. 256",
    ));
    let util = ok(get_f64(
        &mut t,
        p,
        "gpu_memory_utilization",
        F::Fraction,
        "vLLM's --gpu-memory-utilization, e.g. 0.92",
    ));
    let block = ok(get_u64(
        &mut t,
        p,
        "block_size",
        1,
        4096,
        "vLLM's KV block size in tokens, e.g. 16",
    ));
    let gib_hint = "GiB per GPU, from vLLM's startup log";
    let act = ok(get_f64(
        &mut t,
        p,
        "activation_peak_gib",
        F::Within(0.0, 16384.0),
        gib_hint,
    ));
    let nontorch = ok(get_f64(
        &mut t,
        p,
        "non_torch_gib",
        F::Within(0.0, 16384.0),
        gib_hint,
    ));
    let graphs = ok(get_f64(
        &mut t,
        p,
        "cuda_graph_gib",
        F::Within(0.0, 16384.0),
        gib_hint,
    ));
    let step = match get_table(&mut t, p, "step_time") {
        Ok(s) => read_step_time(s, p),
        Err(Bad) => None,
    };
    t.finish(p, ENGINE_KEYS);

    let page = page?.unwrap_or(1);
    let chunk = chunk?;
    // SGLang's memory-dependent defaults (`server_args.py`), when the GPU is known.
    let bucket = hardware.and_then(|h| {
        h.memory_mib
            .or(h.gpu_entry.as_ref().map(|g| g.memory_mib))
            .map(|m| crate::memory::sglang_memory_bucket(m, h.tensor_parallel))
    });
    let chunk = chunk.unwrap_or(Some(bucket.map_or(8192, |b| b.0)));
    if let Some(c) = chunk {
        if u64::from(c) < page {
            p.push(
                &chunk_path,
                &t.origin,
                format!("chunked_prefill_size = {c} is smaller than page_size = {page}"),
                None,
                Some("a chunk must hold at least one page".into()),
            );
            return None;
        }
    }
    let max_prefill = mpt?.unwrap_or(16384) as u32;
    let graph_max_bs = graph?.map_or(bucket.map_or(256, |b| b.1), |g| g as u32);
    let keys = derive::EngineMemoryKeys {
        mem_fraction_static: frac?,
        kv_dtype_bytes: dtype?.unwrap_or(2),
        kv_dtype: dtype_name.unwrap_or_else(|| "auto".to_string()),
        observed_free_gib: free?,
        observed_free_at_fraction: free_at?,
        activation_tokens: u64::from(chunk.unwrap_or(max_prefill)),
        graph_max_bs,
        page_size: page as u32,
        gpu_memory_utilization: util?,
        block_size: block?.map(|b| b as u32),
        activation_peak_gib: act?,
        non_torch_gib: nontorch?,
        cuda_graph_gib: graphs?,
    };
    Some(EngineDraft {
        spec: EngineSpec {
            kind: kind?.unwrap_or(EngineKind::Sglang),
            // Filled in by `finish_engine` once the budget is known.
            kv_capacity_tokens: 0,
            kv_source: KvSource::Given,
            mem_fraction_static: keys.mem_fraction_static,
            page_size: page as u32,
            max_running_requests: 0,
            chunked_prefill_size: chunk,
            max_prefill_tokens: max_prefill,
            schedule_policy: policy?.unwrap_or(SchedulePolicy::Fcfs),
            decode_log_interval: dli?.unwrap_or(40) as u32,
            new_token_ratio: NewTokenRatioSpec {
                init: init?.unwrap_or(0.7),
                min_factor: minf?.unwrap_or(0.14),
                decay_steps: decay?.unwrap_or(600) as u32,
                clip_max_new_tokens: clip?.unwrap_or(4096) as u32,
            },
            cuda_graph_max_bs: graph_max_bs,
            // Replaced by `finish_step_time` once the hardware and model are known.
            step_time: StepTimeSpec::Linear(LinearStepTime {
                decode_base_ns: 1,
                decode_per_seq_ns: 0,
                decode_per_kv_token_ps: 0,
                prefill_base_ns: 1,
                prefill_per_token_ps: 0,
            }),
        },
        step: step?,
        kv_given: kv?,
        max_running_given: mrr?,
        keys,
        origin: t.origin.clone(),
    })
}

/// `engine.schedule_policy`, with a specific word for SGLang's policies servesim does not model.
fn read_policy(t: &mut Tbl, p: &mut Problems) -> Option<Option<SchedulePolicy>> {
    let path = t.key_path("schedule_policy");
    let node = t.table.get("schedule_policy");
    if let Some(Node {
        value: Value::Str(s),
        ..
    }) = node
    {
        let hint = match s.as_str() {
            "lpm" | "dfs-weight" => Some(
                "a cache-aware SGLang policy: without shared prompt prefixes (servesim has none) it orders requests like \"fcfs\"; use \"fcfs\"",
            ),
            "priority" | "hrrn" | "routing-key" | "shortest-prefill-first" => Some(
                "an SGLang policy servesim does not model yet; modelled: \"fcfs\", \"lof\", \"random\"",
            ),
            _ => None,
        };
        if let Some(hint) = hint {
            t.get("schedule_policy");
            p.bad_value(
                &path,
                node.expect("invariant: value present"),
                "is not modelled",
                hint,
            );
            return None;
        }
    }
    ok(get_choice(
        t,
        p,
        "schedule_policy",
        &[
            ("fcfs", SchedulePolicy::Fcfs),
            ("lof", SchedulePolicy::Lof),
            ("random", SchedulePolicy::Random),
        ],
    ))
}

/// Settle the KV budget (given, or derived from memory) and what depends on it.
fn finish_engine(
    d: EngineDraft,
    hardware: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    p: &mut Problems,
) -> Option<(EngineSpec, Option<MemoryModel>, StepTimeDraft)> {
    let EngineDraft {
        mut spec,
        step,
        kv_given,
        max_running_given,
        keys,
        origin,
    } = d;
    let memory = derive::resolve(spec.kind, hardware, model, &keys);
    let kv_path = "engine.kv_capacity_tokens";
    let (kv, source) = match (kv_given, &memory) {
        (Some(kv), _) => (kv, KvSource::Given),
        (None, Ok(m)) => {
            if let MemoryDerivation::Sglang(s) = &m.derivation {
                if s.max_total_num_tokens == 0 {
                    p.push(
                        "engine.mem_fraction_static",
                        &origin,
                        format!(
                            "the weights ({:.1} GiB per GPU) leave no KV cache: the static budget is {:.3} × {:.1} GiB = {:.1} GiB",
                            s.inputs.weight_gib_per_gpu, s.inputs.mem_fraction_static, s.inputs.memory_before_weights_gib, s.static_gib
                        ),
                        None,
                        Some("raise engine.mem_fraction_static, use more GPUs (hardware.tensor_parallel), or a lighter checkpoint".into()),
                    );
                    return None;
                }
            }
            (m.kv_tokens(), KvSource::Derived)
        }
        (None, Err(missing)) => {
            p.push(
                kv_path,
                &origin,
                "is missing and cannot be derived from memory",
                None,
                Some(format!(
                    "give it (SGLang logs it as max_total_num_tokens), or give {} so servesim derives it",
                    missing.0.join(", ")
                )),
            );
            return None;
        }
    };
    let page = u64::from(spec.page_size);
    // SGLang floors the pool to whole pages (`pool_configurator.py`).
    let kv = kv / page * page;
    if kv == 0 {
        p.push(
            kv_path,
            &origin,
            format!("the KV pool holds less than one page of {page} tokens"),
            None,
            Some("raise kv_capacity_tokens or lower page_size".into()),
        );
        return None;
    }
    // `resolve_max_num_reqs` (`mem_cache/kv_cache_configurator.py`): the user's value, or the
    // estimate from the context length, is capped at half the pool.
    let estimated = match model.and_then(|m| m.context_len) {
        Some(ctx) => ((kv as f64 / ctx as f64 * 512.0) as u64).clamp(2048, 4096),
        None => 4096,
    };
    spec.max_running_requests = max_running_given.unwrap_or(estimated).min((kv / 2).max(1)) as u32;
    spec.kv_capacity_tokens = kv;
    spec.kv_source = source;
    if spec.mem_fraction_static.is_none() {
        if let Ok(MemoryModel {
            derivation: MemoryDerivation::Sglang(s),
            ..
        }) = &memory
        {
            spec.mem_fraction_static = Some(s.inputs.mem_fraction_static);
        }
    }
    Some((spec, memory.ok(), step))
}

const LINEAR_KEYS: &[&str] = &[
    "model",
    "decode_base_ms",
    "decode_per_seq_ms",
    "decode_per_kv_token_ns",
    "prefill_base_ms",
    "prefill_per_token_us",
];

const ROOFLINE_KEYS: &[&str] = &[
    "model",
    "bandwidth_efficiency",
    "compute_efficiency",
    "decode_overhead_ms",
    "prefill_overhead_ms",
    "calibration",
];

/// `[engine.step_time]` as read, before the hardware and model are known.
enum StepTimeDraft {
    Linear(LinearStepTime),
    Roofline {
        settings: crate::cost::roofline::RooflineSettings,
        /// `(gen_tok_per_s, running, kv_tokens)`.
        calibration: Option<(f64, u64, Option<u64>)>,
        origin: Origin,
    },
}

fn read_step_time(s: Option<Tbl>, p: &mut Problems) -> Option<StepTimeDraft> {
    let empty = Table::default();
    let mut t = s.unwrap_or_else(|| Tbl::new("engine.step_time", &empty, Origin::Unknown));
    let model = ok(get_choice(
        &mut t,
        p,
        "model",
        &[("linear", false), ("roofline", true)],
    ))?;
    if model == Some(true) {
        return read_roofline(t, p);
    }
    let hint = "a non-negative number";
    let db = ok(get_f64(
        &mut t,
        p,
        "decode_base_ms",
        F::Within(0.0, 1e6),
        hint,
    ));
    let ds = ok(get_f64(
        &mut t,
        p,
        "decode_per_seq_ms",
        F::Within(0.0, 1e6),
        hint,
    ));
    let dk = ok(get_f64(
        &mut t,
        p,
        "decode_per_kv_token_ns",
        F::Within(0.0, 1e9),
        hint,
    ));
    let pb = ok(get_f64(
        &mut t,
        p,
        "prefill_base_ms",
        F::Within(0.0, 1e6),
        hint,
    ));
    let pt = ok(get_f64(
        &mut t,
        p,
        "prefill_per_token_us",
        F::Within(0.0, 1e9),
        hint,
    ));
    t.finish(p, LINEAR_KEYS);
    let ns = |ms: f64| (ms * 1e6).round() as u64;
    Some(StepTimeDraft::Linear(LinearStepTime {
        decode_base_ns: ns(db?.unwrap_or(35.0)),
        decode_per_seq_ns: ns(ds?.unwrap_or(0.3)),
        decode_per_kv_token_ps: (dk?.unwrap_or(0.0) * 1e3).round() as u64,
        prefill_base_ns: ns(pb?.unwrap_or(10.0)),
        prefill_per_token_ps: (pt?.unwrap_or(120.0) * 1e6).round() as u64,
    }))
}

fn read_roofline(mut t: Tbl, p: &mut Problems) -> Option<StepTimeDraft> {
    use crate::cost::roofline::RooflineSettings;
    let d = RooflineSettings::default();
    let bw = ok(get_f64(
        &mut t,
        p,
        "bandwidth_efficiency",
        F::Fraction,
        "the fraction of peak memory bandwidth reached, e.g. 0.75",
    ));
    let c = ok(get_f64(
        &mut t,
        p,
        "compute_efficiency",
        F::Fraction,
        "the fraction of peak compute reached, e.g. 0.5",
    ));
    let dov = ok(get_f64(
        &mut t,
        p,
        "decode_overhead_ms",
        F::Within(0.0, 1e6),
        "milliseconds per decode step, e.g. 2",
    ));
    let pov = ok(get_f64(
        &mut t,
        p,
        "prefill_overhead_ms",
        F::Within(0.0, 1e6),
        "milliseconds per prefill batch, e.g. 5",
    ));
    let cal = match get_table(&mut t, p, "calibration") {
        Ok(None) => Some(None),
        Ok(Some(mut ct)) => {
            let g = get_f64(
                &mut ct,
                p,
                "gen_tok_per_s",
                F::Within(1e-6, 1e12),
                "the gen throughput you observed, tok/s, e.g. 850",
            );
            let g = required(
                &ct,
                p,
                "gen_tok_per_s",
                g,
                "calibration needs the observed gen_tok_per_s",
            );
            let r = get_u64(
                &mut ct,
                p,
                "running",
                1,
                1 << 24,
                "the running requests at that moment, e.g. 50",
            );
            let r = required(
                &ct,
                p,
                "running",
                r,
                "calibration needs the running requests",
            );
            let k = ok(get_u64(
                &mut ct,
                p,
                "kv_tokens",
                0,
                1 << 40,
                "KV tokens in use at that moment, e.g. 100000",
            ));
            ct.finish(p, &["gen_tok_per_s", "running", "kv_tokens"]);
            match (g, r, k) {
                (Some(g), Some(r), Some(k)) => Some(Some((g, r, k))),
                _ => None,
            }
        }
        Err(Bad) => None,
    };
    t.finish(p, ROOFLINE_KEYS);
    Some(StepTimeDraft::Roofline {
        settings: RooflineSettings {
            bandwidth_efficiency: bw?.unwrap_or(d.bandwidth_efficiency),
            compute_efficiency: c?.unwrap_or(d.compute_efficiency),
            decode_overhead_ms: dov?.unwrap_or(d.decode_overhead_ms),
            prefill_overhead_ms: pov?.unwrap_or(d.prefill_overhead_ms),
        },
        calibration: cal?,
        origin: t.origin.clone(),
    })
}

/// Turn the step-time draft into the model: the roofline needs the catalog's GPU and model.
fn finish_step_time(
    draft: StepTimeDraft,
    hardware: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    memory: Option<&MemoryModel>,
    workload: &WorkloadSpec,
    p: &mut Problems,
) -> Option<StepTimeSpec> {
    let (settings, calibration, origin) = match draft {
        StepTimeDraft::Linear(l) => return Some(StepTimeSpec::Linear(l)),
        StepTimeDraft::Roofline {
            settings,
            calibration,
            origin,
        } => (settings, calibration, origin),
    };
    let gpu = hardware.and_then(|h| h.gpu_entry.as_ref());
    let entry = model.and_then(|m| m.entry.as_ref());
    let (Some(gpu), Some(entry)) = (gpu, entry) else {
        p.push(
            "engine.step_time.model",
            &origin,
            "\"roofline\" predicts step times from the catalog's GPU and model, and this scenario names no catalog GPU or model",
            Some("\"roofline\"".into()),
            Some("set hardware.gpu and model.name (see `servesim catalog`), or use model = \"linear\"".into()),
        );
        return None;
    };
    let tp = hardware.map_or(1, |h| h.tensor_parallel);
    let kv_bytes = match (
        memory.map(|m| &m.derivation),
        model.and_then(|m| m.kv_bytes_per_token),
    ) {
        (Some(MemoryDerivation::Sglang(s)), _) => s.inputs.kv_bytes_per_token,
        (Some(MemoryDerivation::Vllm(v)), _) => v.inputs.kv_bytes_per_token,
        (None, Some(b)) => b,
        (None, None) => entry.kv_bytes_per_token(tp, 2),
    };
    let mut r = crate::cost::roofline::Roofline::new(gpu, entry, tp, kv_bytes, settings);
    if let Some((g, running, kv)) = calibration {
        // Without the KV in use, assume each running request is halfway through its response.
        let kv = kv.unwrap_or_else(|| {
            let per_request =
                workload.prompt_tokens.nominal_mean() + workload.output_tokens.nominal_mean() / 2.0;
            (running as f64 * per_request).round() as u64
        });
        r = r.calibrated(g, running, kv);
    }
    Some(StepTimeSpec::Roofline(Box::new(r)))
}

fn read_workload(mut t: Tbl, p: &mut Problems, base_dir: &Path) -> Option<WorkloadSpec> {
    let requests = get_u64(
        &mut t,
        p,
        "requests",
        1,
        MAX_REQUESTS,
        "the number of requests the client sends, from 1 to 10^9",
    );
    let requests = required(
        &t,
        p,
        "requests",
        requests,
        "add requests = N, e.g. requests = 20000",
    );
    let prompt = read_dist_key(&mut t, p, "prompt_tokens", base_dir);
    let output = read_dist_key(&mut t, p, "output_tokens", base_dir);
    let max_new = ok(get_u64(
        &mut t,
        p,
        "max_new_tokens",
        1,
        u64::from(MAX_TOKENS_PER_REQUEST),
        "the max_tokens the client asks for, e.g. 16384",
    ));
    let ignore_eos = ok(get_bool(&mut t, p, "ignore_eos"));
    t.finish(
        p,
        &[
            "requests",
            "prompt_tokens",
            "output_tokens",
            "max_new_tokens",
            "ignore_eos",
        ],
    );
    Some(WorkloadSpec {
        requests: requests?,
        prompt_tokens: prompt?,
        output_tokens: output?,
        max_new_tokens: max_new?.map(|v| v as u32),
        ignore_eos: ignore_eos?.unwrap_or(false),
    })
}

const DIST_NAMES: &[&str] = &[
    "constant",
    "uniform",
    "normal",
    "lognormal",
    "gamma",
    "exponential",
    "empirical",
];

fn dist_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "constant" => &["dist", "value", "min", "max"],
        "uniform" => &["dist", "min", "max"],
        "normal" => &["dist", "mean", "std", "min", "max"],
        "lognormal" | "gamma" => &["dist", "mean", "cv", "min", "max"],
        "exponential" => &["dist", "mean", "min", "max"],
        _ => &["dist", "values", "file", "column", "min", "max"],
    }
}

fn read_dist_key(t: &mut Tbl, p: &mut Problems, key: &str, base_dir: &Path) -> Option<LengthDist> {
    let hint = format!("e.g. {key} = {{ dist = \"lognormal\", mean = 300, cv = 0.5 }}");
    let d = match get_table(t, p, key) {
        Ok(Some(d)) => d,
        Ok(None) => {
            t.missing(p, key, &hint);
            return None;
        }
        Err(Bad) => return None,
    };
    read_dist(d, p, base_dir)
}

fn read_dist(mut t: Tbl, p: &mut Problems, base_dir: &Path) -> Option<LengthDist> {
    let kind = get_choice(
        &mut t,
        p,
        "dist",
        &DIST_NAMES.iter().map(|n| (*n, *n)).collect::<Vec<_>>(),
    );
    let kind = match kind {
        Ok(Some(k)) => k,
        Ok(None) => {
            t.missing(
                p,
                "dist",
                &format!(
                    "name the distribution: dist = one of {}",
                    quoted(DIST_NAMES)
                ),
            );
            for (k, _, _) in &t.table.entries {
                t.used.push(k.clone());
            }
            return None;
        }
        Err(Bad) => {
            for (k, _, _) in &t.table.entries {
                t.used.push(k.clone());
            }
            return None;
        }
    };
    let tok_hint = "a token count from 1 to 10^7";
    let min = ok(get_u64(
        &mut t,
        p,
        "min",
        1,
        u64::from(MAX_TOKENS_PER_REQUEST),
        tok_hint,
    ));
    let max = ok(get_u64(
        &mut t,
        p,
        "max",
        1,
        u64::from(MAX_TOKENS_PER_REQUEST),
        tok_hint,
    ));
    let pos = |t: &mut Tbl, p: &mut Problems, key: &str, hint: &str| -> Option<f64> {
        let g = get_f64(t, p, key, F::Positive, hint);
        required(t, p, key, g, &format!("{kind} needs {key}"))
    };
    let shape = match kind {
        "constant" => {
            let v = get_f64(
                &mut t,
                p,
                "value",
                F::Within(1.0, f64::from(MAX_TOKENS_PER_REQUEST)),
                tok_hint,
            );
            required(&t, p, "value", v, "constant needs value, e.g. value = 1024")
                .map(|value| Shape::Constant { value })
        }
        "uniform" => {
            if !t.has("min") || !t.has("max") {
                t.missing(p, if t.has("min") { "max" } else { "min" }, "uniform needs both min and max, e.g. { dist = \"uniform\", min = 1, max = 1024 }");
                None
            } else {
                Some(Shape::Uniform)
            }
        }
        "normal" => {
            let mean = ok(get_f64(
                &mut t,
                p,
                "mean",
                F::Positive,
                "the mean in tokens",
            ));
            let std = pos(
                &mut t,
                p,
                "std",
                "the standard deviation in tokens; for a fixed length use dist = \"constant\"",
            );
            let mean = mean.and_then(|m| {
                if m.is_none() {
                    t.missing(p, "mean", "normal needs mean");
                }
                m
            });
            match (mean, std) {
                (Some(mean), Some(std)) => Some(Shape::Normal { mean, std }),
                _ => None,
            }
        }
        "lognormal" | "gamma" => {
            let mean = pos(&mut t, p, "mean", "the mean in tokens");
            let cv = get_f64(&mut t, p, "cv", F::Within(1e-6, 100.0), "the coefficient of variation (std / mean), > 0; for a fixed length use dist = \"constant\"");
            let cv = required(
                &t,
                p,
                "cv",
                cv,
                &format!("{kind} needs cv (std / mean), e.g. cv = 0.5"),
            );
            match (mean, cv) {
                (Some(mean), Some(cv)) if kind == "lognormal" => {
                    Some(Shape::LogNormal { mean, cv })
                }
                (Some(mean), Some(cv)) => Some(Shape::Gamma { mean, cv }),
                _ => None,
            }
        }
        "exponential" => {
            pos(&mut t, p, "mean", "the mean in tokens").map(|mean| Shape::Exponential { mean })
        }
        _ => read_empirical(&mut t, p, base_dir).map(|values| Shape::Empirical { values }),
    };
    t.finish(p, dist_keys(kind));
    let (min, max) = (min?, max?);
    let lo = min.unwrap_or(1) as u32;
    let hi = max.map_or(MAX_TOKENS_PER_REQUEST, |m| m as u32);
    if lo > hi {
        p.push(
            &t.key_path("min"),
            &t.origin,
            format!("min = {lo} is greater than max = {hi}"),
            None,
            Some("swap them, or widen the range".into()),
        );
        return None;
    }
    Some(LengthDist {
        shape: shape?,
        min: lo,
        max: hi,
    })
}

fn read_empirical(t: &mut Tbl, p: &mut Problems, base_dir: &Path) -> Option<Arc<[f64]>> {
    let values_path = t.key_path("values");
    let values = t.get("values");
    let file = get_str(t, p, "file");
    let column = get_str(t, p, "column");
    match (values, file, column) {
        (Some(node), Ok(None), Ok(None)) => {
            let Value::Array(items) = &node.value else {
                p.bad_value(
                    &values_path,
                    node,
                    format!(
                        "expected an array of token counts, found {}",
                        node.value.type_name()
                    ),
                    "e.g. values = [120, 4096, 900]",
                );
                return None;
            };
            if items.is_empty() {
                p.bad_value(
                    &values_path,
                    node,
                    "is empty",
                    "give at least one token count",
                );
                return None;
            }
            if items.len() > MAX_EMPIRICAL_VALUES {
                p.bad_value(
                    &values_path,
                    node,
                    format!(
                        "has {} values, more than {MAX_EMPIRICAL_VALUES}",
                        items.len()
                    ),
                    "use file = … and column = … for large samples",
                );
                return None;
            }
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let ip = format!("{values_path}[{i}]");
                let x = node_f64(p, &ip, item).and_then(|x| {
                    check_f64(
                        p,
                        &ip,
                        item,
                        x,
                        F::Positive,
                        "a token count, greater than 0",
                    )
                });
                out.push(x.ok()?);
            }
            Some(out.into())
        }
        (None, Ok(Some(file)), Ok(Some(column))) => {
            let origin = t
                .table
                .get("file")
                .map(|n| n.origin.clone())
                .unwrap_or(Origin::Unknown);
            match read_csv_column(&base_dir.join(&file), &column) {
                Ok(v) => Some(v.into()),
                Err(msg) => {
                    p.push(
                        &t.key_path("file"),
                        &origin,
                        msg.0,
                        Some(format!("{file:?}")),
                        Some(msg.1),
                    );
                    None
                }
            }
        }
        (None, Ok(None), Ok(None)) => {
            t.missing(
                p,
                "values",
                "empirical needs values = [ … ] or file = \"….csv\" with column = \"…\"",
            );
            None
        }
        (Some(_), _, _) => {
            p.push(
                &values_path,
                &t.origin,
                "give either values or file and column, not both",
                None,
                Some("remove one of them".into()),
            );
            None
        }
        (None, Ok(Some(_)), Ok(None)) => {
            t.missing(
                p,
                "column",
                "name the CSV column holding token counts, e.g. column = \"completion_tokens\"",
            );
            None
        }
        (None, Ok(None), Ok(Some(_))) => {
            t.missing(
                p,
                "file",
                "name the CSV file (relative to the scenario), e.g. file = \"lengths.csv\"",
            );
            None
        }
        _ => None,
    }
}

/// The numbers in `column` of a CSV file with a header row. Errors are (message, hint).
fn read_csv_column(path: &Path, column: &str) -> Result<Vec<f64>, (String, String)> {
    let mut rdr = csv::Reader::from_path(path).map_err(|e| {
        (
            format!(
                "cannot read CSV file `{}`: {}",
                path.display(),
                csv_io_reason(&e)
            ),
            "the path is relative to the scenario file's directory".to_string(),
        )
    })?;
    let headers = rdr
        .headers()
        .map_err(|e| {
            (
                format!("cannot read the header row of `{}`: {e}", path.display()),
                "the first row must name the columns".to_string(),
            )
        })?
        .clone();
    let Some(idx) = headers.iter().position(|h| h.trim() == column) else {
        let names: Vec<&str> = headers.iter().collect();
        let hint = match did_you_mean(column, &names) {
            Some(g) => format!("did you mean column \"{g}\"? columns: {}", names.join(", ")),
            None => format!("columns: {}", names.join(", ")),
        };
        return Err((
            format!("`{}` has no column \"{column}\"", path.display()),
            hint,
        ));
    };
    let mut out = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let row = i + 2;
        let rec = rec.map_err(|e| {
            (
                format!("`{}` row {row}: {e}", path.display()),
                "fix the CSV syntax".to_string(),
            )
        })?;
        let cell = rec.get(idx).unwrap_or("").trim();
        if cell.is_empty() {
            continue;
        }
        match cell.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => out.push(x),
            _ => {
                return Err((
                    format!(
                    "`{}` row {row}, column \"{column}\": \"{cell}\" is not a positive token count",
                    path.display()
                ),
                    "every non-empty cell of the column must be a number greater than 0"
                        .to_string(),
                ))
            }
        }
        if out.len() > MAX_EMPIRICAL_VALUES {
            return Err((
                format!(
                    "`{}` has more than {MAX_EMPIRICAL_VALUES} values",
                    path.display()
                ),
                "subsample the file".to_string(),
            ));
        }
    }
    if out.is_empty() {
        return Err((
            format!(
                "column \"{column}\" of `{}` holds no values",
                path.display()
            ),
            "the column must hold at least one token count".to_string(),
        ));
    }
    Ok(out)
}

fn csv_io_reason(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) => io.to_string(),
        _ => e.to_string(),
    }
}

const CLIENT_KEYS: &[&str] = &[
    "mode",
    "concurrency",
    "rate_per_s",
    "burstiness",
    "think_time_s",
];

fn read_client(mut t: Tbl, p: &mut Problems) -> Option<ClientSpec> {
    let mode = ok(get_choice(
        &mut t,
        p,
        "mode",
        &[
            ("closed", "closed"),
            ("poisson", "poisson"),
            ("gamma", "gamma"),
        ],
    ))?;
    let mode = mode.unwrap_or("closed");
    let conc = ok(get_u64(
        &mut t,
        p,
        "concurrency",
        1,
        MAX_CONCURRENCY,
        "the client's concurrency limit (an asyncio semaphore), e.g. 150",
    ));
    let rate = ok(get_f64(
        &mut t,
        p,
        "rate_per_s",
        F::Within(1e-9, 1e9),
        "requests per second, greater than 0",
    ));
    let burst = ok(get_f64(
        &mut t,
        p,
        "burstiness",
        F::Within(1e-3, 1e3),
        "gamma shape: 1 = Poisson, < 1 burstier, > 1 more regular",
    ));
    let think = ok(get_f64(
        &mut t,
        p,
        "think_time_s",
        F::Within(0.0, MAX_SIM_S),
        "seconds between a completion and the slot's next send, ≥ 0",
    ));
    let (conc, rate, burst, think) = (conc?, rate?, burst?, think?);
    let mut fine = true;
    let mut not_here = |t: &Tbl, p: &mut Problems, key: &str, present: bool, why: &str| {
        if present {
            let node = t.table.get(key).expect("invariant: key present");
            p.bad_value(
                &t.key_path(key),
                node,
                format!("does not apply to mode = \"{mode}\""),
                why,
            );
            fine = false;
        }
    };
    match mode {
        "closed" => {
            not_here(&t, p, "rate_per_s", rate.is_some(), "rate_per_s is for open-loop modes (\"poisson\", \"gamma\"); remove it or change client.mode");
            not_here(
                &t,
                p,
                "burstiness",
                burst.is_some(),
                "burstiness is for mode = \"gamma\"",
            );
        }
        "poisson" => {
            not_here(
                &t,
                p,
                "burstiness",
                burst.is_some(),
                "burstiness is for mode = \"gamma\"; poisson is gamma with burstiness 1",
            );
            not_here(
                &t,
                p,
                "think_time_s",
                think.is_some(),
                "think time is for mode = \"closed\"",
            );
        }
        _ => not_here(
            &t,
            p,
            "think_time_s",
            think.is_some(),
            "think time is for mode = \"closed\"",
        ),
    }
    let spec = match mode {
        "closed" => {
            let Some(c) = conc else {
                t.missing(
                    p,
                    "concurrency",
                    "a closed-loop client needs its concurrency limit, e.g. concurrency = 150",
                );
                t.finish(p, CLIENT_KEYS);
                return None;
            };
            ClientSpec::Closed {
                concurrency: c as u32,
                think_time: secs(think.unwrap_or(0.0)),
            }
        }
        open => {
            let Some(r) = rate else {
                t.missing(
                    p,
                    "rate_per_s",
                    "an open-loop client needs rate_per_s, e.g. rate_per_s = 2.0",
                );
                t.finish(p, CLIENT_KEYS);
                return None;
            };
            let concurrency = conc.map(|c| c as u32);
            if open == "poisson" {
                ClientSpec::Poisson {
                    rate_per_s: r,
                    concurrency,
                }
            } else {
                ClientSpec::Gamma {
                    rate_per_s: r,
                    burstiness: burst.unwrap_or(1.0),
                    concurrency,
                }
            }
        }
    };
    t.finish(p, CLIENT_KEYS);
    fine.then_some(spec)
}
