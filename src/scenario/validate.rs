//! The validated layer: the [`super::tree`] read against [`super::schema`] into a [`Scenario`],
//! every problem collected with its key path, position, bad value and hint.
//!
//! Two passes. The walk ([`Reader::entries`]) checks every value against its key's declaration
//! (type, range, choices), reports unknown keys with a "did you mean", then ([`Reader::presence`])
//! keys given for the other engine or mode and required keys that are missing. The build
//! ([`build`]) assembles the scenario in dependency order — catalog, hardware, model, workload,
//! client, then the memory derivation, the KV budget, the step-time model and the engine — with
//! the checks that span several keys. A value with a problem is never used, so one mistake is
//! reported once.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::{Location, Problem, ScenarioError};
use super::schema::{self, DefaultValue, Key, Ty, When, DISTS, DIST_PARAMS, KEYS, NOT_MODELLED};
use super::tree::{self, Node, Origin, SetError, Table, Value};
use super::*;
use crate::catalog::Catalog;
use crate::cost::roofline::{Roofline, RooflineSettings};
use crate::memory::sglang_memory_bucket;
use crate::workload::dist::MAX_TOKENS_PER_REQUEST;
use crate::workload::dist::{read_csv_column, CsvError, Shape, MAX_EMPIRICAL_VALUES};

pub use super::schema::MAX_KV_TOKENS;

/// A problem was recorded: the value or section it concerns cannot be used.
struct Bad;

/// A value that passed its key's checks.
#[derive(Clone)]
enum Val {
    Int(u64),
    Num(f64),
    Str(String),
    Bool(bool),
    Nums(Vec<f64>),
    /// `-1` of a [`Ty::IntegerOrOff`] key.
    Off,
    Table,
    Dist(LengthDist),
}

/// A key given in the scenario: where, the value as written, and the checked value (`None`
/// after a problem).
struct Slot {
    origin: Origin,
    shown: String,
    val: Option<Val>,
}

struct Reader<'s> {
    source: &'s Source,
    problems: Vec<Problem>,
    slots: HashMap<String, Slot>,
}

/// Reading a checked value as a Rust type.
trait FromVal: Sized {
    fn from_val(v: &Val) -> Option<Self>;
}

macro_rules! from_val {
    ($($t:ty: $($p:pat => $e:expr),+;)*) => {
        $(impl FromVal for $t { fn from_val(v: &Val) -> Option<Self> { match v { $($p => Some($e),)+ _ => None } } })*
    };
}
from_val! {
    u64: Val::Int(i) => *i; u32: Val::Int(i) => *i as u32; f64: Val::Num(x) => *x; bool: Val::Bool(b) => *b;
    String: Val::Str(s) => s.clone(); LengthDist: Val::Dist(d) => d.clone(); Vec<f64>: Val::Nums(v) => v.clone();
    Option<u32>: Val::Off => None, Val::Int(i) => Some(*i as u32);
}

fn join(path: &str, key: &str) -> String {
    match path {
        "" => key.to_string(),
        _ => format!("{path}.{key}"),
    }
}

/// The closest known key, if it is close enough to be a typo.
pub fn did_you_mean<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4) && *d < k.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn secs(x: f64) -> SimDuration {
    SimDuration::from_secs_f64(x).expect("invariant: seconds were range-checked")
}

fn param(name: &str) -> &'static Key {
    DIST_PARAMS
        .iter()
        .find(|k| k.path == name)
        .expect("invariant: a declared parameter")
}

