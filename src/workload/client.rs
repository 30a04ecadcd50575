//! The client: when requests are sent.
//!
//! * `closed` — the case study's asyncio pipeline: a semaphore of `concurrency` slots over a job
//!   whose prompts all exist at t = 0. Every slot fires at t = 0; each response releases its slot,
//!   which (after `think_time`) sends the next request.
//! * `poisson` — open loop, exponential gaps, first request at t = 0
//!   (`sglang.bench_serving`'s `get_request`).
//! * `gamma` — open loop, gamma gaps with shape `burstiness` and mean `1/rate`
//!   (`vllm bench serve --burstiness`), first request after the first gap. vLLM also rescales
//!   the gaps so the last request lands exactly at `n / rate`; servesim does not (the rescaling
//!   only matters for small `n`).
//! * `trace` — open loop on the `arrival_s` column of `workload.trace`: each row is sent at its
//!   own time, in file order. (A closed-loop client sends a trace's rows in file order too, the
//!   next one when a slot frees.)
//!
//! Open-loop modes may also have a concurrency cap (`--max-concurrency`): requests that arrive
//! while every slot is busy wait in the client, and that wait is reported as client slot wait.

use std::collections::VecDeque;
use std::sync::Arc;

use rand_distr::{Distribution, Exp, Gamma};

use super::{Lengths, WorkloadSpec};
use crate::rng::Stream;
use crate::settings::{keys, Bad, Values, When, MAX_SIM_S};
use crate::time::{SimDuration, SimTime};

/// The largest concurrency limit accepted.
pub const MAX_CONCURRENCY: u64 = 10_000_000;
const OPEN: When = When::If("client.mode", &["poisson", "gamma"]);

keys! {
/// `[client]`.
KEYS:
"client" [Table, Required, All, ""]
    "how the client sends: its mode, and its concurrency or rate", e.g. "[client]";
"client.mode" [OneOf(&["closed", "poisson", "gamma", "trace"]), Word("closed"), All, ""]
    "\"closed\": a semaphore of concurrency slots, all firing at t = 0; \"poisson\", \"gamma\": open loop at rate_per_s; \"trace\": each row of workload.trace at its arrival_s", e.g. r#""poisson""#;
"client.concurrency" [Integer(1, MAX_CONCURRENCY), Absent("required when closed; no cap when open"), All, ""]
    "the client's concurrency limit (an asyncio semaphore)", e.g. "150";
"client.rate_per_s" [Number(Within(1e-9, 1e9)), Required, OPEN, ""]
    "mean arrivals per second", e.g. "2.0";
"client.burstiness" [Number(Within(1e-3, 1e3)), Num(1.0), If("client.mode", &["gamma"]), ""]
    "gamma shape: 1 = Poisson, < 1 burstier, > 1 more regular", e.g. "0.5";
"client.think_time_s" [Number(Within(0.0, MAX_SIM_S)), Num(0.0), If("client.mode", &["closed"]), "s"]
    "pause between a completion and the slot's next send", e.g. "0.5";
}

/// `[client]`.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientSpec {
    /// A concurrency limit; all slots fire at t = 0; each completion releases the next request.
    Closed {
        /// Slots.
        concurrency: u32,
        /// Pause between a completion and the slot's next send.
        think_time: SimDuration,
    },
    /// Open loop, Poisson arrivals (first request at t = 0, as `sglang.bench_serving`).
    Poisson {
        /// Mean arrivals per second.
        rate_per_s: f64,
        /// Optional cap on requests in flight (`--max-concurrency`).
        concurrency: Option<u32>,
    },
    /// Open loop, gamma inter-arrival gaps (as `vllm bench serve --burstiness`).
    Gamma {
        /// Mean arrivals per second.
        rate_per_s: f64,
        /// Gamma shape: 1 = Poisson, < 1 burstier, > 1 more regular.
        burstiness: f64,
        /// Optional cap on requests in flight.
        concurrency: Option<u32>,
    },
    /// Open loop on a trace's arrival times.
    Trace {
        /// Optional cap on requests in flight.
        concurrency: Option<u32>,
    },
}

