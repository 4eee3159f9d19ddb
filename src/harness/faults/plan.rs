//! The fault kinds of a plan (docs/faults.md), read from and written to scenario TOML by serde.
//! A fault prints as one line, `kind key=value …` ([`fmt::Display`]): that line is what the
//! trace records when the fault fires and what reports list.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use super::trigger::{When, smaller, smaller_count};
use crate::model::kimi::agent::inject::{AbortReason, Garbage, ListenerFault};
use crate::model::port::inject::{DateField, StreamFault};

/// Hosts a fault can name.
pub const HOSTS: [&str; 3] = ["client", "server", "provider"];

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

/// The five loop event types the host records (kimi-loop.md §8.2), the first five of
/// [`LOOP_EVENT_TYPES`]: the ones a `transcript_rejects` fault can name.
pub const RECORDED_EVENT_TYPES: &[&str] = LOOP_EVENT_TYPES.split_at(5).0;

/// How far a run of a scenario can reach, for [`Fault::unreachable`].
#[derive(Debug, Clone)]
pub struct Reach {
    /// User turns (1-based turn numbers run to this).
    pub turns: u64,
    /// Model calls that get an answer (0-based call numbers run below this).
    pub calls: u64,
    /// What `calls` counts, for the message.
    pub calls_from: String,
    /// The most requests the client (and probe) can make in a run, which bounds the server's
    /// streaming responses and message sends; `None` where there is no server.
    pub responses: Option<u64>,
    /// What `responses` counts, for the message.
    pub responses_from: String,
}

/// The most `GET /v1/runs/{id}` requests a drawn plan fails (`run_read_fail`): three lookups'
/// worth, as the SDK makes three requests of each (letta-protocol.md §2.8).
pub const RUN_READ_FAIL_MAX: u64 = 9;

