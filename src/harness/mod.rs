//! The harness: builds worlds from scenarios, runs them on turmoil, records traces, checks
//! invariants and reports. It drives the models; the models never see it.

pub mod bare;
pub mod cassettes;
pub mod coverage;
pub mod env;
pub mod explore;
pub mod faults;
pub mod gate;
pub mod invariants;
pub mod run;
pub mod scenario;
pub mod serve;
pub mod shrink;
pub mod swarm;
pub mod tcp;
pub mod trace;
pub mod world;
