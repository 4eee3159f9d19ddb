//! Compacting a conversation's history into one summary message.

use hyper::{Response, StatusCode};
use serde_json::json;

use super::errors::{conflict, not_found_conversation};
use super::store::{IdKind, Message, MessageBody};
use super::{APPROVAL_PENDING_DETAIL, ServerConfig, SharedStore, ids};
use crate::model::port::env::Env;
use crate::model::port::http::{self as mhttp, Body};

/// `POST /v1/conversations/{id}/compact`: everything before the last user message that starts a
/// clean turn (no tool call open across it) becomes one summary message. The summary is a
/// deterministic placeholder; no model is called (docs/server.md). A tool call and its result
/// are never separated.
pub(crate) fn compact<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    conv_id: &str,
) -> Response<Body> {
    let mut st = store.lock().unwrap();
    if !st.conversations.contains_key(conv_id) {
        return not_found_conversation(conv_id);
    }
    if !st.open_calls(conv_id).is_empty() {
        return conflict(config, json!({"detail": APPROVAL_PENDING_DETAIL}));
    }
    let msgs: Vec<Message> = st
        .conversation_messages(conv_id)
        .into_iter()
        .cloned()
        .collect();
    let before = msgs.len();
    // Cut at the last user message; everything between the system message and it goes.
    let cut = msgs
        .iter()
        .rposition(|m| matches!(m.body, MessageBody::User { .. }))
        .unwrap_or(0);
    let start = usize::from(matches!(
        msgs.first().map(|m| &m.body),
        Some(MessageBody::System { .. })
    ));
    if cut <= start {
        return mhttp::json_response(
            StatusCode::OK,
            &json!({"num_messages_before": before, "num_messages_after": before,
                    "summary": "No prior conversation messages."}),
        );
    }
    let dropped = cut - start;
    let summary = format!("{dropped} earlier messages were summarized.");
    let now = env.now_ms();
    let id = st.new_id(config.profile, IdKind::Message);
    let alert = json!({
        "type": "system_alert",
        "message": format!("Note: prior messages have been hidden from view due to conversation memory constraints.\nThe following is a summary of the previous messages:\n {summary}"),
        "time": ids::letta_time(env.epoch_ms() + now),
    })
    .to_string();
    let summary_msg = Message {
        id: id.clone(),
        otid: None,
        run_id: None,
        step_id: None,
        at_ms: now,
        body: MessageBody::User {
            content: json!(alert),
        },
    };
    st.messages.insert(id.clone(), summary_msg);
    let conv = st.conversations.get_mut(conv_id).expect("checked");
    let mut kept: Vec<String> = conv.messages[..start].to_vec();
    kept.push(id);
    kept.extend(conv.messages[cut..].iter().cloned());
    conv.messages = kept;
    let after = conv.messages.len();
    mhttp::json_response(
        StatusCode::OK,
        &json!({"num_messages_before": before, "num_messages_after": after, "summary": summary}),
    )
}
