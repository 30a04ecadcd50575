//! Requests and the arena that holds the ones in flight.
//!
//! A request lives in the arena from the moment the client sends it until the engine is done
//! with it (with off-GPU time set, its response then travels back outside the arena); then its
//! slot is reused, so memory follows the requests in flight, not the
//! requests of the whole run.

use crate::time::SimTime;

/// Index of a request in the arena (reused after the request leaves).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReqId(pub u32);

/// Where a request is, as far as the simulator needs to know. Each scheduler keeps its own
/// finer bookkeeping (prefill progress, decode position) in its own tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// In the server's waiting queue (new, or evicted and waiting to be computed again).
    Waiting,
    /// Admitted: being prefilled or decoded.
    Running,
    /// Generated its last token; its KV is released.
    Finished,
    /// Refused by the server (too long for the pool or context), or aborted by it.
    Rejected,
}

/// A prompt prefix that the requests of one group share token for token (a system prompt, a
/// few-shot template, a tool schema): the first `tokens` tokens of every prompt of the group are
/// the same; the rest of each prompt is its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SharedPrefix {
    /// The group, by its index in the workload's list of groups.
    pub group: u32,
    /// Prompt tokens shared (at least 1, at most the prompt).
    pub tokens: u32,
}

/// One request.
#[derive(Clone, Debug)]
pub struct Request {
    /// Send order, from 0.
    pub seq: u64,
    /// Prompt length.
    pub prompt_tokens: u32,
    /// `max_new_tokens` as drawn; on arrival the engine caps it (SGLang: by the context,
    /// `max_req_len − input − 1`, and by the empty pool; vLLM: at `max_model_len − prompt`).
    pub max_new_tokens: u32,
    /// Output tokens it will generate before stopping (EOS or `max_new_tokens`).
    pub target_output_tokens: u32,
    /// `ignore_eos`: it runs to `max_new_tokens` whatever it generates.
    pub ignore_eos: bool,
    /// The prompt prefix it shares with its group, if any.
    pub prefix: Option<SharedPrefix>,
    /// When the client was ready to send it.
    pub ready_at: SimTime,
    /// When the client sent it.
    pub sent_at: SimTime,
    /// When it reached the engine's queue: `sent_at` plus the off-GPU time on the way
    /// (`client.network_rtt_ms` / 2 + `client.request_overhead_ms`; both 0 by default).
    pub arrived_at: SimTime,
    /// First admission to a prefill batch.
    pub admitted_at: Option<SimTime>,
    /// First output token.
    pub first_token_at: Option<SimTime>,
    /// Set when the request is evicted (retracted or preempted) holding output tokens, to the
    /// time of its latest one (SGLang; vLLM: the preemption, which under async scheduling may
    /// precede it), until its next token: that token's gap counts from here.
    pub evicted_at: Option<SimTime>,
    /// When its latest token came outside a decode step (its first token, or its first after
    /// an eviction): the recorder times the next token of such requests from the next decode
    /// step, and must hear of it if the request is evicted before that step gives it one.
    /// Left stale once a decode step has followed (the recorder then has nothing waiting).
    pub outside_token_at: Option<SimTime>,
    /// Output tokens generated so far. While the request is running the scheduler may keep the
    /// count in its own bookkeeping and bring this field up to date only when the request leaves
    /// the batch.
    pub out_tokens: u32,
    /// Times the engine evicted it from the running batch (SGLang: retracted; vLLM: preempted).
    pub evictions: u32,
    /// Prompt tokens found in the engine's prefix cache at its first admission (0 without a
    /// hit, or without a prefix cache).
    pub cached_tokens: u32,
    /// Lifecycle.
    pub phase: Phase,
}

/// The arena of requests in flight.
#[derive(Debug, Default)]
pub struct Requests {
    slots: Vec<Option<Request>>,
    free: Vec<u32>,
    live: usize,
}

impl Request {
    /// Evicted (retracted or preempted); `latest` is when its latest token came, as the
    /// scheduler knows it: if it holds output tokens, its next one's gap counts from there —
    /// or from an earlier eviction's, when it was evicted again before it got that token
    /// (re-admitted, then evicted before its recomputation gave one).
    pub fn evicted(&mut self, latest: SimTime) {
        if self.first_token_at.is_some() {
            self.evicted_at.get_or_insert(latest);
        }
    }
}

impl Requests {
    /// Store a request; returns its id.
    #[inline]
    pub fn insert(&mut self, r: Request) -> ReqId {
        self.live += 1;
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                u32::try_from(self.slots.len() - 1)
                    .expect("invariant: fewer than 2^32 requests in flight")
            }
        };
        self.slots[i as usize] = Some(r);
        ReqId(i)
    }

    /// Remove a request that has left the system.
    pub fn remove(&mut self, id: ReqId) -> Request {
        let r = self.slots[id.0 as usize]
            .take()
            .expect("invariant: removing a request that is not in the arena");
        self.free.push(id.0);
        self.live -= 1;
        r
    }

    /// Remove a request that has left the system, without handing it back.
    #[inline]
    pub fn release(&mut self, id: ReqId) {
        let slot = &mut self.slots[id.0 as usize];
        debug_assert!(
            slot.is_some(),
            "invariant: releasing a request that is not in the arena"
        );
        *slot = None;
        self.free.push(id.0);
        self.live -= 1;
    }

    /// The request at `id`, if it is live.
    pub fn get(&self, id: ReqId) -> Option<&Request> {
        self.slots.get(id.0 as usize).and_then(Option::as_ref)
    }

    /// Requests in the arena.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

impl std::ops::Index<ReqId> for Requests {
    type Output = Request;
    fn index(&self, id: ReqId) -> &Request {
        self.slots[id.0 as usize]
            .as_ref()
            .expect("invariant: request id refers to a live request")
    }
}

impl std::ops::IndexMut<ReqId> for Requests {
    fn index_mut(&mut self, id: ReqId) -> &mut Request {
        self.slots[id.0 as usize]
            .as_mut()
            .expect("invariant: request id refers to a live request")
    }
}
