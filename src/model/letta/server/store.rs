//! The server's durable store: agents, conversations, messages, runs and their chunk logs, and
//! the request-token / otid maps.
//!
//! Durability (docs/server.md, "Durable store"): every write to the store is durable the moment
//! it is made. The harness keeps the store in an `Arc` outside the server's host task, so a
//! crashed and restarted server finds everything it acknowledged: a message appended to a
//! conversation (echoed or not), a run record, every chunk recorded in a run's log, the
//! request-token and otid maps. What is lost in a crash is only what lived in tasks: the run
//! tasks talking to the provider and the open responses. On start-up [`Store::recover`] ends
//! every run a crash left unfinished with the `stream_incomplete` synthesis of
//! letta-protocol.md §1.1 and releases its conversation lock.

use std::collections::BTreeMap;

use crate::model::port::signal;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use super::Profile;
use super::ids;
use crate::wire::letta::{LettaChunk, RunStatus, StopReason};

/// An agent (letta-protocol.md §2.1 retrieve agent; B.3 create / patch).
#[derive(Debug, Clone)]
pub struct Agent {
    pub id: String,
    pub name: String,
    pub model: String,
    pub system: String,
    pub tags: Vec<String>,
    /// Other fields a client PATCHed or created with (model_settings, context_window_limit, …),
    /// echoed back as they were given.
    pub extra: serde_json::Map<String, Value>,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// One tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// What a stored message is.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageBody {
    System {
        text: String,
    },
    User {
        /// The content as the client sent it (string or parts).
        content: Value,
    },
    Assistant {
        text: String,
        tool_calls: Vec<StoredToolCall>,
    },
    /// The approval input of a continuation, as listed (`approval_response_message`).
    ApprovalResponse {
        approvals: Vec<Value>,
    },
    /// A tool result: a client tool's return, a denial, or a settlement.
    Tool {
        tool_call_id: String,
        /// What the model sees.
        content: String,
        /// What a listing shows as `tool_return`.
        tool_return: String,
        status: String,
        is_error: bool,
    },
}

/// A message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub otid: Option<String>,
    pub run_id: Option<String>,
    pub step_id: Option<String>,
    /// Milliseconds of simulated (or real) time when it was written.
    pub at_ms: u64,
    pub body: MessageBody,
}

impl Message {
    /// How many `history` trace events this message stands for (one per user message, assistant
    /// message, tool call and tool result): what `durable-ack` counts.
    pub fn history_units(&self) -> u64 {
        match &self.body {
            MessageBody::System { .. } | MessageBody::ApprovalResponse { .. } => 0,
            MessageBody::User { .. } | MessageBody::Tool { .. } => 1,
            MessageBody::Assistant { tool_calls, .. } => 1 + tool_calls.len() as u64,
        }
    }
}

/// A conversation. The agent's default conversation is stored under the agent id (captures a4,
/// c2: `/v1/conversations/<agent id>/messages` addresses it).
#[derive(Debug, Default)]
pub struct Conversation {
    pub id: String,
    pub agent_id: String,
    pub summary: Option<String>,
    /// Message ids in order; all are in context (the system message first).
    pub messages: Vec<String>,
    /// Tool calls awaiting an approval continuation, and the message that asked.
    pub pending: Vec<StoredToolCall>,
    pub pending_message_id: Option<String>,
    /// The run holding the conversation lock (letta-protocol.md §11).
    pub active_run: Option<String>,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// One frame in a run's log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub seq_id: u64,
    /// The JSON payload as a background stream shows it (seq_id/run_id set where shown).
    pub json: String,
    /// The same payload as a foreground stream shows it (`seq_id` null: captures PROVENANCE,
    /// "Foreground streams: seq_id is null on every frame").
    pub fg_json: String,
    /// `Some("error")` for the `event: error` frame.
    pub event: Option<&'static str>,
    pub message_type: String,
}

