//! The KV in use through a run of decode steps ([`super::DecodeRun`]): a slot per token
//! (SGLang), or whole blocks taken as requests fill theirs (vLLM's paged KV cache), with the
//! pool's time integral over any part of the run.

/// How the KV in use grows through the steps of a [`super::DecodeRun`], and its time integral.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunKv {
    /// By the batch every step, a slot per token (SGLang): the run's last step uses
    /// `kv_last` ([`super::RunState::Constant`]), each step before it `batch` fewer.
    PerToken {
        /// `Σ kv_used × step duration` over the run, ns × tokens.
        kv_integral: u128,
    },
    /// By whole blocks, as requests fill theirs (vLLM's paged KV cache): the simulator takes
    /// the integral over the parts of the run it needs ([`KvStairs::integral`]).
    Blocks(KvStairs),
}

impl Default for RunKv {
    fn default() -> Self {
        RunKv::PerToken { kv_integral: 0 }
    }
}

/// The KV in use through a run of decode steps of a paged KV cache: each step first takes the
/// blocks its requests need — which repeat with the block size as period, a request needing
/// one each time its tokens fill a block — and keeps them (vLLM: `kv_cache_manager.py:
/// allocate_slots`, one block per `block_size` tokens).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvStairs {
    /// Blocks in use before the run's first step.
    pub used0: u64,
    /// Tokens per block.
    pub block: u64,
    /// `prefix[t]`: the blocks the run's first `t` steps take, for `t` up to the period
    /// (`prefix.len() − 1`, the block size); `prefix[0] = 0`.
    pub prefix: Vec<u64>,
}

impl KvStairs {
    /// Blocks the run's first `steps` steps take.
    #[inline]
    pub fn taken(&self, steps: u64) -> u64 {
        let period = (self.prefix.len() - 1) as u64;
        (steps / period) * self.prefix[period as usize] + self.prefix[(steps % period) as usize]
    }

    /// KV tokens in use during step `j` (from 0): its blocks taken.
    #[inline]
    pub fn used_during(&self, j: u64) -> u64 {
        (self.used0 + self.taken(j + 1)) * self.block
    }

    /// `Σ_{from ≤ j < to} d_j × used_during(j)`, ns × tokens, `d_j` being step j's duration in
    /// `run`: the KV pool's time integral over those steps. For a run that is a line of floors
    /// and at least [`KvStairs::STRIDED`] periods long, in closed form per residue of the
    /// period ([`KvStairs::strided`]); otherwise one pass over the steps, a few integer
    /// operations each (the durations of a line, or the ends priced once).
    pub fn integral(&self, run: &crate::cost::DecodeSteps, from: u64, to: u64) -> u128 {
        let period = (self.prefix.len() - 1) as u64;
        let long = to.saturating_sub(from) >= Self::STRIDED * period;
        if let Some(sum) = run
            .line()
            .filter(|_| long)
            .and_then(|line| self.strided(line, from, to))
        {
            return sum * u128::from(self.block);
        }
        let per_period = self.prefix[period as usize];
        // Blocks in use during step `j`, stepped along: `whole` periods' worth, plus the
        // prefix of the current one.
        let (mut whole, mut r) = ((from + 1) / period, ((from + 1) % period) as usize);
        let mut sum = 0u128;
        for j in from..to {
            let used = self.used0 + whole * per_period + self.prefix[r];
            sum += u128::from(run.duration(j)) * u128::from(used);
            r += 1;
            if r as u64 == period {
                r = 0;
                whole += 1;
            }
        }
        sum * u128::from(self.block)
    }

    /// Periods from which [`KvStairs::integral`] works in closed form: its per-residue lines
    /// cost about as much as a pass over this many periods' steps.
    pub const STRIDED: u64 = 24;

