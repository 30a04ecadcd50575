//! SGLang's radix tree of cached KV (`mem_cache/unified_radix_cache.py` with its one FULL
//! component, `mem_cache/unified_cache/unified_tree_core.py` and
//! `unified_cache/components/full.py`; the default Rust tree core gives the same results),
//! node for node, for prompts that share at most one prefix: their group's.
//!
//! A request's tokens are its group's shared prefix, then tokens of its own ([`Seq`]): two
//! sequences agree exactly on the shorter of their common group's prefix, or entirely when they
//! are the same request's. A node holds a page-aligned run of one sequence's tokens. What is kept
//! as SGLang keeps it:
//!
//! * **matching** (`_match_prefix_helper`): walk down while the next page matches; a match that
//!   ends inside a node splits it (`_split_node`), and the matched path's access times are set
//!   to a fresh tick, each ancestor a little older (`_match_post_processor`);
//! * **inserting** (`begin_insert` and its walk): every walked node is touched, a partly matched
//!   node split, the rest added as a new leaf; the walk's length is what the tree already held;
//! * **locks** (`acquire_component_lock` / `release_component_lock`): a lock counts on the node
//!   and every ancestor; a node no lock holds is *evictable*, the others *protected*;
//! * **eviction** (`evict_for_alloc`, the FULL walk): the unlocked leaf least recently used
//!   first, whole nodes at a time, until the allocator has what was asked for; a parent left
//!   childless becomes a candidate at once.
//!
//! Access times follow SGLang's global counter (`get_and_increase_time_counter`): a new node takes
//! two ticks (access and creation time), a touch one, a split three (the new parent's two and the
//! child's refresh). Only their order matters, so a time is the tick shifted left by 20 bits, and
//! the match's "ancestor a little older" (`cur_time -= 0.00001`) subtracts 1 per level.

use std::collections::{BTreeSet, HashMap};

use crate::kv::KvPool;

/// A node of the tree (index into the arena; [`ROOT`] is the root).
pub(super) type NodeId = u32;

/// The root: holds no tokens, never evicted.
pub(super) const ROOT: NodeId = 0;

/// No group.
const NO_GROUP: u32 = u32::MAX;

/// The token identity of one request's sequence: its group's shared prefix (the first `shared`
/// tokens, identical across the group), then its own tokens (prompt remainder and outputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Seq {
    /// The request's send order (unique per request).
    pub uid: u64,
    /// Its group, or `NO_GROUP`.
    group: u32,
    /// The group's prefix length (0 without a group).
    shared: u32,
}

/// What the first page at a depth is: the group's (shared by the group) or one request's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Edge {
    Group(u32),
    Own(u64),
}

impl Seq {
    /// A request's sequence.
    pub fn new(uid: u64, prefix: Option<crate::request::SharedPrefix>) -> Self {
        match prefix {
            Some(p) => Seq {
                uid,
                group: p.group,
                shared: p.tokens,
            },
            None => Seq {
                uid,
                group: NO_GROUP,
                shared: 0,
            },
        }
    }

    /// The page starting at `depth` (`RadixKey.child_key_at`).
    fn edge(&self, depth: u32, page: u32) -> Edge {
        if self.group != NO_GROUP && depth + page <= self.shared {
            Edge::Group(self.group)
        } else {
            Edge::Own(self.uid)
        }
    }

    /// Tokens the two sequences share from their start, at most `limit` (the waiting queue's
    /// own tree in `_compute_prefix_matches`, whose pages are single tokens).
    pub fn common_tokens(&self, other: &Seq, limit: u32) -> u32 {
        if self.uid == other.uid {
            limit
        } else if self.group != NO_GROUP && self.group == other.group {
            limit.min(self.shared.min(other.shared))
        } else {
            0
        }
    }

    /// Tokens from `depth` on, at most `len`, in which `self` and `other` agree, in whole pages
    /// (`RadixKey.match_at`).
    fn common(&self, other: &Seq, depth: u32, len: u32, page: u32) -> u32 {
        let n = if self.uid == other.uid {
            len
        } else if self.group != NO_GROUP && self.group == other.group {
            len.min(self.shared.min(other.shared).saturating_sub(depth))
        } else {
            0
        };
        n / page * page
    }
}

#[derive(Clone, Debug)]
struct Node {
    parent: NodeId,
    /// The sequence whose tokens the node holds, from `start` for `len` tokens.
    owner: Seq,
    start: u32,
    len: u32,
    /// Children in insertion order (Python's dict order; `dfs_weight_order` reads it).
    children: Vec<NodeId>,
    lock_ref: u32,
    /// `last_access_time` (see the module docs).
    time: u64,
}

