//! Writing a send into the conversation's history: the approval response, one tool message
//! per result or denial (as the model is shown it: Letta's status wrapper on 0.16.8), then the
//! user messages; and the `tool_return_message` step streaming echoes for a stored result.

use serde_json::{Value, json};

use super::store::{IdKind, Message, MessageBody};
use super::{DEFAULT_DENIAL_REASON, Profile, ServerConfig, Store, StoredToolCall, ids, record};
use crate::model::port::env::Env;
use crate::model::port::observe::{HistoryEntry, Observation};
use crate::wire::letta::{ApprovalItem, LettaChunk, MessageItem, SendMessageRequest};

/// Writes the request into the conversation: the approval response and one tool message per
/// result or denial, then the user messages. Returns the ids of the tool messages written.
pub(crate) fn write_history<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    conv_id: &str,
    run_id: &str,
    req: &SendMessageRequest,
    approvals: Option<&[ApprovalItem]>,
) -> Vec<String> {
    let mut tool_messages = Vec::new();
    let now = env.now_ms();
    let unix = env.epoch_ms() + now;
    let step_id = st.new_id(config.profile, IdKind::Step);
    let at = Written {
        conv_id,
        run_id,
        step_id: &step_id,
        now,
        unix,
    };
    if let Some(items) = approvals {
        tool_messages = write_approval_response(env, config, st, &at, items);
    }
    write_user_messages(env, config, st, &at, req);
    tool_messages
}

/// Where and when the request's messages are written.
struct Written<'a> {
    conv_id: &'a str,
    run_id: &'a str,
    /// The step the request's messages are filed under (on 0.16.8 the user messages move to
    /// the run's first model step when it starts: `Store::file_input_under_step`).
    step_id: &'a str,
    now: u64,
    /// Unix ms of `now` (the `time` of Letta's result wrappers).
    unix: u64,
}

/// The approval response, then one tool message per answerable result or denial; the answered
/// calls leave the pending set. Returns the ids of the tool messages.
fn write_approval_response<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    at: &Written<'_>,
    items: &[ApprovalItem],
) -> Vec<String> {
    let Written {
        conv_id,
        run_id,
        step_id,
        now,
        unix,
    } = *at;
    let local = config.profile == Profile::Local;
    let oss = config.profile.oss();
    let mut tool_messages = Vec::new();
    // Which ids may be answered: the pending set (cloud, validated above), or any call
    // without a result yet (local, letta-protocol.md §7.3).
    let answerable: Vec<String> = st.open_calls(conv_id).into_iter().map(|c| c.id).collect();
    let raw: Vec<Value> = items
        .iter()
        .map(|i| serde_json::to_value(i).expect("json"))
        .collect();
    let resp_id = st.new_id(config.profile, IdKind::Message);
    st.push_message(
        conv_id,
        Message {
            id: resp_id,
            otid: None,
            run_id: Some(run_id.to_string()),
            step_id: None,
            at_ms: now,
            body: MessageBody::ApprovalResponse { approvals: raw },
        },
    );
    for item in items {
        if !answerable.iter().any(|a| a == item.tool_call_id()) {
            continue;
        }
        let Some(ToolMessage {
            content,
            tool_return,
            status,
            is_error,
            entry,
        }) = tool_message(item, local, oss, unix)
        else {
            continue;
        };
        let id = st.new_id(config.profile, IdKind::Message);
        let otid = (!local).then(|| ids::assistant_otid(&id, 0));
        // 0.16.8 files the result under the step that asked for it (capture b2).
        let tool_step = if oss {
            st.conversations[conv_id]
                .pending_message_id
                .as_ref()
                .and_then(|m| st.messages.get(m))
                .and_then(|m| m.step_id.clone())
                .unwrap_or_else(|| step_id.to_string())
        } else {
            step_id.to_string()
        };
        tool_messages.push(id.clone());
        st.push_message(
            conv_id,
            Message {
                id,
                otid,
                run_id: Some(run_id.to_string()),
                step_id: Some(tool_step),
                at_ms: now,
                body: MessageBody::Tool {
                    tool_call_id: item.tool_call_id().to_string(),
                    content,
                    tool_return,
                    status,
                    is_error,
                },
            },
        );
        env.observe(Observation::History {
            conversation_id: conv_id.to_string(),
            entry,
        });
    }
    let c = st.conversations.get_mut(conv_id).expect("known");
    let still_open: Vec<StoredToolCall> = c
        .pending
        .iter()
        .filter(|p| !items.iter().any(|i| i.tool_call_id() == p.id))
        .cloned()
        .collect();
    c.pending = still_open;
    if c.pending.is_empty() {
        c.pending_message_id = None;
    }
    tool_messages
}

/// The tool message a result or denial becomes.
struct ToolMessage {
    /// What the model is shown.
    content: String,
    /// What the API shows as `tool_return`.
    tool_return: String,
    status: String,
    is_error: bool,
    entry: HistoryEntry,
}

