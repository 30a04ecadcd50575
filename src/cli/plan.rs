//! `servesim plan`: which GPU type, how many and which layout finish the workload by a
//! deadline at the lowest cost; every candidate simulated in parallel.

use super::args::{JobsArgs, OutputArgs, ScenarioFileArgs};
use super::interrupt::{self, interruptible};
use super::output::{FileId, OutDir, Outputs};
use super::parallel::map_with_progress;
use super::table::{render, table};
use super::values::{self, GpuPrice};
use super::{term, Failure};
use crate::catalog::Catalog;
use crate::engine::RunOptions;
use crate::metrics::TokenGaps;
use crate::plan::slo::{self, Slo, SloOutcome, SloRow};
use crate::plan::{self, Load, Outcome, PlanRow};
use crate::report::plots::{self, Format};
use crate::report::text::thousands;
use crate::scenario::{self, Scenario};
use crate::workload::Predrawn;
use std::sync::Arc;

/// `servesim plan`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    // The scenario supplies the model, the workload and the client (no pinned KV budget or
    // weights); overrides apply to every candidate.
    #[command(flatten)]
    scenario: ScenarioFileArgs,
    /// GPU types from the catalog, comma-separated.
    #[arg(long, value_delimiter = ',', required = true, value_parser = values::gpu)]
    gpus: Vec<String>,
    /// Numbers of GPUs to rent, comma-separated.
    #[arg(long, value_delimiter = ',', required = true, value_parser = values::positive)]
    counts: Vec<u32>,
    /// Tensor-parallel sizes to try (each no larger than the count; one that does not divide it
    /// is listed as infeasible); default: one server on all the GPUs.
    #[arg(long, value_delimiter = ',', value_parser = values::positive)]
    tp: Vec<u32>,
    /// Only candidates finishing within this many hours are ranked by cost.
    #[arg(long, value_name = "HOURS", value_parser = values::hours)]
    deadline_h: Option<f64>,
    /// Override a GPU's $/GPU-hour, e.g. --price h100=2.49 (repeatable).
    #[arg(long = "price", value_name = "GPU=USD", value_parser = values::gpu_price)]
    prices: Vec<GpuPrice>,
    /// The load each candidate is simulated at: `scenario` (the scenario's client, its
    /// concurrency split over the servers) or `saturate` (every server kept full — the
    /// concurrency that finishes its share soonest, searched — so the hardware binds, not the
    /// client).
    #[arg(long, value_enum, default_value_t = LoadArg::Scenario)]
    load: LoadArg,
    /// SLO search: the highest arrival rate each candidate sustains with p99 TTFT within this
    /// many seconds (with --slo-tpot-p99-ms, both).
    #[arg(long, value_name = "SECONDS", value_parser = values::seconds, conflicts_with_all = ["deadline_h", "load"])]
    slo_ttft_p99_s: Option<f64>,
    /// SLO search: … with p99 TPOT within this many milliseconds.
    #[arg(long, value_name = "MS", value_parser = values::milliseconds, conflicts_with_all = ["deadline_h", "load"])]
    slo_tpot_p99_ms: Option<f64>,
    /// With an SLO: the rate all servers must sustain together; candidates reaching it come
    /// first, fewest GPUs first.
    #[arg(long, value_name = "REQ_PER_S", value_parser = values::rate)]
    target_rate: Option<f64>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    jobs: JobsArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum LoadArg {
    Scenario,
    Saturate,
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let source = args.scenario.source()?;
    let sets = &args.scenario.set.sets;
    // The base scenario supplies the model, the workload and the client. Its own hardware is
    // replaced by every candidate, so a budget that does not fit it must not stop the plan.
    let mut base_sets = sets.clone();
    base_sets.push(format!(
        "engine.kv_capacity_tokens={}",
        crate::memory::resolve::MAX_KV_TOKENS
    ));
    let base = scenario::load(&source, &base_sets)?;
    let pinned = plan::pinned_keys(&source);
    if !pinned.is_empty() {
        let what = format!(
            "scenario `{}` pins what a plan derives for each GPU",
            source.name
        );
        let why = "remove those keys: each candidate derives them from its GPU and the catalog";
        let mut f = Failure::usage(what, why);
        f.causes = pinned
            .iter()
            .map(|k| (format!("{k} is set"), None))
            .collect();
        return Err(f);
    }
    if base.model.as_ref().and_then(|m| m.entry.as_ref()).is_none() {
        return Err(Failure::usage(
            format!("scenario `{}` names no catalog model", source.name),
            "set model.name (see `servesim catalog`): the roofline needs the architecture",
        ));
    }
    let cands = plan::candidates(&args.gpus, &args.counts, &args.tp);
    if cands.is_empty() {
        return Err(Failure::usage(
            "no candidate: every --tp is larger than every --counts",
            "give a TP no larger than the GPU count",
        ));
    }
    let slo = Slo {
        ttft_p99_s: args.slo_ttft_p99_s,
        tpot_p99_ms: args.slo_tpot_p99_ms,
    };
    let slo_search = slo.ttft_p99_s.is_some() || slo.tpot_p99_ms.is_some();
    let mut outputs = Outputs::new(args.scenario.inputs(&base));
    let planned = match &args.output.out {
        Some(d) => {
            let dir = outputs.dir(d)?;
            let csv = outputs.file_in(&dir, "plan.csv")?;
            let json = outputs.file_in(&dir, "plan.json")?;
            let mut figures = Vec::new();
            for fmt in Format::ALL
                .into_iter()
                .filter(|_| args.output.figures() && !slo_search)
            {
                figures.push((
                    fmt,
                    outputs.file_in(&dir, &format!("plan.{}", fmt.extension()))?,
                ));
            }
            Some((dir, csv, json, figures))
        }
        None => None,
    };
    let catalog = Catalog::builtin_ref();
    let price_of = |g: &str| {
        args.prices
            .iter()
            .find(|p| p.gpu == g)
            .map(|p| p.usd_per_gpu_hour)
            .unwrap_or_else(|| catalog.gpu(g).map_or(0.0, |e| e.price_usd_per_hour))
    };
    let deadline_s = args.deadline_h.map(|h| h * 3600.0);
    // A plan reads no inter-token latency (`PlanMetrics`, `slo::SloRow`): its runs do not
    // time the gaps. Every candidate sends the same requests: their lengths are drawn once.
    let opts = RunOptions {
        token_gaps: TokenGaps::Untimed,
        predrawn: Predrawn::new(base.seed, &base.workload, base.workload.requests).map(Arc::new),
        ..interruptible()
    };
    if slo_search {
        let memo = crate::plan::memo::Memo::default();
        let results = map_with_progress(&cands, args.jobs, "candidates", |c| {
            let (price, rate) = (price_of(&c.gpu), args.target_rate);
            slo::search(&source, sets, &base, c, price, slo, rate, &opts, &memo)
        })?;
        let mut rows = results.into_iter().collect::<Result<Vec<_>, _>>()?;
        slo::sort(&mut rows);
        return write_slo(&args, &base, &rows, &slo, outputs, planned);
    }
    if args.target_rate.is_some() {
        return Err(Failure::usage(
            "--target-rate needs an SLO to search under",
            "add --slo-ttft-p99-s and/or --slo-tpot-p99-ms",
        ));
    }
    let load = match args.load {
        LoadArg::Scenario => Load::Scenario,
        LoadArg::Saturate => Load::Saturate,
    };
    let results = map_with_progress(&cands, args.jobs, "candidates", |c| {
        let price = price_of(&c.gpu);
        plan::evaluate(&source, sets, &base, c, load, price, deadline_s, &opts)
    })?;
    let mut rows = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    plan::sort(&mut rows);
    let picks = crate::plan::highlights(&rows, args.deadline_h);
    let figure = |fmt| plots::plan_figure(&rows, &picks, args.deadline_h, fmt);
    let json = write_files(outputs, planned, &rows, plan::to_csv(&rows), figure)?;
    if args.output.json() {
        term::out(&json)?;
    } else {
        term::out(&plan_table(&base, &rows, args.deadline_h, load))?;
    }
    let bound = plan::client_bound(&rows);
    if bound > 0 && load == Load::Scenario {
        term::note(&format!(
            "warning: the client's concurrency binds {bound} of {} feasible candidates: each server gets its share of the scenario's \
             concurrency, so those rows measure the client, not the hardware (and the ranking changes with the concurrency); \
             rerun with --load saturate to rank what each candidate can do, or with --slo-ttft-p99-s / --slo-tpot-p99-ms for the \
             highest rate within a latency target",
            rows.iter().filter(|r| r.metrics().is_some()).count()
        ));
    }
    let bursts = plan::single_bursts(&base, &rows);
    if bursts > 0 {
        term::note(&format!(
            "warning: {bursts} candidate(s) keep their whole share of the {} requests in flight at once: each server runs one \
             burst with no steady state, so its req/s and tok/s are the burst's averages, not what it sustains; compare them \
             by time to finish and cost, or give the workload more requests",
            thousands(base.workload.requests)
        ));
    }
    Ok(())
}

