//! A minimal simulated host (kimi-loop.md §8.1): one conversation, one prompt at a time. It
//! persists every recorded event, folds it into the context so the next step's request sees
//! it, retries a turn after compacting on context overflow, closes abandoned tool exchanges
//! at turn end and maps the turn's end to a status.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::context::{ContextMemory, ContextMessage, Origin, estimate_tokens};
use super::projector::{ProjectionMode, project, project_media, without_error_status};
use super::records::{WireLog, WireRecord};
use crate::model::kimi::turn_loop::abort::AbortSignal;
use crate::model::kimi::turn_loop::clock::{Clock, LoopPrng};
use crate::model::kimi::turn_loop::errors::{LoopError, ProviderErrorKind, StatusClass};
use crate::model::kimi::turn_loop::events::{
    LiveListener, LoopEventDispatcher, LoopRecordedEvent, ToolResultEvent, TranscriptSink,
};
use crate::model::kimi::turn_loop::hooks::{LoopHooks, NoHooks};
use crate::model::kimi::turn_loop::input::{MessageBuilder, RunTurnInput};
use crate::model::kimi::turn_loop::llm::Llm;
use crate::model::kimi::turn_loop::log::{LoopLog, NoopLog};
use crate::model::kimi::turn_loop::result::ToolResult;
use crate::model::kimi::turn_loop::run_turn::run_turn;
use crate::model::kimi::turn_loop::tool::SharedTool;
use crate::model::kimi::turn_loop::types::{
    ContentPart, Message, Role, TurnResult, TurnStopReason,
};

/// kimi-loop.md §8.1: the message of a filtered turn.
pub const FILTERED_MESSAGE: &str = "Provider safety policy blocked the response.";

/// Choice: how many compactions one prompt may trigger before the overflow is reported.
pub const COMPACTIONS_PER_TURN_MAX: u32 = 2;

/// How a prompt ended (the host's turn-end mapping).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnStatus {
    /// Any terminal stop except `filtered`.
    Completed(TurnStopReason),
    /// Aborted.
    Cancelled,
    /// Filtered (`provider.filtered`) or an error.
    Failed {
        /// `provider.filtered`, a `KimiError` code, or the error's class name.
        code: String,
        /// The message.
        message: String,
    },
}

/// The outcome of one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTurnOutcome {
    /// The turn id (a decimal counter).
    pub turn_id: String,
    /// The status.
    pub status: TurnStatus,
    /// The loop's result, if it returned one.
    pub result: Option<TurnResult>,
    /// How many compactions ran.
    pub compactions: u32,
}

/// Where to cut the history when compacting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionPlan {
    /// The first history index kept.
    pub keep_from: usize,
    /// The text of the summary message that replaces the prefix.
    pub summary: String,
}

/// The compaction seam: the real host asks a model for a summary; a simulation can plan cuts
/// deterministically.
pub trait Compactor: Send + Sync {
    /// Plan a compaction of `history`, or `None` if nothing can be cut.
    fn plan<'a>(&'a self, history: &'a [ContextMessage]) -> BoxFuture<'a, Option<CompactionPlan>>;
}

/// Choice: a deterministic compactor that keeps the shortest suffix starting at an assistant
/// message that fits `target_tokens` (or the last safe cut if none fits), never separating a
/// tool call from its result, and summarises the rest by count and the latest user request.
#[derive(Debug, Clone, Copy)]
pub struct TruncatingCompactor {
    /// The token estimate the kept suffix should fit in.
    pub target_tokens: u64,
}

/// Is cutting before `index` safe: an assistant message, and no later tool result answers an
/// earlier call.
pub fn is_safe_cut(history: &[ContextMessage], index: usize) -> bool {
    if index == 0 || history.get(index).is_none_or(|m| m.role != Role::Assistant) {
        return false;
    }
    let earlier_calls: Vec<&str> = history[..index]
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
        .collect();
    !history[index..].iter().any(|m| {
        m.tool_call_id
            .as_deref()
            .is_some_and(|id| earlier_calls.contains(&id))
    })
}

