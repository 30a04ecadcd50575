//! Faults from outside the command: SIGINT and SIGTERM during the simulation and after it, a
//! full disk (`/dev/full`), a closed pipe, a failure while the outputs move into place. Each
//! ends with its documented exit code and message (pinned by `it__faults__*` snapshots) and
//! leaves the previous outputs as they were, with no temporary file beside them.

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::root;

const BIN: &str = env!("CARGO_BIN_EXE_servesim");

/// The outputs of an earlier run, as `(file, content)`.
const OLD_SET: [(&str, &str); 3] = [
    ("summary.json", "old summary\n"),
    ("timeseries.csv", "old timeseries\n"),
    ("server.log", "old log\n"),
];

fn b2() -> String {
    root()
        .join("scenarios/case-study-b2.toml")
        .to_string_lossy()
        .into_owned()
}

fn servesim(dir: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir).env("RUST_BACKTRACE", "0");
    c
}

/// An `out` directory holding the old set.
fn old_set(dir: &Path) {
    fs::create_dir(dir.join("out")).unwrap();
    for (name, text) in OLD_SET {
        fs::write(dir.join("out").join(name), text).unwrap();
    }
}

/// The old set is in `out`, whole and alone (no staged or kept-aside file).
fn assert_old_set_intact(dir: &Path) {
    let mut names: Vec<String> = fs::read_dir(dir.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["server.log", "summary.json", "timeseries.csv"]);
    for (name, text) in OLD_SET {
        assert_eq!(
            fs::read_to_string(dir.join("out").join(name)).unwrap(),
            text,
            "{name}"
        );
    }
}

fn code_and_stderr(out: &Output) -> (Option<i32>, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A long run into `out` (with a requests CSV), stopped by `signals` once it has staged its
/// files (the signal handlers are installed before that).
fn signalled_during_the_run(dir: &Path, signals: &str) -> Output {
    let child = servesim(dir)
        .args([
            "run",
            &b2(),
            "--set",
            "workload.requests=2000000",
            "--no-plots",
            "--out",
            "out",
            "--requests-csv",
            "requests.csv",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let staged = dir
        .join("out")
        .join(format!(".server.log.servesim-tmp-{}", child.id()));
    let start = Instant::now();
    while !staged.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the run never staged its files"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    // Both signals of a pair from one shell, microseconds apart.
    let kill = signals
        .split(' ')
        .map(|s| format!("kill -{s} {}", child.id()))
        .collect::<Vec<_>>()
        .join("; ");
    assert!(Command::new("sh")
        .args(["-c", &kill])
        .status()
        .unwrap()
        .success());
    child.wait_with_output().unwrap()
}

#[test]
fn sigint_during_the_run_exits_130_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    old_set(tmp.path());
    let out = signalled_during_the_run(tmp.path(), "INT");
    let (code, stderr) = code_and_stderr(&out);
    assert_eq!(code, Some(130), "{stderr}");
    insta::assert_snapshot!("sigint-during-the-run", stderr);
    assert!(out.stdout.is_empty());
    assert_old_set_intact(tmp.path());
    assert!(!tmp.path().join("requests.csv").exists());
}

#[test]
fn sigterm_during_the_run_exits_143_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    old_set(tmp.path());
    let out = signalled_during_the_run(tmp.path(), "TERM");
    let (code, stderr) = code_and_stderr(&out);
    assert_eq!(code, Some(143), "{stderr}");
    insta::assert_snapshot!("sigterm-during-the-run", stderr);
    assert_old_set_intact(tmp.path());
    assert!(!tmp.path().join("requests.csv").exists());
}

#[test]
fn a_second_signal_ends_the_command_at_once_and_the_next_run_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    old_set(tmp.path());
    let out = signalled_during_the_run(tmp.path(), "INT TERM");
    let (code, stderr) = code_and_stderr(&out);
    // Ended by the handler of whichever signal came second (two threads may take them in
    // either order): 128 + its number, no message, the staged files left.
    assert!(matches!(code, Some(130 | 143)), "{code:?}: {stderr}");
    assert_eq!(stderr, "");
    let staged = |d: &Path| {
        fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().contains(".servesim-tmp-")
            })
            .count()
    };
    assert_eq!(staged(&tmp.path().join("out")), 3);
    assert_eq!(staged(tmp.path()), 1);
    // The next command writing there removes what the killed one left.
    let again = servesim(tmp.path())
        .args(["run", &b2(), "--set", "workload.requests=50", "--no-plots"])
        .args(["--out", "out", "--requests-csv", "requests.csv"])
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_eq!(staged(&tmp.path().join("out")), 0);
    assert_eq!(staged(tmp.path()), 0);
}

