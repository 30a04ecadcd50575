//! Capacity planning: which GPU type, how many and which layout finish a workload by a deadline
//! at the lowest cost.
//!
//! Every candidate `(GPU, number of GPUs, tensor parallelism)` is the scenario with the catalog's
//! GPU, the KV budget derived from that GPU's memory and the roofline step-time model. With more
//! GPUs than one server uses (`num_gpus = replicas × TP`) the job is split evenly: each replica
//! is simulated with its share of the requests and of the client's concurrency (or arrival
//! rate), and the totals scale by the number of replicas. Candidates whose model does not fit,
//! whose attention heads do not split over the TP degree, or whose memory verdict is `oom` are
//! listed as infeasible with the reason.

use serde::Serialize;

use crate::analysis::{self, Constraint};
use crate::engine::{self, RunOptions, SimError};
use crate::memory::Verdict;
use crate::metrics::StopReason;
use crate::scenario::{self, ClientSpec, Scenario, Source, StepTimeSpec};

/// One candidate layout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// Catalog GPU name.
    pub gpu: String,
    /// GPUs rented.
    pub num_gpus: u32,
    /// GPUs per server.
    pub tensor_parallel: u32,
}

/// The outcome for one candidate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanRow {
    /// Catalog GPU name.
    pub gpu: String,
    /// GPUs rented.
    pub num_gpus: u32,
    /// GPUs per server.
    pub tensor_parallel: u32,
    /// Servers (`num_gpus / tensor_parallel`).
    pub replicas: u32,
    /// Whether the model fits and the run finished.
    pub feasible: bool,
    /// Why not, when infeasible.
    pub reason: Option<String>,
    /// KV pool per server.
    pub kv_capacity_tokens: u64,
    /// `safe` / `tight` (infeasible candidates may be `oom`).
    pub oom_verdict: Option<String>,
    /// Steady output tokens per second, all servers.
    pub gen_tok_per_s: f64,
    /// Steady completions per second, all servers.
    pub steady_req_per_s: f64,
    /// Time until the last request is answered.
    pub time_to_finish_s: f64,
    /// `$/GPU-hour` used.
    pub price_usd_per_gpu_hour: f64,
    /// `time × GPUs × price`.
    pub cost_usd: f64,
    /// Cost per million output tokens.
    pub usd_per_m_output_tokens: f64,
    /// TTFT p99.
    pub ttft_p99_ms: f64,
    /// E2E p99.
    pub e2e_p99_ms: f64,
    /// What binds each server's batch.
    pub binding: Option<Constraint>,
    /// Whether it finishes by the deadline (when one is given).
    pub meets_deadline: Option<bool>,
}

impl PlanRow {
    fn infeasible(c: &Candidate, price: f64, reason: String) -> Self {
        PlanRow {
            gpu: c.gpu.clone(),
            num_gpus: c.num_gpus,
            tensor_parallel: c.tensor_parallel,
            replicas: c.num_gpus / c.tensor_parallel.max(1),
            feasible: false,
            reason: Some(reason),
            kv_capacity_tokens: 0,
            oom_verdict: None,
            gen_tok_per_s: 0.0,
            steady_req_per_s: 0.0,
            time_to_finish_s: 0.0,
            price_usd_per_gpu_hour: price,
            cost_usd: 0.0,
            usd_per_m_output_tokens: 0.0,
            ttft_p99_ms: 0.0,
            e2e_p99_ms: 0.0,
            binding: None,
            meets_deadline: None,
        }
    }
}

/// Keys a plan sets itself, which the scenario must leave to it.
pub const PLAN_OWNED_KEYS: &[&str] = &[
    "engine.kv_capacity_tokens",
    "hardware.memory_mib",
    "hardware.memory_before_weights_gib",
    "model.weight_gib_per_gpu",
    "model.kv_bytes_per_token",
    "engine.observed_free_gib",
];

/// What the base scenario pins that a plan must vary (empty when it is plannable).
pub fn pinned_keys(source: &Source) -> Vec<&'static str> {
    let Ok(tree) = scenario::tree::parse(&source.text) else {
        return Vec::new();
    };
    PLAN_OWNED_KEYS
        .iter()
        .copied()
        .filter(|k| {
            let mut t = &tree;
            let parts: Vec<&str> = k.split('.').collect();
            for (i, part) in parts.iter().enumerate() {
                match t.get(part) {
                    None => return false,
                    Some(n) if i + 1 == parts.len() => {
                        return matches!(n.origin, scenario::tree::Origin::File(_))
                    }
                    Some(n) => match &n.value {
                        scenario::tree::Value::Table(inner) => t = inner,
                        _ => return false,
                    },
                }
            }
            false
        })
        .collect()
}

