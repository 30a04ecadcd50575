//! `servesim catalog`: the built-in GPUs and models, and those of a catalog file of your own.

use std::path::PathBuf;

use super::args::JsonArg;
use super::table::{render, table};
use super::{term, Failure};
use crate::catalog::{Attention, Catalog};
use crate::report::text::thousands;

/// `servesim catalog`.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// A TOML file of [[gpu]] and [[model]] entries extending or overriding the built-in ones.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    print: JsonArg,
}

pub(super) fn run(args: Args) -> Result<(), Failure> {
    let c = match &args.file {
        None => Catalog::builtin(),
        Some(f) => Catalog::with_user_file(f).map_err(|e| {
            Failure::usage(
                e.to_string(),
                "a TOML file of [[gpu]] and [[model]] entries with the built-in fields",
            )
        })?,
    };
    if args.print.json {
        let j = serde_json::json!({ "gpus": c.gpus, "models": c.models });
        let mut text = serde_json::to_string_pretty(&j).expect("invariant: the catalog serialises");
        text.push('\n');
        term::out(&text)
    } else {
        term::out(&listing(&c))
    }
}

/// The catalog as two tables.
fn listing(c: &Catalog) -> String {
    let mut gpus = table(
        &[
            "name",
            "",
            "MiB",
            "HBM GB/s",
            "BF16 TF/s",
            "FP8 TF/s",
            "interconnect",
            "GB/s",
            "$/h",
        ],
        2,
    );
    for g in &c.gpus {
        gpus.add_row(vec![
            g.name.clone(),
            g.display.clone(),
            g.memory_mib.to_string(),
            format!("{:.0}", g.hbm_bandwidth_gb_per_s),
            format!("{:.0}", g.bf16_dense_tflops),
            format!("{:.0}", g.fp8_dense_tflops.unwrap_or(0.0)),
            g.interconnect.to_string(),
            format!("{:.0}", g.interconnect_gb_per_s),
            format!("{:.2}", g.price_usd_per_hour),
        ]);
    }
    let mut models = table(
        &[
            "name",
            "layers",
            "attention",
            "params B",
            "active B",
            "experts",
            "weights",
            "KV B/token",
            "KV B/tok TP8",
        ],
        1,
    );
    if let Some(attention) = models.column_mut(2) {
        attention.set_cell_alignment(comfy_table::CellAlignment::Left);
    }
    for m in &c.models {
        let attn = match m.attention {
            Attention::Gqa { kv_heads, head_dim } => {
                format!("GQA {}q/{kv_heads}kv × {head_dim}", m.q_heads)
            }
            Attention::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => format!("MLA {kv_lora_rank}+{qk_rope_head_dim}"),
        };
        let experts = match &m.moe {
            Some(moe) => format!("{}/{}", moe.experts_per_token, moe.num_experts),
            None => "dense".into(),
        };
        let dtype = serde_json::to_value(m.weight_dtype)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        models.add_row(vec![
            m.name.clone(),
            m.layers.to_string(),
            attn,
            format!("{:.1}", m.total_params_b),
            format!("{:.1}", m.active_params_b),
            experts,
            format!("{:.0} GB {dtype}", m.checkpoint_gb),
            thousands(m.kv_bytes_per_token(1, 2)),
            thousands(m.kv_bytes_per_token(8, 2)),
        ]);
    }
    format!(
        "GPUs\n{}\nModels\n{}\nSources and assumptions are in the data files (src/catalog/*.toml); prices are indicative \
         on-demand figures to override. Extend or override entries with a TOML file of your own: \
         `catalog = \"my-catalog.toml\"` in a scenario, or `servesim catalog --file my-catalog.toml`.\n",
        render(&gpus),
        render(&models)
    )
}