/// A signal after the simulation (during the analysis and writing) still stops the command:
/// it used to be ignored and the run to exit 0.
#[test]
fn a_signal_after_the_simulation_stops_before_anything_is_moved_into_place() {
    for (signal, code) in [("SIGINT", 130), ("SIGTERM", 143)] {
        let tmp = tempfile::tempdir().unwrap();
        old_set(tmp.path());
        let out = servesim(tmp.path())
            .env("SERVESIM_TEST_SIGNAL_AFTER_RUN", signal)
            .args(["run", &b2(), "--set", "workload.requests=300"])
            .args(["--out", "out", "--requests-csv", "requests.csv"])
            .output()
            .unwrap();
        let (got, stderr) = code_and_stderr(&out);
        assert_eq!(got, Some(code), "{signal}: {stderr}");
        insta::assert_snapshot!(
            format!("{}-after-the-simulation", signal.to_lowercase()),
            stderr
        );
        assert!(out.stdout.is_empty(), "{signal}: printed a report");
        assert_old_set_intact(tmp.path());
        assert!(!tmp.path().join("requests.csv").exists());
    }
}

/// A failure between the renames of the set puts back what was moved: the old set stays whole.
#[test]
fn a_failure_while_moving_the_outputs_into_place_leaves_the_old_set() {
    for after in 0..3 {
        let tmp = tempfile::tempdir().unwrap();
        old_set(tmp.path());
        let out = servesim(tmp.path())
            .env("SERVESIM_TEST_FAIL_COMMIT_AFTER", after.to_string())
            .args(["run", &b2(), "--set", "workload.requests=300", "--no-plots"])
            .args(["--out", "out"])
            .output()
            .unwrap();
        let (code, stderr) = code_and_stderr(&out);
        assert_eq!(code, Some(1), "after {after} renames: {stderr}");
        insta::assert_snapshot!(format!("swap-fails-after-{after}-renames"), stderr);
        assert_old_set_intact(tmp.path());
    }
}

#[test]
fn a_full_disk_is_an_error_with_exit_1_never_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let full = || {
        fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    // The report to a full stdout.
    let out = servesim(tmp.path())
        .args(["run", &b2(), "--set", "workload.requests=100"])
        .stdout(full())
        .output()
        .unwrap();
    let (code, stderr) = code_and_stderr(&out);
    assert_eq!(code, Some(1), "{stderr}");
    insta::assert_snapshot!("stdout-full", stderr);
    // A device output is written through, and its failure reported.
    let out = servesim(tmp.path())
        .args(["run", &b2(), "--set", "workload.requests=100"])
        .args(["--requests-csv", "/dev/full"])
        .output()
        .unwrap();
    let (code, stderr) = code_and_stderr(&out);
    assert_eq!(code, Some(1), "{stderr}");
    insta::assert_snapshot!("requests-csv-full", stderr);
    assert!(out.stdout.is_empty(), "a report after a failed output");
    // A successful run whose note cannot be written to stderr.
    let out = servesim(tmp.path())
        .args(["run", &b2(), "--set", "workload.requests=100", "--no-plots"])
        .args(["--out", "out"])
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!out.stdout.is_empty());
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    for args in [
        vec!["run", "--set", "workload.requests=100"],
        vec!["catalog", "--json"],
        vec!["explain"],
    ] {
        let mut child = Command::new(BIN)
            .current_dir(root())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before anything is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let (code, stderr) = code_and_stderr(&out);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}
