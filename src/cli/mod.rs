//! The command line: one file per verb, argument groups shared by the verbs, error rendering
//! and exit codes (0 success, 1 a run that cannot finish or an output that cannot be written,
//! 2 bad usage or a bad scenario — nothing written, 130 / 143 stopped by SIGINT / SIGTERM —
//! nothing written).
//!
//! * `args` — the argument groups the verbs share (scenario and `--set`, outputs, `--jobs`);
//!   `values` — the value parsers of typed flags.
//! * one file per verb: `run`, `sweep` (with `merge`), `explain`, `plan`, `memory`, `catalog`,
//!   `check`, `compare`, `calibrate`, each with its `Args` and `run(Args) -> Result<(), Failure>`.
//! * `parallel` — a parallel map with a progress bar; `interrupt` — SIGINT and SIGTERM;
//!   `output` — the output files, written as one set under one rule; `term` — stdout and
//!   stderr without panics; `table` — terminal tables; [`Failure`] — `error:` /
//!   `caused by:` / `hint:` and the exit code.
//!
//! Adding a verb: a new file with its `Args` and `run`, one arm in `Command` and in `dispatch`.

mod args;
mod calibrate;
mod catalog;
mod check;
mod compare;
mod explain;
mod failure;
mod interrupt;
mod memory;
mod output;
mod parallel;
mod plan;
mod run;
mod sweep;
mod table;
mod term;
mod values;

pub use output::FAIL_COMMIT_AFTER;

use clap::{Parser, Subcommand};

pub use failure::Failure;

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
    ///
    /// --out writes summary.json, timeseries.csv, server.log and the figures.
    Run(run::Args),
    /// Run a what-if grid: every combination of the --vary values, in parallel.
    ///
    /// --out writes sweep.csv and the figures (a shard: sweep.csv and sweep-shard.json); the
    /// table is then printed only when stdout is a terminal.
    Sweep(sweep::Args),
    /// Combine the outputs of sharded sweeps into one sweep.csv.
    Merge(sweep::MergeArgs),
    /// Tell the story of a run: why the client's lifetime rate differs from the server's
    /// throughput, in numbers from this run.
    Explain(explain::Args),
    /// Which GPU type, how many and which layout finish the workload by a deadline, cheapest
    /// first (roofline step times from the catalog's datasheet figures).
    ///
    /// The scenario gives the model, the workload and the client; it must not pin the KV
    /// budget or the weights, which each candidate derives from its GPU. --load saturate
    /// replaces the client's concurrency by the one that keeps each server full (searched);
    /// --slo-ttft-p99-s / --slo-tpot-p99-ms search instead the highest rate each candidate
    /// sustains within the bounds. --out writes plan.csv, plan.json and (without an SLO) the
    /// cost-versus-time figure.
    Plan(plan::Args),
    /// The KV budget from GPU memory, term by term, with an out-of-memory verdict.
    Memory(memory::Args),
    /// List the built-in GPUs and models (and those of a catalog file of your own).
    Catalog(catalog::Args),
    /// Validate scenario files and report every problem.
    Check(check::Args),
    /// Replay a bench_serving / vllm bench serve result file through a scenario and set the
    /// measured and simulated metrics side by side.
    ///
    /// --out writes compare.json and the figure of the CDFs.
    Compare(compare::Args),
    /// Fit the step times to a real server's log (SGLang or vLLM) and write a scenario
    /// fragment: the KV pool and settings from the start-up lines, the step-time coefficients
    /// from the periodic lines, with the fit's quality.
    Calibrate(calibrate::Args),
}

/// Parse the arguments and run; returns the exit code.
pub fn main() -> i32 {
    let code = match Cli::try_parse() {
        Ok(cli) => {
            interrupt::install();
            match dispatch(cli.command) {
                Ok(()) => 0,
                Err(f) if f.is_quiet() => 0,
                Err(f) => {
                    term::err(&f.render());
                    f.code
                }
            }
        }
        Err(e) => match Failure::from_clap(&e) {
            Some(f) => {
                term::err(&f.render());
                f.code
            }
            None => {
                let code = if e.use_stderr() { 2 } else { 0 };
                match e.print() {
                    Err(p) if p.kind() != std::io::ErrorKind::BrokenPipe => code.max(1),
                    _ => code,
                }
            }
        },
    };
    if code == 0 && term::stderr_failed() {
        1
    } else {
        code
    }
}

fn dispatch(command: Command) -> Result<(), Failure> {
    match command {
        Command::Run(a) => run::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Merge(a) => sweep::merge(a),
        Command::Explain(a) => explain::run(a),
        Command::Plan(a) => plan::run(a),
        Command::Memory(a) => memory::run(a),
        Command::Catalog(a) => catalog::run(a),
        Command::Check(a) => check::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Calibrate(a) => calibrate::run(a),
    }
}
