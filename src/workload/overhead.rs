//! Time a request spends off the GPU: the network between the client and the server, the
//! server's HTTP handling and tokenizer before the request reaches the engine's queue, and the
//! streaming of each output token back (detokenising, server-sent events, the client's parsing).
//!
//! None of it occupies the GPU; all of it shifts what the client sees. A request sent at `s`
//! reaches the engine's queue at `s + rtt/2 + request_overhead`; the engine's `k`-th output
//! token, produced at `t_k`, reaches the client at `t_k + rtt/2 + k × per_token_overhead` (the
//! per-token time is in series: a stream that is slower per token than the engine falls
//! further behind with every token). So, with `n` output tokens,
//!
//! * TTFT as the client sees it = the engine's TTFT + rtt + request_overhead + per_token;
//! * every inter-token gap and TPOT grow by per_token;
//! * E2E = the engine's E2E + rtt + request_overhead + n × per_token.
//!
//! A concurrency-limited client holds its slot until it has received the last token: the next
//! request of a closed loop goes out only then (plus any think time). All three are 0 by
//! default, and then nothing of this module changes a run.

use crate::settings::{keys, Bad, Values};
use crate::time::{SimDuration, SimTime};

/// The largest overhead accepted (one hour).
const MAX_MS: f64 = 3_600_000.0;

keys! {
/// The off-GPU overheads, in `[client]` (they are what the client observes).
KEYS:
"client.network_rtt_ms" [Number(Within(0.0, MAX_MS)), Num(0.0), All, "ms"]
    "network round trip between client and server: half on the way to the server, half on the way back", e.g. "1.5";
"client.request_overhead_ms" [Number(Within(0.0, MAX_MS)), Num(0.0), All, "ms"]
    "off-GPU time before the request enters the engine's queue (HTTP handling, tokenizer)", e.g. "40";
"client.per_token_overhead_ms" [Number(Within(0.0, MAX_MS)), Num(0.0), All, "ms"]
    "streaming time per output token (detokenise, send, parse), in series: token k reaches the client k × this later", e.g. "0.2";
}

/// The off-GPU overheads of every request (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overhead {
    /// The network round trip.
    pub network_rtt: SimDuration,
    /// HTTP handling and tokenizer, before the engine's queue.
    pub request: SimDuration,
    /// Streaming time per output token, in series.
    pub per_token: SimDuration,
}

fn ms(x: f64) -> SimDuration {
    SimDuration::from_secs_f64(x / 1e3).expect("invariant: milliseconds were range-checked")
}

impl Overhead {
    /// Read the three keys of `[client]`.
    pub fn read(v: &mut dyn Values) -> Result<Self, Bad> {
        Ok(Overhead {
            network_rtt: ms(v.get("client.network_rtt_ms")?),
            request: ms(v.get("client.request_overhead_ms")?),
            per_token: ms(v.get("client.per_token_overhead_ms")?),
        })
    }

    /// No overhead at all: requests reach the engine when sent and tokens the client when
    /// produced.
    pub fn is_zero(&self) -> bool {
        *self == Overhead::default()
    }

    /// From the send to the engine's queue: half the round trip and the request overhead.
    pub fn to_server(&self) -> SimDuration {
        SimDuration::from_ns(self.network_rtt.as_ns() / 2 + self.request.as_ns())
    }

    /// From the engine producing its `k`-th output token (`k` from 1) to the client receiving
    /// it; for `k` = 0, a response without tokens (a refusal).
    pub fn to_client(&self, k: u32) -> SimDuration {
        let back = self.network_rtt.as_ns() - self.network_rtt.as_ns() / 2;
        SimDuration::from_ns(back + u64::from(k) * self.per_token.as_ns())
    }

    /// When the client receives what the engine produced at `at` as its `k`-th token.
    pub fn seen_at(&self, at: SimTime, k: u32) -> SimTime {
        at + self.to_client(k)
    }

    /// What the overheads add to every TTFT: the round trip, the request overhead and one
    /// token's streaming time.
    pub fn ttft_added(&self) -> SimDuration {
        SimDuration::from_ns(self.to_server().as_ns() + self.to_client(1).as_ns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_round_trip_splits_exactly_and_tokens_add_up_in_series() {
        let o = Overhead {
            network_rtt: SimDuration::from_ns(3),
            request: SimDuration::from_ns(10),
            per_token: SimDuration::from_ns(100),
        };
        assert_eq!(o.to_server().as_ns() + o.to_client(0).as_ns(), 13);
        assert_eq!(o.to_client(5).as_ns(), 2 + 500);
        assert_eq!(o.ttft_added().as_ns(), 3 + 10 + 100);
        assert!(!o.is_zero() && Overhead::default().is_zero());
    }

    #[test]
    fn any_one_overhead_alone_is_not_zero() {
        let one = SimDuration::from_ns(1);
        for o in [
            Overhead {
                network_rtt: one,
                ..Overhead::default()
            },
            Overhead {
                request: one,
                ..Overhead::default()
            },
            Overhead {
                per_token: one,
                ..Overhead::default()
            },
        ] {
            assert!(!o.is_zero(), "{o:?}");
        }
    }

    #[test]
    fn a_refusal_comes_back_with_half_the_round_trip_and_no_tokens_streaming_time() {
        // Round trip 3 ns (2 on the way back), 100 ns per token: a response without tokens
        // (k = 0) the engine sends at 1000 ns reaches the client at 1002 ns; its first token at
        // 1102 ns.
        let o = Overhead {
            network_rtt: SimDuration::from_ns(3),
            request: SimDuration::from_ns(10),
            per_token: SimDuration::from_ns(100),
        };
        let at = SimTime::from_ns(1000);
        assert_eq!(o.seen_at(at, 0), SimTime::from_ns(1002));
        assert_eq!(o.seen_at(at, 1), SimTime::from_ns(1102));
    }
}
