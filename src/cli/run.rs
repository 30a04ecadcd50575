//! `servesim run`: simulate one scenario; print the report or its JSON; with `--out`, write
//! summary.json, timeseries.csv, server.log (streamed as the run goes) and the figures.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::args::{JobsArgs, OutputArgs, ScenarioArgs};
use super::interrupt::{self, interruptible};
use super::output::{FileId, OutDir, Outputs};
use super::parallel::map_with_progress;
use super::{term, Failure};
use crate::analysis::{self, Analysis};
use crate::compare::{self, bench_json::BenchJson};
use crate::csv_rows;
use crate::engine::{self, RunOptions, Sinks, Stepping};
use crate::metrics::{RequestRecord, RunResult};
use crate::report::plots::{self, Format};
use crate::report::{requests, server_log, summary, text, timeseries};
use crate::scenario::Scenario;
use crate::scheduler::LogRecord;

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
    /// What to print: the text report, the summary JSON (as --json), or `bench-json`: one line
    /// with the keys of SGLang's bench_serving result file and its per-request details (the
    /// run goes step by step and keeps every request).
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    format: RunFormat,
    /// Also run the scenario under N − 1 further seeds (seed + 1, seed + 2, …), in parallel,
    /// and report the steady rate's 95 % t-interval across all N runs.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    replications: u64,
    #[command(flatten)]
    jobs: JobsArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum RunFormat {
    Text,
    Json,
    BenchJson,
}

/// The files of `--out`, planned before the run.
struct OutFiles {
    dir: OutDir,
    summary: FileId,
    timeseries: FileId,
    log: FileId,
    figures: Vec<(String, FileId)>,
}

/// The names of the run's figures, PNG and SVG: the prefix cache's only if it can hit.
fn figure_names(sc: &Scenario) -> Vec<String> {
    let cache = summary::prefix_cache_can_hit(sc).then_some("prefix-cache");
    let stems = ["throughput", "engine-state", "latency-cdf"]
        .into_iter()
        .chain(cache);
    let stems: Vec<&str> = stems.collect();
    let ext = |fmt: Format| {
        stems
            .iter()
            .map(move |s| format!("{s}.{}", fmt.extension()))
    };
    Format::ALL.into_iter().flat_map(ext).collect()
}

/// A writer that keeps its first error (the run cannot stop to report it), and is told what
/// the run answered or printed.
struct Stream<W> {
    w: Option<W>,
    error: Option<std::io::Error>,
}

impl<W> Stream<W> {
    fn new(w: Option<W>) -> Self {
        Stream { w, error: None }
    }

    fn put(&mut self, f: impl FnOnce(&mut W) -> std::io::Result<()>) {
        if let (Some(w), None) = (self.w.as_mut(), &self.error) {
            if let Err(e) = f(w) {
                self.error = Some(e);
            }
        }
    }

    /// Flush; the first error of the whole stream, if any.
    fn finish(
        mut self,
        flush: impl FnOnce(&mut W) -> std::io::Result<()>,
    ) -> Option<std::io::Error> {
        self.put(flush);
        self.error
    }
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let (source, sc) = args.scenario.load()?;
    // Every output path is checked, and staged, before the run.
    let mut outputs = Outputs::new(args.scenario.inputs(&sc));
    let files = match &args.output.out {
        Some(d) => {
            let dir = outputs.dir(d)?;
            let mut plan = |n: &str| outputs.file_in(&dir, n);
            let (summary, timeseries, log) = (
                plan("summary.json")?,
                plan("timeseries.csv")?,
                plan("server.log")?,
            );
            let mut figures = Vec::new();
            if args.output.figures() {
                for n in figure_names(&sc) {
                    figures.push((n.clone(), plan(&n)?));
                }
            }
            Some(OutFiles {
                dir,
                summary,
                timeseries,
                log,
                figures,
            })
        }
        None => None,
    };
    let csv_file = match &args.requests_csv {
        Some(p) => Some(outputs.file("--requests-csv", p)?),
        None => None,
    };
    let opts = RunOptions {
        stepping: if args.step_by_step {
            Stepping::StepByStep
        } else {
            Stepping::FastForward
        },
        keep_requests: args.format == RunFormat::BenchJson,
        keep_token_times: args.format == RunFormat::BenchJson,
        ..interruptible()
    };
    let mut result = simulate(
        &sc,
        &opts,
        &mut outputs,
        files.as_ref().map(|f| f.log),
        csv_file,
    )?;
    interrupt::test_signal_after_run();
    interrupt::check()?;
    let analysis = analysis::analyse(&result);
    interrupt::check()?;
    engine::record_steady_latencies(&sc, &opts, &mut result, &analysis)?;
    interrupt::check()?;
    let mut summary = summary::summarize(&sc, &result, &analysis);
    if args.replications > 1 {
        summary.replications = Some(replicate(
            &sc,
            &opts,
            &analysis,
            args.replications,
            args.jobs,
        )?);
        interrupt::check()?;
    }
    let json = summary::to_json(&summary);
    warn_rejections(&result);
    if let Some(f) = &files {
        outputs.write(f.summary, json.as_bytes())?;
        outputs.write(
            f.timeseries,
            &timeseries::to_csv(&result, sc.workload.shares_prefixes()),
        )?;
        for (name, bytes) in figures(&sc, &result, &analysis, &f.figures)? {
            interrupt::check()?;
            let id = f
                .figures
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, id)| *id);
            outputs.write(id.expect("invariant: every figure was planned"), &bytes)?;
        }
    }
    interrupt::check()?;
    let written = outputs.commit()?;
    if let Some(f) = &files {
        // The requests CSV, if any, is one of the files written.
        let n = written - usize::from(csv_file.is_some());
        term::note(&format!("wrote {n} files to {}", f.dir.shown().display()));
    }
    if args.format == RunFormat::BenchJson {
        let (samples, duration_s) = compare::simulated(&sc, &result);
        term::out(&BenchJson::new(&sc, &samples, duration_s).to_line())?;
    } else if args.output.json() || args.format == RunFormat::Json {
        term::out(&json)?;
    } else {
        term::out(&text::render(&summary, &source.name))?;
    }
    super::check::warn(&sc);
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
        keep_token_times: false,
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
        term::note(&format!(
            "warning: the server refused or aborted {} of {} requests (prompts too long for the KV pool or the context, as SGLang refuses them); they count as rejected, not completed",
            t.requests_rejected, t.requests_sent
        ));
    }
}

