//! The SLO search: for each candidate, the highest Poisson arrival rate its servers sustain with
//! p99 TTFT and p99 TPOT within bounds — "how many requests per second does this hardware serve
//! interactively?" — and, given a rate to reach, the candidates that reach it with the fewest
//! GPUs.
//!
//! Per candidate: the most its servers complete at all, `λ_sat`, is the highest steady rate of
//! closed-loop runs at the ladder of concurrencies [`saturate::search`] tries (each of
//! [`SATURATION_ROUNDS`] times as many requests as a server could run at once, so that it has a
//! steady state, and at least [`PROBE_REQUESTS`]); then open-loop probes of
//! [`PROBE_REQUESTS`] requests per server (fewer when the job is smaller) bracket the highest
//! rate within the SLO: `λ_sat / 64` must pass (else the candidate misses the SLO even lightly
//! loaded); when `λ_sat` itself passes the SLO does not bind and `λ_sat` is the answer (no
//! higher rate is sustained, however a finite probe fares); otherwise the bracket
//! `[λ_sat / 64, λ_sat]` is bisected [`BISECTIONS`] times, to within `λ_sat / 128`. A probe
//! meets the SLO when every request is answered and both p99s (over the whole probe, as
//! `bench_serving` reports them) are within their bounds. The rates reported are the sum over
//! the servers.

use serde::Serialize;

use super::memo::Memo;
use super::{prepare, saturate, Candidate, Load};
use crate::analysis;
use crate::csv_rows::{self, Fixed};
use crate::engine::{RunOptions, SimError};
use crate::memory::Verdict;
use crate::metrics::{RunResult, StopReason};
use crate::scenario::{Scenario, Source};
use crate::workload::Lengths;

/// Requests per server in one probe (at most).
pub const PROBE_REQUESTS: u64 = 2000;
/// Halvings of the bracket around the highest rate within the SLO.
pub const BISECTIONS: u32 = 7;
/// The saturation run sends at least this many times the requests a server keeps in flight.
pub const SATURATION_ROUNDS: u64 = 4;

/// The bounds: p99 TTFT and p99 TPOT (either may be absent).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Slo {
    /// p99 TTFT bound, seconds.
    pub ttft_p99_s: Option<f64>,
    /// p99 TPOT bound, milliseconds.
    pub tpot_p99_ms: Option<f64>,
}

impl Slo {
    /// Whether the run `r` answered every request within the bounds.
    pub fn met_by(&self, r: &Probe) -> bool {
        let ttft_s = r.ttft_p99_ms / 1000.0;
        r.all_answered
            && r.requests_rejected == 0
            && self.ttft_p99_s.is_none_or(|b| ttft_s <= b)
            && self.tpot_p99_ms.is_none_or(|b| r.tpot_p99_ms <= b)
    }

    /// The bounds in words, e.g. `p99 TTFT ≤ 2 s and p99 TPOT ≤ 50 ms`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .ttft_p99_s
            .map(|b| format!("p99 TTFT ≤ {b} s"))
            .into_iter()
            .chain(self.tpot_p99_ms.map(|b| format!("p99 TPOT ≤ {b} ms")))
            .collect();
        parts.join(" and ")
    }
}

/// What the search reads of a run (saturation run or probe): kept in the plan's [`Memo`], so
/// that candidates searching the same server share their runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// Every request answered (not stopped at `run.max_sim_s`).
    pub all_answered: bool,
    /// Requests rejected.
    pub requests_rejected: u64,
    /// Requests answered.
    pub requests_completed: u64,
    /// Output tokens generated.
    pub output_tokens: u64,
    /// Simulated time.
    pub sim_duration_s: f64,
    /// p99 TTFT.
    pub ttft_p99_ms: f64,
    /// p99 TPOT.
    pub tpot_p99_ms: f64,
    /// The rate the server sustains (steady, or an overloaded server's completion rate);
    /// without a window, the lifetime rate.
    pub sustained_req_per_s: f64,
}

impl Probe {
    /// What the search reads of `r`.
    pub fn of(r: RunResult) -> Self {
        let sustained_req_per_s = match analysis::analyse(&r).sustained_req_per_s() {
            Some(x) if x.is_finite() && x > 0.0 => x,
            _ => r.totals.requests_completed as f64 / r.totals.sim_duration_s,
        };
        Probe {
            all_answered: r.stop == StopReason::AllAnswered,
            requests_rejected: r.totals.requests_rejected,
            requests_completed: r.totals.requests_completed,
            output_tokens: r.totals.output_tokens,
            sim_duration_s: r.totals.sim_duration_s,
            ttft_p99_ms: r.latency.ttft_ms.quantile(0.99),
            tpot_p99_ms: r.latency.tpot_ms.quantile(0.99),
            sustained_req_per_s,
        }
    }
}

