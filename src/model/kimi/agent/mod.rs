//! The agent host of `system = "agent-loop"`: the Kimi Code turn loop
//! ([`agent_loop`](crate::model::kimi::turn_loop)) inside its simulated host
//! ([`Host`]), talking over the network to a provider, with tools on the simulated workspace.
//!
//! This is the process a person would run: it takes the user's turns one at a time, runs each
//! through [`Host::prompt`] and reports everything observable through [`Env::observe`] — the
//! loop's recorded and live events (as its live listener hears them), every model call's
//! returned usage, provider requests, tool executions with the accesses they touch, user
//! aborts and the turn results. The harness checks `loop-envelope` and `lock-safety` on those.
//!
//! Like every model it is generic over [`Env`] and never imports the harness; faults reach it
//! through [`faults::AgentFaults`], randomness through seeds in [`LoopAgentConfig`].
//!
//! - [`transport`]: the [`ChatProvider`](crate::model::kimi::turn_loop::ChatProvider) over HTTP/SSE.
//! - [`tools`]: `Read`, `Write`, `Edit`, `Grep`, `Bash`, `get_weather` over the workspace.
//! - [`faults`]: the injection points (user aborts, a throwing listener, hanging or garbage
//!   tools).

pub mod inject;
pub mod tools;
pub mod transport;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use self::inject::{AbortReason, AgentFaults, ListenerFault};
use crate::model::kimi::turn_loop::bugs::LoopBugs;
use crate::model::kimi::turn_loop::events::{
    LiveListener, LoopEvent, LoopLiveOnlyEvent, LoopRecordedEvent,
};
use crate::model::kimi::turn_loop::host::{
    ContextMessage, CorruptLog, Host, HostParts, RecordStore, TurnStatus, WireLog, WireRecord,
};
use crate::model::kimi::turn_loop::llm::{ChatParams, ChatResponse, Llm, RetryClassifier};
use crate::model::kimi::turn_loop::provider::StreamingLlm;
use crate::model::kimi::turn_loop::types::ContentPart;
use crate::model::kimi::turn_loop::{AbortController, LoopError, LoopPrng, PortClock};
use crate::model::port::env::Env;
use crate::model::port::observe::Observation;
use crate::model::tools::Workspace;
use crate::wire::provider::ProviderFormat;

/// How many characters of a tool result's output the trace keeps.
pub const TRACE_OUTPUT_CHARS: usize = 60;

/// How the trace writes a tool result whose output is not a single text.
pub const TRACE_NON_TEXT_OUTPUT: &str = "[content parts]";

/// What the agent host is built from.
#[derive(Clone)]
pub struct LoopAgentConfig {
    /// The provider host, e.g. `provider:9000`.
    pub provider_addr: String,
    /// Which provider API the model speaks.
    pub api: ProviderFormat,
    /// The model name (requests, logs).
    pub model: String,
    /// The system prompt (carried by the LLM, never in the messages).
    pub system_prompt: String,
    /// The user's messages, one per turn.
    pub turns: Vec<String>,
    /// The tools offered to the model (names of [`tools::TOOL_NAMES`]).
    pub tools: Vec<String>,
    /// `maxSteps` per turn.
    pub max_steps: Option<u32>,
    /// `maxRetryAttempts` per step.
    pub max_retry_attempts: Option<u32>,
    /// The transport's read timeout: a response head or a body silent this long is an
    /// `APITimeoutError`.
    pub stream_idle_timeout: Duration,
    /// Tool latency range `[min, max]` in ms (drawn per execution).
    pub tool_latency_ms: [u64; 2],
    /// Fixed tool latencies by tool-call id.
    pub tool_latency_overrides: BTreeMap<String, u64>,
    /// Seed of the loop's PRNG (uuids, retry jitter).
    pub seed: u64,
    /// Seed of the tools' latency draws.
    pub tools_seed: u64,
    /// Planted defects of the loop (oracle tests only).
    pub bugs: LoopBugs,
    /// Fault hooks.
    pub faults: Arc<dyn AgentFaults>,
}

/// How one user turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopTurnOutcome {
    pub turn: u32,
    pub status: TurnStatus,
    /// Steps the final `runTurn` started, when it returned a result.
    pub steps: Option<u32>,
    pub compactions: u32,
}

impl fmt::Display for LoopTurnOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.status {
            TurnStatus::Completed(reason) => {
                let reason = serde_json::to_value(reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                write!(f, "completed: {reason}")?;
            }
            TurnStatus::Cancelled => write!(f, "cancelled")?,
            TurnStatus::Failed { code, message } => write!(f, "failed: {code}: {message}")?,
        }
        if let Some(steps) = self.steps {
            write!(f, " ({steps} step{})", if steps == 1 { "" } else { "s" })?;
        }
        if self.compactions > 0 {
            write!(f, " after {} compaction(s)", self.compactions)?;
        }
        Ok(())
    }
}

