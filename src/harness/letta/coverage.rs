//! The Letta system's coverage goals: situations of the approval loop a sweep should reach.

use crate::harness::coverage::{Goal, any, is_fault, placed};
use crate::harness::letta::abandoned_run::{is_run_cancel, run_read};
use crate::harness::letta::invariants::pending_tool_calls;
use crate::harness::letta::send_faults_fire::{ServerSeen, is_send};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::{HistoryEntry, Observation};

/// The goals of a Letta sweep, in report order.
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
        id: "send-met-held-run",
        what: "a message send met a run holding its conversation, and the server's own lock answered 409 busy",
        reached: send_met_held_run,
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
        id: "run-read-failed",
        what: "a run lookup failed (every SDK attempt) and the client went on without the run",
        reached: went_on_without_run,
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
        id: "run-cancelled-on-give-up",
        what: "a headless client gave a turn up on a stream error and cancelled the run it read still active",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::ClientRequest { method, path, .. } if method == "POST" && is_run_cancel(path)),
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
    Goal {
        id: "compacted",
        what: "the server compacted a conversation",
        reached: |t| any(t, |o| matches!(o, Observation::Compaction { .. })),
    },
    Goal {
        id: "compaction-fallback-all",
        what: "the sliding window could not plan (or left too much) and compaction fell back to all",
        reached: |t| {
            any(t, |o| {
                matches!(
                    o,
                    Observation::Compaction {
                        fell_back: true,
                        ..
                    }
                )
            })
        },
    },
    Goal {
        id: "compaction-raced-a-write",
        what: "a message was written to the conversation while its compaction's summariser ran",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::Compaction { appended, .. } if !appended.is_empty()),
            )
        },
    },
    Goal {
        id: "compacted-on-overflow",
        what: "a model call overflowed the context and the server compacted and retried it",
        reached: |t| {
            any(t, |o| {
                matches!(o, Observation::Compaction { trigger, .. }
                    if trigger == "context_window_overflow")
            })
        },
    },
    Goal {
        id: "summariser-failed",
        what: "a summariser call failed with an error other than an overflow",
        reached: |t| {
            any(t, |o| {
                matches!(o, Observation::SummariserCall { outcome, .. }
                    if outcome.starts_with("error"))
            })
        },
    },
    Goal {
        id: "compaction-kept-parallel-calls",
        what: "a compaction cut beside an assistant message with parallel tool calls and kept them with their results",
        reached: |t| {
            any(
                t,
                |o| matches!(o, Observation::Compaction { kept, .. } if kept_parallel_calls(kept)),
            )
        },
    },
    Goal {
        id: "overflow-ladder",
        what: "the summariser overflowed and the overflow ladder cut its transcript",
        reached: |t| {
            any(t, |o| {
                matches!(
                    o,
                    Observation::SummariserCall {
                        budget: Some(_),
                        ..
                    }
                )
            })
        },
    },
    // Faults placed at protocol points (`sim explore --guided`, harness/guided.rs).
    Goal {
        id: "fault-after-requires-approval",
        what: "a fault fired right after a run paused at requires_approval",
        reached: |t| placed(t, "after-requires-approval"),
    },
    Goal {
        id: "fault-after-tool-effect",
        what: "a fault fired between a tool's side effect and the send of its result",
        reached: |t| placed(t, "after-tool-effect"),
    },
    Goal {
        id: "fault-after-approval-decision",
        what: "a fault fired right after the approval decision",
        reached: |t| placed(t, "after-approval-decision"),
    },
    Goal {
        id: "fault-after-result-send",
        what: "a fault fired right after the client sent tool results",
        reached: |t| placed(t, "after-result-send"),
    },
    Goal {
        id: "fault-during-resume",
        what: "a fault fired while the client resumed a stream",
        reached: |t| placed(t, "during-resume"),
    },
    Goal {
        id: "fault-across-busy-retry",
        what: "a fault fired while the client waited to retry a busy conversation",
        reached: |t| placed(t, "across-busy-retry"),
    },
];

/// Whether the client gave up reading a run back (`GET /v1/runs/{id}` answered ≥ 500, with no
/// SDK retry of it after) and acted without it: its next request, retry or turn end follows.
/// The post-stream decision then judges the stream's error line (letta-protocol.md §3.7), a
/// resume goes on unchecked (§4.4).
fn went_on_without_run(trace: &[TraceEvent]) -> bool {
    let mut failed: Option<&str> = None;
    trace
        .iter()
        .filter(|e| e.host == "client")
        .any(|e| match &e.obs {
            Observation::ClientResponse {
                method,
                path,
                status,
                ..
            } if method == "GET" && is_run_path(path) => {
                failed = (*status >= 500).then_some(path.as_str());
                false
            }
            Observation::ClientRequest { method, path, .. }
                if method == "GET" && failed == Some(path.as_str()) =>
            {
                false
            }
            Observation::ClientRequest { .. }
            | Observation::ClientSend { .. }
            | Observation::ClientRetry { .. }
            | Observation::TurnEnd { .. } => failed.is_some(),
            _ => false,
        })
}

