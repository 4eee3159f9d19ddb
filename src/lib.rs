//! loopsim: a record/replay deterministic simulation harness for the client/server protocol of
//! LLM coding agents. See README.md and docs/architecture.md.
//!
//! - [`wire`]: serde types and codecs for what crosses the network.
//! - [`cassette`]: recorded provider streams.
//! - [`model`]: the systems under test (Letta server and client, fake provider, tools, the
//!   Kimi-style agent loop).
//! - [`harness`]: worlds, faults, traces, invariants, reports.

pub mod cassette;
pub mod harness;
pub mod model;
pub mod wire;
