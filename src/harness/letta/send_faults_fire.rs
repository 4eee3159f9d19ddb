//! `send-faults-fire` (docs/invariants.md): every send fault a plan numbers (`busy_on_send`,
//! `shutting_down_on_send`, `approval_pending_on_send`, `approval_pending_in_band`,
//! `busy_own_run`) fires on that send. Pure: it reads the scenario's plan and a finished trace.
//!
//! The server model numbers the message sends it takes and asks the fault hooks about each
//! (`inject_send_fault`), so a server that stopped numbering them would turn every such plan
//! into a fault-free run, and a client that recovers would end its turns as declared: every
//! sweep would pass for the wrong reason. The trace does not number sends, but each send
//! answered 200 was numbered before it was answered, so once the server has answered `n` sends
//! with a 200, the plan's faults on sends 1 to `n` must have fired (or said why an approval
//! could not be planted, with a reason the trace shows). A send refused earlier (a 4xx before
//! the fault hook) is not counted, which only makes the bound lower.

use std::collections::BTreeSet;

use crate::harness::faults::Fault;
use crate::harness::invariants::{SEND_FAULTS_FIRE, Violation};
use crate::harness::scenario::Scenario;
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::{HistoryEntry, Observation};

/// The send a plan's fault is numbered for, if it is a send fault.
fn send_of(f: &Fault) -> Option<u64> {
    match f {
        Fault::BusyOnSend { send }
        | Fault::ShuttingDownOnSend { send, .. }
        | Fault::ApprovalPendingOnSend { send, .. }
        | Fault::BusyOwnRun { send }
        | Fault::ApprovalPendingInBand { send, .. } => Some(*send),
        _ => None,
    }
}

/// Whether the scenario's plan numbers a send fault: the runs `send-faults-fire` judges.
pub fn plans_send_faults(scenario: &Scenario) -> bool {
    scenario
        .faults
        .iter()
        .any(|f| send_of(f.get_ref()).is_some())
}

