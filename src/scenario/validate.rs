//! The walk: the [`super::tree`] checked against every declared key ([`super::schema`]), every
//! problem collected with its key path, position, bad value and hint.
//!
//! Two passes. `Reader::entries` checks every value against its key's declaration (type,
//! range, choices, a tagged table's parameters) and collects the keys it does not know, which
//! `unknown_keys` then reports with a "did you mean" (or the keys known there); then
//! `Reader::presence` reports keys given for the other engine or mode, and required keys that
//! are missing. The sections then read the checked values through [`Values`] (`build.rs`).
//! A value with a problem is never used, so one mistake is reported once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::error::{Location, Problem};
use super::schema;
use super::tree::{self, Node, Origin, SetError, Table, Value};
use super::Source;
use crate::diagnostic::{did_you_mean, Lines};
use crate::settings::{quoted, Bad, DefaultValue, Key, Tagged, Ty, Val, Values, When};

/// A key given in the scenario: where, the value as written, and the checked value (`None`
/// after a problem).
struct Slot {
    origin: Origin,
    shown: String,
    val: Option<Val>,
}

/// A key the walk found undeclared: reported after the walk, when the settings that decide
/// which of `known` apply are known.
struct Unknown {
    table: String,
    name: String,
    origin: Origin,
    known: Vec<&'static Key>,
}

/// One scenario being read: its checked values by key path, and the problems found so far.
pub(super) struct Reader<'s> {
    source: &'s Source,
    /// The text's line starts, to place each problem without rescanning the file.
    lines: Lines<'s>,
    problems: Vec<Problem>,
    slots: HashMap<String, Slot>,
    unknown: Vec<Unknown>,
    /// The entry names of each named table, in file order.
    names: HashMap<String, Vec<String>>,
    inputs: Vec<PathBuf>,
}

fn join(path: &str, key: &str) -> String {
    match path {
        "" => key.to_string(),
        _ => format!("{path}.{key}"),
    }
}

impl Values for Reader<'_> {
    fn key(&self, path: &str) -> &'static Key {
        schema::key(path).unwrap_or_else(|| panic!("invariant: `{path}` is declared"))
    }

    fn given(&self, path: &str) -> Result<Option<&Val>, Bad> {
        match self.slots.get(path).map(|s| &s.val) {
            None => Ok(None),
            Some(None) => Err(Bad),
            Some(Some(v)) => Ok(Some(v)),
        }
    }

    fn report(&mut self, path: &str, at: Option<&str>, msg: String, hint: String) -> Bad {
        let (at, shown) = match at {
            None => {
                let slot = &self.slots[path];
                (slot.origin.clone(), Some(slot.shown.clone()))
            }
            Some(at) => (self.origin(at), None),
        };
        self.push(path, &at, msg, shown, hint)
    }

    fn missing(&mut self, path: &str, why: &str) -> Bad {
        let key = self.key(path);
        let parent = path.rsplit_once('.').map_or("", |(p, _)| p);
        let place = match parent {
            "" => "at the top level".into(),
            _ => format!("in [{parent}]"),
        };
        let hint = match key.ty {
            Ty::Table => {
                let needs = schema::keys().filter(|k| k.parent() == path && k.required());
                let needs = needs.filter(|k| matches!(k.when, When::All | When::Without(_)));
                let needs: Vec<&str> = needs.map(Key::leaf).collect();
                let with = ["", " with "][usize::from(!needs.is_empty())];
                let needs = needs.join(", ");
                format!("add the [{path}] section{with}{needs} ({})", key.meaning)
            }
            _ => {
                let (meaning, leaf, example) = (key.meaning, key.leaf(), key.example);
                format!("{why}{meaning}, e.g. {leaf} = {example}")
            }
        };
        let msg = format!("required key is missing {place}");
        self.report(path, Some(parent), msg, hint)
    }

    fn base_dir(&self) -> &Path {
        &self.source.base_dir
    }

    fn names(&self, path: &str) -> Vec<String> {
        self.names.get(path).cloned().unwrap_or_default()
    }

    fn input(&mut self, file: &str) -> PathBuf {
        let path = self.source.base_dir.join(file);
        self.inputs.push(path.clone());
        path
    }
}

