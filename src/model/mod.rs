//! The systems under test (DESIGN.md §2). A model never imports `harness`: it receives its
//! network, clock, PRNG and abort signals through [`env::Env`], its config, or its caller.

pub mod agent_loop;
pub mod client;
pub mod env;
pub mod faults;
pub mod http;
pub mod loop_agent;
pub mod observe;
pub mod provider;
pub mod server;
pub mod tools;
