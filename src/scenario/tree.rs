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
        self.entries
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, _, n)| n)
    }
    fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.entries
            .iter_mut()
            .find(|(k, _, _)| k == key)
            .map(|(_, _, n)| n)
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
            Value::Float(f) => {
                if f.is_nan() {
                    "nan".into()
                } else if f.is_infinite() {
                    if *f > 0.0 { "inf" } else { "-inf" }.into()
                } else {
                    format!("{f:?}")
                }
            }
            Value::Bool(b) => b.to_string(),
            Value::Datetime(d) => d.clone(),
            Value::Array(items) => {
                let shown: Vec<String> = items.iter().take(4).map(|n| n.value.render()).collect();
                let more = if items.len() > 4 { ", …" } else { "" };
                format!("[{}{more}]", shown.join(", "))
            }
            Value::Table(t) => {
                let shown: Vec<String> = t
                    .entries
                    .iter()
                    .take(4)
                    .map(|(k, _, n)| format!("{k} = {}", n.value.render()))
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
        return Err(errors
            .into_iter()
            .map(|e| SyntaxError {
                message: e.message().trim().to_string(),
                span: e.span(),
            })
            .collect());
    }
    Ok(convert_table(doc.get_ref(), Origin::File))
}

fn convert_table(t: &DeTable<'_>, origin: impl Fn(Range<usize>) -> Origin + Copy) -> Table {
    Table {
        entries: t
            .iter()
            .map(|(k, v)| {
                (
                    k.get_ref().to_string(),
                    origin(k.span()),
                    convert(v, origin),
                )
            })
            .collect(),
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
    Node {
        value,
        origin: origin(v.span()),
    }
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
    let key = key.trim();
    let raw = raw.trim();
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    if key.is_empty() || parts.iter().any(|p| p.is_empty()) {
        return Err(SetError::EmptyKey);
    }
    let origin = Origin::Override(arg.to_string());
    let value = match DeValue::parse(raw) {
        Ok(v) => convert(&v, |_| Origin::Override(arg.to_string())).value,
        Err(_) => Value::Str(raw.to_string()),
    };
    let mut table = root;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        if last {
            let node = Node {
                value,
                origin: origin.clone(),
            };
            match table.get_mut(part) {
                Some(existing) => *existing = node,
                None => table.entries.push((part.to_string(), origin.clone(), node)),
            }
            return Ok(());
        }
        if table.get(part).is_none() {
            table.entries.push((
                part.to_string(),
                origin.clone(),
                Node {
                    value: Value::Table(Table::default()),
                    origin: origin.clone(),
                },
            ));
        }
        let node = table
            .get_mut(part)
            .expect("invariant: entry was just ensured");
        match &mut node.value {
            Value::Table(t) => table = t,
            other => {
                return Err(SetError::NotATable {
                    prefix: parts[..=i].join("."),
                    found: other.type_name(),
                })
            }
        }
    }
    unreachable!("invariant: the loop returns at the last path segment")
}

pub use crate::diagnostic::line_col;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_position() {
        let text = "a = 1\n[b]\nc = \"x\"\n";
        let t = parse(text).unwrap();
        let b = match &t.get("b").unwrap().value {
            Value::Table(b) => b.clone(),
            _ => panic!("b is a table"),
        };
        match &b.get("c").unwrap().origin {
            Origin::File(r) => assert_eq!(line_col(text, r.start), (3, 5)),
            o => panic!("unexpected origin {o:?}"),
        }
    }

    #[test]
    fn set_creates_tables_and_parses_toml_values() {
        let mut t = parse("[engine]\npage_size = 1\n").unwrap();
        apply_set(&mut t, "engine.page_size=16").unwrap();
        apply_set(&mut t, "client.mode=poisson").unwrap();
        apply_set(&mut t, "run.observe_at_s=[1, 2]").unwrap();
        let Value::Table(e) = &t.get("engine").unwrap().value else {
            panic!()
        };
        assert!(matches!(e.get("page_size").unwrap().value, Value::Int(16)));
        let Value::Table(c) = &t.get("client").unwrap().value else {
            panic!()
        };
        assert!(matches!(&c.get("mode").unwrap().value, Value::Str(s) if s == "poisson"));
        let Value::Table(r) = &t.get("run").unwrap().value else {
            panic!()
        };
        assert!(matches!(&r.get("observe_at_s").unwrap().value, Value::Array(a) if a.len() == 2));
    }

    #[test]
    fn set_through_a_non_table_is_an_error() {
        let mut t = parse("name = \"x\"\n").unwrap();
        assert_eq!(
            apply_set(&mut t, "name.first=1"),
            Err(SetError::NotATable {
                prefix: "name".into(),
                found: "a string"
            })
        );
        assert_eq!(apply_set(&mut t, "name"), Err(SetError::MissingEquals));
        assert_eq!(apply_set(&mut t, "a..b=1"), Err(SetError::EmptyKey));
    }

    #[test]
    fn syntax_errors_carry_a_span() {
        let errs = parse("a = \n").unwrap_err();
        assert!(!errs.is_empty());
        assert!(errs[0].span.is_some());
    }
}
