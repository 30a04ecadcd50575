//! `servesim calibrate`: fit the step times to a real server's log, report the fit's quality
//! and write a scenario fragment.

use std::path::PathBuf;

use super::output::Outputs;
use super::{interrupt, term, Failure};
use crate::calibrate::{self, fragment, LogError, Options};
use crate::scenario::EngineKind;

/// `servesim calibrate`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Server logs of one engine (SGLang's or vLLM's own, or servesim's server.log); runs at
    /// several loads determine the coefficients best.
    #[arg(required = true, value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// The engine that wrote the logs (detected from their lines when not given).
    #[arg(long, value_enum)]
    engine: Option<Engine>,
    /// SGLang's --decode-log-interval, when the log's server arguments do not say it (default 40).
    #[arg(long, value_name = "STEPS", value_parser = clap::value_parser!(u64).range(1..))]
    decode_log_interval: Option<u64>,
    /// SGLang ran with --enable-mixed-chunk (read from the log's server arguments when it has them).
    #[arg(long)]
    enable_mixed_chunk: bool,
    /// Write the scenario fragment to this file (else it is printed after the report).
    #[arg(long, value_name = "FRAGMENT.toml")]
    out: Option<PathBuf>,
    /// Also write the step times as a table (model = "table") to this CSV file, when the logs
    /// cover two points of its batch axis (the smallest and largest batch size and the powers of
    /// two between them) with three windows each; the fragment then uses it.
    #[arg(long, value_name = "TABLE.csv")]
    table: Option<PathBuf>,
}

/// The engines, as `--engine` names them.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Engine {
    Sglang,
    Vllm,
}

impl From<LogError> for Failure {
    fn from(e: LogError) -> Self {
        Failure {
            error: format!("cannot calibrate from `{}`", e.file),
            causes: vec![(e.to_string(), Some(e.hint))],
            hint: None,
            code: 2,
        }
    }
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    // The output paths are checked before anything is read.
    let mut outputs = Outputs::new(args.logs.iter().cloned());
    let table_file = args
        .table
        .as_deref()
        .map(|p| outputs.file("--table", p))
        .transpose()?;
    let out_file = args
        .out
        .as_deref()
        .map(|p| outputs.file("--out", p))
        .transpose()?;
    let logs = args
        .logs
        .iter()
        .map(|p| calibrate::read_log(p))
        .collect::<Result<Vec<_>, _>>()?;
    let options = Options {
        engine: args.engine.map(|e| match e {
            Engine::Sglang => EngineKind::Sglang,
            Engine::Vllm => EngineKind::Vllm,
        }),
        decode_log_interval: args.decode_log_interval,
        mixed_chunk: args.enable_mixed_chunk,
    };
    let c = calibrate::calibrate(&logs, options)?;
    let table = match &args.table {
        Some(_) => {
            let csv = calibrate::table::csv(&c).map_err(|e| {
                Failure::usage(
                    format!("cannot make a step-time table from these logs: {e}"),
                    "calibrate on logs of runs at several concurrencies, or drop --table for the linear fit",
                )
            })?;
            Some(csv)
        }
        None => None,
    };
    let table_name = args
        .table
        .as_deref()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    let text = fragment::fragment(&c, table_name.as_deref());
    let mut report = fragment::report(&c);
    if let (Some(id), Some(csv)) = (table_file, &table) {
        outputs.write(id, csv.as_bytes())?;
    }
    match out_file {
        Some(id) => outputs.write(id, text.as_bytes())?,
        None => {
            report.push('\n');
            report.push_str(&text);
        }
    }
    interrupt::check()?;
    outputs.commit()?;
    for p in [&args.table, &args.out].into_iter().flatten() {
        term::note(&format!("wrote {}", p.display()));
    }
    term::out(&report)?;
    Ok(())
}
