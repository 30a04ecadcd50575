//! Behaviour pinned across refactors: every scenario in `scenarios/`, run from the command line
//! with fewer requests, must write exactly the bytes it wrote when the digests in
//! `tests/fixtures/outputs.sha256` were recorded — `summary.json`, `timeseries.csv`,
//! `server.log`, the requests CSV and the printed report.
//!
//! A change that is meant to change results re-records them:
//! `SERVESIM_BLESS=1 cargo test --test it outputs` — and the commit says why they moved.
//! `scripts/outputs-check.sh` does the same for the full-size runs with the release binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use sha2::{Digest, Sha256};

use crate::root;

/// Requests per scenario: enough to pass the start-up, few enough for a debug build.
const REQUESTS: u64 = 1000;

fn scenario_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root().join("scenarios"), &mut files);
    files.sort();
    files
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `relative scenario path/output name → sha256` for one scenario.
fn digests(file: &Path, into: &mut BTreeMap<String, String>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let csv = dir.path().join("requests.csv");
    let rel = file
        .strip_prefix(root())
        .unwrap()
        .display()
        .to_string()
        .replace('\\', "/");
    // The report names the scenario as given: run from the repository root with a relative
    // path, so the bytes do not depend on where the checkout lives.
    let assert = Command::cargo_bin("servesim")
        .unwrap()
        .current_dir(root())
        .arg("run")
        .arg(&rel)
        .args(["--set", &format!("workload.requests={REQUESTS}")])
        .arg("--out")
        .arg(&out)
        .arg("--no-plots")
        .arg("--requests-csv")
        .arg(&csv)
        .assert()
        .success();
    // The report names the output directory: take the temporary path out.
    let stdout = String::from_utf8(assert.get_output().stdout.clone())
        .unwrap()
        .replace(&out.display().to_string(), "OUT");
    into.insert(format!("{rel} report"), hex(stdout.as_bytes()));
    for name in ["summary.json", "timeseries.csv", "server.log"] {
        let bytes = std::fs::read(out.join(name)).unwrap();
        into.insert(format!("{rel} {name}"), hex(&bytes));
    }
    into.insert(
        format!("{rel} requests.csv"),
        hex(&std::fs::read(&csv).unwrap()),
    );
}

#[test]
fn every_scenario_writes_the_recorded_bytes() {
    let fixture = root().join("tests/fixtures/outputs.sha256");
    let mut now = BTreeMap::new();
    for f in scenario_files() {
        digests(&f, &mut now);
    }
    let text: String = now.iter().map(|(k, v)| format!("{v}  {k}\n")).collect();
    if std::env::var_os("SERVESIM_BLESS").is_some() {
        std::fs::write(&fixture, &text).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(&fixture).unwrap_or_default();
    let recorded: BTreeMap<String, String> = recorded
        .lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(h, k)| (k.to_string(), h.to_string()))
        .collect();
    // A scenario not in the fixture at all is new: it joins when the digests are re-recorded.
    let scenario_of = |k: &String| k.rsplit_once(' ').map_or(k.clone(), |(s, _)| s.to_string());
    let known: std::collections::BTreeSet<String> = recorded.keys().map(scenario_of).collect();
    let new: std::collections::BTreeSet<String> = now
        .keys()
        .map(scenario_of)
        .filter(|s| !known.contains(s))
        .collect();
    if !new.is_empty() {
        eprintln!("not recorded yet (re-record with SERVESIM_BLESS=1 to pin them): {new:?}");
    }
    let differ: Vec<&String> = now
        .keys()
        .filter(|k| !new.contains(&scenario_of(k)))
        .chain(recorded.keys())
        .filter(|k| now.get(*k) != recorded.get(*k))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(
        differ.is_empty(),
        "outputs differ from tests/fixtures/outputs.sha256 for: {differ:#?}\n\
         (if the change is meant, re-record with SERVESIM_BLESS=1 and say why in the commit)"
    );
}