impl ClientSpec {
    /// Read `[client]`; the trace mode needs `workload`'s trace and its arrival times.
    pub fn read(v: &mut dyn Values, workload: Option<&WorkloadSpec>) -> Result<Self, Bad> {
        v.has("client")?;
        let concurrency: Option<u32> = v.opt("client.concurrency")?;
        Ok(match v.get::<String>("client.mode")?.as_str() {
            "closed" => ClientSpec::Closed {
                concurrency: concurrency.ok_or_else(|| {
                    v.missing("client.concurrency", "a closed-loop client needs it: ")
                })?,
                think_time: SimDuration::from_secs_f64(v.get("client.think_time_s")?)
                    .expect("invariant: seconds were range-checked"),
            },
            "poisson" => ClientSpec::Poisson {
                rate_per_s: v.get("client.rate_per_s")?,
                concurrency,
            },
            "gamma" => ClientSpec::Gamma {
                rate_per_s: v.get("client.rate_per_s")?,
                burstiness: v.get("client.burstiness")?,
                concurrency,
            },
            _ => match workload.map(|w| &w.lengths) {
                Some(Lengths::Trace {
                    has_arrivals: true, ..
                }) => ClientSpec::Trace { concurrency },
                Some(Lengths::Trace { file, .. }) => {
                    let msg = format!("sends each row at its arrival_s, and workload.trace = \"{file}\" has no arrival_s column");
                    let hint = "add arrival_s (seconds from the start, non-decreasing) to the trace, or use client.mode = \"closed\"";
                    return Err(v.bad("client.mode", msg, hint));
                }
                Some(Lengths::Sampled { .. } | Lengths::Rows { .. }) => {
                    let msg = "sends the rows of workload.trace at their arrival_s, and this scenario has no trace";
                    let hint =
                        "give workload.trace = \"FILE\" with an arrival_s column, or another mode";
                    return Err(v.bad("client.mode", msg, hint));
                }
                None => return Err(Bad), // the workload has problems of its own
            },
        })
    }

    /// The concurrency limit, if any.
    pub fn concurrency(&self) -> Option<u32> {
        match self {
            ClientSpec::Closed { concurrency, .. } => Some(*concurrency),
            ClientSpec::Poisson { concurrency, .. }
            | ClientSpec::Gamma { concurrency, .. }
            | ClientSpec::Trace { concurrency } => *concurrency,
        }
    }
}

/// What the client asks the simulator to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAction {
    /// Send the next request now; it became ready at `ready_at` (for the slot-wait metric).
    Send {
        /// Send order, from 0.
        seq: u64,
        /// When the request was ready to be sent.
        ready_at: SimTime,
    },
    /// Call [`Client::on_wake`] at this time (a think time ends).
    WakeAt(SimTime),
    /// Call [`Client::on_arrival`] at this time (the next open-loop arrival).
    ArriveAt(SimTime),
}

/// The client's state. Owned by the simulator; it never sees the server.
#[derive(Debug)]
pub struct Client {
    spec: ClientSpec,
    total: u64,
    /// Requests handed to the simulator to send.
    sent: u64,
    /// Open loop: requests that have arrived (sent or waiting for a slot).
    arrived: u64,
    in_flight: u64,
    /// Open loop with a cap: arrival times of requests waiting for a slot.
    backlog: VecDeque<SimTime>,
    /// Closed loop: slots that are thinking and will send when woken.
    thinking_slots: u64,
    /// Open loop: when the next request arrives.
    next_arrival_at: SimTime,
    /// Trace mode: every request's arrival time, in send order.
    arrivals: Option<Arc<[SimTime]>>,
    rng: Stream,
}

impl Client {
    /// A client for `total` requests. `rng` is the "arrivals" stream; `arrivals` holds the
    /// trace's arrival times (at least `total` of them) and is needed by the trace mode only.
    pub fn new(
        spec: ClientSpec,
        total: u64,
        rng: Stream,
        arrivals: Option<Arc<[SimTime]>>,
    ) -> Self {
        debug_assert!(
            !matches!(spec, ClientSpec::Trace { .. })
                || arrivals.as_ref().is_some_and(|a| a.len() as u64 >= total),
            "invariant: a trace client has an arrival time for every request"
        );
        Client {
            spec,
            total,
            sent: 0,
            arrived: 0,
            in_flight: 0,
            backlog: VecDeque::new(),
            thinking_slots: 0,
            next_arrival_at: SimTime::ZERO,
            arrivals,
            rng,
        }
    }

    /// Requests sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Requests that have not been sent yet (including those waiting for a slot).
    pub fn remaining(&self) -> u64 {
        self.total - self.sent
    }

    fn cap(&self) -> u64 {
        self.spec.concurrency().map_or(u64::MAX, u64::from)
    }

    #[inline]
    fn send(&mut self, ready_at: SimTime, out: &mut Vec<ClientAction>) {
        out.push(ClientAction::Send {
            seq: self.sent,
            ready_at,
        });
        self.sent += 1;
        self.in_flight += 1;
    }

