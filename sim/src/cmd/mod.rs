//! One file per command: each calls one library function, prints what it reports and returns
//! the exit code the library gives it.

pub mod bench;
pub mod ci;
pub mod explore;
pub mod import;
pub mod record;
pub mod replay;
pub mod report;
pub mod run;
pub mod serve;
pub mod shrink;

use std::path::Path;

use loopsim::harness::scenario::InputError;

/// An exit code, or an input problem (printed as `error: <file>:<line>:<col>: …`, exit 2).
pub type CmdResult = Result<i32, InputError>;

/// Writes an output file the user asked for, creating its directory.
/// Refuses an output file the user named that cannot be written: a directory, or a file in a
/// directory that does not exist. Checked before any work, so a sweep never runs for nothing.
pub fn check_output(path: &Path) -> Result<(), InputError> {
    let error = |message: String| InputError {
        file: path.display().to_string(),
        line: None,
        column: None,
        message,
    };
    if path.is_dir() {
        return Err(error("cannot write: is a directory; name a file".into()));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        return Err(error(format!(
            "cannot write: directory {} does not exist",
            dir.display()
        )));
    }
    Ok(())
}

/// Refuses an output directory the user named that cannot be made: an existing file, or a
/// directory whose parent does not exist. Checked before any work, like [`check_output`].
pub fn check_output_dir(path: &Path) -> Result<(), InputError> {
    let error = |message: String| InputError {
        file: path.display().to_string(),
        line: None,
        column: None,
        message,
    };
    if path.exists() && !path.is_dir() {
        return Err(error(
            "cannot write here: is a file; name a directory".into(),
        ));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        return Err(error(format!(
            "cannot write: directory {} does not exist",
            dir.display()
        )));
    }
    Ok(())
}

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
