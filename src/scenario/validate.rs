//! The validated layer: the [`super::tree`] read against [`super::schema`] into a [`Scenario`],
//! every problem collected with its key path, position, bad value and hint.
//!
//! Two passes. The walk ([`Reader::entries`]) checks every value against its key's declaration
//! (type, range, choices) and reports unknown keys with a "did you mean"; then
//! ([`Reader::presence`]) keys given for the other engine or mode, and required keys that are
//! missing. Then `build.rs` assembles the scenario in dependency order from the checked values
//! ([`Reader::get`], [`Reader::opt`]).
//! A value with a problem is never used, so one mistake is reported once.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::{Location, Problem};
use super::schema::{self, DefaultValue, Key, Ty, When, DISTS, DIST_PARAMS, KEYS, NOT_MODELLED};
use super::tree::{self, Node, Origin, SetError, Table, Value};
use crate::diagnostic::did_you_mean;
use super::*;
use crate::workload::dist::MAX_TOKENS_PER_REQUEST;
use crate::workload::dist::{read_csv_column, CsvError, Shape, MAX_EMPIRICAL_VALUES};

pub use super::schema::MAX_KV_TOKENS;

/// A problem was recorded: the value or section it concerns cannot be used.
pub(super) struct Bad;

/// A value that passed its key's checks.
#[derive(Clone)]
pub(super) enum Val {
    Int(u64),
    Num(f64),
    Str(String),
    Bool(bool),
    Nums(Arc<[f64]>),
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

/// One scenario being read: its checked values by key path, and the problems found so far.
pub(super) struct Reader<'s> {
    pub(super) source: &'s Source,
    problems: Vec<Problem>,
    slots: HashMap<String, Slot>,
}

/// Reading a checked value as a Rust type.
pub(super) trait FromVal: Sized {
    fn from_val(v: &Val) -> Option<Self>;
}

macro_rules! from_val {
    ($($t:ty: $($p:pat => $e:expr),+;)*) => {
        $(impl FromVal for $t { fn from_val(v: &Val) -> Option<Self> { match v { $($p => Some($e),)+ _ => None } } })*
    };
}
// Integers read as `u32` are declared with ranges that fit.
from_val! {
    u64: Val::Int(i) => *i;
    u32: Val::Int(i) => *i as u32;
    Option<u32>: Val::Off => None, Val::Int(i) => Some(*i as u32);
    f64: Val::Num(x) => *x;
    bool: Val::Bool(b) => *b;
    String: Val::Str(s) => s.clone();
    Vec<f64>: Val::Nums(v) => v.to_vec();
    Arc<[f64]>: Val::Nums(v) => v.clone();
    LengthDist: Val::Dist(d) => d.clone();
}

fn join(path: &str, key: &str) -> String {
    match path {
        "" => key.to_string(),
        _ => format!("{path}.{key}"),
    }
}

fn param(name: &str) -> &'static Key {
    DIST_PARAMS
        .iter()
        .find(|k| k.path == name)
        .expect("invariant: a declared parameter")
}