impl Reader<'_> {
    fn push(
        &mut self,
        path: &str,
        at: &Origin,
        msg: String,
        value: Option<String>,
        hint: String,
    ) -> Bad {
        self.problems.push(Problem {
            key_path: path.to_string(),
            location: Location::from_origin(at, &self.source.text),
            message: msg,
            value,
            hint: (!hint.is_empty()).then_some(hint),
        });
        Bad
    }

    /// A problem with the value given at `path`.
    fn bad(&mut self, path: &str, msg: impl Into<String>, hint: impl Into<String>) -> Bad {
        let slot = &self.slots[path];
        let (at, shown) = (slot.origin.clone(), Some(slot.shown.clone()));
        self.push(path, &at, msg.into(), shown, hint.into())
    }

    /// A problem about `path` found at the table or key `at` (e.g. two keys that disagree).
    fn fail(
        &mut self,
        path: &str,
        at: &str,
        msg: impl Into<String>,
        hint: impl Into<String>,
    ) -> Bad {
        let at = self.origin(at);
        self.push(path, &at, msg.into(), None, hint.into())
    }

    /// A required key is missing; `why` says which setting needs it.
    fn missing(&mut self, path: &str, key: &Key, why: &str) -> Bad {
        let parent = path.rsplit_once('.').map_or("", |(p, _)| p);
        let place = if parent.is_empty() {
            "at the top level".into()
        } else {
            format!("in [{parent}]")
        };
        let hint = match key.ty {
            Ty::Table => {
                let needs = KEYS
                    .iter()
                    .filter(|k| k.parent() == path && k.required() && matches!(k.when, When::All));
                let needs: Vec<&str> = needs.map(Key::leaf).collect();
                let with = if needs.is_empty() {
                    String::new()
                } else {
                    format!(" with {}", needs.join(", "))
                };
                format!("add the [{path}] section{with}: {}", key.meaning)
            }
            _ => format!(
                "{why}{}, e.g. {} = {}",
                key.meaning,
                key.leaf(),
                key.example
            ),
        };
        self.fail(
            path,
            parent,
            format!("required key is missing {place}"),
            hint,
        )
    }

    fn origin(&self, path: &str) -> Origin {
        self.slots
            .get(path)
            .map_or(Origin::Unknown, |s| s.origin.clone())
    }

    // -----------------------------------------------------------------------------------------
    // The walk.

    /// Check every entry of the table at `path` against `known`, its declared keys.
    fn entries(&mut self, path: &str, table: &Table, known: &[&'static Key]) {
        for (name, key_origin, node) in &table.entries {
            let full = join(path, name);
            if let Some(key) = known.iter().find(|k| k.leaf() == name) {
                self.check(&full, key, node);
                continue;
            }
            let names: Vec<&str> = known.iter().map(|k| k.leaf()).collect();
            let hint = match did_you_mean(name, &names) {
                Some(s) => format!("did you mean `{}`?", join(path, s)),
                None => format!("known keys here: {}", names.join(", ")),
            };
            let what = match path {
                "" => "unknown key at the top level".to_string(),
                _ => format!("unknown key in [{path}]"),
            };
            self.push(&full, key_origin, what, None, hint);
        }
    }

    /// Check the value given at `path` and keep it (with `None` after a problem).
    fn check(&mut self, path: &str, key: &Key, node: &Node) -> Option<Val> {
        let slot = Slot { origin: node.origin.clone(), shown: node.value.render(), val: None };
        self.slots.insert(path.to_string(), slot);
        let val = self.value(path, key, node);
        self.slots.get_mut(path).expect("invariant: inserted above").val = val.clone();
        val
    }

    /// The value of `node` if it is what `key` accepts; otherwise a problem.
    fn value(&mut self, path: &str, key: &Key, node: &Node) -> Option<Val> {
        let v = &node.value;
        let message = match (key.ty, v) {
            (Ty::Text, Value::Str(s)) => return Some(Val::Str(s.clone())),
            (Ty::Bool, Value::Bool(b)) => return Some(Val::Bool(*b)),
            (Ty::IntegerOrOff(..), Value::Int(-1)) => return Some(Val::Off),
            (Ty::Integer(lo, hi) | Ty::IntegerOrOff(lo, hi), _) => match integer(v, lo, hi) {
                Ok(i) => return Some(Val::Int(i)),
                Err(m) => m,
            },
            (Ty::Number(range), _) => {
                match number(v).and_then(|x| range.check(x).map_or(Ok(x), Err)) {
                    Ok(x) => return Some(Val::Num(x)),
                    Err(m) => m,
                }
            }
            (Ty::OneOf(names), Value::Str(s)) if names.contains(&s.as_str()) => {
                return Some(Val::Str(s.clone()))
            }
            (Ty::OneOf(names), Value::Str(s)) => {
                let modelled = NOT_MODELLED
                    .iter()
                    .find(|(p, values, _)| *p == path && values.contains(&s.as_str()));
                let (msg, hint) = match (modelled, did_you_mean(s, names)) {
                    (Some((_, _, hint)), _) => ("is not modelled", hint.to_string()),
                    (None, Some(g)) => (
                        "unknown value",
                        format!(
                            "did you mean \"{g}\"? valid values: {}",
                            schema::quoted(names)
                        ),
                    ),
                    (None, None) => (
                        "unknown value",
                        format!("valid values: {}", schema::quoted(names)),
                    ),
                };
                self.bad(path, msg, hint);
                return None;
            }
            (Ty::Numbers(range), Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match number(&item.value).and_then(|x| range.check(x).map_or(Ok(x), Err)) {
                        Ok(x) => out.push(x),
                        Err(m) => {
                            _ = self.push(
                                &format!("{path}[{i}]"),
                                &item.origin,
                                m,
                                Some(item.value.render()),
                                key.hint(),
                            )
                        }
                    }
                }
                return (out.len() == items.len()).then_some(Val::Nums(out));
            }
            (Ty::Table, Value::Table(t)) => {
                let known: Vec<&Key> = KEYS.iter().filter(|k| k.parent() == path).collect();
                self.entries(path, t, &known);
                return Some(Val::Table);
            }
            (Ty::Dist, Value::Table(t)) => return self.dist(path, t).map(Val::Dist),
            _ => format!("expected {}, found {}", key.ty.expected(), v.type_name()),
        };
        let hint = match key.ty {
            Ty::Text | Ty::OneOf(_) => "put the value in double quotes".into(),
            Ty::Bool => "write true or false, without quotes".into(),
            Ty::Table | Ty::Dist => {
                format!("write it as a [{path}] section or an inline table {{ … }}")
            }
            _ if message.starts_with("must") => key.hint(),
            _ => format!("{}: {}, e.g. {}", key.meaning, key.accepts(), key.example),
        };
        self.bad(path, message, hint);
        None
    }

    /// After the walk: keys given where they do not apply, and required keys that are missing.
    fn presence(&mut self) {
        for key in KEYS {
            let parent = key.parent();
            if !parent.is_empty()
                && !matches!(self.slots.get(parent), Some(Slot { val: Some(_), .. }))
            {
                continue;
            }
            // `Some((setting, its value))` when the key does not apply.
            let conflict = match key.when.condition() {
                None => None,
                Some((setting, allowed)) => match self.setting(setting) {
                    None => continue, // the setting has a problem of its own
                    Some(actual) if allowed.contains(&actual.as_str()) => None,
                    Some(actual) => Some((setting, actual)),
                },
            };
            match (self.slots.get_mut(key.path), conflict) {
                (Some(slot), Some((setting, actual))) => {
                    if slot.val.take().is_none() {
                        continue; // reported already
                    }
                    let shown = (!matches!(key.ty, Ty::Table)).then(|| slot.shown.clone());
                    let (at, label) = (slot.origin.clone(), key.when.label());
                    let msg = format!("is {label}; this scenario's {setting} is \"{actual}\"");
                    self.push(
                        key.path,
                        &at,
                        msg,
                        shown,
                        format!("remove it, or change {setting}"),
                    );
                }
                (None, None) if key.required() => _ = self.missing(key.path, key, ""),
                _ => {}
            }
        }
    }

    /// The value of the choice at `path`, given or default (`None` after a problem).
    fn setting(&self, path: &str) -> Option<String> {
        match (self.slots.get(path), Self::declared(path).default) {
            (
                Some(Slot {
                    val: Some(Val::Str(s)),
                    ..
                }),
                _,
            ) => Some(s.clone()),
            (None, DefaultValue::Word(w)) => Some(w.into()),
            _ => None,
        }
    }

    /// A length distribution: `dist` names it ([`DISTS`]); its parameters are [`DIST_PARAMS`].
    fn dist(&mut self, path: &str, table: &Table) -> Option<LengthDist> {
        let Some(node) = table.get("dist") else {
            let names: Vec<&str> = DISTS.iter().map(|d| d.name).collect();
            let hint = format!(
                "name the distribution: dist = one of {}",
                schema::quoted(&names)
            );
            self.fail(
                &join(path, "dist"),
                path,
                format!("required key is missing in [{path}]"),
                hint,
            );
            return None;
        };
        let Val::Str(name) = self.check(&join(path, "dist"), param("dist"), node)? else {
            unreachable!("invariant: dist is a string")
        };
        let d = DISTS
            .iter()
            .find(|d| d.name == name)
            .expect("invariant: dist names are declared");
        let known: Vec<&Key> = ["dist"]
            .iter()
            .chain(d.required)
            .chain(d.optional)
            .map(|p| param(p))
            .collect();
        self.entries(path, table, &known);
        let absent: Vec<&str> = d
            .required
            .iter()
            .copied()
            .filter(|p| table.get(p).is_none())
            .collect();
        for p in &absent {
            self.missing(&join(path, p), param(p), &format!("{name} needs {p}: "));
        }
        // The parameters given, each checked.
        let mut given = HashMap::new();
        for (p, _, _) in &table.entries {
            if let Some(slot) = self.slots.get(&join(path, p)) {
                given.insert(p.as_str(), slot.val.clone()?);
            }
        }
        if !absent.is_empty() {
            return None;
        }
        let clamp = |p: &str, default| {
            given
                .get(p)
                .map_or(default, |v| u32::from_val(v).expect("invariant: checked"))
        };
        let (min, max) = (clamp("min", 1), clamp("max", MAX_TOKENS_PER_REQUEST));
        let shape = match Shape::new(&name, |p| {
            f64::from_val(&given[p]).expect("invariant: a checked number")
        }) {
            Some(shape) => shape,
            None => Shape::Empirical {
                values: self.empirical(path, &given)?,
            },
        };
        if min > max {
            let msg = format!("min = {min} is greater than max = {max}");
            self.fail(
                &join(path, "min"),
                path,
                msg,
                "swap them, or widen the range",
            );
            return None;
        }
        Some(LengthDist { shape, min, max })
    }

    /// `values = [...]`, or `file` and `column` of a CSV file.
    fn empirical(&mut self, path: &str, given: &HashMap<&str, Val>) -> Option<Arc<[f64]>> {
        let (values_path, file_path) = (join(path, "values"), join(path, "file"));
        let text = |p: &str| given.get(p).and_then(String::from_val);
        match (given.get("values"), text("file"), text("column")) {
            (Some(Val::Nums(v)), None, None) if v.is_empty() => {
                self.bad(&values_path, "is empty", "give at least one token count");
                None
            }
            (Some(Val::Nums(v)), None, None) if v.len() > MAX_EMPIRICAL_VALUES => {
                let msg = format!("has {} values, more than {MAX_EMPIRICAL_VALUES}", v.len());
                self.bad(
                    &values_path,
                    msg,
                    "use file = … and column = … for large samples",
                );
                None
            }
            (Some(Val::Nums(v)), None, None) => Some(v.as_slice().into()),
            (None, Some(file), Some(column)) => {
                match read_csv_column(&self.source.base_dir.join(&file), &column) {
                    Ok(values) => Some(values.into()),
                    Err(e) => {
                        let guess = match &e {
                            CsvError::NoColumn { columns, .. } => did_you_mean(
                                &column,
                                &columns.iter().map(String::as_str).collect::<Vec<_>>(),
                            )
                            .map(|g| format!("did you mean column \"{g}\"? ")),
                            _ => None,
                        };
                        self.bad(
                            &file_path,
                            e.to_string(),
                            guess.unwrap_or_default() + &e.hint(),
                        );
                        None
                    }
                }
            }
            (None, None, None) => {
                let hint = "empirical needs values = [ … ] or file = \"….csv\" with column = \"…\"";
                self.fail(
                    &values_path,
                    path,
                    format!("required key is missing in [{path}]"),
                    hint,
                );
                None
            }
            (Some(_), _, _) => {
                self.fail(
                    &values_path,
                    path,
                    "give either values or file and column, not both",
                    "remove one of them",
                );
                None
            }
            (None, Some(_), None) => {
                self.missing(
                    &join(path, "column"),
                    param("column"),
                    "empirical with a file needs column: ",
                );
                None
            }
            (None, None, Some(_)) => {
                self.missing(
                    &file_path,
                    param("file"),
                    "empirical with a column needs file: ",
                );
                None
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Reading checked values in the build.

    fn declared(path: &str) -> &'static Key {
        schema::key(path).unwrap_or_else(|| panic!("invariant: `{path}` is declared in schema.rs"))
    }

    /// The value given at `path`, if any.
    fn opt<T: FromVal>(&self, path: &str) -> Result<Option<T>, Bad> {
        Self::declared(path);
        match self.slots.get(path).map(|s| &s.val) {
            None => Ok(None),
            Some(None) => Err(Bad),
            Some(Some(v)) => {
                Ok(Some(T::from_val(v).unwrap_or_else(|| {
                    panic!("invariant: `{path}` is read as declared")
                })))
            }
        }
    }

    /// The value given at `path`, or its declared default.
    fn get<T: FromVal>(&self, path: &str) -> Result<T, Bad> {
        if let Some(v) = self.opt(path)? {
            return Ok(v);
        }
        let default = match Self::declared(path).default {
            DefaultValue::Required => return Err(Bad), // reported by `presence`
            DefaultValue::Note(_) => unreachable!("invariant: `{path}` has a literal default"),
            DefaultValue::Int(i) => Val::Int(i),
            DefaultValue::Num(x) => Val::Num(x),
            DefaultValue::Word(w) => Val::Str(w.into()),
            DefaultValue::Flag(b) => Val::Bool(b),
        };
        Ok(T::from_val(&default)
            .unwrap_or_else(|| panic!("invariant: `{path}`'s default has its type")))
    }

    /// Whether the table at `path` was given (a missing required one was already reported).
    fn has(&self, path: &str) -> Result<bool, Bad> {
        match (self.slots.get(path), Self::declared(path).required()) {
            (Some(Slot { val: None, .. }), _) | (None, true) => Err(Bad),
            (given, _) => Ok(given.is_some()),
        }
    }
}

fn integer(v: &Value, lo: u64, hi: u64) -> Result<u64, String> {
    let x = match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 => *f,
        Value::Float(f) if !f.is_finite() => return Err("must be a finite integer".into()),
        Value::Float(_) => return Err("expected an integer, found a fractional number".into()),
        other => return Err(format!("expected an integer, found {}", other.type_name())),
    };
    match v {
        _ if x < lo as f64 => Err(format!("must be at least {lo}")),
        _ if x > hi as f64 => Err(format!("must be at most {hi}")),
        Value::Int(i) => Ok(*i as u64),
        _ => Ok(x as u64),
    }
}

