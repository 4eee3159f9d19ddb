//! One seed of a scenario file, as `sim run` and `sim shrink` name it: the scenario the seed
//! runs (its explicit faults, plus its swarm plan when asked), its run, and the shrinking of its
//! failure to a minimal scenario written to a directory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::explore::{baseline, plan_of, shrink_base, with_swarm};
use super::report::{RunReport, Verdict, exit, reproduce_command};
use super::run::run_scenario;
use super::scenario::{InputError, Retune, Scenario};
use super::shrink::{Shrunk, shrink, with_plan};
use super::trace::{first_divergence, render_events};

/// The scenario at `path` as seed `seed` runs it: with the command line's network settings, with the seed's swarm
/// plan added when `swarm`, and with a reproduce command that carries both flags.
pub fn load_seed(
    path: &Path,
    seed: u64,
    swarm: bool,
    retune: &Retune,
) -> Result<Scenario, InputError> {
    let scenario = Scenario::load(path)?.retuned(retune);
    if swarm {
        with_seed_swarm(&scenario, seed)
    } else {
        Ok(scenario)
    }
}

/// `scenario` with seed `seed`'s swarm plan added to its explicit faults, and a reproduce
/// command that carries `--swarm`.
pub fn with_seed_swarm(scenario: &Scenario, seed: u64) -> Result<Scenario, InputError> {
    let mut swarmed = with_swarm(scenario, seed, &baseline(scenario)?);
    swarmed.repro_flags.insert_str(0, " --swarm");
    Ok(swarmed)
}

/// Runs seed `seed` of the scenario at `path` `runs` times (two or more check `deterministic`).
pub fn run_seed(
    path: &Path,
    seed: u64,
    swarm: bool,
    retune: &Retune,
    runs: u32,
) -> Result<RunReport, InputError> {
    run_planned(path, seed, swarm, &[], retune, runs)
}

/// [`run_seed`] with `plan` added to the scenario's faults (`sim run --plan`, a guided sweep's
/// failure); a fault the scenario cannot reach is refused as in a scenario file.
pub fn run_planned(
    path: &Path,
    seed: u64,
    swarm: bool,
    plan: &[super::faults::Fault],
    retune: &Retune,
    runs: u32,
) -> Result<RunReport, InputError> {
    let mut scenario = load_seed(path, seed, swarm, retune)?;
    if !plan.is_empty() {
        scenario
            .faults
            .extend(plan.iter().cloned().map(|f| toml::Spanned::new(0..0, f)));
        scenario = scenario.checked().map_err(|e| InputError {
            message: format!("--plan: {}", e.message),
            ..e
        })?;
        scenario
            .repro_flags
            .insert_str(0, &super::guidance::plan_flags(plan));
    }
    run_scenario(&scenario, seed, runs)
}

/// Where a shrunk failure is written under `dir`: one folder per (scenario, seed, invariant).
pub fn shrunk_dir(dir: &Path, scenario: &Path, seed: u64, invariant: &str) -> PathBuf {
    let stem = scenario
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!("{stem}-seed{seed}-{invariant}"))
}

/// The default directory shrunk scenarios are written under.
pub const SHRUNK_DIR: &str = "shrunk";

/// The invariant seed `seed` of `scenario` fails first (`crash` for a caught panic), or `None`
/// when it passes.
pub fn first_failing_invariant(
    scenario: &Scenario,
    seed: u64,
) -> Result<Option<String>, InputError> {
    let r = run_scenario(scenario, seed, 2)?;
    Ok(match r.invariants.iter().find(|(_, v)| !v.is_empty()) {
        Some((id, _)) => Some(id.to_string()),
        None if matches!(r.verdict, Verdict::Crash(_)) => Some("crash".into()),
        None => None,
    })
}

/// What `sim shrink` did with one seed.
#[derive(Debug)]
pub enum SeedShrink {
    /// The seed passes every invariant: nothing to shrink.
    Passes { scenario: PathBuf, seed: u64 },
    /// The seed was shrunk and written to `file`.
    Shrunk {
        scenario: PathBuf,
        shrunk: Box<Shrunk>,
        file: PathBuf,
    },
}

/// What to shrink and where to write it.
#[derive(Debug, Clone)]
pub struct ShrinkSeedOptions {
    pub seed: u64,
    /// The seed failed with its swarm plan.
    pub swarm: bool,
    /// The invariant to keep failing; the first one the seed fails when `None`.
    pub invariant: Option<String>,
    /// The directory to write; `shrunk/<stem>-seed<seed>-<invariant>` when `None`.
    pub out: Option<PathBuf>,
    /// Upper bound on candidate runs.
    pub max_runs: u32,
}

