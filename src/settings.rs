//! The language in which every scenario key is declared and read.
//!
//! A section of the scenario declares its keys with `keys!` beside the type it builds — its
//! path, what it accepts ([`Ty`], [`Range`]), its default, where it applies ([`When`]), its unit,
//! its meaning and an example — and builds that type from the checked values through
//! [`Values`]: `v.get("client.think_time_s")?` (given, or the declared default) or `v.opt(…)`
//! (given or absent). The scenario reader ([`crate::scenario`]) walks the file against every
//! declaration first (types, ranges, unknown keys, keys of another engine or mode, missing
//! keys), so a section only sees values that passed their checks, and reports what spans
//! several keys with `v.bad(…)` or `v.fail(…)`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// A table whose keys depend on its tag (a length distribution).
    Tagged(&'static Tagged),
    /// A token count from 1 to the given most, or a length distribution to draw it from.
    Tokens(&'static Tagged, u64),
    /// A table of entries the user names (`{ system = { … }, tools = { … } }`).
    Named(&'static Named),
    /// One entry of a [`Ty::Named`] table: a table of these keys (paths relative to it).
    Entry(&'static [Key]),
}

/// The range of a number.
#[derive(Clone, Copy, Debug)]
pub enum Range {
    /// Greater than 0.
    Positive,
    /// In (0, 1].
    Fraction,
    /// In `[lo, hi]` (a small `lo` such as 10⁻⁶ is the real bound, and messages say it).
    Within(f64, f64),
}

/// A key's default.
#[derive(Clone, Copy, Debug)]
pub enum DefaultValue {
    /// The key must be given (where it applies).
    Required,
    /// Required unless the key at the path is given; then derived as said.
    Unless(&'static str, &'static str),
    /// No value: what absence means.
    Absent(&'static str),
    /// Computed from other keys by the section that reads it: how.
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
    /// With `engine.kind` = the one value of the list; the string is the engine's name
    /// (`When::Engine(&["sglang"], "SGLang")`).
    Engine(&'static [&'static str], &'static str),
    /// When the key at the path holds one of the values.
    If(&'static str, &'static [&'static str]),
    /// When none of the keys at these paths is given.
    Without(&'static [&'static str]),
}

/// One declared key.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// Dotted path (relative to its table for the parameters of a [`Tagged`] table).
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

/// Declare keys: `"path" [type, default, applies to, "unit"] "meaning", e.g. "example";`.
macro_rules! keys {
    ($(#[$doc:meta])* $name:ident: $($path:literal [$ty:expr, $def:expr, $when:expr, $unit:literal] $meaning:literal, e.g. $ex:literal;)*) => {
        $(#[$doc])*
        #[allow(unused_imports)]
        pub const $name: &[$crate::settings::Key] = {
            use $crate::settings::{DefaultValue::*, Range::*, Ty::*, When::*};
            &[$($crate::settings::Key { path: $path, ty: $ty, default: $def, when: $when, unit: $unit, meaning: $meaning, example: $ex }),*]
        };
    };
}
pub(crate) use keys;

/// A table whose other keys depend on its tag: `{ dist = "gamma", mean = 300, cv = 2 }`.
#[derive(Debug)]
pub struct Tagged {
    /// The tag's key (`dist`), declared in `params`.
    pub tag: &'static str,
    /// What the tag names, for messages ("distribution").
    pub noun: &'static str,
    /// What the table is, for "accepts" ("length distribution").
    pub accepts: &'static str,
    /// The README's sentence before the tables.
    pub intro: &'static str,
    /// The values of the tag.
    pub variants: &'static [Variant],
    /// Every parameter (paths relative to the table), the tag included.
    pub params: &'static [Key],
}

/// A table whose keys are names the user chooses, each naming a table of the same keys: one
/// entry per prompt-prefix group, say.
#[derive(Debug)]
pub struct Named {
    /// What one entry is, for messages ("prefix group").
    pub noun: &'static str,
    /// One entry (its path is a placeholder; its type is [`Ty::Entry`] with the entries' keys).
    pub entry: Key,
}

impl Named {
    /// The keys of each entry (paths relative to the entry).
    pub fn params(&self) -> &'static [Key] {
        match self.entry.ty {
            Ty::Entry(keys) => keys,
            _ => unreachable!("invariant: a named table's entry is a Ty::Entry"),
        }
    }

    /// The README's table of an entry's keys; `head` is the key table's heading.
    pub fn readme(&self, path: &str, head: &str) -> String {
        let mut out = format!(
            "
Each entry of `{path}` is a {} named by its key, with:

{}",
            self.noun,
            head.replacen("key", "key of an entry", 1)
        );
        self.params().iter().for_each(|k| out += &k.readme_row());
        out
    }
}

/// One value of a [`Tagged`] table's tag: the parameters it needs and accepts.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    /// The tag's value.
    pub name: &'static str,
    /// Parameters it needs.
    pub required: &'static [&'static str],
    /// Parameters it accepts.
    pub optional: &'static [&'static str],
    /// What it needs, in words, when that is not `required` (alternatives).
    pub needs: &'static str,
    /// What it means.
    pub meaning: &'static str,
}

impl Tagged {
    /// The declaration of a parameter.
    pub fn param(&self, name: &str) -> Option<&'static Key> {
        self.params.iter().find(|k| k.path == name)
    }

    /// The README's tables of the variants and of the parameters; `head` is the key table's
    /// heading.
    pub fn readme(&self, head: &str) -> String {
        let mut out = format!(
            "\n{}\n\n| {} | needs | meaning |\n|---|---|---|\n",
            self.intro, self.tag
        );
        for d in self.variants {
            let needs: Vec<String> = d.required.iter().map(|p| format!("`{p}`")).collect();
            let needs = if d.needs.is_empty() {
                needs.join(", ")
            } else {
                d.needs.into()
            };
            out += &format!("| `{}` | {needs} | {} |\n", d.name, d.meaning);
        }
        out += &format!("\n{}", head.replacen("key", "parameter", 1));
        self.params.iter().for_each(|k| out += &k.readme_row());
        out
    }
}

/// A problem was recorded: the value or section it concerns cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bad;

/// A value that passed its key's checks.
#[derive(Clone, Debug)]
pub enum Val {
    /// An integer.
    Int(u64),
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// An array of numbers.
    Nums(Arc<[f64]>),
    /// `-1` of a [`Ty::IntegerOrOff`] key.
    Off,
    /// A table (its keys are values of their own).
    Table,
}

/// Reading a checked value as a Rust type.
pub trait FromVal: Sized {
    /// The value as `Self`, `None` if it is not of that kind.
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
}

/// The checked values of one scenario, as the sections read them, and where they report the
/// problems that span several keys.
pub trait Values {
    /// The declaration of the key at `path` (a broken invariant if there is none).
    fn key(&self, path: &str) -> &'static Key;
    /// The value given at `path`: `Ok(None)` when absent, `Err(Bad)` when it had a problem.
    fn given(&self, path: &str) -> Result<Option<&Val>, Bad>;
    /// Record a problem about `path`, at its value (`at` = `None`: the value is shown) or at
    /// the table or key `at` (e.g. two keys that disagree).
    fn report(&mut self, path: &str, at: Option<&str>, message: String, hint: String) -> Bad;
    /// A required key is missing; `why` (may be empty) says which setting needs it.
    fn missing(&mut self, path: &str, why: &str) -> Bad;
    /// The directory against which the scenario's file names are resolved.
    fn base_dir(&self) -> &Path;
    /// The names of the entries given in the [`Ty::Named`] table at `path`, in file order
    /// (only those whose entries passed their checks: tables with every required key).
    fn names(&self, path: &str) -> Vec<String>;
    /// The path of a file the scenario names (relative to its directory), remembered as an
    /// input of the scenario (outputs must not replace it).
    fn input(&mut self, file: &str) -> PathBuf;
}

impl dyn Values + '_ {
    /// The value given at `path`, if any.
    pub fn opt<T: FromVal>(&self, path: &str) -> Result<Option<T>, Bad> {
        self.key(path);
        Ok(self.given(path)?.map(|v| {
            T::from_val(v).unwrap_or_else(|| panic!("invariant: `{path}` is read as declared"))
        }))
    }

    /// The value given at `path`, or its declared default.
    pub fn get<T: FromVal>(&self, path: &str) -> Result<T, Bad> {
        if let Some(v) = self.opt(path)? {
            return Ok(v);
        }
        let default = match self.key(path).default {
            DefaultValue::Required => return Err(Bad), // reported by the walk
            DefaultValue::Int(i) => Val::Int(i),
            DefaultValue::Num(x) => Val::Num(x),
            DefaultValue::Word(w) => Val::Str(w.into()),
            DefaultValue::Flag(b) => Val::Bool(b),
            _ => unreachable!("invariant: `{path}` has a literal default"),
        };
        Ok(T::from_val(&default)
            .unwrap_or_else(|| panic!("invariant: `{path}`'s default has its type")))
    }

    /// Whether the table at `path` was given (a missing required one was already reported).
    pub fn has(&self, path: &str) -> Result<bool, Bad> {
        match (self.given(path)?, self.key(path).required()) {
            (None, true) => Err(Bad),
            (given, _) => Ok(given.is_some()),
        }
    }

    /// A problem with the value given at `path`.
    pub fn bad(&mut self, path: &str, msg: impl Into<String>, hint: impl Into<String>) -> Bad {
        self.report(path, None, msg.into(), hint.into())
    }

    /// A problem about `path` found at the table or key `at`.
    pub fn fail(
        &mut self,
        path: &str,
        at: &str,
        msg: impl Into<String>,
        hint: impl Into<String>,
    ) -> Bad {
        self.report(path, Some(at), msg.into(), hint.into())
    }
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

    /// Whether it must be given (where it applies, or unless another key is given).
    pub fn required(&self) -> bool {
        matches!(
            self.default,
            DefaultValue::Required | DefaultValue::Unless(..)
        )
    }

    /// The key's row of the README's reference.
    pub fn readme_row(&self) -> String {
        let default = match self.default {
            DefaultValue::Required => "required".into(),
            DefaultValue::Unless(other, then) => format!("required; with `{other}`: {then}"),
            DefaultValue::Absent(s) => s.into(),
            DefaultValue::Derived(how) => format!("derived: {how}"),
            DefaultValue::Int(i) => i.to_string(),
            DefaultValue::Num(x) => x.to_string(),
            DefaultValue::Word(w) => format!("`\"{w}\"`"),
            DefaultValue::Flag(b) => b.to_string(),
        };
        format!(
            "| `{}` | {} | {default} | {} | {} | `{}` |\n",
            self.path,
            self.accepts(),
            self.when.describe(),
            self.meaning.replace('|', "\\|"),
            self.example
        )
    }
}

impl Range {
    /// Why `x` is outside the range, if it is.
    pub fn check(self, x: f64) -> Option<String> {
        match self {
            Range::Positive if x <= 0.0 => Some("must be greater than 0".into()),
            Range::Fraction if !(x > 0.0 && x <= 1.0) => Some("must be in (0, 1]".into()),
            Range::Within(lo, hi) if !(lo..=hi).contains(&x) => {
                Some(format!("must be between {} and {}", shown(lo), shown(hi)))
            }
            _ => None,
        }
    }

    fn describe(self) -> String {
        match self {
            Range::Positive => "> 0".into(),
            Range::Fraction => "in (0, 1]".into(),
            Range::Within(lo, hi) => format!("{} – {}", shown(lo), shown(hi)),
        }
    }
}

/// A bound as written in messages: small ones with an exponent (`1e-9`), not as `0.000000001`.
fn shown(x: f64) -> String {
    if x != 0.0 && x.abs() < 1e-3 {
        format!("{x:e}")
    } else {
        format!("{x}")
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
            Ty::Table | Ty::Tagged(_) | Ty::Named(_) | Ty::Entry(_) => "a table",
            Ty::Tokens(..) => "an integer or a table",
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
            Ty::Tagged(t) => t.accepts.into(),
            Ty::Tokens(t, most) => format!("integer 1 – {most} or {}", t.accepts),
            Ty::Named(n) => format!("table of {}s, by name", n.noun),
            other => other.expected().trim_start_matches("a ").into(),
        }
    }
}

