//! What the client sends and when: `[workload]` — lengths drawn from distributions or a trace of
//! requests read from a file — and the client's arrival process ([`client`]).

pub mod client;
pub mod datafile;
pub mod dist;
pub mod overhead;
pub mod predrawn;
pub mod prefix;
pub mod rows;
pub mod trace;

use std::sync::Arc;

use crate::request::SharedPrefix;
use crate::settings::{keys, Bad, Values};
use dist::{LengthDist, LENGTHS, MAX_TOKENS_PER_REQUEST as MAX_TOKENS};
pub use predrawn::Predrawn;
pub use prefix::CachedPrefixes;
use prefix::{PrefixGroup, PrefixSampler};
use trace::TraceRow;

/// The most requests one scenario may send (10⁹): far beyond any real job, small enough that a
/// typo such as 10¹⁵ is caught before it runs for days.
pub const MAX_REQUESTS: u64 = 1_000_000_000;

keys! {
/// `[workload]`.
KEYS:
"workload" [Table, Required, All, ""] "what the client sends", e.g. "[workload]";
"workload.requests" [Integer(1, MAX_REQUESTS), Unless("workload.trace", "its row count"), All, ""]
    "requests the client sends in all", e.g. "20000";
"workload.trace" [Text, Absent("none"), All, ""]
    "a file of requests sent in its order (relative to the scenario; CSV with a header, or JSON Lines): prompt_tokens, output_tokens, and optionally arrival_s, max_new_tokens, ignore_eos, prefix_group, prefix_tokens", e.g. r#""trace.csv""#;
"workload.lengths" [Table, Absent("none"), Without(&["workload.trace"]), ""]
    "whole rows of a file, each request one row drawn at random (prompt with its own output): CSV, JSON Lines, or ShareGPT .json with per-turn token counts", e.g. r#"{ file = "lengths.csv", prompt = "prompt_tokens", output = "output_tokens" }"#;
"workload.lengths.file" [Text, Required, All, ""]
    "the file, relative to the scenario (.csv, .jsonl, or a ShareGPT .json)", e.g. r#""lengths.jsonl""#;
"workload.lengths.prompt" [Text, Required, All, ""]
    "the prompt's token-count column (ShareGPT: the key of each turn holding its token count; servesim does not tokenize text)", e.g. r#""prompt_tokens""#;
"workload.lengths.output" [Text, Required, All, ""]
    "the output's token-count column (ShareGPT: the key of each turn holding its token count)", e.g. r#""output_tokens""#;
"workload.prompt_tokens" [Tagged(&LENGTHS), Required, Without(&["workload.trace", "workload.lengths"]), "tokens"]
    "prompt lengths", e.g. r#"{ dist = "lognormal", mean = 300, cv = 0.5 }"#;
"workload.output_tokens" [Tagged(&LENGTHS), Required, Without(&["workload.trace", "workload.lengths"]), "tokens"]
    "natural response lengths (where the model would stop by itself)", e.g. r#"{ dist = "lognormal", mean = 4116, cv = 0.2 }"#;
"workload.max_new_tokens" [Integer(1, MAX_TOKENS as u64), Absent("none: the client omits max_tokens"), All, "tokens"]
    "the max_tokens each request asks for (a trace's rows without their own)", e.g. "16384";
"workload.ignore_eos" [Bool, Flag(false), All, ""]
    "every request runs to max_new_tokens (asking for its sampled length, as the bench clients do; a trace's rows without their own)", e.g. "true";
}

/// `[workload]`.
#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    /// Requests the client sends in all.
    pub requests: u64,
    /// Where each request's lengths come from.
    pub lengths: Lengths,
    /// The `max_tokens` the client asks for; `None` when the client omits it (SGLang then
    /// allows up to the request-length limit). A trace's rows may ask for their own.
    pub max_new_tokens: Option<u32>,
    /// `ignore_eos`: every request runs to its `max_new_tokens` (a trace's rows may say).
    pub ignore_eos: bool,
    /// `workload.prefix_groups` (empty without it; a trace's groups are in its rows).
    pub prefix_groups: Vec<PrefixGroup>,
}

