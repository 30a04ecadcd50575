//! The running requests' completions, by the decode step at which each generates its last
//! token: a timing wheel over decode steps (a slot per step of the next `W`, a list of entries
//! in each, a bitmap of the slots in use) with a heap for entries further ahead. A request's
//! entry goes in as it joins the batch (or gets its first token) and comes out at its step:
//! O(1) each, where a binary heap of the batch took O(log batch) — the completions of a
//! short-response workload are a step's main work.
//!
//! Entries of requests that left the batch early (retracted) stay where they are and are
//! dropped when met: the caller says which entries are current. A fast-forward run jumps over
//! steps without looking at their slots: only entries no longer current can be there (the run
//! stops at the next current completion), and they are dropped when met, recognized by their
//! step.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::request::ReqId;

/// An entry: `(step, stay, id)`.
pub(super) type Entry = (u64, u64, ReqId);

/// One entry in a slot's list.
#[derive(Clone, Copy, Debug)]
struct Node {
    entry: Entry,
    /// The next node of the list, + 1 (0: the end).
    next: u32,
}

/// The completions to come (see the module docs).
#[derive(Debug)]
pub(super) struct Completions {
    /// Per slot, its list's first node + 1 (0: empty). Step `s` is in slot `s & mask`.
    heads: Vec<u32>,
    /// Bit `i` set: slot `i` holds a list (possibly of stale entries only).
    occupied: Vec<u64>,
    nodes: Vec<Node>,
    /// Free nodes, by index.
    free: Vec<u32>,
    mask: u64,
    /// Entries at least a wheel's width ahead when they came.
    far: BinaryHeap<Reverse<Entry>>,
    /// Steps before `base` are past: the wheel holds steps `base .. base + W` (and stale
    /// entries of past steps).
    base: u64,
}

impl Completions {
    /// A queue for completions at most about `horizon` steps ahead (further ones are kept in
    /// a heap), from step 0 on.
    pub fn new(horizon: u64) -> Self {
        let width = horizon.clamp(64, 1 << 16).next_power_of_two();
        Completions {
            heads: vec![0; width as usize],
            occupied: vec![0; (width / 64) as usize],
            nodes: Vec::new(),
            free: Vec::new(),
            mask: width - 1,
            far: BinaryHeap::new(),
            base: 0,
        }
    }

    #[inline]
    fn width(&self) -> u64 {
        self.mask + 1
    }

    /// Add the entry `(step, stay, id)`, a step not yet past.
    #[inline(always)]
    pub fn push(&mut self, step: u64, stay: u64, id: ReqId) {
        debug_assert!(
            step >= self.base,
            "invariant: a completion is not in the past"
        );
        if step >= self.base + self.width() {
            self.far.push(Reverse((step, stay, id)));
        } else {
            self.link((step, stay, id));
        }
    }

    #[inline(always)]
    fn link(&mut self, entry: Entry) {
        let slot = (entry.0 & self.mask) as usize;
        let node = Node {
            entry,
            next: self.heads[slot],
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.heads[slot] = i + 1;
        self.occupied[slot / 64] |= 1 << (slot % 64);
    }

    /// Whether the slot of `step` holds entries: `false` means no completion at `step`, a step
    /// in the wheel's span; `true`, one there or stale entries only.
    #[inline]
    pub fn may_hold(&self, step: u64) -> bool {
        let slot = (step & self.mask) as usize;
        self.occupied[slot / 64] & (1 << (slot % 64)) != 0
    }

    /// Steps up to `step` are past; entries from further ahead come into the wheel.
    #[inline]
    pub fn pass(&mut self, step: u64) {
        if step < self.base {
            return;
        }
        self.base = step + 1;
        if !self.far.is_empty() {
            self.pull_far();
        }
    }

    /// Entries from further ahead come into the wheel as it passes.
    #[inline(never)]
    fn pull_far(&mut self) {
        while let Some(&Reverse(e)) = self.far.peek() {
            if e.0 >= self.base + self.width() {
                break;
            }
            self.far.pop();
            self.link(e);
        }
    }

    /// Take the entries of step `step` for which `current` holds into `out` (in any order),
    /// drop the slot's others (stale), and pass the step.
    #[inline(always)]
    pub fn take(&mut self, step: u64, current: impl Fn(ReqId, u64) -> bool, out: &mut Vec<Entry>) {
        debug_assert!(step >= self.base, "invariant: steps are taken in order");
        if step > self.base {
            // The steps before it pass first: its entries are in the wheel.
            self.pass(step - 1);
        }
        let slot = (step & self.mask) as usize;
        let mut at = std::mem::take(&mut self.heads[slot]);
        if at != 0 {
            self.occupied[slot / 64] &= !(1 << (slot % 64));
        }
        while at != 0 {
            let i = at - 1;
            let Node { entry, next } = self.nodes[i as usize];
            debug_assert!(entry.0 <= step, "invariant: a slot holds no later step");
            if entry.0 == step && current(entry.2, entry.1) {
                out.push(entry);
            } else {
                debug_assert!(
                    !current(entry.2, entry.1),
                    "invariant: completions are never skipped"
                );
            }
            self.free.push(i);
            at = next;
        }
        self.pass(step);
    }

    /// The step of the next current entry (for which `current` holds), dropping the stale ones
    /// met on the way.
    #[inline]
    pub fn next_step(&mut self, current: impl Fn(ReqId, u64) -> bool) -> Option<u64> {
        let words = self.occupied.len();
        let start = (self.base & self.mask) as usize;
        // The slots from `base` on, in step order: from its word (its lower bits masked) round
        // to it again (then its lower bits only).
        let low = !(!0u64 << (start % 64));
        let mut w = start / 64;
        let mut bits = self.occupied[w] & !low;
        let mut left = words;
        loop {
            while bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(step) = self.clean(slot, &current) {
                    return Some(step);
                }
            }
            if left == 0 {
                break;
            }
            left -= 1;
            w = if w + 1 == words { 0 } else { w + 1 };
            bits = self.occupied[w];
            if left == 0 {
                bits &= low;
            }
        }
        while let Some(&Reverse((step, stay, id))) = self.far.peek() {
            if current(id, stay) {
                return Some(step);
            }
            self.far.pop();
        }
        None
    }