/// What a candidate sustains within the SLO (all servers together).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SloMetrics {
    /// KV pool per server.
    pub kv_capacity_tokens: u64,
    /// The memory verdict with every server full.
    pub oom_verdict: Option<Verdict>,
    /// The completion rate with every server full: the most the hardware completes at all.
    pub saturated_req_per_s: f64,
    /// The highest arrival rate found within the SLO (`saturated_req_per_s` when the bounds
    /// hold even there: the hardware binds, not the SLO).
    pub slo_req_per_s: f64,
    /// The lowest rate probed that missed the SLO (`None` when none did): the true limit lies
    /// between the two.
    pub missed_req_per_s: Option<f64>,
    /// Output tokens per second at that rate: the rate times the probe's mean output per
    /// request.
    pub gen_tok_per_s: f64,
    /// p99 TTFT at that rate.
    pub ttft_p99_ms: f64,
    /// p99 TPOT at that rate.
    pub tpot_p99_ms: f64,
    /// `GPUs × price`.
    pub usd_per_hour: f64,
    /// Cost per million output tokens at that rate.
    pub usd_per_m_output_tokens: f64,
    /// Whether it reaches the target rate (when one is given).
    pub meets_target: Option<bool>,
}

/// One candidate of an SLO search. In JSON: the candidate, `feasible`, the price, then either
/// the metrics or the `reason`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SloRow {
    /// The candidate.
    #[serde(flatten)]
    pub candidate: Candidate,
    /// Servers.
    pub replicas: u32,
    /// Whether the SLO is met at some rate.
    pub feasible: bool,
    /// `$/GPU-hour` used.
    pub price_usd_per_gpu_hour: f64,
    /// The metrics, or why there are none.
    #[serde(flatten)]
    pub outcome: SloOutcome,
}

/// What the search found.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SloOutcome {
    /// A rate within the SLO.
    Found(SloMetrics),
    /// None: the candidate cannot work, or misses the SLO even lightly loaded.
    NotFound {
        /// Why, in words.
        reason: String,
    },
}

impl SloRow {
    fn new(c: &Candidate, price: f64, outcome: SloOutcome) -> Self {
        SloRow {
            candidate: c.clone(),
            replicas: c.num_gpus / c.tensor_parallel.max(1),
            feasible: matches!(outcome, SloOutcome::Found(_)),
            price_usd_per_gpu_hour: price,
            outcome,
        }
    }

    /// The metrics, when found.
    pub fn metrics(&self) -> Option<&SloMetrics> {
        match &self.outcome {
            SloOutcome::Found(m) => Some(m),
            SloOutcome::NotFound { .. } => None,
        }
    }
}

