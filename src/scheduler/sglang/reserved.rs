//! The running requests' admission reservations (`managers/schedule_policy.py:
//! PrefillAdder._get_running_request_total_token_offset`) kept as exact integer sums, so that
//! an admission pass needs no scan of the running batch: each request reserves
//! `min(max_new − generated, clip)` tokens, at `new_token_ratio` or (`ignore_eos`) at 1.
//!
//! While a request runs, its output grows by one per decode step: with `k = since_step +
//! max_new − out_then` its reservation at decode step `s` is `clamp(k − s, 0, clip)` — `clip`
//! until step `k − clip`, then falling by one per step until step `k`, then 0. The requests are
//! counted by class and by which of the three they are in; the steps at which one moves on wait
//! in a heap, applied when the sums are next read or changed — only those it can reach before
//! its output reaches its target, when it leaves (usually none: a request rarely comes within
//! `clip` of `max_new_tokens`). O(log batch) per request and change, never a scan.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Place, Sglang};
use crate::request::ReqId;

/// The sums, per class (0: reserves at `new_token_ratio`, 1: `ignore_eos`, at 1).
#[derive(Debug, Default)]
pub(super) struct Reserved {
    /// Requests whose reservation is still `clip`.
    clipped: [u64; 2],
    /// Requests whose reservation falls by one per step, and Σ of their `k`.
    falling: [u64; 2],
    falling_k: [u64; 2],
    /// The decode step the counts are for (every change due by it applied).
    at: u64,
    /// Changes to come; entries of past stays, or of a `k` since changed, are dropped when they
    /// surface.
    changes: BinaryHeap<Reverse<Change>>,
}

/// `(step, 0: starts falling | 1: reaches 0, stay, id, k)`.
type Change = (u64, u8, u64, ReqId, u64);

impl Sglang {
    /// `k` of `id`, a running request whose place is `place` (see the module docs), its stay,
    /// and its class.
    #[inline]
    fn reserve_key(&self, id: ReqId, place: Place) -> Option<(u64, u64, usize)> {
        match place {
            Place::Running {
                since_step,
                out_then,
                max_new,
                ignore_eos,
                ..
            } => Some((
                since_step + u64::from(max_new.saturating_sub(out_then)),
                self.stay(id),
                usize::from(ignore_eos),
            )),
            _ => None,
        }
    }

    /// Apply the changes due by the current decode step.
    #[inline]
    fn sync_reserved(&mut self) {
        let s = self.decode_step;
        debug_assert!(
            s >= self.reserved.at,
            "invariant: the decode step never goes back"
        );
        self.reserved.at = s;
        if self.reserved.changes.peek().is_some_and(|e| e.0 .0 <= s) {
            self.apply_reserved_changes();
        }
    }

    fn apply_reserved_changes(&mut self) {
        let s = self.decode_step;
        while let Some(&Reverse((step, kind, stay, id, k))) = self.reserved.changes.peek() {
            if step > s {
                break;
            }
            self.reserved.changes.pop();
            let Some((key, now_stay, c)) = self.reserve_key(id, self.place(id)) else {
                continue;
            };
            if now_stay != stay || key != k {
                continue;
            }
            let r = &mut self.reserved;
            if kind == 0 {
                r.clipped[c] -= 1;
                r.falling[c] += 1;
                r.falling_k[c] += k;
                // It reaches 0 at step k, if it runs that long: known only to `count_reserved`,
                // so the entry is kept (the filter is for the heap's size, not its truth).
                r.changes.push(Reverse((k, 1, stay, id, k)));
            } else {
                r.falling[c] -= 1;
                r.falling_k[c] -= k;
            }
        }
    }

    /// Count the token a running request of class `class` just received outside a decode step
    /// (its first, in the overlapped loop), where that is simple: it joined at `since_step`
    /// with `out_then` output tokens, that token now counted, and stops at `target`. If it
    /// reserves `clip` before and after the token, or its reservation falls by one per step
    /// before and after (its `k` one less), with no change to come before it leaves, the counts
    /// are updated and `true` returned; else nothing is done and the request must be counted
    /// anew ([`count_reserved`](Self::count_reserved)).
    #[inline]
    pub(super) fn count_one_more(
        &mut self,
        since_step: u64,
        out_then: u32,
        max_new: u32,
        target: u32,
        class: usize,
    ) -> bool {
        let k = since_step + u64::from(max_new.saturating_sub(out_then));
        let last = since_step + u64::from(target.saturating_sub(out_then)) + 1;
        let (s, clip) = (self.decode_step, self.p.clip);
        if k > s + clip {
            // Clipped after, and before (`k` was one more): it stands, unless a change is due.
            return k - clip > last;
        }
        // Falling after (`s < k`) and before (`k + 1 ≤ s + clip`); the counts those of this
        // step, changes due applied.
        if s < k && k < s + clip && k > last {
            self.sync_reserved();
            self.reserved.falling_k[class] -= 1;
            return true;
        }
        false
    }

    /// Count a running request (its place just set) whose output stops at `target` tokens
    /// (`Some`), or stop counting one (`None`; its place still set).
    #[inline]
    pub(super) fn count_reserved(&mut self, id: ReqId, target: Option<u32>) {
        self.count_reserved_at(id, self.place(id), target);
    }

    /// [`count_reserved`](Self::count_reserved) of `id`, whose place is `place`.
    #[inline(always)]
    pub(super) fn count_reserved_at(&mut self, id: ReqId, place: Place, target: Option<u32>) {
        self.sync_reserved();
        let (k, stay, c) =
            (self.reserve_key(id, place)).expect("invariant: only running requests reserve");
        let join = target.is_some();
        // The last decode step at which it can be running: its output (counted without a
        // first token still to come) reaches its target by then.
        let last = match (place, target) {
            (
                Place::Running {
                    since_step,
                    out_then,
                    ..
                },
                Some(target),
            ) => since_step + u64::from(target.saturating_sub(out_then)) + 1,
            _ => 0,
        };
        let (s, clip) = (self.decode_step, self.p.clip);
        let r = &mut self.reserved;
        let sign = |x: &mut u64, by: u64| match join {
            true => *x += by,
            false => *x -= by,
        };
        if k > s + clip {
            sign(&mut r.clipped[c], 1);
            if join && k - clip <= last {
                r.changes.push(Reverse((k - clip, 0, stay, id, k)));
            }
        } else if k > s {
            sign(&mut r.falling[c], 1);
            sign(&mut r.falling_k[c], k);
            if join && k <= last {
                r.changes.push(Reverse((k, 1, stay, id, k)));
            }
        }
        // Entries of past stays leave only when they surface: rebuild now and then so that the
        // heap stays the size of the batch.
        if join && self.reserved.changes.len() > 8 * self.running.len() + 1024 {
            let heap = std::mem::take(&mut self.reserved.changes).into_vec();
            let current = heap.into_iter().filter(|Reverse((_, _, stay, id, k))| {
                self.reserve_key(*id, self.place(*id))
                    .is_some_and(|(key, st, _)| st == *stay && key == *k)
            });
            self.reserved.changes = current.collect();
        }
    }

    /// Σ over the running batch of `min(max_new − generated, clip)`: of the requests reserving
    /// at `new_token_ratio`, and of the `ignore_eos` ones.
    #[inline]
    pub(super) fn reserved_tokens(&mut self) -> [u64; 2] {
        self.sync_reserved();
        let (s, clip) = (self.decode_step, self.p.clip);
        let r = &self.reserved;
        [0, 1].map(|c| r.clipped[c] * clip + r.falling_k[c] - r.falling[c] * s)
    }
}
