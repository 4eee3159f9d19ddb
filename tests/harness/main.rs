//! What is true of every system: sweeps, swarm plans, shrinking and the gate (`explore`), and the
//! formats the harness records and replays: cassettes (`cassette`) and the provider wire
//! decoders against the shared captures (`wire_provider_captures`) and in the simulated world
//! (`provider_formats`).

#[path = "../common/mod.rs"]
mod common;

mod cassette;
mod explore;
mod fault_plans;
mod fuzz;
mod hostile;
mod html;
mod import;
mod library;
mod provider_formats;
mod warp;
mod wire_provider_captures;
