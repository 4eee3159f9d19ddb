//! The host's context memory (kimi-loop.md §8.3 `appendLoopEvent`): the same fold runs live
//! and on replay, so a step's assistant message and tool results are visible to the next
//! `buildMessages`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::kimi::turn_loop::events::{LoopRecordedEvent, ToolResultEvent};
use crate::model::kimi::turn_loop::result::{ToolOutput, ToolResult};
use crate::model::kimi::turn_loop::types::{ContentPart, Message, Role, ToolCall};

/// kimi-loop.md §8.3: the synthetic result for calls still pending at a new `step.begin` or
/// at the end of a resume.
pub const INTERRUPTED_TOOL_OUTPUT: &str = "Tool execution was interrupted before its result was \
recorded. Do not assume the tool completed successfully.";

/// Where a context message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// A real user message (adjacent ones are merged by the projector).
    User,
    /// A model step.
    Assistant,
    /// A tool result.
    Tool,
    /// Injected by the host (reminders, hook output).
    Host,
    /// A compaction summary.
    Compaction,
}

/// One history entry: a model-visible message plus host metadata (stripped on projection).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextMessage {
    /// The role.
    pub role: Role,
    /// The content.
    pub content: Vec<ContentPart>,
    /// Tool calls (assistant only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The answered call (tool only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Where it came from.
    pub origin: Origin,
    /// A tool error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// A tool note, appended at projection time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Dropped by the projector.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

impl ContextMessage {
    /// A real user message.
    pub fn user(content: Vec<ContentPart>) -> Self {
        Self {
            role: Role::User,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            origin: Origin::User,
            is_error: false,
            note: None,
            partial: false,
        }
    }

    fn assistant() -> Self {
        Self {
            role: Role::Assistant,
            origin: Origin::Assistant,
            ..Self::user(Vec::new())
        }
    }

    /// A tool message for a result.
    pub fn tool(tool_call_id: &str, result: &ToolResult) -> Self {
        let content = match &result.output {
            ToolOutput::Text(text) => vec![ContentPart::text(text.clone())],
            ToolOutput::Parts(parts) => parts.clone(),
        };
        Self {
            role: Role::Tool,
            content,
            tool_call_id: Some(tool_call_id.to_owned()),
            origin: Origin::Tool,
            is_error: result.is_error,
            note: result.note.clone(),
            ..Self::user(Vec::new())
        }
    }

    /// The bare message (metadata stripped).
    pub fn to_message(&self) -> Message {
        Message {
            role: self.role,
            content: self.content.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
        }
    }
}

/// Why the fold rejected an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldError(pub String);

/// The fold of recorded events and host messages into a history.
#[derive(Debug, Clone, Default)]
pub struct ContextMemory {
    history: Vec<ContextMessage>,
    open_steps: BTreeMap<String, usize>,
    pending: Vec<String>,
    deferred: Vec<ContextMessage>,
    token_count: u64,
    /// Planted (`LoopBugs::context_count_without_cache`): `step.end` counts input and output
    /// only.
    count_without_cache: bool,
}

impl ContextMemory {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty context whose `step.end` leaves cache reads and creations out of the token
    /// count (the planted `LoopBugs::context_count_without_cache`).
    pub fn counting_without_cache() -> Self {
        Self {
            count_without_cache: true,
            ..Self::default()
        }
    }

    /// The history.
    pub fn history(&self) -> &[ContextMessage] {
        &self.history
    }

    /// Tool-call ids recorded without a result yet, in call order.
    pub fn pending_tool_calls(&self) -> &[String] {
        &self.pending
    }

    /// The context token count: the last `step.end` usage, or an estimate (kimi-loop.md §8.3).
    /// What a status line shows as the context's fill.
    pub fn token_count(&self) -> u64 {
        self.token_count
    }

    /// Append a host message. While tool results are pending it is deferred until the exchange
    /// closes, which keeps tool-call/result adjacency.
    pub fn append_message(&mut self, message: ContextMessage) {
        if self.pending.is_empty() {
            self.history.push(message);
        } else {
            self.deferred.push(message);
        }
    }

