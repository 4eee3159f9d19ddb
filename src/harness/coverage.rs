//! Coverage goals: interesting situations a sweep should reach at least once. Each goal is a
//! predicate over one run's trace; a sweep counts the seeds that reached each goal and says
//! plainly which goals it never reached.

use super::invariants::pending_tool_calls;
use super::system::System;
use super::trace::TraceEvent;
use crate::model::port::observe::{HistoryEntry, Observation};

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
            any(t, |o| {
                matches!(o, Observation::TurnEnd { outcome, .. } if outcome.contains("waiting for approval"))
                    || matches!(o, Observation::ClientRecovery { kind, .. } if kind == "approval_pending")
                    || matches!(o, Observation::ClientRetry { kind, .. } if kind == "approval_pending")
            })
        },
    },
    // ---- client (issue 4) ----
    Goal {
        id: "client-resumed",
        what: "the client resumed a broken stream (run stream or otid)",
        reached: |t| any(t, |o| matches!(o, Observation::ClientResume { .. })),
    },
    Goal {
        id: "resume-inside-tool-args",
        what: "a resume began while a tool call's arguments were half received",
        reached: |t| {
            t.windows(2).any(|w| {
                matches!(&w[0].obs, Observation::ClientDrained { stop_reason, approvals, .. }
                    if stop_reason == "error" && !approvals.is_empty())
                    && matches!(w[1].obs, Observation::ClientResume { .. })
            })
        },
    },
    Goal {
        id: "client-restarted-with-approval-pending",
        what: "the client restarted while the server held a pending approval",
        reached: |t| {
            t.iter().enumerate().any(|(i, e)| {
                matches!(e.obs, Observation::ClientStarted { restart, .. } if restart > 0)
                    && !pending_tool_calls(&t[..i]).is_empty()
            })
        },
    },
    Goal {
        id: "stale-approval-denied",
        what: "the client closed a stale pending approval with the recovery denial",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::ClientDecision { origin, .. } if origin == "stale-recovery"),
            )
        },
    },
    Goal {
        id: "stall-reconciler",
        what: "a silent stream was ended by the run-status check",
        reached: |t| {
            any(t, |o| {
                matches!(o, Observation::ClientStreamEnd { how }
                    if how == "stall-reconciler" || how == "stall-no-run-id")
            })
        },
    },
    Goal {
        id: "client-retried",
        what: "the client waited and retried (busy, 503, llm error, empty response)",
        reached: |t| any(t, |o| matches!(o, Observation::ClientRetry { .. })),
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

// ---- agent loop (issue 5) -----------------------------------------------------------------

fn tool_result_says(t: &[TraceEvent], text: &str) -> bool {
    any(
        t,
        |o| matches!(o, Observation::LoopToolResult { output, .. } if output.contains(text)),
    )
}

/// The goals of an agent-loop sweep (`system = "agent-loop"`), in report order.
pub const LOOP_GOALS: &[Goal] = &[
    Goal {
        id: "loop-tools-overlapped",
        what: "two tool executions of a batch ran at the same time",
        reached: |t| {
            let mut running = 0usize;
            t.iter().any(|e| {
                match &e.obs {
                    Observation::LoopToolStart { .. } => running += 1,
                    Observation::LoopToolEnd { .. } => running = running.saturating_sub(1),
                    _ => {}
                }
                running >= 2
            })
        },
    },
    Goal {
        id: "loop-conflict-waited",
        what: "a tool started only when a conflicting one ended",
        reached: |t| {
            t.windows(2).any(|w| {
                matches!(w[0].obs, Observation::LoopToolEnd { .. })
                    && matches!(w[1].obs, Observation::LoopToolStart { .. })
                    && w[0].t_ms == w[1].t_ms
            })
        },
    },
    Goal {
        id: "loop-step-retried",
        what: "a model call failed and was retried (step.retrying)",
        reached: |t| any(t, |o| matches!(o, Observation::LoopRetrying { .. })),
    },
    Goal {
        id: "loop-aborted-in-tools",
        what: "the user aborted a turn while a tool ran",
        reached: |t| {
            let mut running = 0usize;
            t.iter().any(|e| {
                match &e.obs {
                    Observation::LoopToolStart { .. } => running += 1,
                    Observation::LoopToolEnd { .. } => running = running.saturating_sub(1),
                    Observation::LoopUserAbort { .. } if running > 0 => return true,
                    _ => {}
                }
                false
            })
        },
    },
    Goal {
        id: "loop-step-left-open",
        what: "a run ended with a step.begin and no step.end (the partial envelope)",
        reached: |t| {
            let mut open = false;
            t.iter().any(|e| {
                match &e.obs {
                    Observation::LoopStepBegin { .. } => open = true,
                    Observation::LoopStepEnd { .. } => open = false,
                    Observation::LoopInterrupted { .. } if open => return true,
                    _ => {}
                }
                false
            })
        },
    },
    Goal {
        id: "loop-grace-timeout",
        what: "a tool that ignored the abort was cut off by the grace timeout",
        reached: |t| tool_result_says(t, "aborted by grace timeout"),
    },
    Goal {
        id: "loop-garbage-coerced",
        what: "a tool returned something that is not a tool result",
        reached: |t| {
            tool_result_says(t, "instead of a tool result")
                || tool_result_says(t, "returned no result")
                || tool_result_says(t, "malformed")
        },
    },
    Goal {
        id: "loop-listener-threw",
        what: "the live listener threw and the turn went on",
        reached: |t| any(t, |o| is_fault(o, "listener_throws")),
    },
    Goal {
        id: "loop-turn-failed",
        what: "a turn failed (runTurn threw)",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::TurnEnd { outcome, .. } if outcome.starts_with("failed")),
            )
        },
    },
];

/// The ids of the goals one trace of `system` reached.
pub fn reached_for(system: System, trace: &[TraceEvent]) -> Vec<&'static str> {
    system
        .goals()
        .iter()
        .filter(|g| g.reached(trace))
        .map(|g| g.id)
        .collect()
}
