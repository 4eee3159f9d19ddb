//! The only file I/O of the cassette module: reading and writing cassette files, and appending
//! to a recording while it is made. Every error names the path as given.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::format::{
    Cassette, CassetteError, CassetteErrorKind, Exchange, RECORDING_VERSION, Recording,
    RecordingHeader, end_line, exchange_line, header_line, utf8_text, version_of,
};
use super::import::{ImportKind, MAX_IMPORT_BYTES, import_bytes};
use super::scrub::Scrubber;
use crate::wire::provider::StreamFormat;

fn io_error(path: &Path, what: &str, e: std::io::Error) -> CassetteError {
    CassetteError::whole(
        &path.display().to_string(),
        CassetteErrorKind::Io,
        format!("cannot {what}: {e}"),
    )
}

/// Reads a whole file, as a cassette error naming the path when it cannot be read.
pub(super) fn read_bytes(path: &Path) -> Result<Vec<u8>, CassetteError> {
    std::fs::read(path).map_err(|e| io_error(path, "read", e))
}

/// Reads a whole file of at most `limit` bytes; a larger one is an error naming its size.
pub(super) fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, CassetteError> {
    let len = std::fs::metadata(path)
        .map_err(|e| io_error(path, "read", e))?
        .len();
    if len > limit {
        return Err(CassetteError::whole(
            &path.display().to_string(),
            CassetteErrorKind::Size,
            format!("{len} bytes is over the {limit}-byte bound for this kind of file"),
        ));
    }
    read_bytes(path)
}

/// Writes a whole file, as a cassette error naming the path when it cannot be written.
pub(super) fn write_text(path: &Path, text: &str) -> Result<(), CassetteError> {
    std::fs::write(path, text).map_err(|e| io_error(path, "write", e))
}

impl Cassette {
    /// Reads a cassette file. The path, as given, is the origin in error messages. A version 2
    /// file is read when it holds exactly one exchange (a recorded provider stream); see
    /// [`Recording::stream`] for one exchange of a longer recording.
    pub fn load(path: impl AsRef<Path>) -> Result<Cassette, CassetteError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let bytes = read_bytes(path)?;
        let text = utf8_text(&bytes, &origin)?;
        if version_of(text) == Some(RECORDING_VERSION) {
            let r = Recording::parse(text, &origin)?;
            if r.exchanges().len() != 1 {
                return Err(CassetteError::whole(
                    &origin,
                    CassetteErrorKind::Provider,
                    format!(
                        "a recording of {} exchanges, not one provider stream: name one exchange (Recording::stream)",
                        r.exchanges().len()
                    ),
                ));
            }
            return r.stream(1);
        }
        Cassette::parse(text, &origin)
    }

    /// Writes [`to_jsonl`](Self::to_jsonl) to `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), CassetteError> {
        write_text(path.as_ref(), &self.to_jsonl())
    }
}

impl Recording {
    /// Reads a cassette file of either version (version 1 lifted to one exchange). The path, as
    /// given, is the origin in error messages.
    pub fn load(path: impl AsRef<Path>) -> Result<Recording, CassetteError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let bytes = read_bytes(path)?;
        Recording::parse(utf8_text(&bytes, &origin)?, &origin)
    }

    /// Writes [`to_jsonl`](Self::to_jsonl) to `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), CassetteError> {
        write_text(path.as_ref(), &self.to_jsonl())
    }
}

/// A version 2 cassette being written as a session goes: the header at once, each exchange as
/// it is handed over, the end line only at [`finish`](Self::finish). Every line is flushed when
/// written, so a recorder that dies leaves a file that reads as truncated, never as complete.
pub struct RecordingFile {
    path: PathBuf,
    file: std::fs::File,
    written: u64,
}

impl RecordingFile {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(path: impl AsRef<Path>, header: &RecordingHeader) -> Result<Self, CassetteError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "create the folder", e))?;
        }
        let file = std::fs::File::create(&path).map_err(|e| io_error(&path, "create", e))?;
        let mut f = RecordingFile {
            path,
            file,
            written: 0,
        };
        f.write(&header_line(header))?;
        Ok(f)
    }

    fn write(&mut self, line: &str) -> Result<(), CassetteError> {
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.flush())
            .map_err(|e| io_error(&self.path, "write", e))
    }

    /// Appends the next exchange (numbered in the order appended).
    pub fn append(&mut self, x: &Exchange) -> Result<(), CassetteError> {
        self.written += 1;
        let line = exchange_line(self.written, x);
        self.write(&line)
    }

    /// How many exchanges have been written.
    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the end line (the session lasted `t_ms`) and syncs the file to disk.
    pub fn finish(mut self, t_ms: u64) -> Result<PathBuf, CassetteError> {
        let line = end_line(t_ms, self.written);
        self.write(&line)?;
        self.file
            .sync_all()
            .map_err(|e| io_error(&self.path, "sync", e))?;
        Ok(self.path)
    }
}

/// Imports one file (`sim import`): its kind from its name ([`ImportKind::of_name`]), read with
/// the [`MAX_IMPORT_BYTES`] bound, the path as given as its source. Returns the kind, the
/// cassette stem (the name without the kind's suffix) and the recording.
pub fn import_file(
    path: &Path,
    format: Option<StreamFormat>,
    scrubber: &Scrubber,
) -> Result<(ImportKind, String, Recording), CassetteError> {
    let origin = path.display().to_string();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (kind, stem) = ImportKind::of_name(&name).ok_or_else(|| {
        CassetteError::whole(
            &origin,
            CassetteErrorKind::Unrepresentable,
            "unknown kind of recording: expected *.sse, *.yaml / *.yml (vcrpy) or *.exchanges.jsonl (letta_e2e)",
        )
    })?;
    let bytes = read_bounded(path, MAX_IMPORT_BYTES)?;
    let r = import_bytes(kind, &bytes, &origin, format, scrubber)?;
    Ok((kind, stem.to_string(), r))
}
