//! `RunTurnInput` (kimi-loop.md §2.6): everything one turn is given, and the callbacks it
//! carries: the message builders (the normal projection and its fallbacks), the per-step tool
//! table, `recordStepUsage` and `onRequestTrace`.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::abort::AbortSignal;
use super::bugs::LoopBugs;
use super::clock::{Clock, LoopPrng};
use super::errors::LoopError;
use super::events::EventDispatch;
use super::hooks::{LoopHooks, NoHooks};
use super::llm::{Llm, RequestTrace};
use super::log::{LoopLog, NoopLog};
use super::tool::SharedTool;
use super::tool_call::DescribeMissingTool;
use super::types::{Message, TokenUsage};

/// `LoopMessageBuilder`: builds the latest model-visible messages; called once per step.
pub type MessageBuilder =
    Arc<dyn Fn() -> BoxFuture<'static, Result<Vec<Message>, LoopError>> + Send + Sync>;

/// A [`MessageBuilder`] from a plain function.
pub fn message_builder(build: impl Fn() -> Vec<Message> + Send + Sync + 'static) -> MessageBuilder {
    let build = Arc::new(build);
    Arc::new(move || {
        let build = Arc::clone(&build);
        Box::pin(async move { Ok(build()) })
    })
}

/// `buildTools()`: the step's tool table, evaluated after `beforeStep`.
pub type ToolTableBuilder = Arc<dyn Fn() -> Vec<SharedTool> + Send + Sync>;

/// `recordStepUsage` result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepUsageDecision {
    /// On a `tool_use` response: run no tools, write no tool records, end the step `end_turn`.
    pub stop_turn: bool,
}

/// `recordStepUsage(usage)`: called right after the model call returns. Errors propagate.
pub type StepUsageRecorder = Arc<
    dyn Fn(TokenUsage) -> BoxFuture<'static, Result<Option<StepUsageDecision>, LoopError>>
        + Send
        + Sync,
>;

/// `onRequestTrace(trace)`: called right after `step.begin` with the step's trace state.
pub type RequestTraceObserver = Arc<dyn Fn(&RequestTrace) + Send + Sync>;

/// `RunTurnInput` (kimi-loop.md §2.6), plus the injected clock and PRNG.
///
/// Type-level locks (kimi-loop.md §7.14): none of the legacy fields exist.
///
/// ```compile_fail
/// fn f(i: &loopsim::model::kimi::turn_loop::RunTurnInput) { let _ = &i.context; }
/// ```
/// ```compile_fail
/// fn f(i: &loopsim::model::kimi::turn_loop::RunTurnInput) { let _ = &i.emit; }
/// ```
pub struct RunTurnInput {
    /// The turn id.
    pub turn_id: String,
    /// The abort signal.
    pub signal: AbortSignal,
    /// The model.
    pub llm: Arc<dyn Llm>,
    /// The normal projection.
    pub build_messages: MessageBuilder,
    /// The only event path.
    pub dispatcher: Arc<dyn EventDispatch>,
    /// Timers (retry sleeps, the grace timeout).
    pub clock: Arc<dyn Clock>,
    /// Step/part uuids and retry jitter.
    pub prng: Arc<LoopPrng>,
    /// Logs. Default: [`NoopLog`].
    pub log: Arc<dyn LoopLog>,
    /// Hooks. Default: [`NoHooks`].
    pub hooks: Arc<dyn LoopHooks>,
    /// The static tool table (ignored when `build_tools` is set).
    pub tools: Vec<SharedTool>,
    /// The per-step tool table.
    pub build_tools: Option<ToolTableBuilder>,
    /// Fallback: the strict projection.
    pub build_messages_strict: Option<MessageBuilder>,
    /// Fallback: older media degraded.
    pub build_messages_media_degraded: Option<MessageBuilder>,
    /// Fallback: all media stripped.
    pub build_messages_media_stripped: Option<MessageBuilder>,
    /// Overrides the unknown-tool text.
    pub describe_missing_tool: Option<Arc<DescribeMissingTool>>,
    /// `maxSteps`: `None` or `Some(0)` means no limit.
    pub max_steps: Option<u32>,
    /// `maxRetryAttempts`: `None` means 10.
    pub max_retry_attempts: Option<u32>,
    /// `recordStepUsage`.
    pub record_step_usage: Option<StepUsageRecorder>,
    /// `onRequestTrace`.
    pub on_request_trace: Option<RequestTraceObserver>,
    /// Planted defects for the harness's oracle tests; `Default` is the faithful loop.
    pub bugs: LoopBugs,
}

impl RunTurnInput {
    /// The required fields; everything optional starts absent.
    pub fn new(
        turn_id: impl Into<String>,
        signal: AbortSignal,
        llm: Arc<dyn Llm>,
        build_messages: MessageBuilder,
        dispatcher: Arc<dyn EventDispatch>,
        clock: Arc<dyn Clock>,
        prng: Arc<LoopPrng>,
    ) -> Self {
        Self {
            turn_id: turn_id.into(),
            signal,
            llm,
            build_messages,
            dispatcher,
            clock,
            prng,
            log: Arc::new(NoopLog),
            hooks: Arc::new(NoHooks),
            tools: Vec::new(),
            build_tools: None,
            build_messages_strict: None,
            build_messages_media_degraded: None,
            build_messages_media_stripped: None,
            describe_missing_tool: None,
            max_steps: None,
            max_retry_attempts: None,
            record_step_usage: None,
            on_request_trace: None,
            bugs: LoopBugs::default(),
        }
    }
}
