//! `servesim compare RESULT.json`: replay a benchmark result file's requests through a
//! scenario and print bench_serving's metrics, measured and simulated, side by side; with
//! `--out`, write `compare.json` and the figure of the CDFs (`compare-cdf`).

use std::path::PathBuf;

use super::args::{OutputArgs, SetArgs};
use super::interrupt;
use super::output::Outputs;
use super::{term, Failure};
use crate::compare::{self, result_file, LatencyCdfs};
use crate::report::plots::{self, Format};
use crate::scenario::{self, Source};

/// `servesim compare`. Without `--scenario`, a result file that names a model and a GPU the
/// catalog knows is replayed through them with the uncalibrated roofline.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// The result file of `python -m sglang.bench_serving --output-file F --output-details`
    /// or `vllm bench serve --save-result --save-detailed`.
    result: PathBuf,
    /// The scenario to replay the requests through (its engine, GPU, model and step times;
    /// the workload and client come from the result file).
    #[arg(long, value_name = "SCENARIO")]
    scenario: Option<PathBuf>,
    #[command(flatten)]
    set: SetArgs,
    #[command(flatten)]
    output: OutputArgs,
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let name = args.result.display().to_string();
    let file = result_file::load(&args.result).map_err(|e| Failure {
        error: format!("cannot compare `{name}`"),
        causes: vec![(e.to_string(), None)],
        hint: Some(e.hint().to_string()),
        code: 2,
    })?;
    let source = match &args.scenario {
        Some(path) => Source::read(path)?,
        None => match compare::default_scenario_text(&file) {
            Ok(text) => {
                term::note("no --scenario: replaying through the catalog's model and GPU with the uncalibrated roofline");
                Source {
                    name: format!("{name} (catalog)"),
                    base_dir: PathBuf::from("."),
                    text,
                }
            }
            Err(why) => {
                return Err(Failure::usage(
                    format!("`{name}` cannot be replayed without --scenario: {why}"),
                    "give --scenario FILE with the engine, GPU, model and step times of the measured server, e.g. --scenario scenarios/published/qwen2.5-72b-8xh100-vllm.toml",
                ));
            }
        },
    };
    let base = scenario::load(&source, &args.set.sets)?;
    // Every output path is checked, and staged, before the replay; no input is replaced.
    let inputs = [args.result.clone()]
        .into_iter()
        .chain(args.scenario.clone())
        .chain(base.inputs.iter().cloned());
    let mut outputs = Outputs::new(inputs);
    let planned = match &args.output.out {
        Some(d) => {
            let dir = outputs.dir(d)?;
            let json = outputs.file_in(&dir, "compare.json")?;
            let mut figures = Vec::new();
            if args.output.figures() {
                for fmt in Format::ALL {
                    let name = format!("compare-cdf.{}", fmt.extension());
                    figures.push((fmt, outputs.file_in(&dir, &name)?));
                }
            }
            Some((dir, json, figures))
        }
        None => None,
    };
    if let Some(w) = compare::model_mismatch(&file, &base) {
        term::note(&format!("warning: {w}"));
    }
    let c = compare::compare(&base, &file, &name)?;
    interrupt::check()?;
    let json = serde_json::to_string_pretty(&c).expect("invariant: the comparison serializes");
    if let Some((dir, json_file, figures)) = planned {
        outputs.write(json_file, json.as_bytes())?;
        let (measured, simulated) = (LatencyCdfs::of(&c.measured), LatencyCdfs::of(&c.simulated));
        for (fmt, id) in figures {
            interrupt::check()?;
            outputs.write(id, &plots::compare_cdf(&measured, &simulated, fmt)?)?;
        }
        interrupt::check()?;
        let n = outputs.commit()?;
        term::note(&format!("wrote {n} files to {}", dir.shown().display()));
    }
    if args.output.json() {
        term::out(&format!("{json}\n"))
    } else {
        term::out(&compare::render(&c, &source.name))
    }
}
