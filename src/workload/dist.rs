//! Token-length distributions: their declaration ([`LENGTHS`]), reading and sampling.
//!
//! Each distribution draws a real number, which is rounded to the nearest integer and clamped to
//! `[min, max]` (with `min ≥ 1`): token counts are integers of at least one. `normal` is
//! truncated rather than clamped: draws outside `[min, max]` are redrawn (up to 1000 times, then
//! clamped), as the scenario contract says.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::RngExt;
use rand_distr::{Distribution, Exp, Gamma, LogNormal, Normal};

use crate::diagnostic::did_you_mean;
use crate::rng::Stream;
use crate::settings::{keys, Bad, Tagged, Values, Variant};

macro_rules! dists {
    ($($name:literal [$($req:literal),*] [$($opt:literal),*] $needs:literal $meaning:literal;)*) => {
        const VARIANTS: &[Variant] = &[$(Variant { name: $name, required: &[$($req),*], optional: &[$($opt),*], needs: $needs, meaning: $meaning }),*];
        const DIST_NAMES: &[&str] = &[$($name),*];
    };
}

dists! {
"constant" ["value"] ["min", "max"] "" "always `value`";
"uniform" ["min", "max"] [] "" "integers uniform on `[min, max]`";
"normal" ["mean", "std"] ["min", "max"] "" "truncated to `[min, max]`";
"lognormal" ["mean", "cv"] ["min", "max"] "" "mean and cv of the result, not of the underlying normal";
"gamma" ["mean", "cv"] ["min", "max"] "" "shape 1/cv², scale mean × cv²";
"exponential" ["mean"] ["min", "max"] "" "rate 1/mean";
"empirical" [] ["values", "file", "column", "min", "max"] "`values`, or `file` and `column`" "resamples `values`, or the `column` of `file` (CSV with a header row, or JSON Lines: .jsonl, .ndjson)";
}

const MAX: u64 = MAX_TOKENS_PER_REQUEST as u64;

keys! {
/// The parameters of the length distributions (paths relative to the distribution's table).
PARAMS:
"dist" [OneOf(DIST_NAMES), Required, All, ""]
    "the distribution (table above)", e.g. r#""lognormal""#;
"value" [Number(Within(1.0, MAX as f64)), Required, All, "tokens"]
    "the constant length", e.g. "1024";
"mean" [Number(Positive), Required, All, "tokens"] "the mean length", e.g. "300";
"std" [Number(Positive), Required, All, "tokens"]
    "the standard deviation (for a fixed length use dist = \"constant\")", e.g. "100";
"cv" [Number(Within(1e-6, 100.0)), Required, All, ""]
    "coefficient of variation (std / mean) of the result", e.g. "0.5";
"min" [Integer(1, MAX), Int(1), All, "tokens"] "the smallest length drawn", e.g. "1";
"max" [Integer(1, MAX), Int(MAX), All, "tokens"] "the largest length drawn", e.g. "16384";
"values" [Numbers(Positive), Absent("none"), All, "tokens"]
    "the lengths to resample", e.g. "[120, 4096, 900]";
"file" [Text, Absent("none"), All, ""]
    "a CSV file with a header row, relative to the scenario (with column)", e.g. r#""lengths.csv""#;
"column" [Text, Absent("none"), All, ""]
    "the CSV column holding token counts", e.g. r#""completion_tokens""#;
}

/// A length distribution, as a scenario writes it: an inline table `{ dist = "…", … }` whose
/// `dist` names the parameters it takes.
pub const LENGTHS: Tagged = Tagged {
    tag: "dist",
    noun: "distribution",
    accepts: "length distribution",
    intro:
        "Length distributions are inline tables `{ dist = \"…\", … }`; every one also takes the \
            clamps `min` and `max` (declared in `src/workload/dist.rs`).",
    variants: VARIANTS,
    params: PARAMS,
};

/// The largest token count servesim accepts for one request (10 million).
pub const MAX_TOKENS_PER_REQUEST: u32 = 10_000_000;

