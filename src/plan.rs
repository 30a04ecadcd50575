//! Capacity planning: which GPU type, how many and which layout finish a workload by a deadline
//! at the lowest cost.
//!
//! Every candidate `(GPU, number of GPUs, tensor parallelism)` is the scenario with the catalog's
//! GPU, the KV budget derived from that GPU's memory and the roofline step-time model. With more
//! GPUs than one server uses (`num_gpus = replicas × TP`) the job is split evenly: each replica
//! is simulated with its share of the requests, and the totals scale by the number of replicas.
//! Candidates whose model does not fit, whose attention heads do not split over the TP degree,
//! or whose memory verdict is `oom` are listed as infeasible with the reason.
//!
//! The load ([`Load`]): by default each replica gets its share of the scenario client's
//! concurrency (or arrival rate) — which often binds before the hardware does, so the ranking
//! then measures the client; [`Load::Saturate`] keeps every server full instead, so that each
//! candidate is ranked by what its hardware can do. [`slo`] searches, per candidate, the
//! highest arrival rate that keeps p99 TTFT and p99 TPOT under given bounds.

pub mod memo;
pub mod saturate;
pub mod slo;

use serde::{Serialize, Serializer};

use crate::analysis::{self, Constraint};
use crate::csv_rows::{self, Fixed};
use crate::engine::{RunOptions, SimError};
use crate::memory::Verdict;
use crate::metrics::{RunResult, StopReason};
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

/// The outcome for one candidate. In JSON: the candidate, `feasible`, the price, then either
/// the metrics or the `reason`.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanRow {
    /// Catalog GPU name.
    pub gpu: String,
    /// GPUs rented.
    pub num_gpus: u32,
    /// GPUs per server.
    pub tensor_parallel: u32,
    /// Servers (`num_gpus / tensor_parallel`).
    pub replicas: u32,
    /// `$/GPU-hour` used.
    pub price_usd_per_gpu_hour: f64,
    /// Whether it works, and how well.
    pub outcome: Outcome,
}

/// Whether a candidate works.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    /// The model fits and every request was answered: what the run measured.
    Feasible(PlanMetrics),
    /// It cannot work.
    Infeasible {
        /// Why, in words.
        reason: String,
    },
}

/// At what load each candidate is simulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Load {
    /// The scenario's client, its concurrency (or arrival rate) split evenly over the servers.
    Scenario,
    /// Each server kept full: a closed-loop client with the concurrency that finishes the
    /// server's share soonest, searched ([`saturate`]) from the most the server could run at
    /// once down, so that the hardware binds — the KV budget or the slot limit — and not the
    /// client. An open-loop scenario becomes a batch job of its requests.
    Saturate,
}

impl Load {
    /// One line for the plan's heading.
    pub fn describe(self) -> &'static str {
        match self {
            Load::Scenario => {
                "load: the scenario's client, its concurrency (or rate) split evenly over the servers"
            }
            Load::Saturate => {
                "load: every server kept full (in flight per server: the concurrency that finishes its share soonest): the hardware binds, not the client"
            }
        }
    }
}

/// What a feasible candidate achieves (all servers together unless said otherwise).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanMetrics {
    /// KV pool per server.
    pub kv_capacity_tokens: u64,
    /// Requests the client keeps in flight per server (`None`: an open loop without a cap).
    pub concurrency_per_server: Option<u64>,
    /// `safe` or `tight`; `None` without a memory model.
    pub oom_verdict: Option<Verdict>,
    /// Steady output tokens per second (as `steady_req_per_s`, without a steady window: the
    /// run's output tokens ÷ makespan).
    pub gen_tok_per_s: f64,
    /// Steady completions per second; an overloaded server's completion rate; a run with no
    /// steady window (one batch, or a start-up that lasts until the drain, as a saturating
    /// concurrency often gives): its requests ÷ makespan, all there is.
    pub steady_req_per_s: f64,
    /// Time until the last request is answered.
    pub time_to_finish_s: f64,
    /// `time × GPUs × price`.
    pub cost_usd: f64,
    /// Cost per million output tokens.
    pub usd_per_m_output_tokens: f64,
    /// TTFT p99.
    pub ttft_p99_ms: f64,
    /// TPOT p99.
    pub tpot_p99_ms: f64,
    /// E2E p99.
    pub e2e_p99_ms: f64,
    /// What binds each server's batch.
    pub binding: Constraint,
    /// Whether it finishes by the deadline (when one is given).
    pub meets_deadline: Option<bool>,
    /// With [`Load::Saturate`]: the concurrencies the search tried, in order, each with the
    /// time its server took to finish its share (JSON only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saturation_search: Option<Vec<SaturationStep>>,
}

