//! Trace events for the agent-loop invariants' unit tests: one turn (`1`) on the client host,
//! built the way the loop's observations read in a real trace; and the bundled scenarios they
//! run.

use crate::harness::invariants::Violation;
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// `obs` on the client host at 0 ms.
pub fn ev(obs: Observation) -> TraceEvent {
    at(0, "client", obs)
}

/// `obs` on `host` at `t_ms`.
pub fn at(t_ms: u64, host: &str, obs: Observation) -> TraceEvent {
    TraceEvent {
        t_ms,
        host: host.into(),
        obs,
    }
}

/// Turn 1 begins.
pub fn turn_start() -> TraceEvent {
    ev(Observation::TurnStart {
        turn: 1,
        text: String::new(),
    })
}

/// Step `step` of turn 1 begins.
pub fn begin(step: u32) -> TraceEvent {
    ev(Observation::LoopStepBegin {
        turn_id: "1".into(),
        step,
        uuid: step_uuid(step),
    })
}

/// A UUIDv4 of the step's number, as `step.begin` and `step.end` carry one.
pub fn step_uuid(step: u32) -> String {
    format!("00000000-0000-4000-8000-{step:012x}")
}

/// The violations' messages, in order.
pub fn messages(v: Vec<Violation>) -> Vec<String> {
    v.into_iter().map(|v| v.message).collect()
}

/// A bundled agent-loop scenario, `scenarios/kimi/<name>`.
pub fn bundled(name: &str) -> crate::harness::scenario::Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/kimi")
        .join(name);
    crate::harness::scenario::Scenario::load(&path).unwrap()
}