/// The overrides that make a candidate's scenario (one replica's share).
fn candidate_sets(base: &Scenario, c: &Candidate) -> Vec<String> {
    let replicas = u64::from((c.num_gpus / c.tensor_parallel).max(1));
    let mut sets = vec![
        format!("hardware.gpu=\"{}\"", c.gpu),
        format!("hardware.num_gpus={}", c.tensor_parallel),
        format!("hardware.tensor_parallel={}", c.tensor_parallel),
        format!(
            "workload.requests={}",
            base.workload.requests.div_ceil(replicas).max(1)
        ),
    ];
    match &base.client {
        ClientSpec::Closed { concurrency, .. } => {
            sets.push(format!(
                "client.concurrency={}",
                u64::from(*concurrency).div_ceil(replicas).max(1)
            ));
        }
        ClientSpec::Poisson { rate_per_s, .. } | ClientSpec::Gamma { rate_per_s, .. } => {
            sets.push(format!(
                "client.rate_per_s={}",
                rate_per_s / replicas as f64
            ));
        }
    }
    if !matches!(base.engine.step_time, StepTimeSpec::Roofline(_)) {
        sets.push("engine.step_time={ model = \"roofline\" }".to_string());
    }
    sets
}

/// Evaluate one candidate. `price` is $/GPU-hour; `deadline_s` optional.
pub fn evaluate(
    source: &Source,
    base_sets: &[String],
    base: &Scenario,
    c: &Candidate,
    price: f64,
    deadline_s: Option<f64>,
    opts: &RunOptions,
) -> Result<PlanRow, SimError> {
    if c.tensor_parallel == 0 || c.num_gpus % c.tensor_parallel != 0 {
        return Ok(PlanRow::infeasible(
            c,
            price,
            format!(
                "TP {} does not divide {} GPUs",
                c.tensor_parallel, c.num_gpus
            ),
        ));
    }
    if let Some(m) = base.model.as_ref().and_then(|m| m.entry.as_ref()) {
        if m.q_heads % c.tensor_parallel != 0 {
            return Ok(PlanRow::infeasible(
                c,
                price,
                format!(
                    "{} attention heads do not split over TP {}",
                    m.q_heads, c.tensor_parallel
                ),
            ));
        }
    }
    let sets: Vec<String> = base_sets
        .iter()
        .cloned()
        .chain(candidate_sets(base, c))
        .collect();
    let sc = match scenario::load(source, &sets) {
        Ok(sc) => sc,
        Err(e) => {
            let why = e
                .problems
                .first()
                .map_or_else(|| e.to_string(), |p| p.message.clone());
            return Ok(PlanRow::infeasible(c, price, why));
        }
    };
    let verdict = sc.memory.as_ref().and_then(|m| m.verdict());
    if verdict == Some(Verdict::Oom) {
        let f = sc.engine.mem_fraction_static.unwrap_or(0.0);
        return Ok(PlanRow::infeasible(
            c,
            price,
            format!("would run out of memory at mem_fraction_static {f:.3}"),
        ));
    }
    let r = match engine::run(&sc, opts) {
        Ok(r) => r,
        Err(SimError::Stuck { reason, .. }) => {
            return Ok(PlanRow::infeasible(c, price, reason));
        }
        Err(e) => return Err(e),
    };
    let a = analysis::analyse(&r);
    let replicas = f64::from(c.num_gpus / c.tensor_parallel);
    let finished = r.stop == StopReason::AllAnswered;
    let time = r.totals.sim_duration_s;
    let cost = time / 3600.0 * f64::from(c.num_gpus) * price;
    let tokens = r.totals.output_tokens as f64 * replicas;
    Ok(PlanRow {
        gpu: c.gpu.clone(),
        num_gpus: c.num_gpus,
        tensor_parallel: c.tensor_parallel,
        replicas: c.num_gpus / c.tensor_parallel,
        feasible: finished,
        reason: (!finished)
            .then(|| "stopped at run.max_sim_s before every request was answered".to_string()),
        kv_capacity_tokens: sc.engine.kv_capacity_tokens,
        oom_verdict: verdict.map(|v| v.as_str().to_string()),
        gen_tok_per_s: a.steady.output_tok_per_s * replicas,
        steady_req_per_s: a.steady.req_per_s * replicas,
        time_to_finish_s: time,
        price_usd_per_gpu_hour: price,
        cost_usd: cost,
        usd_per_m_output_tokens: if tokens > 0.0 {
            cost / (tokens / 1e6)
        } else {
            0.0
        },
        ttft_p99_ms: r.latency.ttft_ms.quantile(0.99),
        e2e_p99_ms: r.latency.e2e_ms.quantile(0.99),
        binding: Some(a.binding.constraint),
        meets_deadline: deadline_s.map(|d| finished && time <= d),
    })
}

