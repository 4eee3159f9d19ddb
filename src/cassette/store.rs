//! The only file I/O of the cassette module: reading and writing cassette files. Every error
//! names the path as given.

use std::path::Path;

use super::format::{Cassette, CassetteError, CassetteErrorKind, utf8_text};

/// Reads a whole file, as a cassette error naming the path when it cannot be read.
pub(super) fn read_bytes(path: &Path) -> Result<Vec<u8>, CassetteError> {
    std::fs::read(path).map_err(|e| {
        CassetteError::whole(
            &path.display().to_string(),
            CassetteErrorKind::Io,
            format!("cannot read: {e}"),
        )
    })
}

/// Writes a whole file, as a cassette error naming the path when it cannot be written.
pub(super) fn write_text(path: &Path, text: &str) -> Result<(), CassetteError> {
    std::fs::write(path, text).map_err(|e| {
        CassetteError::whole(
            &path.display().to_string(),
            CassetteErrorKind::Io,
            format!("cannot write: {e}"),
        )
    })
}

impl Cassette {
    /// Reads a cassette file. The path, as given, is the origin in error messages.
    pub fn load(path: impl AsRef<Path>) -> Result<Cassette, CassetteError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let bytes = read_bytes(path)?;
        Cassette::parse(utf8_text(&bytes, &origin)?, &origin)
    }

    /// Writes [`to_jsonl`](Self::to_jsonl) to `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), CassetteError> {
        write_text(path.as_ref(), &self.to_jsonl())
    }
}
