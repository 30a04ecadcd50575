//! What the command line reports when it fails: `error:` / `caused by:` / `hint:` on stderr
//! and the exit code (1 a run that cannot finish or an output that cannot be written, 2 bad
//! usage or a bad scenario, 130 / 143 stopped by SIGINT / SIGTERM; 0 and nothing printed when
//! stdout was closed by its reader).

use clap::error::{ContextKind, ContextValue, ErrorKind};

use super::values::FlagError;
use crate::engine::SimError;
use crate::scenario::{LoadError, ScenarioError};

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
    /// Bad usage (exit code 2): the message and how to fix it.
    pub(super) fn usage(error: impl Into<String>, hint: impl Into<String>) -> Self {
        Failure {
            error: error.into(),
            causes: Vec::new(),
            hint: Some(hint.into()),
            code: 2,
        }
    }

    /// A runtime failure (exit code 1) with its cause.
    pub(super) fn runtime(error: impl Into<String>, cause: impl ToString) -> Self {
        Failure {
            error: error.into(),
            causes: vec![(cause.to_string(), None)],
            hint: None,
            code: 1,
        }
    }

    /// A signal (`SIGINT`, `SIGTERM`) stopped the command before anything was written; `code`
    /// is 128 + its number.
    pub(super) fn interrupted(signal: &str, code: i32) -> Self {
        Failure {
            error: format!("interrupted by {signal}: nothing was written"),
            causes: Vec::new(),
            hint: None,
            code,
        }
    }

    /// The reader of stdout went away (`servesim … | head`): stop quietly, exit code 0.
    pub(super) fn closed_stdout() -> Self {
        Failure {
            error: String::new(),
            causes: Vec::new(),
            hint: None,
            code: 0,
        }
    }

    /// Whether this only stops the command quietly (see [`Failure::closed_stdout`]).
    pub(super) fn is_quiet(&self) -> bool {
        self.code == 0 && self.error.is_empty()
    }

    /// A flag whose value a value parser of [`super::values`] refused, rendered like every
    /// other failure; `None` for clap's own errors (unknown flags, missing arguments, help),
    /// which clap renders itself.
    pub(super) fn from_clap(e: &clap::Error) -> Option<Self> {
        if e.kind() != ErrorKind::ValueValidation {
            return None;
        }
        let bad = std::error::Error::source(e)?.downcast_ref::<FlagError>()?;
        let flag = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(s)) => s.split(' ').next().unwrap_or(s).to_string(),
            _ => "argument".to_string(),
        };
        Some(Failure {
            error: format!("bad {flag}"),
            causes: vec![(format!("{flag} {}", bad.message), None)],
            hint: Some(bad.hint.clone()),
            code: 2,
        })
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
            LoadError::TooLarge { path, limit } => Failure {
                error: format!("scenario `{}` is too large", path.display()),
                causes: vec![(
                    format!("it holds more than {limit} bytes, the most a scenario file may have"),
                    None,
                )],
                hint: Some(
                    "check the path; put large data in a CSV file (`file = …` and `column = …`)"
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
        match &e {
            SimError::Stuck { reason, .. } => Failure {
                error: e.to_string(),
                causes: vec![(reason.clone(), None)],
                hint: Some("raise engine.kv_capacity_tokens, or lower the prompt lengths or workload.max_new_tokens".into()),
                code: 1,
            },
            SimError::TooManyBatches {
                retractions,
                engine,
                ..
            } => Failure {
                error: e.to_string(),
                causes: vec![(
                    format!("{retractions} {} so far", crate::scheduler::words(*engine).evictions),
                    None,
                )],
                hint: Some(if *retractions > 0 {
                    format!(
                        "a run that {} this often thrashes: raise engine.kv_capacity_tokens or lower client.concurrency; or raise run.max_events if the run is merely long",
                        crate::scheduler::words(*engine).evicts
                    )
                } else {
                    "raise run.max_events, or lower workload.requests".into()
                }),
                code: 1,
            },
            SimError::OutOfMemory { reason, .. } => Failure {
                error: e.to_string(),
                causes: vec![(reason.clone(), None)],
                hint: Some("raise engine.kv_capacity_tokens, or keep fewer requests in flight (client.concurrency, engine.max_running_requests)".into()),
                code: 1,
            },
            SimError::Interrupted => super::interrupt::failure(),
            SimError::TimeOverflow { left, .. } => Failure {
                error: e.to_string(),
                causes: vec![(format!("{left} request(s) unanswered"), None)],
                hint: Some("time this long comes from extreme inputs: raise client.rate_per_s, lower client.think_time_s or the engine.step_time coefficients, or set run.max_sim_s to stop the run earlier".into()),
                code: 1,
            },
        }
    }
}

impl From<crate::report::plots::PlotError> for Failure {
    fn from(e: crate::report::plots::PlotError) -> Self {
        Failure {
            error: "cannot draw the figures".into(),
            causes: vec![(e.to_string(), None)],
            hint: Some("rerun with --no-plots to write the data without figures".into()),
            code: 1,
        }
    }
}