/// The most values an empirical distribution may hold.
pub const MAX_EMPIRICAL_VALUES: usize = 10_000_000;

/// Why a CSV column of token counts could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    /// The file cannot be opened or read.
    #[error("cannot read CSV file `{}`: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reader's reason.
        reason: String,
    },
    /// No column has this name.
    #[error("`{}` has no column \"{column}\"", path.display())]
    NoColumn {
        /// The file.
        path: PathBuf,
        /// The column asked for.
        column: String,
        /// The columns of the header row.
        columns: Vec<String>,
    },
    /// The file is not text in rows (a line longer than [`crate::files::MAX_LINE_BYTES`]).
    #[error("`{}`: {reason}", path.display())]
    NotRows {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A row is malformed.
    #[error("`{}` row {row}: {reason}", path.display())]
    Row {
        /// The file.
        path: PathBuf,
        /// Row number, the header being row 1.
        row: usize,
        /// The reader's reason.
        reason: String,
    },
    /// A cell is not a positive number.
    #[error("`{}` row {row}, column \"{column}\": \"{cell}\" is not a positive token count", path.display())]
    NotACount {
        /// The file.
        path: PathBuf,
        /// Row number, the header being row 1.
        row: usize,
        /// The column.
        column: String,
        /// The cell as written.
        cell: String,
    },
    /// More than [`MAX_EMPIRICAL_VALUES`] values.
    #[error("`{}` has more than {MAX_EMPIRICAL_VALUES} values", path.display())]
    TooMany {
        /// The file.
        path: PathBuf,
    },
    /// More bytes than a data file may have.
    #[error("`{}` holds more than the {} bytes a data file may have", path.display(), super::datafile::MAX_FILE_BYTES)]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The column holds no value.
    #[error("column \"{column}\" of `{}` holds no values", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
        /// The column.
        column: String,
    },
}

impl CsvError {
    /// How to fix it (for [`CsvError::NoColumn`], the caller adds the closest column name).
    pub fn hint(&self) -> String {
        match self {
            CsvError::Read { .. } => "the path is relative to the scenario file's directory".into(),
            CsvError::NoColumn { columns, .. } => format!("columns: {}", columns.join(", ")),
            CsvError::NotRows { .. } => "give a CSV file with a header row".into(),
            CsvError::Row { row: 1, .. } => "the first row must name the columns".into(),
            CsvError::Row { .. } => "fix the CSV syntax".into(),
            CsvError::NotACount { .. } => {
                "every non-empty cell of the column must be a number greater than 0".into()
            }
            CsvError::TooMany { .. } | CsvError::TooLarge { .. } => "subsample the file".into(),
            CsvError::Empty { .. } => "the column must hold at least one token count".into(),
        }
    }
}