fn number(v: &Value) -> Result<f64, String> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Float(f) if f.is_finite() => Ok(*f),
        Value::Float(_) => Err("must be a finite number".into()),
        other => Err(format!("expected a number, found {}", other.type_name())),
    }
}

// ---------------------------------------------------------------------------------------------

pub(super) fn load(source: &Source, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let mut r = Reader {
        source,
        problems: Vec::new(),
        slots: HashMap::new(),
    };
    let fail = |mut problems: Vec<Problem>| {
        // In file order: problems of the whole file, then by line and column, then overrides.
        problems.sort_by_key(|p| match p.location {
            Location::None => (0, 0, 0),
            Location::Line { line, column } => (1, line, column),
            Location::Set(_) => (2, 0, 0),
        });
        Err(ScenarioError {
            source_name: source.name.clone(),
            problems,
        })
    };
    let mut root = match tree::parse(&source.text) {
        Ok(t) => t,
        Err(errors) => {
            for e in errors {
                let at = e.span.map_or(Origin::Unknown, Origin::File);
                let hint = "see https://toml.io for the syntax; strings need double quotes".into();
                r.push(
                    "",
                    &at,
                    format!("TOML syntax error: {}", e.message),
                    None,
                    hint,
                );
            }
            return fail(r.problems);
        }
    };
    for s in sets {
        let (key, msg, hint) = match tree::apply_set(&mut root, s) {
            Ok(()) => continue,
            Err(SetError::MissingEquals) => (
                "",
                "expected KEY=VALUE".into(),
                "e.g. --set client.concurrency=64".into(),
            ),
            Err(SetError::EmptyKey) => {
                let hint = "write the dotted path of a scenario key, e.g. engine.page_size";
                (
                    "",
                    "the key path is empty or has an empty part".into(),
                    hint.into(),
                )
            }
            Err(SetError::NotATable { prefix, found }) => {
                r.push(
                    &prefix,
                    &Origin::Override(s.clone()),
                    format!("is {found}, so it has no keys below it"),
                    None,
                    format!("set `{prefix}` itself, or check the path"),
                );
                continue;
            }
        };
        r.push(key, &Origin::Override(s.clone()), msg, None, hint);
    }
    let top: Vec<&Key> = KEYS.iter().filter(|k| k.parent().is_empty()).collect();
    r.entries("", &root, &top);
    r.presence();
    match build(&mut r) {
        Ok(s) if r.problems.is_empty() => Ok(s),
        _ => {
            debug_assert!(
                !r.problems.is_empty(),
                "invariant: a failed build recorded a problem"
            );
            if r.problems.is_empty() {
                r.push(
                    "",
                    &Origin::Unknown,
                    "invalid scenario".into(),
                    None,
                    String::new(),
                );
            }
            fail(r.problems)
        }
    }
}

