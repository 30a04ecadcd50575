//! The calibration's outputs: a report of the fit and its quality for the terminal, and a
//! scenario fragment (`[engine]`, `[engine.step_time]`) ready to paste.

use super::fit::{Fit, Skipped, Term};
use super::Calibration;
use crate::report::text::thousands;
use crate::scenario::EngineKind;

/// Each coefficient as a scenario key: the key after `engine.step_time.`, and the factor from
/// seconds to its unit.
const KEYS: [(&str, f64); 5] = [
    ("decode_base_ms", 1e3),
    ("decode_per_seq_ms", 1e3),
    ("decode_per_kv_token_ns", 1e9),
    ("prefill_base_ms", 1e3),
    ("prefill_per_token_us", 1e6),
];

/// `x` with `digits` significant digits, without trailing zeros.
fn sig(x: f64, digits: i32) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".into();
    }
    let decimals = (digits - 1 - x.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{x:.decimals$}");
    match s.contains('.') {
        true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => s,
    }
}

fn engine_name(kind: EngineKind) -> &'static str {
    match kind {
        EngineKind::Sglang => "SGLang",
        EngineKind::Vllm => "vLLM",
    }
}

/// Why a coefficient is not in the fit, in words, or `None` when it is.
fn not_fitted(c: &Calibration, j: usize) -> Option<String> {
    match c.fit.terms[j] {
        Term::Fitted { .. } => None,
        Term::Negative(v) => Some(format!(
            "fixed at 0: the unconstrained fit gave {} (negative), so it was dropped and the others refitted",
            sig(v * KEYS[j].1, 3)
        )),
        Term::Absent if c.engine == EngineKind::Vllm && j == 3 => {
            Some("not a term of vLLM's steps (a prefill shares its step with the decodes)".into())
        }
        Term::Absent => Some("not determined: no window of the log has any of it".into()),
    }
}

/// Sentences about the fit's weak points.
pub fn warnings(c: &Calibration) -> Vec<String> {
    let mut out = Vec::new();
    for (j, t) in c.fit.terms.iter().enumerate() {
        if t.poorly_determined() {
            if let Term::Fitted { value, std_error } = t {
                out.push(format!(
                    "{} is poorly determined (± {:.0} %): the log's {} cover too narrow a range to tell it from the other terms; \
                     calibrate on logs of runs at several loads (concurrencies, prompt lengths)",
                    KEYS[j].0,
                    100.0 * std_error / value,
                    ["decode steps", "batch sizes", "KV sizes", "prefill batches", "prefill sizes"][j],
                ));
            }
        }
        if let Term::Negative(_) = t {
            out.push(format!(
                "{}: {}",
                KEYS[j].0,
                not_fitted(c, j).unwrap_or_default()
            ));
        }
    }
    if c.fit.rms_relative > 0.05 {
        out.push(format!(
            "the windows scatter by {:.1} % (RMS) around the fit: the linear model describes this server loosely",
            100.0 * c.fit.rms_relative
        ));
    }
    out
}

