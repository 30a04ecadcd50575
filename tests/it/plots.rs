//! The figures through their public functions: both formats decode, and the SVG's texts (titles,
//! legends, tick labels, numbers) and the PNG's colours say what is drawn. With
//! `SERVESIM_LOOK_DIR=DIR`, every figure these tests draw is also written to DIR for a person to
//! look at (`SERVESIM_LOOK_DIR=/tmp/look cargo test --test it plots`).

use servesim::analysis::analyse;
use servesim::memory::{HeuristicReserve, SglangMemory, SlackNeed, Verdict};
use servesim::metrics::RunResult;
use servesim::report::plots::*;
use servesim::scenario::{load, MemoryDerivation, Source};

use crate::{root, run, scenario};

/// A figure in both formats, checked: the PNG's pixels (RGB), and the SVG. Written to
/// `SERVESIM_LOOK_DIR` if set, named after the test.
pub fn both(draw: impl Fn(Format) -> Result<Vec<u8>, PlotError>) -> (Vec<u8>, String) {
    let bytes = draw(Format::Png).unwrap();
    let mut reader = png::Decoder::new(&bytes[..]).read_info().unwrap();
    let mut rgb = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut rgb).unwrap();
    assert_eq!((info.width, info.height), (WIDTH_PX, HEIGHT_PX));
    assert_eq!(info.color_type, png::ColorType::Rgb);
    rgb.truncate(info.buffer_size());
    let svg = String::from_utf8(draw(Format::Svg).unwrap()).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    if let Some(dir) = std::env::var_os("SERVESIM_LOOK_DIR").map(std::path::PathBuf::from) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let test = std::thread::current()
            .name()
            .unwrap_or("figure")
            .replace("::", "-");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{test}-{n}.png")), &bytes).unwrap();
        std::fs::write(dir.join(format!("{test}-{n}.svg")), &svg).unwrap();
    }
    (rgb, svg)
}

/// The texts of an SVG, each on its own line (trimmed of the en spaces that pad legend
/// entries), with a newline before the first.
pub fn texts(svg: &str) -> String {
    let text = |t: &str| -> Option<String> {
        let inner = t.split_once('>')?.1.split_once("</text>")?.0.trim();
        Some(inner.replace("&lt;", "<").replace("&amp;", "&"))
    };
    let lines: Vec<String> = svg.split("<text").skip(1).filter_map(text).collect();
    format!("\n{}\n", lines.join("\n"))
}

/// How many pixels of RGB data have exactly the colour `(r, g, b)`.
pub fn pixels(rgb: &[u8], c: [u8; 3]) -> usize {
    rgb.chunks(3).filter(|p| p == &c).count()
}

const VERMILLION: [u8; 3] = [213, 94, 0];
const BLUE: [u8; 3] = [0, 114, 178];
const PURPLE: [u8; 3] = [125, 60, 160];

/// 120 requests through 6 slots: a start-up, a steady phase and a drain in about 30 s.
fn small(window_s: f64) -> RunResult {
    run(&scenario(&format!(
        "name = \"plots\"\n[run]\nobserve_at_s = [5, 12]\nwindow_s = {window_s}\n\
         timeseries_interval_s = 0.25\n[engine]\nkv_capacity_tokens = 3000\n\
         [engine.step_time]\ndecode_base_ms = 10.0\ndecode_per_seq_ms = 1.0\n\
         prefill_base_ms = 5.0\nprefill_per_token_us = 10.0\n\
         [workload]\nrequests = 120\nmax_new_tokens = 400\n\
         prompt_tokens = {{ dist = \"uniform\", min = 20, max = 200 }}\n\
         output_tokens = {{ dist = \"lognormal\", mean = 100, cv = 0.5, min = 5, max = 400 }}\n\
         [client]\nconcurrency = 6\n"
    )))
}

