//! The command line: argument parsing, the pipeline of each verb, error rendering and exit
//! codes (0 success, 1 runtime failure, 2 bad usage or bad scenario — nothing written).

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::analysis;
use crate::engine::{self, RunOptions, SimError};
use crate::report::{self, server_log, summary, text, timeseries};
use crate::scenario::{self, LoadError, Scenario, ScenarioError, Source};
use crate::sweep::{self, PointError, Shard, ShardManifest};

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
    /// Run a what-if grid: every combination of the --vary values, in parallel.
    Sweep(SweepArgs),
    /// Combine the outputs of sharded sweeps into one sweep.csv.
    Merge {
        /// Output directories of the shards (`sweep --shard I/N --out DIR`).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where to write the merged sweep.csv.
        #[arg(long, value_name = "DIR", required = true)]
        out: PathBuf,
    },
    /// Tell the story of a run: why the client's lifetime rate differs from the server's
    /// throughput, in numbers from this run.
    Explain {
        /// Scenario file (default: the built-in case study B2).
        scenario: Option<PathBuf>,
        /// Override a key.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// `text` or `markdown`.
        #[arg(long, value_enum, default_value_t = ExplainFormat::Text)]
        format: ExplainFormat,
    },
    /// Which GPU type, how many and which layout finish the workload by a deadline, cheapest
    /// first (roofline step times from the catalog's datasheet figures).
    Plan(PlanArgs),
    /// The KV budget from GPU memory, term by term, with an out-of-memory verdict.
    Memory {
        /// Scenario file (default: the built-in case study B2).
        scenario: Option<PathBuf>,
        /// Override a key.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Also derive it for a range of settings, e.g. engine.mem_fraction_static=0.80:0.95:0.01.
        #[arg(long = "vary", value_name = "KEY=SPEC")]
        vary: Vec<String>,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Write the memory figure (PNG and SVG) for the range into this directory.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// List the built-in GPUs and models (and those of a catalog file of your own).
    Catalog {
        /// A TOML file of [[gpu]] and [[model]] entries extending or overriding the built-in ones.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
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
    /// Advance one decode step at a time (the reference engine; same results, slower).
    #[arg(long)]
    step_by_step: bool,
    /// With --out: skip the figures.
    #[arg(long)]
    no_plots: bool,
    /// Stream one row per answered request to this CSV file (memory stays constant).
    #[arg(long, value_name = "FILE")]
    requests_csv: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct PlanArgs {
    /// Scenario file: the model, the workload and the client (no pinned KV budget or weights).
    scenario: PathBuf,
    /// GPU types from the catalog, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    gpus: Vec<String>,
    /// Numbers of GPUs to rent, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    counts: Vec<u32>,
    /// Tensor-parallel sizes to try (each that divides the count); default: one server on all
    /// the GPUs.
    #[arg(long, value_delimiter = ',')]
    tp: Vec<u32>,
    /// Only candidates finishing within this many hours are ranked by cost.
    #[arg(long, value_name = "HOURS")]
    deadline_h: Option<f64>,
    /// Override a GPU's $/GPU-hour, e.g. --price h100=2.49 (repeatable).
    #[arg(long = "price", value_name = "GPU=USD")]
    prices: Vec<String>,
    /// Override a scenario key for every candidate.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Write plan.csv, plan.json and the cost-versus-time figure into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the candidates as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Candidates run at once (default: one per core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// With --out: skip the figure.
    #[arg(long)]
    no_plots: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ExplainFormat {
    Text,
    Markdown,
}

#[derive(clap::Args, Debug)]
struct SweepArgs {
    /// Scenario file.
    scenario: PathBuf,
    /// An axis: KEY=start:stop:step (inclusive) or KEY=a,b,c. Repeat for a grid.
    #[arg(long = "vary", value_name = "KEY=SPEC", required = true)]
    vary: Vec<String>,
    /// Override a key for every point.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Write sweep.csv (and, for a shard, sweep-shard.json) into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the rows as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Points run at once (default: one per core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Run only the points whose number is I mod N (for a job array); merge with `servesim merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// With --out: skip the figures.
    #[arg(long)]
    no_plots: bool,
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
        match &e {
            SimError::Stuck { reason, .. } => Failure {
                error: e.to_string(),
                causes: vec![(reason.clone(), None)],
                hint: Some("raise engine.kv_capacity_tokens, or lower the prompt lengths or workload.max_new_tokens".into()),
                code: 1,
            },
            SimError::Unsupported(_) => Failure::usage(e.to_string(), "set engine.kind = \"sglang\" to simulate"),
            SimError::TooManyBatches { retractions, .. } => Failure {
                error: e.to_string(),
                causes: vec![(format!("{retractions} retractions so far"), None)],
                hint: Some(if *retractions > 0 {
                    "a run that retracts this often thrashes: raise engine.kv_capacity_tokens or lower client.concurrency; or raise run.max_events if the run is merely long".into()
                } else {
                    "raise run.max_events, or lower workload.requests".into()
                }),
                code: 1,
            },
            SimError::Interrupted => Failure {
                error: "interrupted: nothing was written".into(),
                causes: Vec::new(),
                hint: None,
                code: 130,
            },
        }
    }
}

/// Set by Ctrl-C; runs in progress stop at their next scheduler iteration.
fn interrupt_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    static FLAG: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
        std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f = flag.clone();
        // If a handler cannot be installed, Ctrl-C simply kills the process as usual.
        let _ = ctrlc::set_handler(move || f.store(true, std::sync::atomic::Ordering::Relaxed));
        flag
    })
    .clone()
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
        Command::Sweep(args) => sweep(args),
        Command::Plan(args) => plan(args),
        Command::Memory {
            scenario,
            sets,
            vary,
            json,
            out,
        } => memory(scenario.as_deref(), &sets, &vary, json, out.as_deref()),
        Command::Catalog { file, json } => catalog(file.as_deref(), json),
        Command::Explain {
            scenario,
            sets,
            format,
        } => explain(scenario.as_deref(), &sets, format),
        Command::Merge { dirs, out } => merge(&dirs, &out),
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
        interrupt: Some(interrupt_flag()),
        keep_log: args.out.is_some(),
        stepping: if args.step_by_step {
            engine::Stepping::StepByStep
        } else {
            engine::Stepping::FastForward
        },
        ..RunOptions::default()
    };
    let result = match &args.requests_csv {
        None => engine::run(&sc, &opts)?,
        Some(path) => run_streaming_requests(&sc, &opts, path)?,
    };
    let analysis = analysis::analyse(&result);
    let summary = summary::summarize(&sc, &result, &analysis);
    let json = summary::to_json(&summary);
    warn_rejections(&result);
    if let Some(dir) = &args.out {
        let tp = sc.hardware.as_ref().map_or(1, |h| h.tensor_parallel);
        let mut files: Vec<(String, Vec<u8>)> = vec![
            ("summary.json".into(), json.clone().into_bytes()),
            ("timeseries.csv".into(), timeseries::to_csv(&result)),
            (
                "server.log".into(),
                server_log::render(&result.log, tp).into_bytes(),
            ),
        ];
        if !args.no_plots {
            files.extend(run_figures(&sc, &result, &analysis)?);
        }
        write_outputs(dir, &files)?;
        eprintln!("wrote {} files to {}", files.len(), dir.display());
    }
    if args.json {
        print!("{json}");
    } else {
        print!("{}", text::render(&summary, &source.name));
    }
    let _ = report::SIMPLIFICATIONS;
    Ok(())
}

