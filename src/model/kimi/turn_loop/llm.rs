//! The narrow model surface the loop calls (kimi-loop.md §2.7 `llm.ts`). The loop never builds
//! provider requests itself: an [`Llm`] turns messages into one [`ChatResponse`], firing the
//! streaming callbacks of a [`ChatStreamSink`] on the way.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::abort::AbortSignal;
use super::errors::LoopError;
use super::events::ToolCallDeltaEvent;
use super::types::{
    ContentPart, FinishReason, Message, StreamTiming, TokenUsage, ToolCall, ToolSpec,
};

/// Which request this is, for logs (`requestLogFields.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// A loop step.
    Loop,
    /// A compaction request.
    Compaction,
}

/// A fallback message projection (kimi-loop.md §4.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Projection {
    /// Strict tool-exchange repair.
    Strict,
    /// Older media replaced by markers.
    MediaDegraded,
    /// All media replaced.
    MediaStripped,
}

/// `requestLogFields`: observability fields the LLM adapter logs with each request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestLogFields {
    /// `"<turnId>.<step>"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_step: Option<String>,
    /// `"<attempt>/<max>"`, from the second attempt on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<String>,
    /// Loop or compaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<RequestKind>,
    /// The fallback projection, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<Projection>,
    /// Messages dropped by a projection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_count: Option<u32>,
}

/// `LLMRequestTraceState`: a mutable trace id, reset and re-captured on every attempt. Cloning
/// shares the state, so the host's `onRequestTrace` can keep a handle.
#[derive(Debug, Clone, Default)]
pub struct RequestTrace {
    trace_id: Arc<Mutex<Option<String>>>,
}

impl RequestTrace {
    /// A trace with no id.
    pub fn new() -> Self {
        Self::default()
    }

    /// The captured id.
    pub fn trace_id(&self) -> Option<String> {
        self.trace_id.lock().expect("trace poisoned").clone()
    }

    /// Forget the id (before each attempt).
    pub fn reset(&self) {
        *self.trace_id.lock().expect("trace poisoned") = None;
    }

    /// Capture an id (`None` leaves it unset).
    pub fn capture(&self, trace_id: Option<&str>) {
        *self.trace_id.lock().expect("trace poisoned") = trace_id.map(str::to_owned);
    }
}

/// The streaming callbacks of `LLMChatParams`. Deltas are synchronous and live-only; completed
/// parts are recorded, so they are awaited and may fail (a transcript append failure).
///
/// Type-level lock (kimi-loop.md §7.14): no legacy `on_delta` / `on_content_part` callbacks.
///
/// ```compile_fail
/// fn f(s: &dyn loopsim::model::kimi::turn_loop::ChatStreamSink) { s.on_delta("x"); }
/// ```
pub trait ChatStreamSink: Send + Sync {
    /// `onTextDelta`.
    fn on_text_delta(&self, delta: &str);
    /// `onThinkDelta`.
    fn on_think_delta(&self, delta: &str);
    /// `onToolCallDelta`.
    fn on_tool_call_delta(&self, delta: ToolCallDeltaEvent);
    /// `onTextPart` / `onThinkPart`: one merged, completed block.
    fn on_part<'a>(&'a self, part: ContentPart) -> BoxFuture<'a, Result<(), LoopError>>;
}

/// `LLMChatParams`.
pub struct ChatParams<'a> {
    /// The model-visible messages (never the system prompt).
    pub messages: Vec<Message>,
    /// The step's tool table.
    pub tools: Vec<ToolSpec>,
    /// The turn's abort signal.
    pub signal: &'a AbortSignal,
    /// Observability fields.
    pub request_log_fields: RequestLogFields,
    /// The streaming callbacks.
    pub sink: &'a dyn ChatStreamSink,
    /// The trace state to capture into.
    pub trace: &'a RequestTrace,
}

/// `LLMChatResponse`. It carries no stop reason: the loop derives it (kimi-loop.md §4.1).
///
/// Type-level lock (kimi-loop.md §7.14): no `stop_reason`.
///
/// ```compile_fail
/// fn f(r: &loopsim::model::kimi::turn_loop::ChatResponse) { let _ = &r.stop_reason; }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatResponse {
    /// The tool calls, in provider order.
    pub tool_calls: Vec<ToolCall>,
    /// The normalised provider finish reason; `None` if the provider gave none.
    pub provider_finish_reason: Option<FinishReason>,
    /// The provider's raw reason.
    pub raw_finish_reason: Option<String>,
    /// The provider message id.
    pub message_id: Option<String>,
    /// The usage, passed through untouched.
    pub usage: TokenUsage,
    /// Stream timing, if the adapter measured it.
    pub stream_timing: Option<StreamTiming>,
    /// The provider trace id.
    pub trace_id: Option<String>,
}

/// `LLM.isRetryableError`.
pub type RetryClassifier = fn(&LoopError) -> bool;

/// `LLM`: the only source of model metadata and of the system prompt (kimi-loop.md §1
/// contract 2).
pub trait Llm: Send + Sync {
    /// The system prompt; the loop never puts it into the messages.
    fn system_prompt(&self) -> &str;
    /// The model name (logged).
    fn model_name(&self) -> &str;
    /// `isRetryableError`. `None` (the default) means the loop never retries.
    fn retry_classifier(&self) -> Option<RetryClassifier> {
        None
    }
    /// One model call.
    fn chat<'a>(&'a self, params: ChatParams<'a>)
    -> BoxFuture<'a, Result<ChatResponse, LoopError>>;
}