/// One run of the saturation search.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SaturationStep {
    /// Requests in flight per server.
    pub concurrency: u64,
    /// The time the server took to finish its share.
    pub time_to_finish_s: f64,
}

#[cfg(test)]
impl PlanMetrics {
    /// Metrics for tests: these time and cost, placeholder values elsewhere.
    pub(crate) fn example(time_to_finish_s: f64, cost_usd: f64) -> Self {
        PlanMetrics {
            kv_capacity_tokens: 1000,
            concurrency_per_server: Some(64),
            oom_verdict: Some(Verdict::Safe),
            gen_tok_per_s: 100.0,
            steady_req_per_s: 1.0,
            time_to_finish_s,
            cost_usd,
            usd_per_m_output_tokens: 2.0,
            ttft_p99_ms: 10.0,
            tpot_p99_ms: 15.0,
            e2e_p99_ms: 20.0,
            binding: Constraint::KvBudget,
            meets_deadline: None,
            saturation_search: None,
        }
    }
}

impl PlanRow {
    /// The row of candidate `c` at `price` $/GPU-hour.
    pub fn new(c: &Candidate, price_usd_per_gpu_hour: f64, outcome: Outcome) -> Self {
        PlanRow {
            gpu: c.gpu.clone(),
            num_gpus: c.num_gpus,
            tensor_parallel: c.tensor_parallel,
            replicas: c.num_gpus / c.tensor_parallel.max(1),
            price_usd_per_gpu_hour,
            outcome,
        }
    }

    fn infeasible(c: &Candidate, price: f64, reason: String) -> Self {
        PlanRow::new(c, price, Outcome::Infeasible { reason })
    }

    /// The metrics, when feasible.
    pub fn metrics(&self) -> Option<&PlanMetrics> {
        match &self.outcome {
            Outcome::Feasible(m) => Some(m),
            Outcome::Infeasible { .. } => None,
        }
    }

    /// `(time to finish in s, cost in $)` of a feasible candidate whose time is finite and
    /// positive and whose cost is finite and not negative: what a figure can place.
    pub fn time_and_cost(&self) -> Option<(f64, f64)> {
        let m = self.metrics()?;
        let (t, c) = (m.time_to_finish_s, m.cost_usd);
        (t.is_finite() && t > 0.0 && c.is_finite() && c >= 0.0).then_some((t, c))
    }

    /// Why an infeasible candidate is; `None` for a feasible one.
    pub fn reason(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Feasible(_) => None,
            Outcome::Infeasible { reason } => Some(reason),
        }
    }
}