/// Search candidate `c`'s highest rate within `slo`; `target_req_per_s` (all servers) marks
/// whether it is reached. `memo` holds the runs of the plan's other candidates: the search
/// is per server, so candidates of one GPU and TP degree share it.
#[allow(clippy::too_many_arguments)]
pub fn search(
    source: &Source,
    base_sets: &[String],
    base: &Scenario,
    c: &Candidate,
    price: f64,
    slo: Slo,
    target_req_per_s: Option<f64>,
    opts: &RunOptions,
    memo: &Memo<Probe>,
) -> Result<SloRow, SimError> {
    let not_found = |reason: String| Ok(SloRow::new(c, price, SloOutcome::NotFound { reason }));
    let replicas = f64::from(c.num_gpus / c.tensor_parallel.max(1));
    let share = base.workload.requests.div_ceil(replicas as u64).max(1);
    let full = match prepare(source, base_sets, base, c, Load::Saturate, &[]) {
        Ok(sc) => sc,
        Err(reason) => return not_found(reason),
    };
    let in_flight = saturate::at_once(&full);
    // A trace has only its rows.
    let rows = match &full.workload.lengths {
        Lengths::Trace { rows, .. } => rows.len() as u64,
        // Distributions and rows drawn at random have no end.
        Lengths::Sampled { .. } | Lengths::Rows { .. } => u64::MAX,
    };
    let long = (SATURATION_ROUNDS * in_flight)
        .max(PROBE_REQUESTS)
        .min(rows);
    let at = |n: u64| {
        let closed = [
            format!("client={{ mode = \"closed\", concurrency = {n} }}"),
            format!("workload.requests={long}"),
        ];
        match prepare(source, base_sets, base, c, Load::Scenario, &closed) {
            Ok(sc) => memo.run(&sc, opts, Probe::of),
            Err(reason) => Ok(Err(reason)),
        }
    };
    let rate = |r: &Probe| r.sustained_req_per_s;
    let duration = |r: &Probe| r.sim_duration_s;
    let saturated = match saturate::search(in_flight, at, rate, duration)? {
        Ok(s) => s.tried.iter().map(|t| t.1).fold(0.0, f64::max),
        Err(reason) => return not_found(reason),
    };
    if !saturated.is_finite() || saturated <= 0.0 {
        return not_found("no completion rate with every server full".into());
    }
    let requests = share.min(PROBE_REQUESTS);
    // A probe at `rate` req/s per server: its run if it meets the SLO.
    let probe = |rate: f64| -> Result<Result<Probe, String>, SimError> {
        let extra = [
            format!("client={{ mode = \"poisson\", rate_per_s = {rate} }}"),
            format!("workload.requests={requests}"),
        ];
        let sc = match prepare(source, base_sets, base, c, Load::Scenario, &extra) {
            Ok(sc) => sc,
            Err(reason) => return Ok(Err(reason)),
        };
        Ok(match memo.run(&sc, opts, Probe::of)? {
            Ok(r) if slo.met_by(&r) => Ok(r),
            // Why it missed: the p99s only where they are the reason.
            Ok(r) if !r.all_answered => Err(format!(
                "at {rate:.3} req/s per server the probe stopped at run.max_sim_s before every \
                 request was answered"
            )),
            Ok(r) if r.requests_rejected > 0 => Err(format!(
                "at {rate:.3} req/s per server {} of the probe's requests were rejected",
                r.requests_rejected
            )),
            Ok(r) => Err(format!(
                "at {rate:.3} req/s per server p99 TTFT is {:.2} s and p99 TPOT {:.1} ms",
                r.ttft_p99_ms / 1000.0,
                r.tpot_p99_ms
            )),
            Err(reason) => Err(reason),
        })
    };
    // The bracket [λ_sat / 64, λ_sat]: no rate above what the hardware completes is sustained,
    // whatever a finite probe says.
    let (mut lo, mut hi) = (saturated / 64.0, saturated);
    let mut best = match probe(lo)? {
        Ok(r) => (lo, r),
        Err(why) => {
            return not_found(format!(
                "misses {} even lightly loaded: {why}",
                slo.describe()
            ))
        }
    };
    let missed = match probe(hi)? {
        Ok(r) => {
            best = (hi, r);
            None
        }
        Err(_) => {
            for _ in 0..BISECTIONS {
                let mid = 0.5 * (lo + hi);
                match probe(mid)? {
                    Ok(r) => {
                        best = (mid, r);
                        lo = mid;
                    }
                    Err(_) => hi = mid,
                }
            }
            Some(hi)
        }
    };
    let (rate, r) = best;
    let usd_per_hour = f64::from(c.num_gpus) * price;
    // Sustained at that rate: every request's mean output, `rate` times a second.
    let tok_per_request = r.output_tokens as f64 / (r.requests_completed.max(1) as f64);
    let tok_per_s = rate * tok_per_request * replicas;
    let slo_req_per_s = rate * replicas;
    Ok(SloRow::new(
        c,
        price,
        SloOutcome::Found(SloMetrics {
            kv_capacity_tokens: full.engine.kv_capacity_tokens,
            oom_verdict: full.memory.as_ref().and_then(|m| m.verdict()),
            saturated_req_per_s: saturated * replicas,
            slo_req_per_s,
            missed_req_per_s: missed.map(|m| m * replicas),
            gen_tok_per_s: tok_per_s,
            ttft_p99_ms: r.ttft_p99_ms,
            tpot_p99_ms: r.tpot_p99_ms,
            usd_per_hour,
            usd_per_m_output_tokens: if tok_per_s > 0.0 {
                usd_per_hour / (tok_per_s * 3600.0 / 1e6)
            } else {
                0.0
            },
            meets_target: target_req_per_s.map(|t| slo_req_per_s >= t),
        }),
    ))
}

