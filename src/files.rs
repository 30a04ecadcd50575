//! Reading the user's files with a cap on their size, so that a wrong path (a disk image,
//! `/dev/zero`, a FIFO that never ends) is refused with a clear error instead of filling the
//! memory. The cap is checked on the bytes read, not on the size the file system reports,
//! which is 0 for devices and pipes.

use std::io::Read;
use std::path::Path;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The operating system's error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// More bytes than the cap.
    #[error("it holds more than {limit} bytes, the most servesim reads from such a file")]
    TooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// A line longer than the cap (no line breaks: a device, a binary file).
    #[error("it has a line longer than {limit} bytes: it is not a text file of rows")]
    LineTooLong {
        /// The cap, in bytes.
        limit: u64,
    },
    /// Not UTF-8 text.
    #[error("it is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 {
        /// The first bad byte.
        offset: usize,
    },
}

impl From<ReadError> for std::io::Error {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Io(e) => e,
            ReadError::TooLarge { .. } | ReadError::LineTooLong { .. } => std::io::Error::other(e),
            ReadError::NotUtf8 { .. } => {
                std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
            }
        }
    }
}

/// The largest catalog file read.
pub const MAX_CATALOG_BYTES: u64 = 4 << 20;

/// The longest line of a data file (bytes): a file without line breaks (`/dev/zero`, a binary)
/// is refused after this many bytes rather than read to the size cap.
pub const MAX_LINE_BYTES: u64 = 1 << 20;

/// The bytes of `path`, at most `limit` of them.
pub fn read_capped(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(bytes)
}

/// A reader of a file of rows: at most `limit + 1` bytes of it, and an error
/// ([`ReadError::LineTooLong`] inside an [`std::io::Error`]) at a line longer than
/// [`MAX_LINE_BYTES`].
pub fn rows_reader(path: &Path, limit: u64) -> std::io::Result<impl Read> {
    let file = std::fs::File::open(path)?;
    Ok(LineCapped {
        inner: file.take(limit.saturating_add(1)),
        line_bytes: 0,
    })
}

/// The [`ReadError`] inside an I/O error of [`rows_reader`], if it is one.
pub fn read_error(e: &std::io::Error) -> Option<&ReadError> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<ReadError>())
}

struct LineCapped<R> {
    inner: R,
    line_bytes: u64,
}

impl<R: Read> Read for LineCapped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            self.line_bytes = if b == b'\n' { 0 } else { self.line_bytes + 1 };
            if self.line_bytes > MAX_LINE_BYTES {
                return Err(ReadError::LineTooLong {
                    limit: MAX_LINE_BYTES,
                }
                .into());
            }
        }
        Ok(n)
    }
}

/// The text of a file of rows (see [`rows_reader`]), at most `limit` bytes of UTF-8.
pub fn read_rows_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    let mut bytes = Vec::new();
    rows_reader(path, limit)?
        .read_to_end(&mut bytes)
        .map_err(|e| match read_error(&e) {
            Some(ReadError::LineTooLong { limit }) => ReadError::LineTooLong { limit: *limit },
            _ => ReadError::Io(e),
        })?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 {
        offset: e.utf8_error().valid_up_to(),
    })
}

/// The text of `path`, at most `limit` bytes of UTF-8.
pub fn read_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    String::from_utf8(read_capped(path, limit)?).map_err(|e| ReadError::NotUtf8 {
        offset: e.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_line_breaks_is_refused_at_the_line_cap() {
        match read_rows_text(Path::new("/dev/zero"), 1 << 30) {
            Err(ReadError::LineTooLong { limit }) => assert_eq!(limit, MAX_LINE_BYTES),
            other => panic!("{other:?}"),
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rows.csv");
        let line = "x".repeat(MAX_LINE_BYTES as usize) + "\n";
        std::fs::write(&p, line.repeat(3)).unwrap();
        assert_eq!(read_rows_text(&p, 1 << 30).unwrap().len(), line.len() * 3);
    }

    #[test]
    fn an_endless_file_is_refused_at_the_cap() {
        match read_capped(Path::new("/dev/zero"), 1000) {
            Err(ReadError::TooLarge { limit: 1000 }) => {}
            other => panic!("{other:?}"),
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "abc").unwrap();
        assert_eq!(read_capped(&p, 3).unwrap(), b"abc");
        assert!(matches!(
            read_capped(&p, 2),
            Err(ReadError::TooLarge { .. })
        ));
        std::fs::write(&p, b"a\xff").unwrap();
        assert!(matches!(
            read_rows_text(&p, 10),
            Err(ReadError::NotUtf8 { offset: 1 })
        ));
        assert!(matches!(
            read_text(&p, 10),
            Err(ReadError::NotUtf8 { offset: 1 })
        ));
    }
}
