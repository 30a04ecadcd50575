//! A fast-forward's runs taken at once: the server state's time integrals over a run, in one
//! update rather than one per step or turn (`engine::Simulator::constant_run`, `take_turns`).

use super::Recorder;
use crate::scheduler::{ServerState, TurnSums};
use crate::time::SimTime;

impl Recorder<'_> {
    /// A run of steps taken at once (fast-forward) from the last `set_state` to `end`, during
    /// which the requests in flight, `running` and `queued` were constant and the KV use
    /// integrated to `kv_integral` (ns × tokens); `kv_last` is the KV use at `end`. No point
    /// may fall inside the run.
    pub fn integrate_run(
        &mut self,
        end: SimTime,
        running: u64,
        queued: u64,
        kv_integral: u128,
        kv_last: u64,
    ) {
        debug_assert!(
            self.next_snapshot_at() >= end,
            "invariant: no time-series point falls inside a fast-forward run"
        );
        let dt = u128::from((end - self.last_t).as_ns());
        self.int_running += dt * u128::from(running);
        self.int_queued += dt * u128::from(queued);
        if queued > 0 {
            self.int_queue_busy += dt;
        }
        self.int_kv += kv_integral;
        self.int_in_flight += dt * u128::from(self.in_flight);
        self.last_t = end;
        self.state.running = running;
        self.state.queued = queued;
        self.state.kv_used_tokens = kv_last;
    }

    /// A fast-forward's turns summed ([`TurnSums`]) from the last `set_state` to `end`, the
    /// server in `last` from then on: the same integrals as setting each turn's state at its
    /// start. No point may fall inside the run.
    pub fn integrate_turns(&mut self, end: SimTime, sums: &TurnSums, last: ServerState) {
        debug_assert!(
            self.next_snapshot_at() >= end,
            "invariant: no time-series point falls inside a run of summed turns"
        );
        let dt = u128::from((end - self.last_t).as_ns());
        self.int_running += sums.running_ns;
        self.int_queued += sums.queued_ns;
        self.int_queue_busy += sums.queue_busy_ns;
        self.int_kv += sums.kv_used_ns;
        self.int_in_flight += dt * u128::from(self.in_flight);
        self.last_t = end;
        self.state = last;
    }
}
