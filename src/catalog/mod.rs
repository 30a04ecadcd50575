//! Built-in catalog of GPUs and models, extensible with a user file.
//!
//! The data lives beside this file in `gpus.toml` (`[[gpu]]` tables) and `models.toml`
//! (`[[model]]` tables) and is compiled into the binary. Each entry carries a `source` naming
//! where its figures come from. A user catalog file has the same schema, may hold both kinds of
//! tables, and extends the built-in catalog: an entry whose `name` equals an existing name
//! (case-insensitively) replaces that entry, any other entry is added.
//!
//! The schema is parsed by serde with unknown keys refused; a model's attention is a tagged
//! table and its experts and vision tower optional tables ([`Attention`], [`Moe`],
//! [`VisionTower`]), so an entry that mixes
//! kinds up cannot be written. Errors name the file, line and column, and the entry
//! ([`CatalogError`]).
//!
//! Lookups ([`Catalog::gpu`], [`Catalog::model`]) accept a name or any alias, in any case;
//! [`Catalog::suggest_gpu`] and [`Catalog::suggest_model`] offer the closest name for a typo.
//!
//! Besides the facts, [`Model`] derives what the memory model and a roofline step-time model need:
//! KV bytes per token under tensor parallelism (SGLang's rules), parameter counts by component,
//! and weight bytes in total and per GPU.

mod error;
mod gpu;
mod model;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;
use toml::Spanned;

use crate::diagnostic::{closest, Lines};
pub use error::{CatalogError, EntryKind, EntryRef, Position};
pub use gpu::Gpu;
pub use model::{Attention, Model, Moe, ParamCounts, VisionTower, WeightDtype};

/// The built-in GPU table (`src/catalog/gpus.toml`).
const GPUS_TOML: &str = include_str!("gpus.toml");
/// The built-in model table (`src/catalog/models.toml`).
const MODELS_TOML: &str = include_str!("models.toml");

