//! The harness: builds worlds from scenarios, runs them on turmoil, records traces, checks
//! invariants and reports. It drives the models; the models never see it.
//!
//! The files at this level are true of every system; [`letta`] and [`kimi`] hold what is
//! particular to one. [`system`] is the one place that asks which system a scenario runs.

pub mod bench;
pub mod cassettes;
pub mod coverage;
pub mod declared;
pub mod env;
pub mod explore;
pub mod faults;
pub mod fuzz;
pub mod gate;
pub mod guard;
pub mod guidance;
pub mod guided;
pub mod html;
pub mod input;
pub mod invariants;
pub mod kimi;
pub mod letta;
pub mod realclient;
pub mod record;
pub mod replay;
pub mod report;
pub mod run;
pub mod scenario;
pub mod seed;
pub mod serve;
pub mod serve_guard;
pub mod shrink;
pub mod strategy;
pub mod swarm;
pub mod sweep;
pub mod system;
pub mod tcp;
pub mod trace;
pub mod twin;
pub mod warp;
pub mod world;
pub mod world_start;
