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
            ReadError::TooLarge { .. } => std::io::Error::other(e.to_string()),
            ReadError::NotUtf8 { .. } => {
                std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
            }
        }
    }
}

/// The largest catalog file read.
pub const MAX_CATALOG_BYTES: u64 = 4 << 20;

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
            read_text(&p, 10),
            Err(ReadError::NotUtf8 { offset: 1 })
        ));
    }
}