/// Whether the server's own conversation lock (letta-protocol.md §11) answered a message send:
/// a 409 to `POST /v1/conversations/{id}/messages`, the one send route that takes the lock,
/// while a run had started and not ended (a restarted server ends the runs its crash cut off,
/// each with a `run_ended`), with no send fault injected for it. A fault's note comes just
/// before the answer it makes on the server; an approval fault that was not planted makes
/// none, and the lock answers.
fn send_met_held_run(trace: &[TraceEvent]) -> bool {
    let mut seen = ServerSeen::default();
    let mut injected = false;
    trace.iter().filter(|e| e.host == "server").any(|e| {
        seen.see(&e.obs);
        match &e.obs {
            Observation::Fault { fault } => {
                injected = !fault.contains(" not planted: ");
                false
            }
            Observation::ServerRequest {
                method,
                path,
                status,
            } => {
                let lock = *status == 409
                    && method == "POST"
                    && is_send(path)
                    && path.starts_with("/v1/conversations/")
                    && !injected
                    && seen.holds_a_run();
                injected = false;
                lock
            }
            _ => false,
        }
    })
}

/// `/v1/runs/{id}`, one run (not the list, not its stream).
fn is_run_path(path: &str) -> bool {
    run_read(path).is_some()
}

/// Whether a compaction's kept transcript (`describe` entries: `assistant:<id>[<call>,…]`,
/// `tool:<id>[<call>]`) holds an assistant message with two or more tool calls and a result for
/// each of them.
fn kept_parallel_calls(kept: &[String]) -> bool {
    kept.iter().any(|k| {
        let Some(calls) = k
            .strip_prefix("assistant:")
            .and_then(|r| r.split_once('['))
            .and_then(|(_, c)| c.strip_suffix(']'))
        else {
            return false;
        };
        let calls: Vec<&str> = calls.split(',').collect();
        calls.len() > 1
            && calls.iter().all(|c| {
                kept.iter()
                    .any(|t| t.starts_with("tool:") && t.ends_with(&format!("[{c}]")))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::letta::test_trace::{client, server};

    fn read(t: u64, status: u16) -> [TraceEvent; 2] {
        let path = "/v1/runs/run-1".to_string();
        [
            client(
                t,
                Observation::ClientRequest {
                    method: "GET".into(),
                    path: path.clone(),
                    retry: 0,
                },
            ),
            client(
                t + 1,
                Observation::ClientResponse {
                    method: "GET".into(),
                    path,
                    status,
                    retry_after: None,
                },
            ),
        ]
    }

    fn retry(t: u64) -> TraceEvent {
        client(
            t,
            Observation::ClientRetry {
                kind: "post_stream".into(),
                attempt: 1,
                delay_ms: 1000,
                detail: String::new(),
                retry_after_ms: None,
            },
        )
    }

    #[test]
    fn a_lookup_that_gave_up_is_reached_only_when_the_client_acts_after_it() {
        let failed_then_acted: Vec<TraceEvent> = [read(0, 500), read(10, 500)]
            .into_iter()
            .flatten()
            .chain([retry(20)])
            .collect();
        assert!(went_on_without_run(&failed_then_acted));
        // The SDK's retry answered: the client read the run after all.
        let recovered: Vec<TraceEvent> = [read(0, 500), read(10, 200)]
            .into_iter()
            .flatten()
            .chain([retry(20)])
            .collect();
        assert!(!went_on_without_run(&recovered));
        // A failed read of a run's stream is not a lookup.
        assert!(!is_run_path("/v1/runs/run-1/stream"));
        assert!(!is_run_path("/v1/runs/?agent_id=a"));
    }

    fn send_answered(t: u64, status: u16) -> TraceEvent {
        server(
            t,
            Observation::ServerRequest {
                method: "POST".into(),
                path: "/v1/conversations/default/messages".into(),
                status,
            },
        )
    }

    fn run(t: u64, started: bool) -> TraceEvent {
        let run_id = "run-1".to_string();
        server(
            t,
            if started {
                Observation::RunStarted {
                    run_id,
                    conversation_id: "conv-1".into(),
                    request_token: String::new(),
                }
            } else {
                Observation::RunEnded {
                    run_id,
                    stop_reason: "end_turn".into(),
                }
            },
        )
    }

    fn fault(t: u64, text: &str) -> TraceEvent {
        server(t, Observation::Fault { fault: text.into() })
    }

    #[test]
    fn a_send_meets_a_held_run_only_when_the_lock_answers_it() {
        // The lock's own 409 while run-1 runs, with or without an approval fault it refused.
        assert!(send_met_held_run(&[run(0, true), send_answered(5, 409)]));
        assert!(send_met_held_run(&[
            run(0, true),
            fault(
                5,
                "approval_pending send=2 tool_call_id=t not planted: run run-1 holds the conversation"
            ),
            send_answered(5, 409),
        ]));
        // An injected busy answers it, though a run is running (busy_own_run starts its own).
        assert!(!send_met_held_run(&[
            fault(0, "busy_own_run send=1"),
            run(0, true),
            send_answered(0, 409),
        ]));
        // No run holds the conversation: a 409 approval pending, not the lock.
        assert!(!send_met_held_run(&[
            run(0, true),
            run(3, false),
            send_answered(5, 409),
        ]));
        // A send the lock let through.
        assert!(!send_met_held_run(&[run(0, true), send_answered(5, 200)]));
        // The agents route takes no lock: its 409 is an approval pending.
        let agents_send = server(
            5,
            Observation::ServerRequest {
                method: "POST".into(),
                path: "/v1/agents/agent-1/messages".into(),
                status: 409,
            },
        );
        assert!(!send_met_held_run(&[run(0, true), agents_send]));
    }
}
