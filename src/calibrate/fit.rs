//! The fit: one equation per log window, solved by non-negative least squares.
//!
//! The unknowns are the linear model's five coefficients, in seconds: per decode step, per
//! request in a decode step, per KV token attended in a decode step, per prefill batch and per
//! prefilled token. Each equation says how long a window of the log took and what ran in it:
//! `Σ terms × coefficients = seconds`.
//!
//! * **SGLang** ([`sglang_equations`]): the window between two `Decode batch` lines holds
//!   `decode_log_interval` decode steps and the prefill batches logged between them; it lasted
//!   the decode tokens over the line's `gen throughput`. The decode tokens and the KV attended
//!   are estimated from the two lines' `#running-req` and `#token` (their mean, per step).
//!   Each data-parallel rank's lines make windows of their own.
//! * **vLLM** ([`vllm_equations`]): a stats window's busy time is made of steps, each with every
//!   running request; see that function.
//!
//! Solving: the equations are weighted by `1 / seconds` (every window counts by its relative
//! error, as throughputs are read), the columns scaled to unit norm, and the system solved by
//! singular value decomposition (`nalgebra`). A coefficient that comes out negative — a
//! per-KV-token cost fitted to a narrow range often does — is fixed at zero and the others
//! refitted without it (as the active-set method does); the result says which. A coefficient
//! whose standard error exceeds a tenth of its value is reported as poorly determined.

use nalgebra::{DMatrix, DVector};

use super::parse_sglang::{Event, SglangLog};
use super::parse_vllm::VllmLog;
use super::At;

/// The coefficients, in the order of [`Equation::x`].
pub const TERMS: [&str; 5] = [
    "decode_base",
    "decode_per_seq",
    "decode_per_kv_token",
    "prefill_base",
    "prefill_per_token",
];

/// A relative standard error above this marks a coefficient as poorly determined.
const POORLY_DETERMINED: f64 = 0.1;

/// One window of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Equation {
    /// The line that closes the window.
    pub at: At,
    /// How much of each term ran: decode steps, request-steps, KV-token-steps, prefill batches,
    /// prefilled tokens.
    pub x: [f64; 5],
    /// How long it took, seconds.
    pub seconds: f64,
}

/// A window left out of the fit, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The line that closes it.
    pub at: At,
    /// Why.
    pub reason: &'static str,
}

/// What became of one coefficient.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Term {
    /// Fitted, with its standard error (seconds).
    Fitted {
        /// The value, seconds per unit.
        value: f64,
        /// Its standard error.
        std_error: f64,
    },
    /// The unconstrained fit made it negative (this value): fixed at zero, the rest refitted.
    Negative(f64),
    /// No window had any of it: nothing to fit (kept at zero).
    Absent,
}

impl Term {
    /// The coefficient used, seconds per unit.
    pub fn value(self) -> f64 {
        match self {
            Term::Fitted { value, .. } => value,
            Term::Negative(_) | Term::Absent => 0.0,
        }
    }

    /// Fitted, but with a standard error above a tenth of the value.
    pub fn poorly_determined(self) -> bool {
        matches!(self, Term::Fitted { value, std_error } if std_error > POORLY_DETERMINED * value.abs())
    }
}

/// The fit and its quality.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// The five coefficients (see [`TERMS`]).
    pub terms: [Term; 5],
    /// Windows used.
    pub used: usize,
    /// Root-mean-square residual, seconds.
    pub rms_s: f64,
    /// Root-mean-square residual relative to each window's time.
    pub rms_relative: f64,
    /// The largest residual relative to its window's time, and where.
    pub max_relative: (f64, At),
    /// Coefficient of determination of the windows' times.
    pub r_squared: f64,
}

/// Why a fit cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    /// Fewer usable windows than the fit needs.
    #[error("{used} usable windows; the fit needs at least {needed}")]
    TooFew {
        /// Usable windows.
        used: usize,
        /// Needed.
        needed: usize,
    },
}

/// The fewest windows a fit is made from.
pub const MIN_WINDOWS: usize = 8;

