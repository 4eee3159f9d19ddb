//! Fault plans: data that says what goes wrong, where and when, and the runtime that makes it
//! happen on a turmoil world.
//!
//! A plan is a list of [`Fault`]s. Stream faults act at SSE-event granularity through the
//! models' hooks (server responses, provider answers); network and process faults act on
//! turmoil (partition, hold, latency, crash/restart) when their trigger fires: a simulated time
//! or the n-th trace event of a kind. After `heal_at_ms` every fault stops: partitions are
//! repaired, held links released, crashed hosts restarted, latency restored; from then on the
//! run must finish (`turn-terminates`).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::trace::Trace;
use crate::model::kimi::agent::inject::{AbortReason, Garbage, ListenerFault};
use crate::model::letta::server::{SendFault, StoredToolCall, StreamHooks};
use crate::model::port::inject::{ProviderHooks, ProviderOverride, StreamFault};
use crate::model::port::observe::Observation;

/// Hosts a fault can name.
pub const HOSTS: [&str; 3] = ["client", "server", "provider"];

/// One fault of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Reset the connection of the server's `response`-th streaming response (1-based, counted
    /// across the run) once it has written `after_frame` frames.
    DropConnection { response: u64, after_frame: u64 },
    /// Act on frame `frame` (1-based) of the server's `response`-th streaming response.
    ServerStream {
        response: u64,
        frame: u64,
        action: StreamFault,
    },
    /// Act on frame `frame` (1-based) of the provider's answer to model call `call` (0-based).
    ProviderStream {
        call: u32,
        frame: u64,
        action: StreamFault,
    },
    /// Answer model call `call` (0-based) with an error instead of its cassette; the cassette
    /// answers the next call.
    ProviderError {
        call: u32,
        status: u16,
        #[serde(default)]
        retry_after_s: Option<u64>,
        #[serde(default)]
        message: Option<String>,
    },
    /// Raise the maximum per-message latency.
    Latency {
        #[serde(default)]
        at_ms: Option<u64>,
        #[serde(default)]
        on_event: Option<String>,
        #[serde(default)]
        nth: Option<u32>,
        max_ms: u64,
    },
    /// Drop every message between two hosts for `duration_ms` (TCP connections across it wedge).
    Partition {
        between: [String; 2],
        #[serde(default)]
        at_ms: Option<u64>,
        #[serde(default)]
        on_event: Option<String>,
        #[serde(default)]
        nth: Option<u32>,
        duration_ms: u64,
    },
    /// Hold every message between two hosts for `duration_ms`, then deliver them.
    Hold {
        between: [String; 2],
        #[serde(default)]
        at_ms: Option<u64>,
        #[serde(default)]
        on_event: Option<String>,
        #[serde(default)]
        nth: Option<u32>,
        duration_ms: u64,
    },
    /// Crash a host (its tasks and sockets vanish; its durable state survives) and restart it
    /// `restart_after_ms` later, or when the world heals.
    Crash {
        host: String,
        #[serde(default)]
        at_ms: Option<u64>,
        #[serde(default)]
        on_event: Option<String>,
        #[serde(default)]
        nth: Option<u32>,
        #[serde(default)]
        restart_after_ms: Option<u64>,
    },

    // ---- agent loop (issue 5): user and tool faults of `system = "agent-loop"` ----------
    /// The simulated user aborts the running turn at a simulated time or right after the
    /// `nth` agent event named `on_event`; the loop acts on it at its next safe point.
    UserAbort {
        #[serde(default)]
        at_ms: Option<u64>,
        #[serde(default)]
        on_event: Option<String>,
        #[serde(default)]
        nth: Option<u32>,
        /// `user` (a user cancellation, the default) or `signal` (a plain abort).
        #[serde(default)]
        reason: Option<AbortReason>,
    },
    /// Tool execution number `execution` (1-based, in start order across the run) never
    /// finishes and ignores the abort signal; with `abort_after_ms` the user aborts the turn
    /// that long after the hang began, and the loop's 2 s grace timeout ends the tool.
    ToolHang {
        execution: u32,
        #[serde(default)]
        abort_after_ms: Option<u64>,
    },
    /// Tool execution number `execution` does its work, then returns `value` instead of a
    /// tool result.
    ToolGarbage { execution: u32, value: Garbage },
    /// The loop's live listener fails (`how`) when it hears a loop event of type `event`
    /// (any type if absent), the `nth` time (every time if absent).
    ListenerThrows {
        #[serde(default)]
        event: Option<String>,
        #[serde(default)]
        nth: Option<u32>,
        how: ListenerFault,
    },
    // ---- server-behaviour faults (issue 3; `sim serve` applies them too) ---------------
    /// Answer the `send`-th message send (1-based, counted by the server) with 409 busy.
    BusyOnSend { send: u64 },
    /// Answer the `send`-th message send with 503 `cloud_api_shutting_down`.
    ShuttingDownOnSend { send: u64 },
    /// When the `send`-th message send arrives, a pending approval appears on its
    /// conversation and the send gets the 409 approval-pending conflict (reference B.5.3).
    ApprovalPendingOnSend {
        send: u64,
        #[serde(default = "default_stale_id")]
        tool_call_id: String,
        #[serde(default = "default_stale_tool")]
        tool: String,
        #[serde(default = "default_stale_args")]
        arguments: String,
    },
    /// A pending approval left on a conversation before the run starts (reference B.5.4);
    /// the conversation is created for the scenario's agent if it does not exist.
    StaleApproval {
        conversation: String,
        #[serde(default = "default_stale_id")]
        tool_call_id: String,
        #[serde(default = "default_stale_tool")]
        tool: String,
        #[serde(default = "default_stale_args")]
        arguments: String,
    },
    /// Answer the first `times` `POST /v1/runs/{id}/stream` requests with 500.
    RunStreamFail { times: u64 },
    // ---- client-model (issue 4): server behaviour only the client flows need -------------
    /// The `send`-th message send starts its run, then is answered 409 busy naming that run
    /// (a duplicate the server does not dedupe: the client can attach by otid).
    BusyOwnRun { send: u64 },
    /// Like `approval_pending_on_send`, but the send then meets the pending call the way a
    /// streaming send does on Letta 0.16.8: HTTP 200 with the conflict in-band.
    ApprovalPendingInBand {
        send: u64,
        #[serde(default = "default_stale_id")]
        tool_call_id: String,
        #[serde(default = "default_stale_tool")]
        tool: String,
        #[serde(default = "default_stale_args")]
        arguments: String,
    },
    // ---- client-model (issue 4): user and client process ----------------------------------
    /// The user interrupts turn `turn`: `during = "stream"` after `after_chunk` processed chunks,
    /// `during = "tools"` `after_ms` into its first tool batch, or `during = "approval"` while
    /// the approval dialog waits for the human.
    Interrupt {
        turn: u32,
        during: String,
        #[serde(default)]
        after_chunk: Option<u32>,
        #[serde(default)]
        after_ms: Option<u64>,
    },
    /// The client process crashes in turn `turn`, `at = "after_tools"` (tools ran, results not
    /// sent) or `at = "after_chunk"` (after `after_chunk` processed chunks), and restarts.
    ClientCrash {
        turn: u32,
        at: String,
        #[serde(default)]
        after_chunk: Option<u32>,
    },
}