impl Serialize for PlanRow {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            gpu: &'a str,
            num_gpus: u32,
            tensor_parallel: u32,
            replicas: u32,
            feasible: bool,
            price_usd_per_gpu_hour: f64,
            #[serde(flatten)]
            outcome: &'a Outcome,
        }
        Json {
            gpu: &self.gpu,
            num_gpus: self.num_gpus,
            tensor_parallel: self.tensor_parallel,
            replicas: self.replicas,
            feasible: self.metrics().is_some(),
            price_usd_per_gpu_hour: self.price_usd_per_gpu_hour,
            outcome: &self.outcome,
        }
        .serialize(s)
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
        // A trace's rows keep their recorded arrival times: each replica replays the first
        // rows of the file (only the concurrency cap is shared).
        ClientSpec::Trace { concurrency } => {
            if let Some(c) = concurrency {
                sets.push(format!(
                    "client.concurrency={}",
                    u64::from(*c).div_ceil(replicas).max(1)
                ));
            }
        }
    }
    if !matches!(base.engine.step_time, StepTimeSpec::Roofline(_)) {
        sets.push("engine.step_time={ model = \"roofline\" }".to_string());
    }
    sets
}

/// The candidate's scenario — one replica's share, at `load` — or why the candidate cannot
/// work. `extra` are overrides applied last (a probe's client and requests).
pub fn prepare(
    source: &Source,
    base_sets: &[String],
    base: &Scenario,
    c: &Candidate,
    load: Load,
    extra: &[String],
) -> Result<Scenario, String> {
    if c.tensor_parallel == 0 || c.num_gpus % c.tensor_parallel != 0 {
        return Err(format!(
            "TP {} does not divide {} GPUs",
            c.tensor_parallel, c.num_gpus
        ));
    }
    if let Some(m) = base.model.as_ref().and_then(|m| m.entry.as_ref()) {
        if m.q_heads % c.tensor_parallel != 0 {
            return Err(format!(
                "{} attention heads do not split over TP {}",
                m.q_heads, c.tensor_parallel
            ));
        }
    }
    let replicas = u64::from(c.num_gpus / c.tensor_parallel);
    if replicas > base.workload.requests {
        // Each server simulates at least one request: the totals would count requests that
        // do not exist (and a lone request's rate is no throughput).
        return Err(format!(
            "{replicas} servers for {} requests: some would get none",
            base.workload.requests
        ));
    }
    let mut sets: Vec<String> = base_sets
        .iter()
        .cloned()
        .chain(candidate_sets(base, c))
        .collect();
    let load_with = |sets: &[String]| {
        scenario::load(source, sets).map_err(|e| {
            e.problems
                .first()
                .map_or_else(|| e.to_string(), |p| p.message.clone())
        })
    };
    let mut sc = load_with(&sets)?;
    if load == Load::Saturate {
        let cap = saturate::upper_bound(&sc);
        sets.push(format!(
            "client={{ mode = \"closed\", concurrency = {cap} }}"
        ));
    }
    if load == Load::Saturate || !extra.is_empty() {
        sets.extend(extra.iter().cloned());
        sc = load_with(&sets)?;
    }
    if let Some(m) = &sc.memory {
        if m.verdict() == Some(Verdict::Oom) {
            let f = m.mem_fraction_static().unwrap_or(0.0);
            return Err(format!(
                "would run out of memory at mem_fraction_static {f:.3}"
            ));
        }
    }
    Ok(sc)
}

