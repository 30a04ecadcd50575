//! The radix cache in the scheduler: what each request holds in the tree ([`Hold`]) and the
//! moments SGLang touches the tree — the match at admission (`Req.init_next_round_input` →
//! `mem_cache/common.py: match_kv_cache`), the publication of computed KV after each prefill
//! (`mem_cache/common.py: checkpoint_kv_cache` → `mem_cache/unified_radix_cache.py:
//! checkpoint_into_tree`), the release of a finished request, which inserts its sequence, and of a
//! retracted one, which does not (`mem_cache/common.py: release_kv_cache`,
//! `managers/schedule_batch.py: release_req`), and eviction when an allocation needs room
//! (`mem_cache/allocator/base.py: evict_to_free_tokens`).
//!
//! Active only when the radix cache is on and the workload shares prefixes: otherwise nothing
//! ever matches, and a finished request's KV counts as free exactly as if it were freed.

use super::radix::{NodeId, RadixTree, Seq, ROOT};
use super::settings::SchedulePolicy;
use super::Sglang;
use crate::kv::pages_for;
use crate::request::{ReqId, Requests};

/// `IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD` and `IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD`
/// (`managers/schedule_policy.py`, both 32): a waiting request that matched at most this many
/// tokens in the tree and shares at least this many with an earlier waiting request is put last
/// by `lpm`.
const IN_BATCH_THRESHOLD_TOKENS: u32 = 32;

/// `WAITING_QUEUE_PREFIX_MATCH_MAX` (`managers/schedule_policy.py`): above this many waiting
/// requests `lpm` orders like `fcfs`; the refresh touches at most this many.
const WAITING_QUEUE_PREFIX_MATCH_MAX: usize = 128;

/// `WAITING_PREFIX_REFRESH_INTERVAL` (`managers/schedule_policy.py`): cache-agnostic policies
/// touch the waiting requests' cached prefixes every this many passes.
const WAITING_PREFIX_REFRESH_INTERVAL: u64 = 32;

/// What one request holds in the tree.
#[derive(Clone, Copy, Debug)]
pub(super) struct Hold {
    /// Its token identity.
    pub seq: Seq,
    /// `req.prefix_len`: input tokens matched at the latest match.
    pub prefix: u32,
    /// `req.last_node`: where that match ended.
    pub node: NodeId,
    /// Whether it holds a lock on `node` (`req.lock`).
    pub locked: bool,
    /// `req.kv.cache_protected_len`: the first tokens of its KV row, which the tree owns.
    pub protected: u32,
}

/// The tree and the requests' holds.
#[derive(Clone, Debug)]
pub(super) struct Cache {
    pub tree: RadixTree,
    holds: Vec<Option<Hold>>,
    /// `_waiting_prefix_refresh_calls`.
    refresh_calls: u64,
}

impl Cache {
    pub fn new(page: u64) -> Self {
        Cache {
            tree: RadixTree::new(page),
            holds: Vec::new(),
            refresh_calls: 0,
        }
    }

    pub fn hold(&self, id: ReqId) -> Option<Hold> {
        self.holds.get(id.0 as usize).copied().flatten()
    }

    pub fn hold_mut(&mut self, id: ReqId) -> &mut Hold {
        self.holds[id.0 as usize]
            .as_mut()
            .expect("invariant: a request known to the cache has a hold")
    }

    fn set(&mut self, id: ReqId, h: Option<Hold>) {
        let i = id.0 as usize;
        if i >= self.holds.len() {
            self.holds.resize(i + 1, None);
        }
        self.holds[i] = h;
    }
}

impl Sglang {
    /// A request enters the scheduler: its sequence is known to the cache.
    #[inline]
    pub(super) fn cache_arrive(&mut self, id: ReqId, reqs: &Requests) {
        if let Some(c) = self.cache.as_mut() {
            let r = &reqs[id];
            c.set(
                id,
                Some(Hold {
                    seq: Seq::new(r.seq, r.prefix),
                    prefix: 0,
                    node: ROOT,
                    locked: false,
                    protected: 0,
                }),
            );
        }
    }

    /// KV tokens counted as free: the pool's free tokens and, with the cache, the tokens no
    /// lock holds (`available_size() + evictable_size()`).
    #[inline]
    pub(super) fn free_tokens(&self) -> u64 {
        self.kv.available_tokens() + self.cache.as_ref().map_or(0, |c| c.tree.evictable_tokens())
    }

    /// The tokens SGLang's `token usage` counts: the pool's use less what the tree could evict.
    #[inline]
    pub(super) fn usage_tokens(&self) -> u64 {
        self.kv.used_tokens() - self.cache.as_ref().map_or(0, |c| c.tree.evictable_tokens())
    }

    /// Allocate `pages`, evicting unlocked leaves first if the pool lacks them
    /// (`alloc_token_slots` / `alloc_for_extend` → `evict_for_alloc`).
    #[inline]
    pub(super) fn alloc_evicting(&mut self, pages: u64) {
        if let Some(c) = self.cache.as_mut() {
            c.tree.evict_until(&mut self.kv, pages * self.p.page);
        }
        self.kv.alloc_pages(pages);
    }