fn default_stale_id() -> String {
    "toolu_stale_1".into()
}
fn default_stale_tool() -> String {
    "Bash".into()
}
fn default_stale_args() -> String {
    r#"{"command": "echo stale", "description": "left pending"}"#.into()
}

/// The 11 loop event types a `listener_throws` fault can name (kimi-loop.md §3.1).
pub const LOOP_EVENT_TYPES: [&str; 11] = [
    "step.begin",
    "step.end",
    "content.part",
    "tool.call",
    "tool.result",
    "turn.interrupted",
    "step.retrying",
    "text.delta",
    "thinking.delta",
    "tool.call.delta",
    "tool.progress",
];

/// When a network or process fault fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    AtMs(u64),
    /// The `nth` (1-based) trace event whose name is `event`.
    OnEvent {
        event: String,
        nth: u32,
    },
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::AtMs(t) => write!(f, "at_ms={t}"),
            Trigger::OnEvent { event, nth } => write!(f, "on_event={event} nth={nth}"),
        }
    }
}

fn trigger(at_ms: &Option<u64>, on_event: &Option<String>, nth: &Option<u32>) -> Option<Trigger> {
    match (at_ms, on_event) {
        (Some(t), None) => Some(Trigger::AtMs(*t)),
        (None, Some(e)) => Some(Trigger::OnEvent {
            event: e.clone(),
            nth: nth.unwrap_or(1),
        }),
        _ => None,
    }
}

impl Fault {
    /// The trigger of a network or process fault; `None` for stream faults.
    pub fn trigger(&self) -> Option<Trigger> {
        match self {
            Fault::Latency {
                at_ms,
                on_event,
                nth,
                ..
            }
            | Fault::Partition {
                at_ms,
                on_event,
                nth,
                ..
            }
            | Fault::Hold {
                at_ms,
                on_event,
                nth,
                ..
            }
            | Fault::Crash {
                at_ms,
                on_event,
                nth,
                ..
            } => trigger(at_ms, on_event, nth),
            _ => None,
        }
    }

    /// The trigger of a `user_abort` fault (agent-loop); `None` for every other kind.
    pub fn user_trigger(&self) -> Option<Trigger> {
        match self {
            Fault::UserAbort {
                at_ms,
                on_event,
                nth,
                ..
            } => trigger(at_ms, on_event, nth),
            _ => None,
        }
    }

    /// Faults that exist only in the agent-loop world (user and tool faults of its agent).
    pub fn is_agent_loop_only(&self) -> bool {
        matches!(
            self,
            Fault::UserAbort { .. }
                | Fault::ToolHang { .. }
                | Fault::ToolGarbage { .. }
                | Fault::ListenerThrows { .. }
        )
    }

    /// Faults that need the Letta server (its streaming responses).
    pub fn needs_server(&self) -> bool {
        matches!(
            self,
            Fault::DropConnection { .. }
                | Fault::ServerStream { .. }
                | Fault::BusyOwnRun { .. }
                | Fault::ApprovalPendingInBand { .. }
                | Fault::Interrupt { .. }
                | Fault::ClientCrash { .. }
        )
    }

