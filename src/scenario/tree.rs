//! The raw layer: a scenario as a TOML tree that remembers where each key and value came from.
//!
//! The file is parsed with `toml`'s spanned parser, converted to an owned [`Node`] tree, then
//! `--set` overrides are applied to the tree. Validation ([`super::validate`]) reads this tree,
//! so every problem can name its key path and its line and column (or the `--set` it came from).

use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// Where a value came from: a byte range of the scenario file, or a `--set` override.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    /// Bytes `range` of the scenario file.
    File(Range<usize>),
    /// The command-line override `--set KEY=VALUE` (the text after `--set`).
    Override(String),
    /// A value servesim filled in (never shown to the user as a location).
    Unknown,
}

/// One value of the tree.
#[derive(Clone, Debug)]
pub struct Node {
    /// The value.
    pub value: Value,
    /// Where it came from.
    pub origin: Origin,
}

/// A TOML value, owned.
#[derive(Clone, Debug)]
pub enum Value {
    /// A string.
    Str(String),
    /// An integer (wider than TOML's 64 bits, so that a `u64` key such as `seed` is read
    /// exactly and a larger one is refused as too large, never rounded).
    Int(i128),
    /// A float, possibly `inf` or `nan` (validation rejects those where they make no sense).
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A date or time (never valid in a scenario; kept so the error can say what was found).
    Datetime(String),
    /// An array.
    Array(Vec<Node>),
    /// A table, keys in file order.
    Table(Table),
}

/// A table: entries in file order.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// `(key, where the key is written, value)`.
    pub entries: Vec<(String, Origin, Node)>,
}

impl Table {
    /// The value at `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries.iter().find(|e| e.0 == key).map(|e| &e.2)
    }

    /// The value at `key`, set to `make()` first (where `origin` says) if absent.
    fn entry(&mut self, key: &str, origin: &Origin, make: impl FnOnce() -> Value) -> &mut Node {
        let i = self.entries.iter().position(|e| e.0 == key);
        let i = i.unwrap_or_else(|| {
            let node = Node {
                value: make(),
                origin: origin.clone(),
            };
            self.entries.push((key.to_string(), origin.clone(), node));
            self.entries.len() - 1
        });
        &mut self.entries[i].2
    }
}

impl Value {
    /// A short name of the value's type, as TOML calls it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a boolean",
            Value::Datetime(_) => "a date-time",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }

    /// The value as the user would write it (shortened for long arrays and tables).
    pub fn render(&self) -> String {
        match self {
            Value::Str(s) => format!("{s:?}"),
            Value::Int(i) => i.to_string(),
            Value::Float(f) if f.is_nan() => "nan".into(),
            Value::Float(f) if f.is_infinite() => ["-inf", "inf"][usize::from(*f > 0.0)].into(),
            Value::Float(f) => format!("{f:?}"),
            Value::Bool(b) => b.to_string(),
            Value::Datetime(d) => d.clone(),
            Value::Array(items) => {
                let shown: Vec<String> = items.iter().take(4).map(|n| n.value.render()).collect();
                let more = if items.len() > 4 { ", …" } else { "" };
                format!("[{}{more}]", shown.join(", "))
            }
            Value::Table(t) => {
                let shown = t.entries.iter().take(4);
                let shown: Vec<String> = shown
                    .map(|e| format!("{} = {}", e.0, e.2.value.render()))
                    .collect();
                let more = if t.entries.len() > 4 { ", …" } else { "" };
                format!("{{ {}{more} }}", shown.join(", "))
            }
        }
    }
}

/// A syntax error in the scenario text.
#[derive(Clone, Debug)]
pub struct SyntaxError {
    /// The parser's message.
    pub message: String,
    /// Where, if the parser says.
    pub span: Option<Range<usize>>,
}

/// Parse scenario text into a tree. Returns every syntax error the parser could recover from.
pub fn parse(text: &str) -> Result<Table, Vec<SyntaxError>> {
    let (doc, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        let error = |e: toml::de::Error| {
            let (message, span) = (e.message().trim().to_string(), e.span());
            SyntaxError { message, span }
        };
        return Err(errors.into_iter().map(error).collect());
    }
    Ok(convert_table(doc.get_ref(), Origin::File))
}