/// Order: feasible candidates meeting the deadline by cost, then feasible ones by time to
/// finish, then the infeasible ones.
pub fn sort(rows: &mut [PlanRow]) {
    rows.sort_by(|a, b| {
        let rank = |r: &PlanRow| match (r.feasible, r.meets_deadline) {
            (true, Some(true)) | (true, None) => 0,
            (true, Some(false)) => 1,
            (false, _) => 2,
        };
        rank(a)
            .cmp(&rank(b))
            .then_with(|| match rank(a) {
                0 => a.cost_usd.total_cmp(&b.cost_usd),
                1 => a.time_to_finish_s.total_cmp(&b.time_to_finish_s),
                _ => std::cmp::Ordering::Equal,
            })
            .then_with(|| a.gpu.cmp(&b.gpu))
            .then_with(|| a.num_gpus.cmp(&b.num_gpus))
            .then_with(|| a.tensor_parallel.cmp(&b.tensor_parallel))
    });
}

/// What a plan points out: its Pareto front and its picks, as indices into the rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Highlights {
    /// The feasible candidates no other is both at least as fast and cheaper than (or faster
    /// and as cheap), by increasing time to finish: the cheapest way to finish within each
    /// time.
    pub pareto: Vec<usize>,
    /// The cheapest feasible candidate finishing within the deadline (overall, without one).
    pub cheapest: Option<usize>,
    /// The fastest feasible candidate (the cheaper of equally fast ones).
    pub fastest: Option<usize>,
}

/// The Pareto front, the cheapest candidate finishing within `deadline_h` hours and the
/// fastest of `rows`. Only feasible rows with a finite, positive time and a finite,
/// non-negative cost count.
pub fn highlights(rows: &[PlanRow], deadline_h: Option<f64>) -> Highlights {
    let time = |i: &usize| rows[*i].time_to_finish_s;
    let cost = |i: &usize| rows[*i].cost_usd;
    let mut by_time: Vec<usize> = (0..rows.len())
        .filter(|&i| {
            let r = &rows[i];
            r.feasible
                && r.time_to_finish_s.is_finite()
                && r.time_to_finish_s > 0.0
                && r.cost_usd.is_finite()
                && r.cost_usd >= 0.0
        })
        .collect();
    by_time.sort_by(|a, b| {
        time(a)
            .total_cmp(&time(b))
            .then(cost(a).total_cmp(&cost(b)))
    });
    let mut pareto = Vec::new();
    for &i in &by_time {
        if pareto.last().is_none_or(|p| cost(&i) < cost(p)) {
            pareto.push(i);
        }
    }
    let within = |i: &&usize| deadline_h.is_none_or(|d| time(i) <= d * 3600.0);
    let cheapest = pareto.iter().rfind(within).copied();
    Highlights {
        fastest: pareto.first().copied(),
        pareto,
        cheapest,
    }
}

/// The candidates for these GPUs and counts: TP = each of `tps` that divides the count, or the
/// count itself when `tps` is empty.
pub fn candidates(gpus: &[String], counts: &[u32], tps: &[u32]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for g in gpus {
        for &n in counts {
            if tps.is_empty() {
                out.push(Candidate {
                    gpu: g.clone(),
                    num_gpus: n,
                    tensor_parallel: n,
                });
            } else {
                for &tp in tps {
                    if tp <= n {
                        out.push(Candidate {
                            gpu: g.clone(),
                            num_gpus: n,
                            tensor_parallel: tp,
                        });
                    }
                }
            }
        }
    }
    out
}