    /// What is wrong with this fault, if anything (the scenario loader adds file and line).
    pub fn problem(&self) -> Option<String> {
        let when = |at: &Option<u64>, ev: &Option<String>, nth: &Option<u32>| -> Option<String> {
            match (at, ev) {
                (Some(_), Some(_)) => Some("give either at_ms or on_event, not both".into()),
                (None, None) => {
                    Some("give a trigger: at_ms = <ms> or on_event = \"<event>\"".into())
                }
                (None, Some(_)) if *nth == Some(0) => Some("nth counts from 1".into()),
                (Some(_), None) if nth.is_some() => Some("nth goes with on_event".into()),
                _ => None,
            }
        };
        let host = |h: &str| -> Option<String> {
            (!HOSTS.contains(&h)).then(|| {
                format!("unknown host {h:?}: expected \"client\", \"server\" or \"provider\"")
            })
        };
        match self {
            Fault::DropConnection { response, .. } | Fault::ServerStream { response, .. }
                if *response == 0 =>
            {
                Some("response numbers start at 1".into())
            }
            Fault::BusyOnSend { send: 0 }
            | Fault::ShuttingDownOnSend { send: 0 }
            | Fault::ApprovalPendingOnSend { send: 0, .. } => {
                Some("send numbers start at 1".into())
            }
            Fault::ServerStream { frame: 0, .. } | Fault::ProviderStream { frame: 0, .. } => {
                Some("frame numbers start at 1".into())
            }
            Fault::ServerStream {
                action: StreamFault::Pass,
                ..
            }
            | Fault::ProviderStream {
                action: StreamFault::Pass,
                ..
            } => Some("action \"pass\" does nothing; remove the fault".into()),
            Fault::ProviderError { status, .. } if !(400..=599).contains(status) => {
                Some(format!("status {status} is not an error status (400-599)"))
            }
            Fault::Latency {
                at_ms,
                on_event,
                nth,
                ..
            } => when(at_ms, on_event, nth),
            Fault::Partition {
                between,
                at_ms,
                on_event,
                nth,
                ..
            }
            | Fault::Hold {
                between,
                at_ms,
                on_event,
                nth,
                ..
            } => host(&between[0])
                .or_else(|| host(&between[1]))
                .or_else(|| {
                    (between[0] == between[1]).then(|| "between names the same host twice".into())
                })
                .or_else(|| when(at_ms, on_event, nth)),
            Fault::Crash {
                host: h,
                at_ms,
                on_event,
                nth,
                ..
            } => host(h).or_else(|| when(at_ms, on_event, nth)),
            Fault::UserAbort {
                at_ms,
                on_event,
                nth,
                ..
            } => when(at_ms, on_event, nth),
            Fault::ToolHang { execution: 0, .. } | Fault::ToolGarbage { execution: 0, .. } => {
                Some("execution numbers start at 1".into())
            }
            Fault::ListenerThrows { nth: Some(0), .. } => Some("nth counts from 1".into()),
            Fault::BusyOwnRun { send: 0 } | Fault::ApprovalPendingInBand { send: 0, .. } => {
                Some("send numbers start at 1".into())
            }
            Fault::Interrupt {
                turn,
                during,
                after_chunk,
                after_ms,
            } => match (during.as_str(), after_chunk, after_ms) {
                _ if *turn == 0 => Some("turn numbers start at 1".into()),
                ("stream", Some(n), None) if *n > 0 => None,
                ("tools", None, Some(_)) => None,
                ("approval", None, None) => None,
                _ => Some(
                    "an interrupt is during = \"stream\" with after_chunk >= 1, during = \"tools\" with after_ms, or during = \"approval\"".into(),
                ),
            },
            Fault::ClientCrash {
                turn,
                at,
                after_chunk,
            } => match (at.as_str(), after_chunk) {
                _ if *turn == 0 => Some("turn numbers start at 1".into()),
                ("after_tools", None) => None,
                ("after_chunk", Some(n)) if *n > 0 => None,
                _ => Some(
                    "a client crash is at = \"after_tools\", or at = \"after_chunk\" with after_chunk >= 1".into(),
                ),
            },
            Fault::ListenerThrows {
                event: Some(e), ..
            } if !LOOP_EVENT_TYPES.contains(&e.as_str()) => Some(format!(
                "unknown loop event {e:?}: expected one of {}",
                LOOP_EVENT_TYPES.join(", ")
            )),
            _ => None,
        }
    }