/// Assemble the scenario: the independent parts first, each on its own so that every problem
/// is found, then the parts that depend on them.
fn build(v: &mut Reader) -> Result<Scenario, Bad> {
    // The built-in catalog, extended by the scenario's `catalog = "file.toml"` if it can be read.
    let user_catalog = match v.opt::<String>("catalog") {
        Ok(Some(file)) => Catalog::with_user_file(&v.source.base_dir.join(file)).map_err(|e| {
            let hint = "a TOML file of [[gpu]] and [[model]] entries, relative to the scenario (see `servesim catalog`)";
            v.bad("catalog", format!("cannot be used: {e}"), hint)
        }),
        _ => Err(Bad),
    };
    let catalog = user_catalog.as_ref().unwrap_or(Catalog::builtin_ref());
    let run = run(v);
    let hardware = hardware(v, catalog);
    let model = model(v, catalog);
    let workload = workload(v);
    let client = client(v);
    let (hardware, model) = (hardware?, model?);
    let (engine, memory) = engine(v, hardware.as_ref(), model.as_ref(), workload.as_ref().ok())?;
    let workload = workload?;
    // SGLang refuses prompts of max_req_len − 5 tokens or more (`managers/scheduler.py`). If
    // every prompt would be refused there is nothing to simulate: say so before running. (When
    // only some are, the run refuses and counts them, as SGLang does.)
    let pool = engine.kv_capacity_tokens;
    let max_req_len = model
        .as_ref()
        .and_then(|m| m.context_len)
        .map_or(pool - 1, |c| (c - 1).min(pool - 1));
    let max_input = max_req_len.saturating_sub(5);
    let smallest = u64::from(workload.prompt_tokens.smallest());
    if smallest >= max_input {
        let msg = format!(
            "every prompt has at least {smallest} tokens, but SGLang refuses prompts of {max_input} tokens or more \
             (max_req_len − 5, with max_req_len = min(context_len − 1, KV pool − 1) = {max_req_len}): every request would be refused"
        );
        let hint = "shorten the prompts, or raise engine.kv_capacity_tokens (or the memory that derives it)";
        return Err(v.fail(
            "workload.prompt_tokens",
            "workload.prompt_tokens",
            msg,
            hint,
        ));
    }
    Ok(Scenario {
        name: v.get("name")?,
        description: v.opt("description")?,
        seed: v.get("seed")?,
        run: run?,
        hardware,
        model,
        engine,
        workload,
        client: client?,
        memory,
    })
}

