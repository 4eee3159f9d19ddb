//! The systems under test (DESIGN.md §2). A model never imports `harness`: it receives its
//! network, clock, PRNG and abort signals from the caller.

pub mod agent_loop;
