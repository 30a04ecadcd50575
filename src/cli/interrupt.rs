//! Signals. SIGINT (Ctrl-C) and SIGTERM (what `timeout`, Slurm and `docker stop` send) ask the
//! command to stop: simulations stop at their next scheduler batch (but `compare`'s replay, which
//! runs to its end), and every later stage
//! (analysis, figures, staging the outputs) checks [`check`] before it starts, so nothing is
//! moved into place after a signal and the staged files are removed; the command then exits
//! with 130 (SIGINT) or 143 (SIGTERM). A second signal ends the process at once with the same
//! code (its temporary files are removed by the next command that writes to the same place).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

use super::Failure;
use crate::engine::RunOptions;

/// Tests only: the environment variable naming a signal (`SIGINT`, `SIGTERM`) that `run` sends
/// itself once the simulation has finished, as if it came during the analysis and writing (no
/// test could time a signal from outside to fall there).
pub const SIGNAL_AFTER_RUN: &str = "SERVESIM_TEST_SIGNAL_AFTER_RUN";

/// The signal that asked to stop (0: none yet).
static SIGNAL: AtomicUsize = AtomicUsize::new(0);

/// Set by the first SIGINT or SIGTERM; runs in progress stop at their next scheduler batch.
fn flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            // Registered in this order, a second signal finds the flag set and exits at once.
            // If a handler cannot be installed, the signal kills the process as usual.
            let _ = signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, flag.clone());
            let _ = signal_hook::flag::register_usize(sig, &SIGNAL, sig as usize);
            let _ = signal_hook::flag::register(sig, flag.clone());
        }
        flag
    })
    .clone()
}

/// Install the handlers (idempotent). Call before anything that writes.
pub(super) fn install() {
    flag();
}

/// Run options whose runs stop (with [`crate::engine::SimError::Interrupted`]) at a signal.
pub(super) fn interruptible() -> RunOptions {
    RunOptions {
        interrupt: Some(flag()),
        ..RunOptions::default()
    }
}

/// Send the signal named by [`SIGNAL_AFTER_RUN`], if any, to this process (tests only).
pub(super) fn test_signal_after_run() {
    let sig = match std::env::var(SIGNAL_AFTER_RUN).as_deref() {
        Ok("SIGINT") => SIGINT,
        Ok("SIGTERM") => SIGTERM,
        _ => return,
    };
    let _ = signal_hook::low_level::raise(sig);
}

/// Whether a signal asked to stop.
pub(super) fn requested() -> bool {
    flag().load(Ordering::SeqCst)
}

/// `Err` (the interruption) once a signal asked to stop.
pub(super) fn check() -> Result<(), Failure> {
    if requested() {
        Err(failure())
    } else {
        Ok(())
    }
}

/// The failure of a command stopped by a signal: exit code 128 + the signal's number.
pub(super) fn failure() -> Failure {
    let sig = SIGNAL.load(Ordering::SeqCst);
    let (name, sig) = match sig as i32 {
        SIGTERM => ("SIGTERM", SIGTERM),
        _ => ("SIGINT", SIGINT),
    };
    Failure::interrupted(name, 128 + sig)
}