/// One fault of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// Reset the connection of the server's `response`-th streaming response (1-based, counted
    /// across the run) once it has written `after_frame` frames.
    DropConnection { response: u64, after_frame: u64 },
    /// Act on frame `frame` (1-based) of the server's `response`-th streaming response.
    ServerStream {
        response: u64,
        frame: u64,
        #[serde(serialize_with = "by_name")]
        action: StreamFault,
    },
    /// Act on frame `frame` (1-based) of the provider's answer to model call `call` (0-based).
    ProviderStream {
        call: u32,
        frame: u64,
        #[serde(serialize_with = "by_name")]
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
        #[serde(flatten)]
        when: When,
        max_ms: u64,
    },
    /// Drop every message between two hosts for `duration_ms` (TCP connections across it wedge).
    Partition {
        between: [String; 2],
        #[serde(flatten)]
        when: When,
        duration_ms: u64,
    },
    /// Hold every message between two hosts for `duration_ms`, then deliver them.
    Hold {
        between: [String; 2],
        #[serde(flatten)]
        when: When,
        duration_ms: u64,
    },
    /// Crash a host (its tasks and sockets vanish; its durable state survives) and restart it
    /// `restart_after_ms` later, or when the world heals.
    Crash {
        host: String,
        #[serde(flatten)]
        when: When,
        #[serde(default)]
        restart_after_ms: Option<u64>,
    },

    // ---- user and tool faults of `system = "agent-loop"` ----------------------------------
    /// The simulated user aborts the running turn at a simulated time or right after the
    /// `nth` agent event named `on_event`; the loop acts on it at its next safe point.
    UserAbort {
        #[serde(flatten)]
        when: When,
        /// `user` (a user cancellation, the default) or `signal` (a plain abort).
        #[serde(default, serialize_with = "option_by_name")]
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
    ToolGarbage {
        execution: u32,
        #[serde(serialize_with = "by_name")]
        value: Garbage,
    },
    /// The loop's live listener fails (`how`) when it hears a loop event of type `event`
    /// (any type if absent), the `nth` time (every time if absent).
    ListenerThrows {
        #[serde(default)]
        event: Option<String>,
        #[serde(default)]
        nth: Option<u32>,
        #[serde(serialize_with = "by_name")]
        how: ListenerFault,
    },
    /// The host's record store rejects the `nth` append (the first if absent) of a recorded
    /// loop event of type `event` (any type if absent): nothing is written, the loop's append
    /// fails (kimi-loop.md §4.6).
    TranscriptRejects {
        #[serde(default)]
        event: Option<String>,
        #[serde(default)]
        nth: Option<u32>,
    },

    // ---- server behaviour (`sim serve` applies these too) ----------------------------------
    /// Answer the `send`-th message send (1-based, counted by the server) with 409 busy.
    BusyOnSend { send: u64 },
    /// Answer the `send`-th message send with 503 `cloud_api_shutting_down`, with a
    /// `Retry-After` of `retry_after_s` seconds when given, written as an HTTP date that far
    /// ahead when `retry_after_date` is set, and that date with one field out of range
    /// (`day`, `hour` or `minute`) when `retry_after_broken` names it.
    ShuttingDownOnSend {
        send: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_s: Option<u64>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retry_after_date: bool,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            serialize_with = "option_by_name"
        )]
        retry_after_broken: Option<DateField>,
    },
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
    /// Answer the first `times` `POST /v1/runs/{id}/stream` requests with 500, with a
    /// `Retry-After` of `retry_after_s` seconds when given (as a proxy in front of the server
    /// may add), written as an HTTP date that far ahead when `retry_after_date` is set (broken
    /// in one field by `retry_after_broken`, as for `shutting_down_on_send`). The
    /// SDK's retries of the resume stream read it (letta-protocol.md §2.8).
    RunStreamFail {
        times: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_s: Option<u64>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retry_after_date: bool,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            serialize_with = "option_by_name"
        )]
        retry_after_broken: Option<DateField>,
    },
    /// The first `times` `GET /v1/runs/{id}` requests get 500 `Internal Server Error`: the
    /// client cannot read a run's error back and judges it by the stream's error line
    /// (letta-protocol.md §3.7 `isRetriableError`, "on fetch failure use fallbackDetail").
    RunReadFail { times: u64 },
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

    // ---- the user and the client process of `system = "letta"` ----------------------------
    /// The user interrupts turn `turn`: `during = "stream"` after `after_chunk` processed chunks,
    /// `during = "tools"` `after_ms` into its first tool batch, or `during = "approval"` while
    /// the approval dialog waits for the human.
    Interrupt {
        turn: u32,
        during: During,
        #[serde(default)]
        after_chunk: Option<u32>,
        #[serde(default)]
        after_ms: Option<u64>,
    },
    /// The client process crashes in turn `turn`, `at = "after_tools"` (tools ran, results not
    /// sent) or `at = "after_chunk"` (after `after_chunk` processed chunks), and restarts.
    ClientCrash {
        turn: u32,
        at: CrashAt,
        #[serde(default)]
        after_chunk: Option<u32>,
    },
}

/// Where in a turn an `interrupt` happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum During {
    /// While the turn's stream is read (with `after_chunk`).
    Stream,
    /// While its first tool batch runs (with `after_ms`).
    Tools,
    /// While the approval dialog waits for the human.
    Approval,
}

impl During {
    pub fn as_str(self) -> &'static str {
        match self {
            During::Stream => "stream",
            During::Tools => "tools",
            During::Approval => "approval",
        }
    }
}

/// Where in a turn a `client_crash` happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashAt {
    /// The tools ran, their results are not sent yet.
    AfterTools,
    /// After `after_chunk` processed chunks.
    AfterChunk,
}

impl CrashAt {
    pub fn as_str(self) -> &'static str {
        match self {
            CrashAt::AfterTools => "after_tools",
            CrashAt::AfterChunk => "after_chunk",
        }
    }
}

/// The stale call the bundled scenarios use, and what a stale-approval fault defaults to.
pub(crate) fn default_stale_id() -> String {
    "toolu_stale_1".into()
}
pub(crate) fn default_stale_tool() -> String {
    "Bash".into()
}
pub(crate) fn default_stale_args() -> String {
    r#"{"command": "echo stale", "description": "left pending"}"#.into()
}

/// The models' fault vocabularies, written by the names they are read by.
trait Named: Copy {
    fn name(self) -> &'static str;
}