/// Say on stderr when the server refused some requests (they are counted in the report).
fn warn_rejections(r: &crate::metrics::RunResult) {
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
) -> Result<crate::metrics::RunResult, Failure> {
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
    let mut w = csv::Writer::from_writer(std::io::BufWriter::new(file));
    let mut failed: Option<String> = w
        .write_record(crate::report::requests::COLUMNS)
        .err()
        .map(|e| e.to_string());
    let mut sink = |r: &crate::metrics::RequestRecord| {
        if failed.is_none() {
            if let Err(e) = w.write_record(crate::report::requests::row(r)) {
                failed = Some(e.to_string());
            }
        }
    };
    let result = engine::run_with_sink(sc, opts, Some(&mut sink));
    let flushed = w.flush().err().map(|e| e.to_string());
    let cleanup = |why: String| {
        let _ = std::fs::remove_file(&tmp);
        Failure {
            error: format!("cannot write `{}`", path.display()),
            causes: vec![(why, None)],
            hint: None,
            code: 1,
        }
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
    drop(w);
    std::fs::rename(&tmp, path).map_err(|e| cleanup(e.to_string()))?;
    Ok(result)
}

/// The run's figures, PNG and SVG, as `(file name, bytes)`.
fn run_figures(
    sc: &Scenario,
    r: &crate::metrics::RunResult,
    a: &analysis::Analysis,
) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    use report::plots::{self, Format};
    let observe: Vec<f64> = sc.run.observe_at.iter().map(|t| t.as_secs_f64()).collect();
    let mut out = Vec::new();
    for fmt in Format::ALL {
        let ext = fmt.extension();
        let fail = |e: plots::PlotError| Failure {
            error: "cannot draw the figures".into(),
            causes: vec![(e.to_string(), None)],
            hint: Some("rerun with --no-plots to write the data without figures".into()),
            code: 1,
        };
        out.push((
            format!("throughput.{ext}"),
            plots::throughput(r, a, &observe, fmt).map_err(fail)?,
        ));
        out.push((
            format!("engine-state.{ext}"),
            plots::engine_state(r, fmt).map_err(fail)?,
        ));
        out.push((
            format!("latency-cdf.{ext}"),
            plots::latency_cdf(r, fmt).map_err(fail)?,
        ));
    }
    Ok(out)
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
fn write_outputs<N: AsRef<str>>(dir: &Path, files: &[(N, Vec<u8>)]) -> Result<(), Failure> {
    let runtime = |what: String, e: std::io::Error| Failure {
        error: what,
        causes: vec![(e.to_string(), None)],
        hint: None,
        code: 1,
    };
    let pid = std::process::id();
    let mut staged = Vec::new();
    for (name, bytes) in files {
        let name = name.as_ref();
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
        let name = name.as_ref();
        std::fs::rename(tmp, dir.join(name)).map_err(|e| {
            runtime(
                format!("cannot move `{}` into place", dir.join(name).display()),
                e,
            )
        })?;
    }
    Ok(())
}

fn sweep(args: SweepArgs) -> Result<(), Failure> {
    let axes = parse_axes(&args.vary)?;
    let points = sweep::points(&axes)
        .map_err(|e| Failure::usage(format!("--vary {e}"), "use fewer or coarser axes"))?;
    let shard = match &args.shard {
        None => None,
        Some(s) => Some(Shard::parse(s).ok_or_else(|| {
            Failure::usage(
                format!("--shard `{s}` is not I/N with 0 ≤ I < N"),
                "e.g. --shard 0/4 … --shard 3/4; with Slurm: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT",
            )
        })?),
    };
    let source = Source::read(&args.scenario)?;
    let scenarios = sweep::validate_points(&source, &args.sets, &points).map_err(|errors| {
        // The same problem usually repeats across points: report each once, with its points.
        let n = errors.len();
        let mut unique: Vec<(String, Option<String>, Vec<usize>)> = Vec::new();
        for e in &errors {
            if let PointError::Invalid { point, error, .. } = e {
                for p in &error.problems {
                    let line = error.problem_line(p);
                    match unique.iter_mut().find(|(l, _, _)| *l == line) {
                        Some((_, _, pts)) => pts.push(*point),
                        None => unique.push((line, p.hint.clone(), vec![*point])),
                    }
                }
            }
        }
        let causes = unique
            .into_iter()
            .map(|(line, hint, pts)| {
                let which = if pts.len() == 1 {
                    format!("point {}", pts[0])
                } else {
                    format!("{} points from {}", pts.len(), pts[0])
                };
                (format!("{line} ({which})"), hint)
            })
            .collect();
        Failure {
            error: format!("{n} of {} sweep points are invalid", points.len()),
            causes,
            hint: Some(
                "check the --vary keys and values against the scenario reference in the README"
                    .into(),
            ),
            code: 2,
        }
    })?;
    if let Some(dir) = &args.out {
        prepare_out_dir(dir)?;
    }
    let chosen: Vec<usize> = (0..points.len())
        .filter(|p| shard.is_none_or(|s| s.owns(*p)))
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .build()
        .map_err(|e| {
            Failure::usage(
                format!(
                    "cannot start {} worker threads: {e}",
                    args.jobs.unwrap_or(0)
                ),
                "lower --jobs",
            )
        })?;
    let bar = indicatif::ProgressBar::new(chosen.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} points  {elapsed} elapsed, {eta} left",
        )
        .expect("invariant: the progress template is valid"),
    );
    let opts = RunOptions {
        interrupt: Some(interrupt_flag()),
        ..RunOptions::default()
    };
    let results: Vec<Result<sweep::Row, PointError>> = pool.install(|| {
        use rayon::prelude::*;
        chosen
            .par_iter()
            .map(|&p| {
                let r = sweep::run_point(p, &points[p], &scenarios[p], &opts);
                bar.inc(1);
                r
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut rows = Vec::with_capacity(results.len());
    for r in results {
        if let Err(PointError::Failed { error, .. }) = &r {
            if matches!(error, SimError::Interrupted) {
                return Err(Failure {
                    error: "interrupted: nothing was written".into(),
                    causes: Vec::new(),
                    hint: None,
                    code: 130,
                });
            }
        }
        rows.push(r.map_err(|e| {
            let cause = match &e {
                PointError::Failed { error, .. } => error.to_string(),
                PointError::Invalid { error, .. } => error.to_string(),
            };
            Failure {
                error: e.to_string(),
                causes: vec![(cause, None)],
                hint: None,
                code: 1,
            }
        })?);
    }
    let keys: Vec<String> = axes.iter().map(|a| a.key.clone()).collect();
    let csv = sweep::to_csv(&keys, &rows);
    if let Some(dir) = &args.out {
        let mut files: Vec<(String, Vec<u8>)> =
            vec![("sweep.csv".into(), csv.clone().into_bytes())];
        // A shard's figures would show only its slice: draw them from the merged sweep instead.
        if !args.no_plots && shard.is_none() {
            files.extend(sweep_figure_files(&keys, &rows, &scenarios, &points)?);
        }
        if let Some(s) = shard {
            let manifest = ShardManifest {
                servesim_version: env!("CARGO_PKG_VERSION").to_string(),
                scenario: scenarios[0].name.clone(),
                header: sweep::header(&keys),
                total_points: points.len(),
                shard_index: s.index,
                shard_count: s.count,
            };
            let mut j = serde_json::to_string_pretty(&manifest)
                .expect("invariant: the manifest serialises");
            j.push('\n');
            files.push(("sweep-shard.json".into(), j.into_bytes()));
        }
        write_outputs(dir, &files)?;
        eprintln!(
            "wrote {} rows to {}",
            rows.len(),
            dir.join("sweep.csv").display()
        );
    }
    if args.json {
        let mut j = serde_json::to_string_pretty(&rows).expect("invariant: rows serialise");
        j.push('\n');
        print!("{j}");
    } else if args.out.is_none() || std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        print!("{}", sweep_table(&keys, &rows));
    }
    Ok(())
}

fn parse_axes(vary: &[String]) -> Result<Vec<sweep::Axis>, Failure> {
    let mut axes = Vec::new();
    let mut bad = Vec::new();
    for v in vary {
        match sweep::parse_vary(v) {
            Ok(a) => axes.push(a),
            Err(e) => bad.push((format!("--vary {e}"), Some(vary_hint(&e)))),
        }
    }
    if bad.is_empty() {
        Ok(axes)
    } else {
        Err(Failure {
            error: "bad --vary".into(),
            causes: bad,
            hint: None,
            code: 2,
        })
    }
}

fn no_memory_model(name: &str) -> Failure {
    Failure::usage(
        format!("scenario `{name}` has no memory model inputs"),
        "give [hardware] gpu (or memory_mib) and [model] name (or kv_bytes_per_token and weight_gib_per_gpu)",
    )
}

fn memory(
    path: Option<&Path>,
    sets: &[String],
    vary: &[String],
    json: bool,
    out: Option<&Path>,
) -> Result<(), Failure> {
    let axes = parse_axes(vary)?;
    let (source, sc) = load(path, sets)?;
    let base = sc
        .memory
        .clone()
        .ok_or_else(|| no_memory_model(&source.name))?;
    let points = sweep::points(&axes)
        .map_err(|e| Failure::usage(format!("--vary {e}"), "use fewer or coarser axes"))?;
    let mut rows = Vec::new();
    if !axes.is_empty() {
        let scenarios = sweep::validate_points(&source, sets, &points).map_err(|errors| {
            let n = errors.len();
            let causes = errors
                .into_iter()
                .take(5)
                .filter_map(|e| match e {
                    PointError::Invalid { sets, error, .. } => Some((
                        format!(
                            "{sets}: {}",
                            error
                                .problems
                                .first()
                                .map_or(String::new(), |p| error.problem_line(p))
                        ),
                        error.problems.first().and_then(|p| p.hint.clone()),
                    )),
                    PointError::Failed { .. } => None,
                })
                .collect();
            Failure {
                error: format!("{n} of {} settings are invalid", points.len()),
                causes,
                hint: None,
                code: 2,
            }
        })?;
        for (p, s) in points.into_iter().zip(scenarios) {
            let m = s.memory.ok_or_else(|| no_memory_model(&source.name))?;
            rows.push(report::memory::RangeRow { sets: p, memory: m });
        }
    }
    if let Some(dir) = out {
        let mut bars: Vec<(f64, crate::memory::SglangMemory)> = Vec::new();
        for m in std::iter::once(&base).chain(rows.iter().map(|r| &r.memory)) {
            if let crate::scenario::MemoryDerivation::Sglang(s) = &m.derivation {
                bars.push((s.inputs.mem_fraction_static, s.clone()));
            }
        }
        if rows.is_empty() || bars.len() != rows.len() + 1 {
            return Err(Failure::usage(
                "--out draws the memory figure of a range of settings of an SGLang scenario",
                "add e.g. --vary engine.mem_fraction_static=0.80:0.95:0.01",
            ));
        }
        // The figure shows the range; the base scenario is its reference, not a bar.
        let bars = bars.split_off(1);
        prepare_out_dir(dir)?;
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for fmt in report::plots::Format::ALL {
            files.push((
                format!("memory.{}", fmt.extension()),
                report::plots::memory_figure(&bars, fmt).map_err(plot_failure)?,
            ));
        }
        write_outputs(dir, &files)?;
        eprintln!("wrote the memory figure to {}", dir.display());
    }
    if json {
        let j = serde_json::json!({
            "scenario": sc.name,
            "memory": base,
            "range": rows.iter().map(|r| serde_json::json!({ "set": r.sets, "memory": r.memory })).collect::<Vec<_>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&j).expect("invariant: memory serialises")
        );
        return Ok(());
    }
    print!("{}", report::memory::derivation(&base, &sc.name));
    if !rows.is_empty() {
        println!();
        print!("{}", report::memory::range_table(&base, &rows));
    }
    Ok(())
}

fn explain(path: Option<&Path>, sets: &[String], format: ExplainFormat) -> Result<(), Failure> {
    let (_, sc) = load(path, sets)?;
    let opts = RunOptions {
        interrupt: Some(interrupt_flag()),
        ..RunOptions::default()
    };
    let result = engine::run(&sc, &opts)?;
    let analysis = analysis::analyse(&result);
    let summary = summary::summarize(&sc, &result, &analysis);
    let ctx = report::explain::Context {
        scenario_arg: path.map(|p| p.display().to_string()),
        has_memory_model: sc.memory.is_some(),
        kv_capacity_tokens: sc.engine.kv_capacity_tokens,
        mem_fraction_static: sc.engine.mem_fraction_static,
        rate_per_s: match &sc.client {
            crate::scenario::ClientSpec::Poisson { rate_per_s, .. }
            | crate::scenario::ClientSpec::Gamma { rate_per_s, .. } => Some(*rate_per_s),
            crate::scenario::ClientSpec::Closed { .. } => None,
        },
    };
    let fmt = match format {
        ExplainFormat::Text => report::explain::Format::Text,
        ExplainFormat::Markdown => report::explain::Format::Markdown,
    };
    print!("{}", report::explain::render(&summary, &ctx, fmt));
    Ok(())
}

fn catalog(file: Option<&Path>, json: bool) -> Result<(), Failure> {
    let c = match file {
        None => crate::catalog::Catalog::builtin(),
        Some(f) => crate::catalog::Catalog::with_user_file(f).map_err(|e| {
            Failure::usage(
                e.to_string(),
                "a TOML file of [[gpu]] and [[model]] entries with the built-in fields",
            )
        })?,
    };
    if json {
        let j = serde_json::json!({ "gpus": c.gpus, "models": c.models });
        println!(
            "{}",
            serde_json::to_string_pretty(&j).expect("invariant: the catalog serialises")
        );
    } else {
        print!("{}", report::memory::catalog(&c));
    }
    Ok(())
}

fn plot_failure(e: report::plots::PlotError) -> Failure {
    Failure {
        error: "cannot draw the figures".into(),
        causes: vec![(e.to_string(), None)],
        hint: Some("rerun with --no-plots to write the data without figures".into()),
        code: 1,
    }
}

/// The sweep's figures, and the memory figure when the sweep varies the static fraction.
fn sweep_figure_files(
    keys: &[String],
    rows: &[sweep::Row],
    scenarios: &[Scenario],
    points: &[Vec<String>],
) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    use report::plots::{self, Format};
    let mut out = Vec::new();
    let memory = memory_rows(keys, scenarios, points);
    for fmt in Format::ALL {
        let ext = fmt.extension();
        for (stem, bytes) in plots::sweep_figures(keys, rows, fmt).map_err(plot_failure)? {
            out.push((format!("{stem}.{ext}"), bytes));
        }
        if let Some(m) = &memory {
            out.push((
                format!("memory.{ext}"),
                plots::memory_figure(m, fmt).map_err(plot_failure)?,
            ));
        }
    }
    Ok(out)
}

/// `(fraction, SGLang derivation)` for each distinct fraction, when the only varied key is
/// `engine.mem_fraction_static` and the scenario has a memory model.
fn memory_rows(
    keys: &[String],
    scenarios: &[Scenario],
    points: &[Vec<String>],
) -> Option<Vec<(f64, crate::memory::SglangMemory)>> {
    if keys != ["engine.mem_fraction_static"] {
        return None;
    }
    let mut rows = Vec::new();
    for (sc, _) in scenarios.iter().zip(points) {
        match &sc.memory.as_ref()?.derivation {
            crate::scenario::MemoryDerivation::Sglang(m) => {
                rows.push((m.inputs.mem_fraction_static, m.clone()))
            }
            crate::scenario::MemoryDerivation::Vllm(_) => return None,
        }
    }
    Some(rows)
}

fn vary_hint(e: &sweep::VaryError) -> String {
    match e {
        sweep::VaryError::BadStep(_) | sweep::VaryError::EmptyRange(_) => {
            "a range is start:stop:step with start ≤ stop and step > 0, e.g. 0.80:0.95:0.01".into()
        }
        sweep::VaryError::TooMany { .. } => "use a coarser step".into(),
        _ => "write KEY=start:stop:step or KEY=a,b,c, e.g. --vary client.concurrency=50,100,150"
            .into(),
    }
}

fn sweep_table(keys: &[String], rows: &[sweep::Row]) -> String {
    let mut out = String::new();
    let key_w: Vec<usize> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            rows.iter()
                .map(|r| r.varied[i].1.len())
                .max()
                .unwrap_or(0)
                .max(k.len())
        })
        .collect();
    for (k, w) in keys.iter().zip(&key_w) {
        out.push_str(&format!("{k:>w$}  "));
    }
    out.push_str(&format!(
        "{:>10} {:>7} {:>12} {:>21} {:>9} {:>8} {:>11} {:>11}\n",
        "KV tokens",
        "memory",
        "steady req/s",
        "95 % CI",
        "gen tok/s",
        "running",
        "e2e p50 s",
        "finish h"
    ));
    for r in rows {
        for ((_, v), w) in r.varied.iter().zip(&key_w) {
            out.push_str(&format!("{v:>w$}  "));
        }
        out.push_str(&format!(
            "{:>10} {:>7} {:>12.4} {:>21} {:>9.1} {:>8.1} {:>11.1} {:>11}\n",
            r.kv_capacity_tokens,
            r.oom_verdict,
            r.steady_req_per_s,
            format!(
                "[{:.4}, {:.4}]",
                r.steady_req_per_s_ci[0], r.steady_req_per_s_ci[1]
            ),
            r.gen_tok_per_s,
            r.mean_running,
            r.e2e_p50_ms / 1000.0,
            r.time_to_finish_s
                .map_or("—".to_string(), |t| format!("{:.2}", t / 3600.0)),
        ));
    }
    out
}

