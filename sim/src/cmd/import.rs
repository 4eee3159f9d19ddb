//! `sim import`: other tools' recordings as version 2 cassettes (loopsim::cassette::import).

use std::path::PathBuf;

use loopsim::harness::scenario::InputError;

/// Turn recordings into version 2 cassettes: raw `.sse` captures, vcrpy / pytest-recording
/// YAML cassettes, Letta end-to-end `*.exchanges.jsonl` recordings.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The files to import.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Where the cassettes are written, one per file.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(args: Args) -> Result<i32, InputError> {
    Err(InputError {
        file: args.out.display().to_string(),
        line: None,
        column: None,
        message: format!("sim import of {} files: not built yet", args.files.len()),
    })
}
