//! loopsim: a record/replay deterministic simulation harness for the client/server protocol of
//! LLM coding agents. See README.md and ../shared/DESIGN.md for the architecture.
//!
//! - [`wire`]: serde types and codecs for what crosses the network.
//! - [`model`]: the systems under test (agent loop, and later server, client, provider, tools).

pub mod model;
pub mod wire;