fn merge(dirs: &[PathBuf], out: &Path) -> Result<(), Failure> {
    let mut shards = Vec::new();
    for d in dirs {
        let name = d.display().to_string();
        let read = |f: &str| {
            std::fs::read_to_string(d.join(f)).map_err(|e| {
                Failure::usage(
                    format!("cannot read `{}`: {e}", d.join(f).display()),
                    "give the --out directories of `servesim sweep --shard I/N` runs",
                )
            })
        };
        let manifest: ShardManifest =
            serde_json::from_str(&read("sweep-shard.json")?).map_err(|e| {
                Failure::usage(
                    format!(
                        "`{}` is not a shard manifest: {e}",
                        d.join("sweep-shard.json").display()
                    ),
                    "it is written by `servesim sweep --shard I/N --out DIR`",
                )
            })?;
        shards.push((name, manifest, read("sweep.csv")?));
    }
    let csv = sweep::merge(&shards)
        .map_err(|e| Failure::usage(e.to_string(), "merge every shard of one sweep, each once"))?;
    prepare_out_dir(out)?;
    write_outputs(out, &[("sweep.csv", csv.into_bytes())])?;
    eprintln!(
        "merged {} shards into {}",
        dirs.len(),
        out.join("sweep.csv").display()
    );
    Ok(())
}

