//! `servesim check`: validate scenario files and report every problem of every file.

use std::path::PathBuf;

use super::args::SetArgs;
use super::{term, Failure};
use crate::scenario::{self, Source};

/// `servesim check`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Scenario files.
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    #[command(flatten)]
    set: SetArgs,
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let mut failures: Vec<Failure> = Vec::new();
    for p in &args.scenarios {
        let loaded = Source::read(p)
            .map_err(Failure::from)
            .and_then(|s| Ok(scenario::load(&s, &args.set.sets)?));
        match loaded {
            Ok(sc) => term::out(&format!("ok: {} ({})\n", p.display(), sc.name))?,
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
                error: format!("{n} of {} scenarios are invalid", args.scenarios.len()),
                causes,
                hint: None,
                code: 2,
            })
        }
    }
}
