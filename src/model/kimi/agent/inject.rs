//! The agent host's injection points (the vocabulary; the harness implements [`AgentFaults`]
//! from a scenario's fault plan). The agent consults the hooks where a fault can happen: after
//! each event it observes (a user abort), when the live listener hears a loop event (the
//! listener throws), when a tool execution starts (it hangs, or returns garbage). An agent with
//! no plan gets [`NoAgentFaults`].

use serde::Deserialize;
use serde_json::{Value, json};

use crate::model::kimi::turn_loop::AbortError;

/// How the simulated user aborts a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AbortReason {
    /// A deliberate user cancellation (`UserCancellationError`, the Esc key).
    User,
    /// A plain abort with the default reason (e.g. the host shutting the turn down).
    Signal,
}

impl AbortReason {
    pub fn as_str(self) -> &'static str {
        match self {
            AbortReason::User => "user",
            AbortReason::Signal => "signal",
        }
    }

    /// The abort reason the signal carries.
    pub fn error(self) -> AbortError {
        match self {
            AbortReason::User => AbortError::user_cancellation(),
            AbortReason::Signal => AbortError::default_reason(),
        }
    }
}

/// What a tool returns instead of a tool result (kimi-loop.md §4.3 `coerceToolResult` cases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Garbage {
    /// `undefined`: "returned no result."
    Undefined,
    /// `42`: "returned a number instead of a tool result."
    Number,
    /// `true`: "returned a boolean instead of a tool result."
    Boolean,
    /// A bare string: "returned a string instead of a tool result."
    String,
    /// A bare array: "missing or malformed \"output\" field."
    Array,
    /// An object without `output`: "missing or malformed \"output\" field."
    NoOutput,
}

impl Garbage {
    pub const ALL: [Garbage; 6] = [
        Garbage::Undefined,
        Garbage::Number,
        Garbage::Boolean,
        Garbage::String,
        Garbage::Array,
        Garbage::NoOutput,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Garbage::Undefined => "undefined",
            Garbage::Number => "number",
            Garbage::Boolean => "boolean",
            Garbage::String => "string",
            Garbage::Array => "array",
            Garbage::NoOutput => "no_output",
        }
    }

    /// The raw value the tool returns.
    pub fn value(self) -> Value {
        match self {
            Garbage::Undefined => Value::Null,
            Garbage::Number => json!(42),
            Garbage::Boolean => json!(true),
            Garbage::String => json!("done"),
            Garbage::Array => json!([{"type": "text", "text": "done"}]),
            Garbage::NoOutput => json!({"result": "done"}),
        }
    }
}

/// How the live listener fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListenerFault {
    /// Returns an error (the rejected promise of an async listener).
    Error,
    /// Unwinds (the synchronous throw). Raised with `resume_unwind`, so no panic hook runs:
    /// a contained throw is not a crash of the simulation.
    Panic,
}

impl ListenerFault {
    pub fn as_str(self) -> &'static str {
        match self {
            ListenerFault::Error => "error",
            ListenerFault::Panic => "panic",
        }
    }
}

/// What a tool execution does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolAct {
    /// Its normal work.
    Run,
    /// Never finishes and ignores the abort signal; if `abort_after_ms` is set, the simulated
    /// user aborts the turn that long after the hang began (the grace timeout then ends it).
    Hang { abort_after_ms: Option<u64> },
    /// Does its work, then returns this instead of a tool result.
    Garbage(Garbage),
}

/// Fault hooks of the agent host. Every method is called in a deterministic order (the
/// agent's own), so counting inside an implementation is deterministic.
pub trait AgentFaults: Send + Sync + 'static {
    /// Called after each event the agent reports (by its trace name, e.g. `loop_tool_start`).
    /// `Some` aborts the running turn now.
    fn abort_on_event(&self, event: &str) -> Option<AbortReason>;
    /// Times (ms of simulated time) at which to ask [`abort_at`](Self::abort_at), ascending.
    fn abort_times(&self) -> Vec<u64>;
    /// At one of [`abort_times`](Self::abort_times): `Some` aborts the running turn, if any.
    fn abort_at(&self, now_ms: u64) -> Option<AbortReason>;
    /// Before the live listener returns from hearing a loop event of type `event_type`
    /// (`tool.result`, `text.delta`, ...): `Some` makes it fail that way.
    fn listener(&self, event_type: &str) -> Option<ListenerFault>;
    /// Whether the host's store rejects this append of a recorded event of `event_type`.
    fn transcript_rejects(&self, event_type: &str) -> bool;
    /// When tool execution `execution` (1-based, in start order across the run) begins.
    fn tool(&self, execution: u32, tool: &str, tool_call_id: &str) -> ToolAct;
}

/// Hooks that never inject anything.
pub struct NoAgentFaults;

impl AgentFaults for NoAgentFaults {
    fn abort_on_event(&self, _: &str) -> Option<AbortReason> {
        None
    }
    fn abort_times(&self) -> Vec<u64> {
        Vec::new()
    }
    fn abort_at(&self, _: u64) -> Option<AbortReason> {
        None
    }
    fn listener(&self, _: &str) -> Option<ListenerFault> {
        None
    }
    fn transcript_rejects(&self, _: &str) -> bool {
        false
    }
    fn tool(&self, _: u32, _: &str, _: &str) -> ToolAct {
        ToolAct::Run
    }
}
