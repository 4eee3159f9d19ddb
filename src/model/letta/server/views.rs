//! Stored objects as the JSON the API shows them: the model list entry, agents, conversations,
//! and each stored message as the LettaMessage variants a listing returns (captures/letta_e2e).

use serde_json::{Value, json};

use super::store::{Agent, DEFAULT_USER, Message, MessageBody, Store};
use super::{Profile, ids};

/// The stored message id of a projected id: local projected ids carry a
/// `:(assistant|reasoning|tool):…` suffix (letta-protocol.md §1.7).
pub(crate) fn strip_variant(id: &str) -> &str {
    for marker in [":assistant:", ":reasoning:", ":tool:"] {
        if let Some(i) = id.find(marker) {
            return &id[..i];
        }
    }
    id
}

/// The model object of `GET /v1/models/` (captures/letta_e2e a, exchange 1).
pub(crate) fn model_json(handle: &str) -> Value {
    let (provider, name) = handle.split_once('/').unwrap_or(("openai", handle));
    let provider_type = match provider {
        "openai-proxy" => "openai",
        p => p,
    };
    json!({
        "handle": handle,
        "name": name,
        "display_name": name,
        "provider_type": provider_type,
        "provider_name": provider,
        "model_type": "llm",
        "model": name,
        "model_endpoint_type": provider_type,
        "model_endpoint": "http://provider",
        "provider_category": "base",
        "model_wrapper": null,
        "context_window": 128000,
        "put_inner_thoughts_in_kwargs": false,
        "temperature": 1.0,
        "max_tokens": 16384,
        "enable_reasoner": true,
        "reasoning_effort": null,
        "max_reasoning_tokens": 0,
        "parallel_tool_calls": false,
        "max_context_window": 128000,
    })
}

/// An agent object (captures/letta_e2e a); unknown create fields are echoed back.
pub(crate) fn agent_json(st: &Store, a: &Agent, epoch: u64) -> Value {
    let message_ids: Vec<String> = st
        .conversations
        .get(&a.id)
        .map(|c| c.messages.clone())
        .unwrap_or_default();
    let mut v = json!({
        "created_by_id": DEFAULT_USER,
        "last_updated_by_id": DEFAULT_USER,
        "created_at": ids::iso_datetime(epoch + a.created_ms),
        "updated_at": ids::iso_datetime(epoch + a.updated_ms),
        "id": a.id,
        "name": a.name,
        "tool_rules": [],
        "message_ids": message_ids,
        "in_context_message_ids": message_ids,
        "system": a.system,
        "agent_type": "letta_v1_agent",
        "model": a.model,
        "description": null,
        "metadata": null,
        "tools": [],
        "sources": [],
        "tags": a.tags,
        "pending_approval": null,
    });
    let o = v.as_object_mut().expect("object");
    for (k, val) in &a.extra {
        o.entry(k.clone()).or_insert_with(|| val.clone());
    }
    v
}

/// A conversation object (captures/letta_e2e a).
pub(crate) fn conversation_json(st: &Store, id: &str, epoch: u64) -> Value {
    let c = &st.conversations[id];
    let last = c
        .messages
        .last()
        .and_then(|m| st.messages.get(m))
        .map(|m| ids::iso_datetime(epoch + m.at_ms));
    json!({
        "created_by_id": DEFAULT_USER,
        "last_updated_by_id": DEFAULT_USER,
        "created_at": ids::iso_datetime(epoch + c.created_ms),
        "updated_at": ids::iso_datetime(epoch + c.updated_ms),
        "id": c.id,
        "agent_id": c.agent_id,
        "summary": c.summary,
        "in_context_message_ids": c.messages,
        "isolated_block_ids": [],
        "model": null,
        "model_settings": null,
        "last_message_at": last,
    })
}

/// The fields every LettaMessage variant shares.
fn envelope(m: &Message, id: &str, message_type: &str, otid: Option<&str>, epoch: u64) -> Value {
    json!({
        "id": id,
        "date": ids::iso_date(epoch + m.at_ms),
        "name": null,
        "message_type": message_type,
        "otid": otid,
        "sender_id": null,
        "step_id": m.step_id,
        "is_err": null,
        "seq_id": null,
        "run_id": m.run_id,
    })
}

/// `base` with the fields of `fields` added.
fn extend(mut base: Value, fields: Value) -> Value {
    if let (Some(b), Some(f)) = (base.as_object_mut(), fields.as_object()) {
        for (k, v) in f {
            b.insert(k.clone(), v.clone());
        }
    }
    base
}

/// A stored message as the LettaMessage variants a listing or `GET /v1/messages/{id}` shows
/// (captures/letta_e2e c, the resume tail; letta-protocol.md §2.1 "an array of variants").
pub(crate) fn project(m: &Message, profile: Profile, epoch: u64) -> Vec<Value> {
    let local = profile == Profile::Local;
    match &m.body {
        MessageBody::System { text } => vec![extend(
            envelope(m, &m.id, "system_message", None, epoch),
            json!({"content": text}),
        )],
        MessageBody::User { content } => vec![extend(
            envelope(m, &m.id, "user_message", m.otid.as_deref(), epoch),
            json!({"content": content}),
        )],
        MessageBody::Assistant { text, tool_calls } => {
            let mut out = Vec::new();
            if !text.is_empty() {
                let otid = ids::assistant_otid(&m.id, 0);
                out.push(extend(
                    envelope(m, &m.id, "assistant_message", Some(&otid), epoch),
                    json!({"content": text}),
                ));
            }
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(
                        |c| json!({"name": c.name, "arguments": c.arguments, "tool_call_id": c.id}),
                    )
                    .collect();
                let id = if local && !out.is_empty() {
                    format!("{}:tool:{}:request", m.id, tool_calls[0].id)
                } else {
                    m.id.clone()
                };
                out.push(extend(
                    envelope(m, &id, "approval_request_message", Some(&m.id), epoch),
                    json!({"tool_call": calls[0], "tool_calls": calls}),
                ));
            }
            out
        }
        MessageBody::ApprovalResponse { approvals } => vec![extend(
            envelope(m, &m.id, "approval_response_message", None, epoch),
            json!({"approvals": approvals, "approve": null, "approval_request_id": null, "reason": null}),
        )],
        MessageBody::Tool {
            tool_call_id,
            tool_return,
            status,
            ..
        } => vec![extend(
            envelope(m, &m.id, "tool_return_message", m.otid.as_deref(), epoch),
            json!({
                "tool_return": tool_return, "status": status, "tool_call_id": tool_call_id,
                "stdout": null, "stderr": null,
                "tool_returns": [{"type": "tool",
                    "tool_return": [{"type": "text", "text": tool_return, "signature": null}],
                    "status": status, "tool_call_id": tool_call_id, "stdout": null, "stderr": null}],
            }),
        )],
    }
}

/// [`project`], with a compaction summary message shown as `summary_message` with its
/// `summary` and `compaction_stats` (letta-protocol.md §8.6: "Listings project the summary
/// message as `summary_message`").
pub(crate) fn project_in(st: &Store, m: &Message, profile: Profile, epoch: u64) -> Vec<Value> {
    match st.summaries.get(&m.id) {
        Some(r) => vec![extend(
            envelope(m, &m.id, "summary_message", None, epoch),
            json!({"summary": r.summary, "compaction_stats": r.stats}),
        )],
        None => project(m, profile, epoch),
    }
}