/// Solve `equations` (see the module doc).
pub fn solve(equations: &[Equation]) -> Result<Fit, FitError> {
    let m = equations.len();
    if m < MIN_WINDOWS {
        return Err(FitError::TooFew {
            used: m,
            needed: MIN_WINDOWS,
        });
    }
    let mut terms = [Term::Absent; 5];
    let mut free: Vec<usize> = (0..5)
        .filter(|&j| equations.iter().any(|e| e.x[j] != 0.0))
        .collect();
    loop {
        let (values, errors) = least_squares(equations, &free);
        let worst = free
            .iter()
            .zip(&values)
            .filter(|(_, &v)| v < 0.0)
            .min_by(|a, b| {
                (a.1 / errors_of(&errors, &free, *a.0))
                    .total_cmp(&(b.1 / errors_of(&errors, &free, *b.0)))
            })
            .map(|(&j, &v)| (j, v));
        match worst {
            Some((j, v)) => {
                terms[j] = Term::Negative(v);
                free.retain(|&k| k != j);
            }
            None => {
                for ((&j, &value), &std_error) in free.iter().zip(&values).zip(&errors) {
                    terms[j] = Term::Fitted { value, std_error };
                }
                break;
            }
        }
    }
    Ok(quality(equations, terms))
}

fn errors_of(errors: &[f64], free: &[usize], j: usize) -> f64 {
    let i = free.iter().position(|&k| k == j).unwrap_or(0);
    errors[i].max(f64::MIN_POSITIVE)
}

/// Weighted least squares on the columns `free`: the values and their standard errors.
fn least_squares(equations: &[Equation], free: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let (m, k) = (equations.len(), free.len());
    if k == 0 {
        return (Vec::new(), Vec::new());
    }
    let a = DMatrix::from_fn(m, k, |i, c| equations[i].x[free[c]] / equations[i].seconds);
    let norms: Vec<f64> = (0..k)
        .map(|c| a.column(c).norm().max(f64::MIN_POSITIVE))
        .collect();
    let scaled = DMatrix::from_fn(m, k, |i, c| a[(i, c)] / norms[c]);
    let y = DVector::from_element(m, 1.0);
    let svd = scaled.clone().svd(true, true);
    let eps = 1e-12 * svd.singular_values.max();
    let sol = svd
        .solve(&y, eps)
        .expect("invariant: the SVD was computed with U and V");
    let residual = &scaled * &sol - &y;
    let dof = (m as f64 - k as f64).max(1.0);
    let sigma2 = residual.norm_squared() / dof;
    let v_t = svd
        .v_t
        .as_ref()
        .expect("invariant: the SVD was computed with V");
    let errors = (0..k)
        .map(|c| {
            let var: f64 = (0..svd.singular_values.len())
                .filter(|&s| svd.singular_values[s] > eps)
                .map(|s| (v_t[(s, c)] / svd.singular_values[s]).powi(2))
                .sum();
            (sigma2 * var).sqrt() / norms[c]
        })
        .collect();
    let values = (0..k).map(|c| sol[c] / norms[c]).collect();
    (values, errors)
}

fn quality(equations: &[Equation], terms: [Term; 5]) -> Fit {
    let predicted = |e: &Equation| -> f64 { (0..5).map(|j| e.x[j] * terms[j].value()).sum() };
    let m = equations.len() as f64;
    let mean = equations.iter().map(|e| e.seconds).sum::<f64>() / m;
    let (mut ss_res, mut ss_tot, mut rel2) = (0.0, 0.0, 0.0);
    let mut max_relative = (0.0, equations[0].at);
    for e in equations {
        let r = predicted(e) - e.seconds;
        ss_res += r * r;
        ss_tot += (e.seconds - mean).powi(2);
        let rel = (r / e.seconds).abs();
        rel2 += rel * rel;
        if rel > max_relative.0 {
            max_relative = (rel, e.at);
        }
    }
    Fit {
        terms,
        used: equations.len(),
        rms_s: (ss_res / m).sqrt(),
        rms_relative: (rel2 / m).sqrt(),
        max_relative,
        r_squared: if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            f64::NAN
        },
    }
}

/// The mean decode batch of a window from the batches its lines show: `first` at its start,
/// each prefill's `#running-req` before it and `+ #new-seq` after it, `last` at its end. The
/// prefills are taken as evenly spread over the window's decode steps, and the batch as moving
/// linearly between two lines.
fn mean_batch(first: u64, prefills: &[(u64, u64)], last: u64) -> f64 {
    let mut total = 0.0;
    let mut start = first as f64;
    for &(running, new) in prefills {
        total += (start + running as f64) / 2.0;
        start = (running + new) as f64;
    }
    total += (start + last as f64) / 2.0;
    total / (prefills.len() + 1) as f64
}