/// Where each request's prompt and output lengths come from.
#[derive(Clone, Debug)]
pub enum Lengths {
    /// Drawn from two distributions.
    Sampled {
        /// Prompt lengths.
        prompt_tokens: LengthDist,
        /// Natural response lengths (where the model would stop by itself).
        output_tokens: LengthDist,
    },
    /// Whole rows of a file, each request one row drawn at random (see [`rows`]).
    Rows {
        /// The file, as the scenario names it.
        file: String,
        /// `(prompt, output)` token counts of every row.
        rows: Arc<[(u32, u32)]>,
    },
    /// Row `seq` of a trace, sent in file order.
    Trace {
        /// The file, as the scenario names it.
        file: String,
        /// The rows sent (the first `requests` of the file).
        rows: Arc<[TraceRow]>,
        /// Whether the file gives `arrival_s` (every row then has one).
        has_arrivals: bool,
        /// The names of its prefix groups (`prefix_group`), in order of first appearance.
        groups: Arc<[String]>,
    },
}

/// The random streams lengths are drawn from: prompt and output lengths of distributions, and
/// the row of a `workload.lengths` file.
pub struct LengthStreams {
    /// `prompt_tokens`.
    prompt: crate::rng::Stream,
    /// `output_tokens`.
    output: crate::rng::Stream,
    /// `length_rows`.
    rows: crate::rng::Stream,
    /// The first prompt and output draws, made before the run ([`Predrawn`]); the two streams
    /// then start where those draws left them.
    predrawn: Option<Arc<Predrawn>>,
    /// Predrawn pairs read so far.
    read: usize,
}

impl LengthStreams {
    /// The streams of a seed.
    pub fn new(seeds: &crate::rng::Seeds) -> Self {
        use crate::rng::StreamName;
        LengthStreams {
            prompt: seeds.stream(StreamName::PromptTokens),
            output: seeds.stream(StreamName::OutputTokens),
            rows: seeds.stream(StreamName::LengthRows),
            predrawn: None,
            read: 0,
        }
    }

    /// The streams of `seed` for `w`, reading `predrawn`'s draws first when they are the ones
    /// these streams would give ([`Predrawn::serves`]).
    pub fn with_predrawn(seed: u64, w: &WorkloadSpec, predrawn: Option<&Arc<Predrawn>>) -> Self {
        let mut s = LengthStreams::new(&crate::rng::Seeds::new(seed));
        if let Some(p) = predrawn.filter(|p| p.serves(seed, w)) {
            (s.prompt, s.output) = p.streams_after();
            s.predrawn = Some(Arc::clone(p));
        }
        s
    }

    /// The next own prompt length and natural output length.
    #[inline(always)]
    fn sampled(&mut self, prompt: &LengthDist, output: &LengthDist) -> (u32, u32) {
        if let Some(pair) = self.predrawn.as_ref().and_then(|p| p.get(self.read)) {
            self.read += 1;
            return pair;
        }
        (
            prompt.sample(&mut self.prompt),
            output.sample(&mut self.output),
        )
    }
}

/// One request's lengths and what it asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drawn {
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// `max_tokens` asked for (`u32::MAX` when the client omits it).
    pub max_new_tokens: u32,
    /// Output tokens it generates before it stops.
    pub target_output_tokens: u32,
    /// Whether it ignores EOS.
    pub ignore_eos: bool,
    /// The prompt prefix it shares with its group (a trace row's; sampled workloads draw theirs
    /// with a [`PrefixSampler`]).
    pub prefix: Option<SharedPrefix>,
}

