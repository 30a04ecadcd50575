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
    /// Of `segs[0]`, the blocks already evicted (popped from the head one by one; the
    /// segment leaves when none is left).
    used: u64,
    /// While a fast-forward turn is tried (`fast_forward.rs`): the queue as the turn found it,
    /// to be restored if the turn is not taken.
    journal: Option<Journal>,
    /// The journal's change list, kept from one turn to the next.
    changes: Vec<Change>,
}

/// The scalars of the queue when a journal was opened.
#[derive(Clone, Copy, Debug)]
struct Journal {
    head: u64,
    first: u64,
    evicted: u64,
    used: u64,
}

/// One change to the segments, undone in reverse order.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// The front segment, as it was, left.
    PopFront(Seg),
    /// A segment joined the back.
    PushBack,
    /// The segment at this index was this.
    Set(usize, Seg),
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
        self.head + self.segs.iter().map(|s| s.len()).sum::<u64>() - self.used
    }

    /// Blocks still in segment `i`.
    fn left(&self, i: usize) -> u64 {
        let n = self.segs[i].len();
        if i == 0 {
            n - self.used
        } else {
            n
        }
    }

    /// Note every change from now on, so that [`FreeQueue::undo`] can restore the queue as it
    /// is now (a fast-forward tries a turn on the queue itself, then takes it or not).
    pub fn open(&mut self) {
        self.journal = Some(Journal {
            head: self.head,
            first: self.first,
            evicted: self.evicted,
            used: self.used,
        });
        self.changes.clear();
    }

    /// Keep the changes since [`FreeQueue::open`].
    pub fn close(&mut self) {
        self.journal = None;
    }

    /// Undo the changes since [`FreeQueue::open`].
    pub fn undo(&mut self) {
        let j = self
            .journal
            .take()
            .expect("invariant: undo with an open journal");
        while let Some(c) = self.changes.pop() {
            match c {
                Change::PopFront(seg) => self.segs.push_front(seg),
                Change::PushBack => _ = self.segs.pop_back(),
                Change::Set(i, seg) => self.segs[i] = seg,
            }
        }
        (self.head, self.first, self.evicted, self.used) = (j.head, j.first, j.evicted, j.used);
    }

    fn note(&mut self, c: Change) {
        if self.journal.is_some() {
            self.changes.push(c);
        }
    }

    fn set(&mut self, i: usize, seg: Seg) {
        let old = std::mem::replace(&mut self.segs[i], seg);
        self.note(Change::Set(i, old));
    }

    fn push_back(&mut self, seg: Seg) {
        self.segs.push_back(seg);
        self.note(Change::PushBack);
    }

    /// `get_new_blocks(n)`: pop `n` blocks from the head, evicting hashed ones.
    #[inline]
    pub fn take(&mut self, n: u64) {
        if n <= self.head {
            self.head -= n;
            return;
        }
        // Usually the rest comes out of the front segment, which keeps blocks.
        let rest = n - self.head;
        if let Some(front) = self.segs.front() {
            if rest < front.len() - self.used {
                self.head = 0;
                self.used += rest;
                self.evicted += rest;
                return;
            }
        }
        self.take_hashed(n);
    }

    /// `take` past the unhashed blocks.
    #[inline(never)]
    fn take_hashed(&mut self, n: u64) {
        let a = n.min(self.head);
        self.head -= a;
        let mut n = n - a;
        while n > 0 {
            debug_assert!(
                !self.segs.is_empty(),
                "invariant: allocation within the free blocks"
            );
            let t = n.min(self.left(0));
            n -= t;
            self.evicted += t;
            self.used += t;
            if self.left(0) == 0 {
                self.pop_front();
            }
        }
        self.drop_empty_front();
    }

    /// Leave no empty segment at the front.
    fn drop_empty_front(&mut self) {
        while !self.segs.is_empty() && self.left(0) == 0 {
            self.pop_front();
        }
    }

    fn pop_front(&mut self) {
        if let Some(seg) = self.segs.pop_front() {
            self.note(Change::PopFront(seg));
        }
        self.used = 0;
        self.first += 1;
    }

    /// Append a finished request's (or a former victim's) `n` hashed blocks.
    fn push_hashed(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        match self.segs.back() {
            Some(&Seg::Hashed(k)) => self.set(self.segs.len() - 1, Seg::Hashed(k + n)),
            _ => self.push_back(Seg::Hashed(n)),
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
        self.push_back(Seg::Own { blocks: hashed });
        self.first + self.segs.len() as u64
    }

    /// The index in `segs` of the segment `own` (serial + 1), if it is still there.
    fn index(&self, own: u64) -> Option<usize> {
        let i = own.checked_sub(1 + self.first)? as usize;
        (i < self.segs.len()).then_some(i)
    }

    /// The blocks still cached of the segment `own` (serial + 1; 0: none).
    #[inline]
    pub fn cached(&self, own: u64) -> u64 {
        self.index(own).map_or(0, |i| self.left(i))
    }

    /// The blocks of the segment `own` (serial + 1; 0: none) still cached once `n` more blocks
    /// are taken ([`FreeQueue::take`]: the unhashed ones first, then the segments in order),
    /// without taking them.
    pub fn cached_after(&self, own: u64, n: u64) -> u64 {
        let Some(i) = self.index(own) else {
            return 0;
        };
        let mut rest = n.saturating_sub(self.head);
        for k in 0..i {
            if rest == 0 {
                break;
            }
            rest = rest.saturating_sub(self.left(k));
        }
        self.left(i).saturating_sub(rest)
    }

    /// The re-admission of the owner of segment `own`: its first `hit` blocks leave the queue
    /// (`touch`); any rest can never hit again (the request registers new blocks for those
    /// places) and stays where it is as plain hashed blocks.
    pub fn take_back(&mut self, own: u64, hit: u64) {
        let Some(i) = self.index(own) else {
            return;
        };
        let rest = self.left(i) - hit;
        self.set(
            i,
            if rest == 0 {
                Seg::Own { blocks: 0 }
            } else {
                Seg::Hashed(rest)
            },
        );
        if i == 0 {
            self.used = 0;
        }
        self.drop_empty_front();
    }

    /// The owner of segment `own` finished while waiting: its blocks can no longer hit.
    pub fn orphan(&mut self, own: u64) {
        if let Some(i) = self.index(own) {
            let n = self.segs[i].len();
            self.set(i, Seg::Hashed(n));
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
    fn taking_back_a_later_victims_blocks_keeps_what_the_front_victim_lost() {
        let mut q = FreeQueue::new(7);
        q.take(7);
        // Two victims' hashed blocks, a's at the front; the next two blocks taken are a's
        // last two.
        let a = q.free_preempted(4, 4);
        let b = q.free_preempted(3, 3);
        q.take(2);
        assert_eq!((q.cached(a), q.cached(b), q.evicted), (2, 3, 2));
        // b is re-admitted and takes its 3 back: a still has only its first 2.
        q.take_back(b, 3);
        assert_eq!((q.cached(a), q.cached(b), q.len()), (2, 0, 2));
        q.take(1);
        assert_eq!((q.cached(a), q.evicted), (1, 3));
    }

    #[test]
    fn cached_after_is_what_taking_the_blocks_leaves() {
        // Unhashed blocks at the head, then a victim's segment, a finished request's hashed
        // blocks, a segment taken back (empty), another victim's.
        let mut q = FreeQueue::new(8);
        q.take(8);
        let a = q.free_preempted(5, 3);
        q.free_finished(2, 2);
        let b = q.free_preempted(3, 3);
        q.take_back(b, 3);
        let c = q.free_preempted(4, 2);
        q.take(1);
        let free = q.len();
        for own in [a, b, c, 0, c + 1] {
            for n in 0..=free {
                let mut taken = q.clone();
                taken.take(n);
                assert_eq!(
                    q.cached_after(own, n),
                    taken.cached(own),
                    "own {own}, n {n}"
                );
            }
        }
    }

    #[test]
    fn a_journal_undoes_pops_pushes_and_changes_in_the_middle() {
        let mut q = FreeQueue::new(4);
        q.take(4);
        let a = q.free_preempted(5, 3);
        q.free_finished(2, 2);
        let b = q.free_preempted(4, 4);
        let before = q.clone();
        q.open();
        // Evict past the head into the first two segments, take back part of the third,
        // append to the back and merge a finished request's hashed blocks into it.
        q.take(2 + 3 + 1);
        assert_eq!((q.cached(a), q.evicted), (0, 4));
        q.take_back(b, 2);
        q.free_finished(1, 1);
        let c = q.free_preempted(2, 2);
        q.free_finished(3, 1);
        assert_eq!(q.cached(c), 2);
        q.undo();
        assert_eq!(
            (q.head, q.first, q.evicted, &q.segs),
            (before.head, before.first, before.evicted, &before.segs)
        );
        assert_eq!((q.cached(a), q.cached(b)), (3, 4));
        // A closed journal keeps the changes.
        q.open();
        q.take(3);
        q.close();
        assert_eq!((q.cached(a), q.evicted), (2, 1));
    }
}
