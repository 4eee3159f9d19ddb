//! `approval-conflict-recovered` (docs/invariants.md): a user turn never ends on the server's
//! approval-pending conflict while the tool call it conflicted with is still pending. Pure: it
//! reads a finished trace and nothing else.
//!
//! A plain message sent while an approval is pending is refused (letta-protocol.md §3.2): with
//! HTTP 409 `{"detail": "CONFLICT: … waiting for approval …"}`, or, as Letta 0.16.8 answers
//! every streaming send, with HTTP 200 and the same text in-band (stop_reason `error`, then
//! `event: error`; captures/letta_e2e PROVENANCE d3). A faithful client resolves the pending
//! approval and resends (reference B.5.3; the headless `resolveAllPendingApprovals`, the TUI's
//! fresh-denial rebuild). A client that gives up instead leaves the conversation blocked until
//! some later process closes the call.

use std::collections::BTreeMap;

use crate::harness::invariants::{APPROVAL_CONFLICT_RECOVERED, Violation};
use crate::harness::letta::invariants::{conversation_of_send, same_conversation, track_pending};
use crate::harness::trace::TraceEvent;
use crate::model::letta::client::policy::LLM_API_ERROR_MAX_RETRIES;
use crate::model::port::observe::{HistoryEntry, Observation};

/// The retry kinds that spend the turn's shared LLM budget (letta-protocol.md §3.9).
const SHARED_BUDGET_KINDS: [&str; 3] = ["transient", "post_stream", "approval_pending"];

/// The last message send of a turn and how the server answered it.
struct Send {
    at: usize,
    path: String,
    conv: String,
    /// The send carried no approval: the server refuses it while a call is pending.
    plain: bool,
    /// Since the send: the server took it some other way (a fault answered it, its request
    /// token re-attached it to a run, or the user message was written).
    taken_otherwise: bool,
    /// The server answered it, with the approval-pending conflict or not.
    answered: bool,
    /// The calls pending on its conversation when the server refused it for them.
    conflicted_with: Vec<String>,
    /// The client saw the refusal: the 409, or the stream that ended on the error event.
    client_saw_it: bool,
}

/// One client host's current turn.
#[derive(Default)]
struct Turn {
    send: Option<Send>,
    /// Retries of the shared LLM budget so far.
    shared_retries: u32,
    /// The shared budget was spent when the last send was made, in interactive mode: the
    /// TUI's recovery takes one retry of it, headless recovery none (letta-protocol.md §3.4,
    /// §3.10).
    budget_spent_at_send: bool,
    /// The client announced the approval-pending recovery in this turn.
    recovery_started: bool,
    /// A request after the recovery started failed or went unanswered (the resolution or the
    /// resend it needs may be what failed, so the turn ending on a later conflict is not held
    /// against it).
    recovery_blocked: bool,
    interrupted: bool,
}

