//! `servesim plan`: which GPU type, how many and which layout finish the workload by a
//! deadline at the lowest cost; every candidate simulated in parallel.

use super::args::{JobsArgs, OutputArgs, ScenarioFileArgs};
use super::output::{prepare_out_dir, render, table, write_outputs};
use super::parallel::{interruptible, map_with_progress};
use super::values::{self, GpuPrice};
use super::Failure;
use crate::catalog::Catalog;
use crate::plan::{self, Outcome, PlanRow};
use crate::report::plots::{self, Format};
use crate::report::text::thousands;
use crate::scenario::{self, Scenario};

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
    /// Tensor-parallel sizes to try (each that divides the count); default: one server on all
    /// the GPUs.
    #[arg(long, value_delimiter = ',', value_parser = values::positive)]
    tp: Vec<u32>,
    /// Only candidates finishing within this many hours are ranked by cost.
    #[arg(long, value_name = "HOURS", value_parser = values::hours)]
    deadline_h: Option<f64>,
    /// Override a GPU's $/GPU-hour, e.g. --price h100=2.49 (repeatable).
    #[arg(long = "price", value_name = "GPU=USD", value_parser = values::gpu_price)]
    prices: Vec<GpuPrice>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    jobs: JobsArgs,
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
    let cands = plan::candidates(&args.gpus, &args.counts, &args.tp);
    if cands.is_empty() {
        return Err(Failure::usage(
            "no candidate: every --tp is larger than every --counts",
            "give a TP no larger than the GPU count",
        ));
    }
    let out = args.output.out.as_deref();
    if let Some(dir) = out {
        prepare_out_dir(dir)?;
    }
    let catalog = Catalog::builtin_ref();
    let price_of = |g: &str| {
        args.prices
            .iter()
            .find(|p| p.gpu == g)
            .map(|p| p.usd_per_gpu_hour)
            .unwrap_or_else(|| catalog.gpu(g).map_or(0.0, |e| e.price_usd_per_hour))
    };
    let deadline_s = args.deadline_h.map(|h| h * 3600.0);
    let opts = interruptible();
    let results = map_with_progress(&cands, args.jobs, "candidates", |c| {
        plan::evaluate(&source, sets, &base, c, price_of(&c.gpu), deadline_s, &opts)
    })?;
    let mut rows = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    plan::sort(&mut rows);
    let mut json = serde_json::to_string_pretty(&rows).expect("invariant: rows serialise");
    json.push('\n');
    if let Some(dir) = out {
        let mut files: Vec<(String, Vec<u8>)> = vec![
            ("plan.csv".into(), plan::to_csv(&rows)),
            ("plan.json".into(), json.clone().into_bytes()),
        ];
        if args.output.figures() {
            let picks = crate::plan::highlights(&rows, args.deadline_h);
            for fmt in Format::ALL {
                files.push((
                    format!("plan.{}", fmt.extension()),
                    plots::plan_figure(&rows, &picks, args.deadline_h, fmt)?,
                ));
            }
        }
        write_outputs(dir, &files)?;
        eprintln!("wrote {} files to {}", files.len(), dir.display());
    }
    if args.output.json() {
        print!("{json}");
    } else {
        print!("{}", plan_table(&base, &rows, args.deadline_h));
    }
    Ok(())
}

fn plan_table(base: &Scenario, rows: &[PlanRow], deadline_h: Option<f64>) -> String {
    let model = base
        .model
        .as_ref()
        .and_then(|m| m.entry.as_ref())
        .map_or("the model".to_string(), |m| m.display.clone());
    let mut o = format!(
        "servesim plan — {model}, {} requests ({}); roofline step times from the catalog, uncalibrated\n",
        thousands(base.workload.requests),
        base.name
    );
    if let Some(d) = deadline_h {
        o.push_str(&format!(
            "deadline {d} h: candidates that meet it first, cheapest first\n"
        ));
    }
    o.push('\n');
    let mut t = table(
        &[
            "GPU",
            "GPUs",
            "TP",
            "reps",
            "KV tokens",
            "gen tok/s",
            "req/s",
            "finish h",
            "cost $",
            "$/M tok",
            "TTFT p99",
            "TPOT p99",
            "E2E p99",
            "binds / why not",
        ],
        1,
    );
    if let Some(last) = t.column_mut(13) {
        last.set_cell_alignment(comfy_table::CellAlignment::Left);
    }
    for r in rows {
        let mut cells = vec![
            r.gpu.clone(),
            r.num_gpus.to_string(),
            r.tensor_parallel.to_string(),
            r.replicas.to_string(),
        ];
        match &r.outcome {
            Outcome::Infeasible { reason } => {
                cells.push("—".into());
                cells.extend(std::iter::repeat_n(String::new(), 8));
                cells.push(format!("infeasible: {reason}"));
            }
            Outcome::Feasible(m) => {
                let mark = match m.meets_deadline {
                    Some(false) => " (misses the deadline)",
                    _ => "",
                };
                cells.extend([
                    m.kv_capacity_tokens.to_string(),
                    format!("{:.0}", m.gen_tok_per_s),
                    format!("{:.3}", m.steady_req_per_s),
                    format!("{:.2}", m.time_to_finish_s / 3600.0),
                    format!("{:.0}", m.cost_usd),
                    format!("{:.2}", m.usd_per_m_output_tokens),
                    format!("{:.1}s", m.ttft_p99_ms / 1000.0),
                    format!("{:.0}ms", m.tpot_p99_ms),
                    format!("{:.0}s", m.e2e_p99_ms / 1000.0),
                    format!("{}{mark}", m.binding.describe()),
                ]);
            }
        }
        t.add_row(cells);
    }
    o.push_str(&render(&t));
    o.push_str(
        "\nPrices are the catalog's indicative on-demand $/GPU-hour unless given with --price. Each server (TP GPUs) \
         gets an equal share of the requests and of the client's concurrency.\n",
    );
    o
}
