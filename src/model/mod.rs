//! The systems under test (DESIGN.md §2). A model never imports `harness`: it receives its
//! network, clock, PRNG and abort signals through [`port::env::Env`], its config, or its caller.
//!
//! - [`port`]: the seams a model is given (env, http, observe, injection points).
//! - [`letta`]: Letta's stateful approval loop: the server and the Letta Code client.
//! - [`kimi`]: Kimi Code's stateless turn loop and the agent process around it.
//! - [`provider`]: the fake LLM provider; [`tools`]: the simulated workspace.

pub mod kimi;
pub mod letta;
pub mod port;
pub mod provider;
pub mod tools;
