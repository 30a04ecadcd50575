//! Fast-forward over runs of pure decode steps.

use super::Vllm;
use crate::request::Requests;
use crate::scheduler::{Outbox, Skip};
use crate::time::SimTime;

impl Vllm {
    /// Not yet.
    pub(super) fn fast_forward(
        &mut self,
        _now: SimTime,
        _limit: SimTime,
        _reqs: &mut Requests,
        _out: &mut Outbox,
    ) -> Option<Skip> {
        None
    }
}
