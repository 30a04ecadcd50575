//! The event queue: one total order of events, defined here and nowhere else.
//!
//! Events are ordered by `(time, kind rank, sequence number)`. At one instant, a batch ending
//! comes first, then responses reaching the client, then think times ending, then open-loop
//! arrivals, then requests reaching the engine's queue; events of one kind keep the order they
//! were scheduled in (FIFO). The scheduler picks its next batch only after every event of the
//! instant has been handled, so a request sent at the very moment a batch ends is seen by the
//! next admission pass. (Responses and requests travel only with off-GPU overheads; without
//! them a response reaches the client when the batch ends and a request the engine when sent.)

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::SimTime;

/// What happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventKind {
    /// The batch in flight ends.
    StepEnd = 0,
    /// A response reaches the client (its last token, or a refusal).
    Delivery = 1,
    /// A closed-loop slot's think time ends.
    ClientWake = 2,
    /// An open-loop request arrives.
    Arrival = 3,
    /// A request sent earlier reaches the engine's queue.
    ServerArrival = 4,
}

/// A scheduled event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Event {
    /// When.
    pub at: SimTime,
    /// What (its rank orders same-time events).
    pub kind: EventKind,
    /// Scheduling order, breaking the remaining ties.
    pub seq: u64,
}

/// A min-queue of events in the order above.
///
/// The earliest event is kept apart from the others (`front`), so that a queue holding one
/// event at a time — the batch in flight, in a closed loop without off-GPU time — never touches
/// the heap; the order is the same total order either way.
#[derive(Debug)]
pub struct EventQueue {
    /// The earliest event, when `queued`.
    front: Event,
    /// The queue is not empty.
    queued: bool,
    /// The others, none earlier than `front`.
    heap: BinaryHeap<Reverse<Event>>,
    next_seq: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            front: Event {
                at: SimTime::ZERO,
                kind: EventKind::StepEnd,
                seq: 0,
            },
            queued: false,
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl EventQueue {
    /// Schedule `kind` at `at`; returns the event's sequence number.
    #[inline]
    pub fn push(&mut self, at: SimTime, kind: EventKind) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let e = Event { at, kind, seq };
        if !self.queued {
            self.front = e;
            self.queued = true;
        } else if e < self.front {
            self.heap.push(Reverse(self.front));
            self.front = e;
        } else {
            self.heap.push(Reverse(e));
        }
        seq
    }

    /// The time of the next event.
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        self.queued.then_some(self.front.at)
    }

    /// Take the next event.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        if !self.queued {
            return None;
        }
        let e = self.front;
        match self.heap.pop() {
            Some(Reverse(next)) => self.front = next,
            None => self.queued = false,
        }
        Some(e)
    }

    /// Take the next event if it happens at `t`.
    #[inline]
    pub fn pop_at(&mut self, t: SimTime) -> Option<Event> {
        if self.queued && self.front.at == t {
            self.pop()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_time_events_run_batch_end_first_then_deliveries_wakes_and_arrivals_in_fifo_order() {
        let mut q = EventQueue::default();
        let t = SimTime::from_ns(5);
        q.push(t, EventKind::Arrival);
        q.push(t, EventKind::ClientWake);
        q.push(SimTime::from_ns(4), EventKind::Arrival);
        q.push(t, EventKind::StepEnd);
        q.push(t, EventKind::ClientWake);
        q.push(t, EventKind::ServerArrival);
        assert_eq!(q.push(t, EventKind::Delivery), 6);
        let order: Vec<(u64, EventKind, u64)> = std::iter::from_fn(|| q.pop())
            .map(|e| (e.at.as_ns(), e.kind, e.seq))
            .collect();
        assert_eq!(
            order,
            vec![
                (4, EventKind::Arrival, 2),
                (5, EventKind::StepEnd, 3),
                (5, EventKind::Delivery, 6),
                (5, EventKind::ClientWake, 1),
                (5, EventKind::ClientWake, 4),
                (5, EventKind::Arrival, 0),
                (5, EventKind::ServerArrival, 5),
            ]
        );
    }

    /// The queue against the plain heap of every event (its reference): the same events in
    /// the same order, whatever the pushes and pops interleaved.
    mod reference {
        use super::*;
        use proptest::prelude::*;

        fn kind(k: u8) -> EventKind {
            [
                EventKind::StepEnd,
                EventKind::Delivery,
                EventKind::ClientWake,
                EventKind::Arrival,
                EventKind::ServerArrival,
            ][usize::from(k % 5)]
        }

        proptest! {
            #[test]
            fn pops_what_a_plain_heap_pops(ops in prop::collection::vec((0u8..3, 0u64..6, 0u8..5), 0..200)) {
                let mut q = EventQueue::default();
                let mut heap = BinaryHeap::new();
                let mut seq = 0;
                for (op, at, k) in ops {
                    match op {
                        0 | 1 => {
                            let at = SimTime::from_ns(at);
                            prop_assert_eq!(q.push(at, kind(k)), seq);
                            heap.push(Reverse(Event { at, kind: kind(k), seq }));
                            seq += 1;
                        }
                        _ => {
                            let t = SimTime::from_ns(at);
                            let want = heap.peek().map(|Reverse(e)| e.at);
                            prop_assert_eq!(q.peek_time(), want);
                            if want == Some(t) {
                                prop_assert_eq!(q.pop_at(t), heap.pop().map(|Reverse(e)| e));
                            } else {
                                prop_assert_eq!(q.pop_at(t), None);
                                prop_assert_eq!(q.pop(), heap.pop().map(|Reverse(e)| e));
                            }
                        }
                    }
                }
                while let Some(Reverse(e)) = heap.pop() {
                    prop_assert_eq!(q.pop(), Some(e));
                }
                prop_assert_eq!(q.pop(), None);
            }
        }
    }
}