fn skipped_summary(skipped: &[Skipped]) -> String {
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for s in skipped {
        match reasons.iter_mut().find(|(r, _)| *r == s.reason) {
            Some((_, n)) => *n += 1,
            None => reasons.push((s.reason, 1)),
        }
    }
    reasons
        .iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `head` and the items joined by `, `, wrapped before 100 columns with an indent of two.
fn wrap(head: &str, items: &[String]) -> String {
    let mut out = head.to_string();
    let mut width = head.chars().count();
    for (i, item) in items.iter().enumerate() {
        let sep = if i + 1 < items.len() { "," } else { "" };
        let n = item.chars().count() + sep.len();
        if i > 0 && width + 1 + n > 99 {
            out += "\n  ";
            width = 2;
        } else if i > 0 {
            out += " ";
            width += 1;
        }
        out += &format!("{item}{sep}");
        width += n;
    }
    out + "\n"
}

/// The terminal report.
pub fn report(c: &Calibration) -> String {
    let f: &Fit = &c.fit;
    let mut s = format!(
        "servesim calibrate — {} log{}: {}\n",
        engine_name(c.engine),
        if c.files.len() == 1 { "" } else { "s" },
        c.files.join(", ")
    );
    s += &format!("read: {}\n", c.read);
    match c.startup.settings.first() {
        Some(_) => {
            let set: Vec<String> = c
                .startup
                .settings
                .iter()
                .map(|x| format!("{} = {}", x.key, x.value))
                .collect();
            s += &wrap("start-up settings: ", &set);
        }
        None => s += "start-up settings: none in the log (no server-arguments or KV pool lines)\n",
    }
    for n in &c.startup.notes {
        s += &format!("start-up: {n}\n");
    }
    s += &format!("windows: {} used, {} skipped", f.used, c.skipped.len());
    if !c.skipped.is_empty() {
        s += &format!(" ({})", skipped_summary(&c.skipped));
    }
    s += "\n";
    s += &format!("ranges: {}\n", c.ranges);
    s += &format!("fit ({}):\n", c.method);
    for (j, (key, unit)) in KEYS.iter().enumerate() {
        match (f.terms[j], not_fitted(c, j)) {
            (Term::Fitted { value, std_error }, _) => {
                let rel = if value > 0.0 {
                    100.0 * std_error / value
                } else {
                    f64::INFINITY
                };
                s += &format!(
                    "  {key:<24} {:>12}  ± {} %\n",
                    sig(value * unit, 6),
                    sig(rel, 2)
                );
            }
            (_, Some(why)) => s += &format!("  {key:<24} {:>12}  {why}\n", "—"),
            (_, None) => {}
        }
    }
    s += &format!(
        "quality: R² {}, RMS residual {} ms ({:.2} % of a window), largest {:.2} % at {}:{}\n",
        if f.r_squared.is_finite() {
            format!("{:.5}", f.r_squared)
        } else {
            "n/a (every window equally long)".into()
        },
        sig(f.rms_s * 1e3, 3),
        100.0 * f.rms_relative,
        100.0 * f.max_relative.0,
        c.files[f.max_relative.1.file],
        f.max_relative.1.line,
    );
    for w in warnings(c) {
        s += &format!("warning: {w}\n");
    }
    s
}

/// The scenario fragment; with `table`, the step times are the table in that CSV file (the
/// linear fit kept as comments).
pub fn fragment(c: &Calibration, table: Option<&str>) -> String {
    let f = &c.fit;
    let mut s = format!(
        "# Written by `servesim calibrate` from {} ({}).\n# {} windows used, {} skipped; R² {}, RMS residual {:.2} % of a window.\n# Ranges covered: {}.\n",
        c.files.join(", "),
        engine_name(c.engine),
        f.used,
        c.skipped.len(),
        if f.r_squared.is_finite() { format!("{:.5}", f.r_squared) } else { "n/a".into() },
        100.0 * f.rms_relative,
        c.ranges,
    );
    for w in warnings(c) {
        s += &format!("# warning: {w}\n");
    }
    let hardware: Vec<_> = c
        .startup
        .settings
        .iter()
        .filter(|x| x.key.starts_with("hardware."))
        .collect();
    if !hardware.is_empty() {
        s += "\n[hardware]\n";
        for x in hardware {
            s += &format!(
                "{} = {}  # {}\n",
                &x.key["hardware.".len()..],
                x.value,
                x.from
            );
        }
    }
    s += &format!(
        "\n[engine]\nkind = \"{}\"\n",
        match c.engine {
            EngineKind::Sglang => "sglang",
            EngineKind::Vllm => "vllm",
        }
    );
    for x in c
        .startup
        .settings
        .iter()
        .filter(|x| x.key.starts_with("engine."))
    {
        s += &format!(
            "{} = {}  # {}\n",
            &x.key["engine.".len()..],
            x.value,
            x.from
        );
    }
    let comment = match table {
        Some(file) => {
            s += &format!(
                "\n[engine.step_time]\nmodel = \"table\"\ntable = \"{file}\"  # relative to the scenario: keep the CSV beside it\n\
                 # The linear fit the table's prefill rows come from:\n"
            );
            "# "
        }
        None => {
            s += "\n[engine.step_time]\nmodel = \"linear\"\n";
            ""
        }
    };
    for (j, (key, unit)) in KEYS.iter().enumerate() {
        match (f.terms[j], not_fitted(c, j)) {
            (Term::Fitted { value, .. }, _) => {
                s += &format!("{comment}{key} = {}\n", sig(value * unit, 6))
            }
            (Term::Negative(_), Some(why)) => s += &format!("{comment}{key} = 0  # {why}\n"),
            (_, Some(why)) => s += &format!("# {key}: {why}; servesim's default applies\n"),
            (_, None) => {}
        }
    }
    s
}

/// `a–b`, with thousands separators.
pub fn span(lo: u64, hi: u64) -> String {
    if lo == hi {
        thousands(lo)
    } else {
        format!("{}–{}", thousands(lo), thousands(hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_wrap_before_a_hundred_columns() {
        let items: Vec<String> = (0..12)
            .map(|i| format!("engine.key_{i} = {}", i * 1000))
            .collect();
        let text = wrap("settings: ", &items);
        assert!(text.lines().all(|l| l.chars().count() < 100), "{text}");
        assert!(
            text.lines().skip(1).all(|l| l.starts_with("  engine.")),
            "{text}"
        );
        assert_eq!(text.matches("engine.key_").count(), 12);
        assert!(text.ends_with("engine.key_11 = 11000\n"), "{text}");
    }

    #[test]
    fn significant_digits() {
        assert_eq!(sig(12.000_123_4, 6), "12.0001");
        assert_eq!(sig(0.300_004, 6), "0.300004");
        assert_eq!(sig(60.0, 6), "60");
        assert_eq!(sig(123_456.7, 3), "123457");
    }
}
