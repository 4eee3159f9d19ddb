//! Fault plans: data that says what goes wrong, where and when, and the runtime that makes it
//! happen on a turmoil world.
//!
//! A plan is a list of [`Fault`]s ([`plan`]), read from and written to scenario TOML by serde.
//! Stream faults act at SSE-event granularity through the models' hooks ([`hooks`]: server
//! responses, provider answers); network and process faults act on turmoil ([`runtime`]:
//! partition, hold, latency, crash/restart) when their trigger ([`When`]) fires: a simulated
//! time or the n-th trace event of a kind. After `heal_at_ms` every fault stops: partitions are
//! repaired, held links released, crashed hosts restarted, latency restored; from then on the
//! run must finish (`turn-terminates`). [`crate::harness::strategy`] draws plans for property
//! tests.

pub mod hooks;
pub mod plan;
pub mod runtime;
pub mod trigger;

pub use hooks::{NowFn, PlanHooks};
pub use plan::{
    CrashAt, During, Fault, HOSTS, LOOP_EVENT_TYPES, RECORDED_EVENT_TYPES, RUN_READ_FAIL_MAX,
};
pub use runtime::FaultRuntime;
pub use trigger::When;

#[cfg(test)]
mod tests;
