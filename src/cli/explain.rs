//! `servesim explain`: the story of one run in words, with this run's numbers.

use super::args::ScenarioArgs;
use super::parallel::interruptible;
use super::Failure;
use crate::engine;
use crate::report::explain::{self, Context};
use crate::report::summary;
use crate::scenario::ClientSpec;

/// `servesim explain`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// `text` or `markdown`.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Text)]
    format: ExplainFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ExplainFormat {
    Text,
    Markdown,
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let (_, sc) = args.scenario.load()?;
    let (result, analysis) = engine::run_analysed(&sc, &interruptible())?;
    let summary = summary::summarize(&sc, &result, &analysis);
    let ctx = Context {
        scenario_arg: args.scenario.scenario.map(|p| p.display().to_string()),
        sets: args.scenario.set.sets.clone(),
        has_memory_model: sc.memory.is_some(),
        kv_pinned: sc.engine.kv_source.as_str() == "given",
        kv_capacity_tokens: sc.engine.kv_capacity_tokens,
        rate_per_s: match &sc.client {
            ClientSpec::Poisson { rate_per_s, .. } | ClientSpec::Gamma { rate_per_s, .. } => {
                Some(*rate_per_s)
            }
            ClientSpec::Closed { .. } | ClientSpec::Trace { .. } => None,
        },
    };
    let fmt = match args.format {
        ExplainFormat::Text => explain::Format::Text,
        ExplainFormat::Markdown => explain::Format::Markdown,
    };
    print!("{}", explain::render(&summary, &ctx, fmt));
    Ok(())
}