/// The first float that is not finite or out of range: `positive` must be > 0, `non_negative`
/// ≥ 0.
fn positive_and_finite(positive: &[(&str, f64)], non_negative: &[(&str, f64)]) -> Option<String> {
    for (key, v) in positive {
        if !v.is_finite() || *v <= 0.0 {
            return Some(format!("{key} must be a finite number > 0, not {v}"));
        }
    }
    for (key, v) in non_negative {
        if !v.is_finite() || *v < 0.0 {
            return Some(format!("{key} must be a finite number >= 0, not {v}"));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The catalog

/// The schema of a catalog file: any number of `[[gpu]]` and `[[model]]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    #[serde(default)]
    gpu: Vec<Spanned<Gpu>>,
    #[serde(default)]
    model: Vec<Spanned<Model>>,
}

/// GPUs and models by name. Built from the built-in data, optionally extended by a user file.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalog {
    /// GPUs, built-in order first, then user additions.
    pub gpus: Vec<Gpu>,
    /// Models, built-in order first, then user additions.
    pub models: Vec<Model>,
}

/// What [`Catalog`] needs to know about an entry to merge and look it up.
trait Entry: Clone {
    const KIND: EntryKind;
    fn name(&self) -> &str;
    fn aliases(&self) -> &[String];
    fn problem(&self) -> Option<String>;
}

impl Entry for Gpu {
    const KIND: EntryKind = EntryKind::Gpu;
    fn name(&self) -> &str {
        &self.name
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn problem(&self) -> Option<String> {
        Gpu::problem(self)
    }
}

impl Entry for Model {
    const KIND: EntryKind = EntryKind::Model;
    fn name(&self) -> &str {
        &self.name
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn problem(&self) -> Option<String> {
        Model::problem(self)
    }
}

/// Names are compared trimmed and lowercased.
fn normalize(name: &str) -> String {
    name.trim().to_lowercase()
}

/// Whether `entry` answers to `query` (already normalized) by name or alias.
fn answers_to<E: Entry>(entry: &E, query: &str) -> bool {
    normalize(entry.name()) == query || entry.aliases().iter().any(|a| normalize(a) == query)
}

/// Validate `new` entries of one file and merge them into `list`: a new entry replaces the entry
/// of the same name, others are appended. Afterwards every name and alias must be unique.
/// Names are looked up in hash maps, so a large file is merged in time linear in its entries.
fn merge<E: Entry>(
    list: &mut Vec<E>,
    new: Vec<Spanned<E>>,
    text: &str,
    origin: &str,
) -> Result<(), CatalogError> {
    // This file's entries by normalized name, with where each is.
    let mut added: HashMap<String, Option<Position>> = HashMap::new();
    let mut index: HashMap<String, usize> = (list.iter().enumerate())
        .map(|(i, e)| (normalize(e.name()), i))
        .collect();
    let lines = Lines::new(text);
    for spanned in new {
        let position = Some(Position::of(&lines, spanned.span().start));
        let entry = spanned.into_inner();
        if let Some(message) = entry.problem() {
            return Err(CatalogError::Invalid {
                origin: origin.to_string(),
                position,
                kind: E::KIND,
                name: entry.name().to_string(),
                message,
            });
        }
        let key = normalize(entry.name());
        if let Some(first) = added.get(&key) {
            let line = first
                .map(|p| format!(" (first at line {})", p.line))
                .unwrap_or_default();
            return Err(CatalogError::Invalid {
                origin: origin.to_string(),
                position,
                kind: E::KIND,
                name: entry.name().to_string(),
                message: format!("defined twice in this file{line}"),
            });
        }
        match index.get(&key) {
            Some(&i) => list[i] = entry,
            None => {
                index.insert(key.clone(), list.len());
                list.push(entry);
            }
        }
        added.insert(key, position);
    }
    // Every key (name or alias) must lead to one entry. Report against a new entry when one is
    // involved, so the message points into the file being merged.
    let position_of = |name: &str| added.get(&normalize(name)).copied().flatten();
    let keys_of = |e: &E| -> Vec<String> {
        std::iter::once(e.name())
            .chain(e.aliases().iter().map(String::as_str))
            .map(normalize)
            .collect()
    };
    // The entries answering to each key, in list order.
    let mut owners: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, e) in list.iter().enumerate() {
        let mut keys = keys_of(e);
        keys.sort_unstable();
        keys.dedup();
        for k in keys {
            owners.entry(k).or_default().push(i);
        }
    }
    // Check this file's entries first, so that a clash is reported against the entry being
    // merged (with its line) rather than against the entry it collides with.
    let is_new = |e: &E| added.contains_key(&normalize(e.name()));
    let order = (0..list.len())
        .filter(|&i| is_new(&list[i]))
        .chain((0..list.len()).filter(|&i| !is_new(&list[i])));
    for i in order {
        let entry = &list[i];
        let own = keys_of(entry);
        let keys = std::iter::once(entry.name()).chain(entry.aliases().iter().map(String::as_str));
        for (key, k) in keys.zip(&own) {
            if k.is_empty() {
                return Err(CatalogError::Invalid {
                    origin: origin.to_string(),
                    position: position_of(entry.name()),
                    kind: E::KIND,
                    name: entry.name().to_string(),
                    message: "aliases must not be empty".into(),
                });
            }
            let clash = owners[k].iter().find(|&&j| j != i);
            let own_twice = own.iter().filter(|a| *a == k).count() > 1;
            let other = match (clash, own_twice) {
                (Some(&j), _) => list[j].name(),
                (None, true) => entry.name(),
                (None, false) => continue,
            };
            return Err(CatalogError::Duplicate {
                origin: origin.to_string(),
                position: position_of(entry.name()),
                kind: E::KIND,
                name: entry.name().to_string(),
                key: key.to_string(),
                other: other.to_string(),
            });
        }
    }
    Ok(())
}

/// The closest name or alias to `query` among `entries`, as the entry's canonical name, if it
/// is close enough to be a typo.
fn suggest<'a, E: Entry + 'a>(
    entries: impl Iterator<Item = &'a E> + Clone,
    query: &str,
) -> Option<&'a str> {
    let query = normalize(query);
    let keys = || {
        entries.clone().flat_map(|e| {
            std::iter::once(e.name())
                .chain(e.aliases().iter().map(String::as_str))
                .map(move |key| (normalize(key), e.name()))
        })
    };
    // A name that starts with what was typed ("a100" → "a100-80gb") beats a near spelling.
    keys()
        .find(|(key, _)| key.starts_with(&query))
        .map(|(_, name)| name)
        .or_else(|| closest(&query, keys()))
}

impl Catalog {
    /// A catalog with no entries (the starting point for [`Catalog::extend_from_str`]).
    pub fn empty() -> Self {
        Catalog {
            gpus: Vec::new(),
            models: Vec::new(),
        }
    }

    /// The built-in catalog, parsed once from the data compiled into the binary.
    ///
    /// # Panics
    ///
    /// If the built-in data is malformed — a broken internal invariant that the unit tests
    /// rule out.
    pub fn builtin() -> Self {
        Self::builtin_ref().clone()
    }

    /// The built-in catalog, shared (see [`Catalog::builtin`]).
    pub fn builtin_ref() -> &'static Catalog {
        static BUILTIN: OnceLock<Catalog> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            let mut catalog = Catalog::empty();
            let parsed = catalog
                .extend_from_str(GPUS_TOML, "<built-in src/catalog/gpus.toml>")
                .and_then(|()| {
                    catalog.extend_from_str(MODELS_TOML, "<built-in src/catalog/models.toml>")
                });
            if let Err(e) = parsed {
                panic!("invariant broken: the built-in catalog data must parse and validate: {e}");
            }
            catalog
        })
    }

    /// The built-in catalog extended by the user catalog file at `path` (same `[[gpu]]` /
    /// `[[model]]` schema): an entry whose name equals an existing name replaces that entry,
    /// other entries are added. Errors name the file and, where the parser gives one, the line
    /// and column.
    pub fn with_user_file(path: &Path) -> Result<Self, CatalogError> {
        let text = crate::files::read_text(path, crate::files::MAX_CATALOG_BYTES).map_err(|e| {
            CatalogError::Read {
                path: path.to_path_buf(),
                source: e.into(),
            }
        })?;
        let mut catalog = Catalog::builtin();
        catalog.extend_from_str(&text, &path.display().to_string())?;
        Ok(catalog)
    }

    /// Merge the entries of catalog text `text` (named `origin` in errors) into this catalog, as
    /// [`Catalog::with_user_file`] does. On error the catalog is left unchanged.
    pub fn extend_from_str(&mut self, text: &str, origin: &str) -> Result<(), CatalogError> {
        let file: CatalogFile =
            toml::from_str(text).map_err(|e| error::syntax_error(text, origin, &e))?;
        let mut next = self.clone();
        merge(&mut next.gpus, file.gpu, text, origin)?;
        merge(&mut next.models, file.model, text, origin)?;
        *self = next;
        Ok(())
    }

    /// The GPU with this name or alias (case-insensitive).
    pub fn gpu(&self, name: &str) -> Option<&Gpu> {
        let query = normalize(name);
        self.gpus.iter().find(|g| answers_to(*g, &query))
    }

    /// The model with this name or alias (case-insensitive).
    pub fn model(&self, name: &str) -> Option<&Model> {
        let query = normalize(name);
        self.models.iter().find(|m| answers_to(*m, &query))
    }

    /// The GPU with this name or alias, or an [`CatalogError::Unknown`] with a suggestion.
    pub fn lookup_gpu(&self, name: &str) -> Result<&Gpu, CatalogError> {
        self.gpu(name).ok_or_else(|| CatalogError::Unknown {
            kind: EntryKind::Gpu,
            name: name.to_string(),
            suggestion: self.suggest_gpu(name).map(str::to_string),
        })
    }

    /// The model with this name or alias, or an [`CatalogError::Unknown`] with a suggestion.
    pub fn lookup_model(&self, name: &str) -> Result<&Model, CatalogError> {
        self.model(name).ok_or_else(|| CatalogError::Unknown {
            kind: EntryKind::Model,
            name: name.to_string(),
            suggestion: self.suggest_model(name).map(str::to_string),
        })
    }

    /// The name of the GPU whose name or alias is closest to `name`, if it is close enough to
    /// be a typo ("did you mean").
    pub fn suggest_gpu(&self, name: &str) -> Option<&str> {
        suggest(self.gpus.iter(), name)
    }

    /// The name of the model whose name or alias is closest to `name`, if it is close enough to
    /// be a typo ("did you mean").
    pub fn suggest_model(&self, name: &str) -> Option<&str> {
        suggest(self.models.iter(), name)
    }
}
