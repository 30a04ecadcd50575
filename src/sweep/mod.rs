//! What-if sweeps: a grid of scenario overrides, run in parallel, one row per point.
//!
//! A `--vary KEY=SPEC` gives one axis: `start:stop:step` (inclusive; the i-th value is
//! `start + i·step`, printed with the decimals of the spec so 0.80:0.95:0.01 gives exactly
//! 0.80, 0.81, … 0.95) or a list `a,b,c` (each read as a TOML value, bare words as strings).
//! Several axes make a cartesian product, the first axis varying slowest. Points are numbered
//! in that order; a shard `I/N` runs the points whose number is `I mod N`, and merging shards
//! sorts rows back by point number, so a merged sweep is byte-identical to an unsharded one.

use serde::Serialize;

use crate::analysis::{Analysis, Regime};
use crate::csv_rows::{self, Fixed};
use crate::engine::{self, RunOptions, SimError};
use crate::metrics::{RunResult, StopReason};
use crate::scenario::{self, Scenario, ScenarioError, Source};

mod vary;

pub use vary::{parse_vary, points, Axis, VaryError, MAX_POINTS};

/// A shard `I/N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shard {
    /// Which one, from 0.
    pub index: usize,
    /// How many.
    pub count: usize,
}

impl Shard {
    /// Parse `I/N` with `0 ≤ I < N`.
    pub fn parse(s: &str) -> Result<Shard, ShardError> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| ShardError::NotIOverN(s.to_string()))?;
        let (Ok(index), Ok(count)) = (i.trim().parse(), n.trim().parse()) else {
            return Err(ShardError::NotIOverN(s.to_string()));
        };
        if index < count {
            Ok(Shard { index, count })
        } else {
            Err(ShardError::OutOfRange { index, count })
        }
    }

    /// Whether point `p` belongs to this shard.
    pub fn owns(&self, p: usize) -> bool {
        p % self.count == self.index
    }
}

/// Why a shard `I/N` is not usable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Not two whole numbers around a `/`.
    #[error("`{0}` is not I/N (two whole numbers)")]
    NotIOverN(String),
    /// `I ≥ N`.
    #[error("`{index}/{count}`: the index must be below the count (0 ≤ I < N)")]
    OutOfRange {
        /// I.
        index: usize,
        /// N.
        count: usize,
    },
}

/// One row of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The point's number in the unsharded grid.
    pub point: usize,
    /// `(key, value)` per axis.
    pub varied: Vec<(String, String)>,
    /// KV pool.
    pub kv_capacity_tokens: u64,
    /// `safe`, `tight`, `oom`, or `unknown` when the scenario has no memory model inputs or is
    /// vLLM's (which starts or refuses to: `servesim memory` says which).
    pub oom_verdict: String,
    /// `steady`, `overloaded` or `no_steady_window`.
    pub regime: &'static str,
    /// Steady completion rate (none without a steady state).
    pub steady_req_per_s: Option<f64>,
    /// Its 95 % interval.
    pub steady_req_per_s_ci: Option<[f64; 2]>,
    /// Completions per second between the start-up and the drain, steady or overloaded: what
    /// the server sustains.
    pub sustained_req_per_s: Option<f64>,
    /// Output tokens per second in that window.
    pub gen_tok_per_s: Option<f64>,
    /// Mean running requests in that window.
    pub mean_running: Option<f64>,
    /// TTFT median.
    pub ttft_p50_ms: f64,
    /// TTFT p99.
    pub ttft_p99_ms: f64,
    /// E2E median.
    pub e2e_p50_ms: f64,
    /// E2E p99.
    pub e2e_p99_ms: f64,
    /// When the last request was answered; `None` if `max_sim_s` stopped the run first.
    pub time_to_finish_s: Option<f64>,
    /// TPOT median.
    pub tpot_p50_ms: f64,
    /// TPOT p99.
    pub tpot_p99_ms: f64,
    /// ITL p99 (every gap between successive tokens, pooled).
    pub itl_p99_ms: f64,
    /// TTFT p99 of the requests sent in the steady window.
    pub steady_ttft_p99_ms: Option<f64>,
    /// TPOT p99 of the requests sent in the steady window.
    pub steady_tpot_p99_ms: Option<f64>,
    /// Lifetime rate at the end.
    pub lifetime_req_per_s: f64,
    /// Mean token usage in the window between the start-up and the drain.
    pub mean_token_usage: Option<f64>,
    /// Retractions.
    pub retractions: u64,
    /// Completed requests.
    pub requests_completed: u64,
    /// Prompt tokens found in the prefix cache at first admissions ÷ their prompt tokens (0
    /// when nothing is shared).
    pub cached_token_share: f64,
}

