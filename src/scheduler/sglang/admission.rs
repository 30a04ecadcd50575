//! The prefill admission pass: `Scheduler._get_new_batch_prefill_raw` (`managers/scheduler.py`)
//! with `PrefillAdder` (`managers/schedule_policy.py`), its memory budget
//! (`mem_cache/prefill_budget.py: PrefillBudget`) and the policy's ordering
//! (`SchedulePolicy.calc_priority`).

use std::cmp::Reverse;

use rand::seq::SliceRandom;

use super::settings::SchedulePolicy;
use super::{InFlight, Place, PrefillItem, Sglang};
use crate::request::{Phase, ReqId, Request, Requests};
use crate::scheduler::{Outbox, ServerSample, StepKind};
use crate::time::{SimDuration, SimTime};

/// The largest prefill batch, in tokens, that replays a CUDA graph by default.
const PREFILL_GRAPH_MAX_TOKENS: u64 = 2048;

/// `IGNORE_EOS_RESERVE_TOKENS` (`managers/schedule_policy.py`): the head-room per request the
/// `ignore_eos` admission rule keeps.
const IGNORE_EOS_RESERVE_TOKENS: f64 = 1.0;

/// A token count as a float, exactly as `as f64` rounds it: through `i64`, whose conversion is
/// one instruction where an unsigned one takes several (counts are far below 2^63).
#[inline(always)]
fn float(x: u64) -> f64 {
    debug_assert!(x < 1 << 63, "invariant: token counts are far below 2^63");
    x as i64 as f64
}

/// How an admission attempt ended (`AddReqResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AddResult {
    Continue,
    NoToken,
    Other,
}

/// The running requests' reservations an admission pass starts from: their float sum as
/// SGLang adds it, or bounds `lo ≤ sum ≤ hi` of it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Reservations {
    lo: f64,
    hi: f64,
    /// Bounds rather than the exact sum.
    bounded: bool,
}

/// One admission pass: `PrefillAdder`'s budgets and what it has admitted so far.
pub(super) struct Pass {
    /// `available_size() + evictable_size()` when the pass began.
    available: f64,
    /// `PrefillBudget.total_offset`: reservations, the running requests' future tokens included
    /// (in a bounded pass, from the upper bound of the running requests').
    total_offset: f64,
    /// In a bounded pass, `total_offset` from the lower bound (else equal to it).
    total_offset_lo: f64,
    /// `PrefillBudget.current_offset`: this pass's immediate allocations.
    current_offset: f64,
    /// `rem_input_tokens`.
    rem_input: i64,
    /// `rem_chunk_tokens` (`None` without chunked prefill).
    rem_chunk: Option<i64>,
    page: u64,
    /// `can_run_list`, in admission order.
    pub(super) items: Vec<PrefillItem>,
    /// `new_chunked_req`.
    new_chunked: Option<ReqId>,
    /// Requests taken from the waiting queue (the chunked continuation is not one of them).
    admitted: usize,
    /// `PrefillAdder.req_states` of the `ignore_eos` rule: `(tokens left, tokens held)`, sorted
    /// by tokens left; built at its first use in the pass.
    req_states: Option<Vec<(f64, u64)>>,
    /// Whether the offsets started from bounds of the running requests' reservations rather
    /// than their exact sum (see [`Sglang::try_prefill`]).
    bounded: bool,
    /// Set when a bounded pass met a decision that the two bounds take differently (the exact
    /// sum could go either way): the pass must be run again with the exact sum.
    unsure: bool,
}

