//! `client-faults-fire` (agent loop, docs/invariants.md): the listener, tool and record-store
//! faults a plan scripts fire where they are due. Pure: it reads the plan and a finished trace.
//!
//! The harness throws from the live listener when the loop dispatches the n-th event of a type
//! (`listener_throws`), matching the type name the loop gives the event. A loop that named its
//! events otherwise would never meet a listener fault, and `listener_throws.toml` would still
//! end as declared, since a throwing listener never changes the turn (kimi-loop.md §1 contract
//! 4): every listener sweep would pass for the wrong reason. The trace shows each dispatched
//! event that has an envelope, in dispatch order, so the oracle counts them itself.

use crate::harness::faults::{Fault, RECORDED_EVENT_TYPES};
use crate::harness::invariants::{CLIENT_FAULTS_FIRE, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::kimi::agent::inject::Garbage;
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

/// `client-faults-fire` for the tool faults: each `tool_hang` or `tool_garbage` of `plan`
/// whose execution starts before the plan heals at `heal_at_ms` fires (its report comes
/// before that execution's `loop_tool_start`) and takes effect. A hung execution ignores the
/// abort signal, so it ends only by being dropped (the loop's grace timeout, kimi-loop.md
/// §4.4) or not at all. A garbage execution ends `garbage` unless an abort came first, and
/// its `tool.result` is the error `coerceToolResult` makes of the value (§4.3): the host has
/// no `finalizeToolResult` hook to replace it. Of two tool faults on one execution the
/// harness applies the first in the plan; the other is not held to firing.
pub fn tool_faults_fire(plan: &[Fault], heal_at_ms: u64, events: &[TraceEvent]) -> Vec<Violation> {
    let tool_fault = |f: &Fault| match f {
        Fault::ToolHang { execution, .. } => Some((*execution, None)),
        Fault::ToolGarbage { execution, value } => Some((*execution, Some(*value))),
        _ => None,
    };
    let mut out = Vec::new();
    let mut taken = std::collections::BTreeSet::new();
    for fault in plan {
        let Some((execution, garbage)) = tool_fault(fault) else {
            continue;
        };
        if !taken.insert(execution) {
            continue;
        }
        let Some((start, tool_call_id, tool)) =
            events.iter().enumerate().find_map(|(i, e)| match &e.obs {
                Observation::LoopToolStart {
                    tool_call_id,
                    tool,
                    execution: n,
                    ..
                } if *n == execution && e.t_ms < heal_at_ms => {
                    Some((i, tool_call_id.as_str(), tool.as_str()))
                }
                _ => None,
            })
        else {
            continue;
        };
        let mut violation = |at: usize, message: String| {
            out.push(Violation {
                invariant: CLIENT_FAULTS_FIRE,
                event: Some(at),
                message: format!("the plan's `{fault}`: {message}"),
            })
        };
        let report = fault.to_string();
        let fired = events[..start].iter().any(|e| {
            e.host == "harness"
                && matches!(&e.obs, Observation::Fault { fault } if *fault == report)
        });
        if !fired {
            violation(
                start,
                format!(
                    "did not fire: tool execution {execution} ({tool} {tool_call_id}) started here, before the plan healed"
                ),
            );
            continue;
        }
        let later = || events.iter().enumerate().skip(start + 1);
        let ended = later().find_map(|(i, e)| match &e.obs {
            Observation::LoopToolEnd {
                tool_call_id: id,
                how,
            } if id == tool_call_id => Some((i, how.as_str())),
            _ => None,
        });
        let Some(value) = garbage else {
            if let Some((at, how)) = ended.filter(|(_, how)| *how != "dropped") {
                violation(
                    at,
                    format!(
                        "the hung execution {execution} ({tool_call_id}) ended `{how}`, though a hung tool ignores the abort signal"
                    ),
                );
            }
            continue;
        };
        match ended {
            Some((_, "garbage")) => {}
            Some((_, "aborted" | "dropped")) | None => continue,
            Some((at, how)) => {
                violation(
                    at,
                    format!(
                        "execution {execution} ({tool_call_id}) ended `{how}` instead of returning garbage"
                    ),
                );
                continue;
            }
        }
        let want = coerced(tool, value);
        let result = later().find_map(|(i, e)| match &e.obs {
            Observation::LoopToolResult {
                tool_call_id: id,
                is_error,
                output,
            } if id == tool_call_id => Some((i, *is_error, output.as_str())),
            _ => None,
        });
        if let Some((at, is_error, output)) = result {
            let shown = output.strip_suffix('…').unwrap_or(output);
            let same = if shown.len() < output.len() {
                want.starts_with(shown)
            } else {
                want == output
            };
            if !is_error || !same {
                violation(
                    at,
                    format!(
                        "the result of {tool_call_id} is {} {output:?}, not the error {want:?}",
                        if is_error { "the error" } else { "the success" }
                    ),
                );
            }
        }
    }
    out
}

/// `client-faults-fire` for the record store: each `transcript_rejects` fault of `plan` fires
/// (its `fault` report comes first) before the loop records the `nth` event it names (any
/// recorded type without `event`). A rejected append writes nothing and dispatches nothing
/// (kimi-loop.md §3.1: the dispatcher records, then tells the live listener), so the trace's
/// `nth` dispatch of that type, counted before the plan heals, shows an append the plan
/// rejects going through. The host's turn-end backstop appends its results through the store
/// without a dispatch; each shows as a `loop_backstop_result`. A host that wrote its records
/// without asking its store would turn every such plan into a fault-free run and
/// `transcript_rejects.toml` alone would notice (a turn that does not fail).
pub fn transcript_faults_fire(
    plan: &[Fault],
    heal_at_ms: u64,
    events: &[TraceEvent],
) -> Vec<Violation> {
    let recorded = |event: Option<&str>, obs: &Observation| {
        let backstop = matches!(obs, Observation::LoopBackstopResult { .. });
        match event {
            Some(event) => is_event(event, obs) || event == "tool.result" && backstop,
            None => backstop || RECORDED_EVENT_TYPES.iter().any(|t| is_event(t, obs)),
        }
    };
    let mut out = Vec::new();
    for fault in plan {
        let Some((event, nth)) = fault.rejected_append() else {
            continue;
        };
        let report = fault.to_string();
        let mut seen = 0u32;
        for (i, e) in events.iter().enumerate() {
            match &e.obs {
                Observation::Fault { fault } if e.host == "harness" && *fault == report => break,
                obs if e.host == "client" && e.t_ms < heal_at_ms && recorded(event, obs) => {
                    seen += 1;
                    if seen == nth {
                        out.push(Violation {
                            invariant: CLIENT_FAULTS_FIRE,
                            event: Some(i),
                            message: format!(
                                "the plan's `{fault}` did not fire: the loop recorded {} number {nth} here, before the plan healed, and the store accepted it",
                                event.map_or("event".into(), |t| format!("`{t}` event")),
                            ),
                        });
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The error result `coerceToolResult` makes of a tool's garbage (kimi-loop.md §4.3).
fn coerced(tool: &str, value: Garbage) -> String {
    match value {
        Garbage::Undefined => format!("Tool \"{tool}\" returned no result."),
        Garbage::Number | Garbage::Boolean | Garbage::String => format!(
            "Tool \"{tool}\" returned a {} instead of a tool result.",
            value.as_str()
        ),
        Garbage::Array | Garbage::NoOutput => format!(
            "Tool \"{tool}\" returned a result with a missing or malformed \"output\" field."
        ),
    }
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

    /// `tool_garbage.toml`'s three garbage executions become the coerced errors; a result
    /// that is not the coercion of its garbage, a garbage fault that never reached its
    /// execution, and a hung execution that ended normally each break `client-faults-fire`.
    #[test]
    fn tool_faults_fire_and_take_effect() {
        let s = bundled("tool_garbage.toml");
        let plan = crate::harness::world::plan(&s);
        let check = |plan: &[Fault], trace: &[TraceEvent]| -> Vec<String> {
            tool_faults_fire(plan, u64::MAX, trace)
                .into_iter()
                .map(|v| v.message)
                .collect()
        };
        let faithful = run_once(&s, 1).unwrap().trace;
        assert_eq!(check(&plan, &faithful), Vec::<String>::new());
        let number_result = |e: &TraceEvent| matches!(&e.obs, Observation::LoopToolResult { tool_call_id, .. } if tool_call_id == "toolu_s1_2");
        let mut miscoerced = faithful.clone();
        let Some(Observation::LoopToolResult { output, .. }) = miscoerced
            .iter_mut()
            .find(|e| number_result(e))
            .map(|e| &mut e.obs)
        else {
            panic!("no result for toolu_s1_2")
        };
        *output = "Tool \"Read\" returned no result.".into();
        let unfired: Vec<TraceEvent> = faithful
            .iter()
            .filter(|e| !matches!(&e.obs, Observation::Fault { fault } if fault.contains("execution=3")))
            .cloned()
            .collect();
        let hung = [Fault::ToolHang {
            execution: 1,
            abort_after_ms: None,
        }];
        let hung_trace: Vec<TraceEvent> = faithful
            .iter()
            .cloned()
            .map(|mut e| {
                if let Observation::Fault { fault } = &mut e.obs
                    && fault.contains("execution=1")
                {
                    *fault = hung[0].to_string();
                }
                e
            })
            .collect();
        assert_eq!(
            check(&plan, &miscoerced),
            [
                "the plan's `tool_garbage execution=2 value=number`: the result of toolu_s1_2 is the error \"Tool \\\"Read\\\" returned no result.\", not the error \"Tool \\\"Read\\\" returned a number instead of a tool result.\""
            ]
        );
        assert_eq!(
            check(&plan, &unfired),
            [
                "the plan's `tool_garbage execution=3 value=no_output`: did not fire: tool execution 3 (Read toolu_s1_3) started here, before the plan healed"
            ]
        );
        assert_eq!(
            check(&hung, &hung_trace),
            [
                "the plan's `tool_hang execution=1`: the hung execution 1 (toolu_s1_1) ended `garbage`, though a hung tool ignores the abort signal"
            ]
        );
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

    /// The planted canary of the record store: a host that never asks its store records
    /// `transcript_rejects.toml`'s third `tool.call`, so its first turn completes, and
    /// `client-faults-fire` names the record that went through; the faithful host passes.
    #[test]
    fn client_faults_fire_fails_on_a_host_that_never_asks_its_store() {
        let s = bundled("transcript_rejects.toml");
        let check = |trace: &[TraceEvent]| -> Vec<String> {
            transcript_faults_fire(&crate::harness::world::plan(&s), s.limits.heal_at_ms, trace)
                .into_iter()
                .map(|v| v.message)
                .collect()
        };
        let faithful = run_once(&s, 1).unwrap();
        assert_eq!(check(&faithful.trace), Vec::<String>::new());
        let planted = run_once_planted(&s, 1, |b| b.store_unconsulted = true).unwrap();
        let first_turn = planted.outcomes.as_ref().unwrap()[0].to_string();
        assert_eq!(first_turn, "completed: end_turn (2 steps)");
        assert_eq!(
            check(&planted.trace),
            [
                "the plan's `transcript_rejects event=tool.call nth=3` did not fire: the loop recorded `tool.call` event number 3 here, before the plan healed, and the store accepted it"
            ]
        );
    }
}
