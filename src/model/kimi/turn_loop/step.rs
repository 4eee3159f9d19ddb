//! One provider step (kimi-loop.md §3.3 A–C, §4.1, §4.7 `turn-step.ts`): the hooks around the
//! step, the atomic step envelope, the model call with its projection fallbacks, immediate
//! usage accounting, and the hand-off to the tool batch.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;

use super::clock::LoopPrng;
use super::errors::{LoopError, ProviderErrorKind, StatusClass};
use super::events::{
    ContentPartEvent, DeltaEvent, EventDispatch, LoopLiveOnlyEvent, LoopRecordedEvent,
    StepBeginEvent, StepEndEvent, ToolCallDeltaEvent,
};
use super::hooks::{AfterStepContext, StepHookContext};
use super::input::{MessageBuilder, RunTurnInput};
use super::llm::{ChatResponse, ChatStreamSink, Projection, RequestLogFields, RequestTrace};
use super::log::LogLevel;
use super::provider::{is_image_format_error, is_recoverable_request_structure_error};
use super::retry::{ChatWithRetryInput, chat_with_retry};
use super::tool::{SharedTool, tool_spec};
use super::tool_call::{StepEnv, record_unexecuted_tool_calls, run_tool_call_batch};
use super::types::{ContentPart, FinishReason, Message, StepStopReason, ToolSpec};

/// Turn-level state a step updates: counters, usage, the latest trace, sticky projection.
pub(crate) struct TurnState {
    pub steps: u32,
    pub usage: super::types::TokenUsage,
    pub active_step: Option<u32>,
    pub trace: RequestTrace,
    /// `None` = normal; only ever moves forward to degraded, then stripped.
    pub sticky: Option<Projection>,
}

/// `deriveStepStopReason` (kimi-loop.md §4.1).
pub fn derive_step_stop_reason(
    provider_finish_reason: Option<FinishReason>,
    has_tool_calls: bool,
) -> StepStopReason {
    match provider_finish_reason {
        Some(FinishReason::Truncated) => StepStopReason::MaxTokens,
        Some(FinishReason::Filtered) => StepStopReason::Filtered,
        Some(FinishReason::Paused) => StepStopReason::Paused,
        Some(FinishReason::Other) => StepStopReason::Unknown,
        Some(FinishReason::Completed) | None if has_tool_calls => StepStopReason::ToolUse,
        Some(FinishReason::Completed) | None => StepStopReason::EndTurn,
        Some(FinishReason::ToolCalls) if has_tool_calls => StepStopReason::ToolUse,
        Some(FinishReason::ToolCalls) => StepStopReason::Unknown,
    }
}

/// The streaming callbacks of one step: deltas go out live, completed parts are recorded.
struct StepSink<'a> {
    dispatcher: &'a Arc<dyn EventDispatch>,
    prng: &'a LoopPrng,
    turn_id: &'a str,
    step: u32,
    step_uuid: &'a str,
}

impl ChatStreamSink for StepSink<'_> {
    fn on_text_delta(&self, delta: &str) {
        self.dispatcher
            .publish(LoopLiveOnlyEvent::TextDelta(DeltaEvent {
                delta: delta.to_owned(),
            }));
    }

    fn on_think_delta(&self, delta: &str) {
        self.dispatcher
            .publish(LoopLiveOnlyEvent::ThinkingDelta(DeltaEvent {
                delta: delta.to_owned(),
            }));
    }

    fn on_tool_call_delta(&self, delta: ToolCallDeltaEvent) {
        self.dispatcher
            .publish(LoopLiveOnlyEvent::ToolCallDelta(delta));
    }

    fn on_part<'a>(&'a self, part: ContentPart) -> BoxFuture<'a, Result<(), LoopError>> {
        Box::pin(async move {
            self.dispatcher
                .record(LoopRecordedEvent::ContentPart(ContentPartEvent {
                    uuid: self.prng.uuid_v4(),
                    turn_id: self.turn_id.to_owned(),
                    step: self.step,
                    step_uuid: self.step_uuid.to_owned(),
                    part,
                }))
                .await
        })
    }
}