    /// Replace `history[..keep_from]` with one message (compaction).
    pub fn compact(&mut self, keep_from: usize, summary: ContextMessage) {
        let kept = self.history.split_off(keep_from.min(self.history.len()));
        self.history = std::iter::once(summary).chain(kept).collect();
        self.open_steps.clear();
        self.token_count = estimate_tokens(&self.history);
    }

    fn close_pending(&mut self, text: &str) {
        for id in std::mem::take(&mut self.pending) {
            self.history
                .push(ContextMessage::tool(&id, &ToolResult::error(text)));
        }
        self.flush_deferred();
    }

    fn flush_deferred(&mut self) {
        if self.pending.is_empty() {
            self.history.append(&mut self.deferred);
        }
    }

    /// `finishResume`: pending calls get the interrupted result.
    pub fn finish_resume(&mut self) {
        self.close_pending(INTERRUPTED_TOOL_OUTPUT);
    }

    /// Apply one recorded loop event.
    pub fn apply(&mut self, event: &LoopRecordedEvent) -> Result<(), FoldError> {
        match event {
            LoopRecordedEvent::StepBegin(begin) => {
                self.close_pending(INTERRUPTED_TOOL_OUTPUT);
                self.history.push(ContextMessage::assistant());
                self.open_steps
                    .insert(begin.uuid.clone(), self.history.len() - 1);
            }
            LoopRecordedEvent::ContentPart(part) => {
                let index = self.open_step(&part.step_uuid)?;
                self.history[index].content.push(part.part.clone());
            }
            LoopRecordedEvent::ToolCall(call) => {
                let index = self.open_step(&call.step_uuid)?;
                self.history[index].tool_calls.push(ToolCall {
                    id: call.tool_call_id.clone(),
                    name: call.name.clone(),
                    arguments: Some(call.args.to_string()),
                    extras: call.extras.clone(),
                });
                self.pending.push(call.tool_call_id.clone());
            }
            LoopRecordedEvent::ToolResult(result) => self.apply_result(result),
            LoopRecordedEvent::StepEnd(end) => {
                self.open_steps.remove(&end.uuid);
                let total = if self.count_without_cache {
                    end.usage.input_other + end.usage.output
                } else {
                    end.usage.grand_total()
                };
                // Choice: with no usage the count becomes an estimate of the whole history
                // (the reference adds an estimate of the uncovered messages only).
                self.token_count = if total > 0 {
                    total
                } else {
                    estimate_tokens(&self.history)
                };
                self.flush_deferred();
            }
        }
        Ok(())
    }

    fn open_step(&self, step_uuid: &str) -> Result<usize, FoldError> {
        self.open_steps
            .get(step_uuid)
            .copied()
            .ok_or_else(|| FoldError(format!("no open step {step_uuid}")))
    }

    fn apply_result(&mut self, result: &ToolResultEvent) {
        let Some(position) = self
            .pending
            .iter()
            .position(|id| *id == result.tool_call_id)
        else {
            return;
        };
        self.pending.remove(position);
        self.history
            .push(ContextMessage::tool(&result.tool_call_id, &result.result));
        self.flush_deferred();
    }
}

/// Choice: a token estimate of four characters per token over text, think and arguments.
pub fn estimate_tokens(history: &[ContextMessage]) -> u64 {
    let characters: usize = history
        .iter()
        .map(|message| {
            let parts: usize = message
                .content
                .iter()
                .map(|part| match part {
                    ContentPart::Text { text } => text.len(),
                    ContentPart::Think { think, .. } => think.len(),
                    _ => 256,
                })
                .sum();
            let calls: usize = message
                .tool_calls
                .iter()
                .map(|call| call.name.len() + call.arguments.as_ref().map_or(0, String::len))
                .sum();
            parts + calls
        })
        .sum();
    characters.div_ceil(4) as u64
}
