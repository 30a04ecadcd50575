//! vLLM's prefix caching (`enable_prefix_caching`, on by default in 0.33.0) for a workload whose
//! requests share no prompt prefix: every block's chained hash (`v1/core/kv_cache_utils.py:
//! hash_block_tokens`) is then its own request's, so the only blocks that can ever hit are a
//! preempted request's own full blocks, looked up again at its re-admission. The free queue
//! (`v1/core/kv_cache_utils.py: FreeKVCacheBlockQueue`) is kept as counts, not blocks:
//!
//! * **Free** (`v1/core/block_pool.py: BlockPool.free_blocks`, called with
//!   `reversed(req_blocks)` by `v1/core/single_type_kv_cache_manager.py: free`): a request's
//!   blocks without a hash go to the head of the queue (`prepend_n`, reused first), those with a
//!   hash to its tail (`append_n`), last block first. Unhashed free blocks are interchangeable,
//!   so the head is one count; the hashed blocks of a finished request will never be looked up
//!   (a [`Seg::Hashed`] count); a preempted request's hashed blocks — its leading
//!   `num_cached_block` blocks, `v1/core/single_type_kv_cache_manager.py: cache_blocks` — are a
//!   [`Seg::Own`] segment, its last block nearest the head.
//! * **Allocation** (`BlockPool.get_new_blocks`: `popleft_n`, then `_maybe_evict_cached_block`)
//!   pops from the head: the unhashed blocks, then the segments in queue order. A victim's
//!   blocks go last one first, so what is left of it is always its first `blocks` blocks.
//! * **Lookup** (`v1/core/kv_cache_manager.py: get_computed_blocks`, `FullAttentionManager.
//!   find_longest_cache_hit`): at most `⌊(num_tokens − 1) / block_size⌋` leading blocks, all
//!   still cached; the hit blocks are in the free queue with `ref_cnt` 0, so admission counts
//!   them among the blocks to allocate (`get_num_blocks_to_allocate`: new + evictable) and takes
//!   them off the queue first (`BlockPool.touch`, before `get_new_blocks` in `allocate_slots`).
//!
//! The request's `num_cached_block` is kept in `Seq::hashed` by the scheduler, following each
//! `cache_blocks` call (`allocate_slots`, and under async scheduling `update_from_output`).

use std::collections::VecDeque;

/// A run of hashed free blocks, in queue order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Seg {
    /// Hashed blocks nobody will look up (a finished request's, or a victim's that can no
    /// longer hit).
    Hashed(u64),
    /// A preempted request's first `blocks` blocks, still cached (0: taken back at its
    /// re-admission, or evicted).
    Own { blocks: u64 },
}

impl Seg {
    pub(super) fn len(self) -> u64 {
        match self {
            Seg::Hashed(n) | Seg::Own { blocks: n } => n,
        }
    }
}

/// The free queue as counts: unhashed blocks at the head, then the segments.
#[derive(Clone, Debug, Default)]
pub(super) struct FreeQueue {
    /// Free blocks without a hash (at the head: reused first).
    pub head: u64,
    pub segs: VecDeque<Seg>,
    /// The serial number of `segs[0]` (serials are never reused).
    pub first: u64,
    /// Hashed blocks evicted so far.
    pub evicted: u64,
}

impl FreeQueue {
    /// A pool of `usable` free blocks, none hashed.
    pub fn new(usable: u64) -> Self {
        FreeQueue {
            head: usable,
            ..FreeQueue::default()
        }
    }

    /// Free blocks in the queue.
    #[cfg(any(test, debug_assertions))]
    pub fn len(&self) -> u64 {
        self.head + self.segs.iter().map(|s| s.len()).sum::<u64>()
    }

    /// `get_new_blocks(n)`: pop `n` blocks from the head, evicting hashed ones.
    #[inline]
    pub fn take(&mut self, n: u64) {
        if n <= self.head {
            self.head -= n;
        } else {
            self.take_hashed(n);
        }
    }