/// A point that could not be simulated.
#[derive(Debug, thiserror::Error)]
pub enum PointError {
    /// Its scenario is invalid.
    #[error("point {point} ({sets}) is invalid")]
    Invalid {
        /// Point number.
        point: usize,
        /// Its overrides.
        sets: String,
        /// The problems.
        #[source]
        error: ScenarioError,
    },
    /// Its run failed.
    #[error("point {point} ({sets}) failed")]
    Failed {
        /// Point number.
        point: usize,
        /// Its overrides.
        sets: String,
        /// Why.
        #[source]
        error: SimError,
    },
}

/// Validate every point (so all problems are known before anything runs).
pub fn validate_points(
    source: &Source,
    base_sets: &[String],
    points: &[Vec<String>],
) -> Result<Vec<Scenario>, Vec<PointError>> {
    let mut ok = Vec::with_capacity(points.len());
    let mut errors = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let sets: Vec<String> = base_sets.iter().chain(p).cloned().collect();
        match scenario::load(source, &sets) {
            Ok(sc) => ok.push(sc),
            Err(error) => errors.push(PointError::Invalid {
                point: i,
                sets: p.join(" "),
                error,
            }),
        }
    }
    if errors.is_empty() {
        Ok(ok)
    } else {
        Err(errors)
    }
}

/// Simulate one point.
pub fn run_point(
    point: usize,
    sets: &[String],
    sc: &Scenario,
    opts: &RunOptions,
) -> Result<Row, PointError> {
    let (r, a) = engine::run_analysed(sc, opts).map_err(|error| PointError::Failed {
        point,
        sets: sets.join(" "),
        error,
    })?;
    Ok(row(point, sets, sc, &r, &a))
}

fn row(point: usize, sets: &[String], sc: &Scenario, r: &RunResult, a: &Analysis) -> Row {
    let ttft = r.latency.ttft_ms.stats();
    let e2e = r.latency.e2e_ms.stats();
    let tpot = r.latency.tpot_ms.stats();
    let dur = r.totals.sim_duration_s;
    let window = a.window.as_ref().map(|w| &w.span);
    let steady = a.steady();
    Row {
        point,
        varied: sets
            .iter()
            .map(|s| {
                let (k, v) = s.split_once('=').unwrap_or((s, ""));
                (k.to_string(), v.to_string())
            })
            .collect(),
        kv_capacity_tokens: r.kv_capacity_tokens,
        oom_verdict: sc
            .memory
            .as_ref()
            .and_then(|m| m.verdict())
            .map_or("unknown", |v| v.as_str())
            .to_string(),
        regime: match a.regime {
            Regime::Steady { .. } => "steady",
            Regime::Overloaded(_) => "overloaded",
            Regime::NoSteadyWindow(_) => "no_steady_window",
        },
        steady_req_per_s: steady.map(|w| w.span.req_per_s),
        steady_req_per_s_ci: steady.and_then(|w| w.ci95()),
        sustained_req_per_s: window.map(|w| w.req_per_s),
        gen_tok_per_s: window.map(|w| w.output_tok_per_s),
        mean_running: window.map(|w| w.mean_running),
        ttft_p50_ms: ttft.p50,
        ttft_p99_ms: ttft.p99,
        e2e_p50_ms: e2e.p50,
        e2e_p99_ms: e2e.p99,
        time_to_finish_s: (r.stop == StopReason::AllAnswered).then_some(dur),
        tpot_p50_ms: tpot.p50,
        tpot_p99_ms: tpot.p99,
        itl_p99_ms: r.latency.itl_ms.quantile(0.99),
        steady_ttft_p99_ms: steady.map(|_| r.steady_latency.ttft_ms.quantile(0.99)),
        steady_tpot_p99_ms: steady.map(|_| r.steady_latency.tpot_ms.quantile(0.99)),
        lifetime_req_per_s: if dur > 0.0 {
            r.totals.requests_completed as f64 / dur
        } else {
            0.0
        },
        mean_token_usage: window.map(|w| w.mean_token_usage),
        retractions: r.totals.retractions,
        requests_completed: r.totals.requests_completed,
        cached_token_share: {
            let c = &r.counters;
            if c.first_admission_prompt_tokens > 0 {
                c.cached_prompt_tokens as f64 / c.first_admission_prompt_tokens as f64
            } else {
                0.0
            }
        },
    }
}