    /// What happens at t = 0.
    pub fn start(&mut self, out: &mut Vec<ClientAction>) {
        match self.spec {
            ClientSpec::Closed { concurrency, .. } => {
                let n = u64::from(concurrency).min(self.total);
                for _ in 0..n {
                    self.send(SimTime::ZERO, out);
                }
            }
            ClientSpec::Poisson { .. } => {
                if self.total > 0 {
                    out.push(ClientAction::ArriveAt(SimTime::ZERO));
                }
            }
            ClientSpec::Gamma { .. } => {
                if self.total > 0 {
                    let gap = self.gap();
                    self.next_arrival_at = SimTime::ZERO + gap;
                    out.push(ClientAction::ArriveAt(self.next_arrival_at));
                }
            }
            ClientSpec::Trace { .. } => {
                if self.total > 0 {
                    self.next_arrival_at = self.trace_arrival(0);
                    out.push(ClientAction::ArriveAt(self.next_arrival_at));
                }
            }
        }
    }

    fn trace_arrival(&self, i: u64) -> SimTime {
        self.arrivals
            .as_ref()
            .expect("invariant: a trace client has its arrival times")[i as usize]
    }

    fn gap(&mut self) -> SimDuration {
        let secs = match self.spec {
            ClientSpec::Poisson { rate_per_s, .. } => Exp::new(rate_per_s)
                .expect("invariant: validated rate")
                .sample(&mut self.rng),
            ClientSpec::Gamma {
                rate_per_s,
                burstiness,
                ..
            } => Gamma::new(burstiness, 1.0 / (rate_per_s * burstiness))
                .expect("invariant: validated gamma arrival parameters")
                .sample(&mut self.rng),
            ClientSpec::Closed { .. } | ClientSpec::Trace { .. } => 0.0,
        };
        SimDuration::from_secs_f64(secs).unwrap_or(SimDuration::from_ns(u64::MAX / 4))
    }

    /// An open-loop arrival at `now`.
    pub fn on_arrival(&mut self, now: SimTime, out: &mut Vec<ClientAction>) {
        self.arrived += 1;
        if self.in_flight < self.cap() {
            self.send(now, out);
        } else {
            self.backlog.push_back(now);
        }
        if self.arrived < self.total {
            self.next_arrival_at = match self.spec {
                ClientSpec::Trace { .. } => self.trace_arrival(self.arrived),
                _ => now + self.gap(),
            };
            out.push(ClientAction::ArriveAt(self.next_arrival_at));
        }
    }

    /// A response (completion or rejection) reached the client at `now`.
    #[inline(always)]
    pub fn on_response(&mut self, now: SimTime, out: &mut Vec<ClientAction>) {
        debug_assert!(
            self.in_flight > 0,
            "invariant: a response needs a request in flight"
        );
        self.in_flight -= 1;
        match self.spec {
            ClientSpec::Closed { think_time, .. } => {
                // Slots still thinking count as busy, so compare sent with total only.
                if self.sent + self.thinking() < self.total {
                    if think_time == SimDuration::ZERO {
                        self.send(SimTime::ZERO, out);
                    } else {
                        self.thinking_slots += 1;
                        out.push(ClientAction::WakeAt(now + think_time));
                    }
                }
            }
            _ => {
                if let Some(ready_at) = self.backlog.pop_front() {
                    self.send(ready_at, out);
                }
            }
        }
    }

    fn thinking(&self) -> u64 {
        self.thinking_slots
    }

