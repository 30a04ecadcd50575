//! `servesim explain`: the story of one run in words, with this run's numbers; with `--out
//! DIR`, also a self-contained HTML handout (the text, the figures inline, the scenario).

use std::path::PathBuf;

use super::args::ScenarioArgs;
use super::interrupt::{self, interruptible};
use super::output::Outputs;
use super::{term, Failure};
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
    // The handout's path is checked, and staged, before the run (the output rule of `run`).
    let mut outputs = Outputs::new(args.scenario.inputs(&sc));
    let page_file = match &args.out {
        Some(d) => {
            let dir = outputs.dir(d)?;
            Some(outputs.file_in(&dir, "explain.html")?)
        }
        None => None,
    };
    let (result, analysis) = engine::run_analysed(&sc, &interruptible())?;
    interrupt::check()?;
    let summary = summary::summarize(&sc, &result, &analysis);
    let ctx = Context::new(
        &sc,
        args.scenario.scenario.map(|p| p.display().to_string()),
        &args.scenario.set.sets,
    );
    if let Some(id) = page_file {
        let figures = figures(&sc, &result, &analysis)?;
        interrupt::check()?;
        let page = handout::page(&Handout {
            title: &explain::title(&summary),
            body_html: &explain::render(&summary, &ctx, explain::Format::Html),
            figures: &figures,
            scenario_name: &source.name,
            scenario_toml: &source.text,
            sets: &ctx.sets,
        });
        outputs.write(id, page.as_bytes())?;
        interrupt::check()?;
        let shown = outputs.shown(id).display().to_string();
        outputs.commit()?;
        term::note(&format!("wrote {shown}"));
    }
    let fmt = match args.format {
        ExplainFormat::Text => explain::Format::Text,
        ExplainFormat::Markdown => explain::Format::Markdown,
    };
    let text = explain::render(&summary, &ctx, fmt);
    interrupt::check()?;
    term::out(&text)?;
    super::check::warn(&sc);
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
