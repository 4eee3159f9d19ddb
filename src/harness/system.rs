//! The one place that asks which system a scenario runs. Every other harness file is either
//! true of all systems (and calls through here) or belongs to one system's folder
//! ([`super::letta`], [`super::kimi`]). A third system is a new folder and a new arm here.

use super::coverage::Goal;
use super::faults::Fault;
use super::invariants::{ENDS_AS_DECLARED, RECOVERY_COMPLETES, Violation};
use super::report::Expectations;
use super::twin::compare;
use std::path::Path;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::scenario::{InputError, Scenario};
use super::trace::TraceEvent;
use super::world::WorldRun;
use super::{kimi, letta};

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

    /// Runs `scenario` once with `seed` in this system's world.
    pub fn run_world(self, scenario: &Scenario, seed: u64) -> Result<WorldRun, InputError> {
        match self {
            System::Letta => letta::run::run_world(scenario, seed),
            System::Kimi => kimi::run::run_world(scenario, seed),
        }
    }

    /// This system's invariants over one run's trace, in report order (`deterministic` and
    /// `turn-terminates` are the run flow's).
    pub fn invariants(
        self,
        scenario: &Scenario,
        trace: &[TraceEvent],
    ) -> Vec<(&'static str, Vec<Violation>)> {
        match self {
            System::Letta => letta::run::invariants(scenario, trace),
            System::Kimi => kimi::run::invariants(scenario, trace),
        }
    }

    /// The invariants that hold `run` (of `scenario` at `seed`) against its fault-free twin (the
    /// same scenario and seed, no faults; the comparison is `harness/twin.rs`). The twin is run
    /// only when needed: the plan is one this system's `recovery-completes` judges, and some
    /// turn ended other than settled (a Letta stop reason, an agent-loop completion). When the
    /// scenario as written has no faults of its own the twin is the scenario as written, so it is
    /// also held to the scenario's `[scenario] outcomes` (`ends-as-declared`): a build whose
    /// fault-free turn ends wrongly is the comparison's own baseline, which the comparison cannot
    /// see, and the sweeps (whose runs all carry a plan) meet it here.
    pub fn twin_invariants(
        self,
        scenario: &Scenario,
        seed: u64,
        run: &WorldRun,
    ) -> Result<Vec<(&'static str, Vec<Violation>)>, InputError> {
        let Some(outcomes) = &run.outcomes else {
            // `turn-terminates` judges a run that did not finish.
            return Ok(vec![(RECOVERY_COMPLETES, Vec::new())]);
        };
        let (judged, settled) = match self {
            System::Letta => (letta::recovery_completes::judged(scenario)?, "stopped: "),
            System::Kimi => (kimi::recovery_completes::judged(scenario), "completed: "),
        };
        if scenario.faults.is_empty() || !judged || outcomes.iter().all(|o| o.starts_with(settled))
        {
            return Ok(vec![(RECOVERY_COMPLETES, Vec::new())]);
        }
        let mut clean = scenario.clone();
        clean.faults.clear();
        let twin = self.run_world(&clean, seed)?;
        let mut declared_check = None;
        if let Some(declared) =
            super::declared::ends_as_declared(&clean, twin.outcomes.as_deref(), &twin.trace)
        {
            let prefix = format!(
                "the fault-free twin of this run (the scenario as written, seed {seed}, reproduced without the plan): "
            );
            let declared = declared
                .into_iter()
                .map(|v| Violation {
                    message: format!("{prefix}{}", v.message),
                    // Its events are the twin's, not this run's.
                    event: None,
                    ..v
                })
                .collect();
            declared_check = Some((ENDS_AS_DECLARED, declared));
        }
        let uncompared = match self {
            System::Letta => letta::recovery_completes::uncompared(scenario, run, &twin),
            System::Kimi => false,
        };
        // A twin that did not finish holds this run to nothing.
        let compared = match &twin.outcomes {
            Some(expected) if !uncompared => compare(outcomes, expected, &run.trace),
            _ => Vec::new(),
        };
        Ok(std::iter::once((RECOVERY_COMPLETES, compared))
            .chain(declared_check)
            .collect())
    }

    /// Cuts `plan` down to the faults this system's `recovery-completes` holds to heal within a
    /// budget.
    pub fn keep_healing(self, plan: &mut Vec<Fault>) {
        match self {
            System::Letta => plan.retain(letta::recovery_completes::heals),
            System::Kimi => plan.retain(kimi::recovery_completes::heals),
        }
    }

    /// What a run that did not finish its turns was stuck on.
    pub fn liveness_diagnosis(self, run: &WorldRun, scenario: &Scenario) -> String {
        match self {
            System::Letta => letta::run::liveness_diagnosis(run, scenario),
            System::Kimi => kimi::run::liveness_diagnosis(run, scenario),
        }
    }

    /// The failures the scenario expects of this run (its `[[expect]]` entries).
    pub fn expectations(
        self,
        scenario: &Scenario,
        invariants: &[(&'static str, Vec<Violation>)],
        trace: &[TraceEvent],
    ) -> Expectations {
        match self {
            System::Letta => letta::run::expectations(scenario, invariants, trace),
            System::Kimi => Expectations::default(),
        }
    }

    /// The fault-free baseline run of `clean` (seed 0, explicit faults removed): where swarm
    /// faults can land. A baseline run that panics gives the baseline of an empty trace, so a
    /// swarm or guided sweep goes on and each seed's own run reports the panic as its failure,
    /// as a plain sweep does, rather than the sweep dying before its first seed.
    pub fn baseline(self, clean: &Scenario) -> Result<Baseline, InputError> {
        let run = super::guard::guarded(|| {
            Ok(match self {
                System::Letta => {
                    let out = letta::world::run_once(clean, 0)?;
                    (out.trace, out.end_ms)
                }
                System::Kimi => {
                    let out = kimi::world::run_once(clean, 0)?;
                    (out.trace, out.end_ms)
                }
            })
        })?;
        Ok(match run {
            Ok((trace, end_ms)) => self.baseline_of(&trace, end_ms),
            Err(_panic) => self.baseline_of(&[], 0),
        })
    }

    /// The baseline a fault-free run's trace gives.
    pub fn baseline_of(self, trace: &[TraceEvent], end_ms: u64) -> Baseline {
        match self {
            System::Letta => Baseline::Letta(letta::swarm::Baseline::from_trace(trace, end_ms)),
            System::Kimi => Baseline::Kimi(kimi::swarm::Baseline::from_trace(trace, end_ms)),
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
            System::Letta => letta::coverage::GOALS,
            System::Kimi => kimi::coverage::GOALS,
        }
    }
}

/// What a fault-free run of a scenario did, in its system's terms: where swarm faults land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    Letta(letta::swarm::Baseline),
    Kimi(kimi::swarm::Baseline),
}