/// Run while streaming `server.log` and every answered request to their staged files, so that
/// memory stays independent of the number of requests.
fn simulate(
    sc: &Scenario,
    opts: &RunOptions,
    outputs: &mut Outputs,
    log_file: Option<FileId>,
    csv_file: Option<FileId>,
) -> Result<RunResult, Failure> {
    let kind = sc.engine.kind();
    let tp = sc.hardware.as_ref().map_or(1, |h| h.tensor_parallel);
    let mut log = Stream::new(log_file.map(|id| BufWriter::new(outputs.take_writer(id))));
    let mut header = requests::header(crate::scheduler::words(kind));
    // A workload that shares prompt prefixes adds the tokens each request found cached.
    let shares = sc.workload.shares_prefixes();
    if shares {
        header.push(requests::CACHED_COLUMN.to_string());
    }
    let mut csv = Stream::new(None);
    if let Some(id) = csv_file {
        match csv_rows::writer(BufWriter::new(outputs.take_writer(id)), &header) {
            Ok(w) => csv.w = Some(w),
            Err(e) => return Err(outputs.write_failure(id, e)),
        }
    }
    let mut log_sink = |r: &LogRecord| {
        log.put(|w| w.write_all(server_log::line(kind, r, tp).as_bytes()));
    };
    let mut csv_sink = |r: &RequestRecord| {
        csv.put(|w| {
            if shares {
                w.serialize((requests::Row::from(r), r.cached_tokens))
            } else {
                w.serialize(requests::Row::from(r))
            }
            .map_err(std::io::Error::other)
        });
    };
    let sinks = Sinks {
        requests: csv_file.map(|_| &mut csv_sink as &mut dyn FnMut(&RequestRecord)),
        log: log_file.map(|_| &mut log_sink as &mut dyn FnMut(&LogRecord)),
    };
    let result = engine::run_with_sinks(sc, opts, sinks);
    let result = result?;
    if let (Some(id), Some(e)) = (log_file, log.finish(Write::flush)) {
        return Err(outputs.write_failure(id, e));
    }
    if let (Some(id), Some(e)) = (csv_file, csv.finish(|w| w.flush())) {
        return Err(outputs.write_failure(id, e));
    }
    Ok(result)
}

/// The run's figures, PNG and SVG, as `(file name, bytes)`, drawn one by one so that a signal
/// stops between two.
fn figures(
    sc: &Scenario,
    r: &RunResult,
    a: &Analysis,
    wanted: &[(String, FileId)],
) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let observe: Vec<f64> = sc.run.observe_at.iter().map(|t| t.as_secs_f64()).collect();
    let mut out = Vec::new();
    for fmt in Format::ALL {
        let ext = fmt.extension();
        interrupt::check()?;
        out.push((
            format!("throughput.{ext}"),
            plots::throughput(r, a, &observe, fmt)?,
        ));
        out.push((format!("engine-state.{ext}"), plots::engine_state(r, fmt)?));
        out.push((format!("latency-cdf.{ext}"), plots::latency_cdf(r, fmt)?));
        if summary::prefix_cache_can_hit(sc) {
            let hits = plots::cache_hit_rate(r, &r.cache_hits(), fmt)?;
            out.push((format!("prefix-cache.{ext}"), hits));
        }
    }
    Ok(out)
}