impl Pass {
    fn remaining_total(&self) -> f64 {
        self.available - self.total_offset
    }
    #[inline]
    fn remaining_current(&self) -> f64 {
        self.available - self.current_offset
    }
    #[inline]
    fn ceil_page(&self, tokens: u64) -> u64 {
        match self.page {
            1 => tokens,
            p => tokens.div_ceil(p) * p,
        }
    }
    /// `_update_prefill_budget` → `PrefillBudget.reserve`, and the input and chunk budgets.
    #[inline(always)]
    fn reserve(&mut self, extend: u64, max_new: u64) {
        let extend = self.ceil_page(extend);
        let immediate = float(extend + self.page);
        self.total_offset += immediate + float(max_new);
        self.total_offset_lo += immediate + float(max_new);
        self.current_offset += immediate;
        self.rem_input -= extend as i64;
        if let Some(c) = self.rem_chunk.as_mut() {
            *c -= extend as i64;
        }
    }
    /// `decide(remaining_total())`, for a `decide` monotone in the remainder. In a bounded pass
    /// the exact remainder lies between those of the two bounds (float addition and
    /// subtraction are monotone, and both offsets took the same additions), so where the two
    /// decide alike the exact sum does too; where they differ the pass is unsure.
    #[inline(always)]
    fn on_remaining<T: PartialEq>(&mut self, decide: impl Fn(f64) -> T) -> T {
        let d = decide(self.remaining_total());
        if self.bounded && !self.unsure {
            self.unsure = decide(self.available - self.total_offset_lo) != d;
        }
        d
    }
    /// `PrefillAdder.budget_state`.
    #[inline(always)]
    fn state(&mut self) -> AddResult {
        if !(self.remaining_current() > 0.0 && self.on_remaining(|r| r > 0.0)) {
            return AddResult::NoToken;
        }
        if self.rem_input <= 0 || self.rem_chunk.is_some_and(|c| c <= 0) {
            return AddResult::Other;
        }
        AddResult::Continue
    }
    /// `_commit_prefill_admission`: add `take` tokens of `id` to the batch.
    #[inline(always)]
    fn commit(&mut self, id: ReqId, take: u64, max_new: u64, chunked: bool) -> AddResult {
        self.reserve(take, max_new);
        self.items.push(PrefillItem {
            id,
            take: take as u32,
        });
        if chunked {
            self.new_chunked = Some(id);
        }
        self.admitted += 1;
        self.state()
    }
}

impl Sglang {
    /// Σ over the decode batch of `min(max_new − generated, clip) × ratio` (1.0 for
    /// `ignore_eos`): `PrefillAdder._get_running_request_total_token_offset`, in batch order.
    pub(super) fn running_reservations(&self, reqs: &Requests) -> Reservations {
        let tokens = self
            .running
            .iter()
            .map(|&id| {
                let r = &reqs[id];
                let left = u64::from(r.max_new_tokens)
                    .saturating_sub(u64::from(self.output_tokens(id, r)))
                    .min(self.p.clip) as f64;
                left * if r.ignore_eos { 1.0 } else { self.ratio }
            })
            .sum();
        Reservations {
            lo: tokens,
            hi: tokens,
            bounded: false,
        }
    }

    /// [`running_reservations`](Self::running_reservations) in O(log batch), from the exact
    /// integer sums of `reserved.rs`: the float sum itself when every term is an integer (ratio
    /// 1, or nothing at the ratio), else bounds of it. Its `n` terms are non-negative and each
    /// product and addition rounds by at most half an epsilon, so the float sum is within
    /// `n·ε/2` (to first order) of `S_ratio × ratio + S_one`; the bounds leave more than twice
    /// that, and the rounding of their own computation. `None` for a ratio so small that the
    /// products could be subnormal (their rounding is not relative).
    #[inline]
    pub(super) fn reservation_interval(&mut self, reqs: &Requests) -> Option<Reservations> {
        let [at_ratio, at_one] = self.reserved_tokens();
        debug_assert_eq!(
            [at_ratio, at_one],
            self.running.iter().fold([0, 0], |mut sums, &id| {
                let r = &reqs[id];
                let left = u64::from(r.max_new_tokens)
                    .saturating_sub(u64::from(self.output_tokens(id, r)))
                    .min(self.p.clip);
                sums[usize::from(r.ignore_eos)] += left;
                sums
            }),
            "invariant: the kept reservation sums are the batch's"
        );
        let ratio = self.ratio;
        if at_ratio == 0 || ratio == 1.0 {
            // Integers below 2⁵³: every term, partial sum and the total are exact.
            let exact = (at_ratio + at_one) as f64;
            return Some(Reservations {
                lo: exact,
                hi: exact,
                bounded: false,
            });
        }
        if !(1e-200..=1.0).contains(&ratio) {
            return None;
        }
        let t = float(at_ratio) * ratio + float(at_one);
        let c = (float(self.running.len() as u64) + 8.0) * f64::EPSILON;
        Some(Reservations {
            lo: t * (1.0 - c),
            hi: t * (1.0 + c),
            bounded: true,
        })
    }

