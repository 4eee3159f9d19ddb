//! Fixtures mirroring upstream `test/loop/fixtures` (kimi-loop.md §7.1): a scripted fake LLM,
//! a recording transcript, a collecting live sink and the fixture tools.

#![allow(dead_code)]
// Hook closures take contexts with higher-ranked lifetimes, which a type alias cannot name.
#![allow(clippy::type_complexity)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use loopsim::model::kimi::turn_loop::events::{
    LoopLiveOnlyEvent, ToolCallDeltaEvent, ToolCallEvent, ToolResultEvent, ToolUpdate,
    TurnInterruptedEvent,
};
use loopsim::model::kimi::turn_loop::llm::{RequestLogFields, RetryClassifier};
use loopsim::model::kimi::turn_loop::log::MemoryLog;
use loopsim::model::kimi::turn_loop::*;
use serde_json::{Value, json};
use tokio::sync::Notify;

pub const TURN_ID: &str = "turn-1";

/// One thing the fake LLM emits while "streaming".
#[derive(Clone, Debug)]
pub enum Emit {
    TextDelta(String),
    ThinkDelta(String),
    ToolCallDelta(ToolCallDeltaEvent),
    Part(ContentPart),
}

/// What the fake LLM does on one call.
#[derive(Clone, Debug)]
pub enum Script {
    Respond {
        emits: Vec<Emit>,
        response: ChatResponse,
    },
    Fail(LoopError),
    AbortThenFail(AbortController),
}

/// What one call saw.
#[derive(Clone, Debug)]
pub struct SeenCall {
    pub messages: Vec<Message>,
    pub fields: RequestLogFields,
    pub tools: Vec<String>,
}

/// FakeLLM: serves `script[i]` for the i-th call; every call counts. No retry classifier
/// unless one is set.
pub struct FakeLlm {
    script: Mutex<VecDeque<Script>>,
    calls: Mutex<Vec<SeenCall>>,
    classifier: Option<RetryClassifier>,
    /// Called (and may fail) before each chat: stands in for an OAuth token fetch.
    pub before_chat: Option<Arc<dyn Fn() -> Result<(), LoopError> + Send + Sync>>,
}

impl FakeLlm {
    pub fn new(script: Vec<Script>) -> Self {
        Self {
            script: Mutex::new(script.into()),
            calls: Mutex::new(Vec::new()),
            classifier: None,
            before_chat: None,
        }
    }

    pub fn with_classifier(mut self, classifier: RetryClassifier) -> Self {
        self.classifier = Some(classifier);
        self
    }

    pub fn push(&self, script: Script) {
        self.script.lock().unwrap().push_back(script);
    }

    pub fn call_count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    pub fn calls(&self) -> Vec<SeenCall> {
        self.calls.lock().unwrap().clone()
    }
}

impl Llm for FakeLlm {
    fn system_prompt(&self) -> &str {
        "fake system prompt"
    }

    fn model_name(&self) -> &str {
        "fake-model"
    }

    fn retry_classifier(&self) -> Option<RetryClassifier> {
        self.classifier
    }

    fn chat<'a>(
        &'a self,
        params: ChatParams<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LoopError>> {
        Box::pin(async move {
            let index = {
                let mut calls = self.calls.lock().unwrap();
                calls.push(SeenCall {
                    messages: params.messages.clone(),
                    fields: params.request_log_fields.clone(),
                    tools: params.tools.iter().map(|tool| tool.name.clone()).collect(),
                });
                calls.len() - 1
            };
            if let Some(before) = &self.before_chat {
                before()?;
            }
            let next = self.script.lock().unwrap().pop_front();
            if let Some(reason) = params.signal.reason() {
                return Err(LoopError::Aborted(reason));
            }
            match next {
                None => Err(LoopError::plain(format!(
                    "FakeLLM ran out of responses at call {index}"
                ))),
                Some(Script::Fail(error)) => Err(error),
                Some(Script::AbortThenFail(controller)) => {
                    controller.abort();
                    Err(LoopError::Aborted(AbortError::new("aborted")))
                }
                Some(Script::Respond { emits, response }) => {
                    for emit in emits {
                        match emit {
                            Emit::TextDelta(delta) => params.sink.on_text_delta(&delta),
                            Emit::ThinkDelta(delta) => params.sink.on_think_delta(&delta),
                            Emit::ToolCallDelta(delta) => params.sink.on_tool_call_delta(delta),
                            Emit::Part(part) => params.sink.on_part(part).await?,
                        }
                    }
                    Ok(response)
                }
            }
        })
    }
}

