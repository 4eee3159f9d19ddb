//! The tool-call batch lifecycle (kimi-loop.md §3.3 B/B′, §4.2–§4.6 `tool-call.ts`).
//!
//! Preflight is pure. Preparation runs in provider order and records each `tool.call` before
//! handing the call to the scheduler, which starts it at once unless it conflicts. Results are
//! finalised and recorded strictly in provider order, whatever order the tools finish in.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use serde_json::{Value, json};

use super::abort::AbortSignal;
use super::access::ToolAccesses;
use super::args::parse_tool_call_arguments;
use super::clock::Clock;
use super::errors::LoopError;
use super::events::{EventDispatch, LoopRecordedEvent, ToolCallEvent, ToolResultEvent};
use super::hooks::{
    AuthorizeContext, AuthorizeDecision, FinalizeContext, LoopHooks, StepHookContext,
    ToolHookContext,
};
use super::llm::Llm;
use super::log::{LogLevel, LoopLog};
use super::result::{ExecutableToolResult, ToolResult, coerce_tool_result, normalize_tool_result};
use super::scheduler::{TaskStart, ToolScheduler};
use super::schema::validation_text;
use super::tool::{
    RunnableToolExecution, SharedTool, ToolExecuteContext, ToolExecution, ToolUpdates,
};
use super::types::ToolCall;

/// kimi-loop.md §4.5: `GRACE_TIMEOUT_MS`.
pub const GRACE_TIMEOUT_MS: u64 = 2000;

/// kimi-loop.md §4.2: `UNEXECUTED_TOOL_CALL_OUTPUT` (with an em dash, U+2014).
pub const UNEXECUTED_TOOL_CALL_OUTPUT: &str = "This tool call was not executed: the model response \
ended before tool execution could start (the provider stream was interrupted). Do not assume the \
tool ran \u{2014} re-issue the call if it is still needed.";

/// kimi-loop.md §4.4: the text of calls skipped after `stopBatchAfterThis`.
pub const SKIPPED_TOOL_OUTPUT: &str = "Tool skipped because a previous tool call stopped the turn.";

/// `describeMissingTool(name)`: overrides the unknown-tool text when it returns `Some`.
pub type DescribeMissingTool = dyn Fn(&str) -> Option<String> + Send + Sync;

/// `abortedToolOutput` (kimi-loop.md §4.5): the user-interrupt text for a user cancellation,
/// else `Tool "<name>" was aborted`.
pub fn aborted_tool_output(name: &str, signal: &AbortSignal) -> String {
    if signal.reason().is_some_and(|reason| reason.user_cancelled) {
        format!(
            "The user manually interrupted \"{name}\" (and anything else running at the same \
             time). This was a deliberate user action, not a system error, timeout, or capacity \
             limit. Do not retry automatically or guess at the cause \u{2014} wait for the \
             user's next instruction."
        )
    } else {
        format!("Tool \"{name}\" was aborted")
    }
}

/// kimi-loop.md §4.5: the grace-timeout text.
pub fn grace_timeout_output(name: &str) -> String {
    format!("Tool \"{name}\" aborted by grace timeout ({GRACE_TIMEOUT_MS}ms)")
}

/// What one step hands to its tool batch.
pub(crate) struct StepEnv<'a> {
    pub turn_id: &'a str,
    pub step: u32,
    pub step_uuid: &'a str,
    pub signal: &'a AbortSignal,
    pub llm: &'a dyn Llm,
    pub hooks: &'a dyn LoopHooks,
    pub dispatcher: &'a Arc<dyn EventDispatch>,
    pub clock: &'a Arc<dyn Clock>,
    pub log: &'a Arc<dyn LoopLog>,
    pub trace_id: Option<String>,
    pub describe_missing_tool: Option<&'a DescribeMissingTool>,
    pub bugs: super::bugs::LoopBugs,
}