impl WorkloadSpec {
    /// Read `[workload]`, with its trace file if it names one.
    pub fn read(v: &mut dyn Values) -> Result<Self, Bad> {
        v.has("workload")?;
        let lengths = match v.opt::<String>("workload.trace")? {
            Some(file) => read_trace(v, file),
            None if v.given("workload.lengths")?.is_some() => read_rows(v),
            None => {
                let prompt_tokens = LengthDist::read(v, "workload.prompt_tokens");
                let output_tokens = LengthDist::read(v, "workload.output_tokens");
                Ok(Lengths::Sampled {
                    prompt_tokens: prompt_tokens?,
                    output_tokens: output_tokens?,
                })
            }
        };
        let given = v.opt::<u64>("workload.requests")?;
        let requests = match (lengths?, given) {
            (Lengths::Trace { rows, .. }, Some(n)) if n > rows.len() as u64 => {
                let msg = format!("is more than the {} of workload.trace", n_rows(rows.len()));
                let hint = "give at most that many, or leave it out to send every row";
                return Err(v.bad("workload.requests", msg, hint));
            }
            (
                Lengths::Trace {
                    file,
                    rows,
                    has_arrivals,
                    groups,
                },
                n,
            ) => {
                let n = n.unwrap_or(rows.len() as u64);
                let rows = rows[..n as usize].into();
                (
                    n,
                    Lengths::Trace {
                        file,
                        rows,
                        has_arrivals,
                        groups,
                    },
                )
            }
            (sampled, Some(n)) => (n, sampled),
            (_, None) => return Err(Bad), // reported by the walk
        };
        Ok(WorkloadSpec {
            requests: requests.0,
            lengths: requests.1,
            max_new_tokens: v.opt("workload.max_new_tokens")?,
            ignore_eos: v.get("workload.ignore_eos")?,
            prefix_groups: prefix::read(v)?,
        })
    }

    /// Whether requests share prompt prefixes: the scenario declares prefix groups, or its trace
    /// has a `prefix_group` column naming at least one.
    pub fn shares_prefixes(&self) -> bool {
        !self.group_names().is_empty()
    }

    /// The prefix groups' names (a trace's in order of first appearance).
    pub fn group_names(&self) -> Vec<String> {
        match &self.lengths {
            Lengths::Trace { groups, .. } => groups.to_vec(),
            Lengths::Sampled { .. } | Lengths::Rows { .. } => {
                self.prefix_groups.iter().map(|g| g.name.clone()).collect()
            }
        }
    }

    /// What the prompts need with every group's prefix cached ([`CachedPrefixes`]); `None`
    /// when requests share nothing.
    pub fn cached_prefixes(&self) -> Option<CachedPrefixes> {
        if !self.shares_prefixes() {
            return None;
        }
        let (mean_prompt, _) = self.mean_lengths();
        let (resident_tokens, shared) = match &self.lengths {
            Lengths::Trace { rows, groups, .. } => {
                // Rows of a group agree on its prefix (checked when the trace is read).
                let mut seen = vec![None; groups.len()];
                for p in rows.iter().filter_map(|r| r.prefix) {
                    seen[p.group as usize].get_or_insert(p.tokens);
                }
                let n = rows.len().max(1) as f64;
                let shared: f64 = rows
                    .iter()
                    .filter_map(|r| r.prefix)
                    .map(|p| f64::from(p.tokens))
                    .sum();
                (
                    seen.iter().flatten().map(|&t| f64::from(t)).sum(),
                    shared / n,
                )
            }
            Lengths::Sampled { .. } | Lengths::Rows { .. } => {
                let g = &self.prefix_groups;
                (
                    g.iter().map(|g| g.tokens.mean()).sum(),
                    g.iter().map(|g| g.share * g.tokens.mean()).sum(),
                )
            }
        };
        Some(CachedPrefixes {
            resident_tokens,
            mean_own_prompt_tokens: (mean_prompt - shared).max(0.0),
        })
    }