impl Named for StreamFault {
    fn name(self) -> &'static str {
        self.as_str()
    }
}
impl Named for DateField {
    fn name(self) -> &'static str {
        self.as_str()
    }
}
impl Named for AbortReason {
    fn name(self) -> &'static str {
        self.as_str()
    }
}
impl Named for Garbage {
    fn name(self) -> &'static str {
        self.as_str()
    }
}
impl Named for ListenerFault {
    fn name(self) -> &'static str {
        self.as_str()
    }
}

fn by_name<T: Named, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.name())
}

fn option_by_name<T: Named, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_some(v.name()),
        None => s.serialize_none(),
    }
}

impl Fault {
    /// The `kind` the fault is written with.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::DropConnection { .. } => "drop_connection",
            Fault::ServerStream { .. } => "server_stream",
            Fault::ProviderStream { .. } => "provider_stream",
            Fault::ProviderError { .. } => "provider_error",
            Fault::Latency { .. } => "latency",
            Fault::Partition { .. } => "partition",
            Fault::Hold { .. } => "hold",
            Fault::Crash { .. } => "crash",
            Fault::UserAbort { .. } => "user_abort",
            Fault::ToolHang { .. } => "tool_hang",
            Fault::ToolGarbage { .. } => "tool_garbage",
            Fault::ListenerThrows { .. } => "listener_throws",
            Fault::TranscriptRejects { .. } => "transcript_rejects",
            Fault::BusyOnSend { .. } => "busy_on_send",
            Fault::ShuttingDownOnSend { .. } => "shutting_down_on_send",
            Fault::ApprovalPendingOnSend { .. } => "approval_pending_on_send",
            Fault::StaleApproval { .. } => "stale_approval",
            Fault::RunStreamFail { .. } => "run_stream_fail",
            Fault::RunReadFail { .. } => "run_read_fail",
            Fault::BusyOwnRun { .. } => "busy_own_run",
            Fault::ApprovalPendingInBand { .. } => "approval_pending_in_band",
            Fault::Interrupt { .. } => "interrupt",
            Fault::ClientCrash { .. } => "client_crash",
        }
    }

    /// The trigger of a network or process fault; `None` for every other kind.
    pub fn trigger(&self) -> Option<When> {
        match self {
            Fault::Latency { when, .. }
            | Fault::Partition { when, .. }
            | Fault::Hold { when, .. }
            | Fault::Crash { when, .. } => Some(when.clone()),
            _ => None,
        }
    }

    /// The append a `transcript_rejects` fault refuses: the event type it names (any recorded
    /// type when it names none) and which append of that type, the first when it names none.
    /// `None` for every other kind.
    pub fn rejected_append(&self) -> Option<(Option<&str>, u32)> {
        match self {
            Fault::TranscriptRejects { event, nth } => Some((event.as_deref(), nth.unwrap_or(1))),
            _ => None,
        }
    }

    /// The trigger of a `user_abort` fault (agent-loop); `None` for every other kind.
    pub fn user_trigger(&self) -> Option<When> {
        match self {
            Fault::UserAbort { when, .. } => Some(when.clone()),
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
                | Fault::TranscriptRejects { .. }
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
            | Fault::ShuttingDownOnSend { send: 0, .. }
            | Fault::ApprovalPendingOnSend { send: 0, .. }
            | Fault::BusyOwnRun { send: 0 }
            | Fault::ApprovalPendingInBand { send: 0, .. } => {
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
            Fault::ShuttingDownOnSend {
                retry_after_s: None,
                retry_after_date: true,
                ..
            }
            | Fault::RunStreamFail {
                retry_after_s: None,
                retry_after_date: true,
                ..
            } => Some(
                "retry_after_date = true writes retry_after_s as a date: give retry_after_s too"
                    .into(),
            ),
            Fault::ShuttingDownOnSend {
                retry_after_date: false,
                retry_after_broken: Some(_),
                ..
            }
            | Fault::RunStreamFail {
                retry_after_date: false,
                retry_after_broken: Some(_),
                ..
            } => Some(
                "retry_after_broken breaks the HTTP date retry_after_date = true writes: set retry_after_date = true and retry_after_s too"
                    .into(),
            ),
            Fault::RunReadFail { times: 0 } => {
                Some("times = 0 fails no request: give 1 or more".into())
            }
            Fault::ProviderError { status, .. } if !(400..=599).contains(status) => {
                Some(format!("status {status} is not an error status (400-599)"))
            }
            Fault::Latency { when, .. } | Fault::UserAbort { when, .. } => when.problem(),
            Fault::Partition { between, when, .. } | Fault::Hold { between, when, .. } => {
                host(&between[0])
                    .or_else(|| host(&between[1]))
                    .or_else(|| {
                        (between[0] == between[1])
                            .then(|| "between names the same host twice".into())
                    })
                    .or_else(|| when.problem())
            }
            Fault::Crash { host: h, when, .. } => host(h).or_else(|| when.problem()),
            Fault::ToolHang { execution: 0, .. } | Fault::ToolGarbage { execution: 0, .. } => {
                Some("execution numbers start at 1".into())
            }
            Fault::ListenerThrows { nth: Some(0), .. }
            | Fault::TranscriptRejects { nth: Some(0), .. } => Some("nth counts from 1".into()),
            Fault::Interrupt {
                turn,
                during,
                after_chunk,
                after_ms,
            } => match (during, after_chunk, after_ms) {
                _ if *turn == 0 => Some("turn numbers start at 1".into()),
                (During::Stream, Some(n), None) if *n > 0 => None,
                (During::Tools, None, Some(_)) | (During::Approval, None, None) => None,
                _ => Some(
                    "an interrupt is during = \"stream\" with after_chunk >= 1, during = \"tools\" with after_ms, or during = \"approval\"".into(),
                ),
            },
            Fault::ClientCrash {
                turn,
                at,
                after_chunk,
            } => match (at, after_chunk) {
                _ if *turn == 0 => Some("turn numbers start at 1".into()),
                (CrashAt::AfterTools, None) => None,
                (CrashAt::AfterChunk, Some(n)) if *n > 0 => None,
                _ => Some(
                    "a client crash is at = \"after_tools\", or at = \"after_chunk\" with after_chunk >= 1".into(),
                ),
            },
            Fault::ListenerThrows { event: Some(e), .. }
                if !LOOP_EVENT_TYPES.contains(&e.as_str()) =>
            {
                Some(format!(
                    "unknown loop event {e:?}: expected one of {}",
                    LOOP_EVENT_TYPES.join(", ")
                ))
            }
            Fault::TranscriptRejects { event: Some(e), .. }
                if !RECORDED_EVENT_TYPES.contains(&e.as_str()) =>
            {
                Some(format!(
                    "unknown recorded loop event {e:?}: expected one of {}",
                    RECORDED_EVENT_TYPES.join(", ")
                ))
            }
            _ => None,
        }
    }

    /// Why this fault aims past anything a run of the scenario can reach, if it does: a turn
    /// the scenario does not have, a model call no answer is left for, a response or send
    /// beyond the client's request budget. Such a fault never fires and the run passes
    /// without it, so the loader refuses it.
    pub fn unreachable(&self, reach: &Reach) -> Option<String> {
        match self {
            Fault::Interrupt { turn, .. } | Fault::ClientCrash { turn, .. }
                if u64::from(*turn) > reach.turns =>
            {
                Some(format!(
                    "turn = {turn} names a turn that does not exist: the scenario has {} turn(s)",
                    reach.turns
                ))
            }
            Fault::ProviderStream { call, .. } | Fault::ProviderError { call, .. }
                if u64::from(*call) >= reach.calls =>
            {
                Some(format!(
                    "call = {call} names a model call that is never answered: calls count from 0, and the scenario answers calls 0..{} ({})",
                    reach.calls, reach.calls_from
                ))
            }
            Fault::DropConnection { response, .. } | Fault::ServerStream { response, .. }
                if reach.responses.is_some_and(|r| *response > r) =>
            {
                Some(format!(
                    "response = {response} names a response no run reaches: the client's request budget allows at most {} ({})",
                    reach.responses.unwrap_or(0),
                    reach.responses_from
                ))
            }
            Fault::BusyOnSend { send }
            | Fault::ShuttingDownOnSend { send, .. }
            | Fault::ApprovalPendingOnSend { send, .. }
            | Fault::BusyOwnRun { send }
            | Fault::ApprovalPendingInBand { send, .. }
                if reach.responses.is_some_and(|r| *send > r) =>
            {
                Some(format!(
                    "send = {send} names a send no run reaches: the client's request budget allows at most {} ({})",
                    reach.responses.unwrap_or(0),
                    reach.responses_from
                ))
            }
            _ => None,
        }
    }

    /// The fault as a TOML inline table, `{ kind = "…", … }`.
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        self.serialize(toml::ser::ValueSerializer::new(&mut s))
            .expect("a fault serialises");
        s
    }

    /// A copy with every time and index made smaller by `f` (shrinking), or `None` if nothing
    /// in it can shrink.
    pub fn shrunk(&self, f: impl Fn(u64) -> u64) -> Option<Fault> {
        let f = &f;
        let mut g = self.clone();
        // Every field that can shrink does, all at once.
        let mut times: Vec<&mut u64> = Vec::new();
        let mut counts: Vec<&mut u32> = Vec::new();
        let mut whens: Vec<(&mut When, bool)> = Vec::new();
        match &mut g {
            Fault::DropConnection { after_frame, .. } => times.push(after_frame),
            Fault::ServerStream { frame, .. } | Fault::ProviderStream { frame, .. } => {
                times.push(frame)
            }
            Fault::Latency { when, max_ms } => {
                whens.push((when, false));
                times.push(max_ms);
            }
            Fault::Partition {
                when, duration_ms, ..
            }
            | Fault::Hold {
                when, duration_ms, ..
            } => {
                whens.push((when, false));
                times.push(duration_ms);
            }
            Fault::Crash {
                when,
                restart_after_ms,
                ..
            } => {
                whens.push((when, false));
                times.extend(restart_after_ms.as_mut());
            }
            Fault::UserAbort { when, .. } => whens.push((when, true)),
            Fault::ToolHang {
                execution,
                abort_after_ms,
            } => {
                counts.push(execution);
                times.extend(abort_after_ms.as_mut());
            }
            Fault::ToolGarbage { execution, .. } => counts.push(execution),
            Fault::ListenerThrows { nth, .. } | Fault::TranscriptRejects { nth, .. } => {
                counts.extend(nth.as_mut())
            }
            Fault::Interrupt {
                after_chunk,
                after_ms,
                ..
            } => {
                counts.extend(after_chunk.as_mut());
                times.extend(after_ms.as_mut());
            }
            Fault::ProviderError { .. }
            | Fault::BusyOnSend { .. }
            | Fault::ShuttingDownOnSend { .. }
            | Fault::ApprovalPendingOnSend { .. }
            | Fault::StaleApproval { .. }
            | Fault::RunStreamFail { .. }
            | Fault::RunReadFail { .. }
            | Fault::BusyOwnRun { .. }
            | Fault::ApprovalPendingInBand { .. }
            | Fault::ClientCrash { .. } => {}
        }
        let mut changed = false;
        for t in times {
            if let Some(n) = smaller(*t, f) {
                *t = n;
                changed = true;
            }
        }
        for c in counts {
            if let Some(n) = smaller_count(*c, f) {
                *c = n;
                changed = true;
            }
        }
        for (w, nth_too) in whens {
            if let Some(n) = w.shrunk(f, nth_too) {
                *w = n;
                changed = true;
            }
        }
        (changed && g.problem().is_none()).then_some(g)
    }
}

