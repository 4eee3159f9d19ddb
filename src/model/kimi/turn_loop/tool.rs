//! The tool seam (kimi-loop.md §2.4): an [`ExecutableTool`] resolves its arguments into a
//! [`RunnableToolExecution`] (with the resource accesses the scheduler needs), or into an error
//! result directly. Arguments are captured by `resolve_execution`, never passed to `execute`.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::abort::AbortSignal;
use super::access::ToolAccesses;
use super::errors::LoopError;
use super::events::{EventDispatch, LoopLiveOnlyEvent, ToolProgressEvent, ToolUpdate};
use super::types::ToolSpec;

/// Runs the tool. Returns the tool's raw result (coerced by the loop, kimi-loop.md §4.3), or
/// an error: abort-shaped errors become the abort text, others `Tool "<name>" failed: ...`.
pub type ToolRun =
    Box<dyn FnOnce(ToolExecuteContext) -> BoxFuture<'static, Result<Value, LoopError>> + Send>;

/// `RunnableToolExecution`.
pub struct RunnableToolExecution {
    /// Resource accesses; `None` means `ToolAccesses::all()` (fully serialised).
    pub accesses: Option<ToolAccesses>,
    /// A UI display object, recorded on `tool.call`.
    pub display: Option<Value>,
    /// A description, recorded on `tool.call` if non-empty.
    pub description: Option<String>,
    /// Stop the batch after this call (the later calls are skipped).
    pub stop_batch_after_this: bool,
    /// The host permission layer's rule string.
    pub approval_rule: String,
    /// The run.
    pub execute: ToolRun,
}

impl RunnableToolExecution {
    /// A runnable with defaults (`all` accesses, no display, no description).
    pub fn new(
        approval_rule: impl Into<String>,
        execute: impl FnOnce(ToolExecuteContext) -> BoxFuture<'static, Result<Value, LoopError>>
        + Send
        + 'static,
    ) -> Self {
        Self {
            accesses: None,
            display: None,
            description: None,
            stop_batch_after_this: false,
            approval_rule: approval_rule.into(),
            execute: Box::new(execute),
        }
    }

    /// With accesses.
    pub fn with_accesses(mut self, accesses: ToolAccesses) -> Self {
        self.accesses = Some(accesses);
        self
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// With a display object.
    pub fn with_display(mut self, display: Value) -> Self {
        self.display = Some(display);
        self
    }

    /// Stopping the batch after this call.
    pub fn stopping_batch(mut self) -> Self {
        self.stop_batch_after_this = true;
        self
    }
}

/// `ToolExecution`: a runnable, or an error result returned directly (raw; it is coerced).
pub enum ToolExecution {
    /// Run it.
    Runnable(RunnableToolExecution),
    /// Do not run; use this result (`{isError:true, output}` in the well-formed case).
    Error(Value),
}

/// `ExecutableTool`: kosong `Tool` plus `resolveExecution`.
///
/// Type-level lock (kimi-loop.md §7.14): no `input_schema` (use `parameters`).
///
/// ```compile_fail
/// fn f(t: &dyn loopsim::model::kimi::turn_loop::ExecutableTool) { let _ = t.input_schema(); }
/// ```
pub trait ExecutableTool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// The description the model sees.
    fn description(&self) -> &str {
        ""
    }
    /// The JSON Schema of the arguments.
    fn parameters(&self) -> Value;
    /// Resolve the (validated) arguments. An `Err` named `PathSecurityError` is reported with
    /// its message verbatim; any other as `Tool "<name>" failed to resolve execution: ...`.
    fn resolve_execution<'a>(
        &'a self,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolExecution, LoopError>>;
}

/// The spec the model sees for a tool.
pub fn tool_spec(tool: &dyn ExecutableTool) -> ToolSpec {
    ToolSpec {
        name: tool.name().to_owned(),
        description: tool.description().to_owned(),
        parameters: tool.parameters(),
    }
}

/// A shared tool.
pub type SharedTool = Arc<dyn ExecutableTool>;

/// `ExecutableToolContext` (without `args`: they were captured by `resolve_execution`).
///
/// Type-level lock (kimi-loop.md §7.14): no `args`.
///
/// ```compile_fail
/// fn f(c: &loopsim::model::kimi::turn_loop::ToolExecuteContext) { let _ = &c.args; }
/// ```
#[derive(Clone)]
pub struct ToolExecuteContext {
    /// The turn id.
    pub turn_id: String,
    /// The provider tool-call id.
    pub tool_call_id: String,
    /// The request trace id.
    pub trace_id: Option<String>,
    /// `executionMetadata` from the authorize (or prepare) hook.
    pub metadata: Option<Value>,
    /// The turn's abort signal. Honour it: a tool that ignores it is cut off by the 2 s grace
    /// timeout once the signal fires (kimi-loop.md §4.5).
    pub signal: AbortSignal,
    /// Progress reporting.
    pub updates: ToolUpdates,
}

/// `onUpdate`: dispatches `tool.progress` unless the signal has fired.
#[derive(Clone)]
pub struct ToolUpdates {
    tool_call_id: String,
    signal: AbortSignal,
    dispatcher: Arc<dyn EventDispatch>,
}

impl ToolUpdates {
    pub(crate) fn new(
        tool_call_id: String,
        signal: AbortSignal,
        dispatcher: Arc<dyn EventDispatch>,
    ) -> Self {
        Self {
            tool_call_id,
            signal,
            dispatcher,
        }
    }

    /// Report one update. Dropped once the signal is aborted.
    pub fn update(&self, update: ToolUpdate) {
        if self.signal.aborted() {
            return;
        }
        self.dispatcher
            .publish(LoopLiveOnlyEvent::ToolProgress(ToolProgressEvent {
                tool_call_id: self.tool_call_id.clone(),
                update,
            }));
    }
}