impl Compactor for TruncatingCompactor {
    fn plan<'a>(&'a self, history: &'a [ContextMessage]) -> BoxFuture<'a, Option<CompactionPlan>> {
        Box::pin(async move {
            let safe: Vec<usize> = (1..history.len())
                .filter(|&i| is_safe_cut(history, i))
                .collect();
            let keep_from = safe
                .iter()
                .copied()
                .find(|&i| estimate_tokens(&history[i..]) <= self.target_tokens)
                .or_else(|| safe.last().copied())?;
            let request = history[..keep_from]
                .iter()
                .rev()
                .find(|m| m.origin == Origin::User)
                .and_then(|m| {
                    m.content.iter().find_map(|p| match p {
                        ContentPart::Text { text } => Some(text.clone()),
                        _ => None,
                    })
                })
                .unwrap_or_default();
            Some(CompactionPlan {
                keep_from,
                summary: format!(
                    "<system>Earlier conversation ({keep_from} messages) was compacted to fit the \
                     context window. The user's latest request was: {request}</system>"
                ),
            })
        })
    }
}

struct HostState {
    context: Mutex<ContextMemory>,
    wire: Mutex<WireLog>,
    clock: Arc<dyn Clock>,
    store: Arc<dyn RecordStore>,
}

/// Where the host's record appends go. A real store can reject an append (kimi-loop.md §4.6:
/// "the transcript append rejects"; §10 item 7 names the case as untested upstream), and the
/// loop must then let its spawned tools settle before the error propagates, leaving the host's
/// turn-end backstop to close what it left open.
pub trait RecordStore: Send + Sync {
    /// `Err` rejects the append of `event`: nothing is written and nothing applied.
    fn accept(&self, event: &LoopRecordedEvent) -> Result<(), LoopError>;
}

/// A store that accepts every append.
pub struct AcceptingStore;

impl RecordStore for AcceptingStore {
    fn accept(&self, _: &LoopRecordedEvent) -> Result<(), LoopError> {
        Ok(())
    }
}

impl HostState {
    fn write(&self, record: WireRecord) {
        let now = self.clock.now_ms();
        self.wire
            .lock()
            .expect("wire poisoned")
            .append(&record, now);
    }

    fn history(&self) -> Vec<ContextMessage> {
        self.context
            .lock()
            .expect("context poisoned")
            .history()
            .to_vec()
    }
}

impl TranscriptSink for HostState {
    fn append<'a>(&'a self, event: &'a LoopRecordedEvent) -> BoxFuture<'a, Result<(), LoopError>> {
        Box::pin(async move {
            self.store.accept(event)?;
            self.write(WireRecord::AppendLoopEvent {
                event: event.clone(),
                time: self.clock.now_ms(),
            });
            self.context
                .lock()
                .expect("context poisoned")
                .apply(event)
                .map_err(|error| LoopError::named("ContextError", error.0))
        })
    }
}

/// What a host is built from.
pub struct HostParts {
    /// The model.
    pub llm: Arc<dyn Llm>,
    /// The clock (timers and record times).
    pub clock: Arc<dyn Clock>,
    /// The seeded PRNG shared by every turn.
    pub prng: Arc<LoopPrng>,
    /// Live listeners (UI, trace).
    pub live: Arc<dyn LiveListener>,
    /// The tools.
    pub tools: Vec<SharedTool>,
    /// Hooks. Default: none.
    pub hooks: Arc<dyn LoopHooks>,
    /// Logs.
    pub log: Arc<dyn LoopLog>,
    /// Compaction.
    pub compactor: Arc<dyn Compactor>,
    /// `maxSteps` per turn.
    pub max_steps: Option<u32>,
    /// `maxRetryAttempts` per step.
    pub max_retry_attempts: Option<u32>,
    /// Where the loop's record appends go. Default: a store that accepts them all.
    pub store: Arc<dyn RecordStore>,
    /// Planted defects passed to every turn (harness oracle tests only).
    pub bugs: crate::model::kimi::turn_loop::bugs::LoopBugs,
}

impl HostParts {
    /// Parts with no tools, no hooks, no logs and a truncating compactor.
    pub fn new(
        llm: Arc<dyn Llm>,
        clock: Arc<dyn Clock>,
        prng: Arc<LoopPrng>,
        live: Arc<dyn LiveListener>,
    ) -> Self {
        Self {
            llm,
            clock,
            prng,
            live,
            tools: Vec::new(),
            hooks: Arc::new(NoHooks),
            log: Arc::new(NoopLog),
            compactor: Arc::new(TruncatingCompactor {
                target_tokens: 2_000,
            }),
            max_steps: None,
            max_retry_attempts: None,
            store: Arc::new(AcceptingStore),
            bugs: Default::default(),
        }
    }
}

