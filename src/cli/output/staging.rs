//! The names an output set stages its files under, and the cleanup of what killed commands
//! left behind (see [`super`]'s module docs for the rule they serve).

use std::fs;
use std::path::{Path, PathBuf};

/// Staged names end with this and the process id; kept-aside ones with `OLD` and it.
pub(super) const TMP: &str = ".servesim-tmp-";
pub(super) const OLD: &str = ".servesim-old-";

/// This process's id, which its staged names carry.
pub(super) fn pid() -> u32 {
    std::process::id()
}

/// What the link at `path` names, links followed, the last one possibly to a file that does not
/// exist yet (`None` when its directory does not exist either, or the links loop).
pub(super) fn follow(path: &Path) -> Option<PathBuf> {
    if let Ok(real) = fs::canonicalize(path) {
        return Some(real);
    }
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match fs::read_link(&at) {
            Ok(next) => at = at.parent().unwrap_or(Path::new(".")).join(next),
            Err(_) => {
                let dir = fs::canonicalize(at.parent()?).ok()?;
                return Some(dir.join(at.file_name()?));
            }
        }
    }
    None
}

/// The older staged name (`.NAME.tmp-PID`, before the `servesim` mark): a name other tools may
/// use too, so only cleaned beside a file of the same name that a set is about to write.
const LEGACY_TMP: &str = ".tmp-";

/// The process id in a staged (`.NAME.servesim-tmp-PID`), kept-aside (`…-old-PID`) or older
/// (`.NAME.tmp-PID`) name, with whether it is kept aside and the target's name.
fn ours(name: &str) -> Option<(u32, bool, &str)> {
    let rest = name.strip_prefix('.')?;
    for (mark, old) in [(TMP, false), (OLD, true), (LEGACY_TMP, false)] {
        if let Some((target, digits)) = rest.rsplit_once(mark) {
            let pid = digits.parse::<u32>().ok();
            let digits_only = digits.bytes().all(|b| b.is_ascii_digit());
            if let (Some(pid), false, true) = (pid, target.is_empty(), digits_only) {
                return Some((pid, old, target));
            }
        }
    }
    None
}

/// Whether process `pid` runs (always assumed when it cannot be told).
fn alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

/// Remove what killed commands left in `dir`: staged files, and files kept aside, which are
/// put back where their replacement is missing; files of the older naming only when they
/// stage `legacy_for`.
pub(super) fn clean_stale(dir: &Path, legacy_for: Option<&str>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((p, old, target)) = ours(name) else {
            continue;
        };
        let legacy = !name.contains(TMP) && !name.contains(OLD);
        if p == pid()
            || alive(p)
            || !e.file_type().is_ok_and(|t| t.is_file())
            || (legacy && legacy_for != Some(target))
        {
            continue;
        }
        let target = dir.join(target);
        if old && fs::symlink_metadata(&target).is_err() {
            let _ = fs::rename(e.path(), target);
        } else {
            let _ = fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_names_are_recognised_with_their_process() {
        assert_eq!(
            ours(".summary.json.servesim-tmp-42"),
            Some((42, false, "summary.json"))
        );
        assert_eq!(ours(".a.csv.servesim-old-7"), Some((7, true, "a.csv")));
        assert_eq!(ours(".r.csv.tmp-9"), Some((9, false, "r.csv")));
        assert_eq!(ours("summary.json"), None);
        assert_eq!(ours(".x.servesim-tmp-abc"), None);
    }

    #[test]
    fn stale_files_of_a_dead_process_are_cleaned() {
        let d = tempfile::tempdir().unwrap();
        // A process id that is not running: above the kernel's maximum.
        let dead = 4_194_305;
        fs::write(d.path().join(format!(".a.servesim-tmp-{dead}")), "x").unwrap();
        fs::write(d.path().join(format!(".b.servesim-old-{dead}")), "old b").unwrap();
        fs::write(d.path().join(format!(".c.tmp-{dead}")), "x").unwrap();
        let left = |d: &Path| {
            let mut names: Vec<_> = fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };
        clean_stale(d.path(), None);
        // The older name stays until a set writes `c`.
        assert_eq!(left(d.path()), [format!(".c.tmp-{dead}"), "b".to_string()]);
        clean_stale(d.path(), Some("c"));
        assert_eq!(left(d.path()), ["b"]);
        assert_eq!(fs::read_to_string(d.path().join("b")).unwrap(), "old b");
    }
}
