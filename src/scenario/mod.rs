//! Scenarios: the TOML contract of `shared/spec/scenario.md`, read in two layers.
//!
//! 1. [`tree`]: the file parsed into a tree that remembers where each value came from, with the
//!    `--set` overrides applied.
//! 2. [`validate`]: the tree walked against every declared key — each section of the scenario
//!    declares its keys beside the type it builds ([`schema`] lists them) — then the sections
//!    read their checked values in dependency order (`build.rs`) into a [`Scenario`]. Every
//!    problem is collected with its key path, position, bad value and a hint. A `Scenario` is
//!    valid by construction.

mod build;
pub mod error;
pub mod schema;
pub mod tree;
pub mod validate;

use std::path::{Path, PathBuf};

pub use error::{LoadError, Location, Problem, ScenarioError};
// Each section's spec lives with the code that reads and runs it.
pub use crate::cost::linear::LinearStepTime;
pub use crate::cost::StepTimeSpec;
pub use crate::memory::{HardwareSpec, KvSource, MemoryDerivation, MemoryModel, ModelSpec};
pub use crate::run::RunSpec;
pub use crate::scheduler::{EngineKind, EngineSpec, PolicySpec};
pub use crate::workload::client::ClientSpec;
pub use crate::workload::overhead::Overhead;
pub use crate::workload::WorkloadSpec;

/// The built-in case-study scenario (B2), the default of `servesim run`.
pub const BUILTIN_B2: &str = include_str!("../../scenarios/case-study-b2.toml");
/// Its display name.
pub const BUILTIN_B2_NAME: &str = "scenarios/case-study-b2.toml (built-in)";

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Shown in reports.
    pub name: String,
    /// Optional longer text shown in reports.
    pub description: Option<String>,
    /// Master seed of every random stream.
    pub seed: u64,
    /// Run control and observation.
    pub run: RunSpec,
    /// Hardware, when given.
    pub hardware: Option<HardwareSpec>,
    /// Model, when given.
    pub model: Option<ModelSpec>,
    /// The serving engine.
    pub engine: EngineSpec,
    /// What the client sends.
    pub workload: WorkloadSpec,
    /// How the client sends it.
    pub client: ClientSpec,
    /// Time off the GPU: network, HTTP and tokenizer, streaming (all zero by default).
    pub overhead: Overhead,
    /// The memory model, when the scenario has its inputs (hardware and model).
    pub memory: Option<MemoryModel>,
    /// The files the scenario reads besides itself (traces, data files, a catalog).
    pub inputs: Vec<PathBuf>,
}

/// The largest scenario file read: hundreds of times a real scenario, small enough that parsing
/// it stays within a few hundred megabytes (large data belongs in a data file: `file = …`).
pub const MAX_SCENARIO_BYTES: u64 = 4 << 20;

/// A scenario's text and the name to show for it.
#[derive(Clone, Debug)]
pub struct Source {
    /// Name shown in messages (the path as given, or the built-in's name).
    pub name: String,
    /// Directory against which relative paths (CSV files) are resolved.
    pub base_dir: PathBuf,
    /// The TOML text.
    pub text: String,
}

impl Source {
    /// Read a scenario file.
    pub fn read(path: &Path) -> Result<Source, LoadError> {
        use crate::files::{read_text, ReadError};
        let text = read_text(path, MAX_SCENARIO_BYTES).map_err(|e| {
            let path = path.to_path_buf();
            match e {
                ReadError::Io(source) => LoadError::Read { path, source },
                // (`read_text` has no line cap.)
                ReadError::TooLarge { limit } | ReadError::LineTooLong { limit } => {
                    LoadError::TooLarge { path, limit }
                }
                ReadError::NotUtf8 { offset } => LoadError::NotUtf8 { path, offset },
            }
        })?;
        let base_dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let name = path.display().to_string();
        Ok(Source {
            name,
            base_dir,
            text,
        })
    }

    /// The built-in B2 case-study scenario.
    pub fn builtin_b2() -> Source {
        Source {
            name: BUILTIN_B2_NAME.to_string(),
            base_dir: PathBuf::from("."),
            text: BUILTIN_B2.to_string(),
        }
    }
}

/// Parse, apply `--set` overrides, check every value, and build. Every problem is reported at
/// once.
pub fn load(source: &Source, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let invalid = |problems| ScenarioError {
        source_name: source.name.clone(),
        problems,
    };
    let mut reader = validate::Reader::read(source, sets).map_err(invalid)?;
    let built = build::build(&mut reader);
    let inputs = reader.inputs().to_vec();
    let mut problems = reader.into_problems();
    match built {
        Ok(scenario) if problems.is_empty() => Ok(Scenario { inputs, ..scenario }),
        _ => {
            let recorded = "invariant: a failed build recorded a problem";
            debug_assert!(!problems.is_empty(), "{recorded}");
            if problems.is_empty() {
                let message = "invalid scenario".to_string();
                problems.push(Problem {
                    message,
                    ..Problem::default()
                });
            }
            Err(invalid(problems))
        }
    }
}