async fn build_checked(
    input: &RunTurnInput,
    builder: &MessageBuilder,
) -> Result<Vec<Message>, LoopError> {
    input.signal.throw_if_aborted()?;
    let messages = builder().await?;
    input.signal.throw_if_aborted()?;
    Ok(messages)
}

fn builder_for(input: &RunTurnInput, projection: Option<Projection>) -> &MessageBuilder {
    let fallback = match projection {
        Some(Projection::MediaDegraded) => input.build_messages_media_degraded.as_ref(),
        Some(Projection::MediaStripped) => input.build_messages_media_stripped.as_ref(),
        Some(Projection::Strict) => input.build_messages_strict.as_ref(),
        None => None,
    };
    fallback.unwrap_or(&input.build_messages)
}

fn is_request_too_large(error: &LoopError) -> bool {
    matches!(
        error.provider().map(|provider| provider.kind),
        Some(ProviderErrorKind::Status {
            class: StatusClass::RequestTooLarge,
            ..
        })
    )
}

struct ChatSetup<'a> {
    input: &'a RunTurnInput,
    sink: &'a StepSink<'a>,
    tools: &'a [ToolSpec],
    trace: &'a RequestTrace,
    step: u32,
    step_uuid: &'a str,
}

impl ChatSetup<'_> {
    async fn attempt(
        &self,
        messages: Vec<Message>,
        projection: Option<Projection>,
    ) -> Result<ChatResponse, LoopError> {
        let input = self.input;
        chat_with_retry(ChatWithRetryInput {
            llm: input.llm.as_ref(),
            messages,
            tools: self.tools.to_vec(),
            signal: &input.signal,
            sink: self.sink,
            request_log_fields: RequestLogFields {
                projection,
                ..RequestLogFields::default()
            },
            trace: self.trace,
            turn_id: &input.turn_id,
            step: self.step,
            step_uuid: self.step_uuid,
            max_attempts: input.max_retry_attempts,
            dispatcher: input.dispatcher.as_ref(),
            clock: input.clock.as_ref(),
            prng: &input.prng,
            log: input.log.as_ref(),
            bugs: input.bugs,
        })
        .await
    }

    /// Resend once with a fallback projection (its own full `chatWithRetry`).
    async fn resend(&self, projection: Projection) -> Result<ChatResponse, LoopError> {
        let builder = builder_for(self.input, Some(projection));
        let messages = build_checked(self.input, builder).await?;
        self.attempt(messages, Some(projection)).await
    }
}

/// The provider-rejection fallbacks (kimi-loop.md §4.7): one resend each, never looped.
async fn chat_with_fallbacks(
    setup: &ChatSetup<'_>,
    state: &mut TurnState,
    messages: Vec<Message>,
) -> Result<ChatResponse, LoopError> {
    let input = setup.input;
    let current = state.sticky;
    let error = match setup.attempt(messages, current).await {
        Ok(response) => return Ok(response),
        Err(error) => error,
    };
    let has_degraded = input.build_messages_media_degraded.is_some();
    let has_stripped = input.build_messages_media_stripped.is_some();
    let stripped = Some(Projection::MediaStripped);
    if is_request_too_large(&error) {
        if current == stripped || (current.is_some() && !has_stripped) {
            return Err(error);
        }
        if current == Some(Projection::MediaDegraded) {
            let response = setup.resend(Projection::MediaStripped).await?;
            state.sticky = stripped;
            return Ok(response);
        }
        if !has_degraded {
            return Err(error);
        }
        return match setup.resend(Projection::MediaDegraded).await {
            Ok(response) => {
                state.sticky = Some(Projection::MediaDegraded);
                Ok(response)
            }
            Err(degraded_error)
                if has_stripped
                    && (is_request_too_large(&degraded_error)
                        || is_image_format_error(&degraded_error)) =>
            {
                let response = setup.resend(Projection::MediaStripped).await?;
                state.sticky = stripped;
                Ok(response)
            }
            Err(degraded_error) => Err(degraded_error),
        };
    }
    if is_image_format_error(&error) {
        if current == stripped || !has_stripped {
            return Err(error);
        }
        let response = setup.resend(Projection::MediaStripped).await?;
        state.sticky = stripped;
        return Ok(response);
    }
    if input.build_messages_strict.is_some() && is_recoverable_request_structure_error(&error) {
        // Not sticky: the next step starts from the normal projection again.
        return setup.resend(Projection::Strict).await;
    }
    Err(error)
}