pub fn usage(input_other: u64, output: u64) -> TokenUsage {
    TokenUsage {
        input_other,
        output,
        ..TokenUsage::default()
    }
}

/// `makeResponse(parts, calls, loopReason)`.
pub fn response(parts: Vec<ContentPart>, calls: Vec<ToolCall>, reason: StepStopReason) -> Script {
    let finish = match reason {
        StepStopReason::EndTurn => FinishReason::Completed,
        StepStopReason::ToolUse => FinishReason::ToolCalls,
        StepStopReason::MaxTokens => FinishReason::Truncated,
        StepStopReason::Filtered => FinishReason::Filtered,
        StepStopReason::Paused => FinishReason::Paused,
        StepStopReason::Unknown => FinishReason::Other,
    };
    raw_response(parts, calls, Some(finish), TokenUsage::default())
}

pub fn raw_response(
    parts: Vec<ContentPart>,
    calls: Vec<ToolCall>,
    finish: Option<FinishReason>,
    usage: TokenUsage,
) -> Script {
    Script::Respond {
        emits: parts.into_iter().map(Emit::Part).collect(),
        response: ChatResponse {
            tool_calls: calls,
            provider_finish_reason: finish,
            usage,
            ..ChatResponse::default()
        },
    }
}

/// `makeEndTurnResponse(text, usage)`.
pub fn end_turn(text: &str, usage: TokenUsage) -> Script {
    let parts = if text.is_empty() {
        vec![]
    } else {
        vec![ContentPart::text(text)]
    };
    raw_response(parts, vec![], Some(FinishReason::Completed), usage)
}

/// `makeToolUseResponse(calls, usage)`.
pub fn tool_use(calls: Vec<ToolCall>, usage: TokenUsage) -> Script {
    raw_response(vec![], calls, Some(FinishReason::ToolCalls), usage)
}

/// `makeToolCall(name, args, id)`.
pub fn call(name: &str, args: Value, id: &str) -> ToolCall {
    ToolCall::new(id, name, &args)
}

pub fn with_emits(script: Script, extra: Vec<Emit>) -> Script {
    match script {
        Script::Respond {
            mut emits,
            response,
        } => {
            let mut all = extra;
            all.append(&mut emits);
            Script::Respond {
                emits: all,
                response,
            }
        }
        other => other,
    }
}

pub fn map_response(script: Script, edit: impl FnOnce(&mut ChatResponse)) -> Script {
    match script {
        Script::Respond {
            emits,
            mut response,
        } => {
            edit(&mut response);
            Script::Respond { emits, response }
        }
        other => other,
    }
}

/// RecordingContext: the transcript appends, in order.
#[derive(Default)]
pub struct RecordingTranscript {
    records: Mutex<Vec<LoopRecordedEvent>>,
    fail_on: Mutex<Option<&'static str>>,
}

impl RecordingTranscript {
    pub fn records(&self) -> Vec<LoopRecordedEvent> {
        self.records.lock().unwrap().clone()
    }