    /// The sampler of the groups' prefixes, for a sampled workload that declares groups.
    pub fn prefix_sampler(&self, rng: crate::rng::Stream) -> Option<PrefixSampler> {
        match &self.lengths {
            Lengths::Sampled { .. } | Lengths::Rows { .. } if !self.prefix_groups.is_empty() => {
                Some(PrefixSampler::new(&self.prefix_groups, rng))
            }
            _ => None,
        }
    }

    /// Request `seq`'s lengths: drawn from the distributions (with the prompt and output
    /// streams), or row `seq` of the trace.
    ///
    /// With `ignore_eos` a request runs to what it asks for: the bench clients ask for the
    /// sampled length capped by `max_new_tokens` (`sglang.bench_serving`, `vllm bench serve`);
    /// a trace row asks for its own `max_new_tokens` if it has one, else the same. Without, it
    /// asks for `max_new_tokens` (or nothing) and stops at its output length.
    ///
    /// A sampled request (or a row drawn from a lengths file) that `prefixes` puts in a group
    /// gets the group's prefix before its own prompt; a trace row has its own.
    #[inline]
    pub fn draw(
        &self,
        seq: u64,
        rngs: &mut LengthStreams,
        prefixes: Option<&mut PrefixSampler>,
    ) -> Drawn {
        let (prompt_tokens, natural, own_max, ignore_eos, prefix) = match &self.lengths {
            Lengths::Sampled {
                prompt_tokens,
                output_tokens,
            } => {
                let (own, natural) = rngs.sampled(prompt_tokens, output_tokens);
                let prefix = prefixes.and_then(PrefixSampler::draw);
                let shared = prefix.map_or(0, |p| p.tokens);
                (own + shared, natural, None, self.ignore_eos, prefix)
            }
            Lengths::Rows { rows, .. } => {
                use rand::RngExt;
                let (p, o) = rows[rngs.rows.random_range(0..rows.len())];
                let prefix = prefixes.and_then(PrefixSampler::draw);
                let shared = prefix.map_or(0, |p| p.tokens);
                (p + shared, o, None, self.ignore_eos, prefix)
            }
            Lengths::Trace { rows, .. } => {
                let r = rows[seq as usize];
                let eos = r.ignore_eos.unwrap_or(self.ignore_eos);
                (
                    r.prompt_tokens,
                    r.output_tokens,
                    r.max_new_tokens,
                    eos,
                    r.prefix,
                )
            }
        };
        let asked = own_max.or(self.max_new_tokens).unwrap_or(u32::MAX);
        let (max_new_tokens, target_output_tokens) = match (ignore_eos, own_max) {
            (true, Some(n)) => (n, n),
            (true, None) => (natural.min(asked), natural.min(asked)),
            (false, _) => (asked, natural.min(asked)),
        };
        Drawn {
            prompt_tokens,
            max_new_tokens,
            target_output_tokens,
            ignore_eos,
            prefix,
        }
    }

