//! Writing to stdout and stderr without panicking (the print macros panic when a write fails).
//!
//! A closed stdout (`servesim … | head`) ends the command quietly, as for other Unix tools; a
//! stdout that cannot take the text (`> /dev/full`) is an error (exit 1). A note or error that
//! cannot be written to stderr (`2> /dev/full`) turns a successful exit into exit 1.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use super::Failure;

static STDERR_FAILED: AtomicBool = AtomicBool::new(false);

/// Print `text` on stdout.
pub(super) fn out(text: &str) -> Result<(), Failure> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Err(Failure::closed_stdout()),
        Err(e) => Err(Failure::runtime("cannot write to stdout", e)),
    }
}

/// Print `text` on stderr; a failure is remembered for the exit code.
pub(super) fn err(text: &str) {
    let mut e = std::io::stderr().lock();
    if e.write_all(text.as_bytes())
        .and_then(|()| e.flush())
        .is_err()
    {
        STDERR_FAILED.store(true, Ordering::Relaxed);
    }
}

/// A line on stderr (a note on what was written, a warning).
pub(super) fn note(line: &str) {
    err(&format!("{line}\n"));
}

/// Whether something could not be written to stderr.
pub(super) fn stderr_failed() -> bool {
    STDERR_FAILED.load(Ordering::Relaxed)
}
