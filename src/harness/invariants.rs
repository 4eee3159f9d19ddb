//! Oracles over the trace. Each invariant has a stable id (DESIGN.md §5, docs/invariants.md)
//! and returns the violations it found, each pointing at the event that broke it.
//!
//! Pure: they read a finished trace and nothing else.

use std::collections::BTreeMap;

use crate::model::observe::{HistoryEntry, Observation};

use super::trace::TraceEvent;

/// Stable invariant ids.
pub const TOOL_CALL_RESOLVED: &str = "tool-call-resolved";
pub const DETERMINISTIC: &str = "deterministic";

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    /// Index of the trace event that broke it (0-based), when there is one.
    pub event: Option<usize>,
    pub message: String,
}

/// `tool-call-resolved`: every tool call the server asked the client about gets exactly one
/// resolution (a tool return or a denial) in the server's history, and none is left dangling
/// when a new turn starts. Calls still pending when the run ends are not violations here (a
/// paused turn is legitimate); they are listed by [`pending_tool_calls`].
pub fn tool_call_resolved(events: &[TraceEvent]) -> Vec<Violation> {
    #[derive(PartialEq)]
    enum State {
        Open,
        Resolved(usize),
    }
    let mut out = Vec::new();
    // conversation → (tool_call_id → state), in the order calls were made.
    let mut calls: BTreeMap<String, Vec<(String, State)>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let Observation::History {
            conversation_id,
            entry,
        } = &e.obs
        else {
            continue;
        };
        let conv = calls.entry(conversation_id.clone()).or_default();
        match entry {
            HistoryEntry::ToolCall { tool_call_id, .. } => {
                conv.push((tool_call_id.clone(), State::Open));
            }
            HistoryEntry::ToolReturn { tool_call_id, .. }
            | HistoryEntry::Denial { tool_call_id, .. }
            | HistoryEntry::Settled { tool_call_id, .. } => {
                match conv.iter_mut().rev().find(|(id, _)| id == tool_call_id) {
                    None => out.push(Violation {
                        invariant: TOOL_CALL_RESOLVED,
                        event: Some(i),
                        message: format!(
                            "conversation {conversation_id}: resolution for tool call {tool_call_id}, which the server never asked about"
                        ),
                    }),
                    Some((_, State::Resolved(first))) => out.push(Violation {
                        invariant: TOOL_CALL_RESOLVED,
                        event: Some(i),
                        message: format!(
                            "conversation {conversation_id}: tool call {tool_call_id} resolved twice (first at event {})",
                            *first + 1
                        ),
                    }),
                    Some((_, state)) => *state = State::Resolved(i),
                }
            }
            HistoryEntry::User { .. } => {
                for (id, state) in conv.iter() {
                    if *state == State::Open {
                        out.push(Violation {
                            invariant: TOOL_CALL_RESOLVED,
                            event: Some(i),
                            message: format!(
                                "conversation {conversation_id}: a new user turn started while tool call {id} was unresolved"
                            ),
                        });
                    }
                }
                // Report each dangling call once.
                for (_, state) in conv.iter_mut() {
                    if *state == State::Open {
                        *state = State::Resolved(i);
                    }
                }
            }
            HistoryEntry::Assistant { .. } => {}
        }
    }
    out
}

/// Tool calls without a resolution at the end of the trace: (conversation, tool_call_id).
pub fn pending_tool_calls(events: &[TraceEvent]) -> Vec<(String, String)> {
    let mut open: Vec<(String, String)> = Vec::new();
    for e in events {
        if let Observation::History {
            conversation_id,
            entry,
        } = &e.obs
        {
            match entry {
                HistoryEntry::ToolCall { tool_call_id, .. } => {
                    open.push((conversation_id.clone(), tool_call_id.clone()))
                }
                HistoryEntry::ToolReturn { tool_call_id, .. }
                | HistoryEntry::Denial { tool_call_id, .. }
                | HistoryEntry::Settled { tool_call_id, .. } => {
                    open.retain(|(c, id)| !(c == conversation_id && id == tool_call_id))
                }
                HistoryEntry::User { .. } => open.retain(|(c, _)| c != conversation_id),
                HistoryEntry::Assistant { .. } => {}
            }
        }
    }
    open
}