/// A result or denial as its tool message; `None` for `approve:true` without a result, which
/// is ignored (letta-protocol.md §7.3).
fn tool_message(item: &ApprovalItem, local: bool, oss: bool, unix: u64) -> Option<ToolMessage> {
    match item {
        ApprovalItem::Tool {
            tool_call_id,
            tool_return,
            status,
            ..
        } => {
            let text = tool_return.text();
            // Local stores `type:"tool"` results as non-error even when status is
            // "error" (letta-protocol.md §7.3; §10.3 suspected bug 6).
            let is_error = !local && status == "error";
            // 0.16.8 hands the model Letta's status wrapper (captures b, b2).
            let content = if oss {
                tool_result_content(!is_error, &text, unix)
            } else {
                text.clone()
            };
            Some(ToolMessage {
                content,
                tool_return: text,
                status: status.clone(),
                is_error,
                entry: HistoryEntry::ToolReturn {
                    tool_call_id: tool_call_id.clone(),
                    status: status.clone(),
                },
            })
        }
        ApprovalItem::Approval {
            tool_call_id,
            approve: false,
            reason,
        } => {
            let reason = reason
                .clone()
                .unwrap_or_else(|| DEFAULT_DENIAL_REASON.into());
            let content = if local {
                reason.clone()
            } else {
                denial_content(&reason, unix)
            };
            Some(ToolMessage {
                content: content.clone(),
                tool_return: content,
                status: "error".to_string(),
                is_error: true,
                entry: HistoryEntry::Denial {
                    tool_call_id: tool_call_id.clone(),
                    reason,
                },
            })
        }
        ApprovalItem::Approval { approve: true, .. } => None,
    }
}

/// The request's user messages; items with other roles (the `system` empty-response nudge)
/// are dropped (letta-protocol.md §7.1 step 3).
fn write_user_messages<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    at: &Written<'_>,
    req: &SendMessageRequest,
) {
    for m in &req.messages {
        let MessageItem::Message(m) = m else { continue };
        if m.role != "user" {
            continue;
        }
        let id = st.new_id(config.profile, IdKind::Message);
        st.push_message(
            at.conv_id,
            Message {
                id,
                otid: m.otid.clone(),
                run_id: Some(at.run_id.to_string()),
                step_id: Some(at.step_id.to_string()),
                at_ms: at.now,
                body: MessageBody::User {
                    content: serde_json::to_value(&m.content).expect("json"),
                },
            },
        );
        env.observe(Observation::History {
            conversation_id: at.conv_id.to_string(),
            entry: HistoryEntry::User {
                otid: m.otid.clone(),
            },
        });
    }
}

/// The message a denial becomes for the model (captures/letta_e2e b and d model summaries:
/// a pretty-printed JSON object with `status`, `message`, `time`).
pub fn denial_content(reason: &str, unix_ms: u64) -> String {
    let v = json!({
        "status": "Failed",
        "message": format!("Error: request to call tool denied. User reason: {reason}"),
        "time": ids::letta_time(unix_ms),
    });
    serde_json::to_string_pretty(&v).expect("json")
}

/// Letta's wrapping of a tool's result for the model: `{"status": "OK"|"Failed", "message":
/// …, "time": …}` as Python's `json.dumps(indent=2)` prints it (captures b, b2: the fake
/// model echoes its first 80 characters; the denial of captures/letta_e2e b has the same shape).
pub fn tool_result_content(ok: bool, message: &str, unix_ms: u64) -> String {
    let v = json!({
        "status": if ok { "OK" } else { "Failed" },
        "message": message,
        "time": ids::letta_time(unix_ms),
    });
    ascii_json(&serde_json::to_string_pretty(&v).expect("json"))
}

/// Python's `ensure_ascii`: every non-ASCII character as `\uXXXX` (surrogate pairs above the
/// BMP). Only JSON strings can hold one, so escaping the whole text is safe.
fn ascii_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// The `tool_return_message` step streaming echoes for a stored tool result (capture b2:
/// `tool_return` as a string, `tool_returns` a one-element list of the same fields).
fn tool_return_chunk(m: &Message, epoch_ms: u64) -> Option<LettaChunk> {
    let MessageBody::Tool {
        tool_call_id,
        tool_return,
        status,
        ..
    } = &m.body
    else {
        return None;
    };
    Some(LettaChunk::ToolReturnMessage(
        crate::wire::letta::ToolReturnMessage {
            env: crate::wire::letta::Envelope {
                id: m.id.clone(),
                date: ids::iso_date(epoch_ms + m.at_ms),
                message_type: "tool_return_message".into(),
                otid: m.otid.clone(),
                step_id: m.step_id.clone(),
                ..Default::default()
            },
            tool_return: tool_return.clone(),
            status: status.clone(),
            tool_call_id: tool_call_id.clone(),
            stdout: None,
            stderr: None,
            tool_returns: Some(vec![json!({
                "type": "tool", "tool_return": tool_return, "status": status,
                "tool_call_id": tool_call_id, "stdout": null, "stderr": null,
            })]),
        },
    ))
}

/// The `tool_return_message` of each tool message written, recorded in the run (step
/// streaming).
pub(crate) fn echo_tool_results<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    run_id: &str,
    tool_messages: &[String],
) {
    for id in tool_messages {
        if let Some(chunk) = st
            .messages
            .get(id)
            .and_then(|m| tool_return_chunk(m, env.epoch_ms()))
        {
            record(env, config, st, run_id, chunk, None);
        }
    }
}
