//! Where every scenario key is declared: each section declares its keys beside the code that
//! reads them ([`SECTIONS`] lists them, in the README's order). This file resolves a path to its
//! declaration and renders the README's key reference from them.

use super::build::TOP;
use crate::scheduler::{sglang, vllm};
use crate::settings::{Key, Tagged, Ty};
use crate::{cost, memory, run, scheduler, workload};

/// Every section's keys with the file that declares and reads them, in the README's order.
pub const SECTIONS: &[(&str, &[Key])] = &[
    ("src/scenario/build.rs", TOP),
    ("src/run.rs", run::KEYS),
    ("src/memory/hardware.rs", memory::hardware::KEYS),
    ("src/scheduler/settings.rs", scheduler::settings::KEYS),
    ("src/memory/resolve.rs", memory::resolve::KEYS),
    ("src/scheduler/sglang/settings.rs", sglang::settings::KEYS),
    ("src/scheduler/vllm/settings.rs", vllm::settings::KEYS),
    ("src/cost/mod.rs", cost::KEYS),
    ("src/cost/linear.rs", cost::linear::KEYS),
    ("src/cost/roofline.rs", cost::roofline::KEYS),
    ("src/cost/table/read.rs", cost::table::read::KEYS),
    ("src/workload/mod.rs", workload::KEYS),
    ("src/workload/prefix.rs", workload::prefix::KEYS),
    ("src/workload/client.rs", workload::client::KEYS),
    ("src/workload/overhead.rs", workload::overhead::KEYS),
];

/// Values of a one-of key that name something servesim does not model: `(path, values, hint)`.
pub const NOT_MODELLED: &[&[(&str, &[&str], &str)]] = &[sglang::settings::NOT_MODELLED];

/// Every declared key.
pub fn keys() -> impl Iterator<Item = &'static Key> {
    SECTIONS.iter().flat_map(|(_, keys)| keys.iter())
}

/// The declaration of the key at `path`, a parameter of a tagged table included.
pub fn key(path: &str) -> Option<&'static Key> {
    keys().find(|k| k.path == path).or_else(|| {
        let (table, leaf) = path.rsplit_once('.')?;
        match key(table)?.ty {
            Ty::Tagged(t) | Ty::Tokens(t, _) => t.param(leaf),
            Ty::Named(n) => Some(&n.entry),
            Ty::Entry(keys) => keys.iter().find(|k| k.path == leaf),
            _ => None,
        }
    })
}

/// The README's key reference: one table per section (naming the file that declares it), each
/// followed by the keys of its named tables' entries, then the tagged tables (length
/// distributions) and their parameters.
pub fn readme() -> String {
    let head = "| key | accepts | default | for | meaning | example |\n|---|---|---|---|---|---|\n";
    let mut out = String::new();
    let mut tagged: Vec<&Tagged> = Vec::new();
    let mut note = |t: &'static Tagged| {
        if !tagged.iter().any(|s| s.tag == t.tag) {
            tagged.push(t);
        }
    };
    for (file, keys) in SECTIONS {
        out += &format!("\n`{file}`:\n\n{head}");
        let mut named = String::new();
        for k in keys.iter() {
            out += &k.readme_row();
            match k.ty {
                Ty::Tagged(t) | Ty::Tokens(t, _) => note(t),
                Ty::Named(n) => {
                    named += &n.readme(k.path, head);
                    n.params().iter().for_each(|p| {
                        if let Ty::Tagged(t) | Ty::Tokens(t, _) = p.ty {
                            note(t)
                        }
                    });
                }
                _ => {}
            }
        }
        out += &named;
    }
    tagged.iter().for_each(|t| out += &t.readme(head));
    out.trim_start().to_string()
}
