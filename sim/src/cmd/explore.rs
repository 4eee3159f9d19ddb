//! `sim explore`: a sweep with a progress bar and its rate, the JSON report when asked, and the
//! shrinking of the first failure of each invariant with `--shrink`.

use std::time::Instant;

use loopsim::harness::explore::ExploreOptions;
use loopsim::harness::sweep::{load_files, shrink_first_failures};

use super::{CmdResult, check_output, check_output_dir, write_file};
use crate::args::{ExploreArgs, Format};
use crate::isolate;
use crate::progress::Bar;

pub fn run(a: ExploreArgs) -> CmdResult {
    if let Some(file) = &a.out {
        check_output(file)?;
    }
    if let Some(dir) = &a.shrink {
        check_output_dir(dir)?;
    }
    let options = ExploreOptions {
        seeds: a.seeds.clone(),
        jobs: a.jobs,
        shard: a.shard,
        swarm: a.swarm,
        determinism_every: a.determinism_every,
    };
    let scenarios = load_files(&a.scenarios, a.tick_ms)?;
    if a.worker {
        return Ok(isolate::worker(&scenarios, &options, a.echo_panics));
    }
    let started = Instant::now();
    let bar = Bar::new("explore");
    // Seeds run in a child process, so that one whose panic aborts cannot end the sweep.
    let report = isolate::explore(&a, &scenarios, &options, &|done, total| {
        bar.update(done, total)
    })?;
    bar.finish();
    let wall = started.elapsed().as_secs_f64();
    let json = || serde_json::to_string_pretty(&report).expect("report serialises");
    match a.format {
        Format::Text => {
            print!("{}", report.render());
            println!(
                "rate      {:.1} seeds/s over {} job(s) ({wall:.2} s wall)",
                report.runs as f64 / wall.max(1e-9),
                options.jobs.max(1)
            );
        }
        Format::Json => println!("{}", json()),
    }
    if let Some(file) = a.out {
        write_file(&file, &json())?;
        eprintln!("report written to {}", file.display());
    }
    if let Some(dir) = a.shrink {
        shrink_first_failures(&report, a.tick_ms, &dir, &mut |s| eprint!("{}", s.render()))?;
    }
    Ok(report.exit_code())
}