/// Where the agent reports events, and the faults that react to them. Shared by the
/// transport, the tools, the live listener and the turn driver.
pub struct Probe {
    sink: Box<dyn Fn(Observation) + Send + Sync>,
    faults: Arc<dyn AgentFaults>,
    /// The running turn and its abort controller.
    current: Mutex<Option<(u32, AbortController)>>,
    /// Tool results the live listener heard in the running turn.
    live_results: Mutex<Vec<String>>,
}

impl Probe {
    pub fn new(
        sink: impl Fn(Observation) + Send + Sync + 'static,
        faults: Arc<dyn AgentFaults>,
    ) -> Self {
        Probe {
            sink: Box::new(sink),
            faults,
            current: Mutex::new(None),
            live_results: Mutex::new(Vec::new()),
        }
    }

    pub fn faults(&self) -> &dyn AgentFaults {
        self.faults.as_ref()
    }

    /// Reports an event; a user-abort fault may fire on it.
    pub fn observe(&self, obs: Observation) {
        let name = obs.name();
        (self.sink)(obs);
        if let Some(reason) = self.faults.abort_on_event(&name) {
            self.abort(reason);
        }
    }

    /// The simulated user aborts the running turn (nothing happens between turns).
    pub fn abort(&self, reason: AbortReason) {
        let current = self.current.lock().expect("probe poisoned").clone();
        if let Some((turn, controller)) = current
            && !controller.signal().aborted()
        {
            controller.abort_with(reason.error());
            (self.sink)(Observation::LoopUserAbort {
                turn,
                reason: reason.as_str().to_string(),
            });
        }
    }
}

/// The live listener: every loop event into the trace, then (as a fault) a failure.
struct TraceListener {
    probe: Arc<Probe>,
    /// The planted `LoopBugs::listener_events_unnamed`: events reach the listener's fault hook
    /// without their type names.
    unnamed: bool,
}

fn name_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= TRACE_OUTPUT_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(TRACE_OUTPUT_CHARS).collect();
    s.push('…');
    s
}

/// The trace form of a loop event; deltas and progress are left out (they are many and carry
/// no envelope).
fn observation_of(event: &LoopEvent) -> Option<Observation> {
    Some(match event {
        LoopEvent::Recorded(LoopRecordedEvent::StepBegin(e)) => Observation::LoopStepBegin {
            turn_id: e.turn_id.clone(),
            step: e.step,
            uuid: e.uuid.clone(),
        },
        LoopEvent::Recorded(LoopRecordedEvent::StepEnd(e)) => Observation::LoopStepEnd {
            turn_id: e.turn_id.clone(),
            step: e.step,
            uuid: e.uuid.clone(),
            finish_reason: e.finish_reason.as_str().to_string(),
            usage: e.usage,
            provider_finish_reason: e.provider_finish_reason.map(|r| r.as_str().to_string()),
            raw_finish_reason: e.raw_finish_reason.clone(),
        },
        LoopEvent::Recorded(LoopRecordedEvent::ContentPart(e)) => {
            let (kind, chars) = match &e.part {
                ContentPart::Text { text } => ("text", text.chars().count()),
                ContentPart::Think { think, .. } => ("think", think.chars().count()),
                _ => ("media", 0),
            };
            Observation::LoopContentPart {
                step: e.step,
                kind: kind.to_string(),
                chars,
            }
        }
        LoopEvent::Recorded(LoopRecordedEvent::ToolCall(e)) => Observation::LoopToolCall {
            step: e.step,
            tool_call_id: e.tool_call_id.clone(),
            name: e.name.clone(),
            args: e.args.to_string(),
        },
        LoopEvent::Recorded(LoopRecordedEvent::ToolResult(e)) => Observation::LoopToolResult {
            tool_call_id: e.tool_call_id.clone(),
            is_error: e.result.is_error,
            output: shorten(e.result.text().unwrap_or(TRACE_NON_TEXT_OUTPUT)),
        },
        LoopEvent::Live(LoopLiveOnlyEvent::TurnInterrupted(e)) => Observation::LoopInterrupted {
            reason: name_of(&e.reason),
            cause: name_of(&e.interrupt_reason),
            attempted_steps: e.attempted_steps,
            active_step: e.active_step,
            message: e.message.clone(),
        },
        LoopEvent::Live(LoopLiveOnlyEvent::StepRetrying(e)) => Observation::LoopRetrying {
            step: e.step,
            failed_attempt: e.failed_attempt,
            next_attempt: e.next_attempt,
            delay_ms: e.delay_ms,
            error: match e.status_code {
                Some(status) => format!("{} {status}: {}", e.error_name, e.error_message),
                None => format!("{}: {}", e.error_name, e.error_message),
            },
        },
        LoopEvent::Live(_) => return None,
    })
}