/// Order: with a target, those reaching it by fewest GPUs, then $/hour, then highest rate;
/// then the others by highest rate; the candidates without a rate last.
pub fn sort(rows: &mut [SloRow]) {
    rows.sort_by(|a, b| {
        let rank = |r: &SloRow| match r.metrics().map(|m| m.meets_target) {
            Some(Some(true)) => 0,
            Some(_) => 1,
            None => 2,
        };
        rank(a)
            .cmp(&rank(b))
            .then_with(|| match (a.metrics(), b.metrics(), rank(a)) {
                (Some(x), Some(y), 0) => a
                    .candidate
                    .num_gpus
                    .cmp(&b.candidate.num_gpus)
                    .then(x.usd_per_hour.total_cmp(&y.usd_per_hour))
                    .then(y.slo_req_per_s.total_cmp(&x.slo_req_per_s)),
                (Some(x), Some(y), _) => y.slo_req_per_s.total_cmp(&x.slo_req_per_s),
                _ => std::cmp::Ordering::Equal,
            })
            .then_with(|| a.candidate.gpu.cmp(&b.candidate.gpu))
            .then_with(|| a.candidate.num_gpus.cmp(&b.candidate.num_gpus))
            .then_with(|| {
                a.candidate
                    .tensor_parallel
                    .cmp(&b.candidate.tensor_parallel)
            })
    });
}

/// One row of `plan.csv` in an SLO search; a row without a rate has empty metric cells.
#[derive(Debug, Default, Serialize)]
struct CsvRow<'a> {
    gpu: &'a str,
    num_gpus: u32,
    tensor_parallel: u32,
    replicas: u32,
    feasible: bool,
    reason: Option<&'a str>,
    kv_capacity_tokens: Option<u64>,
    oom_verdict: Option<&'static str>,
    saturated_req_per_s: Option<Fixed<4>>,
    slo_req_per_s: Option<Fixed<4>>,
    missed_req_per_s: Option<Fixed<4>>,
    gen_tok_per_s: Option<Fixed<3>>,
    ttft_p99_ms: Option<Fixed<3>>,
    tpot_p99_ms: Option<Fixed<3>>,
    price_usd_per_gpu_hour: Fixed<4>,
    usd_per_hour: Option<Fixed<4>>,
    usd_per_m_output_tokens: Option<Fixed<4>>,
    meets_target: Option<bool>,
}

