//! loopsim: a record/replay deterministic simulation harness for the client/server protocol of
//! LLM coding agents. See README.md and ../shared/DESIGN.md for the architecture.

pub mod cassette;
pub mod harness;
pub mod model;
pub mod wire;