/// The host.
pub struct Host {
    parts: HostParts,
    state: Arc<HostState>,
    turns: Mutex<u64>,
}

fn builder(state: &Arc<HostState>, build: fn(&[ContextMessage]) -> Vec<Message>) -> MessageBuilder {
    let state = Arc::clone(state);
    Arc::new(move || {
        let messages = build(&state.history());
        Box::pin(async move { Ok(messages) })
    })
}

fn is_context_overflow(error: &LoopError) -> bool {
    matches!(
        error.provider().map(|p| p.kind),
        Some(ProviderErrorKind::Status {
            class: StatusClass::ContextOverflow,
            ..
        })
    )
}

impl Host {
    /// A host with an empty context.
    pub fn new(parts: HostParts) -> Self {
        let state = Arc::new(HostState {
            context: Mutex::new(if parts.bugs.context_count_without_cache {
                ContextMemory::counting_without_cache()
            } else {
                ContextMemory::new()
            }),
            wire: Mutex::new(WireLog::new()),
            clock: Arc::clone(&parts.clock),
            store: if parts.bugs.store_unconsulted {
                Arc::new(AcceptingStore)
            } else {
                Arc::clone(&parts.store)
            },
        });
        Self {
            parts,
            state,
            turns: Mutex::new(0),
        }
    }

    /// The context history.
    pub fn history(&self) -> Vec<ContextMessage> {
        self.state.history()
    }

    /// A copy of the context memory: the history, the calls still waiting for a result, the
    /// token count.
    pub fn context(&self) -> ContextMemory {
        self.state.context.lock().expect("context poisoned").clone()
    }

    /// The messages the next request would carry.
    pub fn messages(&self) -> Vec<Message> {
        project(&self.state.history(), ProjectionMode::Normal)
    }

    /// The record log.
    pub fn wire_log(&self) -> WireLog {
        self.state.wire.lock().expect("wire poisoned").clone()
    }

    /// Rebuild a context from a record log (replay), closing pending calls at the end.
    pub fn replay(records: &[WireRecord]) -> Result<ContextMemory, LoopError> {
        let mut context = ContextMemory::new();
        for record in records {
            match record {
                WireRecord::AppendMessage { message, .. } => {
                    context.append_message(message.clone())
                }
                WireRecord::AppendLoopEvent { event, .. } => context
                    .apply(event)
                    .map_err(|error| LoopError::named("ContextError", error.0))?,
                WireRecord::Compaction {
                    removed_count,
                    summary,
                    ..
                } => context.compact(*removed_count as usize, summary.clone()),
                _ => {}
            }
        }
        context.finish_resume();
        Ok(context)
    }

    fn append_message(&self, message: ContextMessage) {
        self.state.write(WireRecord::AppendMessage {
            message: message.clone(),
            time: self.parts.clock.now_ms(),
        });
        self.state
            .context
            .lock()
            .expect("context poisoned")
            .append_message(message);
    }

    fn turn_input(&self, turn_id: &str, signal: &AbortSignal) -> RunTurnInput {
        let dispatcher = LoopEventDispatcher::new(self.state.clone(), Arc::clone(&self.parts.live));
        let normal: fn(&[ContextMessage]) -> Vec<Message> =
            if self.parts.bugs.errors_shown_as_success {
                |h| without_error_status(project(h, ProjectionMode::Normal))
            } else {
                |h| project(h, ProjectionMode::Normal)
            };
        let mut input = RunTurnInput::new(
            turn_id,
            signal.clone(),
            Arc::clone(&self.parts.llm),
            builder(&self.state, normal),
            Arc::new(dispatcher),
            Arc::clone(&self.parts.clock),
            Arc::clone(&self.parts.prng),
        );
        input.build_messages_strict =
            Some(builder(&self.state, |h| project(h, ProjectionMode::Strict)));
        input.build_messages_media_degraded =
            Some(builder(&self.state, |h| project_media(h, true)));
        input.build_messages_media_stripped =
            Some(builder(&self.state, |h| project_media(h, false)));
        input.tools = self.parts.tools.clone();
        input.hooks = Arc::clone(&self.parts.hooks);
        input.log = Arc::clone(&self.parts.log);
        input.max_steps = self.parts.max_steps;
        input.max_retry_attempts = self.parts.max_retry_attempts;
        input.bugs = self.parts.bugs;
        input
    }

