//! `server.log`: the engine's own log lines with simulated timestamps, so that tools written for
//! real logs read it. Each engine formats its lines (see [`crate::scheduler::render_line`]).

use crate::scenario::EngineKind;
use crate::scheduler::{render_line, LogRecord};

/// The log text for these records of an engine of `tensor_parallel` GPUs.
pub fn render(kind: EngineKind, records: &[LogRecord], tensor_parallel: u32) -> String {
    records
        .iter()
        .map(|rec| line(kind, rec, tensor_parallel))
        .collect()
}

/// One record's line, with its newline: [`render`] is these lines in order, so a log written
/// line by line as the run goes has the same bytes.
pub fn line(kind: EngineKind, rec: &LogRecord, tensor_parallel: u32) -> String {
    let mut s = render_line(kind, rec, tensor_parallel);
    s.push('\n');
    s
}