/// CSV of the plan.
pub fn to_csv(rows: &[PlanRow]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "gpu",
        "num_gpus",
        "tensor_parallel",
        "replicas",
        "feasible",
        "reason",
        "kv_capacity_tokens",
        "oom_verdict",
        "gen_tok_per_s",
        "steady_req_per_s",
        "time_to_finish_s",
        "price_usd_per_gpu_hour",
        "cost_usd",
        "usd_per_m_output_tokens",
        "ttft_p99_ms",
        "e2e_p99_ms",
        "binding",
        "meets_deadline",
    ])
    .expect("invariant: writing to memory cannot fail");
    for r in rows {
        w.write_record([
            r.gpu.clone(),
            r.num_gpus.to_string(),
            r.tensor_parallel.to_string(),
            r.replicas.to_string(),
            r.feasible.to_string(),
            r.reason.clone().unwrap_or_default(),
            r.kv_capacity_tokens.to_string(),
            r.oom_verdict.clone().unwrap_or_default(),
            format!("{:.3}", r.gen_tok_per_s),
            format!("{:.6}", r.steady_req_per_s),
            format!("{:.3}", r.time_to_finish_s),
            format!("{:.4}", r.price_usd_per_gpu_hour),
            format!("{:.2}", r.cost_usd),
            format!("{:.4}", r.usd_per_m_output_tokens),
            format!("{:.3}", r.ttft_p99_ms),
            format!("{:.3}", r.e2e_p99_ms),
            r.binding
                .map_or(String::new(), |b| b.describe().to_string()),
            r.meets_deadline.map_or(String::new(), |m| m.to_string()),
        ])
        .expect("invariant: writing to memory cannot fail");
    }
    String::from_utf8(
        w.into_inner()
            .expect("invariant: flushing memory cannot fail"),
    )
    .expect("invariant: the CSV is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_take_each_tp_that_fits() {
        let c = candidates(&["h100".into()], &[1, 8], &[1, 2, 8]);
        let got: Vec<(u32, u32)> = c.iter().map(|c| (c.num_gpus, c.tensor_parallel)).collect();
        assert_eq!(got, vec![(1, 1), (8, 1), (8, 2), (8, 8)]);
        let d = candidates(&["h100".into()], &[4], &[]);
        assert_eq!(d[0].tensor_parallel, 4);
    }

    #[test]
    fn highlights_are_the_pareto_front_and_the_cheapest_within_the_deadline() {
        let row = |cost: f64, time_h: f64, ok: bool| PlanRow {
            feasible: ok,
            cost_usd: cost,
            time_to_finish_s: time_h * 3600.0,
            ..PlanRow::infeasible(
                &Candidate {
                    gpu: "g".into(),
                    num_gpus: 1,
                    tensor_parallel: 1,
                },
                1.0,
                String::new(),
            )
        };
        let rows = vec![
            row(50.0, 10.0, true),     // 0: slow and cheap
            row(80.0, 5.0, true),      // 1: fastest
            row(90.0, 6.0, true),      // 2: dominated by 1
            row(10.0, 1.0, false),     // 3: infeasible
            row(60.0, 6.0, true),      // 4: between
            row(40.0, f64::NAN, true), // 5: no time
        ];
        let h = highlights(&rows, Some(8.0));
        assert_eq!(h.pareto, [1, 4, 0]);
        assert_eq!((h.cheapest, h.fastest), (Some(4), Some(1)));
        assert_eq!(highlights(&rows, None).cheapest, Some(0));
        assert_eq!(highlights(&rows, Some(2.0)).cheapest, None);
        assert_eq!(highlights(&rows[3..4], None), Highlights::default());
    }

    #[test]
    fn the_cheapest_candidate_meeting_the_deadline_comes_first() {
        let row = |gpu: &str, cost: f64, time: f64, ok: bool, meets: Option<bool>| PlanRow {
            feasible: ok,
            cost_usd: cost,
            time_to_finish_s: time,
            meets_deadline: meets,
            ..PlanRow::infeasible(
                &Candidate {
                    gpu: gpu.into(),
                    num_gpus: 1,
                    tensor_parallel: 1,
                },
                1.0,
                String::new(),
            )
        };
        let mut rows = vec![
            row("a", 50.0, 10.0, true, Some(false)),
            row("b", 80.0, 5.0, true, Some(true)),
            row("c", 0.0, 0.0, false, None),
            row("d", 60.0, 6.0, true, Some(true)),
        ];
        sort(&mut rows);
        let order: Vec<&str> = rows.iter().map(|r| r.gpu.as_str()).collect();
        assert_eq!(order, vec!["d", "b", "a", "c"]);
    }
}
