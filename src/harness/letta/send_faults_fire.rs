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
//! could not be planted). A send refused earlier (a 4xx before the fault hook) is not counted,
//! which only makes the bound lower.

use std::collections::BTreeSet;

use crate::harness::faults::Fault;
use crate::harness::invariants::{SEND_FAULTS_FIRE, Violation};
use crate::harness::scenario::Scenario;
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

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
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::Fault { fault } => {
                if let Some(n) = fired_send(fault) {
                    fired.insert(n);
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
    fn only_message_sends_are_counted() {
        assert!(is_send("/v1/conversations/default/messages"));
        assert!(is_send("/v1/agents/agent-1/messages"));
        assert!(is_send("/v1/agents/agent-1/messages/stream"));
        assert!(!is_send("/v1/agents/agent-1/messages/cancel"));
        assert!(!is_send("/v1/conversations/conv-1/stream"));
        assert!(!is_send("/v1/runs/run-1/stream"));
    }
}