    /// The fault as a TOML inline table, for writing scenarios (shrink output).
    pub fn to_toml(&self) -> String {
        let q = |s: &str| Value::String(s.to_string()).to_string();
        let when = |at: &Option<u64>, ev: &Option<String>, nth: &Option<u32>| -> String {
            match (at, ev) {
                (Some(t), _) => format!(", at_ms = {t}"),
                (None, Some(e)) => format!(", on_event = {}, nth = {}", q(e), nth.unwrap_or(1)),
                _ => String::new(),
            }
        };
        match self {
            Fault::DropConnection {
                response,
                after_frame,
            } => format!(
                "{{ kind = \"drop_connection\", response = {response}, after_frame = {after_frame} }}"
            ),
            Fault::ServerStream {
                response,
                frame,
                action,
            } => format!(
                "{{ kind = \"server_stream\", response = {response}, frame = {frame}, action = {} }}",
                q(action.as_str())
            ),
            Fault::ProviderStream {
                call,
                frame,
                action,
            } => format!(
                "{{ kind = \"provider_stream\", call = {call}, frame = {frame}, action = {} }}",
                q(action.as_str())
            ),
            Fault::ProviderError {
                call,
                status,
                retry_after_s,
                message,
            } => {
                let mut s =
                    format!("{{ kind = \"provider_error\", call = {call}, status = {status}");
                if let Some(r) = retry_after_s {
                    s.push_str(&format!(", retry_after_s = {r}"));
                }
                if let Some(m) = message {
                    s.push_str(&format!(", message = {}", q(m)));
                }
                s.push_str(" }");
                s
            }
            Fault::Latency {
                at_ms,
                on_event,
                nth,
                max_ms,
            } => format!(
                "{{ kind = \"latency\", max_ms = {max_ms}{} }}",
                when(at_ms, on_event, nth)
            ),
            Fault::Partition {
                between,
                at_ms,
                on_event,
                nth,
                duration_ms,
            }
            | Fault::Hold {
                between,
                at_ms,
                on_event,
                nth,
                duration_ms,
            } => format!(
                "{{ kind = \"{}\", between = [{}, {}], duration_ms = {duration_ms}{} }}",
                if matches!(self, Fault::Partition { .. }) {
                    "partition"
                } else {
                    "hold"
                },
                q(&between[0]),
                q(&between[1]),
                when(at_ms, on_event, nth)
            ),
            Fault::BusyOnSend { send } => format!("{{ kind = \"busy_on_send\", send = {send} }}"),
            Fault::ShuttingDownOnSend { send } => {
                format!("{{ kind = \"shutting_down_on_send\", send = {send} }}")
            }
            Fault::ApprovalPendingOnSend {
                send,
                tool_call_id,
                tool,
                arguments,
            } => format!(
                "{{ kind = \"approval_pending_on_send\", send = {send}, tool_call_id = {}, tool = {}, arguments = {} }}",
                q(tool_call_id),
                q(tool),
                q(arguments)
            ),
            Fault::StaleApproval {
                conversation,
                tool_call_id,
                tool,
                arguments,
            } => format!(
                "{{ kind = \"stale_approval\", conversation = {}, tool_call_id = {}, tool = {}, arguments = {} }}",
                q(conversation),
                q(tool_call_id),
                q(tool),
                q(arguments)
            ),
            Fault::RunStreamFail { times } => {
                format!("{{ kind = \"run_stream_fail\", times = {times} }}")
            }
            Fault::Crash {
                host,
                at_ms,
                on_event,
                nth,
                restart_after_ms,
            } => format!(
                "{{ kind = \"crash\", host = {}{}{} }}",
                q(host),
                when(at_ms, on_event, nth),
                restart_after_ms
                    .map(|r| format!(", restart_after_ms = {r}"))
                    .unwrap_or_default()
            ),
            Fault::UserAbort {
                at_ms,
                on_event,
                nth,
                reason,
            } => format!(
                "{{ kind = \"user_abort\"{}{} }}",
                when(at_ms, on_event, nth),
                reason
                    .map(|r| format!(", reason = {}", q(r.as_str())))
                    .unwrap_or_default()
            ),
            Fault::ToolHang {
                execution,
                abort_after_ms,
            } => format!(
                "{{ kind = \"tool_hang\", execution = {execution}{} }}",
                abort_after_ms
                    .map(|a| format!(", abort_after_ms = {a}"))
                    .unwrap_or_default()
            ),
            Fault::ToolGarbage { execution, value } => format!(
                "{{ kind = \"tool_garbage\", execution = {execution}, value = {} }}",
                q(value.as_str())
            ),
            Fault::BusyOwnRun { send } => format!("{{ kind = \"busy_own_run\", send = {send} }}"),
            Fault::ApprovalPendingInBand {
                send,
                tool_call_id,
                tool,
                arguments,
            } => format!(
                "{{ kind = \"approval_pending_in_band\", send = {send}, tool_call_id = {}, tool = {}, arguments = {} }}",
                q(tool_call_id),
                q(tool),
                q(arguments)
            ),
            Fault::Interrupt {
                turn,
                during,
                after_chunk,
                after_ms,
            } => {
                let mut s = format!(
                    "{{ kind = \"interrupt\", turn = {turn}, during = {}",
                    q(during)
                );
                if let Some(n) = after_chunk {
                    s.push_str(&format!(", after_chunk = {n}"));
                }
                if let Some(m) = after_ms {
                    s.push_str(&format!(", after_ms = {m}"));
                }
                s.push_str(" }");
                s
            }
            Fault::ClientCrash {
                turn,
                at,
                after_chunk,
            } => {
                let mut s = format!("{{ kind = \"client_crash\", turn = {turn}, at = {}", q(at));
                if let Some(n) = after_chunk {
                    s.push_str(&format!(", after_chunk = {n}"));
                }
                s.push_str(" }");
                s
            }
            Fault::ListenerThrows { event, nth, how } => {
                let mut s = "{ kind = \"listener_throws\"".to_string();
                if let Some(e) = event {
                    s.push_str(&format!(", event = {}", q(e)));
                }
                if let Some(n) = nth {
                    s.push_str(&format!(", nth = {n}"));
                }
                s.push_str(&format!(", how = {} }}", q(how.as_str())));
                s
            }
        }
    }

