//! What the verbs write to files, as one set ([`Outputs`]), under one rule for every output
//! path (the files of `--out DIR`, `--requests-csv FILE`):
//!
//! * every path is checked before anything runs (but a sweep's figures, planned once its runs
//!   are done): its directory must exist (`--out` is created) and take a file, the path must
//!   not be a directory, a symbolic link into a directory that does not exist, an input of the
//!   command (the scenario, a trace, a data or catalog file it reads) or another output of the
//!   set;
//! * a symbolic link is followed: its target is written and the link stays;
//! * a special file (a device such as `/dev/null`, a FIFO) is written through, in place;
//! * a regular file is staged under a temporary name beside its target
//!   (`.NAME.servesim-tmp-PID`); when every file of the set is complete they are renamed into
//!   place, the files they replace kept aside (`.NAME.servesim-old-PID`) until the last rename
//!   and put back if one fails, so the set replaces the old one as a unit or not at all;
//! * a set that is not committed (an error, a signal) removes its staged files, and the
//!   directories it created if they are empty, when dropped; staging in a directory first
//!   removes what commands killed there earlier left behind (files of the older
//!   `.NAME.tmp-PID` naming, which other tools may use, only beside a file the set writes).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::Failure;
use staging::{clean_stale, follow, pid, OLD, TMP};

mod staging;

/// The environment variable that makes a commit fail after this many renames (tests only: a
/// failure while moving the set into place cannot be provoked otherwise).
pub const FAIL_COMMIT_AFTER: &str = "SERVESIM_TEST_FAIL_COMMIT_AFTER";

/// An output file of the set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileId(usize);

/// An output directory of the set.
#[derive(Clone, Debug)]
pub(super) struct OutDir {
    shown: PathBuf,
    real: PathBuf,
}

impl OutDir {
    /// The directory as the user gave it.
    pub fn shown(&self) -> &Path {
        &self.shown
    }
}

enum Mode {
    /// Staged at `tmp`, renamed over the target at commit (the old file kept at `old`).
    Replace { tmp: PathBuf, old: PathBuf },
    /// Written in place (a device or a FIFO).
    Through,
}

struct Planned {
    /// The flag that asked for it.
    flag: String,
    /// As shown in messages.
    shown: PathBuf,
    /// Where it goes, links followed.
    target: PathBuf,
    mode: Mode,
    file: Option<File>,
}

/// A file the command reads, to be kept from being overwritten.
struct Input {
    real: PathBuf,
    id: Option<(u64, u64)>,
}

/// A set of output files, written as a unit (see the module docs).
pub(super) struct Outputs {
    inputs: Vec<Input>,
    files: Vec<Planned>,
    /// Directories created for the set, removed again (when empty) if it is not committed.
    created: Vec<PathBuf>,
    committed: bool,
}

