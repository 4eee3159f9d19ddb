//! loopsim: a record/replay deterministic simulation harness for the client/server protocol of
//! LLM coding agents. See README.md and docs/architecture.md.
//!
//! - [`check`]: the entry point for your own `cargo test` (load a scenario, run seeds, assert).
//! - [`wire`]: serde types and codecs for what crosses the network.
//! - [`cassette`]: recorded provider streams.
//! - [`model`]: the systems under test (the Letta server and client, the Kimi agent loop, the
//!   fake provider, the simulated workspace). Models never import the harness.
//! - [`harness`]: worlds, faults, traces, invariants, reports, explore, shrink, gate, serve.
//!
//! ```
//! let report = loopsim::check::Check::load("scenarios/letta/approval_turn.toml")
//!     .expect("a bundled scenario loads")
//!     .run_seed(1)
//!     .expect("it runs");
//! report.assert_pass();
//! ```

pub mod cassette;
pub mod check;
pub mod harness;
pub mod model;
pub mod wire;
