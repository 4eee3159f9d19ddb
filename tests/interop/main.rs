//! The models against real processes and real sockets: the published Letta Code CLI (`cli`,
//! `cli_conformance`) and the Python SDK (`sdk`) against `sim serve`, installed by
//! tests/interop/setup.sh (the fixtures beside this file: the scenarios they serve and the SDK
//! script), the models on real loopback TCP (`real_tcp`), and `sim record` between real peers (`record`).
//!
//! Run just these: `cargo test --test interop` (a few minutes: the CLI flows run the real
//! client, and flow 3 waits its 10 s busy back-off by design).

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod cli_conformance;
mod clients;
mod local_backend;
mod real_tcp;
mod record;
mod sdk;
