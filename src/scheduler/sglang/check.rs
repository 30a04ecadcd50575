//! The debug-build check: after every scheduler call, recompute the incremental bookkeeping
//! (KV sums, page buckets, the prefilling count, the pool's use) from scratch and compare.

use super::{InFlight, Place, Sglang};
use crate::kv::pages_for;
use crate::request::{Phase, ReqId, Requests};

impl Sglang {
    /// Panics, naming the invariant, if the incremental bookkeeping disagrees with a recount.
    pub(super) fn debug_check(&self, reqs: &Requests) {
        let p = self.p.page;
        let mut pages = 0u64;
        let mut kv_sum = 0u64;
        let mut need = 0u64;
        let decode_bearing = |b: Option<&InFlight>| {
            u64::from(matches!(
                b,
                Some(InFlight::Decode { .. })
                    | Some(InFlight::Prefill {
                        decode_rows: 1..,
                        ..
                    })
            ))
        };
        // Decode slots scheduled and not processed: in the step-by-step loop, the batch in
        // flight's. (The overlapped loop's running requests differ in what they hold ahead.)
        let pending = decode_bearing(self.in_flight.as_ref());
        for &id in &self.running {
            let r = &reqs[id];
            assert!(
                r.phase == Phase::Running && matches!(self.place(id), Place::Running { .. }),
                "invariant: running requests are Running"
            );
            assert_ne!(
                self.stays[id.0 as usize],
                super::NOT_RUNNING,
                "invariant: running requests have a stay"
            );
            let kv = self.running_kv(id);
            let held = u64::from(r.prompt_tokens) + u64::from(self.output_tokens(id, r)) - 1;
            if self.p.overlap {
                assert!(
                    (held..=held + 2).contains(&kv),
                    "invariant: a running request holds prompt + output − 1 KV slots and at most two ahead"
                );
            } else {
                assert_eq!(
                    kv,
                    held + pending,
                    "invariant: a running request holds prompt + output − 1 KV slots, plus the slot of a decode in flight"
                );
            }
            kv_sum += kv;
            pages += pages_for(kv, p) - u64::from(self.protected(id)) / p;
            if kv % p == 0 {
                need += 1;
            }
        }
        assert_eq!(
            kv_sum, self.running_kv_tokens,
            "invariant: running KV tokens add up"
        );
        let (out_less_since, max_new) = self.running.iter().fold((0i64, 0u64), |(o, m), &id| {
            let Place::Running {
                since_step,
                out_then,
                max_new,
                ..
            } = self.place(id)
            else {
                unreachable!("checked above");
            };
            (
                o + i64::from(out_then) - since_step as i64,
                m + u64::from(max_new),
            )
        });
        assert_eq!(
            (out_less_since, max_new),
            (self.out_less_since, self.max_new_sum),
            "invariant: the running batch's output and max_new_tokens sums add up"
        );
        if self.in_flight.is_none() {
            assert_eq!(
                need,
                self.pages_needed_next_step(),
                "invariant: page buckets match"
            );
        }
        for &(id, kv) in &self.leaving {
            pages += pages_for(kv, p) - u64::from(self.protected(id)) / p;
        }
        // Requests being prefilled hold `done` tokens — and the tokens of the batches decided
        // for them and not yet counted in `done`: in the step-by-step loop the batch in flight's,
        // in the overlapped loop (which counts a batch when launched) the one decided ahead.
        let ahead = if self.p.overlap {
            self.planned.as_ref().map(|(b, _)| b)
        } else {
            self.in_flight.as_ref()
        };
        let mut held: Vec<(ReqId, u64)> = Vec::new();
        let mut note = |id: ReqId, extra: u64| match held.iter_mut().find(|h| h.0 == id) {
            Some(h) => h.1 += extra,
            None => held.push((id, extra)),
        };
        for b in [
            self.in_flight.as_ref(),
            self.planned.as_ref().map(|(b, _)| b),
        ]
        .into_iter()
        .flatten()
        {
            if let InFlight::Prefill { items, .. } = b {
                for it in items {
                    note(it.id, 0);
                }
            }
        }
        if let Some(InFlight::Prefill { items, .. }) = ahead {
            for it in items {
                note(it.id, u64::from(it.take));
            }
        }
        if let Some(c) = self.chunked {
            note(c, 0);
        }
        let mut prefilling = 0u64;
        for (id, extra) in held {
            if let Place::Prefilling { done, .. } = self.place(id) {
                prefilling += 1;
                pages += pages_for(u64::from(done) + extra, p) - u64::from(self.protected(id)) / p;
            }
        }
        assert_eq!(prefilling, self.prefilling, "invariant: prefilling count");
        if let Some(c) = self.cache.as_ref() {
            let tree = c.tree.total_tokens();
            assert_eq!(
                tree,
                c.tree.evictable_tokens() + c.tree.protected_tokens(),
                "invariant: the cache's tokens are evictable or protected"
            );
            pages += tree / p;
        }
        assert_eq!(
            pages * p,
            self.kv.used_tokens(),
            "invariant: KV pool use equals the requests' pages"
        );
        assert!(
            self.kv.used_tokens() <= self.kv.capacity_tokens(),
            "invariant: KV use within the pool"
        );
    }
}
