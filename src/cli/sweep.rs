//! `servesim sweep`: a what-if grid run in parallel, one row per point; and `servesim merge`,
//! which joins the shards of a sweep run as a job array.

use std::path::PathBuf;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::args::{JobsArgs, OutputArgs, ScenarioFileArgs};
use super::interrupt::{self, interruptible};
use super::output::Outputs;
use super::parallel::map_with_progress;
use super::table::{render, table};
use super::Failure;
use super::{term, values};
use crate::engine::{RunOptions, SimError};
use crate::memory::SglangMemory;
use crate::report::plots::{self, Format};
use crate::scenario::{MemoryDerivation, Scenario};
use crate::sweep::{self, Axis, PointError, Row, Shard, ShardManifest};
use crate::workload::Predrawn;

/// `servesim sweep`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    scenario: ScenarioFileArgs,
    /// An axis: KEY=start:stop:step (inclusive) or KEY=a,b,c. Repeat for a grid.
    #[arg(long = "vary", value_name = "KEY=SPEC", required = true, value_parser = values::vary)]
    vary: Vec<Axis>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    jobs: JobsArgs,
    /// Run only the points whose number is I mod N (for a job array); merge with `servesim merge`.
    #[arg(long, value_name = "I/N", value_parser = values::shard)]
    shard: Option<Shard>,
}

/// `servesim merge`.
#[derive(clap::Args, Debug)]
pub(super) struct MergeArgs {
    /// Output directories of the shards (`sweep --shard I/N --out DIR`).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Where to write the merged sweep.csv.
    #[arg(long, value_name = "DIR", required = true)]
    out: PathBuf,
}

/// The points of the grid of these axes, each as its `KEY=VALUE` overrides.
pub(super) fn grid(axes: &[Axis]) -> Result<Vec<Vec<String>>, Failure> {
    sweep::points(axes).map_err(|e| {
        let hint = match e {
            sweep::VaryError::Twice(_) => "give each key one --vary, with all its values",
            _ => "use fewer or coarser axes",
        };
        Failure::usage(format!("--vary {e}"), hint)
    })
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let points = grid(&args.vary)?;
    let source = args.scenario.source()?;
    let scenarios = sweep::validate_points(&source, &args.scenario.set.sets, &points)
        .map_err(|errors| invalid_points(&errors, points.len()))?;
    let out = args.output.out.as_deref();
    let mut outputs = Outputs::new(args.scenario.inputs(&scenarios[0]));
    let planned = match out {
        Some(d) => {
            let dir = outputs.dir(d)?;
            let csv = outputs.file_in(&dir, "sweep.csv")?;
            let manifest = match args.shard {
                Some(_) => Some(outputs.file_in(&dir, "sweep-shard.json")?),
                None => None,
            };
            Some((dir, csv, manifest))
        }
        None => None,
    };
    let chosen: Vec<usize> = (0..points.len())
        .filter(|p| args.shard.is_none_or(|s| s.owns(*p)))
        .collect();
    // Points that send the same requests (most sweeps vary the server) draw their lengths once.
    let opts = RunOptions {
        predrawn: Predrawn::shared(
            chosen
                .iter()
                .map(|&p| (scenarios[p].seed, &scenarios[p].workload)),
        )
        .map(Arc::new),
        ..interruptible()
    };
    let results = map_with_progress(&chosen, args.jobs, "points", |&p| {
        sweep::run_point(p, &points[p], &scenarios[p], &opts)
    })?;
    let mut rows = Vec::with_capacity(results.len());
    for r in results {
        rows.push(r.map_err(|e| {
            let which = e.to_string();
            match e {
                PointError::Failed {
                    error: SimError::Interrupted,
                    ..
                } => interrupt::failure(),
                // The run's own message, its causes and hint, under the point's name.
                PointError::Failed { error, .. } => {
                    let mut f = Failure::from(error);
                    f.causes
                        .insert(0, (std::mem::replace(&mut f.error, which), None));
                    f
                }
                PointError::Invalid { error, .. } => Failure::runtime(which, error),
            }
        })?);
    }
    let keys: Vec<String> = args.vary.iter().map(|a| a.key.clone()).collect();
    if let Some((dir, csv, manifest)) = planned {
        outputs.write(csv, &sweep::to_csv(&keys, &rows))?;
        // A shard's figures would show only its slice: draw them from the merged sweep instead.
        if args.output.figures() && args.shard.is_none() {
            for (name, bytes) in figures(&keys, &rows, &scenarios)? {
                let id = outputs.file_in(&dir, &name)?;
                outputs.write(id, &bytes)?;
            }
        }
        if let (Some(s), Some(id)) = (args.shard, manifest) {
            let manifest = ShardManifest {
                servesim_version: env!("CARGO_PKG_VERSION").to_string(),
                scenario: scenarios[0].name.clone(),
                scenario_sha256: format!("{:x}", Sha256::digest(source.text.as_bytes())),
                sets: args.scenario.set.sets.clone(),
                axes: args.vary.clone(),
                header: sweep::header(&keys),
                total_points: points.len(),
                shard_index: s.index,
                shard_count: s.count,
            };
            let mut j = serde_json::to_string_pretty(&manifest)
                .expect("invariant: the manifest serialises");
            j.push('\n');
            outputs.write(id, j.as_bytes())?;
        }
        interrupt::check()?;
        outputs.commit()?;
        term::note(&format!(
            "wrote {} rows to {}",
            rows.len(),
            dir.shown().join("sweep.csv").display()
        ));
    }
    if args.output.json() {
        let mut j = serde_json::to_string_pretty(&rows).expect("invariant: rows serialise");
        j.push('\n');
        term::out(&j)?;
    } else if out.is_none() || std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        term::out(&sweep_table(&keys, &rows))?;
    }
    let base = crate::scenario::load(&source, &args.scenario.set.sets).ok();
    super::check::warn_sweep(base.as_ref(), &scenarios);
    Ok(())
}