impl Baseline {
    /// The swarm plan of `seed`: which of the system's fault families are on, and one fault
    /// from each.
    pub fn plan(&self, seed: u64) -> Vec<Fault> {
        match self {
            Baseline::Letta(b) => letta::swarm::plan(seed, b),
            Baseline::Kimi(b) => kimi::swarm::plan(seed, b),
        }
    }
}

/// Loading and writing a scenario: the core checks (`scenario.rs`), then its system's own.
impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, InputError> {
        Scenario::read_core(path).and_then(Scenario::checked)
    }

    /// Parses scenario text; `path` names it in errors and anchors relative paths.
    pub fn parse(source: &str, path: &Path) -> Result<Scenario, InputError> {
        Scenario::parse_core(source, path).and_then(Scenario::checked)
    }

    /// The scenario if every check passes: the core checks, then its system's own.
    pub(crate) fn checked(self) -> Result<Scenario, InputError> {
        let system = &self.scenario.system;
        let Some(kind) = System::from_name(system.get_ref()) else {
            return Err(self.error_at(
                system.span(),
                format!(
                    "unknown system {:?}: expected \"letta\" or \"agent-loop\"",
                    system.get_ref()
                ),
            ));
        };
        kind.validate(&self)?;
        Ok(self)
    }

    /// The system this scenario runs (its `[scenario] system`, checked when it was loaded).
    pub fn system(&self) -> System {
        System::from_name(self.scenario.system.get_ref()).unwrap_or(System::Letta)
    }

    /// True for `system = "agent-loop"` (the Kimi Code turn loop against the fake provider).
    pub fn is_agent_loop(&self) -> bool {
        self.system() == System::Kimi
    }
}

impl Serialize for Scenario {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(None)?;
        out.serialize_entry("scenario", &self.scenario)?;
        out.serialize_entry("network", &self.network)?;
        out.serialize_entry("provider", &self.provider)?;
        self.system().write_sections(self, &mut out)?;
        out.serialize_entry("limits", &self.limits)?;
        let planted = self.planted.on();
        if !planted.is_empty() {
            out.serialize_entry("planted", &planted)?;
        }
        if !self.faults.is_empty() {
            out.serialize_entry("faults", &self.faults)?;
        }
        out.end()
    }
}