impl StepEnv<'_> {
    fn hook_context(&self) -> StepHookContext<'_> {
        StepHookContext {
            turn_id: self.turn_id,
            step_number: self.step,
            signal: self.signal,
            llm: self.llm,
        }
    }

    fn tool_context<'c>(
        &'c self,
        call: &'c ToolCall,
        calls: &'c [ToolCall],
        tool: Option<&'c SharedTool>,
        args: &'c Value,
    ) -> ToolHookContext<'c> {
        ToolHookContext {
            step: self.hook_context(),
            trace_id: self.trace_id.as_deref(),
            tool_call: call,
            tool_calls: calls,
            tool,
            args,
        }
    }

    async fn record_call(
        &self,
        call: &ToolCall,
        args: &Value,
        description: Option<String>,
        display: Option<Value>,
    ) -> Result<(), LoopError> {
        self.dispatcher
            .record(LoopRecordedEvent::ToolCall(ToolCallEvent {
                uuid: call.id.clone(),
                turn_id: self.turn_id.to_owned(),
                step: self.step,
                step_uuid: self.step_uuid.to_owned(),
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                args: args.clone(),
                description,
                display,
                extras: call.extras.clone(),
                trace_id: self.trace_id.clone(),
            }))
            .await
    }

    async fn record_result(&self, call: &ToolCall, result: ToolResult) -> Result<(), LoopError> {
        self.dispatcher
            .record(LoopRecordedEvent::ToolResult(ToolResultEvent {
                parent_uuid: call.id.clone(),
                tool_call_id: call.id.clone(),
                result,
                trace_id: self.trace_id.clone(),
            }))
            .await
    }
}

/// The pure preflight verdict for one call.
enum Preflight {
    Rejected { args: Value, output: String },
    Runnable { tool: SharedTool, args: Value },
}

impl Preflight {
    fn args(&self) -> &Value {
        match self {
            Self::Rejected { args, .. } | Self::Runnable { args, .. } => args,
        }
    }
}

fn preflight(env: &StepEnv<'_>, call: &ToolCall, tools: &[SharedTool]) -> Preflight {
    let parsed = parse_tool_call_arguments(call.arguments.as_deref());
    let Some(tool) = tools.iter().find(|tool| tool.name() == call.name) else {
        let output = env
            .describe_missing_tool
            .and_then(|describe| describe(&call.name))
            .unwrap_or_else(|| format!("Tool \"{}\" not found", call.name));
        return Preflight::Rejected {
            args: parsed.data,
            output,
        };
    };
    if parsed.parse_failed {
        env.log.log(
            LogLevel::Debug,
            "tool args JSON parse failed",
            json!({ "toolName": call.name, "toolCallId": call.id, "error": parsed.error }),
        );
    }
    if let Some(errors) = validation_text(&tool.parameters(), &parsed.data) {
        return Preflight::Rejected {
            args: parsed.data,
            output: format!("Invalid args for tool \"{}\": {errors}", call.name),
        };
    }
    Preflight::Runnable {
        tool: Arc::clone(tool),
        args: parsed.data,
    }
}

enum Work {
    Resolved(ExecutableToolResult),
    Run {
        execution: RunnableToolExecution,
        metadata: Option<Value>,
    },
}

struct Prepared {
    args: Value,
    description: Option<String>,
    display: Option<Value>,
    stop_batch_after_this: bool,
    work: Work,
}

impl Prepared {
    fn resolved(args: Value, result: ExecutableToolResult) -> Self {
        Self {
            args,
            description: None,
            display: None,
            stop_batch_after_this: false,
            work: Work::Resolved(result),
        }
    }

    /// A synthetic result: coerced, and its `stopTurn` triggers `stopBatchAfterThis`.
    fn synthetic(args: Value, raw: &Value, name: &str) -> Self {
        let result = coerce_tool_result(raw, name);
        Self {
            stop_batch_after_this: result.stop_turn,
            ..Self::resolved(args, result)
        }
    }

    fn with_display(mut self, description: Option<String>, display: Option<Value>) -> Self {
        self.description = description;
        self.display = display;
        self
    }
}

fn error_payload(error: &LoopError) -> Value {
    json!({ "name": error.name(), "message": error.message() })
}

/// `resolveExecution(effectiveArgs)`: a `PathSecurityError` is reported verbatim without a
/// log; any other failure with the setup text and a warn log (kimi-loop.md §4.6).
async fn resolve(
    env: &StepEnv<'_>,
    call: &ToolCall,
    tool: &SharedTool,
    args: &Value,
) -> Result<ToolExecution, ExecutableToolResult> {
    let name = call.name.as_str();
    match tool.resolve_execution(args.clone()).await {
        Ok(execution) => Ok(execution),
        Err(error) if error.name() == "PathSecurityError" => {
            Err(ExecutableToolResult::error(error.message()))
        }
        Err(error) => {
            env.log.log(
                LogLevel::Warn,
                "tool execution setup failed",
                json!({ "toolName": name, "toolCallId": call.id, "error": error_payload(&error) }),
            );
            Err(ExecutableToolResult::error(format!(
                "Tool \"{name}\" failed to resolve execution: {}",
                error.message()
            )))
        }
    }
}