    /// A think time ended: the slot sends its next request.
    pub fn on_wake(&mut self, out: &mut Vec<ClientAction>) {
        self.thinking_slots -= 1;
        if self.sent < self.total {
            self.send(SimTime::ZERO, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Seeds, StreamName};

    fn t(s: u64) -> SimTime {
        SimTime::from_ns(s * 1_000_000_000)
    }

    #[test]
    fn a_trace_client_sends_at_the_arrival_times_and_waits_for_a_slot_over_its_cap() {
        let arrivals: Arc<[SimTime]> = vec![t(0), t(1), t(1), t(3)].into();
        let rng = Seeds::new(1).stream(StreamName::Arrivals);
        let spec = ClientSpec::Trace {
            concurrency: Some(1),
        };
        let mut c = Client::new(spec, 3, rng, Some(arrivals));
        let mut out = Vec::new();
        c.start(&mut out);
        assert_eq!(out, [ClientAction::ArriveAt(t(0))]);
        out.clear();
        c.on_arrival(t(0), &mut out);
        let send = |seq, ready_at| ClientAction::Send { seq, ready_at };
        assert_eq!(out, [send(0, t(0)), ClientAction::ArriveAt(t(1))]);
        out.clear();
        // Two rows arrive at 1 s while row 0 holds the only slot; the third of three requests
        // is the last: no arrival at 3 s is scheduled.
        c.on_arrival(t(1), &mut out);
        assert_eq!(out, [ClientAction::ArriveAt(t(1))]);
        out.clear();
        c.on_arrival(t(1), &mut out);
        assert!(out.is_empty());
        c.on_response(t(2), &mut out);
        assert_eq!(out, [send(1, t(1))]);
        assert_eq!(c.remaining(), 1);
    }

    #[test]
    fn a_closed_client_thinks_only_for_requests_no_slot_is_thinking_for() {
        // Three requests, two slots, 1 s of think time: both slots send at t = 0. The first
        // response sets its slot thinking for the third request; at the second there is
        // nothing left for another slot to send.
        let rng = Seeds::new(1).stream(StreamName::Arrivals);
        let spec = ClientSpec::Closed {
            concurrency: 2,
            think_time: SimDuration::from_ns(1_000_000_000),
        };
        let mut c = Client::new(spec, 3, rng, None);
        let mut out = Vec::new();
        c.start(&mut out);
        assert_eq!(out.len(), 2);
        out.clear();
        c.on_response(t(1), &mut out);
        assert_eq!(out, [ClientAction::WakeAt(t(2))]);
        out.clear();
        c.on_response(t(1), &mut out);
        assert!(out.is_empty());
    }

    /// The gaps between an open-loop client's first `n` arrivals (the first from t = 0).
    fn gaps_s(spec: ClientSpec, n: u64) -> Vec<f64> {
        let rng = Seeds::new(7).stream(StreamName::Arrivals);
        let mut c = Client::new(spec, n, rng, None);
        let mut out = Vec::new();
        c.start(&mut out);
        let mut at = Vec::new();
        while let Some(&ClientAction::ArriveAt(t)) = out.last() {
            at.push(t);
            out.clear();
            c.on_arrival(t, &mut out);
        }
        let mut last = SimTime::ZERO;
        at.iter()
            .map(|&t| {
                let gap = (t - last).as_secs_f64();
                last = t;
                gap
            })
            .collect()
    }

    #[test]
    fn open_loop_gaps_have_mean_one_over_the_rate_and_cv_one_over_root_shape() {
        // n = 20,000 gamma gaps of shape k (exponential: k = 1) have cv = 1 / √k; the sample
        // mean's relative standard error is cv / √n, the sample cv's about √((κ − 1) / 4n),
        // with kurtosis κ = 3 + 6 / k. Each bound is five standard errors.
        let n = 20_000;
        let check = |g: &[f64], mean_s: f64, shape: f64| {
            let len = g.len() as f64;
            let mean = g.iter().sum::<f64>() / len;
            let var = g.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (len - 1.0);
            let cv = var.sqrt() / mean;
            let want_cv = 1.0 / shape.sqrt();
            let mean_rel = 5.0 * want_cv / len.sqrt();
            let cv_rel = 5.0 * ((2.0 + 6.0 / shape) / (4.0 * len)).sqrt();
            assert!(
                (mean - mean_s).abs() <= mean_rel * mean_s
                    && (cv - want_cv).abs() <= cv_rel * want_cv,
                "shape {shape}: mean {mean} s (want {mean_s}), cv {cv} (want {want_cv})"
            );
        };
        // Poisson at 4 req/s: the first request at t = 0, then exponential gaps of 0.25 s.
        let g = gaps_s(
            ClientSpec::Poisson {
                rate_per_s: 4.0,
                concurrency: None,
            },
            n + 1,
        );
        assert_eq!(g[0], 0.0);
        check(&g[1..], 0.25, 1.0);
        // Gamma at 2 req/s: shape = burstiness, scale = 1 / (rate × burstiness), so the mean
        // stays 1 / rate = 0.5 s whatever the burstiness.
        for burstiness in [4.0, 0.25] {
            let spec = ClientSpec::Gamma {
                rate_per_s: 2.0,
                burstiness,
                concurrency: None,
            };
            check(&gaps_s(spec, n), 0.5, burstiness);
        }
    }

    #[test]
    fn a_gamma_client_sends_its_first_request_after_a_first_gap() {
        // `vllm bench serve` (`benchmarks/serve.py: get_request`) draws a gap before every
        // request, the first included (a Poisson client sends its first at t = 0).
        let rng = Seeds::new(1).stream(StreamName::Arrivals);
        let spec = ClientSpec::Gamma {
            rate_per_s: 1.0,
            burstiness: 1.0,
            concurrency: None,
        };
        let mut c = Client::new(spec, 2, rng, None);
        let mut out = Vec::new();
        c.start(&mut out);
        let [ClientAction::ArriveAt(at)] = out[..] else {
            panic!("{out:?}")
        };
        assert!(at > SimTime::ZERO);
    }
}