/// A cell or column name for a message: at most 60 characters (a wrong file can hold a
/// gigabyte on one line).
fn short(s: &str) -> String {
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The token counts in `column` of a CSV file with a header row (empty cells are skipped).
pub fn read_csv_column(path: &Path, column: &str) -> Result<Vec<f64>, CsvError> {
    let path_buf = || path.to_path_buf();
    let reason = |e: csv::Error| match e.kind() {
        csv::ErrorKind::Io(io) => io.to_string(),
        _ => e.to_string(),
    };
    // Read through the size and line caps of data files: a path to a device or a pipe must
    // not be read until the memory runs out.
    let limit = super::datafile::MAX_FILE_BYTES;
    let file = crate::files::rows_reader(path, limit).map_err(|e| CsvError::Read {
        path: path_buf(),
        reason: e.to_string(),
    })?;
    let mut reader = csv::Reader::from_reader(file);
    let row_error = |e: csv::Error, row: usize| match e.kind() {
        csv::ErrorKind::Io(io) if crate::files::read_error(io).is_some() => CsvError::NotRows {
            path: path_buf(),
            reason: io.to_string(),
        },
        _ => CsvError::Row {
            path: path_buf(),
            row,
            reason: reason(e),
        },
    };
    let headers = reader.headers().map_err(|e| row_error(e, 1))?;
    let Some(index) = headers.iter().position(|h| h.trim() == column) else {
        return Err(CsvError::NoColumn {
            path: path_buf(),
            column: column.into(),
            columns: headers.iter().take(50).map(short).collect(),
        });
    };
    let mut out = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let row = i + 2;
        let record = record.map_err(|e| row_error(e, row))?;
        let cell = record.get(index).unwrap_or("").trim();
        if cell.is_empty() {
            continue;
        }
        match cell.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => out.push(x),
            _ => {
                return Err(CsvError::NotACount {
                    path: path_buf(),
                    row,
                    column: column.into(),
                    cell: short(cell),
                })
            }
        }
        if out.len() > MAX_EMPIRICAL_VALUES {
            return Err(CsvError::TooMany { path: path_buf() });
        }
    }
    if reader.position().byte() > limit {
        return Err(CsvError::TooLarge { path: path_buf() });
    }
    if out.is_empty() {
        return Err(CsvError::Empty {
            path: path_buf(),
            column: column.into(),
        });
    }
    Ok(out)
}

/// A distribution of token counts with its clamps, and its sampler built once from them.
#[derive(Clone, Debug)]
pub struct LengthDist {
    shape: Shape,
    min: u32,
    max: u32,
    sampler: Sampler,
}

/// A shape's sampler, its parameters derived once ([`LengthDist::new`]) by the operations a
/// draw would otherwise repeat: the same numbers in the same order, so the same draws.
#[derive(Clone, Debug)]
enum Sampler {
    Constant(f64),
    Uniform,
    /// With the truncation bounds `[lo, hi)` on the unrounded draw.
    Normal(Normal<f64>, f64, f64),
    LogNormal(LogNormal<f64>),
    Gamma(Gamma<f64>),
    Exponential(Exp<f64>),
    Empirical(Arc<[f64]>),
}

impl Sampler {
    fn new(shape: &Shape, min: u32, max: u32) -> Self {
        match shape {
            Shape::Constant { value } => Sampler::Constant(*value),
            Shape::Uniform => Sampler::Uniform,
            Shape::Normal { mean, std } => Sampler::Normal(
                Normal::new(*mean, *std).expect("invariant: validated normal parameters"),
                f64::from(min) - 0.5,
                f64::from(max) + 0.5,
            ),
            Shape::LogNormal { mean, cv } => {
                let sigma2 = (1.0 + cv * cv).ln();
                let mu = mean.ln() - sigma2 / 2.0;
                Sampler::LogNormal(
                    LogNormal::new(mu, sigma2.sqrt())
                        .expect("invariant: validated lognormal parameters"),
                )
            }
            Shape::Gamma { mean, cv } => {
                let shape = 1.0 / (cv * cv);
                Sampler::Gamma(
                    Gamma::new(shape, mean / shape).expect("invariant: validated gamma parameters"),
                )
            }
            Shape::Exponential { mean } => Sampler::Exponential(
                Exp::new(1.0 / mean).expect("invariant: validated exponential mean"),
            ),
            Shape::Empirical { values } => Sampler::Empirical(values.clone()),
        }
    }
}

/// The shape of a length distribution, parameterised as the scenario writes it.
#[derive(Clone, Debug)]
pub enum Shape {
    /// Always `value`.
    Constant {
        /// The value.
        value: f64,
    },
    /// Integers uniform on `[min, max]` inclusive (the distribution's own bounds are the clamps).
    Uniform,
    /// Normal with this mean and standard deviation, truncated to `[min, max]`.
    Normal {
        /// Mean of the untruncated normal.
        mean: f64,
        /// Standard deviation of the untruncated normal.
        std: f64,
    },
    /// Log-normal whose *result* has this mean and coefficient of variation.
    LogNormal {
        /// Mean of the result.
        mean: f64,
        /// Coefficient of variation (std / mean) of the result.
        cv: f64,
    },
    /// Gamma with this mean and coefficient of variation (shape = 1/cv², scale = mean·cv²).
    Gamma {
        /// Mean.
        mean: f64,
        /// Coefficient of variation.
        cv: f64,
    },
    /// Exponential with this mean.
    Exponential {
        /// Mean.
        mean: f64,
    },
    /// Resample uniformly from these values (from the scenario or a CSV column).
    Empirical {
        /// The values, each > 0 and finite.
        values: Arc<[f64]>,
    },
}

