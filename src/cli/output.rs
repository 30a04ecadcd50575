//! What the verbs write: output directories filled atomically, and terminal tables.

use std::path::Path;

use comfy_table::{presets, CellAlignment, Table};

use super::Failure;

/// Make sure `dir` is a directory we can write into (created if missing), before any run.
pub(super) fn prepare_out_dir(dir: &Path) -> Result<(), Failure> {
    if dir.exists() && !dir.is_dir() {
        return Err(Failure::usage(
            format!("--out `{}` exists and is not a directory", dir.display()),
            "give a directory path (it is created if missing)",
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::usage(
            format!(
                "cannot create the output directory `{}`: {e}",
                dir.display()
            ),
            "choose a writable location for --out",
        )
    })?;
    let probe = dir.join(format!(".servesim-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        Failure::usage(
            format!("cannot write into `{}`: {e}", dir.display()),
            "choose a writable location for --out",
        )
    })?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Write every file to a temporary name first, then rename them all into place: a failure
/// leaves the directory's previous files untouched.
pub(super) fn write_outputs<N: AsRef<str>>(
    dir: &Path,
    files: &[(N, Vec<u8>)],
) -> Result<(), Failure> {
    let pid = std::process::id();
    let mut staged = Vec::new();
    for (name, bytes) in files {
        let name = name.as_ref();
        let tmp = dir.join(format!(".{name}.tmp-{pid}"));
        if let Err(e) = std::fs::write(&tmp, bytes) {
            for t in &staged {
                let _ = std::fs::remove_file(t);
            }
            let _ = std::fs::remove_file(&tmp);
            return Err(Failure::runtime(
                format!("cannot write `{}`", dir.join(name).display()),
                e,
            ));
        }
        staged.push(tmp);
    }
    for ((name, _), tmp) in files.iter().zip(&staged) {
        let name = name.as_ref();
        std::fs::rename(tmp, dir.join(name)).map_err(|e| {
            Failure::runtime(
                format!("cannot move `{}` into place", dir.join(name).display()),
                e,
            )
        })?;
    }
    Ok(())
}

/// A terminal table without lines: numbers right-aligned, the first `left` columns left-aligned.
pub(super) fn table<S: ToString>(header: &[S], left: usize) -> Table {
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    t.set_header(header.iter().map(ToString::to_string).collect::<Vec<_>>());
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_cell_alignment(if i < left {
            CellAlignment::Left
        } else {
            CellAlignment::Right
        });
    }
    t
}

/// The table's lines, without trailing spaces, each ending in a newline.
pub(super) fn render(t: &Table) -> String {
    t.lines().map(|l| l.trim_end().to_string() + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_text_left_and_numbers_right() {
        let mut t = table(&["name", "tokens"], 1);
        t.add_row(vec!["a", "1,000"]);
        t.add_row(vec!["longer", "7"]);
        assert_eq!(
            render(&t),
            " name    tokens\n a        1,000\n longer       7\n"
        );
    }
}