    pub fn kinds(&self) -> Vec<&'static str> {
        self.records()
            .iter()
            .map(|event| event.type_name())
            .collect()
    }

    pub fn count(&self, kind: &str) -> usize {
        self.kinds().iter().filter(|k| **k == kind).count()
    }

    pub fn tool_calls(&self) -> Vec<ToolCallEvent> {
        self.records()
            .into_iter()
            .filter_map(|event| match event {
                LoopRecordedEvent::ToolCall(call) => Some(call),
                _ => None,
            })
            .collect()
    }

    pub fn tool_results(&self) -> Vec<ToolResultEvent> {
        self.records()
            .into_iter()
            .filter_map(|event| match event {
                LoopRecordedEvent::ToolResult(result) => Some(result),
                _ => None,
            })
            .collect()
    }

    pub fn result_for(&self, id: &str) -> ToolResultEvent {
        self.tool_results()
            .into_iter()
            .find(|result| result.tool_call_id == id)
            .unwrap_or_else(|| panic!("no tool.result for {id}"))
    }

    pub fn step_ends(&self) -> Vec<loopsim::model::kimi::turn_loop::events::StepEndEvent> {
        self.records()
            .into_iter()
            .filter_map(|event| match event {
                LoopRecordedEvent::StepEnd(end) => Some(end),
                _ => None,
            })
            .collect()
    }

    pub fn step_begins(&self) -> Vec<loopsim::model::kimi::turn_loop::events::StepBeginEvent> {
        self.records()
            .into_iter()
            .filter_map(|event| match event {
                LoopRecordedEvent::StepBegin(begin) => Some(begin),
                _ => None,
            })
            .collect()
    }

    /// Make the next append of this kind fail.
    pub fn fail_on(&self, kind: &'static str) {
        *self.fail_on.lock().unwrap() = Some(kind);
    }
}

impl TranscriptSink for RecordingTranscript {
    fn append<'a>(&'a self, event: &'a LoopRecordedEvent) -> BoxFuture<'a, Result<(), LoopError>> {
        Box::pin(async move {
            if *self.fail_on.lock().unwrap() == Some(event.type_name()) {
                return Err(LoopError::plain("transcript append failed"));
            }
            self.records.lock().unwrap().push(event.clone());
            Ok(())
        })
    }
}

/// How the live sink misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkMode {
    Ok,
    /// The synchronous throw: a panic.
    Panic,
    /// The rejected promise: an `Err`, after recording.
    Reject,
    /// Record, then panic.
    RecordThenPanic,
}

/// CollectingSink: the live listener.
pub struct CollectingSink {
    events: Mutex<Vec<LoopEvent>>,
    mode: SinkMode,
}

impl Default for CollectingSink {
    fn default() -> Self {
        Self::new(SinkMode::Ok)
    }
}

impl CollectingSink {
    pub fn new(mode: SinkMode) -> Self {
        Self {
            events: Mutex::new(Vec::new()),
            mode,
        }
    }

    pub fn events(&self) -> Vec<LoopEvent> {
        self.events.lock().unwrap().clone()
    }

