//! Shared prompt prefixes in a sampled workload: `[workload.prefix_groups]`, one entry per group
//! (a system prompt, a few-shot template, a tool schema), each with its prefix length and the
//! share of requests that use it. A trace gives the same per row (`prefix_group`,
//! `prefix_tokens`, see [`super::trace`]).
//!
//! Each request joins one group, or none, at random (the "prefix_groups" stream); a group's
//! prefix length is a count, or is drawn once per run from a length distribution. A grouped
//! request's prompt is its group's prefix followed by its own part, drawn from
//! `workload.prompt_tokens` as usual (or, with `workload.lengths`, the row's prompt) — as the
//! engines' benchmark generators build them.

use rand::RngExt;

use super::dist::{LengthDist, LENGTHS, MAX_TOKENS_PER_REQUEST as MAX_TOKENS};
use crate::request::SharedPrefix;
use crate::rng::Stream;
use crate::settings::{keys, Bad, Key, Named, Val, Values};

keys! {
/// `workload.prefix_groups`.
KEYS:
"workload.prefix_groups" [Named(&GROUPS), Absent("none: prompts share nothing"), Without(&["workload.trace"]), ""]
    "prompt prefixes shared by groups of requests (a system prompt, a template): one entry per group, by name; a grouped request's prompt is the prefix followed by its own prompt_tokens", e.g. r#"{ system = { tokens = 2000, share = 0.8 } }"#;
}

keys! {
/// The keys of one prefix group (relative to its entry).
GROUP_KEYS:
"tokens" [Tokens(&LENGTHS, MAX_TOKENS as u64), Required, All, "tokens"]
    "the prompt tokens the group's requests share: a count, or a length distribution drawn once per run", e.g. "2000";
"share" [Number(Fraction), Required, All, ""]
    "the fraction of requests that use this prefix (the shares add up to at most 1; the other requests share nothing)", e.g. "0.8";
}

/// One entry of `workload.prefix_groups`.
pub const GROUPS: Named = Named {
    noun: "prefix group",
    entry: Key {
        path: "*",
        ty: crate::settings::Ty::Entry(GROUP_KEYS),
        default: crate::settings::DefaultValue::Required,
        when: crate::settings::When::All,
        unit: "",
        meaning: "one prefix group",
        example: "{ tokens = 2000, share = 0.8 }",
    },
};

/// The KV a workload's prompts need when a prefix cache keeps every group's prefix: each prefix
/// once, and each request its own prompt tokens beyond its group's prefix (SGLang's radix cache
/// and vLLM's prefix caching both hold a shared prefix in one copy that every request of the
/// group references: `mem_cache/unified_radix_cache.py`, `v1/core/block_pool.py`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CachedPrefixes {
    /// Every group's prefix, once (a drawn length counts with its mean).
    pub resident_tokens: f64,
    /// A request's mean prompt tokens beyond its group's prefix (all of an ungrouped
    /// request's prompt).
    pub mean_own_prompt_tokens: f64,
}

/// A group's prefix length.
#[derive(Clone, Debug)]
pub enum GroupTokens {
    /// Always this many tokens.
    Fixed(u32),
    /// Drawn once per run from this distribution.
    Drawn(LengthDist),
}

/// One group of requests sharing a prompt prefix.
#[derive(Clone, Debug)]
pub struct PrefixGroup {
    /// Its name (the key of its entry).
    pub name: String,
    /// Its prefix length.
    pub tokens: GroupTokens,
    /// The fraction of requests in it.
    pub share: f64,
}

impl GroupTokens {
    /// The mean prefix length (for estimates and descriptions).
    pub fn mean(&self) -> f64 {
        match self {
            GroupTokens::Fixed(n) => f64::from(*n),
            GroupTokens::Drawn(d) => d.nominal_mean(),
        }
    }

    /// As written in reports: `2000`, or the distribution.
    pub fn describe(&self) -> String {
        match self {
            GroupTokens::Fixed(n) => n.to_string(),
            GroupTokens::Drawn(d) => d.describe(),
        }
    }
}