/// The planned `--out` files: the directory, plan.csv, plan.json and the figures.
type Planned = (OutDir, FileId, FileId, Vec<(Format, FileId)>);

/// With `--out`, plan.csv, plan.json and the planned figures, committed; the JSON, for stdout.
fn write_files<T: serde::Serialize>(
    mut outputs: Outputs,
    planned: Option<Planned>,
    rows: &[T],
    csv: Vec<u8>,
    figure: impl Fn(Format) -> Result<Vec<u8>, plots::PlotError>,
) -> Result<String, Failure> {
    let mut json = serde_json::to_string_pretty(rows).expect("invariant: rows serialise");
    json.push('\n');
    if let Some((dir, csv_id, json_id, figures)) = planned {
        outputs.write(csv_id, &csv)?;
        outputs.write(json_id, json.as_bytes())?;
        for (fmt, id) in figures {
            interrupt::check()?;
            outputs.write(id, &figure(fmt)?)?;
        }
        interrupt::check()?;
        let n = outputs.commit()?;
        term::note(&format!("wrote {n} files to {}", dir.shown().display()));
    }
    Ok(json)
}

/// An SLO search's outputs: plan.csv and plan.json with `--out`, the table or JSON on stdout.
fn write_slo(
    args: &Args,
    base: &Scenario,
    rows: &[SloRow],
    slo: &Slo,
    outputs: Outputs,
    planned: Option<Planned>,
) -> Result<(), Failure> {
    let no_figure = |_| unreachable!("invariant: an SLO search plans no figure");
    let json = write_files(outputs, planned, rows, slo::to_csv(rows), no_figure)?;
    if args.output.json() {
        return term::out(&json);
    }
    let model = model_name(base);
    let mut o = format!(
        "servesim plan — {model}: the highest Poisson arrival rate with {} (p99 over {} requests per server and probe)\n",
        slo.describe(),
        base.workload.requests.min(slo::PROBE_REQUESTS)
    );
    if let Some(t) = args.target_rate {
        o.push_str(&format!(
            "target {t} req/s in all: the candidates reaching it first, fewest GPUs first\n"
        ));
    }
    o.push('\n');
    let columns: Vec<&str> = "KV tokens,full req/s,SLO req/s,misses at,gen tok/s,\
        TTFT p99,TPOT p99,$/h,$/M tok,why not"
        .split(',')
        .collect();
    let row = |r: &SloRow| {
        let c = &r.candidate;
        let cells = match &r.outcome {
            SloOutcome::NotFound { reason } => Err(format!("no rate: {reason}")),
            SloOutcome::Found(m) => Ok(vec![
                m.kv_capacity_tokens.to_string(),
                format!("{:.2}", m.saturated_req_per_s),
                format!("{:.2}", m.slo_req_per_s),
                m.missed_req_per_s.map_or("—".into(), |x| format!("{x:.2}")),
                format!("{:.0}", m.gen_tok_per_s),
                format!("{:.2}s", m.ttft_p99_ms / 1000.0),
                format!("{:.0}ms", m.tpot_p99_ms),
                format!("{:.2}", m.usd_per_hour),
                format!("{:.2}", m.usd_per_m_output_tokens),
                match (m.meets_target, m.missed_req_per_s) {
                    (Some(false), _) => "below the target rate".into(),
                    (_, None) => "the SLO holds even full: the hardware binds".into(),
                    _ => String::new(),
                },
            ]),
        };
        (
            head(&c.gpu, c.num_gpus, c.tensor_parallel, r.replicas),
            cells,
        )
    };
    o.push_str(&candidates(&columns, rows.iter().map(row)));
    o.push_str(
        "\n\"full req/s\" is every server kept full (the most the hardware completes); \"SLO req/s\" the highest \
         Poisson rate found within the bounds, all servers together, and \"misses at\" the lowest rate probed above it \
         that missed them (probes bisect between 1/64 of full and full, to 1/128 of full).\n",
    );
    term::out(&o)
}