#[cfg(unix)]
fn file_id(m: &fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(_: &fs::Metadata) -> Option<(u64, u64)> {
    None
}

impl Outputs {
    /// A set that must not overwrite these input files.
    pub fn new(inputs: impl IntoIterator<Item = PathBuf>) -> Self {
        let input = |p: PathBuf| {
            let real = fs::canonicalize(&p).ok()?;
            let id = fs::metadata(&real).ok().as_ref().and_then(file_id);
            Some(Input { real, id })
        };
        let inputs = inputs.into_iter().filter_map(input).collect();
        Outputs {
            inputs,
            files: Vec::new(),
            created: Vec::new(),
            committed: false,
        }
    }

    /// `--out DIR`: a directory, created if missing, that must take files.
    pub fn dir(&mut self, dir: &Path) -> Result<OutDir, Failure> {
        let usage = |e: String| Failure::usage(e, "choose a writable location for --out");
        if dir.exists() && !dir.is_dir() {
            return Err(Failure::usage(
                format!("--out `{}` exists and is not a directory", dir.display()),
                "give a directory path (it is created if missing)",
            ));
        }
        // The directories created, outermost first, so that a set not committed removes them.
        let absent = |a: &&Path| !a.as_os_str().is_empty() && fs::symlink_metadata(a).is_err();
        let missing: Vec<PathBuf> = dir
            .ancestors()
            .take_while(absent)
            .map(Path::to_path_buf)
            .collect();
        let shown = dir.display();
        let create = |e| usage(format!("cannot create the output directory `{shown}`: {e}"));
        fs::create_dir_all(dir).map_err(create)?;
        self.created.extend(missing.into_iter().rev());
        let write = |e| usage(format!("cannot write into `{shown}`: {e}"));
        let real = fs::canonicalize(dir).map_err(write)?;
        clean_stale(&real, None);
        let probe = real.join(format!(".servesim-probe-{}", pid()));
        File::create(&probe).map_err(write)?;
        let _ = fs::remove_file(probe);
        Ok(OutDir {
            shown: dir.to_path_buf(),
            real,
        })
    }

    /// The file `name` of an output directory.
    pub fn file_in(&mut self, dir: &OutDir, name: &str) -> Result<FileId, Failure> {
        self.plan("--out", &dir.shown.join(name), &dir.real, name)
    }

    /// A file given by `flag` (`--requests-csv FILE`); its directory must exist.
    pub fn file(&mut self, flag: &str, path: &Path) -> Result<FileId, Failure> {
        let not_a_file = || {
            Failure::usage(
                format!("{flag} `{}` is not a file path", path.display()),
                format!("give a file name, e.g. {flag} requests.csv"),
            )
        };
        let name = path.file_name().ok_or_else(not_a_file)?;
        let name = name.to_str().ok_or_else(not_a_file)?.to_string();
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        let cannot = |e: &dyn std::fmt::Display| {
            let hint = format!("choose a writable location for {flag}");
            Failure::usage(format!("cannot create `{}`: {e}", path.display()), hint)
        };
        let real_parent =
            fs::canonicalize(parent.unwrap_or(Path::new("."))).map_err(|e| cannot(&e))?;
        if !real_parent.is_dir() {
            return Err(cannot(&"Not a directory (os error 20)"));
        }
        clean_stale(&real_parent, None);
        self.plan(flag, path, &real_parent, &name)
    }

    fn plan(
        &mut self,
        flag: &str,
        shown: &Path,
        real_dir: &Path,
        name: &str,
    ) -> Result<FileId, Failure> {
        let refuse = |what: String, hint: &str| Failure::usage(what, hint.to_string());
        let as_given = shown.display();
        clean_stale(real_dir, Some(name));
        let path = real_dir.join(name);
        // Follow a link to what it names (created if missing); the link itself stays.
        let target = match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => follow(&path).ok_or_else(|| {
                let what = "is a symbolic link into a directory that does not exist";
                refuse(
                    format!("{flag} `{as_given}` {what}"),
                    "remove the link or point it at a file",
                )
            })?,
            _ => path,
        };
        let meta = fs::metadata(&target).ok();
        if meta.as_ref().is_some_and(fs::Metadata::is_dir) {
            // A file flag names the file itself; under `--out DIR` the directory holds one
            // where the command writes a file.
            let hint = match flag {
                "--out" => "move that directory away, or give --out another directory".to_string(),
                "--requests-csv" => {
                    "give a file path, e.g. --requests-csv requests.csv".to_string()
                }
                _ => format!("give {flag} a file path"),
            };
            return Err(refuse(format!("{flag} `{as_given}` is a directory"), &hint));
        }
        let id = meta.as_ref().and_then(file_id);
        if self
            .inputs
            .iter()
            .any(|i| i.real == target || (id.is_some() && i.id == id))
        {
            let what = "is an input of this command; an output never replaces an input";
            let hint = "choose another path for the output";
            return Err(refuse(format!("{flag} `{as_given}` {what}"), hint));
        }
        if let Some(other) = self.files.iter().find(|f| f.target == target) {
            let (by, at) = (&other.flag, other.shown.display());
            let what = format!("{flag} `{as_given}` is also written by {by} (as `{at}`)");
            return Err(refuse(what, "give each output its own path"));
        }
        let cannot = |e: std::io::Error| {
            let hint = format!("choose a writable location for {flag}");
            Failure::usage(format!("cannot write `{as_given}`: {e}"), hint)
        };
        let (mode, file) = match &meta {
            Some(m) if !m.is_file() => {
                let f = fs::OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .map_err(cannot)?;
                (Mode::Through, f)
            }
            _ => {
                let dir = target.parent().unwrap_or(Path::new("."));
                let leaf = target.file_name().map(|n| n.to_string_lossy().into_owned());
                let leaf = leaf.unwrap_or_else(|| name.into());
                let tmp = dir.join(format!(".{leaf}{TMP}{}", pid()));
                let old = dir.join(format!(".{leaf}{OLD}{}", pid()));
                let f = File::create(&tmp).map_err(cannot)?;
                (Mode::Replace { tmp, old }, f)
            }
        };
        self.files.push(Planned {
            flag: flag.to_string(),
            shown: shown.to_path_buf(),
            target,
            mode,
            file: Some(file),
        });
        Ok(FileId(self.files.len() - 1))
    }

    /// The file to stream an output into (once).
    pub fn take_writer(&mut self, id: FileId) -> File {
        let file = self.files[id.0].file.take();
        file.expect("invariant: an output file is opened once")
    }

    /// The path of an output, as shown.
    pub fn shown(&self, id: FileId) -> &Path {
        &self.files[id.0].shown
    }

    /// The failure of a write to an output.
    pub fn write_failure(&self, id: FileId, why: impl ToString) -> Failure {
        Failure::runtime(format!("cannot write `{}`", self.shown(id).display()), why)
    }

    /// Write an output whole.
    pub fn write(&mut self, id: FileId, bytes: &[u8]) -> Result<(), Failure> {
        let mut f = self.take_writer(id);
        f.write_all(bytes)
            .and_then(|()| f.flush())
            .map_err(|e| self.write_failure(id, e))
    }

    /// Move every staged file into place, as a unit: on a failure, the files already moved are
    /// put back as they were. Returns how many files were written.
    pub fn commit(mut self) -> Result<usize, Failure> {
        let fail_after = std::env::var(FAIL_COMMIT_AFTER).ok();
        let fail_after: Option<usize> = fail_after.and_then(|s| s.parse().ok());
        for f in &mut self.files {
            f.file = None; // close before renaming
        }
        let mut moved: Vec<(usize, bool)> = Vec::new();
        let mut failure = None;
        for (i, f) in self.files.iter().enumerate() {
            let Mode::Replace { tmp, old } = &f.mode else {
                continue;
            };
            if fail_after == Some(moved.len()) {
                failure = Some((i, std::io::Error::other("injected failure (test)")));
                break;
            }
            let had_old = fs::symlink_metadata(&f.target).is_ok();
            if had_old {
                if let Err(e) = fs::rename(&f.target, old) {
                    failure = Some((i, e));
                    break;
                }
            }
            if let Err(e) = fs::rename(tmp, &f.target) {
                if had_old {
                    let _ = fs::rename(old, &f.target);
                }
                failure = Some((i, e));
                break;
            }
            moved.push((i, had_old));
        }
        if let Some((i, e)) = failure {
            for &(j, had_old) in moved.iter().rev() {
                let f = &self.files[j];
                if let Mode::Replace { old, .. } = &f.mode {
                    let _ = match had_old {
                        true => fs::rename(old, &f.target),
                        false => fs::remove_file(&f.target),
                    };
                }
            }
            let shown = self.files[i].shown.display().to_string();
            // Drop removes the staged files.
            let mut f = Failure::runtime(format!("cannot move `{shown}` into place"), e);
            f.hint = Some("the previous outputs were left as they were".into());
            return Err(f);
        }
        for &(j, had_old) in &moved {
            if let (true, Mode::Replace { old, .. }) = (had_old, &self.files[j].mode) {
                let _ = fs::remove_file(old);
            }
        }
        self.committed = true;
        Ok(self.files.len())
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        for f in &mut self.files {
            f.file = None;
            if let Mode::Replace { tmp, .. } = &f.mode {
                let _ = fs::remove_file(tmp);
            }
        }
        // Innermost first; a directory that holds anything stays.
        for d in self.created.iter().rev() {
            let _ = fs::remove_dir(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_replaces_the_old_files_or_leaves_them() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("a"), "old a").unwrap();
        fs::write(d.path().join("b"), "old b").unwrap();
        let mut o = Outputs::new([]);
        let dir = o.dir(d.path()).unwrap();
        for (n, v) in [("a", "new a"), ("b", "new b"), ("c", "new c")] {
            let id = o.file_in(&dir, n).unwrap();
            o.write(id, v.as_bytes()).unwrap();
        }
        assert_eq!(o.commit().unwrap(), 3);
        let read = |n: &str| fs::read_to_string(d.path().join(n)).unwrap();
        assert_eq!(
            (read("a"), read("b"), read("c")),
            ("new a".into(), "new b".into(), "new c".into())
        );
        let mut left: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["a", "b", "c"]);
    }
}