/// Evaluate one candidate at `load`. `price` is $/GPU-hour; `deadline_s` optional.
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    source: &Source,
    base_sets: &[String],
    base: &Scenario,
    c: &Candidate,
    load: Load,
    price: f64,
    deadline_s: Option<f64>,
    opts: &RunOptions,
) -> Result<PlanRow, SimError> {
    let sc = match prepare(source, base_sets, base, c, load, &[]) {
        Ok(sc) => sc,
        Err(reason) => return Ok(PlanRow::infeasible(c, price, reason)),
    };
    let verdict = sc.memory.as_ref().and_then(|m| m.verdict());
    let (r, in_flight, saturation_search) = match load {
        Load::Scenario => match memo::run_once(&sc, opts)? {
            Ok(r) => (r, sc.client.concurrency().map(u64::from), None),
            Err(reason) => return Ok(PlanRow::infeasible(c, price, reason)),
        },
        // The concurrency that finishes the server's share soonest, searched down from the
        // most it could run at once.
        Load::Saturate => {
            let upper = sc.client.concurrency().map_or(1, u64::from);
            let at = |n: u64| {
                let closed = [format!("client={{ mode = \"closed\", concurrency = {n} }}")];
                match prepare(source, base_sets, base, c, Load::Scenario, &closed) {
                    Ok(sc) => memo::run_once(&sc, opts),
                    Err(reason) => Ok(Err(reason)),
                }
            };
            let sooner = |r: &RunResult| match r.stop {
                StopReason::AllAnswered => 1.0 / r.totals.sim_duration_s,
                _ => 0.0,
            };
            let duration = |r: &RunResult| r.totals.sim_duration_s;
            match saturate::search(upper, at, sooner, duration)? {
                Ok(s) => {
                    let steps = s
                        .tried
                        .iter()
                        .map(|&(concurrency, _, time_to_finish_s)| SaturationStep {
                            concurrency,
                            time_to_finish_s,
                        })
                        .collect();
                    (s.result, Some(s.concurrency), Some(steps))
                }
                Err(reason) => return Ok(PlanRow::infeasible(c, price, reason)),
            }
        }
    };
    if r.stop != StopReason::AllAnswered {
        return Ok(PlanRow::infeasible(
            c,
            price,
            "stopped at run.max_sim_s before every request was answered".to_string(),
        ));
    }
    let a = analysis::analyse(&r);
    let replicas = f64::from(c.num_gpus / c.tensor_parallel);
    let time = r.totals.sim_duration_s;
    let per_s = |n: u64| if time > 0.0 { n as f64 / time } else { 0.0 };
    let (rate, gen) = match &a.window {
        Some(w) => (w.span.req_per_s, w.span.output_tok_per_s),
        None => (
            per_s(r.totals.requests_completed),
            per_s(r.totals.output_tokens),
        ),
    };
    let cost = time / 3600.0 * f64::from(c.num_gpus) * price;
    let tokens = r.totals.output_tokens as f64 * replicas;
    let metrics = PlanMetrics {
        kv_capacity_tokens: sc.engine.kv_capacity_tokens,
        concurrency_per_server: in_flight,
        oom_verdict: verdict,
        gen_tok_per_s: gen * replicas,
        steady_req_per_s: rate * replicas,
        time_to_finish_s: time,
        cost_usd: cost,
        usd_per_m_output_tokens: if tokens > 0.0 {
            cost / (tokens / 1e6)
        } else {
            0.0
        },
        ttft_p99_ms: r.latency.ttft_ms.quantile(0.99),
        tpot_p99_ms: r.latency.tpot_ms.quantile(0.99),
        e2e_p99_ms: r.latency.e2e_ms.quantile(0.99),
        binding: match (load, a.binding.constraint, in_flight) {
            // Kept full, the client binds only where more in flight finishes no sooner: the
            // slot limit when the concurrency reaches it, else the KV pool (vLLM preempts
            // when it overfills).
            // Without a steady window the whole run is measured, its drain too, so the client
            // seems below its limit (the step time) though it kept `n` in flight until then.
            (Load::Saturate, b, Some(n))
                if b == Constraint::ClientConcurrency
                    || (b == Constraint::StepTime && a.steady().is_none()) =>
            {
                if n >= u64::from(sc.engine.policy.max_running_requests()) {
                    Constraint::MaxRunningRequests
                } else {
                    Constraint::KvBudget
                }
            }
            (_, b, _) => b,
        },
        meets_deadline: deadline_s.map(|d| time <= d),
        saturation_search,
    };
    Ok(PlanRow::new(c, price, Outcome::Feasible(metrics)))
}

/// The feasible rows whose batch the client's concurrency binds: there the plan measures the
/// client, not the hardware.
pub fn client_bound(rows: &[PlanRow]) -> usize {
    rows.iter()
        .filter_map(PlanRow::metrics)
        .filter(|m| m.binding == Constraint::ClientConcurrency)
        .count()
}

