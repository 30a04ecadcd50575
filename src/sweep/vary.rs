//! `--vary KEY=SPEC`: one axis of a sweep, a range or a list, and the grid of several.

use serde::Serialize;

/// Most points one sweep may have.
pub const MAX_POINTS: usize = 1_000_000;

/// One `--vary` axis.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Axis {
    /// Dotted key path.
    pub key: String,
    /// The values, as TOML text, in order.
    pub values: Vec<String>,
}

/// Why a `--vary` is not usable.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum VaryError {
    /// No `=`.
    #[error("`{0}` is not KEY=SPEC")]
    NotKeySpec(String),
    /// Empty key.
    #[error("`{0}` has an empty key")]
    EmptyKey(String),
    /// Nothing after `=`, or an empty list item.
    #[error("`{0}` has no values")]
    Empty(String),
    /// A range part is not a number.
    #[error("`{spec}`: `{part}` is not a number")]
    NotANumber {
        /// The whole spec.
        spec: String,
        /// The bad part.
        part: String,
    },
    /// `step` is zero, negative, or not finite.
    #[error("`{0}`: the step must be a finite number greater than 0")]
    BadStep(String),
    /// `stop < start`.
    #[error("`{0}`: the range is empty (stop is below start)")]
    EmptyRange(String),
    /// Too many values.
    #[error("`{spec}` has more than {MAX_POINTS} values (about {count:.1e})")]
    TooMany {
        /// The spec.
        spec: String,
        /// How many.
        count: f64,
    },
    /// Two axes vary the same key.
    #[error("`{0}` is varied twice")]
    Twice(String),
}

/// The decimals a number written as `s` shows: those of its mantissa, shifted by its exponent
/// (`0.80` → 2, `5e-3` → 3, `8e-1` → 1, `1.5e3` → 0).
fn decimals(s: &str) -> usize {
    let (mantissa, exponent) = s.split_once(['e', 'E']).unwrap_or((s, "0"));
    let digits = mantissa.split_once('.').map_or(0, |(_, d)| d.len()) as i64;
    let exponent = exponent.parse::<i64>().unwrap_or(0).clamp(-400, 400);
    (digits - exponent).max(0) as usize
}

/// Parse one `KEY=SPEC`.
pub fn parse_vary(arg: &str) -> Result<Axis, VaryError> {
    let (key, spec) = arg
        .split_once('=')
        .ok_or_else(|| VaryError::NotKeySpec(arg.to_string()))?;
    let (key, spec) = (key.trim(), spec.trim());
    if key.is_empty() {
        return Err(VaryError::EmptyKey(arg.to_string()));
    }
    if spec.is_empty() {
        return Err(VaryError::Empty(arg.to_string()));
    }
    let values = if spec.contains(':') && !spec.starts_with(['[', '{', '"', '\'']) {
        range_values(arg, spec)?
    } else {
        let items: Vec<String> = split_list(spec)
            .into_iter()
            .map(|s| s.trim().to_string())
            .collect();
        if items.iter().any(String::is_empty) {
            return Err(VaryError::Empty(arg.to_string()));
        }
        items
    };
    Ok(Axis {
        key: key.to_string(),
        values,
    })
}

/// Split a list at top-level commas (commas inside brackets, braces or quotes stay).
fn split_list(spec: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut quote, mut start) = (0i32, None::<char>, 0usize);
    for (i, c) in spec.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(&spec[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&spec[start..]);
    out
}

fn range_values(arg: &str, spec: &str) -> Result<Vec<String>, VaryError> {
    let parts: Vec<&str> = spec.split(':').map(str::trim).collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
        return Err(VaryError::Empty(arg.to_string()));
    }
    let num = |p: &str| {
        p.replace('_', "")
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| VaryError::NotANumber {
                spec: arg.to_string(),
                part: p.to_string(),
            })
    };
    if let Some(values) = integer_range(arg, &parts)? {
        return Ok(values);
    }
    let (start, stop, step) = (num(parts[0])?, num(parts[1])?, num(parts[2])?);
    if step <= 0.0 {
        return Err(VaryError::BadStep(arg.to_string()));
    }
    if stop < start {
        return Err(VaryError::EmptyRange(arg.to_string()));
    }
    let count = ((stop - start) / step + 1e-9).floor() + 1.0;
    if count > MAX_POINTS as f64 {
        return Err(VaryError::TooMany {
            spec: arg.to_string(),
            count,
        });
    }
    let d = parts.iter().map(|p| decimals(p)).max().unwrap_or(0);
    let integers = d == 0 && parts.iter().all(|p| !p.contains(['e', 'E']));
    Ok((0..count as u64)
        .map(|i| {
            let x = start + i as f64 * step;
            if integers {
                format!("{}", x.round() as i64)
            } else {
                format!("{x:.d$}")
            }
        })
        .collect())
}

/// A range of integers written as such (`START:STOP:STEP` in digits), counted exactly rather
/// than in floats, which round above 2⁵³ (seeds); `None` when a part is not an integer.
fn integer_range(arg: &str, parts: &[&str]) -> Result<Option<Vec<String>>, VaryError> {
    let int = |p: &str| {
        let digits = p.replace('_', "");
        let body = digits.strip_prefix(['-', '+']).unwrap_or(&digits);
        (!body.is_empty() && body.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse::<i128>().ok())
            .flatten()
    };
    let (Some(start), Some(stop), Some(step)) = (int(parts[0]), int(parts[1]), int(parts[2]))
    else {
        return Ok(None);
    };
    if step <= 0 {
        return Err(VaryError::BadStep(arg.to_string()));
    }
    if stop < start {
        return Err(VaryError::EmptyRange(arg.to_string()));
    }
    let count = (stop - start) / step + 1;
    if count > MAX_POINTS as i128 {
        return Err(VaryError::TooMany {
            spec: arg.to_string(),
            count: count as f64,
        });
    }
    Ok(Some(
        (0..count).map(|i| (start + i * step).to_string()).collect(),
    ))
}

