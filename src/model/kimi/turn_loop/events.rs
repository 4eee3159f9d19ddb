//! Loop events and the dispatcher (kimi-loop.md §3).
//!
//! Recorded events (`step.begin`, `step.end`, `content.part`, `tool.call`, `tool.result`) are
//! appended to the transcript first and only then emitted live; if the append fails the live
//! emit is skipped and the error propagates into the loop. Live-only events are emitted
//! synchronously and never awaited. A live listener that fails (returns `Err` or panics) never
//! affects the turn.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::errors::LoopError;
use super::result::ToolResult;
use super::types::{ContentPart, StepStopReason, TokenUsage};

/// `step.begin` (recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepBeginEvent {
    /// Random UUIDv4 per step (from the seeded PRNG).
    pub uuid: String,
    /// The turn id.
    pub turn_id: String,
    /// 1-based step number.
    pub step: u32,
}

/// `step.end` (recorded). `uuid` equals the step's `step.begin` uuid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepEndEvent {
    /// The step's uuid.
    pub uuid: String,
    /// The turn id.
    pub turn_id: String,
    /// 1-based step number.
    pub step: u32,
    /// The response usage, exactly as given.
    pub usage: TokenUsage,
    /// The effective step stop reason.
    pub finish_reason: StepStopReason,
    /// Stream timing: first token latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_first_token_latency_ms: Option<u64>,
    /// Stream timing: duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_stream_duration_ms: Option<u64>,
    /// Stream timing: request build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_request_build_ms: Option<u64>,
    /// Stream timing: server first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_server_first_token_ms: Option<u64>,
    /// Stream timing: server decode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_server_decode_ms: Option<u64>,
    /// Stream timing: client consume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_client_consume_ms: Option<u64>,
    /// The provider message id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The request trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Diagnostic: the provider's normalised reason (kimi-loop.md §3.2 rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_finish_reason: Option<super::types::FinishReason>,
    /// Diagnostic: the provider's raw reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_finish_reason: Option<String>,
}

/// `content.part` (recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentPartEvent {
    /// A new random uuid per part.
    pub uuid: String,
    /// The turn id.
    pub turn_id: String,
    /// Step number.
    pub step: u32,
    /// The step's uuid.
    pub step_uuid: String,
    /// A text or think part.
    pub part: ContentPart,
}

/// `tool.call` (recorded). `uuid` and `tool_call_id` both equal the provider tool-call id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEvent {
    /// The provider tool-call id.
    pub uuid: String,
    /// The turn id.
    pub turn_id: String,
    /// Step number.
    pub step: u32,
    /// The step's uuid.
    pub step_uuid: String,
    /// The provider tool-call id.
    pub tool_call_id: String,
    /// The tool name.
    pub name: String,
    /// The parsed/effective arguments.
    pub args: Value,
    /// Non-empty description from the resolved execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// UI display object from the resolved execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<Value>,
    /// Provider extras, copied from the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extras: Option<Map<String, Value>>,
    /// The request trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// `tool.result` (recorded). No turn id, step or step uuid: linkage is via `parent_uuid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultEvent {
    /// Equals the tool-call id.
    pub parent_uuid: String,
    /// The tool-call id.
    pub tool_call_id: String,
    /// The normalised result.
    pub result: ToolResult,
    /// The request trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// Why a turn was interrupted (`LoopInterruptReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptReason {
    /// The signal fired or an abort-shaped error surfaced.
    Aborted,
    /// `maxSteps` was exhausted.
    MaxSteps,
    /// Any other error.
    Error,
}

/// `LoopInterruptCause`: the reason, with user cancellation told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptCause {
    /// A deliberate user cancellation.
    UserCancelled,
    /// Any other abort.
    Aborted,
    /// `maxSteps` was exhausted.
    MaxSteps,
    /// Any other error.
    Error,
}

/// `turn.interrupted` (live only, never persisted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptedEvent {
    /// The reason.
    pub reason: InterruptReason,
    /// The step counter.
    pub attempted_steps: u32,
    /// Present only if a step was executing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_step: Option<u32>,
    /// Present only for `max_steps` and `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Always present.
    pub interrupt_reason: InterruptCause,
    /// The most recent step's request trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// `step.retrying` (live only). No uuid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRetryingEvent {
    /// The turn id.
    pub turn_id: String,
    /// Step number.
    pub step: u32,
    /// The step's uuid.
    pub step_uuid: String,
    /// The attempt that failed (1-based).
    pub failed_attempt: u32,
    /// The attempt about to run.
    pub next_attempt: u32,
    /// The attempt budget.
    pub max_attempts: u32,
    /// The sleep before the next attempt.
    pub delay_ms: u64,
    /// `error.name`.
    pub error_name: String,
    /// `error.message`.
    pub error_message: String,
    /// The HTTP status, if the error has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
}

/// `tool.call.delta` (live only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallDeltaEvent {
    /// The tool-call id.
    pub tool_call_id: String,
    /// The tool name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A fragment of the raw arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_part: Option<String>,
}

/// `ToolUpdate.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolUpdateKind {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// Progress.
    Progress,
    /// Status.
    Status,
    /// Custom.
    Custom,
}

/// A tool's progress update (kimi-loop.md §2.4 `ToolUpdate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUpdate {
    /// The kind.
    pub kind: ToolUpdateKind,
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    /// Custom kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_kind: Option<String>,
    /// Custom data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_data: Option<Value>,
}

impl ToolUpdate {
    /// An update of a kind with text.
    pub fn text(kind: ToolUpdateKind, text: impl Into<String>) -> Self {
        Self {
            kind,
            text: Some(text.into()),
            percent: None,
            custom_kind: None,
            custom_data: None,
        }
    }

