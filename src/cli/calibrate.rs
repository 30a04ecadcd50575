//! `servesim calibrate`: fit the step times to a real server's log, report the fit's quality
//! and write a scenario fragment.

use std::path::PathBuf;

use super::output::write_outputs;
use super::Failure;
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
    /// cover at least two batch sizes a factor 2 apart; the fragment then uses it.
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

/// The directory and file name of an output file path, checked before anything is written.
fn target(path: &std::path::Path) -> Result<(PathBuf, String), Failure> {
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(d), Some(n)) => (d.to_path_buf(), n.to_string_lossy().into_owned()),
        _ => {
            return Err(Failure::usage(
                format!("`{}` is not a file path", path.display()),
                "give a file name, e.g. --out calibrated.toml",
            ))
        }
    };
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    if !dir.is_dir() {
        return Err(Failure::usage(
            format!(
                "`{}`: the directory `{}` does not exist",
                path.display(),
                dir.display()
            ),
            "create the directory first, or write the file elsewhere",
        ));
    }
    Ok((dir, name))
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
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
        Some(path) => {
            let csv = calibrate::table::csv(&c).map_err(|e| {
                Failure::usage(
                    format!("cannot make a step-time table from these logs: {e}"),
                    "calibrate on logs of runs at several concurrencies, or drop --table for the linear fit",
                )
            })?;
            Some((target(path)?, csv))
        }
        None => None,
    };
    let out = args.out.as_deref().map(target).transpose()?;
    let table_name = table.as_ref().map(|((_, name), _)| name.clone());
    let text = fragment::fragment(&c, table_name.as_deref());
    print!("{}", fragment::report(&c));
    if let Some(((dir, name), csv)) = table {
        write_outputs(&dir, &[(name, csv.into_bytes())])?;
        println!(
            "wrote {}",
            args.table
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string())
        );
    }
    match out {
        Some((dir, name)) => {
            write_outputs(&dir, &[(name, text.into_bytes())])?;
            println!(
                "wrote {}",
                args.out
                    .as_ref()
                    .map_or(String::new(), |p| p.display().to_string())
            );
        }
        None => print!("\n{text}"),
    }
    Ok(())
}
