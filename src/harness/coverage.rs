//! Coverage goals: interesting situations a sweep should reach at least once. Each goal is a
//! predicate over one run's trace; a sweep counts the seeds that reached each goal and says
//! plainly which goals it never reached.

use super::invariants::pending_tool_calls;
use super::trace::TraceEvent;
use crate::model::observe::{HistoryEntry, Observation};

/// A coverage goal: a stable id and what it means.
pub struct Goal {
    pub id: &'static str,
    pub what: &'static str,
    reached: fn(&[TraceEvent]) -> bool,
}

impl Goal {
    pub fn reached(&self, trace: &[TraceEvent]) -> bool {
        (self.reached)(trace)
    }
}

fn any(trace: &[TraceEvent], f: impl Fn(&Observation) -> bool) -> bool {
    trace.iter().any(|e| f(&e.obs))
}

fn is_fault(o: &Observation, prefix: &str) -> bool {
    matches!(o, Observation::Fault { fault } if fault.starts_with(prefix))
}

/// The goals, in report order.
pub const GOALS: &[Goal] = &[
    Goal {
        id: "tool-executed",
        what: "a client tool ran and its result went back",
        reached: |t| any(t, |o| matches!(o, Observation::ToolExecuted { .. })),
    },
    Goal {
        id: "approval-denied",
        what: "a tool call was denied",
        reached: |t| {
            any(t, |o| {
                matches!(
                    o,
                    Observation::History {
                        entry: HistoryEntry::Denial { .. },
                        ..
                    }
                )
            })
        },
    },
    Goal {
        id: "stream-cut-in-tool-args",
        what: "a stream broke after some of a tool call's argument deltas had arrived",
        reached: |t| {
            any(t, |o| {
                matches!(o, Observation::ClientDrained { stop_reason, approvals, .. }
                    if stop_reason == "error" && !approvals.is_empty())
            })
        },
    },
    Goal {
        id: "busy-409",
        what: "the server answered 409 busy",
        reached: |t| {
            any(t, |o| {
                matches!(o, Observation::ServerRequest { status: 409, .. })
            })
        },
    },
    Goal {
        id: "approval-pending-conflict",
        what: "a message was refused because an approval was pending",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::TurnEnd { outcome, .. } if outcome.contains("waiting for approval")),
            )
        },
    },
    Goal {
        id: "provider-error",
        what: "a model call failed (error status or broken stream)",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::ProviderResult { outcome, .. } if outcome.starts_with("error")),
            )
        },
    },
    Goal {
        id: "server-restarted-with-approval-pending",
        what: "the server restarted while a tool call awaited approval",
        reached: |t| {
            t.iter().enumerate().any(|(i, e)| {
                is_fault(&e.obs, "restart server") && !pending_tool_calls(&t[..i]).is_empty()
            })
        },
    },
    Goal {
        id: "partition-healed",
        what: "a partition was repaired",
        reached: |t| any(t, |o| is_fault(o, "repair ")),
    },
    Goal {
        id: "terminal-eof-guard",
        what: "the client stopped waiting for a body that did not close after its stop reason",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::ClientStreamEnd { how } if how == "terminal-eof-guard"),
            )
        },
    },
    Goal {
        id: "turn-ended-in-error",
        what: "a turn ended with an error",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::TurnEnd { outcome, .. } if outcome.starts_with("error")),
            )
        },
    },
];

/// The ids of the goals one trace reached.
pub fn reached(trace: &[TraceEvent]) -> Vec<&'static str> {
    GOALS
        .iter()
        .filter(|g| g.reached(trace))
        .map(|g| g.id)
        .collect()
}