    /// `take` past the unhashed blocks.
    fn take_hashed(&mut self, n: u64) {
        let a = n.min(self.head);
        self.head -= a;
        let mut n = n - a;
        while n > 0 {
            let seg = self
                .segs
                .front_mut()
                .expect("invariant: allocation within the free blocks");
            let (Seg::Hashed(k) | Seg::Own { blocks: k }) = seg;
            let t = n.min(*k);
            *k -= t;
            n -= t;
            self.evicted += t;
            if *k == 0 {
                self.pop_front();
            }
        }
        // Leave no empty segment at the front.
        while self.segs.front().is_some_and(|s| s.len() == 0) {
            self.pop_front();
        }
    }

    fn pop_front(&mut self) {
        self.segs.pop_front();
        self.first += 1;
    }

    /// Append a finished request's (or a former victim's) `n` hashed blocks.
    fn push_hashed(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        match self.segs.back_mut() {
            Some(Seg::Hashed(k)) => *k += n,
            _ => self.segs.push_back(Seg::Hashed(n)),
        }
    }

    /// `free` of a finished request holding `held` blocks, the first `hashed` of them hashed.
    pub fn free_finished(&mut self, held: u64, hashed: u64) {
        self.head += held - hashed;
        self.push_hashed(hashed);
    }

    /// `free` of a preempted request: its segment's serial + 1 (0: nothing hashed).
    pub fn free_preempted(&mut self, held: u64, hashed: u64) -> u64 {
        self.head += held - hashed;
        if hashed == 0 {
            return 0;
        }
        self.segs.push_back(Seg::Own { blocks: hashed });
        self.first + self.segs.len() as u64
    }

    /// The blocks still cached of the segment `own` (serial + 1; 0: none).
    pub fn cached(&self, own: u64) -> u64 {
        match own.checked_sub(1 + self.first) {
            Some(i) => self.segs.get(i as usize).map_or(0, |s| s.len()),
            None => 0,
        }
    }

    /// The re-admission of the owner of segment `own`: its first `hit` blocks leave the queue
    /// (`touch`); any rest can never hit again (the request registers new blocks for those
    /// places) and stays where it is as plain hashed blocks.
    pub fn take_back(&mut self, own: u64, hit: u64) {
        let Some(i) = own.checked_sub(1 + self.first) else {
            return;
        };
        if let Some(seg) = self.segs.get_mut(i as usize) {
            let rest = seg.len() - hit;
            *seg = if rest == 0 {
                Seg::Own { blocks: 0 }
            } else {
                Seg::Hashed(rest)
            };
        }
        while self.segs.front().is_some_and(|s| s.len() == 0) {
            self.pop_front();
        }
    }

    /// The owner of segment `own` finished while waiting: its blocks can no longer hit.
    pub fn orphan(&mut self, own: u64) {
        let Some(i) = own.checked_sub(1 + self.first) else {
            return;
        };
        if let Some(seg) = self.segs.get_mut(i as usize) {
            *seg = Seg::Hashed(seg.len());
        }
    }
}

/// A view of the queue after a fast-forward run's pops and pushes, without touching it: the
/// head count, how far the pops went into the queue's segments and then into the segments the
/// run appended (`pushed`, owned by the caller).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct View {
    pub head: u64,
    /// Segments of the queue wholly popped, and blocks popped of the next one.
    pub seg: usize,
    pub used: u64,
    /// The same for the appended segments.
    pub app: usize,
    pub app_used: u64,
    /// Hashed blocks evicted.
    pub evicted: u64,
}

impl View {
    pub fn new(q: &FreeQueue) -> Self {
        View {
            head: q.head,
            ..View::default()
        }
    }

    /// Pop `n` blocks.
    #[inline]
    pub fn take(&mut self, q: &FreeQueue, pushed: &[u64], n: u64) {
        if n <= self.head {
            self.head -= n;
        } else {
            self.take_hashed(q, pushed, n);
        }
    }

    fn take_hashed(&mut self, q: &FreeQueue, pushed: &[u64], n: u64) {
        let a = n.min(self.head);
        self.head -= a;
        let mut n = n - a;
        while n > 0 && self.seg < q.segs.len() {
            let k = q.segs[self.seg].len() - self.used;
            let t = n.min(k);
            self.used += t;
            n -= t;
            self.evicted += t;
            if self.used == q.segs[self.seg].len() {
                self.seg += 1;
                self.used = 0;
            }
        }
        while n > 0 {
            let k = pushed[self.app] - self.app_used;
            let t = n.min(k);
            self.app_used += t;
            n -= t;
            self.evicted += t;
            if self.app_used == pushed[self.app] {
                self.app += 1;
                self.app_used = 0;
            }
        }
    }