impl<'s> Reader<'s> {
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
            location: Location::from_origin(at, &self.lines),
            message: msg,
            value,
            hint: (!hint.is_empty()).then_some(hint),
        });
        Bad
    }

    fn origin(&self, path: &str) -> Origin {
        self.slots
            .get(path)
            .map_or(Origin::Unknown, |s| s.origin.clone())
    }

    /// Parse the scenario, apply the `--set` overrides and check every value against its
    /// declaration. `Err` with the syntax errors when the text is not TOML.
    pub(super) fn read(source: &'s Source, sets: &[String]) -> Result<Self, Vec<Problem>> {
        let mut r = Reader {
            source,
            lines: Lines::new(&source.text),
            problems: Vec::new(),
            slots: HashMap::new(),
            unknown: Vec::new(),
            names: HashMap::new(),
            inputs: Vec::new(),
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
        let top: Vec<&Key> = schema::keys().filter(|k| k.parent().is_empty()).collect();
        r.entries("", &root, &top);
        r.presence();
        r.unknown_keys();
        Ok(r)
    }

    /// The files the scenario named and the sections read (traces, data, catalogs).
    pub(super) fn inputs(&self) -> &[PathBuf] {
        &self.inputs
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

    /// Check every entry of the table at `path` against `known`, its declared keys.
    fn entries(&mut self, path: &str, table: &Table, known: &[&'static Key]) {
        for (name, key_origin, node) in &table.entries {
            let full = join(path, name);
            if let Some(key) = known.iter().find(|k| k.leaf() == name) {
                self.check(&full, key, node);
                continue;
            }
            self.unknown.push(Unknown {
                table: path.to_string(),
                name: name.clone(),
                origin: key_origin.clone(),
                known: known.to_vec(),
            });
        }
    }

    /// The keys the walk did not know, each with the closest declared key, or the keys that
    /// apply here.
    fn unknown_keys(&mut self) {
        for u in std::mem::take(&mut self.unknown) {
            let names: Vec<&str> = u.known.iter().map(|k| k.leaf()).collect();
            let hint = match did_you_mean(&u.name, &names) {
                Some(s) => format!("did you mean `{}`?", join(&u.table, s)),
                None => {
                    let here = u.known.iter().filter(|k| self.applies(k));
                    let here: Vec<&str> = here.map(|k| k.leaf()).collect();
                    format!("known keys here: {}", here.join(", "))
                }
            };
            let what = match u.table.as_str() {
                "" => "unknown key at the top level".to_string(),
                t => format!("unknown key in [{t}]"),
            };
            self.push(&join(&u.table, &u.name), &u.origin, what, None, hint);
        }
    }

    /// Whether `key` applies to this scenario (yes when the setting it depends on is bad).
    fn applies(&self, key: &Key) -> bool {
        match (key.when, key.when.condition()) {
            (When::Without(others), _) => !others.iter().any(|o| self.slots.contains_key(*o)),
            (_, None) => true,
            (_, Some((setting, allowed))) => self
                .setting(setting)
                .is_none_or(|a| allowed.contains(&a.as_str())),
        }
    }

    /// Check the value given at `path` and keep it (with `None` after a problem).
    fn check(&mut self, path: &str, key: &Key, node: &Node) -> Option<&Val> {
        let (origin, shown) = (node.origin.clone(), node.value.render());
        self.slots.insert(
            path.to_string(),
            Slot {
                origin,
                shown,
                val: None,
            },
        );
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
                let mut modelled = schema::NOT_MODELLED.iter().flat_map(|list| list.iter());
                let modelled =
                    { modelled }.find(|(p, vs, _)| *p == path && vs.contains(&s.as_str()));
                let (msg, hint) = match (modelled, did_you_mean(s, names)) {
                    (Some((_, _, hint)), _) => ("is not modelled", hint.to_string()),
                    (None, Some(g)) => (
                        "unknown value",
                        format!("did you mean \"{g}\"? valid values: {}", quoted(names)),
                    ),
                    (None, None) => ("unknown value", format!("valid values: {}", quoted(names))),
                };
                self.report(path, None, msg.into(), hint);
                return None;
            }
            (Ty::Numbers(range), Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match number(&item.value).and_then(|x| range.check(x).map_or(Ok(x), Err)) {
                        Ok(x) => out.push(x),
                        Err(m) => {
                            let (at, shown) = (&item.origin, Some(item.value.render()));
                            _ = self.push(&format!("{path}[{i}]"), at, m, shown, key.hint())
                        }
                    }
                }
                return (out.len() == items.len()).then(|| Val::Nums(out.into()));
            }
            (Ty::Table, Value::Table(t)) => {
                let known: Vec<&Key> = schema::keys().filter(|k| k.parent() == path).collect();
                self.entries(path, t, &known);
                return Some(Val::Table);
            }
            (Ty::Tagged(tagged) | Ty::Tokens(tagged, _), Value::Table(t)) => {
                return self.tagged(path, tagged, t).then_some(Val::Table)
            }
            (Ty::Tokens(_, most), Value::Int(_) | Value::Float(_)) => match integer(v, 1, most) {
                Ok(i) => return Some(Val::Int(i)),
                Err(m) => m,
            },
            (Ty::Named(named), Value::Table(t)) => {
                let mut names = Vec::new();
                for (name, _, node) in &t.entries {
                    let entry = join(path, name);
                    if self.check(&entry, &named.entry, node).is_some() {
                        names.push(name.clone());
                    }
                }
                self.names.insert(path.to_string(), names);
                return Some(Val::Table);
            }
            (Ty::Entry(keys), Value::Table(t)) => {
                let known: Vec<&Key> = keys.iter().collect();
                self.entries(path, t, &known);
                let absent = keys
                    .iter()
                    .filter(|k| k.required() && t.get(k.path).is_none());
                let absent: Vec<&Key> = absent.collect();
                for k in &absent {
                    self.missing(&join(path, k.path), "");
                }
                return absent.is_empty().then_some(Val::Table);
            }
            _ => format!("expected {}, found {}", key.ty.expected(), v.type_name()),
        };
        let hint = match key.ty {
            Ty::Text | Ty::OneOf(_) => "put the value in double quotes".into(),
            Ty::Bool => "write true or false, without quotes".into(),
            Ty::Table | Ty::Tagged(_) | Ty::Named(_) | Ty::Entry(_) => {
                format!("write it as a [{path}] section or an inline table {{ … }}")
            }
            Ty::Tokens(t, _) => format!(
                "a token count, e.g. {} = 2000, or a {}, e.g. {{ dist = \"uniform\", min = 500, max = 2000 }}",
                key.leaf(),
                t.accepts
            ),
            _ => key.hint(),
        };
        self.report(path, None, message, hint);
        None
    }

    /// A tagged table (a length distribution): its tag names the parameters it takes. `false`
    /// when the tag or a required parameter is missing or bad.
    fn tagged(&mut self, path: &str, t: &'static Tagged, table: &Table) -> bool {
        let tag_path = join(path, t.tag);
        let Some(node) = table.get(t.tag) else {
            let names: Vec<&str> = t.variants.iter().map(|d| d.name).collect();
            let hint = format!("name the {}: {} = one of {}", t.noun, t.tag, quoted(&names));
            let msg = format!("required key is missing in [{path}]");
            self.report(&tag_path, Some(path), msg, hint);
            return false;
        };
        let param = |p: &str| t.param(p).expect("invariant: a declared parameter");
        let Some(Val::Str(name)) = self.check(&tag_path, param(t.tag), node).cloned() else {
            return false;
        };
        let d = t.variants.iter().find(|d| d.name == name);
        let d = d.expect("invariant: the tag's values are declared");
        let known = std::iter::once(&t.tag).chain(d.required).chain(d.optional);
        let known: Vec<&Key> = known.map(|p| param(p)).collect();
        self.entries(path, table, &known);
        let absent = d.required.iter().filter(|p| table.get(p).is_none());
        let absent: Vec<&str> = absent.copied().collect();
        for p in &absent {
            self.missing(&join(path, p), &format!("{name} needs {p}: "));
        }
        absent.is_empty()
    }

    /// After the walk: keys given where they do not apply, and required keys that are missing.
    fn presence(&mut self) {
        for key in schema::keys() {
            let parent = key.parent();
            if !parent.is_empty()
                && !matches!(self.slots.get(parent), Some(Slot { val: Some(_), .. }))
            {
                continue;
            }
            // `Some(the setting's value)` when the key does not apply.
            let conflict = match (key.when, key.when.condition()) {
                (When::Without(others), _) => {
                    match others.iter().find_map(|o| Some((*o, self.slots.get(*o)?))) {
                        None => None,
                        Some((_, Slot { val: None, .. })) => continue, // a problem of its own
                        Some((o, _)) => Some(o.to_string()),
                    }
                }
                (_, None) => None,
                (_, Some((setting, allowed))) => match self.setting(setting) {
                    None => continue, // the setting has a problem of its own
                    Some(actual) if allowed.contains(&actual.as_str()) => None,
                    Some(actual) => Some(actual),
                },
            };
            let unless_given = matches!(key.default, DefaultValue::Unless(other, _) if self.slots.contains_key(other));
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
                (None, None) if key.required() && !unless_given => _ = self.missing(key.path, ""),
                _ => {}
            }
        }
    }

    /// The value of the choice at `path`, given or default (`None` after a problem).
    fn setting(&self, path: &str) -> Option<String> {
        let given = self.slots.get(path).map(|s| &s.val);
        match (given, self.key(path).default) {
            (Some(Some(Val::Str(s))), _) => Some(s.clone()),
            (None, DefaultValue::Word(w)) => Some(w.into()),
            _ => None,
        }
    }
}

fn integer(v: &Value, lo: u64, hi: u64) -> Result<u64, String> {
    // A float holds every integer exactly only up to 2⁵³.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    let (at_least, at_most) = (
        || format!("must be at least {lo}"),
        || format!("must be at most {hi}"),
    );
    let x: i128 = match v {
        Value::Int(i) => *i,
        Value::Float(f) if !f.is_finite() => return Err("must be a finite integer".into()),
        Value::Float(f) if f.fract() != 0.0 => {
            return Err("expected an integer, found a fractional number".into())
        }
        Value::Float(f) if f.abs() < EXACT => *f as i128,
        Value::Float(f) if *f < lo as f64 => return Err(at_least()),
        Value::Float(f) if *f > hi as f64 => return Err(at_most()),
        Value::Float(_) => {
            return Err("is written as a float (with `.` or an exponent), which is not exact from 2^53 = 9007199254740992 on: write the integer's digits".into())
        }
        other => return Err(format!("expected an integer, found {}", other.type_name())),
    };
    if x < i128::from(lo) {
        Err(at_least())
    } else if x > i128::from(hi) {
        Err(at_most())
    } else {
        Ok(x as u64)
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