    #[inline]
    fn sort_waiting(&mut self, reqs: &Requests) {
        match self.p.policy {
            // The cache-aware policies order by the cache (`cache_priority`); without it they
            // fall back to FCFS, as SGLang's `_validate_and_adjust_policy` does.
            SchedulePolicy::Fcfs | SchedulePolicy::Lpm | SchedulePolicy::DfsWeight => {}
            SchedulePolicy::Lof => self
                .waiting
                .make_contiguous()
                .sort_by_key(|&id| Reverse(reqs[id].max_new_tokens)),
            SchedulePolicy::Random => self.waiting.make_contiguous().shuffle(&mut self.rng),
        }
    }

    /// `PrefillAdder.add_chunked_req`: the request between chunks takes the next chunk first.
    fn add_chunked(&self, pass: &mut Pass, id: ReqId, reqs: &Requests) {
        let Place::Prefilling { done, input } = self.place(id) else {
            panic!("invariant: the chunked request is prefilling");
        };
        let chunk = pass.rem_chunk.expect("invariant: chunking is enabled");
        // `available_chunk_tokens`: a continuation must make progress to release its KV.
        let mut rem = chunk.min(pass.on_remaining(|r| r as i64));
        if rem <= 0 {
            rem = chunk;
        }
        let left = i64::from(input - done);
        let truncated = left > rem;
        let take = if truncated { rem } else { left } as u64;
        let max_new = if truncated {
            0
        } else {
            u64::from(reqs[id].max_new_tokens).min(self.p.clip)
        };
        pass.reserve(take, max_new);
        pass.items.push(PrefillItem {
            id,
            take: take as u32,
        });
    }

    /// What `PrefillAdder.add_one_req` weighs for the waiting request `id` (`r`): its extend,
    /// the input less what the radix cache holds, and the tokens `PrefillBudget.check_prefill`
    /// needs for it, `extend + min(max_new − generated, clip) + page` (as a float).
    #[inline(always)]
    fn admission_need(&self, id: ReqId, r: &Request) -> (u64, f64) {
        let generated = u64::from(r.out_tokens);
        let extend = u64::from(r.prompt_tokens) + generated - u64::from(self.matched(id));
        let max_new_left = u64::from(r.max_new_tokens)
            .saturating_sub(generated)
            .min(self.p.clip);
        (extend, float(extend + max_new_left + self.p.page))
    }

    /// `PrefillAdder.add_one_req`: the input less what the radix cache holds is extended.
    #[inline(always)]
    fn add_one(&self, pass: &mut Pass, id: ReqId, reqs: &Requests) -> AddResult {
        let r = &reqs[id];
        let (extend, need) = self.admission_need(id, r);
        // `PrefillBudget.check_prefill`: strictly below what remains.
        if pass.on_remaining(|r| need >= r) {
            return AddResult::NoToken;
        }
        let input_tokens = pass.ceil_page(extend);
        // `_select_prefill_admission`: without chunking only the first request may exceed the
        // input budget.
        if pass.rem_chunk.is_none()
            && !pass.items.is_empty()
            && input_tokens as i64 >= pass.rem_input
        {
            return AddResult::Other;
        }
        let max_new = u64::from(r.max_new_tokens).min(self.p.clip);
        match pass.rem_chunk {
            Some(c) if input_tokens as i64 > c => {
                let take = (c.max(0) as u64) / self.p.page * self.p.page;
                if take == 0 {
                    return AddResult::Other;
                }
                pass.commit(id, take, 0, true)
            }
            _ => pass.commit(id, extend, max_new, false),
        }
    }