/// A fault's optional `Retry-After` keys, as the trace line writes them.
fn write_retry_after(
    f: &mut fmt::Formatter<'_>,
    retry_after_s: Option<u64>,
    retry_after_date: bool,
    retry_after_broken: Option<DateField>,
) -> fmt::Result {
    retry_after_s.map_or(Ok(()), |r| write!(f, " retry_after_s={r}"))?;
    if retry_after_date {
        f.write_str(" retry_after_date=true")?;
    }
    retry_after_broken.map_or(Ok(()), |b| write!(f, " retry_after_broken={}", b.as_str()))
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The fault's keys without braces and quotes: `drop_connection response=1 after_frame=4`.
        f.write_str(self.kind())?;
        match self {
            Fault::DropConnection {
                response,
                after_frame,
            } => write!(f, " response={response} after_frame={after_frame}"),
            Fault::ServerStream {
                response,
                frame,
                action,
            } => write!(
                f,
                " response={response} frame={frame} action={}",
                action.as_str()
            ),
            Fault::ProviderStream {
                call,
                frame,
                action,
            } => write!(f, " call={call} frame={frame} action={}", action.as_str()),
            Fault::ProviderError {
                call,
                status,
                retry_after_s,
                ..
            } => {
                write!(f, " call={call} status={status}")?;
                retry_after_s.map_or(Ok(()), |r| write!(f, " retry_after_s={r}"))
            }
            Fault::Latency { when, max_ms } => write!(f, " max_ms={max_ms} {when}"),
            Fault::Partition {
                between,
                when,
                duration_ms,
            }
            | Fault::Hold {
                between,
                when,
                duration_ms,
            } => write!(
                f,
                " between={},{} duration_ms={duration_ms} {when}",
                between[0], between[1]
            ),
            Fault::Crash {
                host,
                when,
                restart_after_ms,
            } => match restart_after_ms {
                Some(r) => write!(f, " host={host} {when} restart_after_ms={r}"),
                None => write!(f, " host={host} {when} restart=at-heal"),
            },
            Fault::UserAbort { when, reason } => write!(
                f,
                " {when} reason={}",
                reason.unwrap_or(AbortReason::User).as_str()
            ),
            Fault::ToolHang {
                execution,
                abort_after_ms,
            } => {
                write!(f, " execution={execution}")?;
                abort_after_ms.map_or(Ok(()), |a| write!(f, " abort_after_ms={a}"))
            }
            Fault::ToolGarbage { execution, value } => {
                write!(f, " execution={execution} value={}", value.as_str())
            }
            Fault::ListenerThrows { event, nth, how } => write!(
                f,
                " event={} nth={} how={}",
                event.as_deref().unwrap_or("any"),
                nth.map_or("every".to_string(), |n| n.to_string()),
                how.as_str()
            ),
            Fault::TranscriptRejects { event, nth } => write!(
                f,
                " event={} nth={}",
                event.as_deref().unwrap_or("any"),
                nth.unwrap_or(1)
            ),
            Fault::BusyOnSend { send } | Fault::BusyOwnRun { send } => write!(f, " send={send}"),
            Fault::ShuttingDownOnSend {
                send,
                retry_after_s,
                retry_after_date,
                retry_after_broken,
            } => {
                write!(f, " send={send}")?;
                write_retry_after(f, *retry_after_s, *retry_after_date, *retry_after_broken)
            }
            Fault::ApprovalPendingOnSend {
                send, tool_call_id, ..
            }
            | Fault::ApprovalPendingInBand {
                send, tool_call_id, ..
            } => write!(f, " send={send} tool_call_id={tool_call_id}"),
            Fault::StaleApproval {
                conversation,
                tool_call_id,
                ..
            } => write!(
                f,
                " conversation={conversation} tool_call_id={tool_call_id}"
            ),
            Fault::RunStreamFail {
                times,
                retry_after_s,
                retry_after_date,
                retry_after_broken,
            } => {
                write!(f, " times={times}")?;
                write_retry_after(f, *retry_after_s, *retry_after_date, *retry_after_broken)
            }
            Fault::RunReadFail { times } => write!(f, " times={times}"),
            Fault::Interrupt {
                turn,
                during,
                after_chunk,
                after_ms,
            } => {
                write!(f, " turn={turn} during={}", during.as_str())?;
                after_chunk.map_or(Ok(()), |n| write!(f, " after_chunk={n}"))?;
                after_ms.map_or(Ok(()), |n| write!(f, " after_ms={n}"))
            }
            Fault::ClientCrash {
                turn,
                at,
                after_chunk,
            } => {
                write!(f, " turn={turn} at={}", at.as_str())?;
                after_chunk.map_or(Ok(()), |n| write!(f, " after_chunk={n}"))
            }
        }
    }
}
