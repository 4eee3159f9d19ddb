//! `sim run`: one seed of one scenario, its report and, when asked, its trace.

use loopsim::harness::html;
use loopsim::harness::scenario::Retune;
use loopsim::harness::seed::run_planned;

use super::{CmdResult, check_output, write_file};
use crate::args::RunArgs;

pub fn run(a: RunArgs) -> CmdResult {
    for file in a.trace.iter().chain(&a.html) {
        check_output(file)?;
    }
    loopsim::harness::warp::set_warp_by_default(!a.no_warp);
    let runs = if a.check_determinism {
        a.runs.max(2)
    } else {
        a.runs
    };
    let report = run_planned(
        &a.scenario,
        a.seed,
        a.swarm,
        &a.plan,
        &Retune {
            tick_ms: a.tick_ms,
            latency_scale: a.latency_scale,
            client_profile: a.client_profile.map(|p| p.name()),
            start: a.start,
        },
        runs,
    )?;
    if let Some(file) = a.trace {
        write_file(&file, &report.trace_text)?;
        println!("trace written to {}", file.display());
    }
    if let Some(file) = a.html {
        write_file(&file, &html::run_page(&report))?;
        println!("html report written to {}", file.display());
    }
    if a.print_trace {
        print!("{}", report.trace_text);
    }
    print!("{}", report.render());
    Ok(report.verdict.exit_code())
}