impl<'s> Reader<'s> {
    pub(super) fn push(
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
    pub(super) fn bad(
        &mut self,
        path: &str,
        msg: impl Into<String>,
        hint: impl Into<String>,
    ) -> Bad {
        let slot = &self.slots[path];
        let (at, shown) = (slot.origin.clone(), Some(slot.shown.clone()));
        self.push(path, &at, msg.into(), shown, hint.into())
    }

    /// A problem about `path` found at the table or key `at` (e.g. two keys that disagree).
    pub(super) fn fail(
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
    pub(super) fn missing(&mut self, path: &str, key: &Key, why: &str) -> Bad {
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
                format!("add the [{path}] section{with} ({})", key.meaning)
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

    pub(super) fn origin(&self, path: &str) -> Origin {
        self.slots
            .get(path)
            .map_or(Origin::Unknown, |s| s.origin.clone())
    }

    /// Parse the scenario, apply the `--set` overrides and check every value against its
    /// declaration. `Err` with the syntax errors when the text is not TOML.
    pub(super) fn read(source: &'s Source, sets: &[String]) -> Result<Self, Vec<Problem>> {
        let mut r = Reader {
            source,
            problems: Vec::new(),
            slots: HashMap::new(),
        };
        let mut root = match tree::parse(&source.text) {
            Ok(t) => t,
            Err(errors) => {
                for e in errors {
                    let at = e.span.map_or(Origin::Unknown, Origin::File);
                    let msg = format!("TOML syntax error: {}", e.message);
                    let hint = "see https://toml.io for the syntax; strings need double quotes";
                    r.push("", &at, msg, None, hint.into());
                }
                return Err(r.into_problems());
            }
        };
        for s in sets {
            let (key, msg, hint) = match tree::apply_set(&mut root, s) {
                Ok(()) => continue,
                Err(SetError::MissingEquals) => {
                    let hint = "e.g. --set client.concurrency=64";
                    (String::new(), "expected KEY=VALUE".into(), hint.into())
                }
                Err(SetError::EmptyKey) => {
                    let msg = "the key path is empty or has an empty part";
                    let hint = "write the dotted path of a scenario key, e.g. engine.page_size";
                    (String::new(), msg.into(), hint.into())
                }
                Err(SetError::NotATable { prefix, found }) => {
                    let msg = format!("is {found}, so it has no keys below it");
                    let hint = format!("set `{prefix}` itself, or check the path");
                    (prefix, msg, hint)
                }
            };
            r.push(&key, &Origin::Override(s.clone()), msg, None, hint);
        }
        let top: Vec<&Key> = KEYS.iter().filter(|k| k.parent().is_empty()).collect();
        r.entries("", &root, &top);
        r.presence();
        Ok(r)
    }

    /// Every problem found, in file order: problems of the whole file, then by line and column,
    /// then those of the overrides.
    pub(super) fn into_problems(self) -> Vec<Problem> {
        let mut problems = self.problems;
        problems.sort_by_key(|p| match p.location {
            Location::None => (0, 0, 0),
            Location::Line { line, column } => (1, line, column),
            Location::Set(_) => (2, 0, 0),
        });
        problems
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
    fn check(&mut self, path: &str, key: &Key, node: &Node) -> Option<&Val> {
        let slot = Slot {
            origin: node.origin.clone(),
            shown: node.value.render(),
            val: None,
        };
        self.slots.insert(path.to_string(), slot);
        let val = self.value(path, key, node);
        let slot = self.slots.get_mut(path).expect("invariant: inserted above");
        slot.val = val;
        slot.val.as_ref()
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
                return (out.len() == items.len()).then(|| Val::Nums(out.into()));
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
            _ => key.hint(),
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
            // `Some(the setting's value)` when the key does not apply.
            let conflict = match key.when.condition() {
                None => None,
                Some((setting, allowed)) => match self.setting(setting) {
                    None => continue, // the setting has a problem of its own
                    Some(actual) if allowed.contains(&actual.as_str()) => None,
                    Some(actual) => Some(actual),
                },
            };
            match (self.slots.get_mut(key.path), conflict) {
                (Some(slot), Some(actual)) => {
                    if slot.val.take().is_none() {
                        continue; // reported already
                    }
                    let shown = (!matches!(key.ty, Ty::Table)).then(|| slot.shown.clone());
                    let at = slot.origin.clone();
                    let (msg, hint) = key.when.mismatch(key.path, &actual);
                    self.push(key.path, &at, msg, shown, hint);
                }
                (None, None) if key.required() => _ = self.missing(key.path, key, ""),
                _ => {}
            }
        }
    }

    /// The value of the choice at `path`, given or default (`None` after a problem).
    fn setting(&self, path: &str) -> Option<String> {
        let given = self.slots.get(path).map(|s| &s.val);
        match (given, Self::declared(path).default) {
            (Some(Some(Val::Str(s))), _) => Some(s.clone()),
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
            let msg = format!("required key is missing in [{path}]");
            self.fail(&join(path, "dist"), path, msg, hint);
            return None;
        };
        let Val::Str(name) = self
            .check(&join(path, "dist"), param("dist"), node)?
            .clone()
        else {
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
            let (msg, hint) = (
                format!("min = {min} is greater than max = {max}"),
                "swap them, or widen the range",
            );
            self.fail(&join(path, "min"), path, msg, hint);
            return None;
        }
        Some(LengthDist { shape, min, max })
    }

    /// `values = [...]`, or `file` and `column` of a CSV file.
    fn empirical(&mut self, path: &str, given: &HashMap<&str, Val>) -> Option<Arc<[f64]>> {
        let values_path = join(path, "values");
        let text = |p: &str| given.get(p).and_then(String::from_val);
        match (given.get("values"), text("file"), text("column")) {
            (Some(Val::Nums(v)), None, None) if v.is_empty() => {
                self.bad(&values_path, "is empty", "give at least one token count");
                None
            }
            (Some(Val::Nums(v)), None, None) if v.len() > MAX_EMPIRICAL_VALUES => {
                let msg = format!("has {} values, more than {MAX_EMPIRICAL_VALUES}", v.len());
                let hint = "use file = … and column = … for large samples";
                self.bad(&values_path, msg, hint);
                None
            }
            (Some(Val::Nums(v)), None, None) => Some(v.clone()),
            (None, Some(file), Some(column)) => {
                match read_csv_column(&self.source.base_dir.join(&file), &column) {
                    Ok(values) => Some(values.into()),
                    Err(e) => {
                        let guess = match &e {
                            CsvError::NoColumn { columns, .. } => {
                                let columns: Vec<&str> =
                                    columns.iter().map(String::as_str).collect();
                                did_you_mean(&column, &columns)
                                    .map(|g| format!("did you mean column \"{g}\"? "))
                            }
                            _ => None,
                        };
                        self.bad(
                            &join(path, "file"),
                            e.to_string(),
                            guess.unwrap_or_default() + &e.hint(),
                        );
                        None
                    }
                }
            }
            (None, None, None) => {
                let msg = format!("required key is missing in [{path}]");
                let hint = "empirical needs values = [ … ] or file = \"….csv\" with column = \"…\"";
                self.fail(&values_path, path, msg, hint);
                None
            }
            (Some(_), _, _) => {
                let msg = "give either values or file and column, not both";
                self.fail(&values_path, path, msg, "remove one of them");
                None
            }
            (None, file, _) => {
                let (p, why) = match file {
                    Some(_) => ("column", "empirical with a file needs column: "),
                    None => ("file", "empirical with a column needs file: "),
                };
                self.missing(&join(path, p), param(p), why);
                None
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Reading checked values in the build.

    pub(super) fn declared(path: &str) -> &'static Key {
        schema::key(path).unwrap_or_else(|| panic!("invariant: `{path}` is declared in schema.rs"))
    }

    /// The value given at `path`, if any.
    pub(super) fn opt<T: FromVal>(&self, path: &str) -> Result<Option<T>, Bad> {
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
    pub(super) fn get<T: FromVal>(&self, path: &str) -> Result<T, Bad> {
        if let Some(v) = self.opt(path)? {
            return Ok(v);
        }
        let default = match Self::declared(path).default {
            DefaultValue::Required => return Err(Bad), // reported by `presence`
            DefaultValue::Absent(_) | DefaultValue::Derived(_) => {
                unreachable!("invariant: `{path}` has a literal default")
            }
            DefaultValue::Int(i) => Val::Int(i),
            DefaultValue::Num(x) => Val::Num(x),
            DefaultValue::Word(w) => Val::Str(w.into()),
            DefaultValue::Flag(b) => Val::Bool(b),
        };
        Ok(T::from_val(&default)
            .unwrap_or_else(|| panic!("invariant: `{path}`'s default has its type")))
    }

    /// Whether the table at `path` was given (a missing required one was already reported).
    pub(super) fn has(&self, path: &str) -> Result<bool, Bad> {
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