fn run(v: &Reader) -> Result<RunSpec, Bad> {
    let observe_at_s = v.opt::<Vec<f64>>("run.observe_at_s")?.unwrap_or_default();
    let mut observe_at: Vec<SimTime> = observe_at_s
        .into_iter()
        .map(|s| SimTime::from_secs_f64(s).expect("invariant: range-checked"))
        .collect();
    observe_at.sort();
    observe_at.dedup();
    Ok(RunSpec {
        max_sim: v.opt("run.max_sim_s")?.map(secs),
        observe_at,
        window: secs(v.get("run.window_s")?),
        timeseries_interval: secs(v.get("run.timeseries_interval_s")?),
        max_events: v.get("run.max_events")?,
    })
}

fn hardware(v: &mut Reader, catalog: &Catalog) -> Result<Option<HardwareSpec>, Bad> {
    if !v.has("hardware")? {
        return Ok(None);
    }
    let gpu: Option<String> = v.opt("hardware.gpu")?;
    let gpu_entry = match gpu.as_deref().map(|name| (name, catalog.gpu(name))) {
        None => None,
        Some((_, Some(entry))) => Some(entry.clone()),
        Some((name, None)) => {
            let or = "`servesim catalog` lists the GPUs; or give hardware.memory_mib";
            let hint = catalog
                .suggest_gpu(name)
                .map_or(or.to_string(), |s| format!("did you mean \"{s}\"? {or}"));
            return Err(v.bad("hardware.gpu", "is not in the catalog", hint));
        }
    };
    let tensor_parallel: u32 = v.get("hardware.tensor_parallel")?;
    let num_gpus = v.opt("hardware.num_gpus")?.unwrap_or(tensor_parallel);
    if num_gpus % tensor_parallel != 0 {
        let msg =
            format!("tensor_parallel = {tensor_parallel} does not divide num_gpus = {num_gpus}");
        let hint = "each server uses tensor_parallel GPUs; num_gpus must be a multiple of it";
        return Err(v.fail("hardware.tensor_parallel", "hardware", msg, hint));
    }
    Ok(Some(HardwareSpec {
        gpu,
        gpu_entry,
        memory_mib: v.opt("hardware.memory_mib")?,
        memory_before_weights_gib: v.opt("hardware.memory_before_weights_gib")?,
        num_gpus,
        tensor_parallel,
    }))
}