fn model_name(base: &Scenario) -> String {
    base.model
        .as_ref()
        .and_then(|m| m.entry.as_ref())
        .map_or("the model".to_string(), |m| m.display.clone())
}

fn plan_table(base: &Scenario, rows: &[PlanRow], deadline_h: Option<f64>, load: Load) -> String {
    let model = model_name(base);
    let mut o = format!(
        "servesim plan — {model}, {} requests ({}); roofline step times from the catalog, uncalibrated\n{}\n",
        thousands(base.workload.requests),
        base.name,
        load.describe()
    );
    if let Some(d) = deadline_h {
        o.push_str(&format!(
            "deadline {d} h: candidates that meet it first, cheapest first\n"
        ));
    }
    o.push('\n');
    let columns: Vec<&str> = "KV tokens,gen tok/s,req/s,finish h,cost $,\
        $/M tok,in flight,TTFT p99,TPOT p99,E2E p99,binds / why not"
        .split(',')
        .collect();
    let row = |r: &PlanRow| {
        let cells = match &r.outcome {
            Outcome::Infeasible { reason } => Err(format!("infeasible: {reason}")),
            Outcome::Feasible(m) => {
                let late = usize::from(m.meets_deadline == Some(false));
                let mark = ["", " (misses the deadline)"][late];
                Ok(vec![
                    m.kv_capacity_tokens.to_string(),
                    format!("{:.0}", m.gen_tok_per_s),
                    format!("{:.3}", m.steady_req_per_s),
                    format!("{:.2}", m.time_to_finish_s / 3600.0),
                    format!("{:.0}", m.cost_usd),
                    format!("{:.2}", m.usd_per_m_output_tokens),
                    m.concurrency_per_server
                        .map_or("open".to_string(), |c| c.to_string()),
                    format!("{:.1}s", m.ttft_p99_ms / 1000.0),
                    format!("{:.0}ms", m.tpot_p99_ms),
                    format!("{:.0}s", m.e2e_p99_ms / 1000.0),
                    format!("{}{mark}", m.binding.describe()),
                ])
            }
        };
        (
            head(&r.gpu, r.num_gpus, r.tensor_parallel, r.replicas),
            cells,
        )
    };
    o.push_str(&candidates(&columns, rows.iter().map(row)));
    o.push_str(match load {
        Load::Scenario => {
            "\nPrices are the catalog's indicative on-demand $/GPU-hour unless given with --price. Each server (TP GPUs) \
             gets an equal share of the requests and of the client's concurrency (\"in flight\", per server).\n"
        }
        Load::Saturate => {
            "\nPrices are the catalog's indicative on-demand $/GPU-hour unless given with --price. Each server (TP GPUs) \
             gets an equal share of the requests and keeps \"in flight\" of them sent: the concurrency that finishes its \
             share soonest, searched from the most it could run at once (its max_running_requests, or the mean prompts its \
             KV pool holds if fewer) down by factors of √2.\n"
        }
    });
    o
}