/// The columns after the varied keys, as written to `sweep.csv`: the contract of issue #3
/// (through `time_to_finish_s`), then extras; the point number comes last so that `merge`
/// finds it.
#[derive(Debug, Default, Serialize)]
struct CsvMetrics<'a> {
    kv_capacity_tokens: u64,
    oom_verdict: &'a str,
    steady_req_per_s: Option<Fixed<6>>,
    steady_req_per_s_ci_low: Option<Fixed<6>>,
    steady_req_per_s_ci_high: Option<Fixed<6>>,
    gen_tok_per_s: Option<Fixed<3>>,
    mean_running: Option<Fixed<3>>,
    ttft_p50_ms: Fixed<3>,
    ttft_p99_ms: Fixed<3>,
    e2e_p50_ms: Fixed<3>,
    e2e_p99_ms: Fixed<3>,
    time_to_finish_s: Option<Fixed<3>>,
    regime: &'a str,
    sustained_req_per_s: Option<Fixed<6>>,
    tpot_p50_ms: Fixed<3>,
    tpot_p99_ms: Fixed<3>,
    itl_p99_ms: Fixed<3>,
    steady_ttft_p99_ms: Option<Fixed<3>>,
    steady_tpot_p99_ms: Option<Fixed<3>>,
    lifetime_req_per_s: Fixed<6>,
    mean_token_usage: Option<Fixed<4>>,
    retractions: u64,
    requests_completed: u64,
    cached_token_share: Fixed<4>,
    point: usize,
}

impl Row {
    /// The CSV record: the varied values, then the metrics.
    fn csv(&self) -> (Vec<&str>, CsvMetrics<'_>) {
        let values = self.varied.iter().map(|(_, v)| v.as_str()).collect();
        let metrics = CsvMetrics {
            kv_capacity_tokens: self.kv_capacity_tokens,
            oom_verdict: &self.oom_verdict,
            steady_req_per_s: self.steady_req_per_s.map(Fixed),
            steady_req_per_s_ci_low: self.steady_req_per_s_ci.map(|c| Fixed(c[0])),
            steady_req_per_s_ci_high: self.steady_req_per_s_ci.map(|c| Fixed(c[1])),
            gen_tok_per_s: self.gen_tok_per_s.map(Fixed),
            mean_running: self.mean_running.map(Fixed),
            ttft_p50_ms: Fixed(self.ttft_p50_ms),
            ttft_p99_ms: Fixed(self.ttft_p99_ms),
            e2e_p50_ms: Fixed(self.e2e_p50_ms),
            e2e_p99_ms: Fixed(self.e2e_p99_ms),
            time_to_finish_s: self.time_to_finish_s.map(Fixed),
            regime: self.regime,
            sustained_req_per_s: self.sustained_req_per_s.map(Fixed),
            tpot_p50_ms: Fixed(self.tpot_p50_ms),
            tpot_p99_ms: Fixed(self.tpot_p99_ms),
            itl_p99_ms: Fixed(self.itl_p99_ms),
            steady_ttft_p99_ms: self.steady_ttft_p99_ms.map(Fixed),
            steady_tpot_p99_ms: self.steady_tpot_p99_ms.map(Fixed),
            lifetime_req_per_s: Fixed(self.lifetime_req_per_s),
            mean_token_usage: self.mean_token_usage.map(Fixed),
            retractions: self.retractions,
            requests_completed: self.requests_completed,
            cached_token_share: Fixed(self.cached_token_share),
            point: self.point,
        };
        (values, metrics)
    }
}

/// The CSV columns for these axes: the varied keys, then the metrics.
pub fn columns(keys: &[String]) -> Vec<String> {
    let mut cols = keys.to_vec();
    cols.extend(csv_rows::header::<CsvMetrics>());
    cols
}

/// The CSV header line for these axes (no newline), as a shard's manifest records it.
pub fn header(keys: &[String]) -> String {
    let mut line = String::from_utf8(csv_rows::to_bytes(&columns(keys), [(); 0]))
        .expect("invariant: the CSV is UTF-8");
    line.pop();
    line
}

/// The whole CSV for rows in point order.
pub fn to_csv(keys: &[String], rows: &[Row]) -> Vec<u8> {
    csv_rows::to_bytes(&columns(keys), rows.iter().map(Row::csv))
}

/// What a shard writes beside its `sweep.csv`, so that `merge` can check the shards belong
/// together: the same servesim, scenario text, overrides and axes.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ShardManifest {
    /// servesim's version.
    pub servesim_version: String,
    /// The sweep's scenario name.
    pub scenario: String,
    /// SHA-256 of the scenario file's text, in hex.
    pub scenario_sha256: String,
    /// The `--set` overrides of every point.
    pub sets: Vec<String>,
    /// The `--vary` axes.
    pub axes: Vec<Axis>,
    /// The CSV header.
    pub header: String,
    /// Points in the whole grid.
    pub total_points: usize,
    /// This shard's index.
    pub shard_index: usize,
    /// Number of shards.
    pub shard_count: usize,
}