    /// A copy with every time and index made smaller by `f` (shrinking), or `None` if nothing
    /// in it can shrink.
    pub fn shrunk(&self, f: impl Fn(u64) -> u64) -> Option<Fault> {
        let mut g = self.clone();
        let changed = match &mut g {
            Fault::DropConnection { after_frame, .. } => shrink_field(after_frame, &f),
            Fault::ServerStream { frame, .. } | Fault::ProviderStream { frame, .. } => {
                shrink_field(frame, &f) && *frame >= 1
            }
            Fault::Latency { at_ms, max_ms, .. } => {
                let a = at_ms.as_mut().is_some_and(|t| shrink_field(t, &f));
                a | shrink_field(max_ms, &f)
            }
            Fault::Partition {
                at_ms, duration_ms, ..
            }
            | Fault::Hold {
                at_ms, duration_ms, ..
            } => {
                let a = at_ms.as_mut().is_some_and(|t| shrink_field(t, &f));
                a | shrink_field(duration_ms, &f)
            }
            Fault::Crash {
                at_ms,
                restart_after_ms,
                ..
            } => {
                let a = at_ms.as_mut().is_some_and(|t| shrink_field(t, &f));
                a | restart_after_ms
                    .as_mut()
                    .is_some_and(|t| shrink_field(t, &f))
            }
            Fault::ProviderError { .. }
            | Fault::BusyOnSend { .. }
            | Fault::ShuttingDownOnSend { .. }
            | Fault::ApprovalPendingOnSend { .. }
            | Fault::StaleApproval { .. }
            | Fault::RunStreamFail { .. } => false,
            Fault::UserAbort { at_ms, nth, .. } => {
                let a = at_ms.as_mut().is_some_and(|t| shrink_field(t, &f));
                let n = nth.as_mut().is_some_and(|n| shrink_u32(n, &f));
                a | n
            }
            Fault::ToolHang {
                execution,
                abort_after_ms,
            } => {
                let e = shrink_u32(execution, &f);
                e | abort_after_ms.as_mut().is_some_and(|t| shrink_field(t, &f))
            }
            Fault::ToolGarbage { execution, .. } => shrink_u32(execution, &f),
            Fault::ListenerThrows { nth, .. } => nth.as_mut().is_some_and(|n| shrink_u32(n, &f)),
            Fault::Interrupt {
                after_chunk,
                after_ms,
                ..
            } => {
                let a = after_chunk.as_mut().is_some_and(|n| shrink_u32(n, &f));
                a | after_ms.as_mut().is_some_and(|t| shrink_field(t, &f))
            }
            Fault::BusyOwnRun { .. }
            | Fault::ApprovalPendingInBand { .. }
            | Fault::ClientCrash { .. } => false,
        };
        (changed && g.problem().is_none()).then_some(g)
    }
}

/// [`shrink_field`] for a 1-based count: it never goes below 1.
fn shrink_u32(v: &mut u32, f: &impl Fn(u64) -> u64) -> bool {
    let n = f(u64::from(*v)).max(1);
    if n < u64::from(*v) {
        *v = n as u32;
        true
    } else {
        false
    }
}