    async fn compact(&self) -> bool {
        let history = self.state.history();
        let Some(plan) = self.parts.compactor.plan(&history).await else {
            return false;
        };
        let mut summary = ContextMessage::user(vec![ContentPart::text(plan.summary)]);
        summary.origin = Origin::Compaction;
        if !self.parts.bugs.compaction_unrecorded {
            self.state.write(WireRecord::Compaction {
                removed_count: u32::try_from(plan.keep_from).unwrap_or(u32::MAX),
                summary: summary.clone(),
                time: self.parts.clock.now_ms(),
            });
        }
        self.state
            .context
            .lock()
            .expect("context poisoned")
            .compact(plan.keep_from, summary);
        true
    }

    /// Run one user prompt to its end. Context overflow is a host retry: compact, then rerun
    /// the turn with the same turn id (step numbers and the max-steps budget start over).
    pub async fn prompt(&self, text: &str, signal: &AbortSignal) -> HostTurnOutcome {
        let turn_id = {
            let mut turns = self.turns.lock().expect("turns poisoned");
            *turns += 1;
            turns.to_string()
        };
        let input = vec![ContentPart::text(text)];
        self.state.write(WireRecord::TurnPrompt {
            input: input.clone(),
            origin: Origin::User,
            time: self.parts.clock.now_ms(),
        });
        let prompt = ContextMessage::user(input);
        if !self.parts.bugs.prompt_appended_after_turn {
            self.append_message(prompt.clone());
        }
        let mut compactions = 0;
        let outcome = loop {
            let turn = self.turn_input(&turn_id, signal);
            match run_turn(&turn).await {
                Err(error)
                    if is_context_overflow(&error)
                        && compactions < COMPACTIONS_PER_TURN_MAX
                        && self.compact().await =>
                {
                    compactions += 1;
                }
                outcome => break outcome,
            }
        };
        if self.parts.bugs.prompt_appended_after_turn {
            self.append_message(prompt);
        }
        let (status, result) = match outcome {
            Ok(result) => {
                let status = match result.stop_reason {
                    TurnStopReason::Aborted => TurnStatus::Cancelled,
                    TurnStopReason::Filtered => TurnStatus::Failed {
                        code: "provider.filtered".to_owned(),
                        message: FILTERED_MESSAGE.to_owned(),
                    },
                    other => TurnStatus::Completed(other),
                };
                self.state.write(WireRecord::UsageRecord {
                    model: self.parts.llm.model_name().to_owned(),
                    usage: result.usage,
                    time: self.parts.clock.now_ms(),
                });
                (status, Some(result))
            }
            Err(error) if error.is_abort() => (TurnStatus::Cancelled, None),
            Err(error) => (
                TurnStatus::Failed {
                    code: error.code().unwrap_or(error.name()).to_owned(),
                    message: error.message().to_owned(),
                },
                None,
            ),
        };
        self.close_abandoned_tool_exchange(&status).await;
        HostTurnOutcome {
            turn_id,
            status,
            result,
            compactions,
        }
    }

    /// `closeAbandonedToolExchange`: every recorded call still without a result gets a
    /// synthetic error result (kimi-loop.md §8.1 text).
    async fn close_abandoned_tool_exchange(&self, status: &TurnStatus) {
        let cause = match status {
            TurnStatus::Cancelled => "the turn was cancelled".to_owned(),
            TurnStatus::Failed { message, .. } => format!("the turn failed ({message})"),
            TurnStatus::Completed(_) => "the turn ended".to_owned(),
        };
        let pending = self
            .state
            .context
            .lock()
            .expect("context poisoned")
            .pending_tool_calls()
            .to_vec();
        for id in pending {
            let event = LoopRecordedEvent::ToolResult(ToolResultEvent {
                parent_uuid: id.clone(),
                tool_call_id: id,
                result: ToolResult::error(abandoned_tool_output(&cause)),
                trace_id: None,
            });
            // The fold of a result cannot fail.
            let _ = self.state.append(&event).await;
        }
    }
}

/// kimi-loop.md §8.1: the turn-end backstop text.
pub fn abandoned_tool_output(cause: &str) -> String {
    format!(
        "Tool call did not complete: {cause} before its result was recorded. Do not assume the \
         tool completed successfully."
    )
}
