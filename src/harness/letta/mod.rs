//! The Letta system in the harness: its scenario sections, its world (provider, server, client, probe hosts), its
//! invariants, liveness diagnosis, swarm families, coverage goals and conformance logs.

pub mod abandoned_run;
pub mod backfill;
pub mod bare;
pub mod budget_respected;
pub mod client_faults_fire;
pub mod client_invariants;
pub mod compaction_safe;
pub mod conflict_recovered;
pub mod conformance;
pub mod coverage;
pub mod dates_true;
pub mod findings;
pub mod invariants;
pub mod lock_rule;
pub mod otids_fresh;
pub mod pending_at_start;
pub mod probe;
pub mod recovery_completes;
pub mod response_state;
pub mod run;
pub mod scenario;
pub mod sdk_retries;
pub mod send_faults_fire;
pub mod swarm;
#[cfg(test)]
mod test_trace;
pub mod world;