/// The first cells of a candidate's row: GPU, GPUs, TP and replicas.
fn head(gpu: &str, num_gpus: u32, tp: u32, replicas: u32) -> [String; 4] {
    [
        gpu.to_string(),
        num_gpus.to_string(),
        tp.to_string(),
        replicas.to_string(),
    ]
}

/// A table of candidates: GPU, GPUs, TP and replicas, then `columns`, the last left-aligned.
/// A row is its first four cells and the rest, or, for a candidate without metrics, a dash,
/// blanks and why.
fn candidates<'a>(
    columns: &[&str],
    rows: impl Iterator<Item = ([String; 4], Result<Vec<String>, String>)> + 'a,
) -> String {
    let header = [&["GPU", "GPUs", "TP", "reps"][..], columns].concat();
    let mut t = table(&header, 1);
    if let Some(last) = t.column_mut(header.len() - 1) {
        last.set_cell_alignment(comfy_table::CellAlignment::Left);
    }
    for (head, cells) in rows {
        let mut row = head.to_vec();
        match cells {
            Ok(cells) => row.extend(cells),
            Err(why) => {
                row.push("—".into());
                row.extend(std::iter::repeat_n(String::new(), columns.len() - 2));
                row.push(why);
            }
        }
        t.add_row(row);
    }
    render(&t)
}
