//! Lengths from files: `dist = "empirical"` over a JSON Lines column, and whole rows
//! (`workload.lengths`) of CSV, JSON Lines or ShareGPT files, pairing kept.

use std::path::Path;

use servesim::engine;
use servesim::scenario::{self, Source};

fn load(dir: &Path, text: &str) -> Result<servesim::scenario::Scenario, String> {
    let src = Source {
        name: "t.toml".into(),
        base_dir: dir.to_path_buf(),
        text: text.into(),
    };
    scenario::load(&src, &[]).map_err(|e| {
        let lines: Vec<String> = e.problems.iter().map(|p| e.problem_line(p)).collect();
        lines.join("\n")
    })
}

fn scenario(lengths: &str, requests: u32) -> String {
    format!(
        r#"
name = "rows"
seed = 7
[engine]
kv_capacity_tokens = 100000
[workload]
requests = {requests}
ignore_eos = true
{lengths}
[client]
concurrency = 4
"#
    )
}

fn pairs(sc: &servesim::scenario::Scenario) -> Vec<(u32, u32)> {
    let opts = engine::RunOptions {
        keep_requests: true,
        ..Default::default()
    };
    let mut r = engine::run(sc, &opts).unwrap().requests;
    r.sort_by_key(|q| q.seq);
    r.iter()
        .map(|q| (q.prompt_tokens, q.output_tokens))
        .collect()
}

#[test]
fn rows_are_drawn_whole_from_csv_json_lines_and_sharegpt_and_the_seed_fixes_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Each prompt has its own output: 100 → 7, 200 → 9, 300 → 11.
    std::fs::write(d.join("l.csv"), "p,o\n100,7\n200,9\n300,11\n").unwrap();
    std::fs::write(
        d.join("l.jsonl"),
        "{\"p\": 100, \"o\": 7}\n{\"p\": 200, \"o\": 9}\n{\"p\": 300, \"o\": 11}\n",
    )
    .unwrap();
    let turn = |n: u32| format!("{{\"from\": \"x\", \"value\": \"text\", \"tokens\": {n}}}");
    let conv = |p, o| format!("{{\"conversations\": [{}, {}]}}", turn(p), turn(o));
    let share = format!("[{}, {}, {}]", conv(100, 7), conv(200, 9), conv(300, 11));
    std::fs::write(d.join("s.json"), share).unwrap();
    let mut seen = Vec::new();
    for (file, p, o) in [
        ("l.csv", "p", "o"),
        ("l.jsonl", "p", "o"),
        ("s.json", "tokens", "tokens"),
    ] {
        let text = scenario(
            &format!("lengths = {{ file = \"{file}\", prompt = \"{p}\", output = \"{o}\" }}"),
            60,
        );
        let got = pairs(&load(d, &text).unwrap());
        for &(p, o) in &got {
            assert_eq!(
                o,
                7 + 2 * (p / 100 - 1),
                "{file}: pair ({p}, {o}) is not a row"
            );
        }
        let distinct: std::collections::BTreeSet<u32> = got.iter().map(|x| x.0).collect();
        assert_eq!(distinct.len(), 3, "{file}: every row drawn in 60 requests");
        seen.push(got);
    }
    // The same seed draws the same rows whatever the file's format.
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0], seen[2]);
    let other = load(
        d,
        &scenario(
            "lengths = { file = \"l.csv\", prompt = \"p\", output = \"o\" }",
            60,
        )
        .replace("seed = 7", "seed = 8"),
    )
    .unwrap();
    assert_ne!(pairs(&other), seen[0]);
}

#[test]
fn empirical_reads_json_lines_and_bad_length_files_are_refused_at_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("e.jsonl"),
        "{\"n\": 50}\n{\"n\": 60}\n{\"other\": 1}\n",
    )
    .unwrap();
    let text = scenario(
        "prompt_tokens = { dist = \"empirical\", file = \"e.jsonl\", column = \"n\" }\noutput_tokens = { dist = \"constant\", value = 5 }",
        20,
    );
    let got = pairs(&load(d, &text).unwrap());
    assert!(
        got.iter().all(|&(p, o)| (p == 50 || p == 60) && o == 5),
        "{got:?}"
    );
    // ShareGPT turns without token counts: servesim does not tokenize.
    std::fs::write(d.join("t.json"), r#"[{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]"#).unwrap();
    let e = load(
        d,
        &scenario(
            "lengths = { file = \"t.json\", prompt = \"tokens\", output = \"tokens\" }",
            2,
        ),
    )
    .unwrap_err();
    assert!(
        e.contains("workload.lengths.file") && e.contains("servesim does not tokenize text"),
        "{e}"
    );
    // Rows and distributions do not mix.
    std::fs::write(d.join("l.csv"), "p,o\n100,7\n").unwrap();
    let e = load(d, &scenario("lengths = { file = \"l.csv\", prompt = \"p\", output = \"o\" }\nprompt_tokens = { dist = \"constant\", value = 5 }", 2)).unwrap_err();
    assert!(
        e.contains("workload.prompt_tokens") && e.contains("does not apply with workload.lengths"),
        "{e}"
    );
    let e = load(
        d,
        &scenario(
            "lengths = { file = \"l.csv\", prompt = \"q\", output = \"o\" }",
            2,
        ),
    )
    .unwrap_err();
    assert!(e.contains("has no column \"q\""), "{e}");
}

/// Prefix groups apply to rows drawn from a lengths file too: a grouped request's prompt is the
/// group's prefix followed by the row's prompt, its output the row's.
#[test]
fn prefix_groups_put_their_prefix_before_the_rows_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("l.csv"), "p,o\n100,7\n200,9\n300,11\n").unwrap();
    let text = scenario(
        "lengths = { file = \"l.csv\", prompt = \"p\", output = \"o\" }\n\
         prefix_groups = { sys = { tokens = 1000, share = 0.5 } }",
        200,
    );
    let sc = load(d, &text).unwrap();
    assert!(sc.workload.shares_prefixes());
    let got = pairs(&sc);
    let rows = [(100, 7), (200, 9), (300, 11)];
    let (mut grouped, mut plain) = (0, 0);
    for (p, o) in got {
        if rows.contains(&(p, o)) {
            plain += 1;
        } else {
            assert!(rows.contains(&(p - 1000, o)), "{p}, {o}");
            grouped += 1;
        }
    }
    assert!(
        grouped > 60 && plain > 60,
        "{grouped} grouped, {plain} plain"
    );
}
