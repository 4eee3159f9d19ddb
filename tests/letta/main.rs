//! The Letta system (`system = "letta"`): the stateful server and the approval-loop client in
//! simulation, their scenarios and invariants, the walking skeleton, the conformance with the
//! recorded traffic of the real client, and the golden master against the real server's bytes.
//! The runs against real processes (the CLI, the SDK, real TCP) are in tests/interop/.

#[path = "../common/mod.rs"]
mod common;

mod client_conformance;
mod client_invariants;
mod client_mechanisms;
mod client_scenarios;
mod compaction;
mod golden_letta_oss;
mod policy_oracle;
mod profile_findings;
mod replay;
mod server_scenarios;
mod skeleton;
