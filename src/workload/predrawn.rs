//! The first length draws of a sampled workload, drawn once and read back by every run that
//! would draw the same numbers.
//!
//! A plan's candidates, the runs of its saturation searches and a sweep's points send the same
//! requests — the same seed, the same two distributions — to different servers: each run would
//! draw the same lengths again, about 8 % of a plan's instructions. [`Predrawn`] holds the
//! first draws with the two streams' states after them; a run reads the draws in order and then
//! continues from those states ([`crate::workload::LengthStreams`]), so it sees exactly the
//! numbers its own streams would have given. It changes how fast a run goes, never what it
//! simulates (`tests/it/determinism.rs` runs with and without it).
//!
//! At most [`MAX_PREDRAWN`] pairs are kept (8 MiB): past them a run draws as usual, so memory
//! stays bounded whatever the request count.

use crate::rng::{Seeds, Stream, StreamName};
use crate::workload::dist::LengthDist;
use crate::workload::{Lengths, WorkloadSpec};

/// A stream's seed, stream number and position (`ChaCha8Rng::serialize_state`).
type State = [u8; 49];

/// The most `(prompt, output)` pairs kept (2²⁰, 8 MiB).
pub const MAX_PREDRAWN: u64 = 1 << 20;

/// The first draws of a sampled workload's prompt and output streams.
pub struct Predrawn {
    /// The seed and the two distributions the draws are of, as `Debug` text: a run reads them
    /// only when its own are the same ([`Predrawn::serves`]).
    key: String,
    /// Own prompt tokens and natural output tokens, in draw order.
    pairs: Box<[(u32, u32)]>,
    /// The prompt stream's state after the draws.
    prompt_after: State,
    /// The output stream's state after the draws.
    output_after: State,
}

impl std::fmt::Debug for Predrawn {
    // Not the million pairs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Predrawn")
            .field("key", &self.key)
            .field("pairs", &self.pairs.len())
            .finish_non_exhaustive()
    }
}

/// The two distributions of a sampled workload.
fn sampled(w: &WorkloadSpec) -> Option<(&LengthDist, &LengthDist)> {
    match &w.lengths {
        Lengths::Sampled {
            prompt_tokens,
            output_tokens,
        } => Some((prompt_tokens, output_tokens)),
        Lengths::Rows { .. } | Lengths::Trace { .. } => None,
    }
}

fn key(seed: u64, prompt: &LengthDist, output: &LengthDist) -> String {
    format!("{seed} {prompt:?} {output:?}")
}

impl Predrawn {
    /// The first `n` draws (at most [`MAX_PREDRAWN`]) of `w`'s lengths under `seed`; `None`
    /// when its lengths are not drawn from distributions.
    pub fn new(seed: u64, w: &WorkloadSpec, n: u64) -> Option<Predrawn> {
        let (prompt_tokens, output_tokens) = sampled(w)?;
        let seeds = Seeds::new(seed);
        let mut prompt = seeds.stream(StreamName::PromptTokens);
        let mut output = seeds.stream(StreamName::OutputTokens);
        let pairs = (0..n.min(MAX_PREDRAWN))
            .map(|_| {
                (
                    prompt_tokens.sample(&mut prompt),
                    output_tokens.sample(&mut output),
                )
            })
            .collect();
        Some(Predrawn {
            key: key(seed, prompt_tokens, output_tokens),
            pairs,
            prompt_after: prompt.serialize_state(),
            output_after: output.serialize_state(),
        })
    }

