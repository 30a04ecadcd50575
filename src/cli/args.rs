//! Argument groups shared by the verbs, each declared once and flattened into a verb's
//! arguments with `#[command(flatten)]`.

use std::path::PathBuf;

use super::values;
use super::Failure;
use crate::scenario::{self, Scenario, Source};

/// `--set KEY=VALUE`, repeatable.
#[derive(clap::Args, Debug, Clone, Default)]
pub(super) struct SetArgs {
    /// Override a scenario key by its dotted path; the value is read as TOML (bare words as
    /// strings), e.g. client.concurrency=64. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

/// A scenario file, by default the built-in case study B2, and overrides.
#[derive(clap::Args, Debug)]
pub(super) struct ScenarioArgs {
    /// Scenario file (default: the built-in case study B2).
    pub scenario: Option<PathBuf>,
    #[command(flatten)]
    pub set: SetArgs,
}

impl ScenarioArgs {
    /// The scenario's text, read.
    pub fn source(&self) -> Result<Source, Failure> {
        Ok(match &self.scenario {
            Some(p) => Source::read(p)?,
            None => Source::builtin_b2(),
        })
    }

    /// The scenario, read and validated with the overrides.
    pub fn load(&self) -> Result<(Source, Scenario), Failure> {
        let source = self.source()?;
        let sc = scenario::load(&source, &self.set.sets)?;
        Ok((source, sc))
    }

    /// The files a command on this scenario reads: outputs must not replace them.
    pub fn inputs(&self, sc: &Scenario) -> Vec<PathBuf> {
        self.scenario.iter().chain(&sc.inputs).cloned().collect()
    }
}

/// A scenario file (required) and overrides applied to every run made from it.
#[derive(clap::Args, Debug)]
pub(super) struct ScenarioFileArgs {
    /// Scenario file.
    pub scenario: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
}

impl ScenarioFileArgs {
    /// The scenario's text, read.
    pub fn source(&self) -> Result<Source, Failure> {
        Ok(Source::read(&self.scenario)?)
    }

    /// The files a command on this scenario reads: outputs must not replace them.
    pub fn inputs(&self, sc: &Scenario) -> Vec<PathBuf> {
        std::iter::once(&self.scenario)
            .chain(&sc.inputs)
            .cloned()
            .collect()
    }
}

/// `--json`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(super) struct JsonArg {
    /// Print JSON instead of the text report or tables.
    #[arg(long)]
    pub json: bool,
}

/// Where the results go: a directory of files, JSON or text on stdout, with or without figures.
#[derive(clap::Args, Debug)]
pub(super) struct OutputArgs {
    /// Also write the data files and figures into this directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub print: JsonArg,
    /// With --out: skip the figures.
    #[arg(long)]
    pub no_plots: bool,
}

impl OutputArgs {
    /// Whether to print JSON.
    pub fn json(&self) -> bool {
        self.print.json
    }

    /// Whether to draw the figures into `--out`.
    pub fn figures(&self) -> bool {
        self.out.is_some() && !self.no_plots
    }
}

/// `--jobs N`: how many runs at once.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(super) struct JobsArgs {
    /// Runs at once (default: one per core; at most 1024).
    #[arg(long, value_name = "N", value_parser = values::jobs)]
    pub jobs: Option<usize>,
}
