//! The harness: builds worlds from scenarios, runs them on turmoil, records traces, checks
//! invariants and reports. It drives the models; the models never see it.

pub mod cassettes;
pub mod env;
pub mod invariants;
pub mod run;
pub mod scenario;
pub mod serve;
pub mod tcp;
pub mod trace;
pub mod world;