async fn prepare_runnable(
    env: &StepEnv<'_>,
    call: &ToolCall,
    calls: &[ToolCall],
    tool: &SharedTool,
    original_args: Value,
) -> Prepared {
    let name = call.name.as_str();
    let prepare_context = env.tool_context(call, calls, Some(tool), &original_args);
    let decision = match env.hooks.prepare_tool_execution(prepare_context).await {
        Ok(decision) => decision.unwrap_or_default(),
        Err(error) => {
            // kimi-loop.md §4.6: no log for a failing prepare hook.
            let text = if error.is_abort() || env.signal.aborted() {
                format!("Tool \"{name}\" was aborted during prepareToolExecution hook")
            } else {
                format!(
                    "prepareToolExecution hook failed for \"{name}\": {}",
                    error.message()
                )
            };
            return Prepared::resolved(original_args, ExecutableToolResult::error(text));
        }
    };
    let args = decision.updated_args.clone().unwrap_or(original_args);
    if decision.block {
        let reason = decision
            .reason
            .unwrap_or_else(|| format!("Tool call \"{name}\" was blocked"));
        return Prepared::resolved(args, ExecutableToolResult::error(reason));
    }
    if let Some(raw) = &decision.synthetic_result {
        return Prepared::synthetic(args, raw, name);
    }
    if let Some(errors) = validation_text(&tool.parameters(), &args) {
        let text =
            format!("Invalid args for tool \"{name}\" after prepareToolExecution hook: {errors}");
        return Prepared::resolved(args, ExecutableToolResult::error(text));
    }
    let execution = match resolve(env, call, tool, &args).await {
        Ok(execution) => execution,
        Err(result) => return Prepared::resolved(args, result),
    };
    let (description, display) = match &execution {
        ToolExecution::Runnable(runnable) => (
            runnable.description.clone().filter(|text| !text.is_empty()),
            runnable.display.clone(),
        ),
        ToolExecution::Error(_) => (None, None),
    };
    if env.signal.aborted() {
        let text = aborted_tool_output(name, env.signal);
        return Prepared::resolved(args, ExecutableToolResult::error(text))
            .with_display(description, display);
    }
    let runnable = match execution {
        ToolExecution::Error(raw) => return Prepared::synthetic(args, &raw, name),
        ToolExecution::Runnable(runnable) => runnable,
    };
    authorize(
        env,
        call,
        calls,
        tool,
        args,
        runnable,
        decision.execution_metadata,
    )
    .await
    .with_display(description, display)
}

async fn authorize(
    env: &StepEnv<'_>,
    call: &ToolCall,
    calls: &[ToolCall],
    tool: &SharedTool,
    args: Value,
    runnable: RunnableToolExecution,
    prepare_metadata: Option<Value>,
) -> Prepared {
    let name = call.name.as_str();
    let context = AuthorizeContext {
        tool: env.tool_context(call, calls, Some(tool), &args),
        execution: &runnable,
    };
    let decision = match env.hooks.authorize_tool_execution(context).await {
        Ok(decision) => decision.unwrap_or_default(),
        Err(error) => {
            let reason = if error.is_abort() || env.signal.aborted() {
                format!("Tool \"{name}\" was aborted during authorizeToolExecution hook")
            } else {
                format!(
                    "authorizeToolExecution hook failed for \"{name}\": {}",
                    error.message()
                )
            };
            AuthorizeDecision {
                block: true,
                reason: Some(reason),
                ..AuthorizeDecision::default()
            }
        }
    };
    if env.signal.aborted() {
        let text = aborted_tool_output(name, env.signal);
        return Prepared::resolved(args, ExecutableToolResult::error(text));
    }
    if decision.block {
        let reason = decision
            .reason
            .unwrap_or_else(|| format!("Tool call \"{name}\" was blocked"));
        return Prepared::resolved(args, ExecutableToolResult::error(reason));
    }
    if let Some(raw) = &decision.synthetic_result {
        return Prepared::synthetic(args, raw, name);
    }
    Prepared {
        args,
        description: None,
        display: None,
        stop_batch_after_this: runnable.stop_batch_after_this,
        work: Work::Run {
            metadata: decision.execution_metadata.or(prepare_metadata),
            execution: runnable,
        },
    }
}

