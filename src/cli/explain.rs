//! `servesim explain`: the story of one run in words, with this run's numbers.

use super::args::ScenarioArgs;
use super::interrupt::{self, interruptible};
use super::{term, Failure};
use crate::report::explain::{self, Context};
use crate::report::summary;
use crate::scenario::ClientSpec;
use crate::{analysis, engine};

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
    let result = engine::run(&sc, &interruptible())?;
    interrupt::check()?;
    let analysis = analysis::analyse(&result);
    interrupt::check()?;
    let summary = summary::summarize(&sc, &result, &analysis);
    let ctx = Context {
        scenario_arg: args.scenario.scenario.map(|p| p.display().to_string()),
        has_memory_model: sc.memory.is_some(),
        kv_capacity_tokens: sc.engine.kv_capacity_tokens,
        mem_fraction_static: sc.memory.as_ref().and_then(|m| m.mem_fraction_static()),
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
    let text = explain::render(&summary, &ctx, fmt);
    interrupt::check()?;
    term::out(&text)?;
    super::check::warn(&sc);
    Ok(())
}