fn convert_table(t: &DeTable<'_>, origin: impl Fn(Range<usize>) -> Origin + Copy) -> Table {
    let entries = t.iter().map(|(k, v)| {
        let key: &str = k.get_ref();
        (key.to_string(), origin(k.span()), convert(v, origin))
    });
    Table {
        entries: entries.collect(),
    }
}

fn convert(v: &Spanned<DeValue<'_>>, origin: impl Fn(Range<usize>) -> Origin + Copy) -> Node {
    let value = match v.get_ref() {
        DeValue::String(s) => Value::Str(s.to_string()),
        DeValue::Integer(i) => match i128::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Value::Int(n),
            // Out of i128 range: keep it as a float so validation can say it is too large.
            Err(_) => Value::Float(i.as_str().parse::<f64>().unwrap_or(f64::INFINITY)),
        },
        DeValue::Float(f) => Value::Float(parse_float(f.as_str())),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(d) => Value::Datetime(d.to_string()),
        DeValue::Array(a) => Value::Array(a.iter().map(|n| convert(n, origin)).collect()),
        DeValue::Table(t) => Value::Table(convert_table(t, origin)),
    };
    let origin = origin(v.span());
    Node { value, origin }
}

fn parse_float(s: &str) -> f64 {
    let cleaned: String = s.chars().filter(|c| *c != '_').collect();
    cleaned.parse::<f64>().unwrap_or(f64::NAN)
}

/// Why a `--set` could not be applied to the tree.
#[derive(Clone, Debug, PartialEq)]
pub enum SetError {
    /// The argument has no `=`.
    MissingEquals,
    /// The key path is empty or has an empty segment.
    EmptyKey,
    /// A prefix of the path holds a value that is not a table.
    NotATable {
        /// The prefix that is not a table.
        prefix: String,
        /// What it holds.
        found: &'static str,
    },
}

/// Apply one `--set KEY=VALUE` to the tree. The value is read as a TOML value; if it is not
/// valid TOML it is taken as a bare string (`--set client.mode=poisson`).
pub fn apply_set(root: &mut Table, arg: &str) -> Result<(), SetError> {
    let (key, raw) = arg.split_once('=').ok_or(SetError::MissingEquals)?;
    let (key, raw) = (key.trim(), raw.trim());
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    if key.is_empty() || parts.iter().any(|p| p.is_empty()) {
        return Err(SetError::EmptyKey);
    }
    let origin = Origin::Override(arg.to_string());
    let value = match DeValue::parse(raw) {
        Ok(v) => convert(&v, |_| Origin::Override(arg.to_string())).value,
        Err(_) => Value::Str(raw.to_string()),
    };
    let (last, path) = parts.split_last().expect("invariant: split gives a part");
    let mut table = root;
    for (i, part) in path.iter().enumerate() {
        let node = table.entry(part, &origin, || Value::Table(Table::default()));
        table = match &mut node.value {
            Value::Table(t) => t,
            other => {
                let (prefix, found) = (parts[..=i].join("."), other.type_name());
                return Err(SetError::NotATable { prefix, found });
            }
        };
    }
    let node = table.entry(last, &origin, || Value::Table(Table::default()));
    node.value = value;
    node.origin = origin;
    Ok(())
}

pub use crate::diagnostic::line_col;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_creates_tables_and_parses_toml_values() {
        let mut t = parse("[engine]\npage_size = 1\n").unwrap();
        for s in [
            "engine.page_size=16",
            "client.mode=poisson",
            "run.observe_at_s=[1, 2]",
        ] {
            apply_set(&mut t, s).unwrap();
        }
        let at = |table: &str, key: &str| match &t.get(table).unwrap().value {
            Value::Table(v) => v.get(key).unwrap().value.clone(),
            _ => panic!("{table} is a table"),
        };
        assert!(matches!(at("engine", "page_size"), Value::Int(16)));
        assert!(matches!(at("client", "mode"), Value::Str(s) if s == "poisson"));
        assert!(matches!(at("run", "observe_at_s"), Value::Array(a) if a.len() == 2));
    }
}