/// The points of a grid: for each, the `KEY=VALUE` overrides, first axis slowest. A key may be
/// varied once.
pub fn points(axes: &[Axis]) -> Result<Vec<Vec<String>>, VaryError> {
    for (i, a) in axes.iter().enumerate() {
        if axes[..i].iter().any(|b| b.key == a.key) {
            return Err(VaryError::Twice(a.key.clone()));
        }
    }
    let total: f64 = axes.iter().map(|a| a.values.len() as f64).product();
    if total > MAX_POINTS as f64 {
        return Err(VaryError::TooMany {
            spec: axes
                .iter()
                .map(|a| a.key.as_str())
                .collect::<Vec<_>>()
                .join(" × "),
            count: total,
        });
    }
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    for a in axes {
        let mut next = Vec::with_capacity(out.len() * a.values.len());
        for p in &out {
            for v in &a.values {
                let mut q = p.clone();
                q.push(format!("{}={v}", a.key));
                next.push(q);
            }
        }
        out = next;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_inclusive_and_free_of_float_drift() {
        let a = parse_vary("engine.mem_fraction_static=0.80:0.95:0.01").unwrap();
        assert_eq!(a.values.len(), 16);
        assert_eq!(a.values[0], "0.80");
        assert_eq!(a.values[7], "0.87");
        assert_eq!(a.values[15], "0.95");
        let b = parse_vary("client.concurrency=50:200:50").unwrap();
        assert_eq!(b.values, vec!["50", "100", "150", "200"]);
        // Integers are counted exactly, past 2^53 where floats round (seeds).
        let c = parse_vary("seed=9007199254740993:9007199254740995:1").unwrap();
        assert_eq!(
            c.values,
            vec!["9007199254740993", "9007199254740994", "9007199254740995"]
        );
        let d = parse_vary("seed=18446744073709551614:18446744073709551615:1").unwrap();
        assert_eq!(
            d.values,
            vec!["18446744073709551614", "18446744073709551615"]
        );
    }

    #[test]
    fn ranges_written_with_exponents_give_the_same_points() {
        let a = parse_vary("k=0.80:0.82:5e-3").unwrap();
        assert_eq!(a.values, vec!["0.800", "0.805", "0.810", "0.815", "0.820"]);
        let b = parse_vary("k=8e-1:9e-1:5e-2").unwrap();
        assert_eq!(b.values, vec!["0.80", "0.85", "0.90"]);
        let c = parse_vary("k=1e3:3e3:1e3").unwrap();
        assert_eq!(c.values, vec!["1000", "2000", "3000"]);
        let d = parse_vary("k=1.5E1:1.75e1:2.5e-1").unwrap();
        assert_eq!(
            d.values,
            vec![
                "15.00", "15.25", "15.50", "15.75", "16.00", "16.25", "16.50", "16.75", "17.00",
                "17.25", "17.50"
            ]
        );
        assert_eq!(decimals("1e-400"), 400);
    }

    #[test]
    fn a_key_varied_twice_is_refused() {
        let axes = vec![parse_vary("a=1,2").unwrap(), parse_vary("a=3,4").unwrap()];
        assert_eq!(points(&axes), Err(VaryError::Twice("a".into())));
    }

    #[test]
    fn lists_keep_toml_values_whole() {
        let a =
            parse_vary(r#"workload.output_tokens=[1,2],{ dist = "constant", value = 5 },"a,b""#)
                .unwrap();
        assert_eq!(
            a.values,
            vec!["[1,2]", r#"{ dist = "constant", value = 5 }"#, r#""a,b""#]
        );
        let p = parse_vary("engine.schedule_policy=fcfs,lof").unwrap();
        assert_eq!(p.values, vec!["fcfs", "lof"]);
    }

    #[test]
    fn bad_specs_are_refused() {
        assert_eq!(
            parse_vary("a.b=1:2:0"),
            Err(VaryError::BadStep("a.b=1:2:0".into()))
        );
        assert_eq!(
            parse_vary("a.b=5:1:1"),
            Err(VaryError::EmptyRange("a.b=5:1:1".into()))
        );
        assert_eq!(parse_vary("a.b="), Err(VaryError::Empty("a.b=".into())));
        assert_eq!(
            parse_vary("a.b=1,,2"),
            Err(VaryError::Empty("a.b=1,,2".into()))
        );
        assert!(matches!(
            parse_vary("a.b=0:1e12:1"),
            Err(VaryError::TooMany { .. })
        ));
        assert!(matches!(
            parse_vary("a.b=0:inf:1"),
            Err(VaryError::NotANumber { .. })
        ));
        assert!(matches!(
            parse_vary("a.b=x:2:1"),
            Err(VaryError::NotANumber { .. })
        ));
        assert_eq!(parse_vary("=1"), Err(VaryError::EmptyKey("=1".into())));
        assert_eq!(parse_vary("a.b"), Err(VaryError::NotKeySpec("a.b".into())));
    }

    #[test]
    fn the_grid_is_a_cartesian_product_first_axis_slowest() {
        let axes = vec![parse_vary("a=1,2").unwrap(), parse_vary("b=x,y,z").unwrap()];
        let p = points(&axes).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(p[0], vec!["a=1", "b=x"]);
        assert_eq!(p[1], vec!["a=1", "b=y"]);
        assert_eq!(p[3], vec!["a=2", "b=x"]);
    }
}
