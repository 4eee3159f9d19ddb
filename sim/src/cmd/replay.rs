//! `sim replay`: recorded `letta` sessions reproduced in simulation and compared
//! (loopsim::harness::replay); one report per cassette, or one line each for several.

use std::io::IsTerminal;
use std::time::Instant;

use loopsim::harness::html;
use loopsim::harness::replay::{self, ReplayOptions, Side};
use loopsim::harness::report::exit;
use serde_json::json;

use super::{CmdResult, check_output, write_file};
use crate::args::{Colour, Format, ReplayArgs, SideArg};

pub fn run(a: ReplayArgs) -> CmdResult {
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
