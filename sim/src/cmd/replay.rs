//! `sim replay`: recorded `letta` sessions reproduced in simulation and compared
//! (loopsim::harness::replay); one report per cassette, or one line each for several.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use clap::ValueEnum;
use loopsim::harness::html;
use loopsim::harness::replay::{self, ReplayOptions, Side};
use loopsim::harness::report::exit;
use serde_json::json;

use super::{CmdResult, check_output, write_file};
use crate::args::Format;

/// When the diff is coloured.
#[derive(Clone, Copy, ValueEnum)]
pub enum Colour {
    /// When stdout is a terminal.
    Auto,
    Always,
    Never,
}

/// Which side of the recording is played by loopsim's models.
#[derive(Clone, Copy, ValueEnum)]
pub enum SideArg {
    /// The client model against the server model; the requests are compared.
    Client,
    /// The recorded requests into the server model; the responses are compared.
    Server,
    /// Both, server first.
    Both,
}

/// Replay a recorded `letta` session (a version 2 cassette) in simulation and compare it with
/// the recording, exchange by exchange, after id normalisation.
///
/// Server side: the recorded requests, at their recorded offsets, and the model's answers
/// recovered from the recorded frames go into the server model; each response (status,
/// content type, body or frame by frame) is compared. Client side: the scenario the recording
/// implies runs the client model against the server model; the request sequences are compared.
/// Prints the first divergent exchange with a unified diff and the trace up to it, or how many
/// exchanges and frames matched. With several cassettes: one line each, with its wall time.
#[derive(clap::Args)]
pub struct Args {
    /// The cassettes (`sim record --layer letta` output, `sim import` of a letta_e2e flow).
    #[arg(required = true)]
    pub cassettes: Vec<PathBuf>,
    /// Which side loopsim plays.
    #[arg(long, value_enum, default_value_t = SideArg::Server)]
    pub side: SideArg,
    /// The server model's profile: cloud, local or letta-oss-0.16.
    #[arg(long, value_name = "NAME", default_value = "letta-oss-0.16")]
    pub server_profile: String,
    /// The client model's profile (client side): reference or letta-code.
    #[arg(long, value_name = "NAME", default_value = "letta-code")]
    pub client_profile: String,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Compare every body, the bookkeeping ones too (models, agent and conversation objects);
    /// without it those are compared on status and content type only.
    #[arg(long)]
    pub strict: bool,
    /// Also write the scenario the recording implies (client side) as a standalone directory:
    /// DIR/scenario.toml and its answers under DIR/answers/, for `sim run`, `sim explore
    /// --swarm` and `sim shrink`. With several cassettes, one subdirectory each.
    #[arg(long, value_name = "DIR")]
    pub emit_scenario: Option<PathBuf>,
    /// Colour the diff.
    #[arg(long, value_enum, default_value_t = Colour::Auto)]
    pub color: Colour,
    /// Also write every report of this command as one self-contained HTML page: the first
    /// divergence as the recorded and the replayed body side by side, their diff, and the
    /// replayed world as a sequence diagram (docs/trace.md).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub fn run(a: Args) -> CmdResult {
    let sides: &[Side] = match a.side {
        SideArg::Client => &[Side::Client],
        SideArg::Server => &[Side::Server],
        SideArg::Both => &[Side::Server, Side::Client],
    };
    let colour = match a.color {
        Colour::Always => true,
        Colour::Never => false,
        Colour::Auto => std::io::stdout().is_terminal(),
    };
    if let Some(file) = &a.html {
        check_output(file)?;
    }
    let many = a.cassettes.len() > 1 || sides.len() > 1;
    let mut code = exit::PASS;
    let mut reports = Vec::new();
    for path in &a.cassettes {
        if let Some(dir) = &a.emit_scenario {
            let rec = replay::load_letta(path)?;
            let out = if a.cassettes.len() > 1 {
                dir.join(path.file_stem().unwrap_or_default())
            } else {
                dir.clone()
            };
            let written =
                replay::client::emit_scenario(&rec, &out, &a.client_profile, &a.server_profile)?;
            eprintln!("scenario written to {}", written.display());
        }
        for side in sides {
            let opts =
                ReplayOptions::from_names(*side, &a.server_profile, &a.client_profile, a.strict)?;
            // Wall time is read here, in the command line, never inside a simulation.
            let started = Instant::now();
            let report = replay::replay_file(path, &opts)?;
            let wall_ms = started.elapsed().as_millis();
            code = code.max(report.exit_code());
            match a.format {
                Format::Json => {
                    let mut v = serde_json::to_value(&report).unwrap_or_default();
                    v["wall_ms"] = json!(wall_ms);
                    v["exit"] = json!(report.exit_code());
                    println!("{v}");
                }
                Format::Text if many => println!("{} [{wall_ms} ms]", report.summary()),
                Format::Text => {
                    print!("{}", report.render(colour));
                    println!("wall time {wall_ms} ms");
                }
            }
            if a.html.is_some() {
                reports.push(report);
            }
        }
    }
    if let Some(file) = &a.html {
        write_file(file, &html::replay_page(&reports))?;
        eprintln!("html report written to {}", file.display());
    }
    Ok(code)
}