    /// A progress percentage.
    pub fn progress(percent: f64) -> Self {
        Self {
            kind: ToolUpdateKind::Progress,
            text: None,
            percent: Some(percent),
            custom_kind: None,
            custom_data: None,
        }
    }
}

/// `tool.progress` (live only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolProgressEvent {
    /// The tool-call id.
    pub tool_call_id: String,
    /// The update.
    pub update: ToolUpdate,
}

/// `text.delta` / `thinking.delta` payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeltaEvent {
    /// The fragment.
    pub delta: String,
}

/// `LoopRecordedEvent`: persisted first, then emitted live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum LoopRecordedEvent {
    /// `step.begin`.
    #[serde(rename = "step.begin")]
    StepBegin(StepBeginEvent),
    /// `step.end`.
    #[serde(rename = "step.end")]
    StepEnd(StepEndEvent),
    /// `content.part`.
    #[serde(rename = "content.part")]
    ContentPart(ContentPartEvent),
    /// `tool.call`.
    #[serde(rename = "tool.call")]
    ToolCall(ToolCallEvent),
    /// `tool.result`.
    #[serde(rename = "tool.result")]
    ToolResult(ToolResultEvent),
}

/// `LoopLiveOnlyEvent`: emitted synchronously, never persisted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum LoopLiveOnlyEvent {
    /// `turn.interrupted`.
    #[serde(rename = "turn.interrupted")]
    TurnInterrupted(TurnInterruptedEvent),
    /// `step.retrying`.
    #[serde(rename = "step.retrying")]
    StepRetrying(StepRetryingEvent),
    /// `text.delta`.
    #[serde(rename = "text.delta")]
    TextDelta(DeltaEvent),
    /// `thinking.delta`.
    #[serde(rename = "thinking.delta")]
    ThinkingDelta(DeltaEvent),
    /// `tool.call.delta`.
    #[serde(rename = "tool.call.delta")]
    ToolCallDelta(ToolCallDeltaEvent),
    /// `tool.progress`.
    #[serde(rename = "tool.progress")]
    ToolProgress(ToolProgressEvent),
}

/// `LoopEvent`: the closed union of the 11 documented variants.
// Events are built once and moved; boxing the recorded variant would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LoopEvent {
    /// A recorded event.
    Recorded(LoopRecordedEvent),
    /// A live-only event.
    Live(LoopLiveOnlyEvent),
}

impl LoopRecordedEvent {
    /// The event's `type` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::StepBegin(_) => "step.begin",
            Self::StepEnd(_) => "step.end",
            Self::ContentPart(_) => "content.part",
            Self::ToolCall(_) => "tool.call",
            Self::ToolResult(_) => "tool.result",
        }
    }
}

impl LoopLiveOnlyEvent {
    /// The event's `type` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::TurnInterrupted(_) => "turn.interrupted",
            Self::StepRetrying(_) => "step.retrying",
            Self::TextDelta(_) => "text.delta",
            Self::ThinkingDelta(_) => "thinking.delta",
            Self::ToolCallDelta(_) => "tool.call.delta",
            Self::ToolProgress(_) => "tool.progress",
        }
    }
}

impl LoopEvent {
    /// The event's `type` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Recorded(event) => event.type_name(),
            Self::Live(event) => event.type_name(),
        }
    }
}

/// `dispatchEvent`: the only event path the loop writes to (kimi-loop.md §1 contract 4).
pub trait EventDispatch: Send + Sync {
    /// Persist a recorded event, then publish it live. An `Err` propagates into the loop.
    fn record<'a>(&'a self, event: LoopRecordedEvent) -> BoxFuture<'a, Result<(), LoopError>>;
    /// Publish a live-only event. Never fails, never awaited.
    fn publish(&self, event: LoopLiveOnlyEvent);
}

/// The durable side: the host's transcript (`appendTranscriptRecord`).
pub trait TranscriptSink: Send + Sync {
    /// Append one recorded event. Not contained: a failure propagates into the loop.
    fn append<'a>(&'a self, event: &'a LoopRecordedEvent) -> BoxFuture<'a, Result<(), LoopError>>;
}

/// The live side (`emitLiveEvent`): UIs, traces. Failures are contained by the dispatcher.
pub trait LiveListener: Send + Sync {
    /// Hear one event. `Err` and panics are both swallowed.
    fn emit(&self, event: &LoopEvent) -> Result<(), String>;
}

/// `createLoopEventDispatcher({appendTranscriptRecord, emitLiveEvent})`.
#[derive(Clone)]
pub struct LoopEventDispatcher {
    transcript: Arc<dyn TranscriptSink>,
    live: Arc<dyn LiveListener>,
}

impl LoopEventDispatcher {
    /// A dispatcher over a transcript and a live listener.
    pub fn new(transcript: Arc<dyn TranscriptSink>, live: Arc<dyn LiveListener>) -> Self {
        Self { transcript, live }
    }

    fn emit_contained(&self, event: &LoopEvent) {
        // kimi-loop.md §3.1: a failing live listener is swallowed, whether it returns an error
        // (the rejected thenable) or panics (the synchronous throw).
        let live = &self.live;
        let _ignored = catch_unwind(AssertUnwindSafe(|| live.emit(event)));
    }
}

impl EventDispatch for LoopEventDispatcher {
    fn record<'a>(&'a self, event: LoopRecordedEvent) -> BoxFuture<'a, Result<(), LoopError>> {
        Box::pin(async move {
            self.transcript.append(&event).await?;
            self.emit_contained(&LoopEvent::Recorded(event));
            Ok(())
        })
    }

    fn publish(&self, event: LoopLiveOnlyEvent) {
        self.emit_contained(&LoopEvent::Live(event));
    }
}