    /// The draws of the first run's workload, as many as the most requests of the runs that
    /// draw the same lengths; `None` when fewer than two runs do (nothing to share).
    pub fn shared<'a>(runs: impl IntoIterator<Item = (u64, &'a WorkloadSpec)>) -> Option<Predrawn> {
        let mut runs = runs.into_iter();
        let (seed, first) = runs.next()?;
        let (p, o) = sampled(first)?;
        let k = key(seed, p, o);
        let (mut sharing, mut most) = (1, first.requests);
        for (seed, w) in runs {
            if sampled(w).is_some_and(|(p, o)| key(seed, p, o) == k) {
                sharing += 1;
                most = most.max(w.requests);
            }
        }
        (sharing > 1).then(|| Predrawn::new(seed, first, most))?
    }

    /// Whether a run of `w` under `seed` draws these numbers first.
    pub fn serves(&self, seed: u64, w: &WorkloadSpec) -> bool {
        sampled(w).is_some_and(|(p, o)| key(seed, p, o) == self.key)
    }

    /// Draw `i`, if kept.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<(u32, u32)> {
        self.pairs.get(i).copied()
    }

    /// The prompt and output streams after the kept draws.
    pub fn streams_after(&self) -> (Stream, Stream) {
        (
            Stream::deserialize_state(&self.prompt_after),
            Stream::deserialize_state(&self.output_after),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Seeds;
    use crate::workload::dist::{Shape, MAX_TOKENS_PER_REQUEST as MAX};
    use crate::workload::LengthStreams;
    use std::sync::Arc;

    fn workload(prompt: Shape, output: Shape, requests: u64) -> WorkloadSpec {
        WorkloadSpec {
            requests,
            lengths: Lengths::Sampled {
                // Tight bounds under a normal: its truncation redraws, so draws use a varying
                // number of words.
                prompt_tokens: LengthDist::new(prompt, 200, 400),
                output_tokens: LengthDist::new(output, 1, MAX),
            },
            max_new_tokens: Some(2_000),
            ignore_eos: false,
            prefix_groups: Vec::new(),
        }
    }

    fn shapes() -> Vec<(Shape, Shape)> {
        let normal = Shape::Normal {
            mean: 300.0,
            std: 400.0,
        };
        let lognormal = Shape::LogNormal {
            mean: 500.0,
            cv: 1.2,
        };
        let gamma = Shape::Gamma {
            mean: 700.0,
            cv: 0.5,
        };
        let empirical = Shape::Empirical {
            values: Arc::from(vec![3.0, 40.0, 900.0]),
        };
        vec![
            (normal.clone(), lognormal.clone()),
            (Shape::Uniform, gamma),
            (lognormal, empirical),
            (normal, Shape::Exponential { mean: 90.0 }),
        ]
    }

    fn draws(w: &WorkloadSpec, mut s: LengthStreams, n: u64) -> Vec<(u32, u32)> {
        (0..n)
            .map(|seq| {
                let d = w.draw(seq, &mut s, None);
                (d.prompt_tokens, d.target_output_tokens)
            })
            .collect()
    }

    #[test]
    fn runs_reading_the_draws_then_their_streams_see_what_their_own_streams_give() {
        for (prompt, output) in shapes() {
            let w = workload(prompt, output, 300);
            let live = draws(&w, LengthStreams::new(&Seeds::new(11)), 300);
            for kept in [0, 1, 7, 128, 300, 1_000] {
                let p = Arc::new(Predrawn::new(11, &w, kept).unwrap());
                assert!(p.serves(11, &w));
                let read = LengthStreams::with_predrawn(11, &w, Some(&p));
                assert_eq!(draws(&w, read, 300), live, "{kept} kept, {w:?}");
            }
        }
    }

    #[test]
    fn a_run_of_another_seed_or_other_lengths_draws_its_own() {
        // Another seed; other prompt and output distributions; either alone.
        let [(a, b), (c, d), ..] = &shapes()[..] else {
            unreachable!()
        };
        let w = workload(a.clone(), b.clone(), 50);
        let p = Arc::new(Predrawn::new(11, &w, 50).unwrap());
        let others = [
            (12, w.clone()),
            (11, workload(c.clone(), d.clone(), 50)),
            (11, workload(a.clone(), d.clone(), 50)),
            (11, workload(c.clone(), b.clone(), 50)),
        ];
        for (seed, other) in &others {
            assert!(!p.serves(*seed, other), "{seed} {other:?}");
            assert!(Predrawn::shared([(11, &w), (*seed, other)]).is_none());
            let live = draws(other, LengthStreams::new(&Seeds::new(*seed)), 50);
            let read = LengthStreams::with_predrawn(*seed, other, Some(&p));
            assert_eq!(draws(other, read, 50), live, "{seed} {other:?}");
        }
    }

    #[test]
    fn runs_share_draws_only_when_two_draw_the_same() {
        let [(a, b), (c, d), ..] = &shapes()[..] else {
            unreachable!()
        };
        let (small, large) = (
            workload(a.clone(), b.clone(), 40),
            workload(a.clone(), b.clone(), 90),
        );
        let other = workload(c.clone(), d.clone(), 500);
        assert!(Predrawn::shared([(1, &small)]).is_none());
        assert!(Predrawn::shared([(1, &small), (2, &large), (1, &other)]).is_none());
        let p = Predrawn::shared([(1, &small), (1, &other), (1, &large)]).unwrap();
        assert_eq!(p.pairs.len(), 90);
        assert!(p.serves(1, &small) && p.serves(1, &large));
    }

    #[test]
    fn lengths_of_a_file_are_not_drawn_ahead() {
        let mut w = workload(Shape::Uniform, Shape::Uniform, 10);
        w.lengths = Lengths::Rows {
            file: "rows.csv".into(),
            rows: Arc::from(vec![(1, 2)]),
        };
        assert!(Predrawn::new(1, &w, 10).is_none());
    }
}
