//! `runTurn` (kimi-loop.md §2.6, §3.3, `run-turn.ts`): turn-level convergence. Abort and
//! max-steps are checked at the top of every iteration (the safe points); usage totals are
//! kept across steps; `shouldContinueAfterStop` may extend the turn after a non-tool stop;
//! every failure is reported exactly once as `turn.interrupted`.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::abort::AbortSignal;
use super::clock::{Clock, LoopPrng};
use super::errors::LoopError;
use super::events::{
    EventDispatch, InterruptCause, InterruptReason, LoopLiveOnlyEvent, TurnInterruptedEvent,
};
use super::hooks::{LoopHooks, NoHooks, StepHookContext, StoppedStepContext};
use super::llm::{Llm, RequestTrace};
use super::log::{LoopLog, NoopLog};
use super::step::{TurnState, execute_loop_step};
use super::tool::SharedTool;
use super::tool_call::DescribeMissingTool;
use super::types::{Message, TokenUsage, TurnResult, TurnStopReason};

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
    pub bugs: super::bugs::LoopBugs,
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
            bugs: super::bugs::LoopBugs::default(),
        }
    }
}

/// Run one turn. `Ok` for terminal stops and aborts (`aborted` is returned, never raised);
/// `Err` for max-steps exhaustion (the `loop.max_steps_exceeded` `KimiError`) and every other
/// failure, after exactly one `turn.interrupted`.
///
/// Choice (open question 5, untested upstream): an abort that lands after the final
/// `step.end`, with no `shouldContinueAfterStop` hook that checks the signal, returns the
/// terminal reason, not `aborted` — the reference code does the same.
pub async fn run_turn(input: &RunTurnInput) -> Result<TurnResult, LoopError> {
    let mut state = TurnState {
        steps: 0,
        usage: TokenUsage::empty(),
        active_step: None,
        trace: RequestTrace::new(),
        sticky: None,
    };
    match turn_loop(input, &mut state).await {
        Ok(stop_reason) => Ok(TurnResult {
            stop_reason,
            steps: state.steps,
            usage: state.usage,
        }),
        Err(error) => interrupt(input, &state, error),
    }
}

async fn turn_loop(
    input: &RunTurnInput,
    state: &mut TurnState,
) -> Result<TurnStopReason, LoopError> {
    loop {
        input.signal.throw_if_aborted()?;
        if let Some(max_steps) = input.max_steps.filter(|&max| max > 0)
            && state.steps >= max_steps
        {
            return Err(LoopError::max_steps(max_steps));
        }
        state.steps += 1;
        let step = state.steps;
        state.active_step = Some(step);
        let outcome = execute_loop_step(input, state, step).await?;
        state.active_step = None;
        let Some(terminal) = outcome.reason.terminal() else {
            continue;
        };
        let context = StoppedStepContext {
            step: StepHookContext {
                turn_id: &input.turn_id,
                step_number: step,
                signal: &input.signal,
                llm: input.llm.as_ref(),
            },
            usage: outcome.usage,
            stop_reason: terminal,
        };
        let decision = input.hooks.should_continue_after_stop(context).await?;
        if !decision.is_some_and(|decision| decision.continue_turn) {
            return Ok(terminal.into());
        }
    }
}

/// The catch-all of `runTurn`: abort-shaped errors, or any error once the signal fired,
/// become an `aborted` result; max-steps and everything else are re-raised.
fn interrupt(
    input: &RunTurnInput,
    state: &TurnState,
    error: LoopError,
) -> Result<TurnResult, LoopError> {
    let user_cancelled = error.is_user_cancellation()
        || input
            .signal
            .reason()
            .is_some_and(|reason| reason.user_cancelled);
    let aborted = error.is_abort() || input.signal.aborted();
    let max_steps = error.code() == Some(super::errors::MAX_STEPS_EXCEEDED_CODE);
    let (reason, cause) = if aborted {
        let cause = if user_cancelled {
            InterruptCause::UserCancelled
        } else {
            InterruptCause::Aborted
        };
        (InterruptReason::Aborted, cause)
    } else if max_steps {
        (InterruptReason::MaxSteps, InterruptCause::MaxSteps)
    } else {
        (InterruptReason::Error, InterruptCause::Error)
    };
    input
        .dispatcher
        .publish(LoopLiveOnlyEvent::TurnInterrupted(TurnInterruptedEvent {
            reason,
            attempted_steps: state.steps,
            active_step: state.active_step,
            message: (!aborted).then(|| error.message().to_owned()),
            interrupt_reason: cause,
            trace_id: state.trace.trace_id(),
        }));
    if aborted {
        return Ok(TurnResult {
            stop_reason: TurnStopReason::Aborted,
            steps: state.steps,
            usage: state.usage,
        });
    }
    Err(error)
}
