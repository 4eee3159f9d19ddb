//! Letta wire types: the message-stream chunks a Letta server sends (letta-protocol.md §1.3-1.5)
//! and the request bodies a client sends (§2.2-2.3).
//!
//! Field order follows the real server's bytes (captures/letta_server/*.body.sse: `id, date,
//! name, message_type, otid, sender_id, step_id, is_err, seq_id, run_id`, then the type's own
//! fields), so a chunk we serialise has the same shape as one a Letta 0.16.8 server sends.
//! Decoding is tolerant: unknown fields are ignored, missing optional fields default, and a chunk
//! with an unknown `message_type` decodes to [`LettaChunk::Unknown`] keeping its JSON.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Envelope fields every message chunk carries (letta-protocol.md §1.3). `message_type` sits in
/// the middle, where the real server puts it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Envelope {
    pub id: String,
    pub date: String,
    pub name: Option<String>,
    pub message_type: String,
    pub otid: Option<String>,
    pub sender_id: Option<String>,
    pub step_id: Option<String>,
    pub is_err: Option<bool>,
    pub seq_id: Option<u64>,
    pub run_id: Option<String>,
}

/// Stop reasons of the SDK union (letta-protocol.md §1.5).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    Error,
    LlmApiError,
    InvalidLlmResponse,
    InvalidToolCall,
    MaxSteps,
    MaxTokensExceeded,
    NoToolCall,
    ToolRule,
    Cancelled,
    InsufficientCredits,
    RequiresApproval,
    ContextWindowOverflowInSystemPrompt,
    /// A value outside the union, kept verbatim.
    #[serde(untagged)]
    Other(String),
}

impl StopReason {
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::Error => "error",
            StopReason::LlmApiError => "llm_api_error",
            StopReason::InvalidLlmResponse => "invalid_llm_response",
            StopReason::InvalidToolCall => "invalid_tool_call",
            StopReason::MaxSteps => "max_steps",
            StopReason::MaxTokensExceeded => "max_tokens_exceeded",
            StopReason::NoToolCall => "no_tool_call",
            StopReason::ToolRule => "tool_rule",
            StopReason::Cancelled => "cancelled",
            StopReason::InsufficientCredits => "insufficient_credits",
            StopReason::RequiresApproval => "requires_approval",
            StopReason::ContextWindowOverflowInSystemPrompt => {
                "context_window_overflow_in_system_prompt"
            }
            StopReason::Other(s) => s,
        }
    }

    /// Run status for a terminal stop reason (letta-protocol.md §1.5, legacy server mapping).
    pub fn run_status(&self) -> RunStatus {
        match self {
            StopReason::EndTurn
            | StopReason::MaxSteps
            | StopReason::ToolRule
            | StopReason::RequiresApproval => RunStatus::Completed,
            StopReason::Cancelled => RunStatus::Cancelled,
            _ => RunStatus::Failed,
        }
    }
}

/// Run status (letta-protocol.md §1.5, run object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Created,
    Running,
    Completed,
    Failed,
    Cancelled,
}

/// A tool call or a tool-call delta: every key optional/nullable, since the cloud stream sends
/// the name once and the arguments as string deltas (letta-protocol.md §1.4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCallDelta {
    pub name: Option<String>,
    pub arguments: Option<String>,
    pub tool_call_id: Option<String>,
}

/// `tool_calls` is an array of tool calls, or a single delta object (real server 0.16.8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolCalls {
    Many(Vec<ToolCallDelta>),
    One(ToolCallDelta),
}

impl ToolCalls {
    pub fn as_slice(&self) -> &[ToolCallDelta] {
        match self {
            ToolCalls::Many(v) => v,
            ToolCalls::One(one) => std::slice::from_ref(one),
        }
    }
}

/// Message content: a string, or an array of parts (`{type:"text", text}` and others).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Value>),
}

impl Content {
    /// The concatenated text of all text parts.
    pub fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
        }
    }
}

