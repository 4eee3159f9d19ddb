//! Resume after restart (letta-protocol.md §6, `src/agent/check-approval.ts`): pending approvals
//! and backfill from the server — the `in_context_message_ids` anchor, message variants,
//! completed-id filtering, dedupe, the sort ranks, the 50/10/40 limits and orphan trimming.

use serde_json::Value;

use super::backend::{Backend, TAIL_MESSAGE_TYPES, Thrown};
use super::policy::error_status;
use super::stream_processor::Approval;

/// `BACKFILL_PAGE_LIMIT` (letta-protocol.md §6.1).
pub const BACKFILL_PAGE_LIMIT: u32 = 50;
/// `BACKFILL_PRIMARY_MESSAGE_LIMIT` (letta-protocol.md §6.1).
pub const BACKFILL_PRIMARY_MESSAGE_LIMIT: usize = 10;
/// `BACKFILL_MAX_RENDERABLE_MESSAGES` (letta-protocol.md §6.1).
pub const BACKFILL_MAX_RENDERABLE_MESSAGES: usize = 40;
/// `BACKFILL_MIN_ASSISTANT` (warning only, letta-protocol.md §6.1).
pub const BACKFILL_MIN_ASSISTANT: usize = 1;

/// What resume found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResumeData {
    pub pending_approvals: Vec<Approval>,
    pub message_history: Vec<Value>,
    pub conversation: Option<Value>,
    /// The tail listing as it arrived, when one was read (the start-up read the backfill is
    /// prepared from).
    pub listed: Option<Vec<Value>>,
    /// Debug warnings ("Backfill scan found 0 assistant messages in last 50 messages").
    pub warnings: Vec<String>,
}

impl ResumeData {
    /// `pendingApproval`: the first pending approval.
    pub fn pending_approval(&self) -> Option<&Approval> {
        self.pending_approvals.first()
    }
}

