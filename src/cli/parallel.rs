//! Runs on many cores: a parallel map with a progress bar.

use rayon::prelude::*;

use super::args::JobsArgs;
use super::Failure;

/// `f` of every item, in order, computed on `jobs` threads (no more than there are items), or
/// by default on rayon's (one per core, or `RAYON_NUM_THREADS`), with a progress bar on stderr counting `unit`s (drawn only when
/// stderr is a terminal).
pub(super) fn map_with_progress<T: Sync, R: Send>(
    items: &[T],
    jobs: JobsArgs,
    unit: &str,
    f: impl Fn(&T) -> R + Sync,
) -> Result<Vec<R>, Failure> {
    // 0: rayon's default (one per core, or RAYON_NUM_THREADS).
    let threads = jobs.jobs.map_or(0, |j| j.min(items.len()).max(1));
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
    super::interrupt::check()?;
    Ok(out)
}
