//! vLLM's prefix caching (`--enable-prefix-caching`, 0.33.0), block by block: the block pool
//! with its free queue (`v1/core/block_pool.py: BlockPool`, `v1/core/kv_cache_utils.py:
//! FreeKVCacheBlockQueue`), the hash → block map (`BlockHashToBlockMap`), each request's blocks
//! (`v1/core/single_type_kv_cache_manager.py`) and the lookup (`find_longest_cache_hit`, called
//! from `v1/core/kv_cache_manager.py: get_computed_blocks`).
//!
//! * **Block identity.** vLLM chains a hash over each full block's token ids and its parent's
//!   hash (`kv_cache_utils.py: hash_block_tokens`). Requests of a group share exactly their first
//!   `prefix_tokens` ids and nothing else, so block `j` of a request is the group's block `j` when
//!   it lies wholly inside the prefix, and the request's own block `j` otherwise (its hash chains
//!   over its own tokens). A [`Key`] names that content; equal keys are equal hashes.
//! * **Lookup** (`find_longest_cache_hit`): the longest run of leading full blocks whose keys are
//!   cached, at most `⌊(num_tokens − 1) / block_size⌋` blocks (the last token is always computed);
//!   of several blocks with one hash, the first registered (`get_one_block`).
//! * **Admission arithmetic** (`get_num_blocks_to_allocate`): the blocks the request lacks, plus
//!   the hit blocks that sit in the free queue (taking them makes them used).
//! * **Allocation** (`allocate_slots`): hit blocks are touched (off the free queue, `ref_cnt` + 1);
//!   new blocks come from the head of the free queue, evicting their hash
//!   (`_maybe_evict_cached_block`); then the blocks that the step fills, up to the known tokens,
//!   are registered (`cache_full_blocks`), so a request considered later, even in the same step,
//!   finds them.
//! * **Free** (`free`, on finish and on preemption): a request's blocks in reverse order
//!   (`reversed(req_blocks)`), each with `ref_cnt` − 1; of those at 0, the blocks without a hash
//!   go to the head of the free queue (`prepend_n`: reused first) and the hashed ones to its
//!   tail, keeping their hash (`append_n`). Eviction pops the head: blocks without a hash first,
//!   then the hashed ones least recently freed first, a request's last blocks before its first.

use std::collections::HashMap;

use crate::request::SharedPrefix;

/// The content of a full block (its chained hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// Block `index` of a group's shared prefix.
    Shared { group: u32, index: u32 },
    /// Block `index` of one request's sequence (the request by its scheduler uid, which it keeps
    /// through preemptions).
    Own { uid: u64, index: u32 },
}

/// No block (the end of the free queue's links).
const NONE: u32 = u32::MAX;

/// `KVCacheBlock`.
#[derive(Clone, Copy, Debug)]
struct Block {
    ref_cnt: u32,
    key: Option<Key>,
    /// Free-queue links.
    prev: u32,
    next: u32,
}

/// A request's blocks (`req_to_blocks`, `num_cached_block`) and what names its content.
#[derive(Clone, Debug, Default)]
struct Held {
    blocks: Vec<u32>,
    /// Leading blocks registered in the map.
    cached: usize,
    uid: u64,
    prefix: Option<SharedPrefix>,
}

/// The block pool of one full-attention KV group with prefix caching on.
#[derive(Clone, Debug)]
pub(super) struct PrefixPool {
    block: u64,
    blocks: Vec<Block>,
    head: u32,
    tail: u32,
    free: u64,
    map: HashMap<Key, Vec<u32>>,
    held: Vec<Held>,
    /// Cached blocks evicted so far.
    pub evicted: u64,
}

impl PrefixPool {
    /// A pool of `usable` blocks of `block` tokens, all free, in id order (vLLM's null block 0
    /// is not among them).
    pub fn new(usable: u64, block: u64) -> Self {
        let n = usable as u32;
        let blocks = (0..n)
            .map(|i| Block {
                ref_cnt: 0,
                key: None,
                prev: if i == 0 { NONE } else { i - 1 },
                next: if i + 1 == n { NONE } else { i + 1 },
            })
            .collect();
        PrefixPool {
            block,
            blocks,
            head: if n == 0 { NONE } else { 0 },
            tail: if n == 0 { NONE } else { n - 1 },
            free: usable,
            map: HashMap::new(),
            held: Vec::new(),
            evicted: 0,
        }
    }