/// CSV of an SLO search.
pub fn to_csv(rows: &[SloRow]) -> Vec<u8> {
    csv_rows::rows_to_bytes(rows.iter().map(|r| {
        let m = r.metrics();
        CsvRow {
            gpu: &r.candidate.gpu,
            num_gpus: r.candidate.num_gpus,
            tensor_parallel: r.candidate.tensor_parallel,
            replicas: r.replicas,
            feasible: r.feasible,
            reason: match &r.outcome {
                SloOutcome::NotFound { reason } => Some(reason),
                SloOutcome::Found(_) => None,
            },
            kv_capacity_tokens: m.map(|m| m.kv_capacity_tokens),
            oom_verdict: m.and_then(|m| m.oom_verdict).map(Verdict::as_str),
            saturated_req_per_s: m.map(|m| Fixed(m.saturated_req_per_s)),
            slo_req_per_s: m.map(|m| Fixed(m.slo_req_per_s)),
            missed_req_per_s: m.and_then(|m| m.missed_req_per_s).map(Fixed),
            gen_tok_per_s: m.map(|m| Fixed(m.gen_tok_per_s)),
            ttft_p99_ms: m.map(|m| Fixed(m.ttft_p99_ms)),
            tpot_p99_ms: m.map(|m| Fixed(m.tpot_p99_ms)),
            price_usd_per_gpu_hour: Fixed(r.price_usd_per_gpu_hour),
            usd_per_hour: m.map(|m| Fixed(m.usd_per_hour)),
            usd_per_m_output_tokens: m.map(|m| Fixed(m.usd_per_m_output_tokens)),
            meets_target: m.and_then(|m| m.meets_target),
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(gpu: &str, gpus: u32, rate: Option<f64>, target: Option<f64>) -> SloRow {
        let c = Candidate {
            gpu: gpu.into(),
            num_gpus: gpus,
            tensor_parallel: 1,
        };
        let outcome = match rate {
            None => SloOutcome::NotFound {
                reason: "no".into(),
            },
            Some(r) => SloOutcome::Found(SloMetrics {
                kv_capacity_tokens: 1,
                oom_verdict: None,
                saturated_req_per_s: 2.0 * r,
                slo_req_per_s: r,
                missed_req_per_s: Some(1.5 * r),
                gen_tok_per_s: 1.0,
                ttft_p99_ms: 1.0,
                tpot_p99_ms: 1.0,
                usd_per_hour: f64::from(gpus),
                usd_per_m_output_tokens: 1.0,
                meets_target: target.map(|t| r >= t),
            }),
        };
        SloRow::new(&c, 1.0, outcome)
    }

    #[test]
    fn with_a_target_the_fewest_gpus_reaching_it_come_first_else_the_highest_rate() {
        let order = |rows: &mut Vec<SloRow>| {
            sort(rows);
            rows.iter()
                .map(|r| format!("{}{}", r.candidate.gpu, r.candidate.num_gpus))
                .collect::<Vec<_>>()
        };
        let t = Some(10.0);
        let mut rows = vec![
            row("a", 8, Some(40.0), t),
            row("b", 2, Some(12.0), t),
            row("c", 1, Some(5.0), t),
            row("d", 4, None, t),
            row("e", 4, Some(30.0), t),
            row("b", 4, Some(31.0), t),
        ];
        assert_eq!(order(&mut rows), ["b2", "b4", "e4", "a8", "c1", "d4"]);
        let mut rows = vec![
            row("a", 8, Some(40.0), None),
            row("b", 2, Some(12.0), None),
            row("d", 4, None, None),
        ];
        assert_eq!(order(&mut rows), ["a8", "b2", "d4"]);
    }

    #[test]
    fn a_probe_meets_the_slo_at_its_bounds_and_only_with_every_request_answered() {
        let slo = Slo {
            ttft_p99_s: Some(2.0),
            tpot_p99_ms: Some(50.0),
        };
        // Both p99s exactly at their bounds.
        let at = Probe {
            all_answered: true,
            requests_rejected: 0,
            requests_completed: 100,
            output_tokens: 5_000,
            sim_duration_s: 60.0,
            ttft_p99_ms: 2000.0,
            tpot_p99_ms: 50.0,
            sustained_req_per_s: 1.5,
        };
        assert!(slo.met_by(&at));
        let missed = |change: fn(&mut Probe)| {
            let mut p = at.clone();
            change(&mut p);
            !slo.met_by(&p)
        };
        assert!(missed(|p| p.ttft_p99_ms = 2000.001));
        assert!(missed(|p| p.tpot_p99_ms = 50.001));
        assert!(missed(|p| p.all_answered = false));
        assert!(missed(|p| p.requests_rejected = 1));
        // An absent bound binds nothing.
        let tpot_only = Slo {
            ttft_p99_s: None,
            ..slo
        };
        let slow_first = Probe {
            ttft_p99_ms: 1.0e9,
            ..at.clone()
        };
        assert!(tpot_only.met_by(&slow_first) && !slo.met_by(&slow_first));
        let ttft_only = Slo {
            tpot_p99_ms: None,
            ..slo
        };
        let slow_rest = Probe {
            tpot_p99_ms: 1.0e9,
            ..at
        };
        assert!(ttft_only.met_by(&slow_rest) && !slo.met_by(&slow_rest));
    }

    #[test]
    fn the_bounds_in_words_and_a_row_in_csv_and_json() {
        let slo = Slo {
            ttft_p99_s: Some(2.0),
            tpot_p99_ms: Some(50.0),
        };
        assert_eq!(slo.describe(), "p99 TTFT ≤ 2 s and p99 TPOT ≤ 50 ms");
        let rows = [
            row("h100", 2, Some(12.5), Some(10.0)),
            row("l40s", 1, None, None),
        ];
        let csv = String::from_utf8(to_csv(&rows)).unwrap();
        assert_eq!(
            csv,
            "gpu,num_gpus,tensor_parallel,replicas,feasible,reason,kv_capacity_tokens,oom_verdict,saturated_req_per_s,slo_req_per_s,missed_req_per_s,gen_tok_per_s,ttft_p99_ms,tpot_p99_ms,price_usd_per_gpu_hour,usd_per_hour,usd_per_m_output_tokens,meets_target\n\
             h100,2,1,2,true,,1,,25.0000,12.5000,18.7500,1.000,1.000,1.000,1.0000,2.0000,1.0000,true\n\
             l40s,1,1,1,false,no,,,,,,,,,1.0000,,,\n"
        );
        let json = serde_json::to_value(&rows).unwrap();
        assert_eq!(json[0]["gpu"], "h100");
        assert_eq!(json[0]["slo_req_per_s"], 12.5);
        assert!(json[0].get("reason").is_none());
        assert_eq!(json[1]["reason"], "no");
        assert!(json[1].get("slo_req_per_s").is_none());
    }
}