    pub fn types(&self) -> Vec<&'static str> {
        self.events().iter().map(LoopEvent::type_name).collect()
    }

    pub fn count(&self, kind: &str) -> usize {
        self.types().iter().filter(|k| **k == kind).count()
    }

    pub fn interrupted(&self) -> Vec<TurnInterruptedEvent> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                LoopEvent::Live(LoopLiveOnlyEvent::TurnInterrupted(event)) => Some(event),
                _ => None,
            })
            .collect()
    }

    pub fn live_only(&self) -> Vec<LoopLiveOnlyEvent> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                LoopEvent::Live(event) => Some(event),
                _ => None,
            })
            .collect()
    }

    pub fn recorded(&self) -> Vec<LoopRecordedEvent> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                LoopEvent::Recorded(event) => Some(event),
                _ => None,
            })
            .collect()
    }

    pub fn tool_call_ids(&self) -> Vec<String> {
        self.recorded()
            .into_iter()
            .filter_map(|event| match event {
                LoopRecordedEvent::ToolCall(call) => Some(call.tool_call_id),
                _ => None,
            })
            .collect()
    }

    pub fn tool_result_ids(&self) -> Vec<String> {
        self.recorded()
            .into_iter()
            .filter_map(|event| match event {
                LoopRecordedEvent::ToolResult(result) => Some(result.tool_call_id),
                _ => None,
            })
            .collect()
    }

    pub fn live_result(&self, id: &str) -> ToolResultEvent {
        self.recorded()
            .into_iter()
            .find_map(|event| match event {
                LoopRecordedEvent::ToolResult(result) if result.tool_call_id == id => Some(result),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no live tool.result for {id}"))
    }
}

impl LiveListener for CollectingSink {
    fn emit(&self, event: &LoopEvent) -> Result<(), String> {
        match self.mode {
            SinkMode::Ok => {
                self.events.lock().unwrap().push(event.clone());
                Ok(())
            }
            SinkMode::Panic => panic!("live sink throws"),
            SinkMode::Reject => {
                self.events.lock().unwrap().push(event.clone());
                Err("live sink rejects".to_owned())
            }
            SinkMode::RecordThenPanic => {
                self.events.lock().unwrap().push(event.clone());
                panic!("live sink records then throws")
            }
        }
    }
}

/// One turn's wiring: fake LLM, transcript, live sink, log, controller, input.
pub struct Rig {
    pub llm: Arc<FakeLlm>,
    pub transcript: Arc<RecordingTranscript>,
    pub sink: Arc<CollectingSink>,
    pub log: Arc<MemoryLog>,
    pub controller: AbortController,
    pub input: RunTurnInput,
}

pub fn normal_messages() -> Vec<Message> {
    vec![Message::user("normal projection")]
}

impl Rig {
    pub fn new(script: Vec<Script>) -> Self {
        Self::with_llm(FakeLlm::new(script), SinkMode::Ok)
    }

    pub fn with_sink(script: Vec<Script>, mode: SinkMode) -> Self {
        Self::with_llm(FakeLlm::new(script), mode)
    }

    pub fn with_llm(llm: FakeLlm, mode: SinkMode) -> Self {
        let llm = Arc::new(llm);
        let transcript = Arc::new(RecordingTranscript::default());
        let sink = Arc::new(CollectingSink::new(mode));
        let log = Arc::new(MemoryLog::new());
        let controller = AbortController::new();
        let dispatcher = LoopEventDispatcher::new(transcript.clone(), sink.clone());
        let mut input = RunTurnInput::new(
            TURN_ID,
            controller.signal(),
            llm.clone(),
            message_builder(normal_messages),
            Arc::new(dispatcher),
            Arc::new(TokioClock::new(0)),
            Arc::new(LoopPrng::from_seed(7)),
        );
        input.log = log.clone();
        Self {
            llm,
            transcript,
            sink,
            log,
            controller,
            input,
        }
    }

    pub fn tools(mut self, tools: Vec<Arc<dyn ExecutableTool>>) -> Self {
        self.input.tools = tools;
        self
    }

    pub fn hooks(mut self, hooks: impl LoopHooks + 'static) -> Self {
        self.input.hooks = Arc::new(hooks);
        self
    }

    pub async fn run(&self) -> Result<TurnResult, LoopError> {
        run_turn(&self.input).await
    }
}

/// Executions a fixture tool saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Execution {
    pub id: String,
    pub turn_id: String,
    pub args: Value,
}

#[derive(Default, Clone)]
pub struct Executions(Arc<Mutex<Vec<Execution>>>);

impl Executions {
    pub fn push(&self, execution: Execution) {
        self.0.lock().unwrap().push(execution);
    }

    pub fn all(&self) -> Vec<Execution> {
        self.0.lock().unwrap().clone()
    }

    pub fn ids(&self) -> Vec<String> {
        self.all().into_iter().map(|e| e.id).collect()
    }

    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

type Resolve = dyn Fn(Value) -> Result<ToolExecution, LoopError> + Send + Sync;

/// A fixture tool: a name, a schema and a resolve function.
pub struct TestTool {
    pub name: String,
    pub schema: Value,
    resolve: Arc<Resolve>,
}

impl TestTool {
    pub fn arc(
        name: &str,
        schema: Value,
        resolve: impl Fn(Value) -> Result<ToolExecution, LoopError> + Send + Sync + 'static,
    ) -> Arc<dyn ExecutableTool> {
        Arc::new(Self {
            name: name.to_owned(),
            schema,
            resolve: Arc::new(resolve),
        })
    }
}

impl ExecutableTool for TestTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "fixture tool"
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn resolve_execution<'a>(
        &'a self,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolExecution, LoopError>> {
        let outcome = (self.resolve)(args);
        Box::pin(async move { outcome })
    }
}

