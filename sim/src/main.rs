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
    };
    ExitCode::from(match result {
        Ok(code) => code as u8,
        Err(e) => {
            eprintln!("error: {e}");
            exit::USAGE as u8
        }
    })
}
