//! `sim`: the loopsim command line. Parses the arguments, runs the command, and exits with the
//! code its library call reports; an input error prints `error: …` and exits 2.

mod args;
mod cmd;
mod isolate;
mod progress;

use std::process::ExitCode;

use args::{Cli, Command, ReportCommand};
use clap::Parser;
use loopsim::harness::report::exit;

/// mimalloc rather than the system allocator: the models build and drop many small JSON values
/// and strings per step, and glibc's malloc and free were a tenth of a sweep's time
/// (docs/performance.md). Where a block lands in memory changes nothing a run observes.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::PASS
            };
            return ExitCode::from(code as u8);
        }
    };
    if prints_only(&cli.command) {
        quit_on_closed_stdout();
    }
    let result = match cli.command {
        Command::Run(a) => cmd::run::run(a),
        Command::Explore(a) => cmd::explore::run(a),
        Command::Shrink(a) => cmd::shrink::run(a),
        Command::Ci(a) => cmd::ci::run(a),
        Command::Report {
            command: ReportCommand::Merge(a),
        } => cmd::report::merge(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Import(a) => cmd::import::run(a),
        Command::Replay(a) => cmd::replay::run(a),
    };
    ExitCode::from(match result {
        Ok(code) => code as u8,
        Err(e) => {
            eprintln!("error: {e}");
            exit::USAGE as u8
        }
    })
}

/// The commands that talk to no socket: for them a closed stdout (`sim run … | head`) ends the
/// process quietly, as it does for any Unix filter. Rust ignores SIGPIPE so that a write to a
/// closed socket is an error rather than death; `serve`, `record` and `bench` need that.
fn prints_only(command: &Command) -> bool {
    !matches!(
        command,
        Command::Serve(_) | Command::Record(_) | Command::Bench(_)
    )
}

#[cfg(unix)]
fn quit_on_closed_stdout() {
    // SAFETY: called before any thread starts; resets one signal's disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn quit_on_closed_stdout() {}