    /// `match_kv_cache` for a waiting request: the longest cached prefix of its input (at most
    /// input − 1 tokens, `Req._compute_max_prefix_len`). Returns the tokens matched.
    pub(super) fn match_waiting(&mut self, id: ReqId, reqs: &Requests) -> u32 {
        let Some(c) = self.cache.as_mut() else {
            return 0;
        };
        let r = &reqs[id];
        let input = r.prompt_tokens + r.out_tokens;
        let seq = c.hold_mut(id).seq;
        let (n, node) = c.tree.match_prefix(&seq, input.saturating_sub(1));
        let h = c.hold_mut(id);
        h.prefix = n;
        h.node = node;
        n
    }

    /// `SchedulePolicy.calc_priority` with the cache: `lpm` and `dfs-weight` match every
    /// waiting request and order by it; the other policies refresh the waiting requests'
    /// prefixes every `WAITING_PREFIX_REFRESH_INTERVAL` passes (`_touch_waiting_prefixes`),
    /// the queue's head last.
    pub(super) fn cache_priority(&mut self, reqs: &Requests) {
        let Some(c) = self.cache.as_mut() else {
            return;
        };
        let cache_aware = match self.p.policy {
            SchedulePolicy::Lpm => self.waiting.len() <= WAITING_QUEUE_PREFIX_MATCH_MAX,
            SchedulePolicy::DfsWeight => true,
            _ => false,
        };
        if !cache_aware {
            if self.waiting.is_empty() {
                return;
            }
            let refresh = c.refresh_calls % WAITING_PREFIX_REFRESH_INTERVAL == 0;
            c.refresh_calls += 1;
            if refresh {
                let head: Vec<ReqId> = self
                    .waiting
                    .iter()
                    .take(WAITING_QUEUE_PREFIX_MATCH_MAX)
                    .copied()
                    .collect();
                for &id in head.iter().rev() {
                    let r = &reqs[id];
                    let seq = c.hold_mut(id).seq;
                    c.tree.match_prefix(&seq, r.prompt_tokens + r.out_tokens);
                }
            }
            return;
        }
        let ids: Vec<ReqId> = self.waiting.iter().copied().collect();
        // `_compute_prefix_matches`, with the waiting queue's own tree for `lpm`'s in-batch
        // check: a request that shares at least the threshold with an earlier one put in it is
        // deprioritized.
        let mut deprioritized = vec![false; ids.len()];
        let mut in_queue: Vec<Seq> = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let n = self.match_waiting(id, reqs);
            if self.p.policy != SchedulePolicy::Lpm || n > IN_BATCH_THRESHOLD_TOKENS {
                continue;
            }
            let c = self.cache.as_ref().expect("invariant: checked above");
            let seq = c
                .hold(id)
                .expect("invariant: waiting requests have holds")
                .seq;
            let input = reqs[id].prompt_tokens + reqs[id].out_tokens;
            let shared = in_queue
                .iter()
                .map(|s| s.common_tokens(&seq, input))
                .max()
                .unwrap_or(0);
            if shared >= IN_BATCH_THRESHOLD_TOKENS {
                deprioritized[i] = true;
            } else {
                in_queue.push(seq);
            }
        }
        let c = self.cache.as_ref().expect("invariant: checked above");
        let order: Vec<usize> = match self.p.policy {
            // `_sort_by_longest_prefix`: a stable sort by matched length, the deprioritized last.
            SchedulePolicy::Lpm => {
                let mut order: Vec<usize> = (0..ids.len()).collect();
                order.sort_by_key(|&i| {
                    if deprioritized[i] {
                        (1, 0)
                    } else {
                        (0, -i64::from(c.hold(ids[i]).map_or(0, |h| h.prefix)))
                    }
                });
                order
            }
            // `_sort_by_dfs_weight`.
            _ => {
                let last: Vec<NodeId> = ids
                    .iter()
                    .map(|&id| c.hold(id).map_or(ROOT, |h| h.node))
                    .collect();
                c.tree.dfs_weight_order(&last)
            }
        };
        self.waiting = order.into_iter().map(|i| ids[i]).collect();
    }

    /// Lock the node a waiting request matched (`PrefillAdder._lock_node` while its admission is
    /// weighed, `req.lock` once committed).
    pub(super) fn lock_matched(&mut self, id: ReqId) {
        if let Some(c) = self.cache.as_mut() {
            let node = c.hold(id).expect("invariant: holds").node;
            c.tree.lock(node);
            c.hold_mut(id).locked = true;
        }
    }

    /// Undo [`lock_matched`](Self::lock_matched) for a request not admitted.
    pub(super) fn unlock_matched(&mut self, id: ReqId) {
        if let Some(c) = self.cache.as_mut() {
            let h = *c.hold_mut(id);
            if h.locked {
                c.tree.unlock(h.node);
                c.hold_mut(id).locked = false;
            }
        }
    }

    /// Cached tokens a waiting request found at its latest match (0 without the cache).
    #[inline]
    pub(super) fn matched(&self, id: ReqId) -> u32 {
        self.cache
            .as_ref()
            .and_then(|c| c.hold(id))
            .map_or(0, |h| h.prefix)
    }

    /// An admitted request's cached prefix, which becomes the tree's part of its KV row
    /// (`cache_protected_len = prefix_len`).
    #[inline]
    pub(super) fn admit_cached(&mut self, id: ReqId) -> u32 {
        let Some(c) = self.cache.as_mut() else {
            return 0;
        };
        let h = c.hold_mut(id);
        h.protected = h.prefix;
        h.prefix
    }

    /// The tokens of a request's KV row the tree owns (its pages there are not its own).
    #[cfg(debug_assertions)]
    pub(super) fn protected(&self, id: ReqId) -> u32 {
        self.cache
            .as_ref()
            .and_then(|c| c.hold(id))
            .map_or(0, |h| h.protected)
    }

    /// `checkpoint_into_tree`: publish the first `upto` tokens of its sequence (whole pages),
    /// free its copies of what the tree already held, split at the prompt's end if the key
    /// goes beyond it, and move its lock to where the insert ended.
    #[inline]
    pub(super) fn checkpoint(&mut self, id: ReqId, upto: u32, reqs: &Requests) {
        if self.cache.is_some() {
            self.checkpoint_cached(id, upto, reqs);
        }
    }

    /// [`checkpoint`](Self::checkpoint) with the cache on.
    #[inline(never)]
    fn checkpoint_cached(&mut self, id: ReqId, upto: u32, reqs: &Requests) {
        let page = self.p.page;
        let Some(c) = self.cache.as_mut() else {
            return;
        };
        let h = *c.hold_mut(id);
        let aligned = (u64::from(upto) / page * page) as u32;
        if aligned == 0 {
            return;
        }
        let ins = c.tree.insert(&h.seq, aligned);
        let dup = ins.walked.saturating_sub(h.protected);
        self.kv.free_pages(u64::from(dup) / page);
        let prompt = (u64::from(reqs[id].prompt_tokens) / page * page) as u32;
        if prompt > 0 && prompt < aligned {
            c.tree.insert(&h.seq, prompt);
        }
        if h.locked {
            c.tree.unlock(h.node);
        }
        c.tree.lock(ins.last);
        let hm = c.hold_mut(id);
        hm.node = ins.last;
        hm.locked = true;
        hm.protected = aligned;
    }

    /// Release a request's KV row of `kv` tokens: a finished one first publishes its first
    /// `publish` tokens, those whose KV is written ([`checkpoint`](Self::checkpoint)); the
    /// tree's part stays, the rest is freed, the lock released. Without the cache the whole row
    /// is freed.
    #[inline]
    pub(super) fn release_kv(&mut self, id: ReqId, kv: u64, publish: Option<u32>, reqs: &Requests) {
        if self.cache.is_none() {
            self.kv.free_pages(self.pages(kv));
        } else {
            self.release_cached(id, kv, publish, reqs);
        }
    }

    /// [`release_kv`](Self::release_kv) with the cache on.
    #[inline(never)]
    fn release_cached(&mut self, id: ReqId, kv: u64, publish: Option<u32>, reqs: &Requests) {
        let finished = publish.is_some();
        if let Some(upto) = publish {
            self.checkpoint(id, upto, reqs);
        }
        let page = self.p.page;
        let c = self.cache.as_mut().expect("invariant: checked above");
        let h = *c.hold_mut(id);
        self.kv
            .free_pages(pages_for(kv, page) - u64::from(h.protected) / page);
        if h.locked {
            c.tree.unlock(h.node);
        }
        let hm = c.hold_mut(id);
        hm.locked = false;
        hm.protected = 0;
        hm.prefix = 0;
        hm.node = ROOT;
        if finished {
            c.set(id, None);
        }
    }

    /// A retracted request's release (`managers/schedule_batch.py: release_req`): its row
    /// freed without publishing it (`release_kv_cache(checkpoint=False)`), then unlocked leaves
    /// evicted until `remaining × SGLANG_RETRACT_DECODE_STEPS` tokens are free
    /// (`evict_from_tree_cache`). What it published after its prefill stays in the tree,
    /// evictable; retraction comes when little is, so that eviction usually takes it, and the
    /// re-admitted request finds only the prefixes others kept (as in the recorded traces).
    pub(super) fn release_retracted(
        &mut self,
        id: ReqId,
        kv: u64,
        remaining: u64,
        reqs: &Requests,
    ) {
        self.release_kv(id, kv, None, reqs);
        if let Some(c) = self.cache.as_mut() {
            c.tree
                .evict_until(&mut self.kv, remaining * super::RETRACT_DECODE_STEPS);
        }
    }
}
