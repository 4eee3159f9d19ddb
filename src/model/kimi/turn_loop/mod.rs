//! The Kimi Code stateless agent turn loop, as a faithful, pure model (kimi-loop.md).
//!
//! The loop runs one user turn: call the model, run the tools it named (overlapping those
//! whose resource accesses do not conflict), feed the results back, and repeat until the model
//! stops or a limit is hit. It owns no session, transport, permissions UI or compaction: those
//! belong to the host ([`host`]). Everything it needs is injected — the model ([`Llm`], or a
//! [`ChatProvider`] through [`StreamingLlm`]), tools ([`ExecutableTool`]), hooks
//! ([`LoopHooks`]), the event path ([`EventDispatch`]), time ([`Clock`]), randomness
//! ([`LoopPrng`]) and interrupts ([`AbortSignal`]) — so the same code runs under turmoil and on
//! tokio. See docs/agent-loop.md.
//!
//! Module map:
//! - [`run_turn`](mod@run_turn): the turn loop; [`input`]: what a turn is given.
//! - [`step`] — one provider step, stop-reason normalisation, projection fallbacks.
//! - [`tool_call`] — the tool batch lifecycle, unexecuted calls, grace timeout.
//! - [`scheduler`], [`access`] — conflict-aware execution scheduling.
//! - [`retry`] — `chatWithRetry`.
//! - [`events`] — recorded and live events, the dispatcher.
//! - [`llm`], [`provider`] — the model seams and the stream adapter.
//! - [`tool`], [`hooks`], [`result`], [`args`], [`schema`] — tool and hook surfaces.
//! - [`abort`], [`clock`], [`log`], [`errors`], [`types`] — the small stuff.
//! - [`host`] — a simulated host: transcript, message rebuild, compaction retry.

pub mod abort;
pub mod access;
pub mod args;
pub mod bugs;
pub mod classify;
pub mod clock;
pub mod errors;
pub mod events;
pub mod hooks;
pub mod host;
pub mod input;
pub mod llm;
pub mod log;
pub mod provider;
pub mod result;
pub mod retry;
pub mod run_turn;
pub mod scheduler;
pub mod schema;
pub mod step;
pub mod tool;
pub mod tool_call;
pub mod types;

pub use abort::{AbortController, AbortSignal};
pub use access::{FileOperation, ToolAccesses, ToolResourceAccess};
pub use bugs::LoopBugs;
pub use clock::{Clock, LoopPrng, PortClock, TokioClock};
pub use errors::{AbortError, KimiError, LoopError, ProviderError, ProviderErrorKind, StatusClass};
pub use events::{
    EventDispatch, LiveListener, LoopEvent, LoopEventDispatcher, LoopLiveOnlyEvent,
    LoopRecordedEvent, TranscriptSink,
};
pub use hooks::LoopHooks;
pub use input::{RunTurnInput, message_builder};
pub use llm::{ChatParams, ChatResponse, ChatStreamSink, Llm};
pub use provider::{ChatProvider, ChatRequest, StreamingLlm};
pub use result::{ExecutableToolResult, ToolOutput, ToolResult};
pub use run_turn::run_turn;
pub use tool::{ExecutableTool, RunnableToolExecution, ToolExecuteContext, ToolExecution};
pub use types::{
    ContentPart, FinishReason, Message, StepStopReason, TokenUsage, ToolCall, TurnResult,
    TurnStopReason,
};
