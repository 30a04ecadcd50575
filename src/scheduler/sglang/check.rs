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
        // While a decode-bearing batch is in flight its slot is already allocated.
        let pending = u64::from(matches!(
            self.in_flight,
            Some(InFlight::Decode { .. })
                | Some(InFlight::Prefill {
                    decode_rows: 1..,
                    ..
                })
        ));
        for &id in &self.running {
            let r = &reqs[id];
            assert!(
                r.phase == Phase::Running && matches!(self.place(id), Place::Running { .. }),
                "invariant: running requests are Running"
            );
            let kv = self.running_kv(id);
            let out = u64::from(self.output_tokens(id, r));
            assert_eq!(
                kv,
                u64::from(r.prompt_tokens) + out - 1 + pending,
                "invariant: a running request holds prompt + output − 1 KV slots, plus the slot of a decode in flight"
            );
            kv_sum += kv;
            pages += pages_for(kv, p);
            if kv % p == 0 {
                need += 1;
            }
        }
        assert_eq!(
            kv_sum, self.running_kv_tokens,
            "invariant: running KV tokens add up"
        );
        if self.in_flight.is_none() {
            assert_eq!(
                need,
                self.pages_needed_next_step(),
                "invariant: page buckets match"
            );
        }
        let mut prefilling = 0u64;
        let mut seen_chunked = false;
        let mut count_prefill = |id: ReqId| {
            if let Place::Prefilling { done, .. } = self.place(id) {
                prefilling += 1;
                pages += pages_for(u64::from(done), p);
            }
        };
        if let Some(InFlight::Prefill { items, .. }) = &self.in_flight {
            for it in items {
                seen_chunked |= Some(it.id) == self.chunked;
                count_prefill(it.id);
            }
        }
        if let Some(c) = self.chunked {
            if !seen_chunked {
                count_prefill(c);
            }
        }
        // Pages of a batch in flight were allocated for `done + take`, not `done`: count them.
        if let Some(InFlight::Prefill { items, .. }) = &self.in_flight {
            for it in items {
                if let Place::Prefilling { done, .. } = self.place(it.id) {
                    pages -= pages_for(u64::from(done), p);
                    pages += pages_for(u64::from(done + it.take), p);
                }
            }
        }
        assert_eq!(prefilling, self.prefilling, "invariant: prefilling count");
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
