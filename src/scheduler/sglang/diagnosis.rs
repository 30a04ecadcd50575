//! Why a run cannot go on, in SGLang's terms: a queue whose head is never admitted
//! ([`Scheduler::stuck_reason`](crate::scheduler::Scheduler::stuck_reason)), or a prefill batch
//! that needs more KV than is free, where SGLang itself raises out of memory.

use super::Sglang;
use crate::request::Requests;
use crate::scheduler::OutOfMemory;

impl Sglang {
    /// Why the run cannot go on: idle, with the queue's head never admitted (SGLang's own
    /// rules, in its terms).
    pub(super) fn why_stuck(&self, reqs: &Requests) -> Option<String> {
        let &head = self.waiting.front()?;
        let r = &reqs[head];
        let generated = u64::from(r.out_tokens);
        let input = u64::from(r.prompt_tokens) + generated;
        let pool = self.kv.capacity_tokens();
        if r.ignore_eos && !self.p.radix_cache {
            // `add_one_req_ignore_eos`: alone on the server, it is admitted only if the pool
            // after its input and a page still holds its remaining tokens with
            // IGNORE_EOS_RESERVE_TOKENS to spare.
            let left = u64::from(r.max_new_tokens).saturating_sub(generated);
            return Some(format!(
                "the request at the head of the waiting queue is ignore_eos and the radix cache is \
                 disabled: SGLang admits it only if the pool of {pool} tokens, less its input \
                 ({input} tokens) and a page ({}), holds its remaining {left} tokens with more than 1 \
                 to spare — it never does, so SGLang would wait forever too (ask for at most {} \
                 new tokens, or leave the radix cache on)",
                self.p.page,
                left.saturating_sub(1)
            ));
        }
        let need = input
            + u64::from(r.max_new_tokens)
                .saturating_sub(generated)
                .min(self.p.clip)
            + self.p.page;
        Some(format!(
            "the request at the head of the waiting queue needs {need} KV tokens to be admitted \
             (prompt {} + generated {generated} + min(max_new_tokens {}, clip {}) + one page of {}), \
             but the pool holds only {pool} with nothing running",
            r.prompt_tokens,
            r.max_new_tokens,
            self.p.clip,
            self.p.page,
        ))
    }

    /// What SGLang does when a prefill batch's `need` tokens are more than the pool has free:
    /// `alloc_token_slots` raises and the scheduler stops. `chunk`: the request between chunks
    /// (its number in the workload) and its chunk, when it is in the batch (the only way the admission pass lets a batch
    /// outgrow the pool).
    pub(super) fn out_of_memory(&self, need: u64, chunk: Option<(u64, u64)>) -> OutOfMemory {
        let how = match chunk {
            Some((seq, take)) => format!(
                "request {seq} (in send order, from 0), between chunks, takes its next chunk of {take} tokens although \
                 the admission budget is spent — SGLang then gives it a whole chunk \
                 (`PrefillBudget.available_chunk_tokens`, `mem_cache/prefill_budget.py`) — while the \
                 running requests hold the rest of the pool{}; ",
                if self.p.mixed_chunk {
                    " (with mixed chunks they keep decoding, and growing, while a prompt is chunked)"
                } else {
                    ""
                }
            ),
            None => String::new(),
        };
        OutOfMemory {
            need_tokens: need,
            free_tokens: self.free_tokens(),
            reason: format!(
                "{how}SGLang's `alloc_token_slots` (`mem_cache/allocation.py`) raises \"Out of memory. \
                 Try to lower your batch size.\" and the server stops"
            ),
        }
    }
}
