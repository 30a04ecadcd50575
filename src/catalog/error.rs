//! Why a catalog file is refused: each message names the file, the line and column, the entry
//! (`model `kimi-k2.5``) and what is wrong, with the fix when it is not obvious.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use crate::diagnostic::Lines;

/// Which table an entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A `[[gpu]]` entry.
    Gpu,
    /// A `[[model]]` entry.
    Model,
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EntryKind::Gpu => "GPU",
            EntryKind::Model => "model",
        })
    }
}

/// An entry of a catalog file, as named in messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryRef {
    /// GPU or model.
    pub kind: EntryKind,
    /// Its `name`, when it has a string one.
    pub name: Option<String>,
    /// Its place among the file's entries of that kind, from 1.
    pub index: usize,
}

impl fmt::Display for EntryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{} `{name}`", self.kind),
            None => write!(f, "{} #{} (no name)", self.kind, self.index),
        }
    }
}

/// A line and column in a catalog file, both counted from 1 (columns in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
}

impl Position {
    /// The position of byte offset `at` in the text of `lines`.
    pub(super) fn of(lines: &Lines, at: usize) -> Self {
        let (line, column) = lines.line_col(at);
        Position { line, column }
    }
}

/// `origin:line:column: ` or `origin: `.
fn place(origin: &str, position: &Option<Position>) -> String {
    match position {
        Some(p) => format!("{origin}:{}:{}: ", p.line, p.column),
        None => format!("{origin}: "),
    }
}

/// `entry: ` or nothing.
fn entry_prefix(entry: &Option<EntryRef>) -> String {
    entry.as_ref().map(|e| format!("{e}: ")).unwrap_or_default()
}

/// Why a catalog could not be loaded, or a name not found.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The user catalog file could not be read.
    #[error("cannot read catalog file `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or an entry does not follow the schema: a missing or unknown
    /// key, a value of the wrong type, an attention kind that does not exist.
    #[error("{}{}{message}", place(origin, position), entry_prefix(entry))]
    Syntax {
        /// The file (or `<built-in …>`).
        origin: String,
        /// Where the parser stopped, when it says.
        position: Option<Position>,
        /// The entry the problem is in, when it is in one.
        entry: Option<EntryRef>,
        /// What is wrong, and how to fix it when the parser's words do not say.
        message: String,
    },
    /// An entry follows the schema but its values are out of range or inconsistent.
    #[error("{}{kind} `{name}`: {message}", place(origin, position))]
    Invalid {
        /// The file (or `<built-in …>`).
        origin: String,
        /// Where the entry is.
        position: Option<Position>,
        /// GPU or model.
        kind: EntryKind,
        /// The entry's name.
        name: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A name or alias is used by two entries of the same kind.
    #[error(
        "{}{kind} `{name}`: `{key}` is already a name or alias of {kind} `{other}`",
        place(origin, position)
    )]
    Duplicate {
        /// The file (or `<built-in …>`) of the entry that repeats the key.
        origin: String,
        /// Where that entry is.
        position: Option<Position>,
        /// GPU or model.
        kind: EntryKind,
        /// The entry that repeats the key.
        name: String,
        /// The repeated name or alias.
        key: String,
        /// The entry that already had it.
        other: String,
    },
    /// A lookup found no entry with that name or alias.
    #[error(
        "unknown {kind} `{name}`{}",
        suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default()
    )]
    Unknown {
        /// GPU or model.
        kind: EntryKind,
        /// The name asked for.
        name: String,
        /// The closest known name, if one is close.
        suggestion: Option<String>,
    },
}

// ---------------------------------------------------------------------------------------------
// Parser errors, told in the catalog's terms

/// Keys of the flat model schema (before attention, MoE and vision became sub-tables), or of
/// the other attention kind, and where each belongs.
const MOVED_KEYS: &[(&str, &str)] = &[
    ("kv_heads", GQA_FORM),
    ("head_dim", GQA_FORM),
    ("kv_lora_rank", MLA_FORM),
    ("qk_rope_head_dim", MLA_FORM),
    ("qk_nope_head_dim", MLA_FORM),
    ("v_head_dim", MLA_FORM),
    ("q_lora_rank", MLA_FORM),
    ("num_experts", MOE_FORM),
    ("experts_per_token", MOE_FORM),
    ("shared_experts", MOE_FORM),
    ("moe_intermediate_size", MOE_FORM),
    (
        "first_dense_layers",
        "belongs in `moe = { …, first_dense_layers = … }` (a dense model has no `moe`)",
    ),
    (
        "multimodal",
        "is gone: a model with a vision tower has `vision = { layers = …, hidden_size = …, params_b = … }`",
    ),
    ("vision_layers", VISION_FORM),
    ("vision_hidden_size", VISION_FORM),
    ("vision_params_b", VISION_FORM),
    ("context_len", "is now `context_len_tokens`"),
];