/// The mean context per running request at the window's two Decode lines (`#token` over
/// `#running-req`): the window's KV is taken as its mean batch times this.
fn mean_context(b0: u64, k0: u64, b1: u64, k1: u64) -> f64 {
    let per = |k: u64, b: u64| k as f64 / b.max(1) as f64;
    (per(k0, b0) + per(k1, b1)) / 2.0
}

/// The SGLang windows of `logs` (see the module doc); `interval` is `decode_log_interval`.
/// With `mixed` (`--enable-mixed-chunk`) a prefill batch also computes one token for each
/// running request (`#running-req`), which decodes inside it.
pub fn sglang_equations(
    logs: &[SglangLog],
    interval: u64,
    mixed: bool,
) -> (Vec<Equation>, Vec<Skipped>) {
    let (mut eqs, mut skipped) = (Vec::new(), Vec::new());
    let n = interval as f64;
    for events in logs.iter().flat_map(|l| &l.ranks).map(|(_, e)| e) {
        let mut previous: Option<(u64, u64)> = None;
        let mut batches: Vec<(u64, u64)> = Vec::new();
        let (mut prefills, mut tokens) = (0u64, 0u64);
        let mut spoiled: Option<&'static str> = None;
        for ev in events {
            match ev {
                Event::Prefill(p) => {
                    prefills += 1;
                    batches.push((p.running, p.new_seqs));
                    tokens += p.new_tokens + if mixed { p.running } else { 0 };
                    if p.running == 0 {
                        spoiled = spoiled.or(Some("the server may have been idle inside the window (a Prefill batch with #running-req: 0)"));
                    }
                }
                Event::Retract(_) => spoiled = Some("a retraction inside the window"),
                Event::Decode(d) => {
                    let reason = match (previous, spoiled) {
                        (None, _) => {
                            Some("the first Decode batch line of its log: no window before it")
                        }
                        (_, Some(r)) => Some(r),
                        _ if d.gen_tok_per_s <= 0.0 => Some("gen throughput 0"),
                        (Some((b0, _)), _) if 10 * b0.abs_diff(d.running) > d.running.max(b0) => Some(
                            "the batch changed by more than a tenth between the two Decode lines: the window's decode tokens are not known",
                        ),
                        _ => None,
                    };
                    match (reason, previous) {
                        (None, Some((b0, k0))) => {
                            let batch = mean_batch(b0, &[], d.running);
                            let kv = batch * mean_context(b0, k0, d.running, d.kv_tokens);
                            let generated = n * batch;
                            eqs.push(Equation {
                                at: d.at,
                                x: [n, generated, n * kv, prefills as f64, tokens as f64],
                                seconds: generated / d.gen_tok_per_s,
                            });
                        }
                        (Some(reason), _) => skipped.push(Skipped { at: d.at, reason }),
                        (None, None) => {
                            unreachable!("invariant: a window without a previous line has a reason")
                        }
                    }
                    previous = Some((d.running, d.kv_tokens));
                    (prefills, tokens, spoiled) = (0, 0, None);
                    batches.clear();
                }
            }
        }
    }
    (eqs, skipped)
}

