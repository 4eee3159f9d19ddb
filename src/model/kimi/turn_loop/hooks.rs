//! `LoopHooks` (kimi-loop.md §2.5). Every hook is optional: the default methods return `None`,
//! which the loop treats exactly like an absent hook.

use futures::future::BoxFuture;
use serde_json::Value;

use super::abort::AbortSignal;
use super::errors::LoopError;

use super::result::ExecutableToolResult;
use super::tool::{RunnableToolExecution, SharedTool};
use super::types::{StepStopReason, TerminalStopReason, TokenUsage, ToolCall};

/// `LoopStepHookContext`.
///
/// Type-level lock (kimi-loop.md §7.14): no `model_name` (use `llm`).
///
/// ```compile_fail
/// fn f(c: loopsim::model::kimi::turn_loop::hooks::StepHookContext<'_>) { let _ = c.model_name; }
/// ```
#[derive(Clone, Copy)]
pub struct StepHookContext<'a> {
    /// The turn id.
    pub turn_id: &'a str,
    /// 1-based within this `run_turn` call.
    pub step_number: u32,
    /// The turn's signal.
    pub signal: &'a AbortSignal,
    /// The model.
    pub llm: &'a dyn super::llm::Llm,
}

/// `LoopAfterStepContext`.
#[derive(Clone, Copy)]
pub struct AfterStepContext<'a> {
    /// The step context.
    pub step: StepHookContext<'a>,
    /// This step's usage.
    pub usage: TokenUsage,
    /// The effective stop reason.
    pub stop_reason: StepStopReason,
}

/// `LoopStoppedStepContext`.
#[derive(Clone, Copy)]
pub struct StoppedStepContext<'a> {
    /// The step context.
    pub step: StepHookContext<'a>,
    /// This step's usage.
    pub usage: TokenUsage,
    /// The terminal reason.
    pub stop_reason: TerminalStopReason,
}

/// `ToolExecutionHookContext`.
///
/// Type-level lock (kimi-loop.md §7.14): no `input` (use `args`).
///
/// ```compile_fail
/// fn f(c: loopsim::model::kimi::turn_loop::hooks::ToolHookContext<'_>) { let _ = c.input; }
/// ```
#[derive(Clone, Copy)]
pub struct ToolHookContext<'a> {
    /// The step context.
    pub step: StepHookContext<'a>,
    /// The request trace id.
    pub trace_id: Option<&'a str>,
    /// This call.
    pub tool_call: &'a ToolCall,
    /// The whole provider batch of this response.
    pub tool_calls: &'a [ToolCall],
    /// The tool, if known (never set for finalize).
    pub tool: Option<&'a SharedTool>,
    /// The arguments (effective ones for authorize/finalize).
    pub args: &'a Value,
}

/// `ResolvedToolExecutionHookContext`.
#[derive(Clone, Copy)]
pub struct AuthorizeContext<'a> {
    /// The tool context.
    pub tool: ToolHookContext<'a>,
    /// The resolved execution.
    pub execution: &'a RunnableToolExecution,
}

/// `FinalizeToolResultContext`.
#[derive(Clone, Copy)]
pub struct FinalizeContext<'a> {
    /// The tool context (`tool` is `None`).
    pub tool: ToolHookContext<'a>,
    /// The coerced, un-normalised result.
    pub result: &'a ExecutableToolResult,
}

/// `beforeStep` result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BeforeStepDecision {
    /// Block the step (the turn fails).
    pub block: bool,
    /// The error message; default `Step <N> was blocked`.
    pub reason: Option<String>,
}

/// `afterStep` result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AfterStepDecision {
    /// Turn a `tool_use` step into `end_turn` for the turn.
    pub stop_turn: bool,
}

/// `shouldContinueAfterStop` result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContinueDecision {
    /// Only `true` runs another step.
    pub continue_turn: bool,
}

/// `prepareToolExecution` result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrepareDecision {
    /// Block the call.
    pub block: bool,
    /// The block text; default `Tool call "<name>" was blocked`.
    pub reason: Option<String>,
    /// A raw synthetic result (coerced) used instead of running.
    pub synthetic_result: Option<Value>,
    /// Passed to `execute` as `metadata` unless authorize overrides it.
    pub execution_metadata: Option<Value>,
    /// Rewritten arguments (revalidated).
    pub updated_args: Option<Value>,
}

/// `authorizeToolExecution` result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthorizeDecision {
    /// Block the call.
    pub block: bool,
    /// The block text; default `Tool call "<name>" was blocked`.
    pub reason: Option<String>,
    /// A raw synthetic result (coerced) used instead of running.
    pub synthetic_result: Option<Value>,
    /// Passed to `execute` as `metadata`.
    pub execution_metadata: Option<Value>,
}

/// Hook result future.
pub type HookFuture<'a, T> = BoxFuture<'a, Result<Option<T>, LoopError>>;

/// `LoopHooks`.
pub trait LoopHooks: Send + Sync {
    /// Before each step, before `step.begin`. Block or error → the turn fails.
    fn before_step<'a>(&'a self, _ctx: StepHookContext<'a>) -> HookFuture<'a, BeforeStepDecision> {
        Box::pin(async { Ok(None) })
    }

    /// After `step.end`. Errors are swallowed.
    fn after_step<'a>(&'a self, _ctx: AfterStepContext<'a>) -> HookFuture<'a, AfterStepDecision> {
        Box::pin(async { Ok(None) })
    }

    /// After every non-`tool_use` step. Errors propagate.
    fn should_continue_after_stop<'a>(
        &'a self,
        _ctx: StoppedStepContext<'a>,
    ) -> HookFuture<'a, ContinueDecision> {
        Box::pin(async { Ok(None) })
    }

    /// Per runnable call, in provider order, before its `tool.call`.
    fn prepare_tool_execution<'a>(
        &'a self,
        _ctx: ToolHookContext<'a>,
    ) -> HookFuture<'a, PrepareDecision> {
        Box::pin(async { Ok(None) })
    }

    /// Per runnable call, after `resolve_execution`, before `tool.call`.
    fn authorize_tool_execution<'a>(
        &'a self,
        _ctx: AuthorizeContext<'a>,
    ) -> HookFuture<'a, AuthorizeDecision> {
        Box::pin(async { Ok(None) })
    }

    /// Per pending result, serially in provider order, before its `tool.result`. Returns a raw
    /// replacement result (coerced), or `None` to keep it.
    fn finalize_tool_result<'a>(&'a self, _ctx: FinalizeContext<'a>) -> HookFuture<'a, Value> {
        Box::pin(async { Ok(None) })
    }
}

/// Hooks that do nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl LoopHooks for NoHooks {}