    /// `PrefillAdder.add_one_req_ignore_eos`, used for `ignore_eos` requests when the radix
    /// cache is disabled: the extend must fit now, and the pool, drained request by request as
    /// the running and admitted requests reach their `max_new_tokens` (fewest tokens left
    /// first), must never fall to `IGNORE_EOS_RESERVE_TOKENS` per request still running.
    fn add_one_ignore_eos(&self, pass: &mut Pass, id: ReqId, reqs: &Requests) -> AddResult {
        let r = &reqs[id];
        let extend = u64::from(r.prompt_tokens) + u64::from(r.out_tokens);
        let paged_input = (pass.ceil_page(extend) + self.p.page) as f64;
        // `PrefillBudget.can_allocate_prefill`.
        let current = pass.remaining_current();
        if pass.on_remaining(|r| paged_input > current.min(r)) {
            return AddResult::NoToken;
        }
        let state = |rid: ReqId| -> Option<(f64, u64)> {
            let q = &reqs[rid];
            let ratio = if q.ignore_eos { 1.0 } else { self.ratio };
            let out = self.output_tokens(rid, q);
            let left = f64::from(q.max_new_tokens) * ratio - f64::from(out);
            (left > 0.0).then(|| (left, u64::from(q.prompt_tokens) + u64::from(out)))
        };
        match pass.req_states.as_mut() {
            None => {
                let mut states: Vec<(f64, u64)> = std::iter::once(id)
                    .chain(self.running.iter().copied())
                    .chain(pass.items.iter().map(|it| it.id))
                    .filter_map(state)
                    .collect();
                // A stable sort, as Python's.
                states.sort_by(|a, b| a.0.total_cmp(&b.0));
                pass.req_states = Some(states);
            }
            Some(states) => {
                if let Some(s) = state(id) {
                    // SGLang's insertion: before the first state with at least as many tokens
                    // left — and, when there is none, before the last one.
                    let mut at = 0;
                    for (i, st) in states.iter().enumerate() {
                        at = i;
                        if s.0 <= st.0 {
                            break;
                        }
                    }
                    states.insert(at, s);
                }
            }
        }
        let states = pass.req_states.as_ref().expect("invariant: built above");
        let current = pass.remaining_current() - paged_input;
        let mut freed = 0.0;
        for (i, &(left, held)) in states.iter().enumerate() {
            let bs = (states.len() - i) as f64;
            if current + freed - left * bs <= IGNORE_EOS_RESERVE_TOKENS * bs {
                return AddResult::NoToken;
            }
            freed += held as f64;
        }
        let max_new = u64::from(r.max_new_tokens).min(self.p.clip);
        match pass.rem_chunk {
            Some(c) if extend as i64 > c => {
                if c <= 0 {
                    return AddResult::Other;
                }
                pass.commit(id, c as u64, 0, true)
            }
            _ => pass.commit(id, extend, max_new, false),
        }
    }

