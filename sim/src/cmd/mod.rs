//! One file per command: each calls one library function, prints what it reports and returns
//! the exit code the library gives it.

pub mod bench;
pub mod ci;
pub mod explore;
pub mod import;
pub mod record;
pub mod report;
pub mod run;
pub mod serve;
pub mod shrink;

use std::path::Path;

use loopsim::harness::scenario::InputError;

/// An exit code, or an input problem (printed as `error: <file>:<line>:<col>: …`, exit 2).
pub type CmdResult = Result<i32, InputError>;

/// Writes an output file the user asked for, creating its directory.
pub fn write_file(path: &Path, text: &str) -> Result<(), InputError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(path, text).map_err(|e| InputError {
        file: path.display().to_string(),
        line: None,
        column: None,
        message: format!("cannot write: {e}"),
    })
}