/// One request, or four stopped by `max_sim_s` before any is answered.
fn edge(one: bool) -> RunResult {
    let (n, output, stop) = [(4, 1000, "max_sim_s = 0.5"), (1, 3, "")][usize::from(one)];
    run(&scenario(&format!(
        "name = \"plots\"\n[run]\n{stop}\n[engine]\nkv_capacity_tokens = 10000\n[workload]\n\
         requests = {n}\nprompt_tokens = {{ dist = \"constant\", value = 10 }}\n\
         output_tokens = {{ dist = \"constant\", value = {output} }}\n\
         [client]\nconcurrency = {n}\n"
    )))
}

/// The three figures of a run, checked: their pixels and texts.
fn run_figures(r: &RunResult, observe_at_s: &[f64]) -> [(Vec<u8>, String); 3] {
    let a = analyse(r);
    let [one, two, three] = [
        both(|f| throughput(r, &a, observe_at_s, f)),
        both(|f| engine_state(r, f)),
        both(|f| latency_cdf(r, f)),
    ];
    [one, two, three].map(|(png, svg)| (png, texts(&svg)))
}

#[test]
fn every_run_figure_draws_its_lines_legends_and_numbers() {
    let r = small(2.0);
    let [a, b, c] = run_figures(&r, &[5.0, 12.0]);
    assert!(pixels(&a.0, VERMILLION) > 500 && pixels(&a.0, PURPLE) > 200);
    assert!(pixels(&b.0, BLUE) > 500 && pixels(&c.0, BLUE) > 500);
    assert!(pixels(&a.0, [0, 0, 0]) > 500, "title");
    register_fonts().unwrap();
    register_fonts().unwrap();
    assert_eq!(engine_state(&r, Format::Svg), engine_state(&r, Format::Svg));
    assert_eq!(Format::ALL.map(Format::extension), ["png", "svg"]);
    let all = [a.1, b.1, c.1].concat();
    for text in [
        THROUGHPUT_TITLE,
        ENGINE_STATE_TITLE,
        LATENCY_TITLE,
        "\nsteady state ",
        " req/s (shaded: 95 % CI ",
        "observation times: 5.0 s, 12 s",
        "windowed rate: completions per second over the last 2.0 s",
        "\nclient completions (req/s)\n",
        "\nserver gen (tok/s)\n",
        "\nthe pool is full\n",
        "\nrunning at the server (decode batch + prefill)\n",
        "\nE2E (last token): p50",
        "\nTPOT (per request): p50",
        "\nITL (every gap between tokens): p50",
        "\ntime since the start (s)\n",
    ] {
        assert!(all.contains(text), "{text:?}");
    }
}

#[test]
fn a_run_long_against_its_start_up_gets_a_log_time_axis() {
    // The start-up is the first response or the window, whichever is later.
    let t = texts(&both(|f| engine_state(&small(1.0), f)).1);
    assert!(t.contains("\ntime since the start (log scale)\n") && t.contains("\n1 s\n"));
    let t = texts(&both(|f| engine_state(&small(30.0), f)).1);
    assert!(t.contains("\ntime since the start (s)\n"));
}

#[test]
fn runs_with_one_request_or_none_answered_still_draw() {
    let one = edge(true);
    assert!(one.samples.len() <= 3, "few samples: {}", one.samples.len());
    run_figures(&one, &[0.01, 1e9]);
    let none = edge(false);
    assert_eq!(none.totals.requests_completed, 0);
    let [a, _, c] = run_figures(&none, &[]);
    assert!(a.1.contains("there is no steady rate") && c.1.contains("no latency to show"));
}