/// `approval-conflict-recovered`: when a turn ends with an error and its last send was refused
/// with the approval-pending conflict (server side: a plain message on a conversation with a
/// call pending, answered 409 or 200 with no user message written; client side: the 409 seen
/// or the stream ended on its error event), or its outcome names the conflict (the
/// `isApprovalPendingError` text, "waiting for approval"), the call it conflicted with must not
/// be pending any more. The give-up is legitimate, and not a violation, when the client could
/// not recover:
/// - in interactive mode, the turn's shared LLM retry budget (3, letta-protocol.md §3.9) was
///   spent before that send (the TUI's recovery takes one retry of it; headless recovery none);
/// - the client started the recovery (`client_recovery` or `client_retry` `approval_pending`)
///   and a request after it failed: no connection, a 5xx, or a stream that did not end cleanly;
/// - the user interrupted the turn, or it hit its request bound ("turn exceeded").
///
/// A turn that pauses on a pending call (a human who never answers) or crashes does not end
/// with an error and is not judged here; a call left dangling when the next turn starts is
/// `tool-call-resolved`'s.
pub fn approval_conflict_recovered(events: &[TraceEvent]) -> Vec<Violation> {
    // Per conversation: the tool calls the server holds pending, in the order they were made.
    let mut pending: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut turns: BTreeMap<&str, Turn> = BTreeMap::new();
    // Per client host: whether it runs the TUI (interactive mode).
    let mut interactive: BTreeMap<&str, bool> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let host = e.host.as_str();
        match &e.obs {
            Observation::History {
                conversation_id,
                entry,
            } => {
                track_pending(&mut pending, conversation_id, entry);
                // A user message written while the send waits: the server took it. An approval
                // fault's planted history writes one too, so a refusal of a planted call is
                // judged by the outcome's text alone: a refusal judged from the server side
                // would also hold against the reference when a cut stream left it a different
                // error line.
                if matches!(entry, HistoryEntry::User { .. }) {
                    for t in turns.values_mut() {
                        if let Some(s) = t.send.as_mut()
                            && !s.answered
                            && same_conversation(&s.conv, conversation_id)
                        {
                            s.taken_otherwise = true;
                        }
                    }
                }
            }
            // A send fault that answers the send before the server looks at it (busy, 503);
            // the approval faults plant the very call the send then conflicts with.
            Observation::Fault { fault }
                if fault.starts_with("busy_") || fault.starts_with("shutting_down_") =>
            {
                mark_unanswered(&mut turns, |s| s.taken_otherwise = true);
            }
            Observation::RunAttached { how, .. } if how == "request_token" => {
                mark_unanswered(&mut turns, |s| s.taken_otherwise = true);
            }
            Observation::ServerRequest {
                method,
                path,
                status,
            } if method == "POST" => {
                // The earliest unanswered send on this path is the one answered.
                let Some(s) = turns
                    .values_mut()
                    .filter_map(|t| t.send.as_mut())
                    .filter(|s| !s.answered && s.path == *path)
                    .min_by_key(|s| s.at)
                else {
                    continue;
                };
                s.answered = true;
                if s.plain && !s.taken_otherwise && matches!(status, 200 | 409) {
                    s.conflicted_with = pending
                        .iter()
                        .filter(|(c, _)| same_conversation(&s.conv, c))
                        .flat_map(|(_, calls)| calls.iter().map(|c| c.to_string()))
                        .collect();
                }
            }
            Observation::ClientStarted { mode, .. } => {
                interactive.insert(host, mode == "interactive");
            }
            Observation::TurnStart { .. } => {
                turns.insert(host, Turn::default());
            }
            Observation::ClientSend { path, items, .. } => {
                let Some(t) = turns.get_mut(host) else {
                    continue;
                };
                let Some(conv) = conversation_of_send(path) else {
                    continue;
                };
                t.budget_spent_at_send = interactive.get(host).copied().unwrap_or(false)
                    && t.shared_retries >= LLM_API_ERROR_MAX_RETRIES;
                t.send = Some(Send {
                    at: i,
                    path: path.clone(),
                    conv: conv.to_string(),
                    plain: !items.contains("approval["),
                    taken_otherwise: false,
                    answered: false,
                    conflicted_with: Vec::new(),
                    client_saw_it: false,
                });
            }
            Observation::ClientResponse { status, .. } => {
                let Some(t) = turns.get_mut(host) else {
                    continue;
                };
                if *status >= 500 && t.recovery_started {
                    t.recovery_blocked = true;
                }
                if *status == 409
                    && let Some(s) = t.send.as_mut()
                    && !s.conflicted_with.is_empty()
                {
                    s.client_saw_it = true;
                }
            }
            Observation::ClientStreamEnd { how } => {
                let Some(t) = turns.get_mut(host) else {
                    continue;
                };
                if how == "error-event"
                    && let Some(s) = t.send.as_mut()
                    && !s.conflicted_with.is_empty()
                {
                    s.client_saw_it = true;
                } else if how != "eof" && t.recovery_started {
                    t.recovery_blocked = true;
                }
            }
            Observation::ClientConnectError { .. } => {
                if let Some(t) = turns.get_mut(host)
                    && t.recovery_started
                {
                    t.recovery_blocked = true;
                }
            }
            Observation::ClientRetry { kind, .. } => {
                let Some(t) = turns.get_mut(host) else {
                    continue;
                };
                if SHARED_BUDGET_KINDS.contains(&kind.as_str()) {
                    t.shared_retries += 1;
                }
                if kind == "approval_pending" {
                    t.recovery_started = true;
                }
            }
            Observation::ClientRecovery { kind, .. } if kind == "approval_pending" => {
                if let Some(t) = turns.get_mut(host) {
                    t.recovery_started = true;
                }
            }
            Observation::ClientInterrupt { .. } => {
                if let Some(t) = turns.get_mut(host) {
                    t.interrupted = true;
                }
            }
            Observation::TurnEnd { turn, outcome } => {
                let Some(t) = turns.remove(host) else {
                    continue;
                };
                let Some(error) = outcome.strip_prefix("error: ") else {
                    continue;
                };
                let Some(s) = &t.send else {
                    continue;
                };
                // The server's conflict texts (letta-protocol.md §3.2) all say it; read here
                // rather than through the client's own classifier, which is under test.
                let names_conflict = error.to_lowercase().contains("waiting for approval");
                let refused = s.client_saw_it && !s.conflicted_with.is_empty();
                if !refused && !names_conflict {
                    continue;
                }
                let legitimate = t.budget_spent_at_send
                    || (t.recovery_started && t.recovery_blocked)
                    || t.interrupted
                    || error.starts_with("turn exceeded ");
                if legitimate {
                    continue;
                }
                // The calls it conflicted with (or, when only the outcome names the conflict,
                // every call of its conversation) that are still pending.
                let still: Vec<String> = pending
                    .iter()
                    .filter(|(c, _)| same_conversation(&s.conv, c))
                    .flat_map(|(c, calls)| calls.iter().map(move |call| (*c, *call)))
                    .filter(|(_, call)| !refused || s.conflicted_with.iter().any(|k| k == call))
                    .map(|(c, call)| format!("{call} (conversation {c})"))
                    .collect();
                if still.is_empty() {
                    continue;
                }
                out.push(Violation {
                    invariant: APPROVAL_CONFLICT_RECOVERED,
                    event: Some(i),
                    message: format!(
                        "turn {turn} ended on the approval-pending conflict (its send at event {} was refused) while tool call {} stayed pending: {outcome}",
                        s.at + 1,
                        still.join(", "),
                    ),
                });
            }
            _ => {}
        }
    }
    out
}

/// Applies `f` to every send the server has not answered yet.
fn mark_unanswered(turns: &mut BTreeMap<&str, Turn>, f: impl Fn(&mut Send)) {
    for t in turns.values_mut() {
        if let Some(s) = t.send.as_mut()
            && !s.answered
        {
            f(s);
        }
    }
}