/// The source message id of a variant: the id before the first `:assistant:`, `:reasoning:` or
/// `:tool:` (letta-protocol.md §1.7, §6.3).
pub fn source_id(id: &str) -> &str {
    let cut = [":assistant:", ":reasoning:", ":tool:"]
        .iter()
        .filter_map(|m| id.find(m))
        .min();
    match cut {
        Some(i) => &id[..i],
        None => id,
    }
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// `extractApprovals(message)` (A.6.1): the `tool_calls` array (or single object) wins over the
/// legacy `tool_call`; entries without an id (or with `""`) are dropped; name and arguments
/// default to ""; `messageId` is the message's id.
pub fn extract_approvals(message: &Value) -> Vec<Approval> {
    let calls: Vec<&Value> = match message.get("tool_calls") {
        Some(Value::Array(a)) if !a.is_empty() => a.iter().collect(),
        Some(o @ Value::Object(_)) => vec![o],
        _ => message
            .get("tool_call")
            .filter(|t| t.is_object())
            .into_iter()
            .collect(),
    };
    calls
        .into_iter()
        .filter_map(|c| {
            let id = str_of(c, "tool_call_id").filter(|s| !s.is_empty())?;
            Some(Approval {
                tool_call_id: id.to_string(),
                tool_name: str_of(c, "name").unwrap_or("").to_string(),
                tool_args: str_of(c, "arguments").unwrap_or("").to_string(),
                message_id: str_of(message, "id").map(str::to_string),
            })
        })
        .collect()
}

/// Pending approvals of a variant set: tool calls of every `approval_request_message` (first
/// occurrence per id wins), minus ids completed by a `tool_return_message` (`tool_call_id` and
/// `tool_returns[].tool_call_id`) or an `approval_response_message` (`approvals[].tool_call_id`)
/// in the same set (letta-protocol.md §6.3).
pub fn pending_from_variants(variants: &[Value]) -> Vec<Approval> {
    let mut completed: Vec<String> = Vec::new();
    for v in variants {
        match str_of(v, "message_type") {
            Some("tool_return_message") => {
                if let Some(id) = str_of(v, "tool_call_id") {
                    completed.push(id.to_string());
                }
                for r in v
                    .get("tool_returns")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(id) = str_of(r, "tool_call_id") {
                        completed.push(id.to_string());
                    }
                }
            }
            Some("approval_response_message") => {
                for a in v
                    .get("approvals")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(id) = str_of(a, "tool_call_id") {
                        completed.push(id.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    let mut out: Vec<Approval> = Vec::new();
    for v in variants {
        if str_of(v, "message_type") != Some("approval_request_message") {
            continue;
        }
        for a in extract_approvals(v) {
            if !out.iter().any(|o| o.tool_call_id == a.tool_call_id)
                && !completed.contains(&a.tool_call_id)
            {
                out.push(a);
            }
        }
    }
    out
}

/// How messages of one date are ordered: [`type_rank`] in the reference.
pub type TypeRank = fn(&str) -> u8;

/// Sort rank of a message type (letta-protocol.md §6.2).
pub fn type_rank(message_type: &str) -> u8 {
    match message_type {
        "user_message" => 0,
        "reasoning_message" => 1,
        "tool_call_message" | "approval_request_message" => 2,
        "tool_return_message" | "approval_response_message" => 3,
        "assistant_message" => 4,
        "event_message" => 5,
        "summary_message" => 6,
        _ => 7,
    }
}

/// Dedupe (`otid:<otid>` when truthy, else `id:<id>:<message_type>`; no id → skipped; first
/// wins) and sort (date ascending, ties by `rank`, [`type_rank`] in the reference; unparseable
/// dates first) (letta-protocol.md §6.2).
pub fn dedupe_and_sort(messages: &[Value], rank: TypeRank) -> Vec<Value> {
    let mut seen: Vec<String> = Vec::new();
    let mut kept: Vec<(usize, Value)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let Some(id) = str_of(m, "id") else { continue };
        let key = match str_of(m, "otid").filter(|o| !o.is_empty()) {
            Some(o) => format!("otid:{o}"),
            None => format!("id:{id}:{}", str_of(m, "message_type").unwrap_or("")),
        };
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        kept.push((i, m.clone()));
    }
    // A stable sort keeps the listing order for full ties.
    kept.sort_by_key(|(_, m)| {
        let date = str_of(m, "date")
            .and_then(super::resume::parse_iso8601_ms)
            .map_or(-1i128, |d| d as i128);
        (date, rank(str_of(m, "message_type").unwrap_or("")))
    });
    kept.into_iter().map(|(_, m)| m).collect()
}

const RENDERABLE: [&str; 9] = [
    "user_message",
    "assistant_message",
    "reasoning_message",
    "tool_call_message",
    "tool_return_message",
    "approval_request_message",
    "approval_response_message",
    "event_message",
    "summary_message",
];
const PRIMARY: [&str; 5] = [
    "user_message",
    "assistant_message",
    "reasoning_message",
    "event_message",
    "summary_message",
];

/// `prepareMessageHistory` (letta-protocol.md §6.2, A.6.3): renderable types only; start at the
/// 10th primary message counted backwards (or at 0); at most the last 40; then drop leading
/// `tool_return_message`s.
pub fn prepare_message_history(sorted: &[Value]) -> Vec<Value> {
    let renderable: Vec<&Value> = sorted
        .iter()
        .filter(|m| RENDERABLE.contains(&str_of(m, "message_type").unwrap_or("")))
        .collect();
    let mut start = 0;
    let mut primaries = 0;
    for (i, m) in renderable.iter().enumerate().rev() {
        if PRIMARY.contains(&str_of(m, "message_type").unwrap_or("")) {
            primaries += 1;
            if primaries == BACKFILL_PRIMARY_MESSAGE_LIMIT {
                start = i;
                break;
            }
        }
    }
    let mut out: Vec<Value> = renderable[start..].iter().map(|m| (*m).clone()).collect();
    if out.len() > BACKFILL_MAX_RENDERABLE_MESSAGES {
        out.drain(..out.len() - BACKFILL_MAX_RENDERABLE_MESSAGES);
    }
    while out
        .first()
        .is_some_and(|m| str_of(m, "message_type") == Some("tool_return_message"))
    {
        out.remove(0);
    }
    out
}

/// `isResumedConversation` (A.6.2): true without conversation info, with a non-empty summary or
/// title, or with any in-context ids.
pub fn is_resumed_conversation(conversation: Option<&Value>) -> bool {
    let Some(c) = conversation else { return true };
    let non_empty = |k: &str| str_of(c, k).is_some_and(|s| !s.is_empty());
    non_empty("summary")
        || non_empty("title")
        || c.get("in_context_message_ids")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
}

fn tail_query(limit: u32, default_conversation: bool) -> Vec<(String, String)> {
    let mut q = Vec::new();
    if default_conversation {
        q.push(("conversation_id".to_string(), "default".to_string()));
    }
    q.push(("limit".into(), limit.to_string()));
    q.push(("order".into(), "desc".into()));
    for t in TAIL_MESSAGE_TYPES {
        q.push(("include_return_message_types".into(), t.to_string()));
    }
    q
}

fn is_404_or_422(e: &Thrown) -> bool {
    matches!(error_status(e), Some(404 | 422))
}

/// Why resume data could not be obtained: a 404/422 on the conversation is re-thrown (e.g.
/// `/resume` of a missing conversation); anything else gives empty data.
pub type ResumeDataError = Thrown;

/// `getResumeDataFromBackend(agent, conversationId, {includeMessageHistory})`
/// (letta-protocol.md §6.3); the tail's ties of one date are broken by `rank`, [`type_rank`] in
/// the reference.
pub async fn get_resume_data<B: Backend>(
    backend: &B,
    agent_id: &str,
    conversation_id: &str,
    include_message_history: bool,
    rank: TypeRank,
) -> Result<ResumeData, ResumeDataError> {
    let mut data = ResumeData::default();
    let default_conv = conversation_id == "default";
    let mut tail: Option<Vec<Value>> = None;
    let last_in_context: Option<String>;
    if !default_conv {
        if include_message_history {
            let listed = backend
                .list_conversation_messages(conversation_id, tail_query(BACKFILL_PAGE_LIMIT, false))
                .await;
            match backend.retrieve_conversation(conversation_id).await {
                Ok(c) => data.conversation = Some(c),
                Err(e) if is_404_or_422(&e) => return Err(e),
                Err(_) => return Ok(ResumeData::default()),
            }
            match listed {
                Ok(t) => tail = Some(t),
                Err(e) if is_404_or_422(&e) => {}
                Err(_) => return Ok(ResumeData::default()),
            }
        }
        if data.conversation.is_none() {
            match backend.retrieve_conversation(conversation_id).await {
                Ok(c) => data.conversation = Some(c),
                Err(e) if is_404_or_422(&e) => return Err(e),
                Err(_) => return Ok(ResumeData::default()),
            }
        }
        last_in_context = data
            .conversation
            .as_ref()
            .and_then(|c| c.get("in_context_message_ids"))
            .and_then(Value::as_array)
            .and_then(|a| a.last())
            .and_then(Value::as_str)
            .map(str::to_string);
    } else {
        let agent = match backend.retrieve_agent(agent_id).await {
            Ok(a) => a,
            Err(e) if is_404_or_422(&e) => return Err(e),
            Err(_) => return Ok(ResumeData::default()),
        };
        let ids = agent
            .get("in_context_message_ids")
            .filter(|v| !v.is_null())
            .or_else(|| agent.get("message_ids"))
            .and_then(Value::as_array);
        last_in_context = ids
            .and_then(|a| a.last())
            .and_then(Value::as_str)
            .map(str::to_string);
        let limit = if include_message_history {
            Some(BACKFILL_PAGE_LIMIT)
        } else if last_in_context.is_none() {
            Some(1)
        } else {
            None
        };
        if let Some(limit) = limit {
            match backend
                .list_agent_messages(agent_id, tail_query(limit, true))
                .await
            {
                Ok(t) => tail = Some(t),
                Err(e) if is_404_or_422(&e) => return Err(e),
                Err(_) => return Ok(ResumeData::default()),
            }
        }
    }

    let listed = tail.is_some();
    let tail_raw = tail.unwrap_or_default();
    let sorted = dedupe_and_sort(&tail_raw, rank);

    // Pending detection.
    let anchor: Option<String> = match &last_in_context {
        Some(id) => Some(source_id(id).to_string()),
        None if default_conv || listed => sorted
            .last()
            .and_then(|m| str_of(m, "id"))
            .map(|id| source_id(id).to_string()),
        None => None,
    };
    if let Some(anchor) = anchor {
        let in_tail: Vec<Value> = sorted
            .iter()
            .filter(|m| str_of(m, "id").is_some_and(|id| source_id(id) == anchor))
            .cloned()
            .collect();
        let fetch = |id: String| async move {
            match backend.retrieve_message(&id).await {
                Ok(v) => Some(v),
                Err(e) if is_404_or_422(&e) => None,
                Err(_) => None,
            }
        };
        if !in_tail.is_empty() {
            let mut pending = pending_from_variants(&in_tail);
            let starts_inside = sorted
                .first()
                .and_then(|m| str_of(m, "id"))
                .is_some_and(|id| source_id(id) == anchor);
            if !pending.is_empty()
                && starts_inside
                && last_in_context.is_some()
                && let Some(all) = fetch(anchor.clone()).await
            {
                pending = pending_from_variants(&all);
            }
            data.pending_approvals = pending;
        } else if last_in_context.is_some()
            && let Some(all) = fetch(anchor.clone()).await
        {
            data.pending_approvals = pending_from_variants(&all);
        }
    }

    if include_message_history {
        data.message_history = prepare_message_history(&sorted);
        let assistants = sorted
            .iter()
            .filter(|m| str_of(m, "message_type") == Some("assistant_message"))
            .count();
        if tail_raw.len() as u32 >= BACKFILL_PAGE_LIMIT && assistants < BACKFILL_MIN_ASSISTANT {
            data.warnings.push(format!(
                "Backfill scan found 0 assistant messages in last {BACKFILL_PAGE_LIMIT} messages"
            ));
        }
    }
    if listed {
        data.listed = Some(tail_raw);
    }
    Ok(data)
}

#[cfg(test)]
mod tests;