/// `raceExecuteWithGraceTimeout` (kimi-loop.md §4.5): the sentinel arms a 2000 ms timer when
/// the abort fires and then *resolves* with the grace text, so it is not replaced by the
/// abort text. Without an abort a hanging tool hangs the turn: there is no per-tool timeout.
async fn race_execute_with_grace_timeout(
    execute: futures::future::BoxFuture<'static, Result<Value, LoopError>>,
    signal: &AbortSignal,
    clock: &dyn Clock,
    name: &str,
) -> Result<Value, LoopError> {
    let sentinel = async {
        signal.cancelled().await;
        clock.sleep(GRACE_TIMEOUT_MS).await;
        ExecutableToolResult::error(grace_timeout_output(name)).to_value()
    };
    tokio::select! {
        biased;
        outcome = execute => outcome,
        grace = sentinel => Ok(grace),
    }
}

fn execution_task(
    env: &StepEnv<'_>,
    call: &ToolCall,
    execution: RunnableToolExecution,
    metadata: Option<Value>,
) -> TaskStart<ExecutableToolResult> {
    let name = call.name.clone();
    let tool_call_id = call.id.clone();
    let signal = env.signal.clone();
    let clock = Arc::clone(env.clock);
    let log = Arc::clone(env.log);
    let context = ToolExecuteContext {
        turn_id: env.turn_id.to_owned(),
        tool_call_id: call.id.clone(),
        trace_id: env.trace_id.clone(),
        metadata,
        signal: signal.clone(),
        updates: ToolUpdates::new(call.id.clone(), signal.clone(), Arc::clone(env.dispatcher)),
    };
    let run = execution.execute;
    Box::new(move || {
        Box::pin(async move {
            if signal.aborted() {
                return ExecutableToolResult::error(aborted_tool_output(&name, &signal));
            }
            let outcome =
                race_execute_with_grace_timeout(run(context), &signal, clock.as_ref(), &name).await;
            match outcome {
                Ok(value) => coerce_tool_result(&value, &name),
                // Choice: a rejection after the signal fired counts as an abort even if the
                // tool's error is not abort-shaped (the facts only pin the abort-shaped case).
                Err(error) if error.is_abort() || signal.aborted() => {
                    ExecutableToolResult::error(aborted_tool_output(&name, &signal))
                }
                Err(error) => {
                    log.log(
                        LogLevel::Warn,
                        "tool execution failed",
                        json!({
                            "toolName": name,
                            "toolCallId": tool_call_id,
                            "error": error_payload(&error),
                        }),
                    );
                    ExecutableToolResult::error(format!(
                        "Tool \"{name}\" failed: {}",
                        error.message()
                    ))
                }
            }
        })
    })
}

enum Slot {
    Resolved(ExecutableToolResult),
    Task(super::scheduler::TaskId),
}

struct PendingCall<'c> {
    call: &'c ToolCall,
    args: Value,
    slot: Slot,
}

type Scheduler = Mutex<ToolScheduler<ExecutableToolResult>>;

fn lock(scheduler: &Scheduler) -> std::sync::MutexGuard<'_, ToolScheduler<ExecutableToolResult>> {
    scheduler.lock().expect("scheduler poisoned")
}