fn model(v: &mut Reader, catalog: &Catalog) -> Result<Option<ModelSpec>, Bad> {
    if !v.has("model")? {
        return Ok(None);
    }
    let name: Option<String> = v.opt("model.name")?;
    let entry = match name.as_deref().map(|name| (name, catalog.model(name))) {
        None => None,
        Some((_, Some(entry))) => Some(entry.clone()),
        Some((name, None)) => {
            let or = "`servesim catalog` lists the models; or give kv_bytes_per_token and weight_gib_per_gpu";
            let hint = catalog
                .suggest_model(name)
                .map_or(or.to_string(), |s| format!("did you mean \"{s}\"? {or}"));
            return Err(v.bad("model.name", "is not in the catalog", hint));
        }
    };
    let context_len = v
        .opt("model.context_len")?
        .or(entry.as_ref().map(|e| u64::from(e.context_len)));
    Ok(Some(ModelSpec {
        name,
        entry,
        kv_bytes_per_token: v.opt("model.kv_bytes_per_token")?,
        weight_gib_per_gpu: v.opt("model.weight_gib_per_gpu")?,
        context_len,
    }))
}

fn workload(v: &Reader) -> Result<WorkloadSpec, Bad> {
    v.has("workload")?;
    let (prompt_tokens, output_tokens) = (
        v.get("workload.prompt_tokens"),
        v.get("workload.output_tokens"),
    );
    Ok(WorkloadSpec {
        requests: v.get("workload.requests")?,
        prompt_tokens: prompt_tokens?,
        output_tokens: output_tokens?,
        max_new_tokens: v.opt("workload.max_new_tokens")?,
        ignore_eos: v.get("workload.ignore_eos")?,
    })
}

fn client(v: &mut Reader) -> Result<ClientSpec, Bad> {
    v.has("client")?;
    let concurrency: Option<u32> = v.opt("client.concurrency")?;
    Ok(match v.get::<String>("client.mode")?.as_str() {
        "closed" => ClientSpec::Closed {
            concurrency: concurrency.ok_or_else(|| {
                let key = Reader::declared("client.concurrency");
                v.missing("client.concurrency", key, "a closed-loop client needs it: ")
            })?,
            think_time: secs(v.get("client.think_time_s")?),
        },
        "poisson" => ClientSpec::Poisson {
            rate_per_s: v.get("client.rate_per_s")?,
            concurrency,
        },
        _ => ClientSpec::Gamma {
            rate_per_s: v.get("client.rate_per_s")?,
            burstiness: v.get("client.burstiness")?,
            concurrency,
        },
    })
}

