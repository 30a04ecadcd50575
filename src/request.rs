//! Requests and the arena that holds the ones in flight.
//!
//! A request lives in the arena from the moment the client sends it until its response reaches
//! the client; then its slot is reused, so memory follows the requests in flight, not the
//! requests of the whole run.

use crate::time::SimTime;

/// Index of a request in the arena (reused after the request leaves).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReqId(pub u32);

/// Where a request is in the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// In the server's waiting queue (new, or retracted and waiting to be re-prefilled).
    Waiting,
    /// Admitted to a prefill batch or mid-chunk: `done` of its `input` tokens are in the cache.
    Prefilling {
        /// Input tokens already computed.
        done: u32,
        /// Input tokens to compute: the prompt plus any output generated before a retraction.
        input: u32,
    },
    /// In the decode batch since decode step `since_step`, when it had `out_then` output tokens.
    Running {
        /// The scheduler's decode-step counter when the request joined the batch.
        since_step: u64,
        /// Output tokens at that moment.
        out_then: u32,
        /// Unique token of this stay in the batch (guards stale completion-heap entries).
        stay: u64,
    },
    /// Generated its last token; its KV is released.
    Finished,
    /// Refused by the server (prompt too long for the pool or context).
    Rejected,
}

/// One request.
#[derive(Clone, Debug)]
pub struct Request {
    /// Send order, from 0.
    pub seq: u64,
    /// Prompt length.
    pub prompt_tokens: u32,
    /// `max_new_tokens` after the server's own cap (`max_req_len − input − 1`).
    pub max_new_tokens: u32,
    /// Output tokens it will generate before stopping (EOS or `max_new_tokens`).
    pub target_output_tokens: u32,
    /// `ignore_eos` (admission charges it at ratio 1.0 once running).
    pub ignore_eos: bool,
    /// When the client was ready to send it.
    pub ready_at: SimTime,
    /// When it was sent (and arrived: the network takes no time).
    pub sent_at: SimTime,
    /// First admission to a prefill batch.
    pub admitted_at: Option<SimTime>,
    /// First output token.
    pub first_token_at: Option<SimTime>,
    /// Output tokens generated so far, except while `Running` (see [`Request::output_tokens`]).
    pub out_tokens: u32,
    /// Times it was retracted.
    pub retractions: u32,
    /// Lifecycle.
    pub phase: Phase,
}

impl Request {
    /// Output tokens generated so far, given the scheduler's decode-step counter.
    pub fn output_tokens(&self, decode_step: u64) -> u32 {
        match self.phase {
            Phase::Running {
                since_step,
                out_then,
                ..
            } => out_then + (decode_step - since_step) as u32,
            _ => self.out_tokens,
        }
    }
}

/// The arena of requests in flight.
#[derive(Debug, Default)]
pub struct Requests {
    slots: Vec<Option<Request>>,
    free: Vec<u32>,
    live: usize,
}

impl Requests {
    /// Store a request; returns its id.
    pub fn insert(&mut self, r: Request) -> ReqId {
        self.live += 1;
        if let Some(i) = self.free.pop() {
            self.slots[i as usize] = Some(r);
            ReqId(i)
        } else {
            self.slots.push(Some(r));
            ReqId(
                u32::try_from(self.slots.len() - 1)
                    .expect("invariant: fewer than 2^32 requests in flight"),
            )
        }
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