const GQA: &str = "`attention = { kind = \"gqa\", kv_heads = …, head_dim = … }`";
const MLA: &str = "`attention = { kind = \"mla\", kv_lora_rank = …, qk_rope_head_dim = …, qk_nope_head_dim = …, v_head_dim = …, q_lora_rank = … }` (q_lora_rank optional)";
const GQA_FORM: &str = "belongs in `attention = { kind = \"gqa\", kv_heads = …, head_dim = … }`";
const MLA_FORM: &str = "belongs in `attention = { kind = \"mla\", kv_lora_rank = …, qk_rope_head_dim = …, qk_nope_head_dim = …, v_head_dim = …, q_lora_rank = … }` (q_lora_rank optional)";
const MOE_FORM: &str = "belongs in `moe = { num_experts = …, experts_per_token = …, shared_experts = …, moe_intermediate_size = …, first_dense_layers = … }`";
const VISION_FORM: &str = "belongs in `vision = { layers = …, hidden_size = …, params_b = … }` (with the `vision_` prefix dropped)";

/// The message for `attention` written as a plain string (the flat schema's form).
pub(super) fn attention_is_a_table(kind: &str) -> String {
    let form = match kind {
        "mla" => MLA,
        _ => GQA,
    };
    format!("`attention` is a table naming its kind and sizes, not a string: write {form}")
}

/// Just enough of a catalog file to name the entry a parser error is in: entries whose `name`
/// is not a string, or of a file that is not TOML, are not named.
#[derive(Deserialize)]
struct Outline {
    #[serde(default)]
    gpu: Vec<Spanned<Named>>,
    #[serde(default)]
    model: Vec<Spanned<Named>>,
}

#[derive(Deserialize)]
struct Named {
    name: Option<String>,
}

/// The entry whose table holds byte `at` of `text`: the last entry header before it, unless
/// another table's header comes between.
fn entry_at(text: &str, at: usize) -> Option<EntryRef> {
    let outline: Outline = toml::from_str(text).ok()?;
    let headers = |kind: EntryKind, list: Vec<Spanned<Named>>| {
        list.into_iter().enumerate().map(move |(i, n)| {
            let start = n.span().start;
            let entry = EntryRef {
                kind,
                name: n.into_inner().name,
                index: i + 1,
            };
            (start, entry)
        })
    };
    let (start, entry) = headers(EntryKind::Gpu, outline.gpu)
        .chain(headers(EntryKind::Model, outline.model))
        .filter(|(start, _)| *start <= at)
        .max_by_key(|(start, _)| *start)?;
    let sub_table = match entry.kind {
        EntryKind::Gpu => "[gpu.",
        EntryKind::Model => "[model.",
    };
    let other_table_between = text[start..at]
        .lines()
        .skip(1)
        .map(str::trim_start)
        .any(|l| l.starts_with('[') && !l.starts_with(sub_table));
    (!other_table_between).then_some(entry)
}

/// The line holding byte `at`, trimmed and shortened, when it says more than a table header.
fn excerpt(text: &str, at: usize) -> Option<String> {
    let start = text[..at.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("").trim();
    if line.is_empty() || line.starts_with('[') {
        return None;
    }
    const MAX_CHARS: usize = 100;
    Some(if line.chars().count() > MAX_CHARS {
        format!("{}…", line.chars().take(MAX_CHARS).collect::<String>())
    } else {
        line.to_string()
    })
}

/// Where an unknown key belongs, from the parser's "unknown field `x`" message, when it is a
/// key of the flat schema or of the other attention kind.
fn moved_key_hint(message: &str) -> Option<String> {
    let key = message.strip_prefix("unknown field `")?.split('`').next()?;
    let (_, place) = MOVED_KEYS.iter().find(|(k, _)| *k == key)?;
    Some(format!("`{key}` {place}"))
}

/// A parser error of catalog text `text` (named `origin`), told with the entry it is in, the
/// line it is on, and where a key of the flat schema went.
pub(super) fn syntax_error(text: &str, origin: &str, e: &toml::de::Error) -> CatalogError {
    let at = e.span().map(|s| s.start);
    let mut message = e.message().trim_end().to_string();
    // An unknown key is named by the message; other problems are shown on their line.
    if !message.starts_with("unknown field") {
        if let Some(line) = at.and_then(|at| excerpt(text, at)) {
            message.push_str(&format!(", in `{line}`"));
        }
    }
    if let Some(hint) = moved_key_hint(&message) {
        message.push_str(&format!("; {hint}"));
    }
    CatalogError::Syntax {
        origin: origin.to_string(),
        position: at.map(|at| Position::of(&Lines::new(text), at)),
        entry: at.and_then(|at| entry_at(text, at)),
        message,
    }
}
