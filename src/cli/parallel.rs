//! Runs on many cores: a parallel map with a progress bar, and Ctrl-C.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use super::args::JobsArgs;
use super::Failure;
use crate::engine::RunOptions;

/// Set by Ctrl-C; runs in progress stop at their next scheduler iteration.
fn interrupt_flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        // If a handler cannot be installed, Ctrl-C simply kills the process as usual.
        let _ = ctrlc::set_handler(move || f.store(true, Ordering::Relaxed));
        flag
    })
    .clone()
}

/// Run options whose runs stop (with [`crate::engine::SimError::Interrupted`]) at Ctrl-C.
pub(super) fn interruptible() -> RunOptions {
    RunOptions {
        interrupt: Some(interrupt_flag()),
        ..RunOptions::default()
    }
}

/// `f` of every item, in order, computed on `jobs` threads (default: one per core), with a
/// progress bar on stderr counting `unit`s (drawn only when stderr is a terminal).
pub(super) fn map_with_progress<T: Sync, R: Send>(
    items: &[T],
    jobs: JobsArgs,
    unit: &str,
    f: impl Fn(&T) -> R + Sync,
) -> Result<Vec<R>, Failure> {
    let threads = jobs.jobs.unwrap_or(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| {
            Failure::usage(
                format!("cannot start {threads} worker threads: {e}"),
                "lower --jobs",
            )
        })?;
    let bar = indicatif::ProgressBar::new(items.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{bar:40}} {{pos}}/{{len}} {unit}  {{elapsed}} elapsed, {{eta}} left"
        ))
        .expect("invariant: the progress template is valid"),
    );
    let out = pool.install(|| {
        items
            .par_iter()
            .map(|x| {
                let r = f(x);
                bar.inc(1);
                r
            })
            .collect()
    });
    bar.finish_and_clear();
    Ok(out)
}