/// The engine, in dependency order: the memory derivation, the KV budget, the step-time model.
fn engine(
    v: &mut Reader,
    hardware: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    workload: Option<&WorkloadSpec>,
) -> Result<(EngineSpec, Option<MemoryModel>), Bad> {
    v.has("engine")?;
    let kind = match v.get::<String>("engine.kind")?.as_str() {
        "vllm" => EngineKind::Vllm,
        _ => EngineKind::Sglang,
    };
    let page_size: u32 = v.get("engine.page_size")?;
    // SGLang's memory-dependent defaults (`server_args.py`), when the GPU is known.
    let bucket = hardware.and_then(|h| {
        let mib = h.memory_mib.or(h.gpu_entry.as_ref().map(|g| g.memory_mib));
        mib.map(|m| sglang_memory_bucket(m, h.tensor_parallel))
    });
    let chunk = v
        .opt("engine.chunked_prefill_size")?
        .unwrap_or(Some(bucket.map_or(8192, |b| b.0)));
    if let Some(c) = chunk.filter(|c| *c < page_size) {
        let msg = format!("chunked_prefill_size = {c} is smaller than page_size = {page_size}");
        return Err(v.fail(
            "engine.chunked_prefill_size",
            "engine",
            msg,
            "a chunk must hold at least one page",
        ));
    }
    let max_prefill_tokens: u32 = v.get("engine.max_prefill_tokens")?;
    let cuda_graph_max_bs = v
        .opt("engine.cuda_graph_max_bs")?
        .unwrap_or(bucket.map_or(256, |b| b.1));
    let kv_dtype: String = v.get("engine.kv_cache_dtype")?;
    let keys = derive::EngineMemoryKeys {
        mem_fraction_static: v.opt("engine.mem_fraction_static")?,
        kv_dtype_bytes: if kv_dtype.starts_with("fp8") { 1 } else { 2 },
        kv_dtype,
        observed_free_gib: v.opt("engine.observed_free_gib")?,
        observed_free_at_fraction: v.opt("engine.observed_free_at_fraction")?,
        activation_tokens: u64::from(chunk.unwrap_or(max_prefill_tokens)),
        graph_max_bs: cuda_graph_max_bs,
        page_size,
        gpu_memory_utilization: v.opt("engine.gpu_memory_utilization")?,
        block_size: v.opt("engine.block_size")?,
        activation_peak_gib: v.opt("engine.activation_peak_gib")?,
        non_torch_gib: v.opt("engine.non_torch_gib")?,
        cuda_graph_gib: v.opt("engine.cuda_graph_gib")?,
    };
    // 1. The memory derivation.
    let memory = derive::resolve(kind, hardware, model, &keys);
    // 2. The KV budget: given, or derived.
    let (kv, kv_source) = match (v.opt::<u64>("engine.kv_capacity_tokens")?, &memory) {
        (Some(kv), _) => (kv, KvSource::Given),
        (
            None,
            Ok(MemoryModel {
                derivation: MemoryDerivation::Sglang(s),
                ..
            }),
        ) if s.max_total_num_tokens == 0 => {
            let (i, static_gib) = (&s.inputs, s.static_gib);
            let msg = format!(
                "the weights ({:.1} GiB per GPU) leave no KV cache: the static budget is {:.3} × {:.1} GiB = {static_gib:.1} GiB",
                i.weight_gib_per_gpu, i.mem_fraction_static, i.memory_before_weights_gib
            );
            let hint = "raise engine.mem_fraction_static, use more GPUs (hardware.tensor_parallel), or a lighter checkpoint";
            return Err(v.fail("engine.mem_fraction_static", "engine", msg, hint));
        }
        (None, Ok(m)) => (m.kv_tokens(), KvSource::Derived),
        (None, Err(missing)) => {
            let hint = format!(
                "give it (SGLang logs it as max_total_num_tokens), or give {} so servesim derives it",
                missing.0.join(", ")
            );
            return Err(v.fail(
                "engine.kv_capacity_tokens",
                "engine",
                "is missing and cannot be derived from memory",
                hint,
            ));
        }
    };
    // SGLang floors the pool to whole pages (`pool_configurator.py`).
    let kv = kv / u64::from(page_size) * u64::from(page_size);
    if kv == 0 {
        let msg = format!("the KV pool holds less than one page of {page_size} tokens");
        return Err(v.fail(
            "engine.kv_capacity_tokens",
            "engine",
            msg,
            "raise kv_capacity_tokens or lower page_size",
        ));
    }
    // `resolve_max_num_reqs` (`mem_cache/kv_cache_configurator.py`): the user's value, or the
    // estimate from the context length, is capped at half the pool.
    let estimated = match model.and_then(|m| m.context_len) {
        Some(ctx) => ((kv as f64 / ctx as f64 * 512.0) as u64).clamp(2048, 4096),
        None => 4096,
    };
    let max_running_requests = v
        .opt::<u64>("engine.max_running_requests")?
        .unwrap_or(estimated)
        .min((kv / 2).max(1));
    let memory = memory.ok();
    // 3. The step-time model.
    let step_time = step_time(v, hardware, model, memory.as_ref(), workload)?;
    // 4. The engine.
    let derived_fraction = match &memory {
        Some(MemoryModel {
            derivation: MemoryDerivation::Sglang(s),
            ..
        }) => Some(s.inputs.mem_fraction_static),
        _ => None,
    };
    let spec = EngineSpec {
        kind,
        kv_capacity_tokens: kv,
        kv_source,
        mem_fraction_static: keys.mem_fraction_static.or(derived_fraction),
        page_size,
        max_running_requests: max_running_requests as u32,
        chunked_prefill_size: chunk,
        max_prefill_tokens,
        schedule_policy: match v.get::<String>("engine.schedule_policy")?.as_str() {
            "lof" => SchedulePolicy::Lof,
            "random" => SchedulePolicy::Random,
            _ => SchedulePolicy::Fcfs,
        },
        decode_log_interval: v.get("engine.decode_log_interval")?,
        new_token_ratio: NewTokenRatioSpec {
            init: v.get("engine.init_new_token_ratio")?,
            min_factor: v.get("engine.min_new_token_ratio_factor")?,
            decay_steps: v.get("engine.new_token_ratio_decay_steps")?,
            clip_max_new_tokens: v.get("engine.clip_max_new_tokens")?,
        },
        cuda_graph_max_bs,
        step_time,
    };
    Ok((spec, memory))
}