/// The same problem usually repeats across points: report each once, with its points.
fn invalid_points(errors: &[PointError], total: usize) -> Failure {
    let mut unique: Vec<(String, Option<String>, Vec<usize>)> = Vec::new();
    for e in errors {
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
        error: format!("{} of {total} sweep points are invalid", errors.len()),
        causes,
        hint: Some(
            "check the --vary keys and values against the scenario reference in the README".into(),
        ),
        code: 2,
    }
}

/// The sweep's figures, and the memory figure when the sweep varies the static fraction.
fn figures(
    keys: &[String],
    rows: &[Row],
    scenarios: &[Scenario],
) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    let mut out = Vec::new();
    let memory = memory_bars(keys, scenarios);
    for fmt in Format::ALL {
        let ext = fmt.extension();
        for (stem, bytes) in plots::sweep_figures(keys, rows, fmt)? {
            out.push((format!("{stem}.{ext}"), bytes));
        }
        if let Some(m) = &memory {
            out.push((format!("memory.{ext}"), plots::memory_figure(m, fmt)?));
        }
    }
    Ok(out)
}

/// `(fraction, SGLang derivation)` for each point, when the only varied key is
/// `engine.mem_fraction_static` and the scenario has a memory model.
fn memory_bars(keys: &[String], scenarios: &[Scenario]) -> Option<Vec<(f64, SglangMemory)>> {
    if keys != ["engine.mem_fraction_static"] {
        return None;
    }
    let mut bars = Vec::new();
    for sc in scenarios {
        match &sc.memory.as_ref()?.derivation {
            MemoryDerivation::Sglang(m) => bars.push((m.inputs.mem_fraction_static, m.clone())),
            MemoryDerivation::Vllm(_) => return None,
        }
    }
    Some(bars)
}

fn sweep_table(keys: &[String], rows: &[Row]) -> String {
    let mut header: Vec<&str> = keys.iter().map(String::as_str).collect();
    header.extend([
        "KV tokens",
        "memory",
        "steady req/s",
        "95 % CI",
        "gen tok/s",
        "running",
        "TPOT p50 ms",
        "e2e p50 s",
        "finish h",
    ]);
    let mut t = table(&header, 0);
    for r in rows {
        let mut cells: Vec<String> = r.varied.iter().map(|(_, v)| v.clone()).collect();
        cells.extend([
            r.kv_capacity_tokens.to_string(),
            r.oom_verdict.clone(),
            match (r.steady_req_per_s, r.sustained_req_per_s) {
                (Some(x), _) => format!("{x:.4}"),
                (None, Some(x)) if r.regime == "overloaded" => format!("none (serves {x:.4})"),
                _ => format!("none ({})", r.regime.replace('_', " ")),
            },
            r.steady_req_per_s_ci
                .map_or("—".to_string(), |[lo, hi]| format!("[{lo:.4}, {hi:.4}]")),
            r.gen_tok_per_s
                .map_or("—".to_string(), |x| format!("{x:.1}")),
            r.mean_running
                .map_or("—".to_string(), |x| format!("{x:.1}")),
            format!("{:.1}", r.tpot_p50_ms),
            format!("{:.1}", r.e2e_p50_ms / 1000.0),
            r.time_to_finish_s
                .map_or("—".to_string(), |t| format!("{:.2}", t / 3600.0)),
        ]);
        t.add_row(cells);
    }
    render(&t)
}

pub(super) fn merge(args: MergeArgs) -> Result<(), Failure> {
    let mut shards = Vec::new();
    let mut inputs = Vec::new();
    for d in &args.dirs {
        inputs.extend(["sweep-shard.json", "sweep.csv"].map(|f| d.join(f)));
        let read = |f: &str| {
            let path = d.join(f);
            let text = if f.ends_with(".csv") {
                crate::files::read_rows_text(&path, MAX_SHARD_BYTES)
            } else {
                crate::files::read_text(&path, MAX_SHARD_BYTES)
            };
            text.map_err(|e| {
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
        shards.push((d.display().to_string(), manifest, read("sweep.csv")?));
    }
    let csv = sweep::merge(&shards)
        .map_err(|e| Failure::usage(e.to_string(), "merge every shard of one sweep, each once"))?;
    // The merged file must not replace a shard's files.
    let mut outputs = Outputs::new(inputs);
    let dir = outputs.dir(&args.out)?;
    let id = outputs.file_in(&dir, "sweep.csv")?;
    outputs.write(id, &csv)?;
    interrupt::check()?;
    outputs.commit()?;
    term::note(&format!(
        "merged {} shards into {}",
        args.dirs.len(),
        args.out.join("sweep.csv").display()
    ));
    Ok(())
}

/// The largest shard file `merge` reads: a sweep has at most a million rows of a few hundred
/// bytes.
const MAX_SHARD_BYTES: u64 = 1 << 30;