    /// [`KvStairs::integral`] in blocks, by residue: step `j = q + period·m` (from 0) uses
    /// `used0 + prefix[q + 1] + m·P` blocks (`P` a period's), so the sum is, per residue `q`,
    /// `(used0 + prefix[q + 1])·Σ d + P·Σ m·d` over every `period`-th step from `q` — a line
    /// of floors of its own ([`FloorLine::strided`], [`FloorLine::sums`]). `None` when one of
    /// those lines does not meet a line's conditions.
    fn strided(&self, line: &crate::cost::FloorLine, from: u64, to: u64) -> Option<u128> {
        let period = (self.prefix.len() - 1) as u64;
        let per_period = u128::from(self.prefix[period as usize]);
        let mut sum = 0u128;
        for q in 0..period {
            // The steps of residue q in from..to: m from `lo` to `hi` (excluded).
            let first_m = |j: u64| match j <= q {
                true => 0,
                false => (j - q).div_ceil(period),
            };
            let (lo, hi) = (first_m(from), first_m(to));
            if hi <= lo {
                continue;
            }
            let n = hi - lo;
            let (s, moment) = line.strided(q + period * lo, period, n)?.sums(n);
            let m_weighted = u128::from(lo) * s + moment;
            sum +=
                u128::from(self.used0 + self.prefix[q as usize + 1]) * s + per_period * m_weighted;
        }
        Some(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stairs of period 3 taking 2, 0 and 1 blocks of 4 tokens, from 5 in use.
    fn stairs() -> KvStairs {
        KvStairs {
            used0: 5,
            block: 4,
            prefix: vec![0, 2, 2, 3],
        }
    }

    #[test]
    fn kv_stairs_climb_by_hand() {
        let s = stairs();
        // Steps take 2, 0, 1, 2, 0, 1, …: after 0..=7 steps 0, 2, 2, 3, 5, 5, 6, 8 blocks.
        let taken: Vec<u64> = (0..8).map(|n| s.taken(n)).collect();
        assert_eq!(taken, [0, 2, 2, 3, 5, 5, 6, 8]);
        // During step 0 the pool holds 5 + 2 blocks, during step 3 5 + 5: × 4 tokens.
        assert_eq!(s.used_during(0), 28);
        assert_eq!(s.used_during(3), 40);
    }

    /// A run of the linear model (a line of floors: 1,000 ns + 3 ns a request + 0.7 ns a KV
    /// token a step).
    fn linear() -> crate::cost::linear::Linear {
        crate::cost::linear::Linear::new(crate::cost::linear::LinearStepTime {
            decode_base_ns: 1_000,
            decode_per_seq_ns: 3,
            decode_per_kv_token_ps: 700,
            prefill_base_ns: 1,
            prefill_per_token_ps: 1,
        })
    }

    #[test]
    fn a_kv_stairs_integral_by_hand() {
        let model = linear();
        // 2 requests from 10 KV tokens: steps attend 10, 12, 14 tokens and last
        // 1,006 + ⌊0.7·kv⌋ = 1,013, 1,014, 1,015 ns; the pool holds 28, 28, 32 tokens.
        let run = crate::cost::DecodeSteps::new(&model, 2, 10, 3, &[]);
        assert_eq!(
            (run.duration(0), run.duration(1), run.duration(2)),
            (1_013, 1_014, 1_015)
        );
        let s = stairs();
        assert_eq!(s.integral(&run, 0, 3), 1_013 * 28 + 1_014 * 28 + 1_015 * 32);
        assert_eq!(s.integral(&run, 1, 3), 1_014 * 28 + 1_015 * 32);
    }

    proptest::proptest! {
        /// The integral — in closed form per residue from 24 periods on, a pass over the steps
        /// below — is the sum over the steps of their durations times the pool's use.
        #[test]
        fn a_kv_stairs_integral_is_its_sum_step_by_step(
            prefix_steps in proptest::collection::vec(0u64..5, 1..20),
            used0 in 0u64..1_000,
            block in 1u64..64,
            batch in 1u64..200,
            kv_first in 0u64..100_000,
            steps in 1u64..3_000,
            cut in (0u64..3_000, 0u64..3_000),
        ) {
            let mut prefix = vec![0];
            for t in &prefix_steps {
                prefix.push(prefix.last().unwrap() + t);
            }
            let s = KvStairs { used0, block, prefix };
            let model = linear();
            let run = crate::cost::DecodeSteps::new(&model, batch, kv_first, steps, &[]);
            let (a, b) = (cut.0 % (steps + 1), cut.1 % (steps + 1));
            let (from, to) = (a.min(b), a.max(b));
            let by_step: u128 = (from..to)
                .map(|j| u128::from(run.duration(j)) * u128::from(s.used_during(j)))
                .sum();
            proptest::prop_assert_eq!(s.integral(&run, from, to), by_step);
        }
    }
}