pub fn any_object() -> Value {
    json!({ "type": "object", "additionalProperties": true })
}

pub fn echo_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "text": { "type": "string" } },
        "required": ["text"],
        "additionalProperties": false
    })
}

fn record(executions: &Executions, args: &Value) -> impl Fn(&ToolExecuteContext) + use<> {
    let executions = executions.clone();
    let args = args.clone();
    move |ctx: &ToolExecuteContext| {
        executions.push(Execution {
            id: ctx.tool_call_id.clone(),
            turn_id: ctx.turn_id.clone(),
            args: args.clone(),
        })
    }
}

/// `echo`: `{text: string}` → `{output: text}`.
pub fn echo(executions: &Executions) -> Arc<dyn ExecutableTool> {
    echo_with(executions, None, None)
}

pub fn echo_with(
    executions: &Executions,
    accesses: Option<ToolAccesses>,
    description: Option<&'static str>,
) -> Arc<dyn ExecutableTool> {
    let executions = executions.clone();
    TestTool::arc("echo", echo_schema(), move |args| {
        let seen = record(&executions, &args);
        let text = args["text"].as_str().unwrap_or_default().to_owned();
        let mut runnable = RunnableToolExecution::new("echo", move |ctx| {
            seen(&ctx);
            Box::pin(async move { Ok(json!({ "output": text })) })
        });
        runnable.accesses = accesses.clone();
        if let Some(description) = description {
            runnable.description =
                Some(description.replace("<text>", args["text"].as_str().unwrap_or("")));
        }
        Ok(ToolExecution::Runnable(runnable))
    })
}

/// `fail`: throws `Error(message)`.
pub fn fail(executions: &Executions, message: &'static str) -> Arc<dyn ExecutableTool> {
    let executions = executions.clone();
    TestTool::arc("fail", any_object(), move |args| {
        let seen = record(&executions, &args);
        Ok(ToolExecution::Runnable(RunnableToolExecution::new(
            "fail",
            move |ctx| {
                seen(&ctx);
                Box::pin(async move { Err(LoopError::plain(message)) })
            },
        )))
    })
}

/// A latch a test can wait on.
#[derive(Default)]
pub struct Latch {
    set: AtomicBool,
    notify: Notify,
}

