//! Scenario problems: what is wrong, where (key path, line and column or `--set`), the bad
//! value, and how to fix it. All problems of a scenario are collected and reported together.

use std::fmt;
use std::path::PathBuf;

use super::tree::Origin;
use crate::diagnostic::Lines;

/// Where a problem is, as shown to the user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Location {
    /// Line and column in the scenario file (both from 1).
    Line {
        /// Line, from 1.
        line: usize,
        /// Column in characters, from 1.
        column: usize,
    },
    /// A command-line override.
    Set(String),
    /// Nowhere in particular (e.g. a missing key in a missing table).
    #[default]
    None,
}

impl Location {
    /// Resolve an origin against the scenario text's lines.
    pub fn from_origin(origin: &Origin, lines: &Lines) -> Self {
        match origin {
            Origin::File(r) => {
                let (line, column) = lines.line_col(r.start);
                Location::Line { line, column }
            }
            Origin::Override(s) => Location::Set(s.clone()),
            Origin::Unknown => Location::None,
        }
    }
}

/// One thing wrong with a scenario.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Problem {
    /// Dotted key path (`client.concurrency`); empty for a syntax error.
    pub key_path: String,
    /// Where it is.
    pub location: Location,
    /// What is wrong, in lowercase, without the key or value.
    pub message: String,
    /// The offending value as written, if there is one.
    pub value: Option<String>,
    /// How to fix it.
    pub hint: Option<String>,
}

/// A scenario with one or more problems. Nothing was simulated.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioError {
    /// The scenario's name as given on the command line (or `<built-in …>`).
    pub source_name: String,
    /// Every problem found, in file order where known.
    pub problems: Vec<Problem>,
}

impl ScenarioError {
    /// One line per problem: `file:line:col: key = value: message`.
    pub fn problem_line(&self, p: &Problem) -> String {
        let place = match &p.location {
            Location::Line { line, column } => format!("{}:{line}:{column}: ", self.source_name),
            Location::Set(s) => format!("override `{s}`: "),
            Location::None => format!("{}: ", self.source_name),
        };
        let what = match (&p.key_path.is_empty(), &p.value) {
            (true, _) => String::new(),
            (false, Some(v)) => format!("{} = {v}: ", p.key_path),
            (false, None) => format!("{}: ", p.key_path),
        };
        format!("{place}{what}{}", p.message)
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, n) = (&self.source_name, self.problems.len());
        let s = if n == 1 { "" } else { "s" };
        write!(f, "scenario `{name}` is invalid ({n} problem{s})")
    }
}

impl std::error::Error for ScenarioError {}

/// Everything that can go wrong when loading a scenario.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read scenario `{}`", path.display())]
    Read {
        /// The path given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not UTF-8.
    #[error("scenario `{}` is not UTF-8 text (first bad byte at offset {offset})", path.display())]
    NotUtf8 {
        /// The path given.
        path: PathBuf,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// The file is larger than a scenario may be.
    #[error("scenario `{}` holds more than {limit} bytes", path.display())]
    TooLarge {
        /// The path given.
        path: PathBuf,
        /// The cap, in bytes ([`super::MAX_SCENARIO_BYTES`]).
        limit: u64,
    },
    /// The text was read but the scenario is invalid.
    #[error(transparent)]
    Invalid(#[from] ScenarioError),
}
