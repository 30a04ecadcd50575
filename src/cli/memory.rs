//! `servesim memory`: the KV budget from GPU memory, term by term, with the out-of-memory
//! verdict; with `--vary`, the same for a range of settings (a table, and with `--out` the
//! memory figure).

use std::path::PathBuf;

use super::args::{JsonArg, ScenarioArgs};
use super::output::Outputs;
use super::sweep::grid;
use super::table::{render, table};
use super::{interrupt, term, values, Failure};
use crate::memory::SglangMemory;
use crate::report::plots::{self, Format};
use crate::report::text::thousands;
use crate::report::{self};
use crate::scenario::{KvSource, MemoryDerivation, MemoryModel, Scenario};
use crate::sweep::{self, Axis, PointError};

/// `servesim memory`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    scenario: ScenarioArgs,
    /// Also derive it for a range of settings, e.g. engine.mem_fraction_static=0.80:0.95:0.01.
    #[arg(long = "vary", value_name = "KEY=SPEC", value_parser = values::vary)]
    vary: Vec<Axis>,
    #[command(flatten)]
    print: JsonArg,
    /// Write the memory figure (PNG and SVG) for the range into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// One setting of the range: its overrides and its memory model.
struct RangeRow {
    sets: Vec<String>,
    memory: MemoryModel,
}

fn no_memory_model(name: &str) -> Failure {
    Failure::usage(
        format!("scenario `{name}` has no memory model inputs"),
        "give [hardware] gpu (or memory_mib) and [model] name (or kv_bytes_per_token and weight_gib_per_gpu)",
    )
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let (source, sc) = args.scenario.load()?;
    let base = sc
        .memory
        .clone()
        .ok_or_else(|| no_memory_model(&source.name))?;
    let points = grid(&args.vary)?;
    let mut rows = Vec::new();
    if !args.vary.is_empty() {
        let scenarios = sweep::validate_points(&source, &args.scenario.set.sets, &points)
            .map_err(|errors| invalid_settings(errors, points.len()))?;
        for (p, s) in points.into_iter().zip(scenarios) {
            let m = s.memory.ok_or_else(|| no_memory_model(&source.name))?;
            rows.push(RangeRow { sets: p, memory: m });
        }
    }
    if let Some(dir) = &args.out {
        let mut bars: Vec<(f64, SglangMemory)> = Vec::new();
        for m in std::iter::once(&base).chain(rows.iter().map(|r| &r.memory)) {
            if let MemoryDerivation::Sglang(s) = &m.derivation {
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
        let mut outputs = Outputs::new(args.scenario.inputs(&sc));
        let out = outputs.dir(dir)?;
        let mut files = Vec::new();
        for fmt in Format::ALL {
            files.push((
                fmt,
                outputs.file_in(&out, &format!("memory.{}", fmt.extension()))?,
            ));
        }
        for (fmt, id) in files {
            interrupt::check()?;
            outputs.write(id, &plots::memory_figure(&bars, fmt)?)?;
        }
        interrupt::check()?;
        outputs.commit()?;
        term::note(&format!("wrote the memory figure to {}", dir.display()));
    }
    let pin = pin_note(&sc, &base);
    let at_once = report::memory::at_once(&sc);
    if args.print.json {
        let mut j = serde_json::json!({
            "scenario": sc.name,
            "kv_capacity_tokens": sc.engine.kv_capacity_tokens,
            "kv_capacity_source": sc.engine.kv_source.as_str(),
            "pin_note": pin,
            "memory": base,
            "range": rows.iter().map(|r| serde_json::json!({ "set": r.sets, "memory": r.memory })).collect::<Vec<_>>(),
        });
        if let Some(a) = &at_once {
            j["requests_at_once"] = serde_json::json!(a);
        }
        let mut text = serde_json::to_string_pretty(&j).expect("invariant: memory serialises");
        text.push('\n');
        return term::out(&text);
    }
    let mut text = report::memory::derivation(&base, &sc.name);
    if let Some(a) = &at_once {
        text.push('\n');
        text.push_str(&report::memory::at_once_text(a));
    }
    if let Some(note) = pin {
        text.push_str(&format!("note: {note}\n"));
    }
    if !rows.is_empty() {
        text.push('\n');
        text.push_str(&range_table(&base, &rows));
    }
    term::out(&text)
}

/// When the scenario pins its KV pool (`engine.kv_capacity_tokens` or vLLM's
/// `num_gpu_blocks_override`), what the pin means for the derivation: the run uses the pin, so
/// the memory settings change nothing it sees — except that a pin above what memory holds is
/// more than the engine would allocate.
fn pin_note(sc: &Scenario, m: &MemoryModel) -> Option<String> {
    let key = match sc.engine.kv_source {
        KvSource::Derived => return None,
        KvSource::Given => "engine.kv_capacity_tokens",
        KvSource::BlocksOverride => "engine.num_gpu_blocks_override",
    };
    let (pinned, derived) = (sc.engine.kv_capacity_tokens, m.kv_tokens());
    let mut note = format!(
        "{key} pins the KV pool at {} tokens: runs use the pin, not the {} tokens derived above, so \
         changing the memory settings (mem_fraction_static, the weights, the GPU) changes nothing a \
         run sees; the derivation and its verdict describe what a server with these settings would allocate",
        thousands(pinned),
        thousands(derived)
    );
    if pinned > derived && matches!(m.derivation, MemoryDerivation::Sglang(_)) {
        note.push_str(
            "; SGLang itself would cap a --max-total-tokens above the profiled pool at the profiled value",
        );
    }
    Some(note)
}

/// The first problems of the invalid settings.
fn invalid_settings(errors: Vec<PointError>, total: usize) -> Failure {
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
        error: format!("{n} of {total} settings are invalid"),
        causes,
        hint: None,
        code: 2,
    }
}

/// The table of a range of settings, relative to the scenario's own derivation.
fn range_table(base: &MemoryModel, rows: &[RangeRow]) -> String {
    let base_tokens = base.kv_tokens().max(1) as f64;
    let mut t = table(
        &[
            "setting",
            "pool GiB",
            "KV tokens",
            "vs base",
            "slack GiB",
            "need GiB",
            "verdict",
        ],
        1,
    );
    for r in rows {
        let (pool, slack, need, verdict) = match &r.memory.derivation {
            MemoryDerivation::Sglang(s) => (
                s.kv_pool_gib,
                format!("{:.2}", s.slack_gib),
                format!("{:.2}", s.need_gib),
                s.verdict.as_str(),
            ),
            MemoryDerivation::Vllm(v) => (v.kv_gib, "—".into(), "—".into(), "—"),
        };
        t.add_row(vec![
            r.sets.join(" "),
            format!("{pool:.2}"),
            thousands(r.memory.kv_tokens()),
            format!("{:.2}×", r.memory.kv_tokens() as f64 / base_tokens),
            slack,
            need,
            verdict.to_string(),
        ]);
    }
    let mut w = render(&t);
    if let MemoryDerivation::Sglang(s) = &base.derivation {
        let f0 = s.inputs.mem_fraction_static;
        w.push_str(&format!(
            "\"vs base\" is the pool relative to f = {f0:.3}; scaling the pool by the ratio of fractions would \
             wrongly predict f / {f0:.3} (e.g. {:.2}× at 0.95)\n",
            0.95 / f0
        ));
    }
    w
}