#[derive(Debug)]
pub struct Run {
    pub id: String,
    pub agent_id: String,
    pub conversation_id: String,
    pub status: RunStatus,
    pub stop_reason: Option<StopReason>,
    pub background: bool,
    pub log: Vec<LogEntry>,
    /// The body ends with `[DONE]` after the log (success, or a foreground pre-output error).
    pub done_marker: bool,
    pub finished: bool,
    /// `metadata.error` of the run object (letta-protocol.md §7.4 shape).
    pub error: Option<Value>,
    pub request_token: Option<String>,
    pub created_ms: u64,
    pub completed_ms: Option<u64>,
    /// A cancel asked the run task to stop.
    pub cancel_requested: bool,
    /// Bumped on every append; followers wait on it.
    pub changed: signal::Sender<u64>,
}

impl Run {
    /// The run object of `GET /v1/runs/{id}` (letta-protocol.md §1.5 run object; B.5.6 fields
    /// read: id, status, stop_reason, agent_id, created_at, metadata.error).
    pub fn to_json(&self, epoch_ms: u64) -> Value {
        let mut metadata = serde_json::Map::new();
        if let Some(e) = &self.error {
            metadata.insert("error".into(), e.clone());
        }
        json!({
            "id": self.id,
            "agent_id": self.agent_id,
            "conversation_id": self.conversation_id,
            "status": self.status,
            "stop_reason": self.stop_reason.as_ref().map(StopReason::as_str),
            "background": self.background,
            "created_at": ids::iso_datetime(epoch_ms + self.created_ms),
            "completed_at": self.completed_ms.map(|c| ids::iso_datetime(epoch_ms + c)),
            "metadata": Value::Object(metadata),
        })
    }
}

/// What recovery after a restart found (reported as `server_recovered`).
#[derive(Debug, Clone, Default)]
pub struct Recovery {
    /// (conversation id, history units) per conversation.
    pub histories: Vec<(String, u64)>,
    /// (run id, chunks in its log) per run.
    pub runs: Vec<(String, u64)>,
    /// Runs a crash had left running, now ended `stream_incomplete`.
    pub interrupted: Vec<String>,
}

/// The server's durable state.
pub struct Store {
    rng: ChaCha8Rng,
    /// Counter for the local profile's sequential ids.
    counter: u64,
    pub agents: BTreeMap<String, Agent>,
    pub conversations: BTreeMap<String, Conversation>,
    pub messages: BTreeMap<String, Message>,
    pub runs: BTreeMap<String, Run>,
    /// Request token → run id (letta-protocol.md §2.4).
    pub tokens: BTreeMap<String, String>,
    /// otid → run id (letta-protocol.md §2.4).
    pub otids: BTreeMap<String, String>,
    /// Streaming responses sent so far (for fault hooks).
    pub responses: u64,
    /// Message sends received so far (for fault hooks).
    pub sends: u64,
    /// `POST /v1/runs/{id}/stream` requests received so far (for fault hooks).
    pub run_streams: u64,
    /// `GET /v1/runs/{id}` requests received so far (for fault hooks).
    pub run_reads: u64,
    /// How many times the server has started on this store.
    pub starts: u64,
    /// Usage-derived tokens of each assistant message whose provider response reported usage
    /// (the context estimate's anchor, letta-protocol.md §8.4).
    pub usage: BTreeMap<String, u64>,
    /// Compaction summary messages: `metadata.compaction` of each (letta-protocol.md §8.6).
    pub summaries: BTreeMap<String, SummaryRecord>,
}

/// `metadata.compaction` of a summary message: the raw summary, its stats and mode.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRecord {
    pub summary: String,
    pub stats: Value,
    pub mode: String,
    /// The ids of the messages the summary stands for (the summariser was shown them).
    pub stands_for: Vec<String>,
}