    /// `get_new_batch_prefill`: admit what fits and start a prefill batch.
    #[inline]
    pub(super) fn try_prefill(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<(InFlight, SimDuration)> {
        if self.running.is_empty() {
            self.batch_is_full = false;
        }
        if (self.batch_is_full || self.waiting.is_empty()) && self.chunked.is_none() {
            return None;
        }
        self.admit(now, reqs, out)
    }

    /// [`try_prefill`](Self::try_prefill) when a pass is to be made.
    #[inline(never)]
    fn admit(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<(InFlight, SimDuration)> {
        let running_bs = self.running.len() as u64;
        // `get_num_allocatable_reqs`: the request rows left (a continuing chunk holds its own).
        let allocatable = self.p.max_running.saturating_sub(running_bs);
        self.sort_waiting(reqs);
        // With mixed chunks the running requests' decode tokens come out of the pass's budgets
        // (`num_mixed_decode_tokens`).
        let mixed = if self.p.mixed_chunk { running_bs } else { 0 };
        // The running requests' reservations are a float sum over the batch; tight bounds of
        // it, from integer sums kept as requests join and leave, decide nearly every pass alone,
        // and the sum is taken only when a decision could turn on it. With the radix cache the
        // pass matches and locks as it goes (what is free changes): one exact pass.
        // The item list of a finished batch, reused.
        let items = self.spare_items.pop().unwrap_or_default();
        let mut pass;
        let stop;
        if self.cache.is_some() {
            if allocatable > 0 || self.chunked.is_some() {
                self.cache_priority(reqs);
            }
            (pass, stop) = self.cached_pass(reqs, mixed, allocatable, items);
        } else {
            let bounds = self.reservation_interval(reqs);
            // Tried after a pass that stopped for lack of memory (the head that did not fit
            // then usually does not now): elsewhere the pass usually admits, and would only
            // repeat the head's check.
            if self.memory_stopped
                && bounds.is_some_and(|b| self.head_surely_refused(reqs, mixed, allocatable, b))
            {
                // The pass would stop at once for lack of memory, nothing admitted.
                debug_assert!(
                    {
                        let (check, stop) =
                            self.bounded_pass(reqs, mixed, allocatable, bounds, Vec::new());
                        check.items.is_empty() && stop == Some(AddResult::NoToken)
                    },
                    "invariant: a head surely refused is what the admission pass decides"
                );
                self.spare_items.push(items);
                self.batch_is_full = !self.running.is_empty();
                self.counters.memory_stops += 1;
                return None;
            }
            // `bounded_pass`, the pass kept where it is made.
            let available = self.kv.available_tokens();
            let first = bounds.unwrap_or_else(|| self.running_reservations(reqs));
            pass = self.new_pass(available, mixed, first, items);
            self.chunk_first(&mut pass, reqs);
            let mut s = self.run_pass(&mut pass, reqs, allocatable);
            if pass.unsure {
                let exact = self.running_reservations(reqs);
                let items = std::mem::take(&mut pass.items);
                pass = self.new_pass(available, mixed, exact, items);
                self.chunk_first(&mut pass, reqs);
                s = self.run_pass(&mut pass, reqs, allocatable);
            } else {
                debug_assert!(
                    {
                        let (check, check_stop) =
                            self.bounded_pass(reqs, mixed, allocatable, bounds, Vec::new());
                        check.items == pass.items
                            && check.new_chunked == pass.new_chunked
                            && check.admitted == pass.admitted
                            && check_stop == s
                    },
                    "invariant: the pass decides as bounded_pass"
                );
            }
            stop = s;
        }
        self.memory_stopped = stop == Some(AddResult::NoToken);
        match stop {
            // The slot limit closes the latch.
            Some(AddResult::Other) => {
                self.batch_is_full = true;
                self.counters.slot_stops += 1;
            }
            Some(AddResult::NoToken) => {
                self.batch_is_full = !pass.items.is_empty() || !self.running.is_empty();
                self.counters.memory_stops += 1;
            }
            _ => {}
        }
        let Pass {
            items,
            new_chunked,
            admitted,
            ..
        } = pass;
        if items.is_empty() {
            self.spare_items.push(items);
            return None;
        }
        self.start_prefill(now, items, new_chunked, admitted, running_bs, reqs, out)
    }

    /// Whether the admission pass without the radix cache surely stops at the queue's head for
    /// lack of memory (`AddResult::NoToken`), nothing admitted, with the running requests'
    /// reservations within `bounds`: no continuing chunk goes first, a request row is left,
    /// the pass's input and chunk budgets start positive (so that its first `budget_state` is
    /// never `Other`), the head takes `add_one_req` and does not fit even by the lower bound
    /// of the reservations (then by the exact sum neither: the remainder only shrinks as the
    /// offset grows). [`pass`](Self::pass) decides exactly so, in more steps (a debug-build
    /// check holds the two together, and the test
    /// `a_head_that_cannot_fit_is_refused_without_a_pass_as_the_pass_refuses_it`).
    #[inline]
    pub(super) fn head_surely_refused(
        &self,
        reqs: &Requests,
        mixed: u64,
        allocatable: u64,
        bounds: Reservations,
    ) -> bool {
        if self.chunked.is_some() || allocatable == 0 {
            return false;
        }
        let Some(&id) = self.waiting.front() else {
            return false;
        };
        let r = &reqs[id];
        if r.ignore_eos && !self.p.radix_cache {
            return false;
        }
        if (self.p.max_prefill as i64) - (mixed as i64) <= 0
            || self
                .p
                .chunk
                .is_some_and(|c| (c as i64) - (mixed as i64) <= 0)
        {
            return false;
        }
        // As `new_pass` and `add_one` compute them.
        let available = float(self.kv.available_tokens());
        let total_offset_lo = float(mixed) + bounds.lo;
        let (_, need) = self.admission_need(id, r);
        need >= available - total_offset_lo
    }

    /// The admission pass without the radix cache: with `bounds` of the reservations, and
    /// exact only if the bounds left a decision unsure (or there are none).
    #[inline(always)]
    fn bounded_pass(
        &self,
        reqs: &Requests,
        mixed: u64,
        allocatable: u64,
        bounds: Option<Reservations>,
        items: Vec<PrefillItem>,
    ) -> (Pass, Option<AddResult>) {
        let available = self.kv.available_tokens();
        let Some(bounds) = bounds else {
            let exact = self.running_reservations(reqs);
            let mut pass = self.new_pass(available, mixed, exact, items);
            self.chunk_first(&mut pass, reqs);
            let stop = self.run_pass(&mut pass, reqs, allocatable);
            return (pass, stop);
        };
        let mut pass = self.new_pass(available, mixed, bounds, items);
        self.chunk_first(&mut pass, reqs);
        let stop = self.run_pass(&mut pass, reqs, allocatable);
        if pass.unsure {
            let exact = self.running_reservations(reqs);
            let items = std::mem::take(&mut pass.items);
            let mut pass = self.new_pass(available, mixed, exact, items);
            self.chunk_first(&mut pass, reqs);
            let stop = self.run_pass(&mut pass, reqs, allocatable);
            return (pass, stop);
        }
        debug_assert!(
            {
                let exact = self.running_reservations(reqs);
                let (check, exact_stop) = self.pass(reqs, mixed, allocatable, exact, Vec::new());
                check.items == pass.items
                    && check.new_chunked == pass.new_chunked
                    && check.admitted == pass.admitted
                    && exact_stop == stop
            },
            "invariant: a bounded admission pass that is sure decides as the exact one"
        );
        (pass, stop)
    }

    /// The admission pass with the radix cache (`mem_cache/unified_radix_cache.py`,
    /// `managers/schedule_policy.py: PrefillAdder`): each request's prefix is matched
    /// (`init_next_round_input`) and locked while its admission is weighed (what it pins no
    /// longer counts as evictable), the lock kept if it is admitted; exact reservations.
    fn cached_pass(
        &mut self,
        reqs: &Requests,
        mixed: u64,
        allocatable: u64,
        items: Vec<PrefillItem>,
    ) -> (Pass, Option<AddResult>) {
        let reservations = self.running_reservations(reqs);
        let mut owned = self.new_pass(self.free_tokens(), mixed, reservations, items);
        self.chunk_first(&mut owned, reqs);
        let pass = &mut owned;
        let mut stop = None;
        for i in 0..self.waiting.len() {
            let id = self.waiting[i];
            if pass.state() == AddResult::Other {
                break;
            }
            if pass.items.len() as u64 >= allocatable {
                stop = Some(AddResult::Other);
                break;
            }
            // A continuing chunk enters the pass even with the latch closed; nothing else does.
            if self.batch_is_full {
                break;
            }
            self.match_waiting(id, reqs);
            self.lock_matched(id);
            pass.available = self.free_tokens() as f64;
            let before = pass.admitted;
            let result = self.add_one(pass, id, reqs);
            if pass.admitted == before {
                self.unlock_matched(id);
                pass.available = self.free_tokens() as f64;
            }
            if result != AddResult::Continue {
                if result == AddResult::NoToken {
                    stop = Some(result);
                }
                break;
            }
        }
        (owned, stop)
    }

    /// Set `pass` to a pass's budgets before its first request: `available` free tokens,
    /// `mixed` decode tokens of a mixed batch, the running requests' `reservations`; a
    /// continuing chunk goes first. Its item list is emptied (its allocation reused).
    #[inline(always)]
    fn new_pass(
        &self,
        available: u64,
        mixed: u64,
        reservations: Reservations,
        mut items: Vec<PrefillItem>,
    ) -> Pass {
        items.clear();
        Pass {
            available: float(available),
            total_offset: float(mixed) + reservations.hi,
            total_offset_lo: float(mixed) + reservations.lo,
            current_offset: float(mixed),
            rem_input: self.p.max_prefill as i64 - mixed as i64,
            rem_chunk: self.p.chunk.map(|c| c as i64 - mixed as i64),
            page: self.p.page,
            items,
            new_chunked: None,
            admitted: 0,
            req_states: None,
            bounded: reservations.bounded,
            unsure: false,
        }
    }

    /// A continuing chunk goes first in `pass`, just made by [`new_pass`](Self::new_pass)
    /// (apart from it, so that the pass is made where it stays).
    #[inline(always)]
    fn chunk_first(&self, pass: &mut Pass, reqs: &Requests) {
        if let Some(id) = self.chunked {
            self.add_chunked(pass, id, reqs);
        }
    }

    /// One admission pass over the (sorted) waiting queue, the running requests' reservations
    /// given as `reservations` — exact, or an upper bound (then the pass says whether it is
    /// `unsure`). Returns the pass and why it stopped, if it stopped short.
    pub(super) fn pass(
        &self,
        reqs: &Requests,
        mixed: u64,
        allocatable: u64,
        reservations: Reservations,
        items: Vec<PrefillItem>,
    ) -> (Pass, Option<AddResult>) {
        let available = self.kv.available_tokens();
        let mut pass = self.new_pass(available, mixed, reservations, items);
        self.chunk_first(&mut pass, reqs);
        let stop = self.run_pass(&mut pass, reqs, allocatable);
        (pass, stop)
    }

    /// The admission pass's walk over the (sorted) waiting queue, from `pass` as
    /// [`new_pass`](Self::new_pass) made it. Returns why it stopped, if it stopped short.
    #[inline(always)]
    fn run_pass(&self, pass: &mut Pass, reqs: &Requests, allocatable: u64) -> Option<AddResult> {
        let mut stop = None;
        // After an admission the budgets' state is the one `commit` just found (`Continue`):
        // not asked again.
        let mut known = false;
        // By index: a pass usually looks at a request or two, and the deque's iterator costs
        // more to set up than that many lookups.
        for i in 0..self.waiting.len() {
            let id = self.waiting[i];
            if pass.unsure || (!known && pass.state() == AddResult::Other) {
                break;
            }
            if pass.items.len() as u64 >= allocatable {
                stop = Some(AddResult::Other);
                break;
            }
            // A continuing chunk enters the pass even with the latch closed; nothing else does.
            if self.batch_is_full {
                break;
            }
            let result = if reqs[id].ignore_eos && !self.p.radix_cache {
                self.add_one_ignore_eos(pass, id, reqs)
            } else {
                self.add_one(pass, id, reqs)
            };
            if result != AddResult::Continue {
                if result == AddResult::NoToken {
                    stop = Some(result);
                }
                break;
            }
            known = true;
        }
        stop
    }

    /// Take the admitted requests off the queue, allocate their KV (`prepare_for_extend`) and
    /// start the batch — or, when its pages are more than the pool has free, report that SGLang
    /// runs out of memory here (`out.out_of_memory`) and start nothing.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn start_prefill(
        &mut self,
        now: SimTime,
        items: Vec<PrefillItem>,
        new_chunked: Option<ReqId>,
        admitted: usize,
        running_bs: u64,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<(InFlight, SimDuration)> {
        // The items are the continuing chunk, if any, then the admitted requests: a prefix of
        // the (sorted) waiting queue, in its order. One walk takes them off the queue and counts
        // the batch's tokens and pages.
        let continuing = items.len() - admitted;
        debug_assert!(continuing <= 1, "invariant: one continuing chunk at most");
        // The request between chunks after this batch: its tokens still to come are pending.
        let chunked = new_chunked.or(self.chunked);
        let mut pending_chunk = None;
        let mut cached_tokens = 0u64;
        let mut new_token = 0u64;
        let mut pages = 0;
        for (k, it) in items.iter().enumerate() {
            let (done, input) = if k < continuing {
                let Place::Prefilling { done, input } = self.place(it.id) else {
                    panic!("invariant: prefill items are prefilling");
                };
                (done, input)
            } else {
                let id = self
                    .waiting
                    .pop_front()
                    .expect("invariant: admitted requests were waiting");
                debug_assert_eq!(
                    id, it.id,
                    "invariant: admitted requests are the queue's head"
                );
                let r = &mut reqs[id];
                self.waiting_tokens -= u64::from(r.prompt_tokens) + u64::from(r.out_tokens);
                let input = r.prompt_tokens + r.out_tokens;
                r.phase = Phase::Running;
                let cached = self.admit_cached(id);
                if r.admitted_at.is_none() {
                    r.cached_tokens = cached;
                    self.counters.first_admissions += 1;
                    self.counters.first_admission_prompt_tokens += u64::from(r.prompt_tokens);
                    self.counters.cached_prompt_tokens += u64::from(cached);
                    self.counters.cache_hit_requests += u64::from(cached > 0);
                }
                r.admitted_at.get_or_insert(now);
                self.set_place(
                    id,
                    Place::Prefilling {
                        done: cached,
                        input,
                    },
                );
                cached_tokens += u64::from(cached);
                self.prefilling += 1;
                (cached, input)
            };
            new_token += u64::from(it.take);
            if pending_chunk.is_none() && chunked == Some(it.id) {
                pending_chunk = Some(u64::from(input - done - it.take));
            }
            // `alloc_for_extend`'s pages.
            pages += self.pages(u64::from(done + it.take)) - self.pages(u64::from(done));
        }
        if let Some(id) = new_chunked {
            self.chunked = Some(id);
        }

        // The `Prefill batch` line is printed when the batch's result is processed
        // (`report_prefill_stats`); what it says of the queue is known now.
        let log = self.log_enabled.then(|| {
            // The request between chunks is one of the items (it goes first in every pass).
            let pending_chunk = pending_chunk.unwrap_or_else(|| {
                self.chunked.map_or(0, |id| match self.place(id) {
                    Place::Prefilling { done, input } => u64::from(input - done),
                    _ => 0,
                })
            });
            Box::new(ServerSample {
                at: now,
                kind: StepKind::Prefill,
                running: running_bs,
                queued: self.waiting.len() as u64,
                kv_used_tokens: 0,
                kv_capacity_tokens: self.kv.capacity_tokens(),
                new_seqs: items.len() as u64,
                new_tokens: new_token,
                cached_tokens,
                pending_tokens: self.waiting_tokens + pending_chunk,
                gen_tok_per_s: 0.0,
                input_tok_per_s: 0.0,
                cuda_graph: false,
            })
        });

        // `alloc_for_extend`: the batch's pages at once, evicting from the cache if need be.
        // The admission pass keeps them within what is free, but for a request between
        // chunks: with the budget spent it still takes a whole chunk (`add_chunked`), and when
        // the running requests hold the rest of the pool `alloc_token_slots` raises
        // (`mem_cache/allocation.py`) and the scheduler stops.
        let need_tokens = pages * self.p.page;
        if need_tokens > self.free_tokens() {
            let chunk = (continuing > 0).then(|| (reqs[items[0].id].seq, u64::from(items[0].take)));
            out.out_of_memory = Some(Box::new(self.out_of_memory(need_tokens, chunk)));
            return None;
        }
        self.alloc_evicting(pages);
        // Mixed-style chunked prefill: the running requests decode in the same forward pass if
        // their next tokens fit (`prepare_for_decode` + `mix_with_running`); otherwise they sit
        // this step out — a mixed step never retracts.
        let mut decode_rows = 0;
        if self.p.mixed_chunk && !self.running.is_empty() {
            // Requests the batch in flight finishes by length stay out (overlapped loop).
            if self.set_aside_finishing(reqs) {
                self.batch_is_full = false;
            }
            if !self.running.is_empty() && self.next_step_fits() {
                decode_rows = self.alloc_decode_slots();
            }
        }
        self.counters.prefill_batches += 1;
        // The step costs a prefill over its extend tokens, one per decode row included (the
        // oracle's model of a mixed batch).
        let d = self
            .cost
            .prefill(items.len() as u64 + decode_rows, new_token + decode_rows);
        // A prefill batch replays a breakable CUDA graph when its tokens fit the captured
        // buckets (0.5.23 captures up to 2048 tokens by default on CUDA:
        // `model_executor/cuda_graph_config.py: default_prefill_backend`,
        // `arg_groups/cuda_graph_hook.py: generate_prefill_cuda_graph_batch_sizes`); a mixed
        // batch does not.
        let log = log.map(|mut sample| {
            sample.cuda_graph = decode_rows == 0 && new_token <= PREFILL_GRAPH_MAX_TOKENS;
            sample
        });
        Some((
            InFlight::Prefill {
                items,
                decode_rows,
                log,
            },
            d,
        ))
    }
}