impl When {
    /// The key this depends on and the values it needs there (`None` when the key applies
    /// always or depends on another key's absence).
    pub fn condition(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            When::All | When::Without(_) => None,
            When::Engine(kind, _) => Some(("engine.kind", kind)),
            When::If(key, values) => Some((key, values)),
        }
    }

    /// Where it applies, for the README: "all", "SGLang", `client.mode = "gamma"`.
    pub fn describe(self) -> String {
        match self {
            When::All => "all".into(),
            When::Engine(_, name) => name.into(),
            When::If(key, values) => format!("{key} = {}", quoted(values).replace(", ", " or ")),
            When::Without(keys) => format!("without {}", keys.join(" or ")),
        }
    }

    /// The message and hint for the key at `path` given where it does not apply, the setting
    /// it depends on holding `actual` (or, for [`When::Without`], being given).
    /// For [`When::Without`], `actual` is the key given.
    pub fn mismatch(self, path: &str, actual: &str) -> (String, String) {
        let leaf = path.rsplit('.').next().unwrap_or(path);
        match self {
            When::Engine(_, name) => {
                // "an SGLang", "a vLLM": letters whose names start with a vowel sound take "an".
                let an =
                    name.starts_with(['A', 'E', 'F', 'H', 'I', 'L', 'M', 'N', 'O', 'R', 'S', 'X']);
                let article = if an { "an" } else { "a" };
                let msg = format!(
                    "is {article} {name} setting; this scenario's engine.kind is \"{actual}\""
                );
                (msg, "remove it, or change engine.kind".into())
            }
            When::Without(_) => (
                format!("does not apply with {actual}"),
                format!("{leaf} is for scenarios without {actual}; remove one of them"),
            ),
            When::If(setting, _) => (
                format!("does not apply to {setting} = \"{actual}\""),
                format!(
                    "{leaf} is for {}; remove it or change {setting}",
                    self.describe()
                ),
            ),
            When::All => unreachable!("invariant: a key that always applies has no mismatch"),
        }
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
