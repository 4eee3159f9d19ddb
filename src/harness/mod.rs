//! The harness: builds worlds from scenarios, runs them on turmoil, records traces, checks
//! invariants and reports. It drives the models; the models never see it.

pub mod bare;
pub mod cassettes;
pub mod client_invariants;
pub mod coverage;
pub mod env;
pub mod explore;
pub mod faults;
pub mod findings;
pub mod gate;
pub mod invariants;
pub mod loop_invariants;
pub mod loop_run;
pub mod loop_scenario;
pub mod loop_script;
pub mod loop_swarm;
pub mod loop_world;
pub mod run;
pub mod scenario;
pub mod serve;
pub mod shrink;
pub mod swarm;
pub mod tcp;
pub mod trace;
pub mod world;