/// What an insert found and left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Inserted {
    /// Tokens of the key the tree already held (`InsertResult.prefix_len`).
    pub walked: u32,
    /// The node the key ends on (`last_device_node`).
    pub last: NodeId,
}

/// The tree. Invariant: `evictable + protected` = the tokens of every node but the root.
#[derive(Clone, Debug)]
pub(super) struct RadixTree {
    page: u32,
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    /// `(parent, first page) → child`: lookups only (children's order is in the nodes).
    child_of: HashMap<(NodeId, Edge), NodeId>,
    /// Unlocked childless nodes (`evictable_device_leaves`), by access time.
    leaves: BTreeSet<(u64, NodeId)>,
    evictable: u64,
    protected: u64,
    clock: u64,
    /// Tokens evicted so far.
    evicted: u64,
}

impl RadixTree {
    /// An empty tree over pages of `page` tokens.
    pub fn new(page: u64) -> Self {
        let root = Node {
            parent: ROOT,
            owner: Seq::new(u64::MAX, None),
            start: 0,
            len: 0,
            children: Vec::new(),
            lock_ref: 0,
            time: 0,
        };
        RadixTree {
            page: page as u32,
            nodes: vec![root],
            free: Vec::new(),
            child_of: HashMap::new(),
            leaves: BTreeSet::new(),
            evictable: 0,
            protected: 0,
            clock: 1,
            evicted: 0,
        }
    }

    /// Tokens no lock holds (`evictable_size`): counted as free by admission, evicted on demand.
    pub fn evictable_tokens(&self) -> u64 {
        self.evictable
    }

    /// Tokens held by locks (`protected_size`).
    #[cfg(any(debug_assertions, test))]
    pub fn protected_tokens(&self) -> u64 {
        self.protected
    }

    /// Tokens evicted so far.
    pub fn evicted_tokens(&self) -> u64 {
        self.evicted
    }

    /// A fresh access time.
    fn tick(&mut self) -> u64 {
        let t = self.clock << 20;
        self.clock += 1;
        t
    }

    /// The node's token count from the root to its end.
    #[cfg(test)]
    pub fn depth_end(&self, node: NodeId) -> u32 {
        let n = &self.nodes[node as usize];
        n.start + n.len
    }

    fn is_leaf(&self, id: NodeId) -> bool {
        let n = &self.nodes[id as usize];
        id != ROOT && n.lock_ref == 0 && n.children.is_empty()
    }

    /// Keep the leaf set right for `id` after a change of its lock, children or time.
    fn refresh_leaf(&mut self, id: NodeId, old_time: u64) {
        self.leaves.remove(&(old_time, id));
        if self.is_leaf(id) {
            self.leaves.insert((self.nodes[id as usize].time, id));
        }
    }

    fn set_time(&mut self, id: NodeId, time: u64) {
        let old = self.nodes[id as usize].time;
        self.nodes[id as usize].time = time;
        self.refresh_leaf(id, old);
    }

    fn lookup(&self, parent: NodeId, seq: &Seq, depth: u32) -> Option<NodeId> {
        self.child_of
            .get(&(parent, seq.edge(depth, self.page)))
            .copied()
    }

    fn edge_of(&self, id: NodeId) -> Edge {
        let n = &self.nodes[id as usize];
        n.owner.edge(n.start, self.page)
    }

