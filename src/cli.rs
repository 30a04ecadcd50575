//! The command line: argument parsing, the pipeline of each verb, error rendering and exit
//! codes (0 success, 1 runtime failure, 2 bad usage or bad scenario — nothing written).

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::analysis;
use crate::engine::{self, RunOptions, SimError};
use crate::report::{self, server_log, summary, text, timeseries};
use crate::scenario::{self, LoadError, Scenario, ScenarioError, Source};

/// servesim — a discrete-event simulator of batched LLM serving.
#[derive(Parser, Debug)]
#[command(name = "servesim", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Simulate one scenario and print the three views, the steady state and latencies.
    Run(RunArgs),
    /// Validate scenario files and report every problem.
    Check {
        /// Scenario files.
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        /// Override a key by its dotted path (applied to every file), e.g. client.concurrency=64.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Scenario file (default: the built-in case study B2).
    scenario: Option<PathBuf>,
    /// Override a key by its dotted path; the value is read as TOML (bare words as strings).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Also write summary.json, timeseries.csv and server.log into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the summary JSON instead of the human report.
    #[arg(long)]
    json: bool,
}

/// A failure to report: the message, its causes with hints, and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// `error: …`
    pub error: String,
    /// `caused by: …` lines, each with an optional `hint: …`.
    pub causes: Vec<(String, Option<String>)>,
    /// A final hint.
    pub hint: Option<String>,
    /// Exit code.
    pub code: i32,
}

impl Failure {
    fn usage(error: impl Into<String>, hint: impl Into<String>) -> Self {
        Failure {
            error: error.into(),
            causes: Vec::new(),
            hint: Some(hint.into()),
            code: 2,
        }
    }

    /// Render for stderr.
    pub fn render(&self) -> String {
        let mut s = format!("error: {}\n", self.error);
        for (c, h) in &self.causes {
            s.push_str(&format!("caused by: {c}\n"));
            if let Some(h) = h {
                s.push_str(&format!("hint: {h}\n"));
            }
        }
        if let Some(h) = &self.hint {
            s.push_str(&format!("hint: {h}\n"));
        }
        s
    }
}

impl From<ScenarioError> for Failure {
    fn from(e: ScenarioError) -> Self {
        let causes = e
            .problems
            .iter()
            .map(|p| (e.problem_line(p), p.hint.clone()))
            .collect();
        Failure {
            error: e.to_string(),
            causes,
            hint: None,
            code: 2,
        }
    }
}

impl From<LoadError> for Failure {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Invalid(se) => se.into(),
            LoadError::Read { path, source } => Failure {
                error: format!("cannot read scenario `{}`", path.display()),
                causes: vec![(source.to_string(), None)],
                hint: Some(
                    "check the path; `servesim run` without a file runs the built-in case study"
                        .into(),
                ),
                code: 2,
            },
            LoadError::NotUtf8 { path, offset } => Failure {
                error: format!("scenario `{}` is not UTF-8 text", path.display()),
                causes: vec![(format!("invalid byte at offset {offset}"), None)],
                hint: Some("save the file as UTF-8".into()),
                code: 2,
            },
        }
    }
}

impl From<SimError> for Failure {
    fn from(e: SimError) -> Self {
        let causes = match &e {
            SimError::Stuck { reason, .. } => vec![(reason.clone(), None)],
        };
        Failure {
            error: e.to_string(),
            causes,
            hint: Some("raise engine.kv_capacity_tokens, or lower the prompt lengths or workload.max_new_tokens".into()),
            code: 1,
        }
    }
}

/// Parse the arguments and run; returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match dispatch(cli) {
        Ok(()) => 0,
        Err(f) => {
            eprint!("{}", f.render());
            f.code
        }
    }
}

fn dispatch(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Run(args) => run(args),
        Command::Check { scenarios, sets } => check(&scenarios, &sets),
    }
}