/// The vLLM windows of `logs`: see [`super::parse_vllm`] for the lines. A window of `Δt`
/// seconds with `G` generated tokens, `P` prompt tokens computed and `R` running requests is
/// taken as `G / R` steps (each running request decodes one token per step), each attending
/// the window's KV tokens: `Δt = (G/R)·decode_base + G·decode_per_seq + P·prefill_per_token +
/// (G/R)·KV·decode_per_kv_token` — vLLM's mixed step (`prefill_base` is not a term: a prefill
/// shares its step with the decodes); the running requests and the KV are the means of the
/// window's two lines. Left out: the first and last line of each log, windows without
/// generation, with preemptions, or whose running requests changed by more than a tenth (and
/// more than one: at a few running requests one more or less is the usual jitter).
pub fn vllm_equations(logs: &[VllmLog]) -> (Vec<Equation>, Vec<Skipped>) {
    let (mut eqs, mut skipped) = (Vec::new(), Vec::new());
    for log in logs {
        let pool = log.pool_tokens.map(|p| p as f64);
        let last = log.stats.len().saturating_sub(1);
        for (i, s) in log.stats.iter().enumerate() {
            let previous = i.checked_sub(1).map(|j| &log.stats[j]);
            let reason = match previous {
                None => Some("the first stats line of its log: its window may include the start-up"),
                Some(_) if i == last => Some("the last stats line of its log: the server may have gone idle inside its window"),
                Some(_) if s.running == 0 || s.gen_tok_per_s <= 0.0 => Some("no generation in the window"),
                Some(_) if s.preemptions > 0 => Some("preemptions inside the window"),
                Some(p) if p.running.abs_diff(s.running) > 1u64.max(s.running.max(p.running) / 10) => {
                    Some("the running requests changed by more than a tenth (and more than one) between the two stats lines")
                }
                Some(_) if pool.is_none() => Some("the KV pool is unknown (no `GPU KV cache size` line)"),
                Some(_) => None,
            };
            let (Some(p), None) = (previous, reason) else {
                skipped.push(Skipped {
                    at: s.at,
                    reason: reason.unwrap_or("no window"),
                });
                continue;
            };
            let dt = s.window_s;
            let generated = s.gen_tok_per_s * dt;
            let prompt = s.prompt_tok_per_s * dt;
            let running = (p.running + s.running) as f64 / 2.0;
            let steps = generated / running;
            let kv = (p.kv_usage + s.kv_usage) / 2.0 * pool.unwrap_or(0.0);
            eqs.push(Equation {
                at: s.at,
                x: [steps, generated, steps * kv, 0.0, prompt],
                seconds: dt,
            });
        }
    }
    (eqs, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eq(line: u64, x: [f64; 5], c: [f64; 5]) -> Equation {
        Equation {
            at: At { file: 0, line },
            x,
            seconds: (0..5).map(|j| x[j] * c[j]).sum(),
        }
    }

    #[test]
    fn exact_equations_give_back_their_coefficients() {
        let c = [0.012, 0.0003, 6e-8, 0.008, 6e-5];
        let eqs: Vec<Equation> = (0..20u64)
            .map(|i| {
                let b = 1.0 + (i * 7 % 64) as f64;
                let kv = 1000.0 + (i * 7919 % 100_000) as f64;
                eq(
                    i,
                    [
                        40.0,
                        40.0 * b,
                        40.0 * kv,
                        (i % 3) as f64,
                        (i * 311 % 4000) as f64,
                    ],
                    c,
                )
            })
            .collect();
        let f = solve(&eqs).unwrap();
        for (j, (term, want)) in f.terms.iter().zip(c).enumerate() {
            let v = term.value();
            assert!((v - want).abs() < 1e-9 * want.max(1e-3), "{j}: {v}");
            assert!(!term.poorly_determined());
        }
        assert!(f.r_squared > 0.999_999);
        assert!(f.rms_relative < 1e-9);
    }

    #[test]
    fn a_negative_coefficient_is_fixed_at_zero_and_the_rest_refitted() {
        // The times fall with the KV: an unconstrained fit gives a negative per-KV cost.
        let eqs: Vec<Equation> = (0..12u64)
            .map(|i| {
                let b = 1.0 + i as f64;
                let kv = 1000.0 * (i % 4) as f64;
                let mut e = eq(
                    i,
                    [40.0, 40.0 * b, 40.0 * kv, 0.0, 0.0],
                    [0.01, 0.001, 0.0, 0.0, 0.0],
                );
                e.seconds -= 1e-6 * kv;
                e
            })
            .collect();
        let f = solve(&eqs).unwrap();
        assert!(
            matches!(f.terms[2], Term::Negative(v) if v < 0.0),
            "{:?}",
            f.terms
        );
        assert_eq!(f.terms[3], Term::Absent);
        assert!(f.terms[0].value() > 0.0 && f.terms[1].value() > 0.0);
    }

    #[test]
    fn too_few_windows_are_refused() {
        let eqs: Vec<Equation> = (0..3).map(|i| eq(i, [1.0; 5], [1.0; 5])).collect();
        assert_eq!(
            solve(&eqs),
            Err(FitError::TooFew {
                used: 3,
                needed: MIN_WINDOWS
            })
        );
    }
}