    /// `get_num_free_blocks`: free blocks, cached or not.
    pub fn free_blocks(&self) -> u64 {
        self.free
    }

    /// Blocks the request at arena slot `i` holds.
    pub fn held(&self, i: usize) -> u64 {
        self.held.get(i).map_or(0, |h| h.blocks.len() as u64)
    }

    /// A new request at arena slot `i`.
    pub fn arrive(&mut self, i: usize, uid: u64, prefix: Option<SharedPrefix>) {
        if i >= self.held.len() {
            self.held.resize(i + 1, Held::default());
        }
        self.held[i] = Held {
            blocks: Vec::new(),
            cached: 0,
            uid,
            prefix,
        };
    }

    fn key(&self, i: usize, index: u32) -> Key {
        let h = &self.held[i];
        match h.prefix {
            Some(p) if (u64::from(index) + 1) * self.block <= u64::from(p.tokens) => Key::Shared {
                group: p.group,
                index,
            },
            _ => Key::Own { uid: h.uid, index },
        }
    }

    /// `get_computed_blocks`: the cached blocks the request at slot `i` with `num_tokens` known
    /// tokens starts with.
    pub fn lookup(&self, i: usize, num_tokens: u64) -> Vec<u32> {
        let most = num_tokens.saturating_sub(1) / self.block;
        let mut hit = Vec::new();
        for j in 0..most as u32 {
            match self.map.get(&self.key(i, j)).and_then(|v| v.first()) {
                Some(&b) => hit.push(b),
                None => break,
            }
        }
        hit
    }

    /// `get_num_blocks_to_allocate`: the blocks that holding `tokens` tokens with the hit `hit`
    /// takes from the free queue.
    pub fn to_allocate(&self, i: usize, tokens: u64, hit: &[u32]) -> u64 {
        let required = tokens.div_ceil(self.block);
        let new = required.saturating_sub(hit.len() as u64 + self.held(i));
        let evictable = hit
            .iter()
            .filter(|&&b| self.blocks[b as usize].ref_cnt == 0)
            .count() as u64;
        new + evictable
    }

