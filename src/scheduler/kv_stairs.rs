//! The KV in use through a run of decode steps ([`super::DecodeRun`]): a slot per token
//! (SGLang), or whole blocks taken as requests fill theirs (vLLM's paged KV cache), with the
//! pool's time integral over any part of the run.

use crate::cost::floors::{floor_sums_small, power_sums, Floors};
use crate::cost::FloorLine;

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvStairs {
    /// Blocks in use before the run's first step.
    used0: u64,
    /// Tokens per block.
    block: u64,
    /// `prefix[t]`: the blocks the run's first `t` steps take, for `t` up to the period
    /// (`prefix.len() − 1`, the block size); `prefix[0] = 0`.
    prefix: Vec<u64>,
    /// `sums[R] = (Σ_{r<R} prefix[r], Σ_{r<R} r·prefix[r])` for `R` up to the period
    /// ([`KvStairs::taken_sums`]).
    sums: Vec<(u128, u128)>,
}

impl KvStairs {
    /// The stairs from `used0` blocks in use, of `block` tokens each, whose first `t` steps
    /// take `prefix[t]` blocks for `t` up to the period (`prefix.len() − 1 ≥ 1`;
    /// `prefix[0] = 0`).
    pub fn new(used0: u64, block: u64, prefix: Vec<u64>) -> Self {
        debug_assert!(prefix.len() >= 2 && prefix[0] == 0);
        let mut sums = Vec::with_capacity(prefix.len());
        let (mut c, mut d) = (0u128, 0u128);
        sums.push((c, d));
        for (r, &x) in prefix[..prefix.len() - 1].iter().enumerate() {
            c += u128::from(x);
            d += u128::from(r as u64) * u128::from(x);
            sums.push((c, d));
        }
        KvStairs {
            used0,
            block,
            prefix,
            sums,
        }
    }

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
    /// `run`: the KV pool's time integral over those steps. On a line of floors
    /// (`KvStairs::on_line`): its whole part in closed form, its floors in closed form per
    /// residue of the period from [`KvStairs::STRIDED`] periods on, else in one pass without
    /// a division. Otherwise one pass over the steps, a few integer operations each (the ends
    /// priced once).
    pub fn integral(&self, run: &crate::cost::DecodeSteps, from: u64, to: u64) -> u128 {
        if from >= to {
            return 0;
        }
        if let Some(sum) = run.line().and_then(|line| self.on_line(line, from, to)) {
            return sum * u128::from(self.block);
        }
        let sum: u128 = (from..to)
            .zip(self.blocks_from(from))
            .map(|(j, used)| u128::from(run.duration(j)) * u128::from(used))
            .sum();
        sum * u128::from(self.block)
    }

