//! The one place that asks which system a scenario runs. Every other harness file is either
//! true of all systems (and calls through here) or belongs to one system's folder
//! ([`super::letta`], [`super::kimi`]). A third system is a new folder and a new arm here.

use super::coverage::Goal;
use super::letta::swarm::Baseline;
use super::report::RunReport;
use super::scenario::{InputError, Scenario};

/// A system under test: which models a scenario's world is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum System {
    /// Letta's stateful approval loop: provider, server, client (and a probe) hosts.
    Letta,
    /// Kimi Code's stateless turn loop: provider and agent hosts.
    Kimi,
}

impl System {
    pub const ALL: [System; 2] = [System::Letta, System::Kimi];

    /// The name a scenario gives in `[scenario] system`.
    pub fn name(self) -> &'static str {
        match self {
            System::Letta => "letta",
            System::Kimi => "agent-loop",
        }
    }

    pub fn from_name(name: &str) -> Option<System> {
        System::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Runs `scenario` with `seed` `runs` times in this system's world.
    pub fn run(self, scenario: &Scenario, seed: u64, runs: u32) -> Result<RunReport, InputError> {
        match self {
            System::Letta => super::run::run_letta(scenario, seed, runs),
            System::Kimi => super::kimi::run::run_scenario(scenario, seed, runs),
        }
    }

    /// The fault-free baseline run of `scenario` (seed 0, explicit faults removed): where
    /// swarm faults can land.
    pub fn baseline(self, clean: &Scenario) -> Result<Baseline, InputError> {
        match self {
            System::Letta => {
                let out = super::letta::world::run_once(clean, 0)?;
                Ok(Baseline::from_trace(&out.trace, out.end_ms))
            }
            System::Kimi => {
                let out = super::kimi::world::run_once(clean, 0)?;
                Ok(Baseline::from_trace(&out.trace, out.end_ms))
            }
        }
    }

    /// The checks of `scenario` only this system needs (after those every scenario gets).
    pub fn validate(self, scenario: &Scenario) -> Result<(), InputError> {
        let at = scenario.origin();
        match self {
            System::Letta => super::letta::scenario::validate(&scenario.letta_sections(), &at),
            System::Kimi => super::kimi::scenario::validate(&scenario.agent_loop_sections()?, &at),
        }
    }

    /// Writes the sections of `scenario` only this system reads (a scenario being written).
    pub fn write_sections<M: serde::ser::SerializeMap>(
        self,
        scenario: &Scenario,
        out: &mut M,
    ) -> Result<(), M::Error> {
        match self {
            System::Letta => {
                super::letta::scenario::write_sections(&scenario.letta_sections(), out)
            }
            System::Kimi => out.serialize_entry("agent_loop", &scenario.agent_loop),
        }
    }

    /// The coverage goals of this system's runs.
    pub fn goals(self) -> &'static [Goal] {
        match self {
            System::Letta => super::coverage::GOALS,
            System::Kimi => super::coverage::LOOP_GOALS,
        }
    }
}