/// The case study's SGLang memory at each fraction in hundredths, as `servesim memory` has it.
fn case_study<const N: usize>(percents: [u32; N]) -> Vec<(f64, SglangMemory)> {
    let src = Source::read(&root().join("scenarios/case-study-b2-memory.toml")).unwrap();
    let at = |p: u32| {
        let sc = load(&src, &[format!("engine.mem_fraction_static=0.{p}")]).unwrap();
        match sc.memory.unwrap().derivation {
            MemoryDerivation::Sglang(m) => (f64::from(p) / 100.0, m),
            _ => panic!("an SGLang scenario"),
        }
    };
    percents.into_iter().map(at).collect()
}

#[test]
fn the_memory_figure_shows_the_split_the_verdicts_and_the_case_studys_numbers() {
    let rows = case_study(std::array::from_fn::<u32, 16, _>(|i| 80 + i as u32));
    let (png, svg) = both(|f| memory_figure(&rows, f));
    // The pool, the pool above the OOM line, and the slack that would run out of memory.
    for (colour, least) in [([77, 156, 201], 10_000), ([145, 89, 174], 500)] {
        assert!(pixels(&png, colour) > least, "{colour:?}");
    }
    assert!(pixels(&png, [214, 94, 94]) > 2_000);
    let t = texts(&svg);
    for text in [
        "\nmemory per GPU (GiB)\n",
        "\nmem_fraction_static, f\n",
        "\n116,149\n",
        "(4.66 GiB seen free at f = 0.85): out of memory above f = 0.899",
        "safe up to f = 0.889.",
        "\npool above the OOM line\n",
        "\nslack: tight (< 10 % to spare)\nslack: would run out of memory\n",
        "\nOOM line: slack = need = 9.38 GiB\n",
    ] {
        assert!(t.contains(text), "{text:?}");
    }
    let tokens = |l: &&str| l.chars().all(|c| c.is_ascii_digit() || c == ',');
    let tokens = t.lines().filter(|l| l.contains(',') && tokens(l)).count();
    assert_eq!(tokens, 16, "a token label per bar");
    assert!(t.contains("\n0.80\n") && t.contains("\n0.95\n"));
}

#[test]
fn each_bar_splits_the_memory_free_before_the_weights() {
    let rows = case_study([85, 95]);
    for (_, m) in &rows {
        let top = m.inputs.memory_before_weights_gib;
        assert!((top - 93.59).abs() < 1e-9);
        assert!(m.inputs.weight_gib_per_gpu < m.static_gib && m.static_gib < top);
    }
    let [(_, safe), (_, oom)] = [&rows[0], &rows[1]];
    assert!(safe.verdict == Verdict::Safe && oom.verdict == Verdict::Oom);
    let boundary = |m: &SglangMemory| m.inputs.memory_before_weights_gib - m.need_gib;
    assert!(safe.static_gib < boundary(safe), "0.85 leaves the slack");
    assert!(oom.static_gib > boundary(oom), "0.95 takes from it");
}

#[test]
fn a_memory_figure_of_one_setting_none_or_a_guessed_need_still_draws() {
    let t = texts(&both(|f| memory_figure(&case_study([85]), f)).1);
    assert!(t.contains("\n116,149\n") && !t.contains("would run out of memory"));
    assert!(texts(&both(|f| memory_figure(&[], f)).1).contains("No settings to show."));
    let guess = |(f, m): (f64, SglangMemory)| {
        let mut i = m.inputs;
        i.need = SlackNeed::Heuristic(HeuristicReserve::sglang(8192, 8, true, 512));
        (f, i.derive())
    };
    let rows: Vec<_> = case_study([85, 90]).into_iter().map(guess).collect();
    let (_, svg) = both(|f| memory_figure(&rows, f));
    assert!(texts(&svg).contains("reservation estimate): out of memory above f = "));
    assert_eq!(svg, both(|f| memory_figure(&rows, f)).1, "deterministic");
}