impl Latch {
    pub fn set(&self) {
        self.set.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

/// `slow`: waits for the abort, then rejects with an AbortError.
pub fn slow(started: &Arc<Latch>, accesses: Option<ToolAccesses>) -> Arc<dyn ExecutableTool> {
    let started = started.clone();
    TestTool::arc("slow", any_object(), move |_args| {
        let started = started.clone();
        let mut runnable = RunnableToolExecution::new("slow", move |ctx| {
            Box::pin(async move {
                started.set();
                ctx.signal.cancelled().await;
                Err(LoopError::Aborted(AbortError::new("slow tool cancelled")))
            })
        });
        runnable.accesses = accesses.clone();
        Ok(ToolExecution::Runnable(runnable))
    })
}

/// `hang`: never settles, ignoring the signal.
pub fn hang(started: &Arc<Latch>) -> Arc<dyn ExecutableTool> {
    let started = started.clone();
    TestTool::arc("hang", any_object(), move |_args| {
        let started = started.clone();
        Ok(ToolExecution::Runnable(RunnableToolExecution::new(
            "hang",
            move |_ctx| {
                Box::pin(async move {
                    started.set();
                    std::future::pending::<()>().await;
                    Ok(json!({ "output": "never" }))
                })
            },
        )))
    })
}

/// `progress`: emits its updates, then returns `done`.
pub fn progress(
    updates: Vec<ToolUpdate>,
    accesses: Option<ToolAccesses>,
) -> Arc<dyn ExecutableTool> {
    TestTool::arc("progress", any_object(), move |_args| {
        let updates = updates.clone();
        let mut runnable = RunnableToolExecution::new("progress", move |ctx| {
            Box::pin(async move {
                for update in updates {
                    ctx.updates.update(update);
                }
                Ok(json!({ "output": "done" }))
            })
        });
        runnable.accesses = accesses.clone();
        Ok(ToolExecution::Runnable(runnable))
    })
}

/// `strict`: `{value: number}` required → `value=<n>`.
pub fn strict(executions: &Executions) -> Arc<dyn ExecutableTool> {
    let executions = executions.clone();
    let schema = json!({
        "type": "object",
        "properties": { "value": { "type": "number" } },
        "required": ["value"]
    });
    TestTool::arc("strict", schema, move |args| {
        let seen = record(&executions, &args);
        let value = args["value"].clone();
        Ok(ToolExecution::Runnable(RunnableToolExecution::new(
            "strict",
            move |ctx| {
                seen(&ctx);
                Box::pin(async move { Ok(json!({ "output": format!("value={value}") })) })
            },
        )))
    })
}

/// A tool returning a fixed raw value.
pub fn returns(name: &str, executions: &Executions, value: Value) -> Arc<dyn ExecutableTool> {
    let executions = executions.clone();
    let owned = name.to_owned();
    TestTool::arc(name, any_object(), move |args| {
        let seen = record(&executions, &args);
        let value = value.clone();
        Ok(ToolExecution::Runnable(RunnableToolExecution::new(
            owned.clone(),
            move |ctx| {
                seen(&ctx);
                Box::pin(async move { Ok(value) })
            },
        )))
    })
}

/// GatedTool: signals `started`, waits for `release`, returns `<name> done`.
#[derive(Default)]
pub struct Gate {
    pub started: Latch,
    pub released: Latch,
}

pub fn gated(
    name: &str,
    gate: &Arc<Gate>,
    accesses: Option<ToolAccesses>,
) -> Arc<dyn ExecutableTool> {
    let gate = gate.clone();
    let owned = name.to_owned();
    TestTool::arc(name, any_object(), move |_args| {
        let gate = gate.clone();
        let name = owned.clone();
        let mut runnable = RunnableToolExecution::new(owned.clone(), move |_ctx| {
            Box::pin(async move {
                gate.started.set();
                gate.released.wait().await;
                Ok(json!({ "output": format!("{name} done") }))
            })
        });
        runnable.accesses = accesses.clone();
        Ok(ToolExecution::Runnable(runnable))
    })
}

/// `path-gated`: accesses `writeFile(args.path)`; one gate per call id.
pub struct PathGates {
    pub gates: Mutex<Vec<(String, Arc<Gate>)>>,
    pub paths: Mutex<Vec<(String, String)>>,
}

impl PathGates {
    pub fn new(ids: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            gates: Mutex::new(
                ids.iter()
                    .map(|id| (id.to_string(), Arc::new(Gate::default())))
                    .collect(),
            ),
            paths: Mutex::new(Vec::new()),
        })
    }

    pub fn gate(&self, id: &str) -> Arc<Gate> {
        self.gates
            .lock()
            .unwrap()
            .iter()
            .find(|(k, _)| k == id)
            .unwrap()
            .1
            .clone()
    }
}

pub fn path_gated(gates: &Arc<PathGates>) -> Arc<dyn ExecutableTool> {
    let gates = gates.clone();
    let schema = json!({
        "type": "object",
        "properties": { "path": { "type": "string" } },
        "required": ["path"]
    });
    TestTool::arc("path-gated", schema, move |args| {
        let gates = gates.clone();
        let path = args["path"].as_str().unwrap_or_default().to_owned();
        let runnable = RunnableToolExecution::new("path-gated", {
            let path = path.clone();
            move |ctx| {
                Box::pin(async move {
                    let gate = gates.gate(&ctx.tool_call_id);
                    gates
                        .paths
                        .lock()
                        .unwrap()
                        .push((ctx.tool_call_id.clone(), path));
                    gate.started.set();
                    gate.released.wait().await;
                    Ok(json!({ "output": "ok" }))
                })
            }
        })
        .with_accesses(ToolAccesses::write_file(path));
        Ok(ToolExecution::Runnable(runnable))
    })
}