    fn unlink(&mut self, b: u32) {
        let Block { prev, next, .. } = self.blocks[b as usize];
        match prev {
            NONE => self.head = next,
            p => self.blocks[p as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            n => self.blocks[n as usize].prev = prev,
        }
        self.free -= 1;
    }

    fn push_tail(&mut self, b: u32) {
        let blk = &mut self.blocks[b as usize];
        blk.prev = self.tail;
        blk.next = NONE;
        match self.tail {
            NONE => self.head = b,
            t => self.blocks[t as usize].next = b,
        }
        self.tail = b;
        self.free += 1;
    }

    fn push_head(&mut self, b: u32) {
        let blk = &mut self.blocks[b as usize];
        blk.next = self.head;
        blk.prev = NONE;
        match self.head {
            NONE => self.tail = b,
            h => self.blocks[h as usize].prev = b,
        }
        self.head = b;
        self.free += 1;
    }

    /// `allocate_slots` once its checks passed: touch the hit (a new admission's), take new
    /// blocks for `slots` tokens, register the full blocks of the first `cache_to` tokens.
    pub fn allocate(&mut self, i: usize, hit: &[u32], slots: u64, cache_to: u64) {
        for &b in hit {
            if self.blocks[b as usize].ref_cnt == 0 {
                self.unlink(b);
            }
            self.blocks[b as usize].ref_cnt += 1;
        }
        if !hit.is_empty() {
            debug_assert!(self.held[i].blocks.is_empty(), "invariant: hits are new");
            self.held[i].blocks.extend_from_slice(hit);
            self.held[i].cached = hit.len();
        }
        let want = slots.div_ceil(self.block) as usize;
        while self.held[i].blocks.len() < want {
            let b = self.head;
            assert!(b != NONE, "invariant: allocation within the free blocks");
            self.unlink(b);
            if let Some(k) = self.blocks[b as usize].key.take() {
                self.forget(k, b);
                self.evicted += 1;
            }
            self.blocks[b as usize].ref_cnt = 1;
            self.held[i].blocks.push(b);
        }
        self.cache(i, cache_to);
    }

    /// `cache_blocks`: register the request's full blocks among its first `tokens` tokens.
    pub fn cache(&mut self, i: usize, tokens: u64) {
        let full = ((tokens / self.block) as usize).min(self.held[i].blocks.len());
        for j in self.held[i].cached..full {
            let k = self.key(i, j as u32);
            let b = self.held[i].blocks[j];
            debug_assert!(self.blocks[b as usize].key.is_none());
            self.blocks[b as usize].key = Some(k);
            self.map.entry(k).or_default().push(b);
        }
        if full > self.held[i].cached {
            self.held[i].cached = full;
        }
    }

    fn forget(&mut self, k: Key, b: u32) {
        if let Some(v) = self.map.get_mut(&k) {
            v.retain(|&x| x != b);
            if v.is_empty() {
                self.map.remove(&k);
            }
        }
    }

    /// `free`: the request's blocks, last first, back to the free queue when unreferenced.
    pub fn free(&mut self, i: usize) {
        let blocks = std::mem::take(&mut self.held[i].blocks);
        // Unhashed blocks go to the front (reused first, in this order), hashed ones to the
        // tail (`prepend_n`, `append_n`).
        let mut first = Vec::new();
        for &b in blocks.iter().rev() {
            let blk = &mut self.blocks[b as usize];
            blk.ref_cnt -= 1;
            if blk.ref_cnt == 0 {
                if blk.key.is_none() {
                    first.push(b);
                } else {
                    self.push_tail(b);
                }
            }
        }
        for &b in first.iter().rev() {
            self.push_head(b);
        }
        self.held[i].cached = 0;
        // Keep the buffer for the request's next admission.
        self.held[i].blocks = blocks;
        self.held[i].blocks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grouped(tokens: u32) -> Option<SharedPrefix> {
        Some(SharedPrefix { group: 0, tokens })
    }

    #[test]
    fn a_group_member_hits_the_full_blocks_of_the_prefix_as_soon_as_they_are_allocated() {
        let mut p = PrefixPool::new(100, 16);
        p.arrive(0, 0, grouped(40));
        p.arrive(1, 1, grouped(40));
        assert!(p.lookup(0, 100).is_empty());
        p.allocate(0, &[], 64, 64);
        // Blocks 0 and 1 lie inside the 40-token prefix; block 2 holds its end.
        let hit = p.lookup(1, 90);
        assert_eq!(hit.len(), 2);
        assert_eq!(p.to_allocate(1, 90, &hit), 6 - 2);
        p.allocate(1, &hit, 90, 90);
        assert_eq!(p.free_blocks(), 100 - 4 - 4);
    }

    #[test]
    fn a_freed_partial_block_is_reused_before_any_cached_one() {
        let mut p = PrefixPool::new(4, 16);
        p.arrive(0, 0, None);
        // 40 tokens: two full blocks registered, the third partial.
        p.allocate(0, &[], 40, 40);
        p.free(0);
        p.arrive(1, 1, None);
        // The partial block is at the front of the free queue: taking one evicts nothing.
        p.allocate(1, &[], 1, 0);
        assert_eq!(p.evicted, 0);
        // Request 0 (own blocks, 41 tokens known) still finds both of its full blocks.
        assert_eq!(p.lookup(0, 41).len(), 2);
    }

    #[test]
    fn freed_blocks_stay_hittable_until_reused_tail_first() {
        let mut p = PrefixPool::new(4, 16);
        p.arrive(0, 0, grouped(64));
        p.allocate(0, &[], 64, 64);
        p.free(0);
        assert_eq!(p.free_blocks(), 4);
        p.arrive(1, 1, grouped(64));
        // At most ⌊(65 − 1) / 16⌋ = 4 blocks; all cached and free: taking them makes them used.
        let hit = p.lookup(1, 65);
        assert_eq!(hit.len(), 4);
        assert_eq!(p.to_allocate(1, 65, &hit), 1 + 4);
        // A stranger takes one block: the prefix's last block goes first.
        p.arrive(2, 2, None);
        p.allocate(2, &[], 1, 0);
        assert_eq!(p.evicted, 1);
        assert_eq!(p.lookup(1, 65).len(), 3);
    }
}
