//! The models against real processes and real sockets: the published Letta Code CLI (`cli`,
//! `cli_conformance`) and the Python SDK (`sdk`) against `sim serve`, the CLI's local backend
//! against `sim serve --provider-only` (`local_backend`, and `compaction`: its own compaction
//! as the judge of the `local` profile's), installed by tests/interop/setup.sh (the fixtures beside this file: the scenarios they serve and the SDK
//! script), the models on real loopback TCP (`real_tcp`), and `sim record` between real peers (`record`).
//! The published Kimi Code CLI against `sim serve --provider-only`, as the judge of the
//! agent-loop model under both its engines (`kimi_conformance`, helpers in `kimi_cli`),
//! installed by tests/interop/setup-kimi.sh; and its seed sweeps under provider faults,
//! `sim explore --real-client` over agent-loop scenarios (`kimi_realclient`).
//!
//! Run just these: `cargo test --test interop` (a few minutes: the CLI flows run the real
//! client, and flow 3 waits its 10 s busy back-off by design).

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod cli_conformance;
mod clients;
mod compaction;
mod kimi_cli;
mod kimi_conformance;
mod kimi_realclient;
mod local_backend;
mod real_tcp;
mod realclient;
mod record;
mod sdk;