impl Shape {
    /// The shape named `dist` (other than "empirical"), its parameters read with `param`.
    pub fn new(dist: &str, param: impl Fn(&str) -> f64) -> Option<Shape> {
        Some(match dist {
            "constant" => Shape::Constant {
                value: param("value"),
            },
            "uniform" => Shape::Uniform,
            "normal" => Shape::Normal {
                mean: param("mean"),
                std: param("std"),
            },
            "lognormal" => Shape::LogNormal {
                mean: param("mean"),
                cv: param("cv"),
            },
            "gamma" => Shape::Gamma {
                mean: param("mean"),
                cv: param("cv"),
            },
            "exponential" => Shape::Exponential {
                mean: param("mean"),
            },
            _ => return None,
        })
    }
}

impl LengthDist {
    /// Read the distribution declared at `path` (its parameters were checked by the walk).
    pub fn read(v: &mut dyn Values, path: &str) -> Result<Self, Bad> {
        let p = |name: &str| format!("{path}.{name}");
        let name: String = v.get(&p("dist"))?;
        let d = VARIANTS
            .iter()
            .find(|d| d.name == name)
            .expect("invariant: dist names are declared");
        // A parameter with a problem, or a missing one, was reported by the walk.
        for q in d.required.iter().chain(d.optional) {
            if v.given(&p(q))?.is_none() && d.required.contains(q) {
                return Err(Bad);
            }
        }
        let (min, max): (u32, u32) = (v.get(&p("min"))?, v.get(&p("max"))?);
        let param = |q: &str| v.get::<f64>(&p(q)).expect("invariant: a checked number");
        let shape = match Shape::new(&name, param) {
            Some(shape) => shape,
            None => Shape::Empirical {
                values: empirical(v, path)?,
            },
        };
        if min > max {
            let msg = format!("min = {min} is greater than max = {max}");
            return Err(v.fail(&p("min"), path, msg, "swap them, or widen the range"));
        }
        Ok(LengthDist::new(shape, min, max))
    }
}

/// Whether a file name says JSON Lines.
fn is_json_lines(file: &str) -> bool {
    let ext = Path::new(file).extension().and_then(|e| e.to_str());
    ext.is_some_and(|e| e.eq_ignore_ascii_case("jsonl") || e.eq_ignore_ascii_case("ndjson"))
}