/// The preparation loop, in provider order: each call's `tool.call` is recorded, then the
/// call is handed to the scheduler (which may start it at once). Returns the pending results
/// and whether a `stopBatchAfterThis` stopped the batch.
async fn prepare_batch<'c>(
    env: &StepEnv<'_>,
    calls: &'c [ToolCall],
    preflights: Vec<Preflight>,
    scheduler: &Scheduler,
) -> Result<(Vec<PendingCall<'c>>, bool), LoopError> {
    let mut stop_turn = false;
    let mut pending: Vec<PendingCall<'c>> = Vec::with_capacity(calls.len());
    for (call, verdict) in calls.iter().zip(preflights) {
        if stop_turn {
            // kimi-loop.md §4.4: preflight args, no display, no hooks but finalize.
            let args = verdict.args().clone();
            env.record_call(call, &args, None, None).await?;
            let skipped = ExecutableToolResult::error(SKIPPED_TOOL_OUTPUT);
            pending.push(PendingCall {
                call,
                args,
                slot: Slot::Resolved(skipped),
            });
            continue;
        }
        let prepared = match verdict {
            Preflight::Rejected { args, output } => {
                Prepared::resolved(args, ExecutableToolResult::error(output))
            }
            Preflight::Runnable { tool, args } => {
                prepare_runnable(env, call, calls, &tool, args).await
            }
        };
        stop_turn |= prepared.stop_batch_after_this;
        env.record_call(call, &prepared.args, prepared.description, prepared.display)
            .await?;
        let slot = match prepared.work {
            Work::Resolved(result) => Slot::Resolved(result),
            Work::Run {
                execution,
                metadata,
            } => {
                let accesses = execution.accesses.clone().unwrap_or_else(ToolAccesses::all);
                let mut start = Some(execution_task(env, call, execution, metadata));
                let id = poll_fn(|cx| {
                    let start = start.take().expect("task added once");
                    Poll::Ready(lock(scheduler).add(accesses.clone(), start, cx))
                })
                .await;
                Slot::Task(id)
            }
        };
        pending.push(PendingCall {
            call,
            args: prepared.args,
            slot,
        });
    }
    Ok((pending, stop_turn))
}

/// The result loop, in provider order: await, finalise, record. Returns the batch stop-turn.
async fn collect_results(
    env: &StepEnv<'_>,
    calls: &[ToolCall],
    pending: Vec<PendingCall<'_>>,
    scheduler: &Scheduler,
    mut stop_turn: bool,
) -> Result<bool, LoopError> {
    for PendingCall { call, args, slot } in pending {
        let result = match slot {
            Slot::Resolved(result) => result,
            Slot::Task(id) => {
                poll_fn(|_| {
                    lock(scheduler)
                        .take_result(id)
                        .map_or(Poll::Pending, Poll::Ready)
                })
                .await
            }
        };
        let (finalized, stops) = finalize(env, call, calls, &args, result).await;
        stop_turn |= stops;
        env.record_result(call, normalize_tool_result(&finalized))
            .await?;
    }
    Ok(stop_turn)
}