/// Let every ready task run (a "macrotask" boundary).
pub async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// A counter shared with a closure.
#[derive(Default, Clone)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

pub fn text_of(result: &ToolResultEvent) -> String {
    match &result.result.output {
        ToolOutput::Text(text) => text.clone(),
        ToolOutput::Parts(parts) => serde_json::to_string(parts).unwrap(),
    }
}

use loopsim::model::kimi::turn_loop::hooks::{
    AfterStepContext, AfterStepDecision, AuthorizeContext, AuthorizeDecision, BeforeStepDecision,
    ContinueDecision, FinalizeContext, HookFuture, PrepareDecision, StepHookContext,
    StoppedStepContext, ToolHookContext,
};

/// Hooks whose members are plain closures; an absent member behaves like an absent hook.
#[derive(Default)]
pub struct TestHooks {
    pub after_step: Option<
        Box<
            dyn Fn(AfterStepContext<'_>) -> Result<Option<AfterStepDecision>, LoopError>
                + Send
                + Sync,
        >,
    >,
    pub should_continue: Option<
        Box<
            dyn Fn(StoppedStepContext<'_>) -> Result<Option<ContinueDecision>, LoopError>
                + Send
                + Sync,
        >,
    >,
    pub prepare: Option<
        Box<
            dyn Fn(ToolHookContext<'_>) -> Result<Option<PrepareDecision>, LoopError> + Send + Sync,
        >,
    >,
    pub authorize: Option<
        Box<
            dyn Fn(AuthorizeContext<'_>) -> Result<Option<AuthorizeDecision>, LoopError>
                + Send
                + Sync,
        >,
    >,
    pub finalize:
        Option<Box<dyn Fn(FinalizeContext<'_>) -> Result<Option<Value>, LoopError> + Send + Sync>>,
    pub before: Option<
        Box<
            dyn Fn(StepHookContext<'_>) -> Result<Option<BeforeStepDecision>, LoopError>
                + Send
                + Sync,
        >,
    >,
}

fn ready<'a, T: Send + 'a>(value: Result<Option<T>, LoopError>) -> HookFuture<'a, T> {
    Box::pin(async move { value })
}

impl LoopHooks for TestHooks {
    fn before_step<'a>(&'a self, ctx: StepHookContext<'a>) -> HookFuture<'a, BeforeStepDecision> {
        match &self.before {
            Some(hook) => ready(hook(ctx)),
            None => ready(Ok(None)),
        }
    }

    fn after_step<'a>(&'a self, ctx: AfterStepContext<'a>) -> HookFuture<'a, AfterStepDecision> {
        match &self.after_step {
            Some(hook) => ready(hook(ctx)),
            None => ready(Ok(None)),
        }
    }

    fn should_continue_after_stop<'a>(
        &'a self,
        ctx: StoppedStepContext<'a>,
    ) -> HookFuture<'a, ContinueDecision> {
        match &self.should_continue {
            Some(hook) => ready(hook(ctx)),
            None => ready(Ok(None)),
        }
    }

    fn prepare_tool_execution<'a>(
        &'a self,
        ctx: ToolHookContext<'a>,
    ) -> HookFuture<'a, PrepareDecision> {
        match &self.prepare {
            Some(hook) => ready(hook(ctx)),
            None => ready(Ok(None)),
        }
    }

    fn authorize_tool_execution<'a>(
        &'a self,
        ctx: AuthorizeContext<'a>,
    ) -> HookFuture<'a, AuthorizeDecision> {
        match &self.authorize {
            Some(hook) => ready(hook(ctx)),
            None => ready(Ok(None)),
        }
    }

    fn finalize_tool_result<'a>(&'a self, ctx: FinalizeContext<'a>) -> HookFuture<'a, Value> {
        match &self.finalize {
            Some(hook) => ready(hook(ctx)),
            None => ready(Ok(None)),
        }
    }
}