fn tool_table(input: &RunTurnInput) -> Vec<SharedTool> {
    match &input.build_tools {
        Some(build) => build(),
        None => input.tools.clone(),
    }
}

/// What a finished step hands back to `run_turn`.
pub(crate) struct StepOutcome {
    /// The stop reason `run_turn` acts on.
    pub reason: StepStopReason,
    /// This step's usage (for `shouldContinueAfterStop`).
    pub usage: super::types::TokenUsage,
}

/// The step after `step.begin`: what the model call and the tool phase need.
struct OpenStep {
    tools: Vec<SharedTool>,
    messages: Vec<Message>,
    step_uuid: String,
    trace: RequestTrace,
}

/// `beforeStep`, the tool table and messages, then `step.begin` and `onRequestTrace`.
async fn open_step(
    input: &RunTurnInput,
    state: &mut TurnState,
    hook_context: StepHookContext<'_>,
) -> Result<OpenStep, LoopError> {
    let step = hook_context.step_number;
    if let Some(decision) = input.hooks.before_step(hook_context).await?
        && decision.block
    {
        let reason = decision
            .reason
            .unwrap_or_else(|| format!("Step {step} was blocked"));
        return Err(LoopError::plain(reason));
    }
    input.signal.throw_if_aborted()?;
    // kimi-loop.md §9.16 (#1369): the tool table is evaluated after `beforeStep`.
    let tools = tool_table(input);
    let messages = builder_for(input, state.sticky)().await?;
    input.signal.throw_if_aborted()?;

    let step_uuid = input.prng.uuid_v4();
    input
        .dispatcher
        .record(LoopRecordedEvent::StepBegin(StepBeginEvent {
            uuid: step_uuid.clone(),
            turn_id: input.turn_id.clone(),
            step,
        }))
        .await?;
    let trace = RequestTrace::new();
    state.trace = trace.clone();
    if let Some(observe) = &input.on_request_trace {
        observe(&trace);
    }
    Ok(OpenStep {
        tools,
        messages,
        step_uuid,
        trace,
    })
}

/// The tool phase (kimi-loop.md §4.1 post-adjustments 1–3): returns the effective reason.
async fn run_tools(
    env: &StepEnv<'_>,
    response: &ChatResponse,
    tools: &[SharedTool],
    usage_stops_turn: bool,
) -> Result<StepStopReason, LoopError> {
    let has_calls = !response.tool_calls.is_empty();
    let derived = derive_step_stop_reason(response.provider_finish_reason, has_calls);
    if derived == StepStopReason::ToolUse {
        if usage_stops_turn || run_tool_call_batch(env, &response.tool_calls, tools).await? {
            return Ok(StepStopReason::EndTurn);
        }
    } else if has_calls
        && matches!(
            derived,
            StepStopReason::Paused | StepStopReason::Unknown | StepStopReason::MaxTokens
        )
    {
        record_unexecuted_tool_calls(env, &response.tool_calls).await?;
    }
    // A `filtered` response's calls vanish on purpose (kimi-loop.md §4.1 item 3).
    Ok(derived)
}

fn step_env<'a>(input: &'a RunTurnInput, step: u32, open: &'a OpenStep) -> StepEnv<'a> {
    StepEnv {
        turn_id: &input.turn_id,
        step,
        step_uuid: &open.step_uuid,
        signal: &input.signal,
        llm: input.llm.as_ref(),
        hooks: input.hooks.as_ref(),
        dispatcher: &input.dispatcher,
        clock: &input.clock,
        log: &input.log,
        trace_id: open.trace.trace_id(),
        describe_missing_tool: input.describe_missing_tool.as_deref(),
        bugs: input.bugs,
    }
}