    /// The key that gives the prompt lengths (where a problem with them is reported).
    pub fn prompts_key(&self) -> &'static str {
        match &self.lengths {
            Lengths::Sampled { .. } => "workload.prompt_tokens",
            Lengths::Trace { .. } => "workload.trace",
            Lengths::Rows { .. } => "workload.lengths.file",
        }
    }

    /// The smallest prompt the workload can send.
    pub fn smallest_prompt(&self) -> u32 {
        match &self.lengths {
            // The groups' shares add up to at most 1: some request may be ungrouped.
            Lengths::Sampled { prompt_tokens, .. } => prompt_tokens.smallest(),
            Lengths::Trace { rows, .. } => rows.iter().map(|r| r.prompt_tokens).min().unwrap_or(1),
            Lengths::Rows { rows, .. } => rows.iter().map(|r| r.0).min().unwrap_or(1),
        }
    }

    /// The mean prompt and output lengths before any clamp (for estimates and reports).
    pub fn mean_lengths(&self) -> (f64, f64) {
        // A sampled request's group prefix comes before its own prompt (a trace's rows have it).
        let shared: f64 = self
            .prefix_groups
            .iter()
            .map(|g| g.share * g.tokens.mean())
            .sum();
        match &self.lengths {
            Lengths::Sampled {
                prompt_tokens,
                output_tokens,
            } => (
                prompt_tokens.nominal_mean() + shared,
                output_tokens.nominal_mean(),
            ),
            Lengths::Trace { rows, .. } => {
                let n = rows.len().max(1) as f64;
                let sum =
                    |f: fn(&TraceRow) -> u32| rows.iter().map(|r| f64::from(f(r))).sum::<f64>();
                (sum(|r| r.prompt_tokens) / n, sum(|r| r.output_tokens) / n)
            }
            Lengths::Rows { rows, .. } => {
                let n = rows.len().max(1) as f64;
                let p = rows.iter().map(|r| f64::from(r.0)).sum::<f64>();
                (
                    p / n + shared,
                    rows.iter().map(|r| f64::from(r.1)).sum::<f64>() / n,
                )
            }
        }
    }

    /// One line each for the prompt and output lengths, e.g. `lognormal(mean 4116, cv 0.45) in
    /// [1, 16384]`, or `trace x.csv (20 rows, mean 512)`.
    pub fn describe(&self) -> (String, String) {
        match &self.lengths {
            Lengths::Sampled {
                prompt_tokens,
                output_tokens,
            } => (prompt_tokens.describe(), output_tokens.describe()),
            Lengths::Trace { file, rows, .. } => {
                let (p, o) = self.mean_lengths();
                let row = |m: f64| format!("trace {file} ({}, mean {m:.1})", n_rows(rows.len()));
                (row(p), row(o))
            }
            Lengths::Rows { file, rows } => {
                let (p, o) = self.mean_lengths();
                let row = |m: f64| {
                    format!(
                        "rows of {file} ({}, mean {m:.1}, drawn as pairs)",
                        n_rows(rows.len())
                    )
                };
                (row(p), row(o))
            }
        }
    }
}

/// "1 row", "20 rows".
fn n_rows(n: usize) -> String {
    match n {
        1 => "1 row".into(),
        n => format!("{n} rows"),
    }
}

/// Read `workload.lengths`: the rows of its file.
fn read_rows(v: &mut dyn Values) -> Result<Lengths, Bad> {
    let file: String = v.get("workload.lengths.file")?;
    let (prompt, output): (String, String) = (
        v.get("workload.lengths.prompt")?,
        v.get("workload.lengths.output")?,
    );
    match rows::load(&v.input(&file), &prompt, &output) {
        Ok(r) => Ok(Lengths::Rows {
            file,
            rows: r.into(),
        }),
        Err(e) => {
            let msg = format!("{file} {}", e.message);
            Err(v.bad("workload.lengths.file", msg, e.hint))
        }
    }
}

/// Read the trace named by `workload.trace`; every bad cell is reported at the key, with the
/// file's line and column.
fn read_trace(v: &mut dyn Values, file: String) -> Result<Lengths, Bad> {
    match trace::load(&v.input(&file)) {
        Ok(t) => Ok(Lengths::Trace {
            file,
            rows: t.rows.into(),
            has_arrivals: t.has_arrivals,
            groups: t.groups.into(),
        }),
        Err(errors) => {
            for e in errors {
                let at = match e.at {
                    Some(a) => match a.field {
                        Some(f) => format!(":{}:{f}", a.line),
                        None => format!(":{}", a.line),
                    },
                    None => String::new(),
                };
                let column = match &e.column {
                    Some(c) if !e.message.contains(&format!("`{c}`")) => format!("{c}: "),
                    _ => String::new(),
                };
                v.bad(
                    "workload.trace",
                    format!("{file}{at}: {column}{}", e.message),
                    e.hint,
                );
            }
            Err(Bad)
        }
    }
}