impl Store {
    /// A store with the given agents, each with its default conversation.
    pub fn new(seed: u64, agents: &[super::AgentConfig]) -> Self {
        let mut s = Store {
            rng: ChaCha8Rng::seed_from_u64(seed),
            counter: 0,
            agents: BTreeMap::new(),
            conversations: BTreeMap::new(),
            messages: BTreeMap::new(),
            runs: BTreeMap::new(),
            tokens: BTreeMap::new(),
            otids: BTreeMap::new(),
            responses: 0,
            sends: 0,
            run_streams: 0,
            run_reads: 0,
            starts: 0,
            usage: BTreeMap::new(),
            summaries: BTreeMap::new(),
        };
        for a in agents {
            s.agents.insert(
                a.id.clone(),
                Agent {
                    id: a.id.clone(),
                    name: a.id.clone(),
                    model: a.model.clone(),
                    system: DEFAULT_SYSTEM.into(),
                    tags: Vec::new(),
                    extra: serde_json::Map::new(),
                    created_ms: 0,
                    updated_ms: 0,
                },
            );
            s.conversations.insert(
                a.id.clone(),
                Conversation {
                    id: a.id.clone(),
                    agent_id: a.id.clone(),
                    ..Conversation::default()
                },
            );
        }
        s
    }

    pub fn uuid(&mut self) -> String {
        ids::uuid4(&mut self.rng)
    }