    /// A new node (`UnifiedTreeNode.__init__`: two ticks, the first its access time).
    fn alloc(&mut self, node: Node) -> NodeId {
        let time = self.tick();
        self.tick();
        let node = Node { time, ..node };
        match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        }
    }

    /// `_split_node`: cut `child` after `at` tokens; returns the new parent (the first part).
    fn split(&mut self, child: NodeId, at: u32) -> NodeId {
        let c = self.nodes[child as usize].clone();
        let edge = self.edge_of(child);
        let parent = self.alloc(Node {
            parent: c.parent,
            owner: c.owner,
            start: c.start,
            len: at,
            children: vec![child],
            lock_ref: c.lock_ref,
            time: 0,
        });
        {
            let n = &mut self.nodes[child as usize];
            n.parent = parent;
            n.start += at;
            n.len -= at;
        }
        let slot = self.nodes[c.parent as usize]
            .children
            .iter()
            .position(|&x| x == child)
            .expect("invariant: a node is among its parent's children");
        self.nodes[c.parent as usize].children[slot] = parent;
        self.child_of.insert((c.parent, edge), parent);
        let child_edge = self.edge_of(child);
        self.child_of.insert((parent, child_edge), child);
        let t = self.tick();
        self.set_time(child, t);
        parent
    }

    /// `_add_new_node`: a new unlocked leaf under `parent` with `len` tokens of `seq` from
    /// `start`.
    fn add_leaf(&mut self, parent: NodeId, seq: Seq, start: u32, len: u32) -> NodeId {
        let id = self.alloc(Node {
            parent,
            owner: seq,
            start,
            len,
            children: Vec::new(),
            lock_ref: 0,
            time: 0,
        });
        let edge = self.edge_of(id);
        self.nodes[parent as usize].children.push(id);
        self.child_of.insert((parent, edge), id);
        self.evictable += u64::from(len);
        let t = self.nodes[id as usize].time;
        self.refresh_leaf(id, t);
        let pt = self.nodes[parent as usize].time;
        self.refresh_leaf(parent, pt);
        id
    }

    /// `match_prefix` of the first `limit` tokens of `seq` (page-aligned here): the tokens found
    /// and the deepest node reached. Splits the node a match ends in and refreshes the path.
    pub fn match_prefix(&mut self, seq: &Seq, limit: u32) -> (u32, NodeId) {
        let limit = limit / self.page * self.page;
        if limit == 0 {
            return (0, ROOT);
        }
        let (mut node, mut depth) = (ROOT, 0);
        while depth < limit {
            let Some(child) = self.lookup(node, seq, depth) else {
                break;
            };
            let c = &self.nodes[child as usize];
            let m = c
                .owner
                .common(seq, depth, c.len.min(limit - depth), self.page);
            if m < c.len {
                node = self.split(child, m);
                depth += m;
                break;
            }
            node = child;
            depth += m;
        }
        // `_match_post_processor`: the matched node is the newest, each ancestor a little older.
        let mut t = self.tick();
        let mut x = node;
        while x != ROOT {
            self.set_time(x, t);
            t -= 1;
            x = self.nodes[x as usize].parent;
        }
        (depth, node)
    }

    /// `insert` of the first `len` tokens of `seq` (page-aligned here).
    pub fn insert(&mut self, seq: &Seq, len: u32) -> Inserted {
        let len = len / self.page * self.page;
        self.tick(); // the root is touched
        let (mut node, mut depth) = (ROOT, 0);
        if len == 0 {
            return Inserted {
                walked: 0,
                last: ROOT,
            };
        }
        while depth < len {
            let Some(child) = self.lookup(node, seq, depth) else {
                break;
            };
            let t = self.tick();
            self.set_time(child, t);
            let c = &self.nodes[child as usize];
            let m = c
                .owner
                .common(seq, depth, c.len.min(len - depth), self.page);
            node = if m < c.len {
                self.split(child, m)
            } else {
                child
            };
            depth += m;
            if m == 0 {
                break;
            }
        }
        let last = if depth < len {
            self.add_leaf(node, *seq, depth, len - depth)
        } else {
            node
        };
        Inserted {
            walked: depth,
            last,
        }
    }

    /// Lock `node` and its ancestors (`inc_lock_ref`).
    pub fn lock(&mut self, node: NodeId) {
        let mut x = node;
        while x != ROOT {
            let n = &mut self.nodes[x as usize];
            if n.lock_ref == 0 {
                let len = u64::from(n.len);
                self.evictable -= len;
                self.protected += len;
                let t = n.time;
                self.leaves.remove(&(t, x));
            }
            self.nodes[x as usize].lock_ref += 1;
            x = self.nodes[x as usize].parent;
        }
    }

    /// Release a lock taken with [`lock`](Self::lock) (`dec_lock_ref`).
    pub fn unlock(&mut self, node: NodeId) {
        let mut x = node;
        while x != ROOT {
            let n = &mut self.nodes[x as usize];
            assert!(
                n.lock_ref > 0,
                "invariant: unlocking a node that is not locked"
            );
            n.lock_ref -= 1;
            if n.lock_ref == 0 {
                let len = u64::from(n.len);
                self.evictable += len;
                self.protected -= len;
                let t = self.nodes[x as usize].time;
                self.refresh_leaf(x, t);
            }
            x = self.nodes[x as usize].parent;
        }
    }

    /// `evict_for_alloc`: evict unlocked leaves, least recently used first, until `kv` has
    /// `tokens` free (or nothing is evictable). Returns the tokens evicted.
    pub fn evict_until(&mut self, kv: &mut KvPool, tokens: u64) -> u64 {
        let mut evicted = 0;
        while kv.available_tokens() < tokens {
            let Some((_, id)) = self.leaves.pop_first() else {
                break;
            };
            let n = self.nodes[id as usize].clone();
            let edge = self.edge_of(id);
            kv.free_pages(u64::from(n.len / self.page));
            self.evictable -= u64::from(n.len);
            evicted += u64::from(n.len);
            let siblings = &mut self.nodes[n.parent as usize].children;
            siblings.retain(|&x| x != id);
            self.child_of.remove(&(n.parent, edge));
            self.nodes[id as usize].children = Vec::new();
            self.free.push(id);
            let pt = self.nodes[n.parent as usize].time;
            self.refresh_leaf(n.parent, pt);
        }
        self.evicted += evicted;
        evicted
    }

    /// `_dfs_weight_order`: the order of requests whose matches end at `last` (one node per
    /// waiting request) — a depth-first walk, heavier subtrees (more waiting requests below)
    /// first, ties in insertion order, a node's own requests after its subtree's.
    pub fn dfs_weight_order(&self, last: &[NodeId]) -> Vec<usize> {
        let mut at: HashMap<NodeId, Vec<usize>> = HashMap::new();
        for (i, &n) in last.iter().enumerate() {
            at.entry(n).or_default().push(i);
        }
        // Subtree weights, children before parents.
        let mut weight: HashMap<NodeId, usize> = HashMap::new();
        let mut stack = vec![(ROOT, false)];
        while let Some((n, visited)) = stack.pop() {
            let node = &self.nodes[n as usize];
            if visited {
                let own = at.get(&n).map_or(0, Vec::len);
                let below: usize = node.children.iter().map(|c| weight[c]).sum();
                weight.insert(n, own + below);
                continue;
            }
            stack.push((n, true));
            stack.extend(node.children.iter().rev().map(|&c| (c, false)));
        }
        let mut order = Vec::with_capacity(last.len());
        let mut stack = vec![(ROOT, false)];
        while let Some((n, visited)) = stack.pop() {
            if visited {
                order.extend(at.get(&n).into_iter().flatten());
                continue;
            }
            let mut children = self.nodes[n as usize].children.clone();
            children.sort_by_key(|c| std::cmp::Reverse(weight[c]));
            stack.push((n, true));
            stack.extend(children.iter().rev().map(|&c| (c, false)));
        }
        order
    }

    /// Tokens in the tree (every node), for the debug check.
    #[cfg(any(debug_assertions, test))]
    pub fn total_tokens(&self) -> u64 {
        let mut sum = 0u64;
        let mut stack = vec![ROOT];
        while let Some(n) = stack.pop() {
            let node = &self.nodes[n as usize];
            sum += u64::from(node.len);
            stack.extend(node.children.iter().copied());
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::SharedPrefix;

    fn grouped(uid: u64, tokens: u32) -> Seq {
        Seq::new(uid, Some(SharedPrefix { group: 0, tokens }))
    }

    #[test]
    fn a_group_member_matches_the_prefix_another_published_and_splits_its_node() {
        let mut kv = KvPool::new(10_000, 1);
        let mut t = RadixTree::new(1);
        let (a, b) = (grouped(0, 300), grouped(1, 300));
        // a's prompt of 500 tokens is published as one node.
        kv.alloc_pages(500);
        let ins = t.insert(&a, 500);
        assert_eq!(ins.walked, 0);
        assert_eq!(t.evictable_tokens(), 500);
        // b (prompt 400) matches a's first 300 tokens: a's node splits there.
        let (n, node) = t.match_prefix(&b, 399);
        assert_eq!(n, 300);
        assert_eq!(t.depth_end(node), 300);
        t.lock(node);
        assert_eq!((t.evictable_tokens(), t.protected_tokens()), (200, 300));
        // Only a's own 200 tokens can be evicted while b holds the prefix.
        assert_eq!(t.evict_until(&mut kv, 10_000), 200);
        assert_eq!(t.evictable_tokens(), 0);
        t.unlock(node);
        assert_eq!(t.evict_until(&mut kv, 10_000), 300);
        assert_eq!(kv.used_tokens(), 0);
        assert_eq!(t.total_tokens(), 0);
    }

    #[test]
    fn eviction_takes_the_least_recently_used_leaf_first_and_then_its_parent() {
        let mut kv = KvPool::new(10_000, 1);
        let mut t = RadixTree::new(1);
        let (a, b, c) = (grouped(0, 100), grouped(1, 100), Seq::new(2, None));
        kv.alloc_pages(150 + 50 + 80);
        t.insert(&a, 150); // [a: 0..150]
        t.insert(&b, 150); // splits a's node: [0..100] → {a 100..150, b 100..150}
        t.insert(&c, 80);
        // Leaves by access time: a's tail (refreshed by the split), b's tail, c. Matching a's
        // whole sequence makes a's path the newest.
        t.match_prefix(&a, 150);
        // Evicting 60 tokens takes b's tail (50), then c (80): 130 ≥ 60 only after c, and the
        // shared prefix stays (a's tail still hangs below it).
        let before = kv.available_tokens();
        assert_eq!(t.evict_until(&mut kv, before + 60), 130);
        // What is left: the prefix and a's tail.
        assert_eq!(t.evictable_tokens(), 150);
        let (n, _) = t.match_prefix(&b, 149);
        assert_eq!(n, 100);
    }

    #[test]
    fn eviction_stops_once_exactly_the_shortfall_is_free() {
        // SGLang evicts the shortfall (`allocator/base.py: evict_to_free_tokens` asks the tree
        // for `num_tokens - available_size()`, and `RadixCache.evict` stops once that many are
        // evicted): a leaf that frees exactly what was missing is the last one taken.
        let mut kv = KvPool::new(10_000, 1);
        let mut t = RadixTree::new(1);
        let (a, b, c) = (grouped(0, 100), grouped(1, 100), Seq::new(2, None));
        kv.alloc_pages(150 + 50 + 80);
        t.insert(&a, 150);
        t.insert(&b, 150);
        t.insert(&c, 80);
        t.match_prefix(&a, 150);
        // b's tail (50) is the least recently used leaf and exactly the 50 missing: c stays.
        let before = kv.available_tokens();
        assert_eq!(t.evict_until(&mut kv, before + 50), 50);
        assert_eq!(kv.available_tokens(), before + 50);
        assert_eq!(t.evictable_tokens(), 230);
        assert_eq!(t.match_prefix(&c, 80).0, 80);
    }

    #[test]
    fn inserting_what_the_tree_holds_walks_it_and_adds_the_rest() {
        let mut t = RadixTree::new(1);
        let a = grouped(0, 64);
        t.insert(&a, 64);
        let ins = t.insert(&a, 100);
        assert_eq!(ins.walked, 64);
        assert_eq!(t.depth_end(ins.last), 100);
        assert_eq!(t.evictable_tokens(), 100);
        // Another member inserting its own 80 tokens shares the 64.
        let ins = t.insert(&grouped(5, 64), 80);
        assert_eq!(ins.walked, 64);
        assert_eq!(t.evictable_tokens(), 116);
    }

    #[test]
    fn matches_and_nodes_are_page_aligned() {
        let mut t = RadixTree::new(16);
        let (a, b) = (grouped(0, 40), grouped(1, 40));
        t.insert(&a, 70); // 64 tokens: 4 pages, the group's 40 tokens end inside page 3
        assert_eq!(t.evictable_tokens(), 64);
        // b shares 40 tokens, two whole pages.
        let (n, node) = t.match_prefix(&b, 99);
        assert_eq!(n, 32);
        assert_eq!(t.depth_end(node), 32);
    }

    #[test]
    fn dfs_weight_puts_heavier_subtrees_first_and_a_nodes_own_requests_last() {
        let mut t = RadixTree::new(1);
        let g = |uid| {
            Seq::new(
                uid,
                Some(SharedPrefix {
                    group: 0,
                    tokens: 10,
                }),
            )
        };
        let h = |uid| {
            Seq::new(
                uid,
                Some(SharedPrefix {
                    group: 1,
                    tokens: 10,
                }),
            )
        };
        t.insert(&g(0), 20);
        t.insert(&h(1), 20);
        let (_, gn) = t.match_prefix(&g(2), 19);
        let (_, hn) = t.match_prefix(&h(3), 19);
        // Waiting: [root-only, g, h, h]: h's subtree is heavier, so h's two come first, then g's,
        // then the request that matched nothing (at the root, visited last).
        assert_eq!(t.dfs_weight_order(&[ROOT, gn, hn, hn]), vec![2, 3, 1, 0]);
    }
}
