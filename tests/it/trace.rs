//! Trace replay from the command line: `tests/fixtures/trace/replay.toml` sends the four rows of
//! `rows.csv` (or the same rows as `rows.jsonl`), closed loop or at each row's `arrival_s`. Every
//! request runs alone, so its times follow by hand from the linear step-time model: a prefill of
//! T tokens takes 10 ms + 0.12 ms × T (the first token), each further token one decode step of
//! 35 ms + 0.3 ms × 1 request = 35.3 ms.

use std::path::Path;

use assert_cmd::Command;

use crate::root;

const SCENARIO: &str = "tests/fixtures/trace/replay.toml";

/// Run the replay scenario with `sets`; return (requests CSV, summary.json, server.log,
/// timeseries.csv).
fn replay(sets: &[&str]) -> [String; 4] {
    let dir = tempfile::tempdir().unwrap();
    let (out, csv) = (dir.path().join("out"), dir.path().join("requests.csv"));
    let mut cmd = Command::cargo_bin("servesim").unwrap();
    cmd.current_dir(root())
        .args(["run", SCENARIO, "--no-plots", "--out"])
        .arg(&out)
        .arg("--requests-csv")
        .arg(&csv);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let run = cmd.output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    [
        read(&csv),
        read(&out.join("summary.json")),
        read(&out.join("server.log")),
        read(&out.join("timeseries.csv")),
    ]
}

const HEADER: &str = "seq,prompt_tokens,output_tokens,sent_s,first_token_s,done_s,ttft_ms,e2e_ms,queue_ms,client_wait_ms,retractions,completed";

#[test]
fn a_closed_loop_sends_each_row_when_the_slot_frees_with_its_own_lengths() {
    // Row 0: 100 + 10 tokens, no max: TTFT 22 ms, 9 decode steps → 339.7 ms.
    // Row 1: ignore_eos and max_new_tokens 5: runs to 5 tokens (not its 20).
    // Row 2: max_new_tokens 4 without ignore_eos: stops at 4 (its natural 30 is capped).
    // Row 3: ignore_eos without its own max: runs to its output_tokens, 8.
    let [requests, ..] = replay(&[]);
    let want = [
        HEADER,
        "0,100,10,0.000000,0.022000,0.339700,22.000,339.700,0.000,0.000,0,true",
        "1,200,5,0.339700,0.373700,0.514900,34.000,175.200,0.000,339.700,0,true",
        "2,50,4,0.514900,0.530900,0.636800,16.000,121.900,0.000,514.900,0,true",
        "3,300,8,0.636800,0.682800,0.929900,46.000,293.100,0.000,636.800,0,true",
    ];
    assert_eq!(requests.lines().collect::<Vec<_>>(), want);
}

#[test]
fn the_trace_mode_sends_each_row_at_its_arrival_time() {
    let [requests, summary, ..] = replay(&["client.mode=trace"]);
    let want = [
        HEADER,
        "0,100,10,0.000000,0.022000,0.339700,22.000,339.700,0.000,0.000,0,true",
        "1,200,5,0.500000,0.534000,0.675200,34.000,175.200,0.000,0.000,0,true",
        "2,50,4,1.000000,1.016000,1.121900,16.000,121.900,0.000,0.000,0,true",
        "3,300,8,4.000000,4.046000,4.293100,46.000,293.100,0.000,0.000,0,true",
    ];
    assert_eq!(requests.lines().collect::<Vec<_>>(), want);
    assert!(summary.contains("\"mode\": \"trace\""), "{summary}");
}

#[test]
fn json_lines_and_csv_of_the_same_rows_give_the_same_outputs() {
    for mode in ["client.mode=closed", "client.mode=trace"] {
        let csv = replay(&[mode]);
        let jsonl = replay(&[mode, "workload.trace=\"rows.jsonl\""]);
        // The summary names the file; everything else is byte-identical.
        let summary = jsonl[1].replace("rows.jsonl", "rows.csv");
        assert_eq!(csv[1], summary, "{mode}: summary.json");
        for (i, name) in [
            (0, "requests CSV"),
            (2, "server.log"),
            (3, "timeseries.csv"),
        ] {
            assert_eq!(csv[i], jsonl[i], "{mode}: {name}");
        }
    }
}

#[test]
fn fewer_requests_than_rows_send_the_first_rows() {
    let [requests, ..] = replay(&["workload.requests=2"]);
    let seqs: Vec<&str> = requests
        .lines()
        .skip(1)
        .map(|l| &l[..l.find(',').unwrap()])
        .collect();
    assert_eq!(seqs, ["0", "1"]);
    assert!(requests.contains("\n1,200,5,"), "{requests}");
}

#[test]
fn the_workloads_max_new_tokens_is_the_default_of_rows_without_their_own() {
    // max_new_tokens = 6 caps rows 0 (10 → 6) and 3 (ignore_eos, 8 → 6); rows 1 and 2 keep
    // their own 5 and 4.
    let [requests, ..] = replay(&["workload.max_new_tokens=6"]);
    let outputs: Vec<&str> = requests
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap())
        .collect();
    assert_eq!(outputs, ["6", "5", "4", "6"]);
}
