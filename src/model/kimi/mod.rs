//! Kimi Code's stateless turn loop (kimi-loop.md): steps, tool batches, resource-conflict
//! scheduling, and "every tool.call gets a tool.result".
//!
//! - [`turn_loop`]: the pure loop, independent of any network (its LLM is a trait).
//! - [`agent`]: the agent process around it: HTTP/SSE to the provider, the workspace tools,
//!   the fault injection points of a user, a tool and a listener.

pub mod agent;
pub mod turn_loop;
