//! `sim ci`: the regression gate, its wall time, and its JUnit and JSON reports when asked.

use std::time::Instant;

use std::path::Path;

use loopsim::harness::explore::{ExploreOptions, ExploreReport};
use loopsim::harness::gate::{GateOptions, RealClientStage, run_gate};
use loopsim::harness::scenario::{InputError, Scenario};

use super::{CmdResult, check_output, write_file};
use crate::args::CiArgs;
use crate::isolate::{self, Child};

/// The gate checks determinism on every tenth seed.
const DETERMINISM_EVERY: u64 = 10;

pub fn run(a: CiArgs) -> CmdResult {
    for file in a.junit.iter().chain(&a.json) {
        check_output(file)?;
    }
    loopsim::harness::warp::set_warp_by_default(!a.no_warp);
    let options = GateOptions {
        root: a.root,
        as_written_seeds: a.as_written_seeds,
        fixed_seeds: a.fixed_seeds,
        published_seeds: a.published_seeds,
        commit: a.commit,
        commit_seeds: a.commit_seeds,
        canary_seeds: a.canary_seeds,
        determinism_every: DETERMINISM_EVERY,
        jobs: a.jobs,
        real_client: a.real_client.map(|command| RealClientStage {
            command,
            dir: a.real_client_dir,
            seeds: a.real_client_seeds,
            run_timeout_ms: a.real_client_timeout_ms,
        }),
    };
    let started = Instant::now();
    let report = run_gate(&options, &isolated, &|stage| eprintln!("sim ci: {stage}"))?;
    print!("{}", report.render());
    println!("wall      {:.1} s", started.elapsed().as_secs_f64());
    if let Some(f) = a.junit {
        write_file(&f, &report.to_junit())?;
        eprintln!("junit written to {}", f.display());
    }
    if let Some(f) = a.json {
        write_file(
            &f,
            &serde_json::to_string_pretty(&report).expect("report serialises"),
        )?;
        eprintln!("json written to {}", f.display());
    }
    Ok(report.exit_code)
}

/// One of the gate's sweeps in worker processes, as `sim explore` runs them: a seed that
/// aborts its process is that seed's crash, and the gate goes on.
fn isolated(
    file: &Path,
    scenario: &Scenario,
    options: &ExploreOptions,
) -> Result<ExploreReport, InputError> {
    let child = Child {
        scenarios: vec![file.to_path_buf()],
        tick_ms: None,
        latency_scale: None,
        client_profile: scenario.profile_override,
        no_warp: !loopsim::harness::warp::warp_by_default(),
    };
    isolate::explore(&child, std::slice::from_ref(scenario), options, &|_, _| {})
}
