//! Letta's stateful approval loop (letta-protocol.md): the server keeps the conversation and
//! pauses a run at `requires_approval`; the client runs tools locally and sends the results
//! back as new messages.
//!
//! - [`server`]: the Letta server (profiles `cloud`, `local`, `letta-oss-0.16`).
//! - [`client`]: the Letta Code client (profiles `reference`, `letta-code`).

pub mod client;
pub mod server;