    /// The blocks in use during steps `from, from + 1, …`, stepped along without a division.
    fn blocks_from(&self, from: u64) -> Blocks<'_> {
        let period = self.prefix.len() - 1;
        Blocks {
            base: self.used0 + (from + 1) / period as u64 * self.prefix[period],
            per_period: self.prefix[period],
            prefix: &self.prefix[..period],
            r: ((from + 1) % period as u64) as usize,
        }
    }

    /// [`KvStairs::integral`] in blocks on a line of floors: step `j` lasts
    /// `q0 + q1·j + ⌊(r0 + r1·j)/den⌋` ns ([`FloorLine::parts`]), the whole part summed by
    /// [`KvStairs::on_exact_line`], the floors by [`KvStairs::floors_part`]. `None` when a
    /// product would leave 128 bits.
    fn on_line(&self, line: &FloorLine, from: u64, to: u64) -> Option<u128> {
        let ((q0, q1), floors) = line.parts();
        let whole = self.on_exact_line(q0, q1, from, to)?;
        match floors {
            None => Some(whole),
            Some(floors) => whole.checked_add(self.floors_part(floors, from, to)),
        }
    }

    /// `Σ_{from ≤ j < to} ⌊(r0 + r1·j)/den⌋ × blocks during j` (`r0, r1 < den`,
    /// `r0 + r1·j < den·(j + 1) ≤ 2⁶²`). From [`KvStairs::STRIDED`] periods on, by residue
    /// `q` of the period: step `j = q + P·m` holds `used0 + prefix[q + 1] + m·T` blocks (`P`
    /// the period, `T` the blocks it takes), and its floor is `α·t + β + ⌊(a·t + b)/den⌋` for
    /// `m = lo + t` (`r1·P = α·den + a`, `r0 + r1·(q + P·lo) = β·den + b`), whose sum and
    /// moment over `t` come from [`floor_sums_small`]. Below, one pass over the steps, the
    /// floor and the blocks stepped along without a division.
    fn floors_part(&self, Floors { r0, r1, den }: Floors, from: u64, to: u64) -> u128 {
        let period = (self.prefix.len() - 1) as u64;
        let per_period = self.prefix[period as usize];
        if to - from < Self::STRIDED * period {
            let x = r0 + r1 * from;
            let (mut floor, mut rem) = (x / den, x % den);
            let mut sum = 0u128;
            for used in self.blocks_from(from).take((to - from) as usize) {
                sum += u128::from(floor) * u128::from(used);
                rem += r1;
                if rem >= den {
                    rem -= den;
                    floor += 1;
                }
            }
            return sum;
        }
        let stride = u128::from(r1) * u128::from(period);
        let (alpha, a) = (
            (stride / u128::from(den)) as u64,
            (stride % u128::from(den)) as u64,
        );
        let t = u128::from(per_period);
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
            let x = r0 + r1 * (q + period * lo);
            let (beta, b) = (x / den, x % den);
            let (f, g, _) = floor_sums_small(a, b, den, n - 1);
            let (s1, s2) = power_sums(n);
            let (alpha, beta, n) = (u128::from(alpha), u128::from(beta), u128::from(n));
            let floors = alpha * s1 + beta * n + u128::from(f);
            let moment = alpha * s2 + beta * s1 + u128::from(g);
            let c_q = u128::from(self.used0 + self.prefix[q as usize + 1]);
            sum += c_q * floors + t * (u128::from(lo) * floors + moment);
        }
        sum
    }

    /// [`KvStairs::integral`] in blocks when step `j` lasts exactly `q0 + q1·j` ns. With
    /// `k = j + 1`, step `j` holds `used0 + taken(k)` blocks and lasts `a + q1·k` ns
    /// (`a = q0 − q1`), so the sum over `k` from `from + 1` to `to` is
    /// `used0·Σ(a + q1·k) + a·Σ taken(k) + q1·Σ k·taken(k)`, the last two from
    /// [`KvStairs::taken_sums`] at both ends. `None` when a product would leave 128 bits.
    fn on_exact_line(&self, q0: i128, q1: i128, from: u64, to: u64) -> Option<u128> {
        let (lo, hi) = (self.taken_sums(from + 1)?, self.taken_sums(to + 1)?);
        let n = i128::from(to - from);
        // Σ k for k from `from + 1` to `to`: one of n and from + 1 + to is even.
        let sum_k = match n % 2 {
            0 => (n / 2) * i128::from(from + 1 + to),
            _ => n * (i128::from(from + 1 + to) / 2),
        };
        let a = q0.checked_sub(q1)?;
        let durations = a.checked_mul(n)?.checked_add(q1.checked_mul(sum_k)?)?;
        let total = i128::from(self.used0)
            .checked_mul(durations)?
            .checked_add(a.checked_mul(hi.0 - lo.0)?)?
            .checked_add(q1.checked_mul(hi.1 - lo.1)?)?;
        u128::try_from(total).ok()
    }

    /// `(Σ_{k<n} taken(k), Σ_{k<n} k·taken(k))`, in a few operations. With `n = P·M + R`
    /// (`P` the period, `T` the blocks it takes, `C(R) = Σ_{r<R} prefix[r]`,
    /// `D(R) = Σ_{r<R} r·prefix[r]`), the `M` whole periods (`k = P·m + r` takes
    /// `m·T + prefix[r]`) and the `R` steps after them sum to
    /// `T·P·Σm + M·C(P) + R·M·T + C(R)` and
    /// `P²·T·Σm² + (P·C(P) + T·P(P − 1)/2)·Σm + M·D(P) + R·P·M²·T + P·M·C(R) + M·T·R(R − 1)/2
    /// + D(R)`, `Σ` over `m < M`. Every term is part of the second sum, at most
    /// `n²·taken(n)`: `None` from 2¹⁰⁰ on (or `n` from 2³²).
    fn taken_sums(&self, n: u64) -> Option<(i128, i128)> {
        let period = self.prefix.len() - 1;
        if n >= 1 << 32 || u128::from(n * n) * (u128::from(self.taken(n)) + 1) >= 1 << 100 {
            return None;
        }
        let (m, r) = (n / period as u64, (n % period as u64) as usize);
        let ((c, d), (c_r, d_r)) = (self.sums[period], self.sums[r]);
        // Σm and Σm² for m < M, without a 128-bit division.
        let (s1, s2) = power_sums(m);
        let (p, t, m, ru) = (
            period as u128,
            u128::from(self.prefix[period]),
            u128::from(m),
            r as u128,
        );
        let h0 = t * p * s1 + m * c + ru * m * t + c_r;
        let h1 = p * p * t * s2
            + (p * c + t * (p * (p - 1) / 2)) * s1
            + m * d
            + ru * p * m * m * t
            + p * m * c_r
            + m * t * (ru * ru.saturating_sub(1) / 2)
            + d_r;
        Some((h0 as i128, h1 as i128))
    }

    /// Periods from which `KvStairs::floors_part` sums by residue: its per-residue sums
    /// cost about as much as a pass over this many periods' steps.
    pub const STRIDED: u64 = 24;
}

