//! The agent loop's coverage goals: situations of the turn loop a sweep should reach.

use crate::harness::coverage::{Goal, any, is_fault, placed};
use crate::harness::kimi::stop_rule::is_unexecuted_output;
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

fn tool_result_says(t: &[TraceEvent], text: &str) -> bool {
    any(
        t,
        |o| matches!(o, Observation::LoopToolResult { output, .. } if output.contains(text)),
    )
}

/// Whether some event, seen with the number of tool executions running once it happened,
/// meets `f`.
fn any_while_running(t: &[TraceEvent], f: impl Fn(usize, &Observation) -> bool) -> bool {
    let mut running = 0usize;
    t.iter().any(|e| {
        match &e.obs {
            Observation::LoopToolStart { .. } => running += 1,
            Observation::LoopToolEnd { .. } => running = running.saturating_sub(1),
            _ => {}
        }
        f(running, &e.obs)
    })
}

/// The goals of an agent-loop sweep, in report order.
pub const GOALS: &[Goal] = &[
    Goal {
        id: "loop-tools-overlapped",
        what: "two tool executions of a batch ran at the same time",
        reached: |t| any_while_running(t, |running, _| running >= 2),
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
        id: "loop-calls-unexecuted",
        what: "a response ended before its tools could run and its calls were recorded unexecuted",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::LoopToolResult { output, .. } if is_unexecuted_output(output)),
            )
        },
    },
    Goal {
        id: "loop-listener-threw",
        what: "the live listener threw and the turn went on",
        reached: |t| any(t, |o| is_fault(o, "listener_throws")),
    },
    Goal {
        id: "loop-append-rejected-mid-batch",
        what: "the record store rejected an append while a tool of the batch ran (kimi-loop.md §4.6: the batch lets it settle first)",
        reached: |t| {
            any_while_running(t, |running, o| {
                running > 0 && is_fault(o, "transcript_rejects")
            })
        },
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
    // Faults placed at protocol points (`sim explore --guided`, harness/guided.rs).
    Goal {
        id: "loop-fault-after-tool-call",
        what: "a fault fired right after the model asked for a tool",
        reached: |t| placed(t, "after-tool-call"),
    },
    Goal {
        id: "loop-fault-between-batch-tools",
        what: "a fault fired between two tool results of one step's batch",
        reached: |t| placed(t, "between-batch-tools"),
    },
    Goal {
        id: "loop-fault-after-tool-effect",
        what: "a fault fired after a tool finished, before its result reached the model",
        reached: |t| placed(t, "after-tool-effect"),
    },
    Goal {
        id: "loop-fault-during-step-retry",
        what: "a fault fired while a step waited to retry the provider",
        reached: |t| placed(t, "during-retry"),
    },
];