/// `values = [...]`, or `file` and `column` of a CSV or JSON Lines file.
fn empirical(v: &mut dyn Values, path: &str) -> Result<Arc<[f64]>, Bad> {
    let p = |name: &str| format!("{path}.{name}");
    let values: Option<Arc<[f64]>> = v.opt(&p("values"))?;
    let (file, column): (Option<String>, Option<String>) =
        (v.opt(&p("file"))?, v.opt(&p("column"))?);
    match (values, file, column) {
        (Some(v_), None, None) if v_.is_empty() => {
            Err(v.bad(&p("values"), "is empty", "give at least one token count"))
        }
        (Some(v_), None, None) if v_.len() > MAX_EMPIRICAL_VALUES => {
            let msg = format!("has {} values, more than {MAX_EMPIRICAL_VALUES}", v_.len());
            let hint = "use file = … and column = … for large samples";
            Err(v.bad(&p("values"), msg, hint))
        }
        (Some(values), None, None) => Ok(values),
        (None, Some(file), Some(column)) if is_json_lines(&file) => {
            match super::datafile::json_lines_column(&v.input(&file), &column, MAX_EMPIRICAL_VALUES)
            {
                Ok(values) => Ok(values.into()),
                Err(e) => Err(v.bad(&p("file"), format!("{file} {}", e.message), e.hint)),
            }
        }
        (None, Some(file), Some(column)) => match read_csv_column(&v.input(&file), &column) {
            Ok(values) => Ok(values.into()),
            Err(e) => {
                let guess = match &e {
                    CsvError::NoColumn { columns, .. } => {
                        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
                        did_you_mean(&column, &columns)
                            .map(|g| format!("did you mean column \"{g}\"? "))
                    }
                    _ => None,
                };
                let hint = guess.unwrap_or_default() + &e.hint();
                Err(v.bad(&p("file"), e.to_string(), hint))
            }
        },
        (None, None, None) => {
            let msg = format!("required key is missing in [{path}]");
            let hint = "empirical needs values = [ … ] or file = \"….csv\" with column = \"…\"";
            Err(v.fail(&p("values"), path, msg, hint))
        }
        (Some(_), _, _) => {
            let msg = "give either values or file and column, not both";
            Err(v.fail(&p("values"), path, msg, "remove one of them"))
        }
        (None, file, _) => {
            let (q, why) = match file {
                Some(_) => ("column", "empirical with a file needs column: "),
                None => ("file", "empirical with a column needs file: "),
            };
            Err(v.missing(&p(q), why))
        }
    }
}

impl LengthDist {
    /// The distribution `shape` clamped to `[min, max]` (`1 ≤ min ≤ max`), its parameters
    /// valid ([`LengthDist::read`] checks them).
    pub fn new(shape: Shape, min: u32, max: u32) -> Self {
        let sampler = Sampler::new(&shape, min, max);
        LengthDist {
            shape,
            min,
            max,
            sampler,
        }
    }

    /// A constant length.
    pub fn constant(n: u32) -> Self {
        let shape = Shape::Constant {
            value: f64::from(n),
        };
        LengthDist::new(shape, 1, MAX_TOKENS_PER_REQUEST)
    }

    /// The shape, as the scenario writes it.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The smallest value drawn (at least 1).
    pub fn min(&self) -> u32 {
        self.min
    }

    /// The largest value drawn.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Draw one token count.
    #[inline(always)]
    pub fn sample(&self, rng: &mut Stream) -> u32 {
        let x = match &self.sampler {
            Sampler::Constant(value) => *value,
            Sampler::Uniform => return rng.random_range(self.min..=self.max),
            Sampler::Normal(d, lo, hi) => {
                let mut x = d.sample(rng);
                for _ in 0..1000 {
                    if x >= *lo && x < *hi {
                        break;
                    }
                    x = d.sample(rng);
                }
                x
            }
            Sampler::LogNormal(d) => d.sample(rng),
            Sampler::Gamma(d) => d.sample(rng),
            Sampler::Exponential(d) => d.sample(rng),
            Sampler::Empirical(values) => values[rng.random_range(0..values.len())],
        };
        self.clamp(x)
    }

    /// `x` rounded to the nearest integer (half away from zero, as [`f64::round`]) and
    /// clamped to `[min, max]`; NaN gives `min`.
    #[inline(always)]
    fn clamp(&self, x: f64) -> u32 {
        // Rounding is monotone and keeps integers, so rounding then clamping to integer bounds
        // is clamping then rounding (`tests::clamp_reference` is the first way).
        if x >= f64::from(self.min) {
            if x > f64::from(self.max) {
                return self.max;
            }
            // Below 2^32 the fraction `x − ⌊x⌋` is exact, so rounding is a truncation and one
            // comparison (`f64::round` is a libm call on the baseline x86-64 target); the
            // result stays within `max`.
            let t = x as u32;
            t + u32::from(x - f64::from(t) >= 0.5)
        } else {
            // Below `min`, or NaN.
            self.min
        }
    }

