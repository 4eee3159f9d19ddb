//! The systems under test. Each model receives its network, clock and PRNG through
//! [`env::Env`] and its config; none imports the harness (DESIGN.md §4 rule 1).

pub mod client;
pub mod env;
pub mod faults;
pub mod http;
pub mod observe;
pub mod provider;
pub mod server;
pub mod tools;
