//! Value parsers for the typed flags: each turns one flag value into its type or says what is
//! wrong and how to write it ([`FlagError`], rendered as `error: bad --FLAG` by
//! [`super::Failure::from_clap`]).

use crate::catalog::Catalog;
use crate::sweep::{self, Axis, Shard, VaryError};

/// Most worker threads `--jobs` may ask for.
pub(super) const MAX_JOBS: usize = 1024;

/// A flag value that does not parse: what is wrong (after the flag's name) and how to fix it.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(super) struct FlagError {
    /// Follows the flag's name: "`3/3`: the index must be below the count".
    pub message: String,
    /// How to write it.
    pub hint: String,
}

fn bad(message: impl Into<String>, hint: impl Into<String>) -> FlagError {
    FlagError {
        message: message.into(),
        hint: hint.into(),
    }
}

/// `--shard I/N`.
pub(super) fn shard(s: &str) -> Result<Shard, FlagError> {
    Shard::parse(s).map_err(|e| {
        bad(
            e.to_string(),
            "e.g. --shard 0/4 … --shard 3/4; with Slurm: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT",
        )
    })
}

/// `--jobs N`, 1 ≤ N ≤ [`MAX_JOBS`].
pub(super) fn jobs(s: &str) -> Result<usize, FlagError> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_JOBS).contains(&n) => Ok(n),
        _ => Err(bad(
            format!("`{s}` is not a number of threads from 1 to {MAX_JOBS}"),
            "e.g. --jobs 8; without --jobs, one per core",
        )),
    }
}

/// `--vary KEY=SPEC`.
pub(super) fn vary(s: &str) -> Result<Axis, FlagError> {
    sweep::parse_vary(s).map_err(|e| {
        let hint = match e {
            VaryError::BadStep(_) | VaryError::EmptyRange(_) => {
                "a range is start:stop:step with start ≤ stop and step > 0, e.g. 0.80:0.95:0.01"
            }
            VaryError::TooMany { .. } => "use a coarser step",
            _ => {
                "write KEY=start:stop:step or KEY=a,b,c, e.g. --vary client.concurrency=50,100,150"
            }
        };
        bad(e.to_string(), hint)
    })
}

/// A GPU of the built-in catalog, by any name the catalog accepts; gives its catalog name.
pub(super) fn gpu(s: &str) -> Result<String, FlagError> {
    let catalog = Catalog::builtin_ref();
    match catalog.gpu(s.trim()) {
        Some(g) => Ok(g.name.clone()),
        None => Err(bad(
            format!("\"{s}\" is not in the catalog"),
            match catalog.suggest_gpu(s) {
                Some(near) => {
                    format!("did you mean \"{near}\"? (`servesim catalog` lists the GPUs)")
                }
                None => "`servesim catalog` lists the GPUs".to_string(),
            },
        )),
    }
}

/// `--price GPU=USD`: a GPU's price per GPU-hour.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct GpuPrice {
    /// Catalog GPU name.
    pub gpu: String,
    /// Dollars per GPU-hour.
    pub usd_per_gpu_hour: f64,
}

/// `--price GPU=USD`.
pub(super) fn gpu_price(s: &str) -> Result<GpuPrice, FlagError> {
    let hint = "e.g. --price h100=2.49 (dollars per GPU-hour for a catalog GPU)";
    let (g, usd) = s
        .split_once('=')
        .ok_or_else(|| bad(format!("`{s}` is not GPU=USD"), hint))?;
    let gpu = gpu(g).map_err(|e| bad(format!("`{s}`: {}", e.message), e.hint))?;
    match usd.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(GpuPrice {
            gpu,
            usd_per_gpu_hour: v,
        }),
        _ => Err(bad(
            format!("`{s}`: `{usd}` is not a price of zero or more dollars"),
            hint,
        )),
    }
}

/// A positive whole number (`--counts`, `--tp`).
pub(super) fn positive(s: &str) -> Result<u32, FlagError> {
    match s.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad(
            format!("`{s}` is not a positive whole number"),
            "give positive numbers separated by commas, e.g. 1,2,4,8",
        )),
    }
}

/// A positive number of hours (`--deadline-h`).
pub(super) fn hours(s: &str) -> Result<f64, FlagError> {
    match s.trim().parse::<f64>() {
        Ok(h) if h.is_finite() && h > 0.0 => Ok(h),
        _ => Err(bad(
            format!("`{s}` is not a positive number of hours"),
            "e.g. --deadline-h 24",
        )),
    }
}

/// A positive, finite number, in the unit `what` names (`--slo-ttft-p99-s`, …).
fn positive_number(s: &str, what: &str, example: &str) -> Result<f64, FlagError> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(bad(
            format!("`{s}` is not a positive number of {what}"),
            format!("e.g. {example}"),
        )),
    }
}

/// Seconds (`--slo-ttft-p99-s`).
pub(super) fn seconds(s: &str) -> Result<f64, FlagError> {
    positive_number(s, "seconds", "--slo-ttft-p99-s 2")
}

/// Milliseconds (`--slo-tpot-p99-ms`).
pub(super) fn milliseconds(s: &str) -> Result<f64, FlagError> {
    positive_number(s, "milliseconds", "--slo-tpot-p99-ms 50")
}

/// Requests per second (`--target-rate`).
pub(super) fn rate(s: &str) -> Result<f64, FlagError> {
    positive_number(s, "requests per second", "--target-rate 20")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_flags_parse_or_say_how_to_write_them() {
        assert_eq!(shard("1/4").unwrap(), Shard { index: 1, count: 4 });
        assert!(shard("4/4")
            .unwrap_err()
            .message
            .contains("below the count"));
        assert_eq!(jobs("8").unwrap(), 8);
        for j in ["0", "1025", "-1", "many"] {
            assert!(jobs(j).is_err(), "{j}");
        }
        assert_eq!(vary("a.b=1:3:1").unwrap().values, vec!["1", "2", "3"]);
        assert_eq!(
            vary("a.b=3:1:1").unwrap_err().hint,
            "a range is start:stop:step with start ≤ stop and step > 0, e.g. 0.80:0.95:0.01"
        );
        assert_eq!(gpu("h100").unwrap(), "h100");
        assert!(gpu("h1000")
            .unwrap_err()
            .hint
            .contains("did you mean \"h100\"?"));
        assert_eq!(
            gpu_price("h100=2.5").unwrap(),
            GpuPrice {
                gpu: "h100".into(),
                usd_per_gpu_hour: 2.5
            }
        );
        for p in ["h100", "h100=-1", "h100=x", "h1000=2"] {
            assert!(gpu_price(p).is_err(), "{p}");
        }
        assert_eq!(positive("4").unwrap(), 4);
        assert!(positive("0").is_err());
        assert_eq!(hours("1.5").unwrap(), 1.5);
        for h in ["0", "-2", "inf", "NaN"] {
            assert!(hours(h).is_err(), "{h}");
            assert!(seconds(h).is_err() && milliseconds(h).is_err() && rate(h).is_err());
        }
        assert_eq!(seconds("2.5").unwrap(), 2.5);
        assert!(rate("x")
            .unwrap_err()
            .message
            .contains("requests per second"));
    }
}