/// The feasible rows whose server's share of the job is all in flight at once (a closed loop
/// with at least as many slots as requests): one burst, no steady state, so their rates are
/// the burst's averages.
pub fn single_bursts(base: &Scenario, rows: &[PlanRow]) -> usize {
    rows.iter()
        .filter(|r| {
            let share = base
                .workload
                .requests
                .div_ceil(u64::from(r.replicas.max(1)));
            r.metrics()
                .and_then(|m| m.concurrency_per_server)
                .is_some_and(|c| c >= share)
        })
        .count()
}

/// Order: feasible candidates meeting the deadline by cost, then feasible ones by time to
/// finish, then the infeasible ones.
pub fn sort(rows: &mut [PlanRow]) {
    rows.sort_by(|a, b| {
        let rank = |r: &PlanRow| match r.metrics().map(|m| m.meets_deadline) {
            Some(Some(true) | None) => 0,
            Some(Some(false)) => 1,
            None => 2,
        };
        rank(a)
            .cmp(&rank(b))
            .then_with(|| match (a.metrics(), b.metrics(), rank(a)) {
                (Some(x), Some(y), 0) => x.cost_usd.total_cmp(&y.cost_usd),
                (Some(x), Some(y), _) => x.time_to_finish_s.total_cmp(&y.time_to_finish_s),
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
    let point = |i: &usize| {
        rows[*i]
            .time_and_cost()
            .expect("invariant: a placeable row")
    };
    let time = |i: &usize| point(i).0;
    let cost = |i: &usize| point(i).1;
    let mut by_time: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].time_and_cost().is_some())
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

/// The candidates for these GPUs and counts: TP = each of `tps` no larger than the count (one
/// that does not divide it is kept, to be listed as infeasible with the reason: [`prepare`]),
/// or the count itself when `tps` is empty.
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

/// One row of `plan.csv`; an infeasible candidate's metric cells are empty.
#[derive(Debug, Default, Serialize)]
struct CsvRow<'a> {
    gpu: &'a str,
    num_gpus: u32,
    tensor_parallel: u32,
    replicas: u32,
    feasible: bool,
    reason: Option<&'a str>,
    kv_capacity_tokens: Option<u64>,
    concurrency_per_server: Option<u64>,
    oom_verdict: Option<&'static str>,
    gen_tok_per_s: Option<Fixed<3>>,
    steady_req_per_s: Option<Fixed<6>>,
    time_to_finish_s: Option<Fixed<3>>,
    price_usd_per_gpu_hour: Fixed<4>,
    cost_usd: Option<Fixed<2>>,
    usd_per_m_output_tokens: Option<Fixed<4>>,
    ttft_p99_ms: Option<Fixed<3>>,
    tpot_p99_ms: Option<Fixed<3>>,
    e2e_p99_ms: Option<Fixed<3>>,
    binding: Option<&'static str>,
    meets_deadline: Option<bool>,
}

impl<'a> From<&'a PlanRow> for CsvRow<'a> {
    fn from(r: &'a PlanRow) -> Self {
        let m = r.metrics();
        CsvRow {
            gpu: &r.gpu,
            num_gpus: r.num_gpus,
            tensor_parallel: r.tensor_parallel,
            replicas: r.replicas,
            feasible: m.is_some(),
            reason: r.reason(),
            kv_capacity_tokens: m.map(|m| m.kv_capacity_tokens),
            concurrency_per_server: m.and_then(|m| m.concurrency_per_server),
            oom_verdict: m.and_then(|m| m.oom_verdict).map(Verdict::as_str),
            gen_tok_per_s: m.map(|m| Fixed(m.gen_tok_per_s)),
            steady_req_per_s: m.map(|m| Fixed(m.steady_req_per_s)),
            time_to_finish_s: m.map(|m| Fixed(m.time_to_finish_s)),
            price_usd_per_gpu_hour: Fixed(r.price_usd_per_gpu_hour),
            cost_usd: m.map(|m| Fixed(m.cost_usd)),
            usd_per_m_output_tokens: m.map(|m| Fixed(m.usd_per_m_output_tokens)),
            ttft_p99_ms: m.map(|m| Fixed(m.ttft_p99_ms)),
            tpot_p99_ms: m.map(|m| Fixed(m.tpot_p99_ms)),
            e2e_p99_ms: m.map(|m| Fixed(m.e2e_p99_ms)),
            binding: m.map(|m| m.binding.describe()),
            meets_deadline: m.and_then(|m| m.meets_deadline),
        }
    }
}

/// CSV of the plan.
pub fn to_csv(rows: &[PlanRow]) -> Vec<u8> {
    csv_rows::rows_to_bytes(rows.iter().map(CsvRow::from))
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

    fn candidate(gpu: &str) -> Candidate {
        Candidate {
            gpu: gpu.into(),
            num_gpus: 1,
            tensor_parallel: 1,
        }
    }

    fn feasible(gpu: &str, cost: f64, time: f64, meets: Option<bool>) -> PlanRow {
        let m = PlanMetrics {
            meets_deadline: meets,
            ..PlanMetrics::example(time, cost)
        };
        PlanRow::new(&candidate(gpu), 1.0, Outcome::Feasible(m))
    }

    #[test]
    fn highlights_are_the_pareto_front_and_the_cheapest_within_the_deadline() {
        let row = |cost: f64, time_h: f64, ok: bool| match ok {
            true => feasible("g", cost, time_h * 3600.0, None),
            false => PlanRow::infeasible(&candidate("g"), 1.0, String::new()),
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
        let mut rows = vec![
            feasible("a", 50.0, 10.0, Some(false)),
            feasible("b", 80.0, 5.0, Some(true)),
            PlanRow::infeasible(&candidate("c"), 1.0, "no".into()),
            feasible("d", 60.0, 6.0, Some(true)),
        ];
        sort(&mut rows);
        let order: Vec<&str> = rows.iter().map(|r| r.gpu.as_str()).collect();
        assert_eq!(order, vec!["d", "b", "a", "c"]);
    }

    #[test]
    fn an_infeasible_candidate_has_a_reason_and_no_metrics_in_csv_and_json() {
        let rows = [
            feasible("h100", 12.5, 3600.0, Some(true)),
            PlanRow::infeasible(&candidate("l40s"), 1.4, "too small, really".into()),
        ];
        let csv = String::from_utf8(to_csv(&rows)).unwrap();
        assert_eq!(
            csv,
            "gpu,num_gpus,tensor_parallel,replicas,feasible,reason,kv_capacity_tokens,concurrency_per_server,oom_verdict,gen_tok_per_s,steady_req_per_s,time_to_finish_s,price_usd_per_gpu_hour,cost_usd,usd_per_m_output_tokens,ttft_p99_ms,tpot_p99_ms,e2e_p99_ms,binding,meets_deadline\n\
             h100,1,1,1,true,,1000,64,safe,100.000,1.000000,3600.000,1.0000,12.50,2.0000,10.000,15.000,20.000,the KV budget,true\n\
             l40s,1,1,1,false,\"too small, really\",,,,,,,1.4000,,,,,,,\n"
        );
        let json = serde_json::to_value(&rows).unwrap();
        assert_eq!(json[0]["feasible"], true);
        assert_eq!(json[0]["binding"], "kv_budget");
        assert_eq!(json[0]["oom_verdict"], "safe");
        assert!(json[0].get("reason").is_none());
        assert_eq!(json[1]["feasible"], false);
        assert_eq!(json[1]["reason"], "too small, really");
        assert_eq!(json[1]["price_usd_per_gpu_hour"], 1.4);
        assert!(json[1].get("cost_usd").is_none());
    }
}
