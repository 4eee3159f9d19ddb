//! `client-faults-fire` (agent loop, docs/invariants.md): the listener faults a plan scripts
//! fire at the events they name. Pure: it reads the plan and a finished trace.
//!
//! The harness throws from the live listener when the loop dispatches the n-th event of a type
//! (`listener_throws`), matching the type name the loop gives the event. A loop that named its
//! events otherwise would never meet a listener fault, and `listener_throws.toml` would still
//! end as declared, since a throwing listener never changes the turn (kimi-loop.md §1 contract
//! 4): every listener sweep would pass for the wrong reason. The trace shows each dispatched
//! event that has an envelope, in dispatch order, so the oracle counts them itself.

use crate::harness::faults::Fault;
use crate::harness::invariants::{CLIENT_FAULTS_FIRE, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// Whether `obs` is the trace form of a dispatched event of type `event`, for the types the
/// trace records one for each (deltas and progress events are not recorded: a fault on them
/// is not judged).
fn is_event(event: &str, obs: &Observation) -> bool {
    match event {
        "step.begin" => matches!(obs, Observation::LoopStepBegin { .. }),
        "step.end" => matches!(obs, Observation::LoopStepEnd { .. }),
        "content.part" => matches!(obs, Observation::LoopContentPart { .. }),
        "tool.call" => matches!(obs, Observation::LoopToolCall { .. }),
        "tool.result" => matches!(obs, Observation::LoopToolResult { .. }),
        "turn.interrupted" => matches!(obs, Observation::LoopInterrupted { .. }),
        "step.retrying" => matches!(obs, Observation::LoopRetrying { .. }),
        _ => false,
    }
}

/// `client-faults-fire` (agent loop): each `listener_throws` fault of `plan` that names a
/// recorded event type fires (its `fault` report follows) at the `nth` dispatch of that type,
/// or at every one without `nth`, for each dispatch before the plan heals at `heal_at_ms`.
pub fn listener_faults_fire(
    plan: &[Fault],
    heal_at_ms: u64,
    events: &[TraceEvent],
) -> Vec<Violation> {
    let mut out = Vec::new();
    for fault in plan {
        let Fault::ListenerThrows {
            event: Some(event),
            nth,
            ..
        } = fault
        else {
            continue;
        };
        let report = fault.to_string();
        let mut seen = 0u32;
        // The dispatch the fault is due at, not yet followed by its report.
        let mut due: Option<(usize, u32)> = None;
        for (i, e) in events.iter().enumerate() {
            match &e.obs {
                Observation::Fault { fault } if e.host == "harness" && *fault == report => {
                    due = None;
                }
                obs if e.host == "client" && e.t_ms < heal_at_ms => {
                    if !is_event(event, obs) {
                        continue;
                    }
                    if let Some((at, n)) = due.take() {
                        out.push(missed(fault, event, n, at));
                    }
                    seen += 1;
                    if nth.is_none_or(|n| n == seen) {
                        due = Some((i, seen));
                    }
                }
                _ => {}
            }
        }
        if let Some((at, n)) = due {
            out.push(missed(fault, event, n, at));
        }
    }
    out
}

fn missed(fault: &Fault, event: &str, n: u32, at: usize) -> Violation {
    Violation {
        invariant: CLIENT_FAULTS_FIRE,
        event: Some(at),
        message: format!(
            "the plan's `{fault}` did not fire: the loop dispatched `{event}` event number {n} here, before the plan healed, and no listener threw"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::kimi::test_events::bundled;
    use crate::harness::kimi::world::{run_once, run_once_planted};
    use crate::harness::scenario::Scenario;

    fn check(s: &Scenario, trace: &[TraceEvent]) -> Vec<String> {
        listener_faults_fire(&crate::harness::world::plan(s), s.limits.heal_at_ms, trace)
            .into_iter()
            .map(|v| v.message)
            .collect()
    }

    /// The planted canary: a loop whose events reach the listener without their type names
    /// never meets `listener_throws.toml`'s two faults, ends its turn as declared all the same,
    /// and `client-faults-fire` names both faults; the faithful loop passes.
    #[test]
    fn client_faults_fire_fails_on_a_loop_that_misnames_its_events() {
        let s = bundled("listener_throws.toml");
        let faithful = run_once(&s, 1).unwrap();
        assert_eq!(check(&s, &faithful.trace), Vec::<String>::new());
        let planted = run_once_planted(&s, 1, |b| b.listener_events_unnamed = true).unwrap();
        assert_eq!(
            planted
                .outcomes
                .as_ref()
                .unwrap()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["completed: end_turn (2 steps)"]
        );
        assert_eq!(
            check(&s, &planted.trace),
            [
                "the plan's `listener_throws event=tool.result nth=1 how=panic` did not fire: the loop dispatched `tool.result` event number 1 here, before the plan healed, and no listener threw",
                "the plan's `listener_throws event=step.end nth=every how=error` did not fire: the loop dispatched `step.end` event number 1 here, before the plan healed, and no listener threw",
                "the plan's `listener_throws event=step.end nth=every how=error` did not fire: the loop dispatched `step.end` event number 2 here, before the plan healed, and no listener threw",
            ]
        );
    }
}