    /// Drop the stale entries of `slot` (not current, or of a past step); the step of the
    /// current ones, if any.
    fn clean(&mut self, slot: usize, current: &impl Fn(ReqId, u64) -> bool) -> Option<u64> {
        let mut found = None;
        let mut prev: Option<u32> = None;
        let mut at = self.heads[slot];
        while at != 0 {
            let i = at - 1;
            let Node { entry, next } = self.nodes[i as usize];
            if entry.0 >= self.base && current(entry.2, entry.1) {
                found = Some(entry.0);
                prev = Some(i);
            } else {
                match prev {
                    None => self.heads[slot] = next,
                    Some(p) => self.nodes[p as usize].next = next,
                }
                self.free.push(i);
            }
            at = next;
        }
        if self.heads[slot] == 0 {
            self.occupied[slot / 64] &= !(1 << (slot % 64));
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries `(step, id)`, all current unless in `stale`.
    fn drain(q: &mut Completions, upto: u64, stale: &[u32]) -> Vec<(u64, u32)> {
        let mut got = Vec::new();
        let current = |id: ReqId, _| !stale.contains(&id.0);
        while let Some(step) = q.next_step(current) {
            if step > upto {
                break;
            }
            let mut out = Vec::new();
            q.take(step, current, &mut out);
            out.sort_by_key(|e| e.1);
            got.extend(out.iter().map(|e| (e.0, e.2 .0)));
        }
        got
    }

    #[test]
    fn completions_come_out_by_step_near_and_far_with_stale_entries_dropped() {
        let mut q = Completions::new(64);
        // Near (within the 64 steps of the wheel), far (in the heap), two at one step, and
        // entries at steps 64 apart (the same slot).
        for (step, id) in [(5, 0), (3, 1), (5, 2), (69, 3), (500, 4), (133, 5), (3, 6)] {
            q.push(step, u64::from(id), ReqId(id));
        }
        // Request 6 left early: its entry is stale.
        let got = drain(&mut q, 100, &[6]);
        assert_eq!(got, vec![(3, 1), (5, 0), (5, 2), (69, 3)]);
        // A jump over steps (a fast-forward run) leaves only stale entries behind.
        q.push(120, 7, ReqId(7));
        q.pass(119);
        assert_eq!(
            drain(&mut q, u64::MAX, &[]),
            vec![(120, 7), (133, 5), (500, 4)]
        );
        assert_eq!(q.next_step(|_, _| true), None);
    }

    proptest::proptest! {
        /// Pushes, requests leaving early, steps taken one by one and jumps, as the scheduler
        /// makes them: the next completion and each step's entries are the model's.
        #[test]
        fn the_next_completion_is_the_earliest_current_entry(
            ops in proptest::collection::vec((0u8..4, 0u64..300, proptest::prelude::any::<u16>()), 1..200),
        ) {
            let mut q = Completions::new(64);
            // (step, id, current)
            let mut model: Vec<(u64, u32, bool)> = Vec::new();
            let mut next_id = 0u32;
            for (op, ahead, pick) in ops {
                let live: Vec<usize> = (0..model.len()).filter(|&i| model[i].2).collect();
                match op {
                    0 | 1 => {
                        let step = q.base + ahead;
                        q.push(step, u64::from(next_id), ReqId(next_id));
                        model.push((step, next_id, true));
                        next_id += 1;
                    }
                    2 if !live.is_empty() => {
                        let i = live[usize::from(pick) % live.len()];
                        model[i].2 = false;
                    }
                    _ => {
                        let alive = |id: ReqId, _| model.iter().any(|e| e.1 == id.0 && e.2);
                        let want = model.iter().filter(|e| e.2).map(|e| e.0).min();
                        let got = q.next_step(alive);
                        proptest::prop_assert_eq!(got, want);
                        // A step at or before the next completion: taken, or jumped to
                        // before it.
                        let upto = want.unwrap_or(q.base + 100);
                        let k = q.base + u64::from(pick) % (upto - q.base + 1);
                        if Some(k) == want || pick % 2 == 0 {
                            let mut out = Vec::new();
                            q.take(k, alive, &mut out);
                            let mut ids: Vec<u32> = out.iter().map(|e| e.2 .0).collect();
                            ids.sort_unstable();
                            let mut expect: Vec<u32> =
                                model.iter().filter(|e| e.2 && e.0 == k).map(|e| e.1).collect();
                            expect.sort_unstable();
                            proptest::prop_assert_eq!(ids, expect);
                            for e in model.iter_mut().filter(|e| e.0 == k) {
                                e.2 = false;
                            }
                        } else if k > q.base {
                            q.pass(k - 1);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_stale_entry_from_a_skipped_step_is_not_taken_for_a_later_one() {
        let mut q = Completions::new(64);
        q.push(10, 0, ReqId(0)); // retracted before step 10
        q.pass(70); // a run jumped over step 10
        q.push(74, 1, ReqId(1)); // the same slot as 10
        let stale = |id: ReqId, _| id.0 != 0;
        assert_eq!(q.next_step(stale), Some(74));
        let mut out = Vec::new();
        q.take(74, stale, &mut out);
        assert_eq!(out, vec![(74, 1, ReqId(1))]);
    }
}
