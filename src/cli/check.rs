//! `servesim check`: validate scenario files and report every problem of every file.

use std::path::PathBuf;

use super::args::SetArgs;
use super::{term, Failure};
use crate::memory::Verdict;
use crate::report::text::thousands;
use crate::scenario::{self, KvSource, MemoryDerivation, MemoryModel, Scenario, Source};

/// `servesim check`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Scenario files.
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    #[command(flatten)]
    set: SetArgs,
}

/// What a reader of this scenario's numbers must know: step times that describe no hardware,
/// memory settings predicted to run out of memory, weights given at odds with their format.
pub(super) fn warnings(sc: &Scenario) -> Vec<String> {
    let tp = sc.hardware.as_ref().map_or(1, |h| h.tensor_parallel);
    let mut w: Vec<String> = sc.engine.step_time.warning().into_iter().collect();
    w.extend(sc.memory.as_ref().and_then(MemoryModel::oom_warning));
    w.extend(sc.model.as_ref().and_then(|m| m.weights_note(tp)));
    w
}

/// Print [`warnings`] on stderr, each after `warning: `.
pub(super) fn warn(sc: &Scenario) {
    for w in warnings(sc) {
        term::note(&format!("warning: {w}"));
    }
}

/// A sweep's warnings: the base scenario's own (when it is valid without the axes), and how
/// many points are predicted to run out of memory.
pub(super) fn warn_sweep(base: Option<&Scenario>, points: &[Scenario]) {
    if let Some(sc) = base {
        warn(sc);
    }
    let oom = points
        .iter()
        .filter(|p| p.memory.as_ref().and_then(MemoryModel::verdict) == Some(Verdict::Oom))
        .count();
    if oom > 0 {
        term::note(&format!(
            "warning: {oom} of {} points are predicted to run out of memory (memory = oom): their numbers are those of a server that would not survive",
            points.len()
        ));
    }
}

/// The memory verdict in one line.
fn memory_line(sc: &Scenario, m: &MemoryModel) -> String {
    let pool = match sc.engine.kv_source {
        KvSource::Derived => format!(
            "KV pool {} tokens (derived from memory)",
            thousands(sc.engine.kv_capacity_tokens)
        ),
        pin => format!(
            "KV pool {} tokens ({}: it overrides the {} derived from memory)",
            thousands(sc.engine.kv_capacity_tokens),
            pin.as_str(),
            thousands(m.kv_tokens())
        ),
    };
    match &m.derivation {
        MemoryDerivation::Sglang(s) => format!(
            "{pool}; {} at mem_fraction_static {:.3} (slack {:.2} GiB, need {:.2} GiB; largest safe fraction {:.3})",
            s.verdict.as_str(),
            s.inputs.mem_fraction_static,
            s.slack_gib,
            s.need_gib,
            s.largest_safe_fraction
        ),
        MemoryDerivation::Vllm(v) if v.starts() => format!("{pool}; vLLM starts"),
        MemoryDerivation::Vllm(_) => format!("{pool}; vLLM would not start"),
    }
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let mut failures: Vec<Failure> = Vec::new();
    for p in &args.scenarios {
        let loaded = Source::read(p)
            .map_err(Failure::from)
            .and_then(|s| Ok(scenario::load(&s, &args.set.sets)?));
        match loaded {
            Ok(sc) => {
                let mut text = format!("ok: {} ({})\n", p.display(), sc.name);
                text.push_str(&format!(
                    "  step times: {}\n",
                    sc.engine.step_time.describe()
                ));
                if let Some(m) = &sc.memory {
                    text.push_str(&format!("  memory: {}\n", memory_line(&sc, m)));
                }
                for w in warnings(&sc) {
                    text.push_str(&format!("  warning: {w}\n"));
                }
                term::out(&text)?;
            }
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
