//! The Kimi agent-loop system in the harness: its scenario section and provider script, its
//! world (provider and agent hosts), its invariants, liveness diagnosis and swarm families.

pub mod access_rule;
pub mod budget;
pub mod coverage;
pub mod faults_fire;
pub mod invariants;
pub mod outcome_rule;
pub mod preflight_rule;
pub mod recovery_completes;
pub mod run;
pub mod scenario;
pub mod script;
pub mod shown_rule;
pub mod stop_rule;
pub mod swarm;
#[cfg(test)]
mod test_events;
pub mod world;