fn plan(args: PlanArgs) -> Result<(), Failure> {
    use crate::plan::{self as pl, PlanRow};
    let source = Source::read(&args.scenario)?;
    // The base scenario supplies the model, the workload and the client. Its own hardware is
    // replaced by every candidate, so a budget that does not fit it must not stop the plan.
    let mut base_sets = args.sets.clone();
    base_sets.push(format!(
        "engine.kv_capacity_tokens={}",
        scenario::validate::MAX_KV_TOKENS
    ));
    let base = scenario::load(&source, &base_sets)?;
    let pinned = pl::pinned_keys(&source);
    if !pinned.is_empty() {
        return Err(Failure {
            error: format!(
                "scenario `{}` pins what a plan derives for each GPU",
                source.name
            ),
            causes: pinned
                .iter()
                .map(|k| (format!("{k} is set"), None))
                .collect(),
            hint: Some(
                "remove those keys: each candidate derives them from its GPU and the catalog"
                    .into(),
            ),
            code: 2,
        });
    }
    if base.model.as_ref().and_then(|m| m.entry.as_ref()).is_none() {
        return Err(Failure::usage(
            format!("scenario `{}` names no catalog model", source.name),
            "set model.name (see `servesim catalog`): the roofline needs the architecture",
        ));
    }
    let catalog = crate::catalog::Catalog::builtin_ref();
    let mut bad = Vec::new();
    for g in &args.gpus {
        if catalog.gpu(g).is_none() {
            let hint = catalog
                .suggest_gpu(g)
                .map(|s| format!("did you mean \"{s}\"?"));
            bad.push((format!("--gpus: \"{g}\" is not in the catalog"), hint));
        }
    }
    if args.counts.contains(&0) {
        bad.push((
            "--counts: 0 GPUs".to_string(),
            Some("give positive counts, e.g. --counts 1,2,4,8".into()),
        ));
    }
    if args.tp.contains(&0) {
        bad.push((
            "--tp: 0".to_string(),
            Some("tensor-parallel sizes are positive".into()),
        ));
    }
    if let Some(d) = args.deadline_h {
        if !(d.is_finite() && d > 0.0) {
            bad.push((
                format!("--deadline-h {d}: must be a positive number of hours"),
                None,
            ));
        }
    }
    let mut prices: Vec<(String, f64)> = Vec::new();
    for p in &args.prices {
        match p
            .split_once('=')
            .map(|(g, v)| (g.trim(), v.trim().parse::<f64>()))
        {
            Some((g, Ok(v))) if v.is_finite() && v >= 0.0 && catalog.gpu(g).is_some() => {
                prices.push((catalog.gpu(g).expect("invariant: checked").name.clone(), v));
            }
            _ => bad.push((
                format!("--price `{p}` is not GPU=USD for a catalog GPU"),
                Some("e.g. --price h100=2.49".into()),
            )),
        }
    }
    if !bad.is_empty() {
        return Err(Failure {
            error: "bad plan arguments".into(),
            causes: bad,
            hint: Some("`servesim catalog` lists the GPUs".into()),
            code: 2,
        });
    }
    let gpus: Vec<String> = args
        .gpus
        .iter()
        .map(|g| catalog.gpu(g).expect("invariant: checked").name.clone())
        .collect();
    let cands = pl::candidates(&gpus, &args.counts, &args.tp);
    if cands.is_empty() {
        return Err(Failure::usage(
            "no candidate: every --tp is larger than every --counts",
            "give a TP no larger than the GPU count",
        ));
    }
    if let Some(dir) = &args.out {
        prepare_out_dir(dir)?;
    }
    let price_of = |g: &str| {
        prices
            .iter()
            .find(|(n, _)| n == g)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| catalog.gpu(g).map_or(0.0, |e| e.price_usd_per_hour))
    };
    let deadline_s = args.deadline_h.map(|h| h * 3600.0);
    let opts = RunOptions {
        interrupt: Some(interrupt_flag()),
        ..RunOptions::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs.unwrap_or(0))
        .build()
        .map_err(|e| Failure::usage(format!("cannot start worker threads: {e}"), "lower --jobs"))?;
    let bar = indicatif::ProgressBar::new(cands.len() as u64);
    let results: Vec<Result<PlanRow, SimError>> = pool.install(|| {
        use rayon::prelude::*;
        cands
            .par_iter()
            .map(|c| {
                let r = pl::evaluate(
                    &source,
                    &args.sets,
                    &base,
                    c,
                    price_of(&c.gpu),
                    deadline_s,
                    &opts,
                );
                bar.inc(1);
                r
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut rows = Vec::with_capacity(results.len());
    for r in results {
        rows.push(r?);
    }
    pl::sort(&mut rows);
    let json = {
        let mut j = serde_json::to_string_pretty(&rows).expect("invariant: rows serialise");
        j.push('\n');
        j
    };
    if let Some(dir) = &args.out {
        let mut files: Vec<(String, Vec<u8>)> = vec![
            ("plan.csv".into(), pl::to_csv(&rows).into_bytes()),
            ("plan.json".into(), json.clone().into_bytes()),
        ];
        if !args.no_plots {
            let picks = pl::highlights(&rows, args.deadline_h);
            for fmt in report::plots::Format::ALL {
                files.push((
                    format!("plan.{}", fmt.extension()),
                    report::plots::plan_figure(&rows, &picks, args.deadline_h, fmt)
                        .map_err(plot_failure)?,
                ));
            }
        }
        write_outputs(dir, &files)?;
        eprintln!("wrote {} files to {}", files.len(), dir.display());
    }
    if args.json {
        print!("{json}");
    } else {
        print!("{}", plan_table(&base, &rows, args.deadline_h));
    }
    Ok(())
}

fn plan_table(base: &Scenario, rows: &[crate::plan::PlanRow], deadline_h: Option<f64>) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let model = base
        .model
        .as_ref()
        .and_then(|m| m.entry.as_ref())
        .map_or("the model".to_string(), |m| m.display.clone());
    let _ = writeln!(
        o,
        "servesim plan — {model}, {} requests ({}); roofline step times from the catalog, uncalibrated",
        report::text::thousands(base.workload.requests),
        base.name
    );
    if let Some(d) = deadline_h {
        let _ = writeln!(
            o,
            "deadline {d} h: candidates that meet it first, cheapest first"
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<14} {:>4} {:>3} {:>4} {:>10} {:>9} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9}  binds / why not",
        "GPU", "GPUs", "TP", "reps", "KV tokens", "gen tok/s", "req/s", "finish h", "cost $", "$/M tok", "TTFT p99", "E2E p99"
    );
    for r in rows {
        if !r.feasible {
            let _ = writeln!(
                o,
                "{:<14} {:>4} {:>3} {:>4} {:>10}  infeasible: {}",
                r.gpu,
                r.num_gpus,
                r.tensor_parallel,
                r.replicas,
                "—",
                r.reason.as_deref().unwrap_or("")
            );
            continue;
        }
        let mark = match r.meets_deadline {
            Some(false) => " (misses the deadline)",
            _ => "",
        };
        let _ = writeln!(
            o,
            "{:<14} {:>4} {:>3} {:>4} {:>10} {:>9.0} {:>8.3} {:>8.2} {:>10.0} {:>9.2} {:>8.1}s {:>8.0}s  {}{mark}",
            r.gpu,
            r.num_gpus,
            r.tensor_parallel,
            r.replicas,
            r.kv_capacity_tokens,
            r.gen_tok_per_s,
            r.steady_req_per_s,
            r.time_to_finish_s / 3600.0,
            r.cost_usd,
            r.usd_per_m_output_tokens,
            r.ttft_p99_ms / 1000.0,
            r.e2e_p99_ms / 1000.0,
            r.binding.map_or("", |b| b.describe())
        );
    }
    let _ = writeln!(
        o,
        "\nPrices are the catalog's indicative on-demand $/GPU-hour unless given with --price. Each server (TP GPUs) \
         gets an equal share of the requests and of the client's concurrency."
    );
    o
}