/// `[engine.step_time]`: linear coefficients, or a roofline from the catalog's GPU and model.
fn step_time(
    v: &mut Reader,
    hardware: Option<&HardwareSpec>,
    model: Option<&ModelSpec>,
    memory: Option<&MemoryModel>,
    workload: Option<&WorkloadSpec>,
) -> Result<StepTimeSpec, Bad> {
    let get = |v: &Reader, key: &str| v.get::<f64>(&format!("engine.step_time.{key}"));
    if v.get::<String>("engine.step_time.model")? == "linear" {
        let (ns, ps) = (
            |ms: f64| (ms * 1e6).round() as u64,
            |x: f64, scale: f64| (x * scale).round() as u64,
        );
        return Ok(StepTimeSpec::Linear(LinearStepTime {
            decode_base_ns: ns(get(v, "decode_base_ms")?),
            decode_per_seq_ns: ns(get(v, "decode_per_seq_ms")?),
            decode_per_kv_token_ps: ps(get(v, "decode_per_kv_token_ns")?, 1e3),
            prefill_base_ns: ns(get(v, "prefill_base_ms")?),
            prefill_per_token_ps: ps(get(v, "prefill_per_token_us")?, 1e6),
        }));
    }
    let settings = RooflineSettings {
        bandwidth_efficiency: get(v, "bandwidth_efficiency")?,
        compute_efficiency: get(v, "compute_efficiency")?,
        decode_overhead_ms: get(v, "decode_overhead_ms")?,
        prefill_overhead_ms: get(v, "prefill_overhead_ms")?,
    };
    let gpu = hardware.and_then(|h| h.gpu_entry.as_ref());
    let (Some(gpu), Some(entry)) = (gpu, model.and_then(|m| m.entry.as_ref())) else {
        let msg = "\"roofline\" predicts step times from the catalog's GPU and model, and this scenario names no catalog GPU or model";
        let hint =
            "set hardware.gpu and model.name (see `servesim catalog`), or use model = \"linear\"";
        let at = v.origin("engine.step_time.model");
        return Err(v.push(
            "engine.step_time.model",
            &at,
            msg.into(),
            Some("\"roofline\"".into()),
            hint.into(),
        ));
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
    let roofline = Roofline::new(gpu, entry, tp, kv_bytes, settings);
    if !v.has("engine.step_time.calibration")? {
        return Ok(StepTimeSpec::Roofline(Box::new(roofline)));
    }
    let gen_tok_per_s = v.get("engine.step_time.calibration.gen_tok_per_s")?;
    let running: u64 = v.get("engine.step_time.calibration.running")?;
    let kv_tokens = match (v.opt("engine.step_time.calibration.kv_tokens")?, workload) {
        (Some(k), _) => k,
        // Without the KV in use, assume each running request is halfway through its response.
        (None, Some(w)) => {
            let per_request = w.prompt_tokens.nominal_mean() + w.output_tokens.nominal_mean() / 2.0;
            (running as f64 * per_request).round() as u64
        }
        (None, None) => return Err(Bad), // the workload has problems of its own
    };
    Ok(StepTimeSpec::Roofline(Box::new(roofline.calibrated(
        gen_tok_per_s,
        running,
        kv_tokens,
    ))))
}
