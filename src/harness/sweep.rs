//! Sweeps as the command line runs them: `sim explore` over scenario files, the shrinking of
//! the first failure of each invariant a sweep found, and `sim report merge` over the JSON
//! reports of its shards.

use std::path::{Path, PathBuf};

use super::explore::{ExploreOptions, ExploreReport, explore, plan_of, shrink_base};
use super::report::reproduce_command;
use super::scenario::{InputError, Retune, Scenario};
use super::seed::shrunk_dir;
use super::shrink::{shrink, with_plan};

/// Candidate runs per shrink after a sweep.
pub const SHRINK_MAX_RUNS: u32 = 400;

/// Loads the scenario files (with the command line's network settings) and sweeps them.
pub fn explore_files(
    paths: &[PathBuf],
    retune: &Retune,
    options: &ExploreOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<ExploreReport, InputError> {
    explore(&load_files(paths, retune)?, options, progress)
}

/// Loads the scenario files of a sweep with the command line's network settings.
pub fn load_files(paths: &[PathBuf], retune: &Retune) -> Result<Vec<Scenario>, InputError> {
    paths
        .iter()
        .map(|p| Scenario::load(p).map(|s| s.retuned(retune)))
        .collect()
}

/// One failure of a sweep, shrunk and written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShrunkFailure {
    pub invariant: String,
    pub seed: u64,
    /// Candidate runs the shrink took.
    pub attempts: u32,
    /// The scenario file written.
    pub file: PathBuf,
}

impl ShrunkFailure {
    /// The two lines `sim explore --shrink` prints for it.
    pub fn render(&self) -> String {
        format!(
            "shrunk    {} (seed {}) in {} runs → {}\n          reproduce: {}\n",
            self.invariant,
            self.seed,
            self.attempts,
            self.file.display(),
            reproduce_command(&self.file.display().to_string(), self.seed, "")
        )
    }
}

/// Shrinks the first failing seed of each invariant in `report` and writes each under `dir`
/// (`<stem>-seed<seed>-<invariant>/`), reloading its scenario with the command line's network settings.
/// `written` is called after each one, in invariant order.
pub fn shrink_first_failures(
    report: &ExploreReport,
    retune: &Retune,
    dir: &Path,
    written: &mut dyn FnMut(&ShrunkFailure),
) -> Result<(), InputError> {
    for (invariant, seeds) in report.by_invariant() {
        let (scenario_path, seed) = &seeds[0];
        let base = Scenario::load(Path::new(scenario_path))?.retuned(retune);
        // A guided failure carries its plan; a swarm plan follows from the seed.
        let failure = report
            .failures
            .iter()
            .find(|f| &f.scenario == scenario_path && f.seed == *seed);
        let plan = match failure {
            Some(f) if report.guided => base
                .faults
                .iter()
                .map(|f| f.get_ref().clone())
                .chain(f.faults.iter().cloned())
                .collect(),
            _ => plan_of(&base, *seed, report.swarm)?,
        };
        let start = with_plan(
            &shrink_base(&base, *seed, report.swarm || report.guided),
            plan,
        );
        let shrunk = shrink(&start, *seed, &invariant, SHRINK_MAX_RUNS)?;
        let target = shrunk_dir(dir, Path::new(scenario_path), *seed, &invariant);
        let file = shrunk.write(&target)?;
        written(&ShrunkFailure {
            invariant,
            seed: *seed,
            attempts: shrunk.attempts,
            file,
        });
    }
    Ok(())
}

/// Reads the JSON reports of `sim explore --shard K/N --out FILE` runs and merges them.
pub fn merge_report_files(paths: &[PathBuf]) -> Result<ExploreReport, InputError> {
    let mut reports = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(p).map_err(|e| InputError {
            file: p.display().to_string(),
            line: None,
            column: None,
            message: format!("cannot read report: {e}"),
        })?;
        let r: ExploreReport = serde_json::from_str(&text).map_err(|e| InputError {
            file: p.display().to_string(),
            line: Some(e.line()),
            column: Some(e.column()),
            message: format!("not a `sim explore --out` report: {e}"),
        })?;
        reports.push(r);
    }
    let named: Vec<(String, &ExploreReport)> = paths
        .iter()
        .map(|p| p.display().to_string())
        .zip(&reports)
        .collect();
    ExploreReport::merge_named(&named).map_err(|m| InputError {
        file: "sim report merge".into(),
        line: None,
        column: None,
        message: m,
    })
}
