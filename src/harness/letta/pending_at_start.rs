//! `pending-denied-at-start` (docs/invariants.md): a client process that starts while a tool
//! call is pending on its conversation decides that call in its first send. Pure: it reads a
//! finished trace and nothing else.
//!
//! The reference reads its resume data before the first send of a process (the TUI's eager
//! check, and every headless process, letta-protocol.md §6.3-6.4) and turns the pending
//! approvals it finds into fresh denials prepended to that send. A client that skips the check
//! still gets there: its plain message is refused for the pending call, and the approval-pending
//! recovery (B.5.3) denies it and resends. Every other invariant holds then, so this one reads
//! the send itself.

use std::collections::BTreeMap;

use crate::harness::invariants::{PENDING_DENIED_AT_START, Violation};
use crate::harness::letta::invariants::{conversation_of_send, same_conversation, track_pending};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// One client process from its start to its first send.
struct Start {
    /// The `client_started` (interactive) or `turn_start` (headless) event.
    at: usize,
    /// The calls pending when it started, with their conversations.
    pending: Vec<(String, String)>,
    /// A request it made before the send got no 2xx answer: its resume data may be empty
    /// ("any other failure returns empty data", §6.3), so it may not know the call.
    read_failed: bool,
    /// Requests made and not yet answered.
    unanswered: u32,
}

impl Start {
    fn new(at: usize, pending: &BTreeMap<&str, Vec<&str>>) -> Start {
        Start {
            at,
            pending: pending
                .iter()
                .flat_map(|(c, calls)| calls.iter().map(|k| (c.to_string(), k.to_string())))
                .collect(),
            read_failed: false,
            unanswered: 0,
        }
    }
}

/// `pending-denied-at-start`: for each client process (an interactive client's start or
/// restart, each headless turn, B.5.4), the calls pending on the conversation of its first send
/// when the process started, and still pending at that send, each have a decision in it
/// (`approval[deny:…]`, or any other item naming the call). Not judged when a request the
/// process made before that send failed or went unanswered.
pub fn pending_denied_at_start(events: &[TraceEvent]) -> Vec<Violation> {
    // Per conversation: the tool calls the server holds pending.
    let mut pending: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut headless: BTreeMap<&str, bool> = BTreeMap::new();
    let mut starts: BTreeMap<&str, Start> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let host = e.host.as_str();
        match &e.obs {
            Observation::History {
                conversation_id,
                entry,
            } => track_pending(&mut pending, conversation_id, entry),
            Observation::ClientStarted { mode, .. } => {
                headless.insert(host, mode == "headless");
                if mode != "headless" {
                    starts.insert(host, Start::new(i, &pending));
                }
            }
            Observation::TurnStart { .. } if headless.get(host) == Some(&true) => {
                starts.insert(host, Start::new(i, &pending));
            }
            Observation::ClientRequest { .. } => {
                if let Some(s) = starts.get_mut(host) {
                    s.unanswered += 1;
                }
            }
            Observation::ClientResponse { status, .. } => {
                if let Some(s) = starts.get_mut(host) {
                    s.unanswered = s.unanswered.saturating_sub(1);
                    s.read_failed |= !(200..300).contains(status);
                }
            }
            Observation::ClientConnectError { .. } => {
                if let Some(s) = starts.get_mut(host) {
                    s.read_failed = true;
                }
            }
            Observation::ClientSend { path, items, .. } => {
                let Some(start) = starts.remove(host) else {
                    continue;
                };
                let Some(conv) = conversation_of_send(path) else {
                    continue;
                };
                if start.read_failed || start.unanswered > 0 {
                    continue;
                }
                for (c, call) in &start.pending {
                    let still = pending
                        .get(c.as_str())
                        .is_some_and(|calls| calls.contains(&call.as_str()));
                    if !still || !same_conversation(conv, c) || items.contains(call.as_str()) {
                        continue;
                    }
                    out.push(Violation {
                        invariant: PENDING_DENIED_AT_START,
                        event: Some(i),
                        message: format!(
                            "tool call {call} was pending on conversation {c} when the client process started (event {}), and its first send ({items}) carries no decision for it: the start-up check turns pending approvals into fresh denials prepended to the next request (letta-protocol.md §6.3-6.4)",
                            start.at + 1
                        ),
                    });
                }
            }
            _ => {}
        }
    }
    out
}
