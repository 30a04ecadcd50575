//! `calibrate --table`: a table of step times (`model = "table"`) from the log's windows, when
//! they spread over enough batch sizes.
//!
//! Each window gives one measured decode step: its time less its prefills (priced by the fit),
//! over its decode steps, at its mean batch and KV. The batch axis is log-spaced (powers of two
//! between the smallest and the largest batch the windows show, the two ends included); each
//! window belongs to the nearest batch point (in log space), moved to it along the fitted
//! per-request cost, and to KV 0 along the fitted per-KV-token cost; a point's decode time is
//! the mean of its windows, growing with the KV at the fitted per-KV-token cost (a window's KV
//! and batch move together, so few logs can bend the KV line). The KV axis is the range the
//! windows cover. Prefill times come from the fit at the smallest and largest prefill the log
//! shows (a window holds only their sum, so the log cannot bend the prefill line). The table
//! thus bends where the linear model is stiffest: the per-request cost, batch size by batch size.

use super::fit::Equation;
use super::Calibration;

/// A point of the batch axis needs this many windows.
pub const MIN_WINDOWS_PER_POINT: usize = 3;

/// Why no table can be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoTable(pub String);

/// One measured decode step.
#[derive(Clone, Copy, Debug)]
struct Step {
    batch: f64,
    kv: f64,
    seconds: f64,
}

fn steps(c: &Calibration) -> Vec<Step> {
    let v = |j: usize| c.fit.terms[j].value();
    c.equations
        .iter()
        .filter(|e: &&Equation| e.x[0] > 0.0)
        .map(|e| Step {
            batch: e.x[1] / e.x[0],
            kv: e.x[2] / e.x[0],
            seconds: (e.seconds - e.x[3] * v(3) - e.x[4] * v(4)) / e.x[0],
        })
        .collect()
}

/// Powers of two strictly between `lo` and `hi` (but one within a factor 1.3 of `hi`), with both
/// ends.
fn log_axis(lo: u64, hi: u64) -> Vec<u64> {
    let mut axis = vec![lo];
    let mut p = lo.next_power_of_two();
    if p == lo {
        p *= 2;
    }
    while p < hi {
        // Too close to the end to be a point of its own.
        if (hi as f64 / p as f64) > 1.3 {
            axis.push(p);
        }
        p *= 2;
    }
    if hi > lo {
        axis.push(hi);
    }
    axis
}

/// The decode time at a batch point: the mean of its windows moved along the fitted per-KV
/// cost to KV 0, as `(intercept, slope)`.
fn line(at: &[Step], slope: f64) -> (f64, f64) {
    let intercept = at.iter().map(|s| s.seconds - slope * s.kv).sum::<f64>() / at.len() as f64;
    (intercept, slope)
}

/// The table as CSV (`step,batch,kv_tokens,tokens,ms`), or why the windows cannot make one.
pub fn csv(c: &Calibration) -> Result<String, NoTable> {
    let all = steps(c);
    let (per_seq, per_kv) = (c.fit.terms[1].value(), c.fit.terms[2].value());
    let (b_lo, b_hi) = all.iter().fold((f64::MAX, 0.0f64), |(a, b), s| {
        (a.min(s.batch), b.max(s.batch))
    });
    let (k_lo, k_hi) = all
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), s| (a.min(s.kv), b.max(s.kv)));
    if all.is_empty() {
        return Err(NoTable("no window to build it from".into()));
    }
    let axis = log_axis(b_lo.round().max(1.0) as u64, b_hi.round().max(1.0) as u64);
    let mut bins: Vec<Vec<Step>> = vec![Vec::new(); axis.len()];
    for s in &all {
        let nearest = (0..axis.len())
            .min_by(|&i, &j| {
                let d = |p: u64| (s.batch.ln() - (p as f64).ln()).abs();
                d(axis[i]).total_cmp(&d(axis[j]))
            })
            .expect("invariant: the axis has a point");
        let moved = Step {
            seconds: s.seconds + per_seq * (axis[nearest] as f64 - s.batch),
            ..*s
        };
        bins[nearest].push(moved);
    }
    let points: Vec<(u64, &Vec<Step>)> = axis
        .iter()
        .zip(&bins)
        .filter(|(_, b)| b.len() >= MIN_WINDOWS_PER_POINT)
        .map(|(&p, b)| (p, b))
        .collect();
    if points.len() < 2 {
        return Err(NoTable(format!(
            "the windows cover batch sizes {} only: a table needs two points of its batch axis (the smallest and the largest batch size, and the powers of two between them) with {MIN_WINDOWS_PER_POINT} windows each",
            super::fragment::span(b_lo.round() as u64, b_hi.round() as u64)
        )));
    }
    let kv_axis = [
        k_lo.floor() as u64,
        (k_hi.ceil() as u64).max(k_lo.floor() as u64 + 1),
    ];
    let ms = |s: f64| format!("{:.6}", (s * 1e3).max(0.0));
    let mut out = String::from("step,batch,kv_tokens,tokens,ms\n");
    for (batch, at) in points {
        let (intercept, slope) = line(at, per_kv);
        for k in kv_axis {
            out += &format!("decode,{batch},{k},,{}\n", ms(intercept + slope * k as f64));
        }
    }
    let (p_lo, p_hi) = c.prefill_tokens;
    let (p0, p1) = (c.fit.terms[3].value(), c.fit.terms[4].value());
    let lo = p_lo.max(1);
    for t in [lo, p_hi.max(lo + 1)] {
        out += &format!("prefill,,,{t},{}\n", ms(p0 + p1 * t as f64));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_axis_is_powers_of_two_between_the_ends() {
        assert_eq!(log_axis(3, 100), vec![3, 4, 8, 16, 32, 64, 100]);
        assert_eq!(log_axis(4, 130), vec![4, 8, 16, 32, 64, 130]);
        assert_eq!(log_axis(8, 8), vec![8]);
    }
}