/// 200 requests behind a 500-token system prompt, with the cache as given.
const SHARED_PREFIX: &str = "name = \"prefix\"\n[run]\nwindow_s = 5\n[engine]\n\
    kv_capacity_tokens = 20000\n[workload]\nrequests = 200\n\
    prompt_tokens = { dist = \"constant\", value = 100 }\n\
    output_tokens = { dist = \"constant\", value = 50 }\n\
    prefix_groups = { system = { tokens = 500, share = 1.0 } }\n[client]\nconcurrency = 16\n";

#[test]
fn the_prefix_cache_figure_draws_what_the_run_found_cached_and_only_when_it_can_hit() {
    use servesim::report::summary::prefix_cache_can_hit;
    let sc = scenario(SHARED_PREFIX);
    assert!(prefix_cache_can_hit(&sc));
    let r = run(&sc);
    let hits = r.cache_hits();
    let last = hits.lifetime.last().unwrap();
    // Of 600 prompt tokens a request found at most the 500 of the prefix cached.
    assert!(last.1 > 0.5 && last.1 <= 500.0 / 600.0, "{last:?}");
    let c = &r.counters;
    assert!(
        (last.1 - c.cached_prompt_tokens as f64 / c.first_admission_prompt_tokens as f64).abs()
            < 0.05
    );
    assert!(hits.window.iter().all(|p| (0.0..=1.0).contains(&p.1)) && hits.window.len() > 5);
    let (png, svg) = both(|f| cache_hit_rate(&r, &hits, f));
    assert!(pixels(&png, VERMILLION) > 500);
    let t = texts(&svg);
    for text in [
        CACHE_TITLE,
        "requests found a cached prefix",
        "\nshare of prompt tokens found cached\n",
    ] {
        assert!(t.contains(text), "{text:?}");
    }
    assert!(t.contains("the same of the requests completed in the last 5.0 s"));
    // Off, or nothing shared: no figure.
    let off = SHARED_PREFIX.replace("[engine]\n", "[engine]\ndisable_radix_cache = true\n");
    assert!(!prefix_cache_can_hit(&scenario(&off)));
    let none = SHARED_PREFIX.replace("prefix_groups", "# prefix_groups");
    assert!(!prefix_cache_can_hit(&scenario(&none)));
    let dir = tempfile::tempdir().unwrap();
    for (name, text, files) in [("on", SHARED_PREFIX, 11), ("off", off.as_str(), 9)] {
        let sc = dir.path().join(format!("{name}.toml"));
        std::fs::write(&sc, text).unwrap();
        let out = dir.path().join(name);
        let mut cmd = assert_cmd::Command::cargo_bin("servesim").unwrap();
        cmd.args(["run", sc.to_str().unwrap(), "--out", out.to_str().unwrap()])
            .assert()
            .success();
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), files, "{name}");
        assert_eq!(out.join("prefix-cache.png").exists(), name == "on");
    }
}

#[test]
fn the_window_share_of_cached_tokens_counts_what_completed_after_the_point_a_window_back() {
    // Reference: the window (t − 5 s, t] holds what completed by t less what completed by the
    // last point at or before t − 5 s (nothing before a whole window has passed).
    let r = run(&scenario(SHARED_PREFIX));
    let pts = r.timeline();
    let tokens = |s: &servesim::metrics::Sample| {
        (
            s.completed_cached_tokens as f64,
            s.completed_prompt_tokens as f64,
        )
    };
    let mut want = Vec::new();
    for s in &pts {
        let back = pts.iter().rev().find(|b| b.t_s <= s.t_s - 5.0);
        let (c0, p0) = back.map_or((0.0, 0.0), |b| tokens(b));
        let (c, p) = tokens(s);
        if p > p0 {
            want.push((s.t_s, (c - c0) / (p - p0)));
        }
    }
    // Points exactly a window apart exist: the bound of the window is exercised.
    let exact = pts
        .iter()
        .filter(|s| pts.iter().any(|b| b.t_s == s.t_s - 5.0))
        .count();
    assert!(exact > 10, "{exact}");
    assert_eq!(r.cache_hits().window, want);
}