/// Shrinks one failing seed of the scenario at `path` to a minimal scenario that fails the same
/// invariant, and writes it.
pub fn shrink_seed(path: &Path, options: &ShrinkSeedOptions) -> Result<SeedShrink, InputError> {
    let seed = options.seed;
    let error = |message: String| InputError {
        file: path.display().to_string(),
        line: None,
        column: None,
        message,
    };
    if options.max_runs == 0 {
        return Err(error(
            "--max-runs 0 leaves no run to check the seed with: give at least 1".into(),
        ));
    }
    if let Some(i) = &options.invariant
        && i != "crash"
        && !super::invariants::ALL.contains(&i.as_str())
    {
        return Err(error(format!(
            "unknown invariant {i:?}: expected one of {}, crash",
            super::invariants::ALL.join(", ")
        )));
    }
    let base = Scenario::load(path)?;
    let start = with_plan(
        &shrink_base(&base, seed, options.swarm),
        plan_of(&base, seed, options.swarm)?,
    );
    let invariant = match &options.invariant {
        Some(i) => i.clone(),
        None => match first_failing_invariant(&start, seed)? {
            Some(i) => i,
            None => {
                return Ok(SeedShrink::Passes {
                    scenario: path.to_path_buf(),
                    seed,
                });
            }
        },
    };
    let shrunk = shrink(&start, seed, &invariant, options.max_runs)?;
    let dir = match &options.out {
        Some(d) => d.clone(),
        None => shrunk_dir(Path::new(SHRUNK_DIR), path, seed, &invariant),
    };
    let file = shrunk.write(&dir)?;
    Ok(SeedShrink::Shrunk {
        scenario: path.to_path_buf(),
        shrunk: Box::new(shrunk),
        file,
    })
}

impl SeedShrink {
    /// The report `sim shrink` prints.
    pub fn render(&self) -> String {
        let mut s = String::new();
        match self {
            SeedShrink::Passes { scenario, seed } => {
                let _ = writeln!(
                    s,
                    "seed {seed} passes every invariant on {}: nothing to shrink",
                    scenario.display()
                );
            }
            SeedShrink::Shrunk {
                scenario,
                shrunk,
                file,
            } => {
                let _ = writeln!(
                    s,
                    "shrunk    {} on {} seed {} in {} runs",
                    shrunk.invariant,
                    scenario.display(),
                    shrunk.seed,
                    shrunk.attempts
                );
                for step in &shrunk.steps {
                    let _ = writeln!(s, "  - {step}");
                }
                let faults: Vec<String> = shrunk
                    .scenario
                    .faults
                    .iter()
                    .map(|f| f.get_ref().to_string())
                    .collect();
                let _ = writeln!(
                    s,
                    "faults    {}",
                    if faults.is_empty() {
                        "none".to_string()
                    } else {
                        faults.join("; ")
                    }
                );
                let _ = writeln!(s, "written   {}", file.display());
                let _ = writeln!(
                    s,
                    "reproduce {}",
                    reproduce_command(&file.display().to_string(), shrunk.seed, "")
                );
            }
        }
        s
    }

    /// The exit code of `sim shrink`: a pass when there was nothing to shrink, correctness when
    /// a failing scenario was written.
    pub fn exit_code(&self) -> i32 {
        match self {
            SeedShrink::Passes { .. } => exit::PASS,
            SeedShrink::Shrunk { .. } => exit::CORRECTNESS,
        }
    }
}

/// Runs `scenario` with `seed` warped and stepping through every tick, and says where the two
/// traces first differ (`None`: byte for byte the same, as they must be).
pub fn warp_divergence(scenario: &Scenario, seed: u64) -> Result<Option<String>, InputError> {
    let system = scenario.system();
    let mut on = scenario.clone();
    on.network.warp = true;
    let off = scenario.clone().with_no_warp(true);
    let warped = render_events(&system.run_world(&on, seed)?.trace);
    let stepped = render_events(&system.run_world(&off, seed)?.trace);
    Ok(first_divergence(&stepped, &warped)
        .map(|(line, a, b)| format!("line {line}:\n    stepped: {a}\n    warped:  {b}")))
}