/// Why shards cannot be merged.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MergeError {
    /// A shard's files are unusable.
    #[error("`{dir}`: {why}")]
    BadShard {
        /// The directory.
        dir: String,
        /// What is wrong.
        why: String,
    },
    /// Shards from different sweeps.
    #[error("`{dir}` belongs to another sweep ({why})")]
    Mismatch {
        /// The directory.
        dir: String,
        /// What differs.
        why: String,
    },
    /// Some points are missing or duplicated.
    #[error("the shards do not cover the sweep: {0}")]
    Coverage(String),
}

/// Merge shard CSVs (with their manifests) into the unsharded CSV. `shards` are
/// `(directory name, manifest, csv text)`. The rows are read and written back through the
/// same CSV writer as an unsharded sweep's, so the result is byte-identical to it.
pub fn merge(shards: &[(String, ShardManifest, String)]) -> Result<Vec<u8>, MergeError> {
    let Some((_, first, _)) = shards.first() else {
        return Err(MergeError::Coverage("no shards given".into()));
    };
    let mut seen_shards = vec![false; first.shard_count];
    let mut header = None;
    let mut rows: Vec<(usize, csv::StringRecord)> = Vec::with_capacity(first.total_points);
    for (dir, m, text) in shards {
        let bad = |why: String| MergeError::BadShard {
            dir: dir.clone(),
            why,
        };
        let list = |sets: &[String]| match sets {
            [] => "none".to_string(),
            _ => sets.join(" "),
        };
        let other = &shards[0].0;
        let differs = [
            (
                m.servesim_version != first.servesim_version,
                format!(
                    "servesim version ({}) differs from `{other}`'s ({})",
                    m.servesim_version, first.servesim_version
                ),
            ),
            (
                m.scenario != first.scenario,
                format!("scenario name differs from `{other}`'s"),
            ),
            (
                m.scenario_sha256 != first.scenario_sha256,
                format!("scenario file's text differs from `{other}`'s"),
            ),
            (
                m.sets != first.sets,
                format!(
                    "--set overrides ({}) differ from `{other}`'s ({})",
                    list(&m.sets),
                    list(&first.sets)
                ),
            ),
            (
                m.axes != first.axes,
                format!("--vary axes differ from `{other}`'s"),
            ),
            (
                m.header != first.header,
                format!("header differs from `{other}`'s"),
            ),
        ];
        if let Some((_, what)) = differs.iter().find(|(d, _)| *d) {
            return Err(MergeError::Mismatch {
                dir: dir.clone(),
                why: format!("its {what}"),
            });
        }
        if m.total_points != first.total_points || m.shard_count != first.shard_count {
            return Err(MergeError::Mismatch {
                dir: dir.clone(),
                why: format!(
                    "{} points in {} shards, not {} in {}",
                    m.total_points, m.shard_count, first.total_points, first.shard_count
                ),
            });
        }
        let shard = Shard {
            index: m.shard_index,
            count: m.shard_count,
        };
        if shard.index >= shard.count {
            return Err(bad(format!(
                "its manifest names shard {}/{}",
                shard.index, shard.count
            )));
        }
        if std::mem::replace(&mut seen_shards[shard.index], true) {
            return Err(MergeError::Coverage(format!(
                "shard {}/{} is given twice",
                m.shard_index, m.shard_count
            )));
        }
        if text.lines().next() != Some(m.header.as_str()) {
            return Err(bad(
                "sweep.csv does not start with the manifest's header".into()
            ));
        }
        let mut records = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(text.as_bytes())
            .into_records();
        let head = records
            .next()
            .and_then(Result::ok)
            .ok_or_else(|| bad("sweep.csv has no header".into()))?;
        header.get_or_insert_with(|| head.iter().map(str::to_string).collect::<Vec<_>>());
        for record in records {
            let record = record.map_err(|e| bad(format!("sweep.csv: {e}")))?;
            let point = record
                .iter()
                .next_back()
                .and_then(|p| p.parse::<usize>().ok())
                .filter(|p| *p < m.total_points && shard.owns(*p))
                .ok_or_else(|| {
                    bad(format!(
                        "a row has no valid point number: {}",
                        record.iter().collect::<Vec<_>>().join(",")
                    ))
                })?;
            rows.push((point, record));
        }
    }
    if let Some(missing) = seen_shards.iter().position(|s| !s) {
        return Err(MergeError::Coverage(format!(
            "shard {missing}/{} is missing",
            first.shard_count
        )));
    }
    rows.sort_by_key(|(p, _)| *p);
    for (i, (p, _)) in rows.iter().enumerate() {
        if *p != i {
            return Err(MergeError::Coverage(format!(
                "point {i} is missing or duplicated"
            )));
        }
    }
    if rows.len() != first.total_points {
        return Err(MergeError::Coverage(format!(
            "{} rows for {} points",
            rows.len(),
            first.total_points
        )));
    }
    let header = header.expect("invariant: every shard has a header, and there is one");
    Ok(csv_rows::to_bytes(
        &header,
        rows.iter().map(|(_, r)| r.iter().collect::<Vec<_>>()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_points() {
        let s: Vec<Shard> = (0..3)
            .map(|i| Shard::parse(&format!("{i}/3")).unwrap())
            .collect();
        for p in 0..10 {
            assert_eq!(s.iter().filter(|x| x.owns(p)).count(), 1);
        }
        assert_eq!(
            Shard::parse("3/3"),
            Err(ShardError::OutOfRange { index: 3, count: 3 })
        );
        assert_eq!(
            Shard::parse("0/0"),
            Err(ShardError::OutOfRange { index: 0, count: 0 })
        );
        assert_eq!(Shard::parse("x"), Err(ShardError::NotIOverN("x".into())));
        assert_eq!(
            Shard::parse("1/x"),
            Err(ShardError::NotIOverN("1/x".into()))
        );
    }

    fn row(point: usize, value: &str) -> Row {
        Row {
            point,
            varied: vec![("workload.output_tokens".into(), value.into())],
            kv_capacity_tokens: 1000 + point as u64,
            oom_verdict: "unknown".into(),
            regime: "steady",
            steady_req_per_s: Some(0.1 * point as f64),
            steady_req_per_s_ci: Some([0.0, 1.0]),
            sustained_req_per_s: Some(0.1 * point as f64),
            gen_tok_per_s: Some(10.0),
            mean_running: Some(2.0),
            ttft_p50_ms: 1.0,
            ttft_p99_ms: 2.0,
            e2e_p50_ms: 3.0,
            e2e_p99_ms: 4.0,
            time_to_finish_s: (point != 1).then_some(60.0),
            tpot_p50_ms: 5.0,
            tpot_p99_ms: 6.0,
            itl_p99_ms: 7.0,
            steady_ttft_p99_ms: Some(1.5),
            steady_tpot_p99_ms: None,
            lifetime_req_per_s: 0.05,
            mean_token_usage: Some(0.5),
            retractions: 0,
            requests_completed: 10,
            cached_token_share: 0.0,
        }
    }

    #[test]
    fn merged_shards_are_the_unsharded_bytes_even_with_quoted_values() {
        let keys = vec!["workload.output_tokens".to_string()];
        let values = [
            "1",
            "{ dist = \"constant\", value = 5 }",
            "[1,\n2]",
            "4",
            "5",
        ];
        let rows: Vec<Row> = values.iter().enumerate().map(|(i, v)| row(i, v)).collect();
        let whole = to_csv(&keys, &rows);
        assert!(
            String::from_utf8_lossy(&whole).contains("\"{ dist = \"\"constant\"\", value = 5 }\"")
        );
        let shards: Vec<(String, ShardManifest, String)> = (0..2)
            .rev()
            .map(|i| {
                let mine: Vec<Row> = rows.iter().filter(|r| r.point % 2 == i).cloned().collect();
                let manifest = ShardManifest {
                    servesim_version: "test".into(),
                    scenario: "s".into(),
                    scenario_sha256: "0".into(),
                    sets: vec![],
                    axes: vec![],
                    header: header(&keys),
                    total_points: rows.len(),
                    shard_index: i,
                    shard_count: 2,
                };
                let text = String::from_utf8(to_csv(&keys, &mine)).unwrap();
                (format!("shard{i}"), manifest, text)
            })
            .collect();
        assert_eq!(merge(&shards).unwrap(), whole);
        assert_eq!(
            merge(&shards[..1]),
            Err(MergeError::Coverage("shard 0/2 is missing".into()))
        );
        // A shard of another sweep: another scenario text, other overrides or other axes.
        for change in 0..3 {
            let mut other = shards.clone();
            let m = &mut other[1].1;
            match change {
                0 => m.scenario_sha256 = "1".into(),
                1 => m.sets = vec!["seed=2".into()],
                _ => m.axes = vec![parse_vary("a=1,2").unwrap()],
            }
            assert!(
                matches!(merge(&other), Err(MergeError::Mismatch { .. })),
                "{change}"
            );
        }
    }
}
