//! `servesim explain`: the story of one run in words, with this run's numbers; with `--out
//! DIR`, also a self-contained HTML handout (the text, the figures inline, the scenario).

use std::path::PathBuf;

use super::args::ScenarioArgs;
use super::output::{prepare_out_dir, write_outputs};
use super::parallel::interruptible;
use super::Failure;
use crate::analysis::Analysis;
use crate::engine;
use crate::metrics::RunResult;
use crate::report::explain::{self, Context};
use crate::report::handout::{self, Figure, Handout};
use crate::report::plots::{self, Format as FigureFormat};
use crate::report::summary;
use crate::scenario::Scenario;

/// `servesim explain`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// `text` or `markdown`.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text)]
    format: ExplainFormat,
    /// Also write a handout into this directory (created if missing): explain.html, one page
    /// with the text, the figures inline and the scenario, that opens offline.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ExplainFormat {
    Text,
    Markdown,
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let (source, sc) = args.scenario.load()?;
    if let Some(dir) = &args.out {
        prepare_out_dir(dir)?;
    }
    let (result, analysis) = engine::run_analysed(&sc, &interruptible())?;
    let summary = summary::summarize(&sc, &result, &analysis);
    let ctx = Context::new(
        &sc,
        args.scenario.scenario.map(|p| p.display().to_string()),
        &args.scenario.set.sets,
    );
    if let Some(dir) = &args.out {
        let figures = figures(&sc, &result, &analysis)?;
        let page = handout::page(&Handout {
            title: &explain::title(&summary),
            body_html: &explain::render(&summary, &ctx, explain::Format::Html),
            figures: &figures,
            scenario_name: &source.name,
            scenario_toml: &source.text,
            sets: &ctx.sets,
        });
        write_outputs(dir, &[("explain.html", page.into_bytes())])?;
        eprintln!("wrote {}", dir.join("explain.html").display());
    }
    let fmt = match args.format {
        ExplainFormat::Text => explain::Format::Text,
        ExplainFormat::Markdown => explain::Format::Markdown,
    };
    print!("{}", explain::render(&summary, &ctx, fmt));
    Ok(())
}

/// The run's three figures as PNG, with captions.
fn figures(sc: &Scenario, r: &RunResult, a: &Analysis) -> Result<Vec<Figure>, Failure> {
    let observe: Vec<f64> = sc.run.observe_at.iter().map(|t| t.as_secs_f64()).collect();
    let png = FigureFormat::Png;
    Ok(vec![
        Figure {
            caption: plots::THROUGHPUT_TITLE.to_string(),
            png: plots::throughput(r, a, &observe, png)?,
        },
        Figure {
            caption: plots::ENGINE_STATE_TITLE.to_string(),
            png: plots::engine_state(r, png)?,
        },
        Figure {
            caption: plots::LATENCY_TITLE.to_string(),
            png: plots::latency_cdf(r, png)?,
        },
    ])
}