    /// Blocks still cached of the queue's segment `own` (serial + 1).
    pub fn cached(&self, q: &FreeQueue, own: u64) -> u64 {
        let Some(i) = own.checked_sub(1 + q.first) else {
            return 0;
        };
        let i = i as usize;
        match i.cmp(&self.seg) {
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Equal => q.segs.get(i).map_or(0, |s| s.len() - self.used),
            std::cmp::Ordering::Greater => q.segs.get(i).map_or(0, |s| s.len()),
        }
    }

    /// Blocks still cached of the appended segment `k`.
    pub fn cached_pushed(&self, q: &FreeQueue, pushed: &[u64], k: usize) -> u64 {
        if self.seg < q.segs.len() || k > self.app {
            pushed[k]
        } else if k == self.app {
            pushed[k] - self.app_used
        } else {
            0
        }
    }

    /// Apply the view to the queue: the segments popped go, the appended ones join the tail.
    /// Returns the serial + 1 of each appended segment (0: wholly evicted).
    pub fn apply(&self, q: &mut FreeQueue, pushed: &[u64], serials: &mut Vec<u64>) {
        let reached = self.seg >= q.segs.len();
        q.head = self.head;
        q.evicted += self.evicted;
        for _ in 0..self.seg {
            q.pop_front();
        }
        if self.used > 0 {
            let (Seg::Hashed(k) | Seg::Own { blocks: k }) = q
                .segs
                .front_mut()
                .expect("invariant: a segment partly popped");
            *k -= self.used;
        }
        serials.clear();
        for (k, &n) in pushed.iter().enumerate() {
            let left = match k.cmp(&self.app) {
                _ if !reached => n,
                std::cmp::Ordering::Greater => n,
                std::cmp::Ordering::Equal => n - self.app_used,
                std::cmp::Ordering::Less => 0,
            };
            if left == 0 {
                serials.push(0);
            } else {
                q.segs.push_back(Seg::Own { blocks: left });
                serials.push(q.first + q.segs.len() as u64);
            }
        }
        while q.segs.front().is_some_and(|s| s.len() == 0) {
            q.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_victims_blocks_are_evicted_last_block_first_after_the_unhashed_ones() {
        let mut q = FreeQueue::new(10);
        q.take(10);
        // A victim held 6 blocks, 4 hashed: 2 go to the head, 4 to the tail.
        let own = q.free_preempted(6, 4);
        assert_eq!(q.cached(own), 4);
        // A finished request's 3 blocks, 2 hashed, behind it: 3 unhashed blocks at the head
        // go first, then the victim's last block.
        q.free_finished(3, 2);
        q.take(4);
        assert_eq!(q.cached(own), 3);
        assert_eq!(q.evicted, 1);
        q.take_back(own, 3);
        assert_eq!((q.head, q.segs.len()), (0, 1));
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn the_view_of_a_run_applies_as_the_same_pops_and_pushes() {
        let mut q = FreeQueue::new(4);
        let a = q.free_preempted(0, 0);
        assert_eq!(a, 0);
        q.take(4);
        let own = q.free_preempted(5, 3);
        let mut real = q.clone();
        let mut v = View::new(&q);
        let mut pushed = Vec::new();
        v.take(&q, &pushed, 3);
        real.take(3);
        pushed.push(2);
        v.head += 1;
        let own2 = real.free_preempted(3, 2);
        v.take(&q, &pushed, 2);
        real.take(2);
        assert_eq!(v.cached(&q, own), real.cached(own));
        assert_eq!(v.cached_pushed(&q, &pushed, 0), real.cached(own2));
        let mut serials = Vec::new();
        v.apply(&mut q, &pushed, &mut serials);
        assert_eq!(
            (q.head, q.len(), q.evicted),
            (real.head, real.len(), real.evicted)
        );
        assert_eq!(q.cached(serials[0]), real.cached(own2));
    }
}