/// [`KvStairs::blocks_from`]: the blocks during each step, `base` (the blocks before the current
/// period) plus the prefix of the period up to the step.
struct Blocks<'a> {
    base: u64,
    per_period: u64,
    prefix: &'a [u64],
    r: usize,
}

impl Iterator for Blocks<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        let used = self.base + self.prefix[self.r];
        self.r += 1;
        if self.r == self.prefix.len() {
            self.r = 0;
            self.base += self.per_period;
        }
        Some(used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::{Just, Strategy};

    /// A stairs of period 3 taking 2, 0 and 1 blocks of 4 tokens, from 5 in use.
    fn stairs() -> KvStairs {
        KvStairs::new(5, 4, vec![0, 2, 2, 3])
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

    /// The linear model at 1,000 ns + 3 ns a request + `per_kv_token_ps` a KV token a step: a
    /// line of floors, exact when the picoseconds are whole nanoseconds.
    fn linear_at(per_kv_token_ps: u64) -> crate::cost::linear::Linear {
        crate::cost::linear::Linear::new(crate::cost::linear::LinearStepTime {
            decode_base_ns: 1_000,
            decode_per_seq_ns: 3,
            decode_per_kv_token_ps: per_kv_token_ps,
            prefill_base_ns: 1,
            prefill_per_token_ps: 1,
        })
    }

    /// Steps of 0.7 ns a KV token: floors.
    fn linear() -> crate::cost::linear::Linear {
        linear_at(700)
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

    #[test]
    fn a_kv_stairs_integral_on_whole_nanoseconds_by_hand() {
        // 2 ns a KV token, 2 requests from 10 tokens: steps attend 10, 12, 14, … tokens and
        // last 1,006 + 2·kv = 1,026 + 4·j ns, exactly (the closed form of whole nanoseconds).
        let model = linear_at(2_000);
        let run = crate::cost::DecodeSteps::new(&model, 2, 10, 8, &[]);
        assert_eq!(run.line().map(FloorLine::parts), Some(((1_026, 4), None)));
        let s = stairs();
        // Blocks during steps 0..8: 7, 7, 8, 10, 10, 11, 13, 13 (5 + 2, 0, 1, 2, 0, 1, 2, 0).
        let blocks = [7, 7, 8, 10, 10, 11, 13, 13];
        let by_hand = |from: usize, to: usize| -> u128 {
            (from..to)
                .map(|j| (1_026 + 4 * j as u128) * blocks[j] * 4)
                .sum()
        };
        assert_eq!(s.integral(&run, 0, 8), by_hand(0, 8));
        assert_eq!(s.integral(&run, 2, 7), by_hand(2, 7));
        assert_eq!(s.integral(&run, 4, 5), 1_042 * 10 * 4);
        assert_eq!(s.integral(&run, 3, 3), 0);
    }

    proptest::proptest! {
        /// The integral — in a few operations on whole nanoseconds, else in closed form
        /// per residue from 24 periods on, a pass over the steps below — is the sum over the
        /// steps of their durations times the pool's use.
        #[test]
        fn a_kv_stairs_integral_is_its_sum_step_by_step(
            prefix_steps in proptest::collection::vec(0u64..5, 1..20),
            used0 in 0u64..1_000,
            block in 1u64..64,
            batch in 1u64..200,
            kv_first in 0u64..100_000,
            steps in 1u64..3_000,
            cut in (0u64..3_000, 0u64..3_000),
            per_kv_token_ps in proptest::prop_oneof![Just(700u64), (0u64..5).prop_map(|n| n * 1_000)],
        ) {
            let mut prefix = vec![0];
            for t in &prefix_steps {
                prefix.push(prefix.last().unwrap() + t);
            }
            let s = KvStairs::new(used0, block, prefix);
            let model = linear_at(per_kv_token_ps);
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