/// `executeLoopStep`.
pub(crate) async fn execute_loop_step(
    input: &RunTurnInput,
    state: &mut TurnState,
    step: u32,
) -> Result<StepOutcome, LoopError> {
    let hook_context = StepHookContext {
        turn_id: &input.turn_id,
        step_number: step,
        signal: &input.signal,
        llm: input.llm.as_ref(),
    };
    let open = open_step(input, state, hook_context).await?;
    let sink = StepSink {
        dispatcher: &input.dispatcher,
        prng: &input.prng,
        turn_id: &input.turn_id,
        step,
        step_uuid: &open.step_uuid,
    };
    let specs: Vec<ToolSpec> = open
        .tools
        .iter()
        .map(|tool| tool_spec(tool.as_ref()))
        .collect();
    let setup = ChatSetup {
        input,
        sink: &sink,
        tools: &specs,
        trace: &open.trace,
        step,
        step_uuid: &open.step_uuid,
    };
    let response = chat_with_fallbacks(&setup, state, open.messages.clone()).await?;

    // kimi-loop.md §1 contract 6: usage is recorded right after the model call returns.
    state.usage = state.usage.add(&response.usage);
    let usage_stops_turn = match &input.record_step_usage {
        Some(record) => record(response.usage).await?.is_some_and(|d| d.stop_turn),
        None => false,
    };
    let env = step_env(input, step, &open);
    let effective = run_tools(&env, &response, &open.tools, usage_stops_turn).await?;
    input.signal.throw_if_aborted()?;
    let end = step_end_event(
        input,
        step,
        &open.step_uuid,
        &response,
        effective,
        &open.trace,
    );
    input
        .dispatcher
        .record(LoopRecordedEvent::StepEnd(end))
        .await?;
    let reason = close_step(input, hook_context, &response, effective).await;
    Ok(StepOutcome {
        reason,
        usage: response.usage,
    })
}

/// After `step.end`: the timing log and `afterStep` (whose errors are swallowed,
/// kimi-loop.md §2.5). Returns the reason `run_turn` acts on.
async fn close_step(
    input: &RunTurnInput,
    hook_context: StepHookContext<'_>,
    response: &ChatResponse,
    effective: StepStopReason,
) -> StepStopReason {
    if let Some(timing) = &response.stream_timing {
        // Choice: the payload of the `llm response` info log.
        input.log.log(
            LogLevel::Info,
            "llm response",
            json!({
                "turnStep": format!("{}.{}", input.turn_id, hook_context.step_number),
                "model": input.llm.model_name(),
                "firstTokenLatencyMs": timing.first_token_latency_ms,
                "streamDurationMs": timing.stream_duration_ms,
            }),
        );
    }
    let after = input
        .hooks
        .after_step(AfterStepContext {
            step: hook_context,
            usage: response.usage,
            stop_reason: effective,
        })
        .await;
    match after {
        Ok(Some(decision)) if decision.stop_turn && effective == StepStopReason::ToolUse => {
            StepStopReason::EndTurn
        }
        _ => effective,
    }
}

fn step_end_event(
    input: &RunTurnInput,
    step: u32,
    step_uuid: &str,
    response: &ChatResponse,
    effective: StepStopReason,
    trace: &RequestTrace,
) -> StepEndEvent {
    let provider = response.provider_finish_reason;
    // kimi-loop.md §3.2: the diagnostic rule.
    let unremarkable = (provider == Some(FinishReason::Completed)
        && effective == StepStopReason::EndTurn)
        || (provider == Some(FinishReason::ToolCalls) && effective == StepStopReason::ToolUse);
    let timing = response.stream_timing;
    StepEndEvent {
        uuid: step_uuid.to_owned(),
        turn_id: input.turn_id.clone(),
        step,
        usage: response.usage,
        finish_reason: effective,
        llm_first_token_latency_ms: timing.map(|t| t.first_token_latency_ms),
        llm_stream_duration_ms: timing.map(|t| t.stream_duration_ms),
        llm_request_build_ms: timing.and_then(|t| t.request_build_ms),
        llm_server_first_token_ms: timing.and_then(|t| t.server_first_token_ms),
        llm_server_decode_ms: timing.and_then(|t| t.server_decode_ms),
        llm_client_consume_ms: timing.and_then(|t| t.client_consume_ms),
        message_id: response.message_id.clone(),
        trace_id: trace.trace_id().or_else(|| response.trace_id.clone()),
        provider_finish_reason: if unremarkable { None } else { provider },
        raw_finish_reason: if unremarkable {
            None
        } else {
            response.raw_finish_reason.clone()
        },
    }
}