/// Read `workload.prefix_groups` (empty when absent).
pub fn read(v: &mut dyn Values) -> Result<Vec<PrefixGroup>, Bad> {
    const PATH: &str = "workload.prefix_groups";
    if v.given(PATH)?.is_none() {
        return Ok(Vec::new());
    }
    let mut groups = Vec::new();
    let mut failed = false;
    for name in v.names(PATH) {
        let entry = format!("{PATH}.{name}");
        let at = format!("{entry}.tokens");
        let tokens = match v.given(&at) {
            Ok(Some(Val::Int(n))) => Ok(GroupTokens::Fixed(*n as u32)),
            Ok(Some(_)) => LengthDist::read(v, &at).map(GroupTokens::Drawn),
            _ => Err(Bad),
        };
        match (tokens, v.get::<f64>(&format!("{entry}.share"))) {
            (Ok(tokens), Ok(share)) => groups.push(PrefixGroup {
                name,
                tokens,
                share,
            }),
            _ => failed = true,
        }
    }
    if failed {
        return Err(Bad);
    }
    let total: f64 = groups.iter().map(|g| g.share).sum();
    if total > 1.0 + 1e-9 {
        let msg = format!("the groups' shares add up to {total}, more than 1");
        let hint =
            "each request uses at most one prefix: lower the shares so they add up to 1 or less";
        return Err(v.fail(PATH, PATH, msg, hint));
    }
    Ok(groups)
}

/// Draws each request's group: the groups' prefix lengths once, then one group (or none) per
/// request in send order.
#[derive(Debug)]
pub struct PrefixSampler {
    tokens: Vec<u32>,
    /// Cumulative shares, in the groups' order.
    upto: Vec<f64>,
    rng: Stream,
}

impl PrefixSampler {
    /// A sampler of `groups` drawing from `rng` (the "prefix_groups" stream).
    pub fn new(groups: &[PrefixGroup], mut rng: Stream) -> Self {
        let tokens = groups
            .iter()
            .map(|g| match &g.tokens {
                GroupTokens::Fixed(n) => *n,
                GroupTokens::Drawn(d) => d.sample(&mut rng),
            })
            .collect();
        let mut sum = 0.0;
        let upto = groups
            .iter()
            .map(|g| {
                sum += g.share;
                sum
            })
            .collect();
        PrefixSampler { tokens, upto, rng }
    }

    /// The groups' prefix lengths, as drawn for this run.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The next request's shared prefix, if it joins a group.
    pub fn draw(&mut self) -> Option<SharedPrefix> {
        let u: f64 = self.rng.random();
        let group = self.upto.iter().position(|&c| u < c)?;
        Some(SharedPrefix {
            group: group as u32,
            tokens: self.tokens[group],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Seeds, StreamName};

    fn group(name: &str, tokens: u32, share: f64) -> PrefixGroup {
        PrefixGroup {
            name: name.into(),
            tokens: GroupTokens::Fixed(tokens),
            share,
        }
    }

    #[test]
    fn requests_join_groups_in_proportion_to_their_shares() {
        let groups = [group("a", 100, 0.5), group("b", 40, 0.2)];
        let mut s = PrefixSampler::new(&groups, Seeds::new(3).stream(StreamName::PrefixGroups));
        let mut counts = [0u32; 3];
        for _ in 0..20_000 {
            match s.draw() {
                Some(p) => {
                    assert_eq!(p.tokens, [100, 40][p.group as usize]);
                    counts[p.group as usize] += 1;
                }
                None => counts[2] += 1,
            }
        }
        let frac = |n: u32| f64::from(n) / 20_000.0;
        assert!((frac(counts[0]) - 0.5).abs() < 0.02, "{counts:?}");
        assert!((frac(counts[1]) - 0.2).abs() < 0.02, "{counts:?}");
        assert!((frac(counts[2]) - 0.3).abs() < 0.02, "{counts:?}");
    }

    #[test]
    fn a_drawn_prefix_length_counts_with_its_distributions_mean() {
        // Uniform on [100, 900]: mean (100 + 900) / 2 = 500.
        let d = LengthDist::new(crate::workload::dist::Shape::Uniform, 100, 900);
        assert_eq!(GroupTokens::Drawn(d).mean(), 500.0);
        assert_eq!(GroupTokens::Fixed(64).mean(), 64.0);
    }

    #[test]
    fn shares_adding_up_to_one_with_a_rounding_error_are_accepted() {
        // 0.56 + 0.34 + 0.1 is 1.0000000000000002 in doubles: 1 within the tolerance.
        let text = "name = \"t\"\n[engine]\nkv_capacity_tokens = 100000\n[workload]\nrequests = 10\n\
                    prompt_tokens = { dist = \"constant\", value = 100 }\n\
                    output_tokens = { dist = \"constant\", value = 50 }\n\
                    prefix_groups = { a = { tokens = 20, share = 0.56 }, b = { tokens = 30, share = 0.34 }, c = { tokens = 40, share = 0.1 } }\n\
                    [client]\nconcurrency = 4\n";
        let src = crate::scenario::Source {
            name: "t.toml".into(),
            base_dir: std::path::PathBuf::from("."),
            text: text.into(),
        };
        let sc = crate::scenario::load(&src, &[]).unwrap();
        let shares: Vec<f64> = sc.workload.prefix_groups.iter().map(|g| g.share).collect();
        assert_eq!(shares, vec![0.56, 0.34, 0.1]);
    }
}