/// `send-faults-fire` over a finished Letta trace run under `plan` (a scenario's faults, or
/// the plan `sim serve` ran a real client under).
pub fn send_faults_fire<'a>(
    plan: impl IntoIterator<Item = &'a Fault>,
    events: &[TraceEvent],
) -> Vec<Violation> {
    let planned: BTreeSet<u64> = plan.into_iter().filter_map(send_of).collect();
    let mut fired = BTreeSet::new();
    let mut answered = 0u64;
    let mut state = ServerSeen::default();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        state.see(&e.obs);
        match &e.obs {
            Observation::Fault { fault } => {
                if let Some(n) = fired_send(fault) {
                    fired.insert(n);
                }
                if let Some(why) = unfounded_refusal(fault, &state) {
                    out.push(Violation::at(SEND_FAULTS_FIRE, i, why));
                }
            }
            Observation::ServerRequest {
                method,
                path,
                status: 200,
            } if method == "POST" && is_send(path) => {
                answered += 1;
                if planned.contains(&answered) && !fired.contains(&answered) {
                    out.push(Violation::at(
                        SEND_FAULTS_FIRE,
                        i,
                        format!(
                            "the server has answered {answered} message send{} with a 200, but the plan's fault on send {answered} never fired: the server did not number its sends as the fault hooks count them (1-based, across restarts)",
                            if answered == 1 { "" } else { "s" }
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// What the trace has shown of the server's state so far: the tool calls its histories have
/// recorded and the runs started and not yet ended (a restarted server ends the runs its crash
/// cut off, each with a `run_ended`).
#[derive(Default)]
pub(crate) struct ServerSeen<'a> {
    calls: BTreeSet<&'a str>,
    running: BTreeSet<&'a str>,
}

impl<'a> ServerSeen<'a> {
    pub(crate) fn see(&mut self, o: &'a Observation) {
        match o {
            Observation::History {
                entry: HistoryEntry::ToolCall { tool_call_id, .. },
                ..
            } => {
                self.calls.insert(tool_call_id);
            }
            Observation::RunStarted { run_id, .. } => {
                self.running.insert(run_id);
            }
            Observation::RunEnded { run_id, .. } => {
                self.running.remove(run_id.as_str());
            }
            _ => {}
        }
    }

    /// Whether some run has started and not yet ended: one holds its conversation.
    pub(crate) fn holds_a_run(&self) -> bool {
        !self.running.is_empty()
    }
}

/// Why an approval fault's "not planted" note is unfounded, if it is: each of the server's
/// three reasons names something the trace must already show. The conversation waits for a
/// call its history recorded; a run that holds it started and has not ended; a call id that
/// already stands in its history was recorded. (Whether the call is still open is not asked:
/// a crash can drop a result the trace saw written.) A server whose guard refused for a reason
/// that does not hold would turn the plan into a fault-free run as surely as one that never
/// asked its fault hooks.
fn unfounded_refusal(fault: &str, seen: &ServerSeen<'_>) -> Option<String> {
    if !fault.starts_with("approval_pending send=") {
        return None;
    }
    let (_, why) = fault.split_once(" not planted: ")?;
    let recorded = |call: &str| {
        (!seen.calls.contains(call)).then(|| format!("no history has recorded call {call}"))
    };
    let missing = if let Some(call) = why.strip_prefix("the conversation already waits for ") {
        recorded(call)
    } else if let Some(run) = why
        .strip_prefix("run ")
        .and_then(|r| r.strip_suffix(" holds the conversation"))
    {
        (!seen.running.contains(run)).then(|| format!("run {run} is not running"))
    } else if let Some(call) = why.strip_suffix(" already stands in the conversation's history") {
        recorded(call)
    } else {
        Some("the harness knows no such reason".to_string())
    }?;
    Some(format!(
        "the server refused the plan's approval fault ({fault}), but {missing}: a guard that refuses for a reason that does not hold turns the plan into a fault-free run"
    ))
}

/// The send a fired send fault names: `busy_409 send=2`, `approval_pending send=1 … not
/// planted: …`.
fn fired_send(fault: &str) -> Option<u64> {
    let (_, rest) = fault.split_once(" send=")?;
    rest.split(' ').next()?.parse().ok()
}

/// The message-send routes the server numbers: `POST /v1/conversations/{id}/messages`,
/// `/v1/agents/{id}/messages` and `/v1/agents/{id}/messages/stream`.
pub(crate) fn is_send(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(
        parts.as_slice(),
        ["v1", "conversations" | "agents", id, "messages"] if !id.is_empty()
    ) || matches!(
        parts.as_slice(),
        ["v1", "agents", id, "messages", "stream"] if !id.is_empty()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fired_faults_name_their_send() {
        assert_eq!(fired_send("busy_409 send=2"), Some(2));
        assert_eq!(fired_send("shutting_down_503 send=11"), Some(11));
        assert_eq!(
            fired_send(
                "approval_pending send=1 tool_call_id=toolu_stale_1 not planted: run r holds the conversation"
            ),
            Some(1)
        );
        assert_eq!(
            fired_send("provider_stream call=0 frame=7 action=close"),
            None
        );
    }

    #[test]
    fn a_refusal_holds_only_when_the_trace_shows_its_reason() {
        let history = Observation::History {
            conversation_id: "conv-1".into(),
            entry: HistoryEntry::ToolCall {
                tool_call_id: "toolu_bash_1".into(),
                name: "Bash".into(),
                arguments: "{}".into(),
            },
        };
        let started = Observation::RunStarted {
            run_id: "run-1".into(),
            conversation_id: "conv-1".into(),
            request_token: String::new(),
        };
        let mut seen = ServerSeen::default();
        seen.see(&history);
        seen.see(&started);
        fn refusal(seen: &ServerSeen<'_>, why: &str) -> Option<String> {
            unfounded_refusal(
                &format!("approval_pending send=2 tool_call_id=toolu_stale_1 not planted: {why}"),
                seen,
            )
        }
        let refused = |why: &str| refusal(&seen, why);
        assert_eq!(
            refused("the conversation already waits for toolu_bash_1"),
            None
        );
        assert_eq!(refused("run run-1 holds the conversation"), None);
        assert_eq!(
            refused("toolu_bash_1 already stands in the conversation's history"),
            None
        );
        let unfounded = refused("toolu_stale_1 already stands in the conversation's history");
        assert!(
            unfounded
                .as_deref()
                .is_some_and(|m| m.contains("no history has recorded call toolu_stale_1")),
            "{unfounded:?}"
        );
        assert!(refused("run run-2 holds the conversation").is_some());
        assert!(refused("the moon is full").is_some());
        // A planted fault, or another kind's note, is not a refusal.
        assert_eq!(
            unfounded_refusal("approval_pending_on_send send=2 tool_call_id=t", &seen),
            None
        );
        let ended = Observation::RunEnded {
            run_id: "run-1".into(),
            stop_reason: "end_turn".into(),
        };
        seen.see(&ended);
        assert!(refusal(&seen, "run run-1 holds the conversation").is_some());
    }

    #[test]
    fn only_message_sends_are_counted() {
        assert!(is_send("/v1/conversations/default/messages"));
        assert!(is_send("/v1/agents/agent-1/messages"));
        assert!(is_send("/v1/agents/agent-1/messages/stream"));
        assert!(!is_send("/v1/agents/agent-1/messages/cancel"));
        assert!(!is_send("/v1/conversations/conv-1/stream"));
        assert!(!is_send("/v1/runs/run-1/stream"));
    }
}
