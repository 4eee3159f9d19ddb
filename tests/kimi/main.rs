//! The Kimi Code agent loop: `turn_loop` ports the upstream loop suite case by case against
//! `model::kimi::turn_loop` on a paused tokio clock; `harness` runs the agent loop
//! (`system = "agent-loop"`) under the simulation harness.

#[path = "../common/mod.rs"]
mod common;

mod harness;
mod schema_oracle;
mod turn_loop;
