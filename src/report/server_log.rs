//! `server.log`: the engine's own log lines with simulated timestamps, so that tools written for
//! real logs read it. Each engine formats its lines (see [`crate::scheduler::render_line`]).

use crate::scenario::EngineKind;
use crate::scheduler::{render_line, LogRecord};

/// The log text for these records of an engine of `tensor_parallel` GPUs.
pub fn render(kind: EngineKind, records: &[LogRecord], tensor_parallel: u32) -> String {
    let mut out = String::new();
    for rec in records {
        out.push_str(&render_line(kind, rec, tensor_parallel));
        out.push('\n');
    }
    out
}
