//! Wire formats: what crosses the network. Pure serde types and codecs; no I/O, no clock.
//!
//! - [`sse`]: Server-Sent Events decoder/encoder.
//! - [`provider`]: the provider-neutral event model and the Anthropic / OpenAI stream decoders.

pub mod letta;
pub mod provider;
pub mod sse;
