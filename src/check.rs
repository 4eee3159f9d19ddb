//! The library face for a user's own `cargo test`: load a scenario, run one seed or sweep many
//! (with or without swarm faults), and assert on the report.
//!
//! A failing assertion panics with the same report `sim run` / `sim explore` print, ending in
//! the one command that reproduces the failing seed, so a red test in CI is one copy-paste
//! away from a local replay.
//!
//! ```
//! use loopsim::check::Check;
//!
//! # fn main() -> Result<(), loopsim::harness::scenario::InputError> {
//! // One seed, run twice (the second run checks `deterministic`).
//! let report = Check::load("scenarios/letta/approval_turn.toml")?.run_seed(1)?;
//! assert!(report.passed(), "{}", report.render());
//!
//! // A swarm sweep: each seed draws its own fault plan.
//! Check::load("scenarios/letta/approval_turn.toml")?
//!     .seeds(0..8)
//!     .swarm(true)
//!     .assert_pass();
//! # Ok(())
//! # }
//! ```
//!
//! For a property test whose failing fault plan proptest itself shrinks, see
//! [`crate::harness::strategy`] (a `Strategy` over a scenario's fault plans).

use std::ops::Range;
use std::path::Path;

use crate::harness::explore::{ExploreOptions, ExploreReport, explore};
use crate::harness::report::{RunReport, Verdict};
use crate::harness::run::run_scenario;
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::seed::with_seed_swarm;

/// A scenario and how to run it. Built with [`Check::load`] (or [`Check::new`] for a scenario
/// built in code), configured with the builder methods, run with [`Check::run`],
/// [`Check::run_seed`] or [`Check::assert_pass`].
#[derive(Debug, Clone)]
pub struct Check {
    scenario: Scenario,
    seeds: Range<u64>,
    swarm: bool,
    jobs: usize,
    determinism_every: u64,
}

impl Check {
    /// Loads a scenario file (docs/scenario.md). A bad file is an [`InputError`] naming the
    /// file, line and column.
    pub fn load(path: impl AsRef<Path>) -> Result<Check, InputError> {
        Ok(Check::new(Scenario::load(path.as_ref())?))
    }

    /// A check of a scenario already in memory (e.g. loaded and then edited by the test).
    /// Defaults: seeds `0..100`, no swarm, one job, every 10th seed run twice.
    pub fn new(scenario: Scenario) -> Check {
        Check {
            scenario,
            seeds: 0..100,
            swarm: false,
            jobs: 1,
            determinism_every: 10,
        }
    }

    /// The seeds a sweep runs (`start..end`, end exclusive).
    pub fn seeds(mut self, seeds: Range<u64>) -> Check {
        self.seeds = seeds;
        self
    }

    /// Draw a fault plan per seed on top of the scenario's own faults (as `--swarm` does).
    pub fn swarm(mut self, on: bool) -> Check {
        self.swarm = on;
        self
    }

    /// Worker threads for a sweep; the report is the same for any number.
    pub fn jobs(mut self, jobs: usize) -> Check {
        self.jobs = jobs.max(1);
        self
    }

    /// Run every n-th seed of a sweep twice to check `deterministic` (0 = never).
    pub fn determinism_every(mut self, n: u64) -> Check {
        self.determinism_every = n;
        self
    }

    /// The scenario this check runs.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Runs one seed twice (the second run checks `deterministic`), with the seed's swarm plan
    /// when [`Check::swarm`] is on, and returns its report.
    pub fn run_seed(&self, seed: u64) -> Result<RunReport, InputError> {
        if self.swarm {
            run_scenario(&with_seed_swarm(&self.scenario, seed)?, seed, 2)
        } else {
            run_scenario(&self.scenario, seed, 2)
        }
    }

    /// Sweeps the seeds and returns the report (failures by invariant, coverage).
    pub fn run(&self) -> Result<ExploreReport, InputError> {
        let options = ExploreOptions {
            seeds: self.seeds.clone(),
            jobs: self.jobs,
            shard: None,
            swarm: self.swarm,
            determinism_every: self.determinism_every,
            guided: false,
        };
        explore(std::slice::from_ref(&self.scenario), &options, &|_, _| {})
    }

    /// Sweeps the seeds and panics with the sweep's report (every failure with its reproduce
    /// command) unless every seed passed. An invalid scenario panics with its input error.
    #[track_caller]
    pub fn assert_pass(&self) {
        match self.run() {
            Ok(report) if report.failures.is_empty() => {}
            Ok(report) => panic!(
                "{} of {} seeds failed\n{}",
                report.failures.len(),
                report.runs,
                report.render()
            ),
            Err(e) => panic!("{e}"),
        }
    }
}

impl RunReport {
    /// True when every invariant held (expected failures of a profile included as expected).
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }

    /// Panics with the report (ending in its reproduce command) unless the run passed.
    #[track_caller]
    pub fn assert_pass(&self) {
        assert!(self.passed(), "{}", self.render());
    }
}