    /// The smallest count the distribution can return.
    pub fn smallest(&self) -> u32 {
        match &self.shape {
            Shape::Constant { value } => self.clamp(*value),
            Shape::Empirical { values } => {
                self.clamp(values.iter().copied().fold(f64::INFINITY, f64::min))
            }
            _ => self.min,
        }
    }

    /// The distribution's nominal mean before rounding and clamping (for reports).
    pub fn nominal_mean(&self) -> f64 {
        match &self.shape {
            Shape::Constant { value } => *value,
            Shape::Uniform => (f64::from(self.min) + f64::from(self.max)) / 2.0,
            Shape::Normal { mean, .. }
            | Shape::LogNormal { mean, .. }
            | Shape::Gamma { mean, .. }
            | Shape::Exponential { mean } => *mean,
            Shape::Empirical { values } => values.iter().sum::<f64>() / values.len() as f64,
        }
    }

    /// A one-line description, e.g. `lognormal(mean 4116, cv 0.45) in [1, 16384]`.
    pub fn describe(&self) -> String {
        let body = match &self.shape {
            Shape::Constant { value } => format!("constant {value}"),
            Shape::Uniform => "uniform".to_string(),
            Shape::Normal { mean, std } => format!("normal(mean {mean}, std {std})"),
            Shape::LogNormal { mean, cv } => format!("lognormal(mean {mean}, cv {cv})"),
            Shape::Gamma { mean, cv } => format!("gamma(mean {mean}, cv {cv})"),
            Shape::Exponential { mean } => format!("exponential(mean {mean})"),
            Shape::Empirical { values } => format!("empirical({} values)", values.len()),
        };
        format!("{body} in [{}, {}]", self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Seeds, StreamName};

    /// [`LengthDist::clamp`] as it was written first, rounding then clamping: its reference.
    fn clamp_reference(min: u32, max: u32, x: f64) -> u32 {
        let r = if (0.0..4_503_599_627_370_496.0).contains(&x) {
            let t = x as i64;
            t + i64::from(x - t as f64 >= 0.5)
        } else {
            let r = x.round();
            if r.is_nan() || r < f64::from(min) {
                return min;
            }
            if r > f64::from(max) {
                return max;
            }
            return r as u32;
        };
        if r < i64::from(min) {
            min
        } else if r > i64::from(max) {
            max
        } else {
            r as u32
        }
    }

    proptest::proptest! {
        #[test]
        fn clamping_rounds_as_its_reference(
            a in 1u32..=u32::MAX,
            b in 1u32..=u32::MAX,
            x in proptest::num::f64::ANY,
            near in -3i64..4,
            half in proptest::bool::ANY,
        ) {
            let (min, max) = (a.min(b), a.max(b));
            let d = LengthDist::new(Shape::Constant { value: 1.0 }, min, max);
            // Any double, and those at and around the bounds and their halves.
            let edge = |n: u32| f64::from(n) + near as f64 + if half { 0.5 } else { 0.0 };
            for x in [x, edge(min), edge(max), f64::from(min) - 0.5, f64::from(max) + 0.5] {
                proptest::prop_assert_eq!(d.clamp(x), clamp_reference(min, max, x), "x = {}", x);
            }
        }
    }

    fn draws(d: &LengthDist, n: usize) -> Vec<u32> {
        let mut rng = Seeds::new(3).stream(StreamName::OutputTokens);
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    fn mean_cv(xs: &[u32]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let v = xs.iter().map(|&x| (f64::from(x) - m).powi(2)).sum::<f64>() / (n - 1.0);
        (m, v.sqrt() / m)
    }

    #[test]
    fn lognormal_is_parameterised_by_the_mean_and_cv_of_the_result() {
        let d = LengthDist::new(
            Shape::LogNormal {
                mean: 4116.0,
                cv: 0.45,
            },
            1,
            MAX_TOKENS_PER_REQUEST,
        );
        let (m, cv) = mean_cv(&draws(&d, 200_000));
        assert!((m / 4116.0 - 1.0).abs() < 0.01, "mean {m}");
        assert!((cv / 0.45 - 1.0).abs() < 0.03, "cv {cv}");
    }

    #[test]
    fn gamma_and_exponential_have_the_requested_mean() {
        let g = LengthDist::new(
            Shape::Gamma {
                mean: 500.0,
                cv: 2.0,
            },
            1,
            MAX_TOKENS_PER_REQUEST,
        );
        let (m, cv) = mean_cv(&draws(&g, 200_000));
        assert!((m / 500.0 - 1.0).abs() < 0.03, "mean {m}");
        assert!((cv / 2.0 - 1.0).abs() < 0.05, "cv {cv}");
        let e = LengthDist::new(
            Shape::Exponential { mean: 300.0 },
            1,
            MAX_TOKENS_PER_REQUEST,
        );
        let (m, cv) = mean_cv(&draws(&e, 200_000));
        assert!((m / 300.0 - 1.0).abs() < 0.02, "mean {m}");
        assert!((cv - 1.0).abs() < 0.03, "cv {cv}");
    }

    #[test]
    fn clamps_hold_and_counts_are_at_least_one() {
        let d = LengthDist::new(
            Shape::Normal {
                mean: 0.0,
                std: 100.0,
            },
            1,
            50,
        );
        assert!(draws(&d, 10_000).iter().all(|&x| (1..=50).contains(&x)));
        let c = LengthDist::new(Shape::Exponential { mean: 1000.0 }, 10, 20);
        let xs = draws(&c, 10_000);
        assert!(xs.iter().all(|&x| (10..=20).contains(&x)));
        assert!(xs.contains(&10) && xs.contains(&20));
    }

    /// A draw as `sample` made it with the parameters derived at each draw.
    fn draw_deriving_each_time(d: &LengthDist, rng: &mut Stream) -> u32 {
        let x = match &d.shape {
            Shape::Constant { value } => *value,
            Shape::Uniform => return rng.random_range(d.min..=d.max),
            Shape::Normal { mean, std } => {
                let n = Normal::new(*mean, *std).unwrap();
                let (lo, hi) = (f64::from(d.min) - 0.5, f64::from(d.max) + 0.5);
                let mut x = n.sample(rng);
                for _ in 0..1000 {
                    if x >= lo && x < hi {
                        break;
                    }
                    x = n.sample(rng);
                }
                x
            }
            Shape::LogNormal { mean, cv } => {
                let sigma2 = (1.0 + cv * cv).ln();
                let mu = mean.ln() - sigma2 / 2.0;
                LogNormal::new(mu, sigma2.sqrt()).unwrap().sample(rng)
            }
            Shape::Gamma { mean, cv } => {
                let shape = 1.0 / (cv * cv);
                Gamma::new(shape, mean / shape).unwrap().sample(rng)
            }
            Shape::Exponential { mean } => Exp::new(1.0 / mean).unwrap().sample(rng),
            Shape::Empirical { values } => values[rng.random_range(0..values.len())],
        };
        let r = x.round();
        if r.is_nan() || r < f64::from(d.min) {
            d.min
        } else if r > f64::from(d.max) {
            d.max
        } else {
            r as u32
        }
    }

    #[test]
    fn parameters_derived_once_give_the_draws_of_deriving_them_each_time() {
        let shapes = [
            Shape::Constant { value: 17.5 },
            Shape::Uniform,
            Shape::Normal {
                mean: 300.0,
                std: 250.0,
            },
            Shape::LogNormal {
                mean: 483.0,
                cv: 0.66,
            },
            Shape::Gamma {
                mean: 500.0,
                cv: 2.0,
            },
            Shape::Gamma {
                mean: 50.0,
                cv: 0.3,
            },
            Shape::Exponential { mean: 100.0 },
            Shape::Empirical {
                values: vec![3.5, 120.0, 4096.0].into(),
            },
        ];
        for shape in shapes {
            for (min, max) in [(1, MAX_TOKENS_PER_REQUEST), (40, 900)] {
                let d = LengthDist::new(shape.clone(), min, max);
                let mut a = Seeds::new(9).stream(StreamName::PromptTokens);
                let mut b = Seeds::new(9).stream(StreamName::PromptTokens);
                for i in 0..5_000 {
                    let (x, y) = (d.sample(&mut a), draw_deriving_each_time(&d, &mut b));
                    assert_eq!(x, y, "{} draw {i}", d.describe());
                }
            }
        }
    }

    #[test]
    fn the_fast_rounding_is_f64_round_then_the_clamps() {
        // The definition `clamp` replaces: round half away from zero, then clamp; NaN → min.
        let reference = |d: &LengthDist, x: f64| {
            let r = x.round();
            if r.is_nan() || r < f64::from(d.min) {
                d.min
            } else if r > f64::from(d.max) {
                d.max
            } else {
                r as u32
            }
        };
        let two52 = 4_503_599_627_370_496.0_f64;
        let mut xs = vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.0,
            -0.5,
            -1.5,
            0.49999999999999994,
            0.5,
            1.5,
            2.5,
            9.5,
            10.499999999999998,
            10.5,
            20.5,
            4_294_967_295.5,
            4_294_967_296.7,
            two52 - 0.5,
            two52 - 1.5,
            two52,
            two52 + 1.0,
            1e300,
        ];
        let mut rng = Seeds::new(5).stream(StreamName::OutputTokens);
        for _ in 0..20_000 {
            let u: f64 = rng.random();
            xs.push(u * 40.0 - 5.0);
            xs.push((u * 60.0).exp2());
            xs.push((u * 30.0).floor() + 0.5);
        }
        for (min, max) in [(1, 20), (10, 20), (1, MAX_TOKENS_PER_REQUEST), (7, 7)] {
            let d = LengthDist::new(Shape::Uniform, min, max);
            for &x in &xs {
                assert_eq!(d.clamp(x), reference(&d, x), "x = {x:e}, [{min}, {max}]");
            }
        }
    }

    #[test]
    fn uniform_is_inclusive_of_both_bounds() {
        let d = LengthDist::new(Shape::Uniform, 3, 5);
        let xs = draws(&d, 1000);
        for v in 3..=5 {
            assert!(xs.contains(&v));
        }
        assert!(xs.iter().all(|&x| (3..=5).contains(&x)));
    }

    #[test]
    fn empirical_resamples_the_given_values() {
        let d = LengthDist::new(
            Shape::Empirical {
                values: vec![7.0, 11.0].into(),
            },
            1,
            MAX_TOKENS_PER_REQUEST,
        );
        let xs = draws(&d, 1000);
        assert!(xs.iter().all(|&x| x == 7 || x == 11));
        assert!(xs.contains(&7) && xs.contains(&11));
    }

    #[test]
    fn a_csv_column_refuses_a_zero_or_an_infinite_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.csv");
        for cell in ["0", "inf"] {
            std::fs::write(&path, format!("n\n5\n{cell}\n")).unwrap();
            match read_csv_column(&path, "n") {
                Err(CsvError::NotACount { row, cell: got, .. }) => {
                    assert_eq!((row, got.as_str()), (3, cell))
                }
                other => panic!("{cell}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_csv_column_is_found_by_its_name_without_the_spaces_around_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.csv");
        std::fs::write(&path, "a, n\n1, 5\n2, 9\n").unwrap();
        assert_eq!(read_csv_column(&path, "n").unwrap(), vec![5.0, 9.0]);
    }

    #[test]
    fn the_nominal_mean_of_empirical_values_is_their_plain_mean_before_the_clamps() {
        // (1000 + 3000 + 500) / 3 = 1500.
        let values = vec![1000.0, 3000.0, 500.0].into();
        let d = LengthDist::new(Shape::Empirical { values }, 600, 2000);
        assert_eq!(d.nominal_mean(), 1500.0);
    }
}