fn load(path: Option<&Path>, sets: &[String]) -> Result<(Source, Scenario), Failure> {
    let source = match path {
        Some(p) => Source::read(p)?,
        None => Source::builtin_b2(),
    };
    let sc = scenario::load(&source, sets)?;
    Ok((source, sc))
}

fn check(paths: &[PathBuf], sets: &[String]) -> Result<(), Failure> {
    let mut failures: Vec<Failure> = Vec::new();
    for p in paths {
        match load(Some(p), sets) {
            Ok((_, sc)) => println!("ok: {} ({})", p.display(), sc.name),
            Err(f) => failures.push(f),
        }
    }
    match failures.len() {
        0 => Ok(()),
        1 => Err(failures.pop().expect("invariant: one failure")),
        n => {
            let mut causes = Vec::new();
            for f in failures {
                causes.push((f.error, None));
                causes.extend(f.causes);
            }
            Err(Failure {
                error: format!("{n} of {} scenarios are invalid", paths.len()),
                causes,
                hint: None,
                code: 2,
            })
        }
    }
}

fn run(args: RunArgs) -> Result<(), Failure> {
    let (source, sc) = load(args.scenario.as_deref(), &args.sets)?;
    if let Some(dir) = &args.out {
        prepare_out_dir(dir)?;
    }
    let opts = RunOptions {
        keep_log: args.out.is_some(),
        ..RunOptions::default()
    };
    let result = engine::run(&sc, &opts)?;
    let analysis = analysis::analyse(&result);
    let summary = summary::summarize(&sc, &result, &analysis);
    let json = summary::to_json(&summary);
    if let Some(dir) = &args.out {
        let tp = sc.hardware.as_ref().map_or(1, |h| h.tensor_parallel);
        let files: Vec<(&str, Vec<u8>)> = vec![
            ("summary.json", json.clone().into_bytes()),
            ("timeseries.csv", timeseries::to_csv(&result)),
            (
                "server.log",
                server_log::render(&result.log, tp).into_bytes(),
            ),
        ];
        write_outputs(dir, &files)?;
        eprintln!(
            "wrote {} to {}",
            files.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
            dir.display()
        );
    }
    if args.json {
        print!("{json}");
    } else {
        print!("{}", text::render(&summary, &source.name));
    }
    let _ = report::SIMPLIFICATIONS;
    Ok(())
}

fn prepare_out_dir(dir: &Path) -> Result<(), Failure> {
    if dir.exists() && !dir.is_dir() {
        return Err(Failure::usage(
            format!("--out `{}` exists and is not a directory", dir.display()),
            "give a directory path (it is created if missing)",
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::usage(
            format!(
                "cannot create the output directory `{}`: {e}",
                dir.display()
            ),
            "choose a writable location for --out",
        )
    })?;
    let probe = dir.join(format!(".servesim-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        Failure::usage(
            format!("cannot write into `{}`: {e}", dir.display()),
            "choose a writable location for --out",
        )
    })?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Write every file to a temporary name first, then rename them all into place: a failure
/// leaves the directory's previous files untouched.
fn write_outputs(dir: &Path, files: &[(&str, Vec<u8>)]) -> Result<(), Failure> {
    let runtime = |what: String, e: std::io::Error| Failure {
        error: what,
        causes: vec![(e.to_string(), None)],
        hint: None,
        code: 1,
    };
    let pid = std::process::id();
    let mut staged = Vec::new();
    for (name, bytes) in files {
        let tmp = dir.join(format!(".{name}.tmp-{pid}"));
        if let Err(e) = std::fs::write(&tmp, bytes) {
            for t in &staged {
                let _ = std::fs::remove_file(t);
            }
            let _ = std::fs::remove_file(&tmp);
            return Err(runtime(
                format!("cannot write `{}`", dir.join(name).display()),
                e,
            ));
        }
        staged.push(tmp);
    }
    for ((name, _), tmp) in files.iter().zip(&staged) {
        std::fs::rename(tmp, dir.join(name)).map_err(|e| {
            runtime(
                format!("cannot move `{}` into place", dir.join(name).display()),
                e,
            )
        })?;
    }
    Ok(())
}