impl Default for Content {
    fn default() -> Self {
        Content::Text(String::new())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AssistantMessage {
    #[serde(flatten)]
    pub env: Envelope,
    pub content: Content,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReasoningMessage {
    #[serde(flatten)]
    pub env: Envelope,
    pub source: Option<String>,
    pub reasoning: String,
    pub signature: Option<String>,
}

/// `tool_call_message` and `approval_request_message` share this shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCallMessage {
    #[serde(flatten)]
    pub env: Envelope,
    pub tool_call: Option<ToolCallDelta>,
    pub tool_calls: Option<ToolCalls>,
}

impl ToolCallMessage {
    /// The tool calls the StreamProcessor tracks: `tool_calls` when it is present, else
    /// `[tool_call]` (letta-protocol.md §4.1 rule 7; a single-object `tool_calls` counts).
    pub fn calls(&self) -> Vec<&ToolCallDelta> {
        match (&self.tool_calls, &self.tool_call) {
            (Some(many), _) => many.as_slice().iter().collect(),
            (None, Some(one)) => vec![one],
            (None, None) => Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolReturnMessage {
    #[serde(flatten)]
    pub env: Envelope,
    pub tool_return: String,
    pub status: String,
    pub tool_call_id: String,
    pub stdout: Option<Vec<String>>,
    pub stderr: Option<Vec<String>>,
    pub tool_returns: Option<Vec<Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalResponseMessage {
    #[serde(flatten)]
    pub env: Envelope,
    pub approve: Option<bool>,
    pub approval_request_id: Option<String>,
    pub reason: Option<String>,
    pub approvals: Option<Vec<Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserMessage {
    #[serde(flatten)]
    pub env: Envelope,
    pub content: Content,
}

/// A stop_reason chunk: no envelope, just the reason (letta-protocol.md §1.1). The local
/// backend records it like every chunk, with `run_id` and `seq_id` (§7.4 `recordRunChunk`); a
/// server's schema has neither, so they are written only when set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopReasonChunk {
    pub message_type: String,
    pub stop_reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

impl StopReasonChunk {
    /// A stop_reason chunk of `stop_reason`, without run or seq id.
    pub fn new(stop_reason: StopReason) -> Self {
        StopReasonChunk {
            message_type: "stop_reason".into(),
            stop_reason,
            seq_id: None,
            run_id: None,
        }
    }
}

/// Usage: additive counters, except `context_tokens` which is a snapshot (§1.4). `seq_id` and
/// `run_id` as on [`StopReasonChunk`]: the local backend's, written only when set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageStatistics {
    pub message_type: String,
    pub completion_tokens: u64,
    pub prompt_tokens: u64,
    pub total_tokens: u64,
    pub step_count: u64,
    pub run_ids: Option<Vec<String>>,
    pub cached_input_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub context_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ErrorMessage {
    #[serde(flatten)]
    pub env: Envelope,
    pub error_type: String,
    pub message: String,
    pub detail: Option<String>,
}

/// A chunk with only the envelope and free-form extra fields (ping, system, event, summary,
/// hidden reasoning, response_state): the client reads at most a field or two of these.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GenericMessage {
    #[serde(flatten)]
    pub env: Envelope,
    #[serde(flatten)]
    pub fields: serde_json::Map<String, Value>,
}

/// One Letta stream chunk (letta-protocol.md §1.4).
#[derive(Debug, Clone, PartialEq)]
pub enum LettaChunk {
    AssistantMessage(AssistantMessage),
    ReasoningMessage(ReasoningMessage),
    HiddenReasoningMessage(GenericMessage),
    ToolCallMessage(ToolCallMessage),
    ApprovalRequestMessage(ToolCallMessage),
    ToolReturnMessage(ToolReturnMessage),
    ApprovalResponseMessage(ApprovalResponseMessage),
    UserMessage(UserMessage),
    SystemMessage(GenericMessage),
    EventMessage(GenericMessage),
    SummaryMessage(GenericMessage),
    StopReason(StopReasonChunk),
    UsageStatistics(UsageStatistics),
    Ping(GenericMessage),
    ErrorMessage(ErrorMessage),
    ResponseState(GenericMessage),
    /// A JSON object whose `message_type` this build does not know (or that has none), kept.
    Unknown(Value),
}

impl LettaChunk {
    pub fn message_type(&self) -> &str {
        match self {
            LettaChunk::AssistantMessage(_) => "assistant_message",
            LettaChunk::ReasoningMessage(_) => "reasoning_message",
            LettaChunk::HiddenReasoningMessage(_) => "hidden_reasoning_message",
            LettaChunk::ToolCallMessage(_) => "tool_call_message",
            LettaChunk::ApprovalRequestMessage(_) => "approval_request_message",
            LettaChunk::ToolReturnMessage(_) => "tool_return_message",
            LettaChunk::ApprovalResponseMessage(_) => "approval_response_message",
            LettaChunk::UserMessage(_) => "user_message",
            LettaChunk::SystemMessage(_) => "system_message",
            LettaChunk::EventMessage(_) => "event_message",
            LettaChunk::SummaryMessage(_) => "summary_message",
            LettaChunk::StopReason(_) => "stop_reason",
            LettaChunk::UsageStatistics(_) => "usage_statistics",
            LettaChunk::Ping(_) => "ping",
            LettaChunk::ErrorMessage(_) => "error_message",
            LettaChunk::ResponseState(_) => "response_state",
            LettaChunk::Unknown(v) => v
                .get("message_type")
                .and_then(Value::as_str)
                .unwrap_or("unknown"),
        }
    }

    /// The envelope, for chunk kinds that have one.
    pub fn envelope(&self) -> Option<&Envelope> {
        Some(match self {
            LettaChunk::AssistantMessage(m) => &m.env,
            LettaChunk::ReasoningMessage(m) => &m.env,
            LettaChunk::ToolCallMessage(m) | LettaChunk::ApprovalRequestMessage(m) => &m.env,
            LettaChunk::ToolReturnMessage(m) => &m.env,
            LettaChunk::ApprovalResponseMessage(m) => &m.env,
            LettaChunk::UserMessage(m) => &m.env,
            LettaChunk::ErrorMessage(m) => &m.env,
            LettaChunk::HiddenReasoningMessage(m)
            | LettaChunk::SystemMessage(m)
            | LettaChunk::EventMessage(m)
            | LettaChunk::SummaryMessage(m)
            | LettaChunk::Ping(m)
            | LettaChunk::ResponseState(m) => &m.env,
            LettaChunk::StopReason(_) | LettaChunk::UsageStatistics(_) | LettaChunk::Unknown(_) => {
                return None;
            }
        })
    }

    pub fn envelope_mut(&mut self) -> Option<&mut Envelope> {
        Some(match self {
            LettaChunk::AssistantMessage(m) => &mut m.env,
            LettaChunk::ReasoningMessage(m) => &mut m.env,
            LettaChunk::ToolCallMessage(m) | LettaChunk::ApprovalRequestMessage(m) => &mut m.env,
            LettaChunk::ToolReturnMessage(m) => &mut m.env,
            LettaChunk::ApprovalResponseMessage(m) => &mut m.env,
            LettaChunk::UserMessage(m) => &mut m.env,
            LettaChunk::ErrorMessage(m) => &mut m.env,
            LettaChunk::HiddenReasoningMessage(m)
            | LettaChunk::SystemMessage(m)
            | LettaChunk::EventMessage(m)
            | LettaChunk::SummaryMessage(m)
            | LettaChunk::Ping(m)
            | LettaChunk::ResponseState(m) => &mut m.env,
            LettaChunk::StopReason(_) | LettaChunk::UsageStatistics(_) | LettaChunk::Unknown(_) => {
                return None;
            }
        })
    }

    /// `seq_id`, from the envelope or (for unknown chunks) the raw JSON.
    pub fn seq_id(&self) -> Option<u64> {
        match self {
            LettaChunk::Unknown(v) => v.get("seq_id").and_then(Value::as_u64),
            LettaChunk::StopReason(c) => c.seq_id,
            LettaChunk::UsageStatistics(c) => c.seq_id,
            other => other.envelope().and_then(|e| e.seq_id),
        }
    }

    /// `run_id`, from the envelope or (for unknown chunks) the raw JSON.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            LettaChunk::Unknown(v) => v.get("run_id").and_then(Value::as_str),
            LettaChunk::StopReason(c) => c.run_id.as_deref(),
            LettaChunk::UsageStatistics(c) => c.run_id.as_deref(),
            other => other.envelope().and_then(|e| e.run_id.as_deref()),
        }
    }

    /// Parses one `data:` payload. An unknown or missing `message_type` is [`LettaChunk::Unknown`];
    /// only text that is not a JSON object, or a known type with a field of the wrong JSON type,
    /// is an error.
    pub fn from_json(text: &str) -> Result<LettaChunk, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("Letta chunks always serialise")
    }
}

impl Serialize for LettaChunk {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            LettaChunk::AssistantMessage(m) => m.serialize(s),
            LettaChunk::ReasoningMessage(m) => m.serialize(s),
            LettaChunk::ToolCallMessage(m) | LettaChunk::ApprovalRequestMessage(m) => {
                m.serialize(s)
            }
            LettaChunk::ToolReturnMessage(m) => m.serialize(s),
            LettaChunk::ApprovalResponseMessage(m) => m.serialize(s),
            LettaChunk::UserMessage(m) => m.serialize(s),
            LettaChunk::StopReason(m) => m.serialize(s),
            LettaChunk::UsageStatistics(m) => m.serialize(s),
            LettaChunk::ErrorMessage(m) => m.serialize(s),
            LettaChunk::HiddenReasoningMessage(m)
            | LettaChunk::SystemMessage(m)
            | LettaChunk::EventMessage(m)
            | LettaChunk::SummaryMessage(m)
            | LettaChunk::Ping(m)
            | LettaChunk::ResponseState(m) => m.serialize(s),
            LettaChunk::Unknown(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for LettaChunk {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        if !v.is_object() {
            return Err(D::Error::custom("a Letta chunk must be a JSON object"));
        }
        let ty = v
            .get("message_type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        fn typed<T: serde::de::DeserializeOwned, E: serde::de::Error>(v: Value) -> Result<T, E> {
            serde_json::from_value(v).map_err(E::custom)
        }
        Ok(match ty.as_str() {
            "assistant_message" => LettaChunk::AssistantMessage(typed(v)?),
            "reasoning_message" => LettaChunk::ReasoningMessage(typed(v)?),
            "hidden_reasoning_message" => LettaChunk::HiddenReasoningMessage(typed(v)?),
            "tool_call_message" => LettaChunk::ToolCallMessage(typed(v)?),
            "approval_request_message" => LettaChunk::ApprovalRequestMessage(typed(v)?),
            "tool_return_message" => LettaChunk::ToolReturnMessage(typed(v)?),
            "approval_response_message" => LettaChunk::ApprovalResponseMessage(typed(v)?),
            "user_message" => LettaChunk::UserMessage(typed(v)?),
            "system_message" => LettaChunk::SystemMessage(typed(v)?),
            "event_message" => LettaChunk::EventMessage(typed(v)?),
            "summary_message" => LettaChunk::SummaryMessage(typed(v)?),
            "stop_reason" => LettaChunk::StopReason(typed(v)?),
            "usage_statistics" => LettaChunk::UsageStatistics(typed(v)?),
            "ping" => LettaChunk::Ping(typed(v)?),
            "error_message" => LettaChunk::ErrorMessage(typed(v)?),
            "response_state" => LettaChunk::ResponseState(typed(v)?),
            _ => LettaChunk::Unknown(v),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Requests (letta-protocol.md §2.2-2.3)
// ---------------------------------------------------------------------------------------------

/// A client-side tool declared per request (`ClientToolSchema`: name, description, parameters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientTool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// The send-message body, with exactly the keys letta-code sends (letta-protocol.md §2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendMessageRequest {
    pub messages: Vec<MessageItem>,
    #[serde(default)]
    pub streaming: bool,
    #[serde(default = "yes")]
    pub stream_tokens: bool,
    #[serde(default = "yes")]
    pub include_pings: bool,
    #[serde(default)]
    pub background: bool,
    #[serde(default)]
    pub client_skills: Vec<Value>,
    #[serde(default)]
    pub client_tools: Vec<ClientTool>,
    #[serde(default)]
    pub include_compaction_messages: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

fn yes() -> bool {
    true
}

/// `messages[]` entry: a user (or system) message, or an approval container (§2.3).
#[derive(Debug, Clone, PartialEq)]
pub enum MessageItem {
    Message(MessageCreate),
    Approval(ApprovalCreate),
    /// An item of a `type` this build does not know, kept verbatim.
    Unknown(Value),
}

impl MessageItem {
    pub fn otid(&self) -> Option<&str> {
        match self {
            MessageItem::Message(m) => m.otid.as_deref(),
            MessageItem::Approval(a) => a.otid.as_deref(),
            MessageItem::Unknown(v) => v.get("otid").and_then(Value::as_str),
        }
    }
}

/// `{type:"message", role, content, otid}`; some items omit `type` or `otid` (§2.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageCreate {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub role: String,
    pub content: Content,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otid: Option<String>,
}

/// `{type:"approval", approvals:[...], otid}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalCreate {
    #[serde(rename = "type")]
    pub kind: String,
    pub approvals: Vec<ApprovalItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otid: Option<String>,
}

/// One approval item: an executed tool's result or a decision (§2.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ApprovalItem {
    /// `{type:"tool", tool_call_id, tool_return, status, stdout?, stderr?}`.
    Tool {
        tool_call_id: String,
        tool_return: Content,
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stdout: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stderr: Option<Vec<String>>,
    },
    /// `{type:"approval", tool_call_id, approve, reason}`; `approve:false` is a denial.
    Approval {
        tool_call_id: String,
        approve: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl ApprovalItem {
    pub fn tool_call_id(&self) -> &str {
        match self {
            ApprovalItem::Tool { tool_call_id, .. }
            | ApprovalItem::Approval { tool_call_id, .. } => tool_call_id,
        }
    }
}

impl Serialize for MessageItem {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MessageItem::Message(m) => m.serialize(s),
            MessageItem::Approval(a) => a.serialize(s),
            MessageItem::Unknown(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for MessageItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let ty = v.get("type").and_then(Value::as_str).map(str::to_string);
        match ty.as_deref() {
            Some("approval") => serde_json::from_value(v)
                .map(MessageItem::Approval)
                .map_err(D::Error::custom),
            Some("message") | None if v.get("role").is_some() => serde_json::from_value(v)
                .map(MessageItem::Message)
                .map_err(D::Error::custom),
            _ => Ok(MessageItem::Unknown(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_server_approval_chunk_round_trips_field_order() {
        // captures/letta_server/a4_conversations_agentid_bg_requires_approval.body.sse, seq 3.
        let raw = r#"{"id":"message-4f5bbece-92e4-4314-8cc2-25e9d39268e4","date":"2026-11-30T00:27:30+00:00","name":null,"message_type":"approval_request_message","otid":"message-4f5bbece-92e4-4314-8cc2-25e9d39268e4","sender_id":null,"step_id":"step-94004c88-093b-4b74-a9d6-6e2b19d85baf","is_err":null,"seq_id":3,"run_id":"run-8258b7df-418c-457c-8345-d49a9c8ef4e7","tool_call":{"name":null,"arguments":"{\"cit","tool_call_id":"call_fake0022"},"tool_calls":{"name":null,"arguments":"{\"cit","tool_call_id":"call_fake0022"}}"#;
        let chunk = LettaChunk::from_json(raw).unwrap();
        let LettaChunk::ApprovalRequestMessage(m) = &chunk else {
            panic!("wrong variant: {chunk:?}")
        };
        assert_eq!(m.calls().len(), 1);
        assert_eq!(m.calls()[0].arguments.as_deref(), Some("{\"cit"));
        assert_eq!(chunk.seq_id(), Some(3));
        assert_eq!(chunk.to_json(), raw);
    }

    #[test]
    fn stop_and_usage_chunks_match_server_bytes() {
        let stop = r#"{"message_type":"stop_reason","stop_reason":"requires_approval"}"#;
        assert_eq!(LettaChunk::from_json(stop).unwrap().to_json(), stop);
        let usage = r#"{"message_type":"usage_statistics","completion_tokens":12,"prompt_tokens":122,"total_tokens":134,"step_count":1,"run_ids":null,"cached_input_tokens":null,"cache_write_tokens":null,"reasoning_tokens":null,"context_tokens":134}"#;
        assert_eq!(LettaChunk::from_json(usage).unwrap().to_json(), usage);
    }

    #[test]
    fn unknown_message_type_and_unknown_fields_are_kept_or_ignored() {
        let c = LettaChunk::from_json(r#"{"message_type":"brand_new","x":1}"#).unwrap();
        assert_eq!(c.message_type(), "brand_new");
        assert!(matches!(c, LettaChunk::Unknown(_)));
        let c = LettaChunk::from_json(
            r#"{"id":"m","date":"d","message_type":"assistant_message","content":"hi","future":true}"#,
        )
        .unwrap();
        assert!(matches!(c, LettaChunk::AssistantMessage(ref m) if m.content.text() == "hi"));
        let c = LettaChunk::from_json(r#"{"message_type":"stop_reason","stop_reason":"new_one"}"#)
            .unwrap();
        assert!(
            matches!(c, LettaChunk::StopReason(ref s) if s.stop_reason == StopReason::Other("new_one".into()))
        );
        assert!(LettaChunk::from_json("[1]").is_err());
    }

    #[test]
    fn request_bodies_decode_like_the_captures() {
        // captures/letta_server/b_agents_stream_approval_tool_return.request.json
        let raw = r#"{"messages":[{"type":"approval","approvals":[{"type":"tool","tool_call_id":"call_fake0002","tool_return":"{\"city\": \"Paris\"}","status":"success"}],"otid":"otid-probe-b-0001"}],"stream_tokens":true,"include_pings":true}"#;
        let req: SendMessageRequest = serde_json::from_str(raw).unwrap();
        let MessageItem::Approval(a) = &req.messages[0] else {
            panic!()
        };
        assert_eq!(a.approvals[0].tool_call_id(), "call_fake0002");
        let deny = r#"{"type":"approval","tool_call_id":"c","approve":false,"reason":"no"}"#;
        let item: ApprovalItem = serde_json::from_str(deny).unwrap();
        assert_eq!(serde_json::to_string(&item).unwrap(), deny);
        let user: MessageItem =
            serde_json::from_str(r#"{"role":"user","content":"hi","otid":"o1"}"#).unwrap();
        assert_eq!(user.otid(), Some("o1"));
    }
}