    fn next_n(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// A new id of `kind` in the profile's format (letta-protocol.md §1.7).
    pub fn new_id(&mut self, profile: Profile, kind: IdKind) -> String {
        match profile {
            Profile::Cloud | Profile::LettaOss016 => {
                let prefix = match kind {
                    IdKind::Agent => "agent",
                    IdKind::Conversation => "conv",
                    IdKind::Run => "run",
                    IdKind::Message | IdKind::Chunk => "message",
                    IdKind::Step => "step",
                    IdKind::Ping => "ping",
                };
                format!("{prefix}-{}", self.uuid())
            }
            Profile::Local => {
                let n = self.next_n();
                match kind {
                    IdKind::Agent => format!("agent-local-{n}"),
                    IdKind::Conversation => format!("local-conv-{n}"),
                    IdKind::Run => format!("local-run-{n}"),
                    IdKind::Message => format!("ui-msg-{n}"),
                    IdKind::Chunk => format!("letta-msg-{n}"),
                    IdKind::Step => format!("local-step-{n}"),
                    IdKind::Ping => format!("ping-{}", self.uuid()),
                }
            }
        }
    }

    /// Whether a listing shows the message yet. 0.16.8 persists a send's user messages with
    /// its run's first step: while that step runs they are in neither the `GET …/messages`
    /// listing nor `in_context_message_ids` (captures/letta_e2e e: the tail read during the
    /// slow run is `[]` and the context holds only the system message). A run that ended
    /// without a step keeps its input listed.
    pub fn listed(&self, m: &Message, profile: Profile) -> bool {
        if !profile.oss() || !matches!(m.body, MessageBody::User { .. }) {
            return true;
        }
        let Some(run_id) = m.run_id.as_deref() else {
            return true;
        };
        if self.runs.get(run_id).is_none_or(|r| r.finished) {
            return true;
        }
        self.messages.values().any(|o| {
            o.run_id.as_deref() == Some(run_id) && matches!(o.body, MessageBody::Assistant { .. })
        })
    }

    /// Files a run's user messages under the run's first model step, as 0.16.8 lists them: the
    /// input messages of a send and the approval request its step streamed share that step's id
    /// (captures/letta_e2e c and d, the `GET …/messages` tails). Until that step starts they
    /// keep the step id the send was written under. Only the first step re-files: once the run
    /// has an assistant message its input is settled.
    pub fn file_input_under_step(&mut self, conversation_id: &str, run_id: &str, step_id: &str) {
        let Some(conv) = self.conversations.get(conversation_id) else {
            return;
        };
        let of_run: Vec<String> = conv
            .messages
            .iter()
            .filter(|id| {
                self.messages
                    .get(*id)
                    .is_some_and(|m| m.run_id.as_deref() == Some(run_id))
            })
            .cloned()
            .collect();
        if of_run.iter().any(|id| {
            matches!(
                self.messages.get(id).map(|m| &m.body),
                Some(MessageBody::Assistant { .. })
            )
        }) {
            return;
        }
        for id in of_run {
            if let Some(m) = self.messages.get_mut(&id)
                && matches!(m.body, MessageBody::User { .. })
            {
                m.step_id = Some(step_id.to_string());
            }
        }
    }

    /// Appends a message to a conversation.
    pub fn push_message(&mut self, conversation_id: &str, message: Message) {
        let conv = self
            .conversations
            .get_mut(conversation_id)
            .expect("pushing into a known conversation");
        conv.messages.push(message.id.clone());
        conv.updated_ms = message.at_ms;
        self.messages.insert(message.id.clone(), message);
    }

    /// The messages of a conversation, in order.
    pub fn conversation_messages(&self, conversation_id: &str) -> Vec<&Message> {
        self.conversations
            .get(conversation_id)
            .map(|c| {
                c.messages
                    .iter()
                    .filter_map(|id| self.messages.get(id))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Tool calls of a conversation that have no result yet, in order.
    pub fn open_calls(&self, conv_id: &str) -> Vec<StoredToolCall> {
        let msgs = self.conversation_messages(conv_id);
        let resolved: Vec<&str> = msgs
            .iter()
            .filter_map(|m| match &m.body {
                MessageBody::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        let mut out = Vec::new();
        for m in &msgs {
            if let MessageBody::Assistant { tool_calls, .. } = &m.body {
                for c in tool_calls {
                    if !resolved.contains(&c.id.as_str()) {
                        out.push(c.clone());
                    }
                }
            }
        }
        out
    }

    /// Ensures a conversation has its system message (written lazily, when first read or
    /// written, so an agent's default conversation gets one too).
    pub fn ensure_system_message(&mut self, profile: Profile, conversation_id: &str, at_ms: u64) {
        let Some(conv) = self.conversations.get(conversation_id) else {
            return;
        };
        if !conv.messages.is_empty() {
            return;
        }
        let system = self
            .agents
            .get(&conv.agent_id)
            .map(|a| a.system.clone())
            .unwrap_or_else(|| DEFAULT_SYSTEM.into());
        let id = self.new_id(profile, IdKind::Message);
        self.push_message(
            conversation_id,
            Message {
                id,
                otid: None,
                run_id: None,
                step_id: None,
                at_ms,
                body: MessageBody::System { text: system },
            },
        );
    }

    /// Appends a chunk to a run's log, assigning the next `seq_id`. `stamp_envelope` says
    /// whether the frame shows `seq_id`/`run_id` (cloud `stop_reason`/`usage_statistics` frames
    /// do not, yet use a number: captures g_*_bg).
    pub fn record(
        &mut self,
        run_id: &str,
        mut chunk: LettaChunk,
        event: Option<&'static str>,
        local: bool,
    ) -> u64 {
        let run = self
            .runs
            .get_mut(run_id)
            .expect("recording into a known run");
        let seq = run.log.len() as u64 + 1;
        if let Some(env) = chunk.envelope_mut() {
            env.seq_id = Some(seq);
            env.run_id = Some(run_id.to_string());
        }
        let message_type = chunk.message_type().to_string();
        let (json, fg_json) = match &chunk {
            // The error frame's field order (captures g_*): message_type, run_id, error_type,
            // message, detail, seq_id.
            LettaChunk::ErrorMessage(e) if !local => {
                let mk = |s: Value| {
                    json!({
                        "message_type": "error_message",
                        "run_id": run_id,
                        "error_type": e.error_type,
                        "message": e.message,
                        "detail": e.detail,
                        "seq_id": s,
                    })
                    .to_string()
                };
                (mk(json!(seq)), mk(Value::Null))
            }
            // Local: every recorded chunk carries run_id and seq_id, stop_reason included
            // (letta-protocol.md §7.4 recordRunChunk).
            LettaChunk::StopReason(_)
            | LettaChunk::UsageStatistics(_)
            | LettaChunk::ErrorMessage(_)
                if local =>
            {
                let mut v: Value = serde_json::from_str(&chunk.to_json()).expect("own json");
                if let Some(o) = v.as_object_mut() {
                    o.insert("run_id".into(), json!(run_id));
                    o.insert("seq_id".into(), json!(seq));
                }
                let s = v.to_string();
                (s.clone(), s)
            }
            _ => {
                let bg = chunk.to_json();
                if let Some(env) = chunk.envelope_mut() {
                    env.seq_id = None;
                }
                (bg, chunk.to_json())
            }
        };
        run.log.push(LogEntry {
            seq_id: seq,
            json,
            fg_json,
            event,
            message_type,
        });
        run.changed.send_modify(|n| *n += 1);
        seq
    }

    /// After a restart: ends every run a crash left unfinished (stop_reason `error`, then the
    /// `stream_incomplete` error frame, letta-protocol.md §1.1), releases its lock, and reports
    /// what the store holds.
    pub fn recover(&mut self, profile: Profile, now_ms: u64) -> Recovery {
        self.starts += 1;
        let mut rec = Recovery::default();
        let unfinished: Vec<String> = self
            .runs
            .values()
            .filter(|r| !r.finished)
            .map(|r| r.id.clone())
            .collect();
        let local = profile == Profile::Local;
        for run_id in &unfinished {
            self.record(
                run_id,
                LettaChunk::StopReason(crate::wire::letta::StopReasonChunk::new(StopReason::Error)),
                None,
                local,
            );
            self.record(
                run_id,
                LettaChunk::ErrorMessage(crate::wire::letta::ErrorMessage {
                    error_type: "stream_incomplete".into(),
                    message: super::STREAM_INCOMPLETE_MESSAGE.into(),
                    detail: Some(super::STREAM_INCOMPLETE_MESSAGE.into()),
                    ..Default::default()
                }),
                Some("error"),
                local,
            );
            let run = self.runs.get_mut(run_id).expect("known run");
            run.status = RunStatus::Failed;
            run.stop_reason = Some(StopReason::Error);
            run.finished = true;
            run.completed_ms = Some(now_ms);
            run.error = Some(super::run_error_metadata(
                local,
                run_id,
                "stream_incomplete",
                super::STREAM_INCOMPLETE_MESSAGE,
                super::STREAM_INCOMPLETE_MESSAGE,
            ));
            run.changed.send_modify(|n| *n += 1);
            let conv_id = run.conversation_id.clone();
            if let Some(c) = self.conversations.get_mut(&conv_id)
                && c.active_run.as_deref() == Some(run_id.as_str())
            {
                c.active_run = None;
            }
        }
        rec.interrupted = unfinished;
        for (id, c) in &self.conversations {
            let units = c
                .messages
                .iter()
                .filter_map(|m| self.messages.get(m))
                .map(Message::history_units)
                .sum();
            rec.histories.push((id.clone(), units));
        }
        for (id, r) in &self.runs {
            rec.runs.push((id.clone(), r.log.len() as u64));
        }
        rec
    }

    /// Deliberate defect `server_volatile_writes` (breaks `durable-ack`): on restart, everything
    /// written by runs a crash interrupted is dropped, as if it had only been in a write-back
    /// cache. Never called by a faithful server.
    pub fn lose_unflushed_writes(&mut self) {
        let unfinished: Vec<String> = self
            .runs
            .values()
            .filter(|r| !r.finished)
            .map(|r| r.id.clone())
            .collect();
        for run_id in &unfinished {
            if let Some(r) = self.runs.get_mut(run_id) {
                r.log.clear();
            }
            let doomed: Vec<String> = self
                .messages
                .values()
                .filter(|m| m.run_id.as_deref() == Some(run_id.as_str()))
                .map(|m| m.id.clone())
                .collect();
            for id in &doomed {
                self.messages.remove(id);
            }
            for c in self.conversations.values_mut() {
                c.messages.retain(|m| !doomed.contains(m));
            }
        }
    }
}

/// Kinds of id the server mints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Agent,
    Conversation,
    Run,
    /// A stored message (cloud `message-<uuid>`; local `ui-msg-<n>`).
    Message,
    /// A streamed chunk's id (cloud: the message id; local `letta-msg-<n>`, one per chunk).
    Chunk,
    Step,
    Ping,
}

/// The user every object of a single-user Letta server belongs to (captures/letta_e2e: every
/// `created_by_id`).
pub const DEFAULT_USER: &str = "user-00000000-0000-4000-8000-000000000000";

/// The system prompt of agents the scenario declares (created agents bring their own).
pub const DEFAULT_SYSTEM: &str = "You are a helpful assistant.";

#[cfg(test)]
mod tests {
    use super::super::AgentConfig;
    use super::*;

    fn message(id: &str, run_id: &str, body: MessageBody) -> Message {
        Message {
            id: id.into(),
            otid: None,
            run_id: Some(run_id.into()),
            step_id: None,
            at_ms: 0,
            body,
        }
    }

    /// Letta 0.16.8 lists a send's user message only once its run's first step has written
    /// the model's answer, or the run has ended (captures/letta_e2e e); the other profiles list
    /// it at once.
    /// A store with one agent and its run `run-1`, still running.
    fn store_with_a_running_run() -> Store {
        let mut st = Store::new(
            0,
            &[AgentConfig {
                id: "agent-1".into(),
                model: "anthropic/claude-sonnet-4-20250514".into(),
            }],
        );
        let (changed, _) = signal::channel(0);
        st.runs.insert(
            "run-1".into(),
            Run {
                id: "run-1".into(),
                agent_id: "agent-1".into(),
                conversation_id: "agent-1".into(),
                status: RunStatus::Running,
                stop_reason: None,
                background: true,
                log: Vec::new(),
                done_marker: false,
                finished: false,
                error: None,
                request_token: None,
                created_ms: 0,
                completed_ms: None,
                cancel_requested: false,
                changed,
            },
        );
        st
    }

    /// A restart ends a run the crash left unfinished as §1.1's server does a run without a
    /// terminal: stop_reason `error`, then the `stream_incomplete` error frame, whose texts
    /// are the ones the run object then reports.
    #[test]
    fn a_restart_ends_an_unfinished_run_with_the_stream_incomplete_frames() {
        let mut st = store_with_a_running_run();
        st.recover(Profile::Cloud, 7);
        let run = &st.runs["run-1"];
        let frames: Vec<(Option<&str>, Value)> = run
            .log
            .iter()
            .map(|e| (e.event, serde_json::from_str(&e.json).unwrap()))
            .collect();
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(frames[0].0, None);
        assert_eq!(frames[0].1["message_type"], "stop_reason");
        assert_eq!(frames[0].1["stop_reason"], "error");
        let (event, error) = &frames[1];
        assert_eq!(*event, Some("error"));
        assert_eq!(error["message_type"], "error_message");
        assert_eq!(error["error_type"], "stream_incomplete");
        for key in ["message", "detail"] {
            assert_eq!(
                error[key], "Stream ended unexpectedly without a terminal event.",
                "{key}"
            );
        }
        let meta = run.error.as_ref().unwrap();
        for key in ["error_type", "message", "detail"] {
            assert_eq!(meta[key], error[key], "{key}");
        }
        assert!((run.finished, run.completed_ms) == (true, Some(7)));
    }

    #[test]
    fn a_running_sends_user_message_is_listed_on_the_oss_server_only_after_its_first_answer() {
        let mut st = store_with_a_running_run();
        let user = message(
            "m-user",
            "run-1",
            MessageBody::User {
                content: json!("hi"),
            },
        );
        assert!(!st.listed(&user, Profile::LettaOss016));
        assert!(st.listed(&user, Profile::Cloud));
        assert!(st.listed(&user, Profile::Local));
        st.push_message(
            "agent-1",
            message(
                "m-answer",
                "run-1",
                MessageBody::Assistant {
                    text: "hello".into(),
                    tool_calls: Vec::new(),
                },
            ),
        );
        assert!(st.listed(&user, Profile::LettaOss016));
        st.messages.remove("m-answer");
        st.runs.get_mut("run-1").unwrap().finished = true;
        assert!(st.listed(&user, Profile::LettaOss016));
    }
}