fn shrink_field(v: &mut u64, f: &impl Fn(u64) -> u64) -> bool {
    let n = f(*v);
    if n < *v {
        *v = n;
        true
    } else {
        false
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The inline table without braces and `kind = `: `drop_connection response=1 after_frame=4`.
        match self {
            Fault::DropConnection {
                response,
                after_frame,
            } => write!(
                f,
                "drop_connection response={response} after_frame={after_frame}"
            ),
            Fault::ServerStream {
                response,
                frame,
                action,
            } => write!(
                f,
                "server_stream response={response} frame={frame} action={}",
                action.as_str()
            ),
            Fault::ProviderStream {
                call,
                frame,
                action,
            } => write!(
                f,
                "provider_stream call={call} frame={frame} action={}",
                action.as_str()
            ),
            Fault::ProviderError {
                call,
                status,
                retry_after_s,
                ..
            } => {
                write!(f, "provider_error call={call} status={status}")?;
                if let Some(r) = retry_after_s {
                    write!(f, " retry_after_s={r}")?;
                }
                Ok(())
            }
            Fault::Latency { max_ms, .. } => {
                write!(
                    f,
                    "latency max_ms={max_ms} {}",
                    self.trigger().expect("valid")
                )
            }
            Fault::Partition {
                between,
                duration_ms,
                ..
            } => write!(
                f,
                "partition between={},{} duration_ms={duration_ms} {}",
                between[0],
                between[1],
                self.trigger().expect("valid")
            ),
            Fault::Hold {
                between,
                duration_ms,
                ..
            } => write!(
                f,
                "hold between={},{} duration_ms={duration_ms} {}",
                between[0],
                between[1],
                self.trigger().expect("valid")
            ),
            Fault::BusyOnSend { send } => write!(f, "busy_on_send send={send}"),
            Fault::ShuttingDownOnSend { send } => write!(f, "shutting_down_on_send send={send}"),
            Fault::ApprovalPendingOnSend {
                send, tool_call_id, ..
            } => write!(
                f,
                "approval_pending_on_send send={send} tool_call_id={tool_call_id}"
            ),
            Fault::StaleApproval {
                conversation,
                tool_call_id,
                ..
            } => write!(
                f,
                "stale_approval conversation={conversation} tool_call_id={tool_call_id}"
            ),
            Fault::RunStreamFail { times } => write!(f, "run_stream_fail times={times}"),
            Fault::Crash {
                host,
                restart_after_ms,
                ..
            } => {
                write!(f, "crash host={host} {}", self.trigger().expect("valid"))?;
                match restart_after_ms {
                    Some(r) => write!(f, " restart_after_ms={r}"),
                    None => write!(f, " restart=at-heal"),
                }
            }
            Fault::UserAbort { reason, .. } => write!(
                f,
                "user_abort {} reason={}",
                self.user_trigger().expect("valid"),
                reason.unwrap_or(AbortReason::User).as_str()
            ),
            Fault::ToolHang {
                execution,
                abort_after_ms,
            } => {
                write!(f, "tool_hang execution={execution}")?;
                match abort_after_ms {
                    Some(a) => write!(f, " abort_after_ms={a}"),
                    None => Ok(()),
                }
            }
            Fault::ToolGarbage { execution, value } => write!(
                f,
                "tool_garbage execution={execution} value={}",
                value.as_str()
            ),
            Fault::BusyOwnRun { send } => write!(f, "busy_own_run send={send}"),
            Fault::ApprovalPendingInBand {
                send, tool_call_id, ..
            } => write!(
                f,
                "approval_pending_in_band send={send} tool_call_id={tool_call_id}"
            ),
            Fault::Interrupt {
                turn,
                during,
                after_chunk,
                after_ms,
            } => {
                write!(f, "interrupt turn={turn} during={during}")?;
                if let Some(n) = after_chunk {
                    write!(f, " after_chunk={n}")?;
                }
                if let Some(n) = after_ms {
                    write!(f, " after_ms={n}")?;
                }
                Ok(())
            }
            Fault::ClientCrash {
                turn,
                at,
                after_chunk,
            } => {
                write!(f, "client_crash turn={turn} at={at}")?;
                if let Some(n) = after_chunk {
                    write!(f, " after_chunk={n}")?;
                }
                Ok(())
            }
            Fault::ListenerThrows { event, nth, how } => write!(
                f,
                "listener_throws event={} nth={} how={}",
                event.as_deref().unwrap_or("any"),
                nth.map_or("every".to_string(), |n| n.to_string()),
                how.as_str()
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hooks: stream faults through the models' injection points
// ---------------------------------------------------------------------------------------------

/// Reads the current time for fault reports; simulated under turmoil, real on TCP.
pub type NowFn = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The plan's stream faults, consulted by the server and the provider.
pub struct PlanHooks {
    faults: Vec<Fault>,
    trace: Trace,
    now: NowFn,
}

impl PlanHooks {
    pub fn new(faults: &[Fault], trace: &Trace, now: NowFn) -> Arc<Self> {
        Arc::new(PlanHooks {
            faults: faults.to_vec(),
            trace: trace.clone(),
            now,
        })
    }

    fn report(&self, f: &Fault) {
        self.trace.push(
            (self.now)(),
            "harness",
            Observation::Fault {
                fault: f.to_string(),
            },
        );
    }
}

impl StreamHooks for PlanHooks {
    fn before_frame(&self, response: u64, frame: u64) -> StreamFault {
        for f in &self.faults {
            let hit = match f {
                Fault::DropConnection {
                    response: r,
                    after_frame,
                } if *r == response && frame == after_frame + 1 => StreamFault::Reset,
                Fault::ServerStream {
                    response: r,
                    frame: n,
                    action,
                } if *r == response && *n == frame => *action,
                _ => continue,
            };
            self.report(f);
            return hit;
        }
        StreamFault::Pass
    }

    // ---- server-behaviour faults (issue 3); the server reports these itself -------------
    fn on_send(&self, send: u64) -> SendFault {
        for f in &self.faults {
            match f {
                Fault::BusyOnSend { send: n } if *n == send => return SendFault::Busy,
                Fault::ShuttingDownOnSend { send: n } if *n == send => {
                    return SendFault::ShuttingDown;
                }
                Fault::ApprovalPendingOnSend {
                    send: n,
                    tool_call_id,
                    tool,
                    arguments,
                } if *n == send => {
                    return SendFault::ApprovalAppears(StoredToolCall {
                        id: tool_call_id.clone(),
                        name: tool.clone(),
                        arguments: arguments.clone(),
                    });
                }
                // client-model (issue 4)
                Fault::BusyOwnRun { send: n } if *n == send => return SendFault::BusyOwnRun,
                Fault::ApprovalPendingInBand {
                    send: n,
                    tool_call_id,
                    tool,
                    arguments,
                } if *n == send => {
                    return SendFault::ApprovalAppearsInBand(StoredToolCall {
                        id: tool_call_id.clone(),
                        name: tool.clone(),
                        arguments: arguments.clone(),
                    });
                }
                _ => {}
            }
        }
        SendFault::Pass
    }

    fn fail_run_stream(&self, n: u64) -> bool {
        self.faults
            .iter()
            .any(|f| matches!(f, Fault::RunStreamFail { times } if n <= *times))
    }
}

impl ProviderHooks for PlanHooks {
    fn override_call(&self, call: u32) -> Option<ProviderOverride> {
        for f in &self.faults {
            if let Fault::ProviderError {
                call: c,
                status,
                retry_after_s,
                message,
            } = f
                && *c == call
            {
                self.report(f);
                let message = message.clone().unwrap_or_else(|| match status {
                    429 => {
                        "Number of request tokens has exceeded your per-minute rate limit".into()
                    }
                    529 => "Overloaded".into(),
                    _ => "Internal server error".into(),
                });
                // Anthropic's error body shape; the server only reads status and text.
                let error_type = match status {
                    429 => "rate_limit_error",
                    529 => "overloaded_error",
                    400 => "invalid_request_error",
                    _ => "api_error",
                };
                let body = serde_json::json!({
                    "type": "error",
                    "error": {"type": error_type, "message": message},
                })
                .to_string();
                let headers = retry_after_s
                    .map(|s| vec![("retry-after".to_string(), s.to_string())])
                    .unwrap_or_default();
                return Some(ProviderOverride {
                    status: *status,
                    headers,
                    body,
                });
            }
        }
        None
    }

    fn before_frame(&self, call: u32, frame: u64) -> StreamFault {
        for f in &self.faults {
            if let Fault::ProviderStream {
                call: c,
                frame: n,
                action,
            } = f
                && *c == call
                && *n == frame
            {
                self.report(f);
                return *action;
            }
        }
        StreamFault::Pass
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime: network and process faults on a turmoil world
// ---------------------------------------------------------------------------------------------

/// What the world loop does to turmoil.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    SetMaxLatency(u64),
    Partition(String, String),
    Repair(String, String),
    Hold(String, String),
    Release(String, String),
    Crash(String),
    Restart(String),
}

/// Drives the plan's network and process faults as the simulation steps.
pub struct FaultRuntime {
    /// (fault, its trigger, fired yet)
    armed: Vec<(Fault, Trigger, bool)>,
    /// Follow-up actions at a time (repairs, restarts), in the order they were scheduled.
    scheduled: Vec<(u64, Action)>,
    crashed: BTreeSet<String>,
    partitioned: BTreeSet<(String, String)>,
    held: BTreeSet<(String, String)>,
    base_max_latency: u64,
    /// The scenario's minimum latency (links are pinned to it while a host crashes).
    base_min_latency: u64,
    /// The maximum latency in force now (a latency fault raises it).
    current_max_latency: u64,
    latency_raised: bool,
    /// How many trace events the event triggers have looked at.
    cursor: usize,
    event_counts: Vec<u32>,
    pub healed: bool,
}

impl FaultRuntime {
    pub fn new(faults: &[Fault], latency_ms: [u64; 2]) -> Self {
        let [base_min_latency, base_max_latency] = latency_ms;
        let armed: Vec<_> = faults
            .iter()
            .filter_map(|f| f.trigger().map(|t| (f.clone(), t, false)))
            .collect();
        let n = armed.len();
        FaultRuntime {
            armed,
            scheduled: Vec::new(),
            crashed: BTreeSet::new(),
            partitioned: BTreeSet::new(),
            held: BTreeSet::new(),
            base_max_latency,
            base_min_latency,
            current_max_latency: base_max_latency,
            latency_raised: false,
            cursor: 0,
            event_counts: vec![0; n],
            healed: false,
        }
    }

    /// Hosts crashed and not yet restarted.
    pub fn crashed(&self) -> &BTreeSet<String> {
        &self.crashed
    }

    /// Fires due faults and follow-ups. Called after every step.
    pub fn on_step(&mut self, sim: &mut turmoil::Sim<'_>, now_ms: u64, trace: &Trace) {
        if self.healed {
            return;
        }
        let mut due: Vec<usize> = Vec::new();
        let needs_events = self
            .armed
            .iter()
            .any(|(_, t, fired)| !fired && matches!(t, Trigger::OnEvent { .. }));
        if needs_events {
            let new = trace.events_since(self.cursor);
            self.cursor += new.len();
            for e in &new {
                let name = e.obs.name();
                for (i, (_, t, fired)) in self.armed.iter().enumerate() {
                    if let Trigger::OnEvent { event, nth } = t
                        && !*fired
                        && *event == name
                    {
                        self.event_counts[i] += 1;
                        if self.event_counts[i] == *nth {
                            due.push(i);
                        }
                    }
                }
            }
        }
        for (i, (_, t, fired)) in self.armed.iter().enumerate() {
            if let Trigger::AtMs(at) = t
                && !*fired
                && now_ms >= *at
            {
                due.push(i);
            }
        }
        due.sort_unstable();
        due.dedup();
        for i in due {
            self.armed[i].2 = true;
            let fault = self.armed[i].0.clone();
            trace.push(
                now_ms,
                "harness",
                Observation::Fault {
                    fault: fault.to_string(),
                },
            );
            match fault {
                Fault::Latency { max_ms, .. } => {
                    self.apply(sim, Action::SetMaxLatency(max_ms));
                }
                Fault::Partition {
                    between: [a, b],
                    duration_ms,
                    ..
                } => {
                    self.apply(sim, Action::Partition(a.clone(), b.clone()));
                    self.scheduled
                        .push((now_ms + duration_ms, Action::Repair(a, b)));
                }
                Fault::Hold {
                    between: [a, b],
                    duration_ms,
                    ..
                } => {
                    self.apply(sim, Action::Hold(a.clone(), b.clone()));
                    self.scheduled
                        .push((now_ms + duration_ms, Action::Release(a, b)));
                }
                Fault::Crash {
                    host,
                    restart_after_ms,
                    ..
                } => {
                    if self.crashed.contains(&host) {
                        continue;
                    }
                    self.apply(sim, Action::Crash(host.clone()));
                    if let Some(r) = restart_after_ms {
                        self.scheduled.push((now_ms + r, Action::Restart(host)));
                    }
                }
                _ => {}
            }
        }
        let mut i = 0;
        while i < self.scheduled.len() {
            if self.scheduled[i].0 <= now_ms {
                let (_, action) = self.scheduled.remove(i);
                trace.push(
                    now_ms,
                    "harness",
                    Observation::Fault {
                        fault: describe(&action),
                    },
                );
                self.apply(sim, action);
            } else {
                i += 1;
            }
        }
    }

    /// Ends the fault phase: every fault stops and the world is repaired.
    pub fn heal(&mut self, sim: &mut turmoil::Sim<'_>, now_ms: u64, trace: &Trace) {
        if self.healed {
            return;
        }
        self.healed = true;
        let mut actions = Vec::new();
        for (a, b) in std::mem::take(&mut self.partitioned) {
            actions.push(Action::Repair(a, b));
        }
        for (a, b) in std::mem::take(&mut self.held) {
            actions.push(Action::Release(a, b));
        }
        for h in self.crashed.clone() {
            actions.push(Action::Restart(h));
        }
        if self.latency_raised {
            actions.push(Action::SetMaxLatency(self.base_max_latency));
        }
        self.scheduled.clear();
        trace.push(
            now_ms,
            "harness",
            Observation::Fault {
                fault: "heal: faults stop, the world is repaired".into(),
            },
        );
        for a in actions {
            trace.push(
                now_ms,
                "harness",
                Observation::Fault {
                    fault: describe(&a),
                },
            );
            self.apply(sim, a);
        }
    }

    /// client-model (issue 4): a crash the client process asked for (`client_crash`), and its
    /// immediate restart, with the same latency pinning as a planned crash.
    pub fn crash_and_restart(&mut self, sim: &mut turmoil::Sim<'_>, host: &str) {
        self.apply(sim, Action::Crash(host.to_string()));
        self.apply(sim, Action::Restart(host.to_string()));
    }

    fn apply(&mut self, sim: &mut turmoil::Sim<'_>, action: Action) {
        match action {
            Action::SetMaxLatency(ms) => {
                sim.set_max_message_latency(std::time::Duration::from_millis(ms));
                self.latency_raised = ms != self.base_max_latency;
                self.current_max_latency = ms;
            }
            Action::Partition(a, b) => {
                sim.partition(a.as_str(), b.as_str());
                self.partitioned.insert((a, b));
            }
            Action::Repair(a, b) => {
                sim.repair(a.as_str(), b.as_str());
                self.partitioned.remove(&(a, b));
            }
            Action::Hold(a, b) => {
                sim.hold(a.as_str(), b.as_str());
                self.held.insert((a, b));
            }
            Action::Release(a, b) => {
                sim.release(a.as_str(), b.as_str());
                self.held.remove(&(a, b));
            }
            Action::Crash(h) => {
                // A crash drops the host's sockets in the order tokio keeps its tasks, which
                // follows process-wide task ids: two runs of one seed in one process can drop
                // them in different orders. Each dropped socket sends a FIN whose latency
                // turmoil draws from the shared PRNG, so the order would decide which FIN gets
                // which latency. Pinning the host's links to one latency for the crash makes
                // every draw give the same value (turmoil still consumes one draw per message,
                // so the PRNG stream after the crash is unchanged), and the order stops
                // mattering. The links get their range back right after.
                let ip = sim.lookup(h.as_str());
                let mut pairs = Vec::new();
                sim.links(|links| {
                    for link in links {
                        let (a, b) = link.pair();
                        if a == ip || b == ip {
                            pairs.push((a, b));
                        }
                    }
                });
                let min = std::time::Duration::from_millis(self.base_min_latency);
                let max = std::time::Duration::from_millis(self.current_max_latency);
                for (a, b) in &pairs {
                    sim.set_link_latency(*a, *b, min);
                }
                sim.crash(h.as_str());
                for (a, b) in &pairs {
                    sim.set_link_max_message_latency(*a, *b, max);
                }
                self.crashed.insert(h);
            }
            Action::Restart(h) => {
                if self.crashed.remove(&h) {
                    sim.bounce(h.as_str());
                }
            }
        }
    }
}

fn describe(a: &Action) -> String {
    match a {
        Action::SetMaxLatency(ms) => format!("latency max_ms={ms}"),
        Action::Partition(a, b) => format!("partition {a},{b}"),
        Action::Repair(a, b) => format!("repair {a},{b}"),
        Action::Hold(a, b) => format!("hold {a},{b}"),
        Action::Release(a, b) => format!("release {a},{b}"),
        Action::Crash(h) => format!("crash {h}"),
        Action::Restart(h) => format!("restart {h}"),
    }
}