/// The planted defect [`LoopBugs::results_in_completion_order`](super::bugs::LoopBugs): each
/// result is finalised and recorded as soon as any tool finishes, the earliest-finishing first
/// (ties in provider order), instead of strictly in provider order.
async fn collect_results_as_they_finish(
    env: &StepEnv<'_>,
    calls: &[ToolCall],
    pending: Vec<PendingCall<'_>>,
    scheduler: &Scheduler,
    mut stop_turn: bool,
) -> Result<bool, LoopError> {
    let mut waiting: Vec<(PendingCall<'_>, Option<ExecutableToolResult>)> =
        pending.into_iter().map(|p| (p, None)).collect();
    while !waiting.is_empty() {
        let index = poll_fn(|_| {
            let mut scheduler = lock(scheduler);
            for (index, (call, done)) in waiting.iter_mut().enumerate() {
                match &mut call.slot {
                    Slot::Resolved(result) => *done = Some(result.clone()),
                    Slot::Task(id) => {
                        if let Some(result) = scheduler.take_result(*id) {
                            *done = Some(result);
                        }
                    }
                }
                if done.is_some() {
                    return Poll::Ready(index);
                }
            }
            Poll::Pending
        })
        .await;
        let (PendingCall { call, args, .. }, result) = waiting.remove(index);
        let result = result.expect("finished");
        let (finalized, stops) = finalize(env, call, calls, &args, result).await;
        stop_turn |= stops;
        env.record_result(call, normalize_tool_result(&finalized))
            .await?;
    }
    Ok(stop_turn)
}

/// `runToolCallBatch`: returns the batch's `stopTurn`.
pub(crate) async fn run_tool_call_batch(
    env: &StepEnv<'_>,
    calls: &[ToolCall],
    tools: &[SharedTool],
) -> Result<bool, LoopError> {
    let preflights: Vec<Preflight> = calls
        .iter()
        .map(|call| preflight(env, call, tools))
        .collect();
    let scheduler: Scheduler = Mutex::new(ToolScheduler::with_bugs(env.bugs));
    let main = async {
        let (pending, stop_turn) = prepare_batch(env, calls, preflights, &scheduler).await?;
        if env.bugs.results_in_completion_order {
            return collect_results_as_they_finish(env, calls, pending, &scheduler, stop_turn)
                .await;
        }
        collect_results(env, calls, pending, &scheduler, stop_turn).await
    };
    let outcome = drive_with(&scheduler, main).await;
    if outcome.is_err() {
        // kimi-loop.md §4.6: the batch waits for every spawned task to settle first.
        poll_fn(|cx| {
            let mut scheduler = lock(&scheduler);
            scheduler.drive(cx);
            if scheduler.is_idle() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
    outcome
}

/// Poll `main` first, then the scheduler's tasks; whenever a task finishes, poll `main` again
/// (it may be waiting for that result). One task, one deterministic order.
async fn drive_with<F: Future>(scheduler: &Scheduler, main: F) -> F::Output {
    let mut main = pin!(main);
    poll_fn(|cx| {
        loop {
            if let Poll::Ready(output) = main.as_mut().poll(cx) {
                return Poll::Ready(output);
            }
            if lock(scheduler).drive(cx) == 0 {
                return Poll::Pending;
            }
        }
    })
    .await
}

/// `finalizeToolResult` accounting (kimi-loop.md §4.3): the hook can add stop-turn but not
/// clear it; a throwing hook yields an error result and the raw output is never persisted.
async fn finalize(
    env: &StepEnv<'_>,
    call: &ToolCall,
    calls: &[ToolCall],
    args: &Value,
    result: ExecutableToolResult,
) -> (ExecutableToolResult, bool) {
    let name = call.name.as_str();
    let pending_stop = result.stop_turn;
    let context = FinalizeContext {
        tool: env.tool_context(call, calls, None, args),
        result: &result,
    };
    match env.hooks.finalize_tool_result(context).await {
        Ok(None) => (result, pending_stop),
        Ok(Some(raw)) => {
            let finalized = coerce_tool_result(&raw, name);
            let stops = pending_stop || finalized.stop_turn;
            (finalized, stops)
        }
        Err(error) if error.is_abort() || env.signal.aborted() => {
            let text = format!("Tool \"{name}\" aborted during finalizeToolResult hook.");
            (ExecutableToolResult::error(text), pending_stop)
        }
        Err(error) => {
            // Choice: the warn log's message (the facts only say "a warn log").
            env.log.log(
                LogLevel::Warn,
                "finalizeToolResult hook failed",
                json!({ "toolName": name, "toolCallId": call.id, "error": error_payload(&error) }),
            );
            let text = format!(
                "finalizeToolResult hook failed for \"{name}\": {}",
                error.message()
            );
            (ExecutableToolResult::error(text), pending_stop)
        }
    }
}

/// `recordUnexecutedToolCalls` (kimi-loop.md §4.2): for `paused`, `unknown` and `max_tokens`
/// responses with calls, each call gets its `tool.call` then immediately its error
/// `tool.result`. No hooks, no normalisation, no tool lookup.
pub(crate) async fn record_unexecuted_tool_calls(
    env: &StepEnv<'_>,
    calls: &[ToolCall],
) -> Result<(), LoopError> {
    for call in calls {
        let parsed = parse_tool_call_arguments(call.arguments.as_deref());
        if parsed.parse_failed {
            env.log.log(
                LogLevel::Debug,
                "recording unexecuted tool call with unparseable arguments",
                json!({ "toolName": call.name, "toolCallId": call.id }),
            );
        }
        env.record_call(call, &parsed.data, None, None).await?;
        env.record_result(call, ToolResult::error(UNEXECUTED_TOOL_CALL_OUTPUT))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts a tool result carries when its tool does not finish; no invariant reads a
    /// result's text, so only this pins them to the reference.
    #[test]
    fn stop_texts_read_as_the_reference_writes_them() {
        // kimi-loop.md §4.5: the grace sentinel's resolve.
        assert_eq!(
            grace_timeout_output("Bash"),
            "Tool \"Bash\" aborted by grace timeout (2000ms)"
        );
        // kimi-loop.md §4.5, `abortedToolOutput`: an abort that no user asked for.
        assert_eq!(
            aborted_tool_output("Bash", &AbortSignal::default()),
            "Tool \"Bash\" was aborted"
        );
    }
}