impl LiveListener for TraceListener {
    fn emit(&self, event: &LoopEvent) -> Result<(), String> {
        if let LoopEvent::Recorded(LoopRecordedEvent::ToolResult(e)) = event {
            self.probe
                .live_results
                .lock()
                .expect("probe poisoned")
                .push(e.tool_call_id.clone());
        }
        if let Some(obs) = observation_of(event) {
            self.probe.observe(obs);
        }
        let type_name = if self.unnamed { "" } else { event.type_name() };
        match self.probe.faults.listener(type_name) {
            None => Ok(()),
            Some(ListenerFault::Error) => Err(format!("listener failed on {}", event.type_name())),
            Some(ListenerFault::Panic) => std::panic::resume_unwind(Box::new(format!(
                "listener threw on {}",
                event.type_name()
            ))),
        }
    }
}

/// The loop's [`Llm`]: the streaming adapter, with every returned response's usage reported
/// (the "returned responses" of `loop-envelope`).
struct ObservedLlm {
    inner: StreamingLlm,
    probe: Arc<Probe>,
}

impl Llm for ObservedLlm {
    fn system_prompt(&self) -> &str {
        self.inner.system_prompt()
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn retry_classifier(&self) -> Option<RetryClassifier> {
        self.inner.retry_classifier()
    }

    fn chat<'a>(
        &'a self,
        params: ChatParams<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LoopError>> {
        Box::pin(async move {
            let turn_step = params.request_log_fields.turn_step.clone();
            let result = self.inner.chat(params).await;
            self.probe.observe(match &result {
                Ok(response) => Observation::LoopModelReturn {
                    turn_step,
                    usage: response.usage,
                    tool_calls: response.tool_calls.len(),
                    finish: response.raw_finish_reason.clone(),
                    provider_finish: response
                        .provider_finish_reason
                        .map(|r| r.as_str().to_string()),
                },
                Err(error) => Observation::LoopModelError {
                    turn_step,
                    error: format!("{}: {}", error.name(), error.message()),
                },
            });
            result
        })
    }
}

/// Runs the agent host on `env` until every turn has ended; returns the outcomes.
pub async fn run<E: Env>(
    env: E,
    config: LoopAgentConfig,
    workspace: Arc<Mutex<Workspace>>,
) -> Vec<LoopTurnOutcome> {
    let sink_env = env.clone();
    let probe = Arc::new(Probe::new(
        move |obs| sink_env.observe(obs),
        Arc::clone(&config.faults),
    ));
    let clock = Arc::new(PortClock::on(env.clock(), 0));
    let provider = Arc::new(transport::HttpChatProvider::new(
        env.clone(),
        config.provider_addr.clone(),
        config.api,
        config.stream_idle_timeout,
        Arc::clone(&probe),
    ));
    let llm = Arc::new(ObservedLlm {
        inner: StreamingLlm::new(
            provider,
            clock.clone(),
            config.model.clone(),
            config.system_prompt.clone(),
        ),
        probe: Arc::clone(&probe),
    });
    let runtime = tools::ToolRuntime::new(
        workspace,
        Arc::clone(&probe),
        config.tool_latency_ms,
        config.tool_latency_overrides.clone(),
        config.tools_seed,
        env.clock(),
    );
    let mut parts = HostParts::new(
        llm,
        clock,
        Arc::new(LoopPrng::from_seed(config.seed)),
        Arc::new(TraceListener {
            probe: Arc::clone(&probe),
            unnamed: config.bugs.listener_events_unnamed,
        }),
    );
    parts.tools = tools::workspace_tools(&config.tools, &runtime);
    parts.max_steps = config.max_steps;
    parts.max_retry_attempts = config.max_retry_attempts;
    parts.store = Arc::new(FaultyStore(Arc::clone(&config.faults)));
    parts.bugs = config.bugs;
    let host = Host::new(parts);

    let turns = drive_turns(&env, &config, &host, &probe);
    let timed_aborts = async {
        let host_clock = env.clock();
        let start = host_clock.now();
        for at in config.faults.abort_times() {
            host_clock
                .sleep_until(start + Duration::from_millis(at))
                .await;
            if let Some(reason) = config.faults.abort_at(at) {
                probe.abort(reason);
            }
        }
        std::future::pending::<()>().await;
    };
    tokio::select! {
        biased;
        outcomes = turns => outcomes,
        () = timed_aborts => Vec::new(),
    }
}

async fn drive_turns<E: Env>(
    env: &E,
    config: &LoopAgentConfig,
    host: &Host,
    probe: &Arc<Probe>,
) -> Vec<LoopTurnOutcome> {
    let mut outcomes = Vec::new();
    for (i, text) in config.turns.iter().enumerate() {
        let turn = i as u32 + 1;
        env.observe(Observation::TurnStart {
            turn,
            text: text.clone(),
        });
        let controller = AbortController::new();
        *probe.current.lock().expect("probe poisoned") = Some((turn, controller.clone()));
        probe.live_results.lock().expect("probe poisoned").clear();
        let log_before = host.wire_log().lines().len();
        let outcome = host.prompt(text, &controller.signal()).await;
        *probe.current.lock().expect("probe poisoned") = None;
        // The log read back as the host would read its `wire.jsonl` (kimi-loop.md §8.2), so
        // what is reported is what the file holds.
        let records = WireLog::parse(&host.wire_log().to_jsonl(), "wire.jsonl");
        if let Ok(records) = &records {
            report_host_records(probe, records.get(log_before..).unwrap_or_default());
        }
        if let Some(difference) = resume_difference(host, records) {
            probe.observe(Observation::LoopResumeDiverged { turn, difference });
        }
        if let Some(result) = &outcome.result {
            probe.observe(Observation::LoopTurnResult {
                turn,
                stop_reason: name_of(&result.stop_reason),
                steps: result.steps,
                usage: result.usage,
                context_tokens: host.context().token_count(),
            });
        }
        let outcome = LoopTurnOutcome {
            turn,
            status: outcome.status,
            steps: outcome.result.map(|r| r.steps),
            compactions: outcome.compactions,
        };
        env.observe(Observation::TurnEnd {
            turn,
            outcome: outcome.to_string(),
        });
        outcomes.push(outcome);
    }
    outcomes
}

/// The host's record store, failing where the plan says (`transcript_rejects`).
struct FaultyStore(Arc<dyn AgentFaults>);

impl RecordStore for FaultyStore {
    fn accept(&self, event: &LoopRecordedEvent) -> Result<(), LoopError> {
        if self.0.transcript_rejects(event.type_name()) {
            // Choice: the facts name the rejection, not its text.
            return Err(LoopError::named(
                "TranscriptError",
                format!("the record store rejected the {} append", event.type_name()),
            ));
        }
        Ok(())
    }
}

/// What the host wrote on its own during the turn (`records`, the turn's part of its log):
/// compactions, and results it added for calls the loop left open (the turn-end backstop).
fn report_host_records(probe: &Probe, records: &[WireRecord]) {
    let live: Vec<String> = probe.live_results.lock().expect("probe poisoned").clone();
    for record in records {
        match record {
            WireRecord::Compaction { removed_count, .. } => {
                (probe.sink)(Observation::LoopCompaction {
                    removed_count: *removed_count,
                })
            }
            WireRecord::AppendLoopEvent {
                event: LoopRecordedEvent::ToolResult(e),
                ..
            } if !live.contains(&e.tool_call_id) => (probe.sink)(Observation::LoopBackstopResult {
                tool_call_id: e.tool_call_id.clone(),
            }),
            _ => {}
        }
    }
}

/// How a session resumed from the host's `wire.jsonl` would differ from the live host, if it
/// would: the log as read back (`records`) is replayed into a fresh context (kimi-loop.md
/// §8.3) and compared with the live context; both are closed as a resume closes them
/// (`finishResume`), since a call can still be open at a turn's end when the store rejected
/// the backstop's result.
fn resume_difference(host: &Host, records: Result<Vec<WireRecord>, CorruptLog>) -> Option<String> {
    let records = match records {
        Ok(records) => records,
        Err(error) => return Some(format!("the log does not read back: {}", error.0)),
    };
    let resumed = match Host::replay(&records) {
        Ok(context) => context.history().to_vec(),
        Err(error) => return Some(format!("the log does not replay: {error}")),
    };
    let mut live = host.context();
    live.finish_resume();
    let live = live.history();
    let brief = |m: &ContextMessage| {
        let text = format!("{m:?}");
        text.chars().take(120).collect::<String>()
    };
    if let Some(i) = (0..live.len().min(resumed.len())).find(|&i| live[i] != resumed[i]) {
        return Some(format!(
            "message {i} differs: live {}, resumed {}",
            brief(&live[i]),
            brief(&resumed[i])
        ));
    }
    (live.len() != resumed.len()).then(|| {
        format!(
            "the live context holds {} messages, the resumed one {}",
            live.len(),
            resumed.len()
        )
    })
}
