//! `servesim run`: simulate one scenario; print the report or its JSON; with `--out`, write
//! summary.json, timeseries.csv, server.log and the figures.

use std::path::{Path, PathBuf};

use super::args::{JobsArgs, OutputArgs, ScenarioArgs};
use super::output::{prepare_out_dir, write_outputs};
use super::parallel::{interruptible, map_with_progress};
use super::Failure;
use crate::analysis::{self, Analysis};
use crate::csv_rows;
use crate::engine::{self, RunOptions, Stepping};
use crate::metrics::{RequestRecord, RunResult};
use crate::report::plots::{self, Format};
use crate::report::{requests, server_log, summary, text, timeseries};
use crate::scenario::Scenario;

/// `servesim run`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    scenario: ScenarioArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Advance one decode step at a time (the reference engine; same results, slower).
    #[arg(long)]
    step_by_step: bool,
    /// Stream one row per answered request to this CSV file (memory stays constant).
    #[arg(long, value_name = "FILE")]
    requests_csv: Option<PathBuf>,
    /// Also run the scenario under N − 1 further seeds (seed + 1, seed + 2, …), in parallel,
    /// and report the steady rate's 95 % t-interval across all N runs.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    replications: u64,
    #[command(flatten)]
    jobs: JobsArgs,
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let (source, sc) = args.scenario.load()?;
    let out = args.output.out.as_deref();
    if let Some(dir) = out {
        prepare_out_dir(dir)?;
    }
    let opts = RunOptions {
        keep_log: out.is_some(),
        stepping: if args.step_by_step {
            Stepping::StepByStep
        } else {
            Stepping::FastForward
        },
        ..interruptible()
    };
    let mut result = match &args.requests_csv {
        None => engine::run(&sc, &opts)?,
        Some(path) => run_streaming_requests(&sc, &opts, path)?,
    };
    let analysis = analysis::analyse(&result);
    engine::record_steady_latencies(&sc, &opts, &mut result, &analysis)?;
    let mut summary = summary::summarize(&sc, &result, &analysis);
    if args.replications > 1 {
        summary.replications = Some(replicate(
            &sc,
            &opts,
            &analysis,
            args.replications,
            args.jobs,
        )?);
    }
    let json = summary::to_json(&summary);
    warn_rejections(&result);
    if let Some(dir) = out {
        let tp = sc.hardware.as_ref().map_or(1, |h| h.tensor_parallel);
        let mut files: Vec<(String, Vec<u8>)> = vec![
            ("summary.json".into(), json.clone().into_bytes()),
            ("timeseries.csv".into(), timeseries::to_csv(&result)),
            (
                "server.log".into(),
                server_log::render(sc.engine.kind(), &result.log, tp).into_bytes(),
            ),
        ];
        if args.output.figures() {
            files.extend(figures(&sc, &result, &analysis)?);
        }
        write_outputs(dir, &files)?;
        eprintln!("wrote {} files to {}", files.len(), dir.display());
    }
    if args.output.json() {
        print!("{json}");
    } else {
        print!("{}", text::render(&summary, &source.name));
    }
    Ok(())
}

/// The steady rates of `n` runs of `sc` — this one (analysed as `a`) and `n − 1` more under
/// the seeds after its own, run in parallel — and the interval across them.
fn replicate(
    sc: &Scenario,
    opts: &RunOptions,
    a: &Analysis,
    n: u64,
    jobs: JobsArgs,
) -> Result<analysis::Replications, Failure> {
    let seeds: Vec<u64> = (0..n).map(|i| sc.seed.wrapping_add(i)).collect();
    let opts = RunOptions {
        keep_log: false,
        keep_requests: false,
        ..opts.clone()
    };
    let rate = |seed: &u64| -> Result<Option<f64>, Failure> {
        let sc = Scenario {
            seed: *seed,
            ..sc.clone()
        };
        let r = engine::run(&sc, &opts)?;
        Ok(analysis::analyse(&r).steady().map(|w| w.span.req_per_s))
    };
    let more = map_with_progress(&seeds[1..], jobs, "replications", rate)?;
    let mut rates = vec![a.steady().map(|w| w.span.req_per_s)];
    for r in more {
        rates.push(r?);
    }
    Ok(analysis::replications::across(seeds, rates))
}

/// Say on stderr when the server refused some requests (they are counted in the report).
fn warn_rejections(r: &RunResult) {
    let t = &r.totals;
    if t.requests_rejected > 0 {
        eprintln!(
            "warning: the server refused or aborted {} of {} requests (prompts too long for the KV pool or the context, as SGLang refuses them); they count as rejected, not completed",
            t.requests_rejected, t.requests_sent
        );
    }
}

/// Run while streaming every answered request to a CSV file: written under a temporary name
/// and renamed when the run has finished, so a failed run leaves no half-written file.
fn run_streaming_requests(
    sc: &Scenario,
    opts: &RunOptions,
    path: &Path,
) -> Result<RunResult, Failure> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| {
        Failure::usage(
            format!("--requests-csv `{}` is not a file path", path.display()),
            "give a file name, e.g. --requests-csv requests.csv",
        )
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let file = std::fs::File::create(&tmp).map_err(|e| {
        Failure::usage(
            format!("cannot create `{}`: {e}", path.display()),
            "choose a writable location for --requests-csv",
        )
    })?;
    let header = requests::header(crate::scheduler::words(sc.engine.kind()));
    let mut failed: Option<String> = None;
    let mut w = csv_rows::writer(std::io::BufWriter::new(file), &header)
        .map_err(|e| failed = Some(e.to_string()))
        .ok();
    let mut sink = |r: &RequestRecord| {
        if let (Some(w), None) = (w.as_mut(), &failed) {
            if let Err(e) = w.serialize(requests::Row::from(r)) {
                failed = Some(e.to_string());
            }
        }
    };
    let result = engine::run_with_sink(sc, opts, Some(&mut sink));
    let flushed = w
        .as_mut()
        .and_then(|w| w.flush().err())
        .map(|e| e.to_string());
    drop(w);
    let cleanup = |why: String| {
        let _ = std::fs::remove_file(&tmp);
        Failure::runtime(format!("cannot write `{}`", path.display()), why)
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
    };
    if let Some(why) = failed.or(flushed) {
        return Err(cleanup(why));
    }
    std::fs::rename(&tmp, path).map_err(|e| cleanup(e.to_string()))?;
    Ok(result)
}

/// The run's figures, PNG and SVG, as `(file name, bytes)`.
fn figures(sc: &Scenario, r: &RunResult, a: &Analysis) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    let observe: Vec<f64> = sc.run.observe_at.iter().map(|t| t.as_secs_f64()).collect();
    let mut out = Vec::new();
    for fmt in Format::ALL {
        let ext = fmt.extension();
        out.push((
            format!("throughput.{ext}"),
            plots::throughput(r, a, &observe, fmt)?,
        ));
        out.push((format!("engine-state.{ext}"), plots::engine_state(r, fmt)?));
        out.push((format!("latency-cdf.{ext}"), plots::latency_cdf(r, fmt)?));
    }
    Ok(out)
}
