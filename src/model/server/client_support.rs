//! client-model (interim): the server routes and send faults the faithful client model (issue
//! 4) exercises, on the skeleton server. The faithful server model (issue 3, another branch)
//! implements the same endpoints with the same JSON shapes and the same hook names
//! (`StreamHooks::on_send`, `fail_run_stream`, `StreamFault::{Drop, Stall}`); when it lands this
//! file is superseded and can be deleted, keeping only what the other branch lacks (marked
//! "client-only" below).
//!
//! Endpoints (letta-protocol.md §2.1): conversation stream attach by otid, retrieve
//! conversation (`in_context_message_ids`), retrieve agent, list conversation / agent messages
//! (`desc`, `limit`, `include_return_message_types`), retrieve message (an array of variants),
//! list runs, cancel conversation, cancel run.

use std::time::Duration;

use hyper::{Method, Response, StatusCode};
use serde_json::{Value, json};

use super::{
    APPROVAL_PENDING_DETAIL, Run, ServerConfig, SharedStore, Store, StoredMessage, StoredToolCall,
    detail, finish_run, ids, record, stream_response,
};
use crate::model::env::Env;
use crate::model::http::{self, Body};
use crate::model::observe::{HistoryEntry, Observation};
use crate::wire::letta::{LettaChunk, StopReason, StopReasonChunk};

/// Attach-by-otid polls before answering 404: 0.25 + 0.5 + 1 s (captures/letta_e2e flow e:
/// "the server polls Redis 3 times").
pub const OTID_ATTACH_POLLS_MS: [u64; 3] = [250, 500, 1000];

/// What happens to a message send before the server looks at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFault {
    Pass,
    /// Answer 409 busy naming a blocking run that is not this client's (captures/letta_e2e e).
    Busy,
    /// Answer 503 `cloud_api_shutting_down` (letta-protocol.md §3.3).
    ShuttingDown,
    /// A pending approval appears on the conversation now (as if another client had left one);
    /// `http_409`: the send is answered with the 409 conflict (reference B.5.3), else the
    /// server's in-band conflict (captures d1-d8, letta_e2e d3).
    ApprovalAppears {
        call: StoredToolCall,
        http_409: bool,
    },
    /// client-only: start the run, then answer 409 busy naming it (a server that does not
    /// dedupe a duplicate); the client can attach to it by otid.
    BusyOwnRun,
}

/// The blocking run named by [`SendFault::Busy`].
pub const BLOCKER_RUN_ID: &str = "run-blocker";

/// A 409 busy body (captures/letta_e2e e; letta-protocol.md §3.2).
pub fn busy_response(run_id: Option<&str>) -> Response<Body> {
    let text = match run_id {
        Some(r) => format!(
            "CONFLICT: Cannot send a new message: Another request (run_id={r}) is currently being processed for this conversation. Please wait for it to complete."
        ),
        None => "CONFLICT: Cannot send a new message: Another request is currently being processed for this conversation. Please wait for the current request to complete.".into(),
    };
    let mut body = json!({ "detail": text });
    if let Some(r) = run_id {
        body["run_id"] = json!(r);
    }
    http::json_response(StatusCode::CONFLICT, &body)
}

/// Applies a send fault; `Some(response)` answers the send.
pub fn apply_send_fault<E: Env>(
    env: &E,
    st: &mut Store,
    conv_id: &str,
    fault: &SendFault,
) -> Option<Response<Body>> {
    match fault {
        SendFault::Pass | SendFault::BusyOwnRun => None,
        SendFault::Busy => Some(busy_response(Some(BLOCKER_RUN_ID))),
        SendFault::ShuttingDown => {
            let mut r = http::json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({
                    "error": "Service temporarily unavailable. Please retry your request.",
                    "errorCode": "cloud_api_shutting_down",
                    "admitted": false,
                    "retryable": true,
                }),
            );
            r.headers_mut()
                .insert("retry-after", hyper::header::HeaderValue::from_static("1"));
            Some(r)
        }
        SendFault::ApprovalAppears { call, http_409 } => {
            plant_pending_approval(env, st, conv_id, call.clone());
            http_409.then(|| detail(StatusCode::CONFLICT, APPROVAL_PENDING_DETAIL))
        }
    }
}

/// Leaves a pending approval on a conversation: a user message, then an assistant message
/// calling `call`, with no result (what a client that died mid-approval, or another client,
/// leaves behind; captures/letta_e2e flow d's setup).
pub fn plant_pending_approval<E: Env>(
    env: &E,
    st: &mut Store,
    conv_id: &str,
    call: StoredToolCall,
) {
    let user_id = format!("message-{}", st.uuid());
    let otid = format!("otid-other-{}", st.uuid());
    let id = format!("message-{}", st.uuid());
    let Some(conv) = st.conversations.get_mut(conv_id) else {
        return;
    };
    conv.history.push(StoredMessage::User {
        id: user_id,
        text: "(an earlier turn whose approval was never answered)".into(),
        otid: Some(otid.clone()),
    });
    env.observe(Observation::History {
        conversation_id: conv_id.to_string(),
        entry: HistoryEntry::User { otid: Some(otid) },
    });
    conv.history.push(StoredMessage::Assistant {
        id: id.clone(),
        text: String::new(),
        tool_calls: vec![call.clone()],
    });
    conv.pending = vec![call.clone()];
    conv.pending_message_id = Some(id);
    env.observe(Observation::History {
        conversation_id: conv_id.to_string(),
        entry: HistoryEntry::Assistant { chars: 0 },
    });
    env.observe(Observation::History {
        conversation_id: conv_id.to_string(),
        entry: HistoryEntry::ToolCall {
            tool_call_id: call.id,
            name: call.name,
            arguments: call.arguments,
        },
    });
}

/// The run object of `GET /v1/runs/{id}` (letta-protocol.md §1.5; the fields B.5.6 reads).
pub fn run_json(r: &Run, epoch_ms: u64) -> Value {
    let mut metadata = serde_json::Map::new();
    if let Some(e) = &r.error {
        metadata.insert("error".into(), e.clone());
    }
    json!({
        "id": r.id,
        "agent_id": r.agent_id,
        "conversation_id": r.conversation_id,
        "status": r.status,
        "stop_reason": r.stop_reason.as_ref().map(StopReason::as_str),
        "background": true,
        "created_at": iso_ms(epoch_ms + r.created_ms),
        "metadata": Value::Object(metadata),
    })
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso_ms(unix_ms: u64) -> String {
    let base = ids::iso_date(unix_ms);
    format!("{}.{:03}Z", &base[..19], unix_ms % 1000)
}

/// Whether [`route`] answers this request.
pub fn handles(method: &Method, parts: &[&str]) -> bool {
    matches!(
        (method, parts),
        (&Method::POST, ["v1", "conversations", _, "stream"])
            | (&Method::GET, ["v1", "conversations", _])
            | (&Method::GET, ["v1", "conversations", _, "messages"])
            | (&Method::POST, ["v1", "conversations", _, "cancel"])
            | (&Method::GET, ["v1", "agents", _])
            | (&Method::GET, ["v1", "agents", _, "messages"])
            | (&Method::POST, ["v1", "agents", _, "messages", "cancel"])
            | (&Method::GET, ["v1", "messages", _])
            | (&Method::GET, ["v1", "runs"])
    )
}

fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (unescape(k), unescape(v))
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(h) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(h);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A conversation id from a path segment: `default` is not addressable here (the client uses
/// the agent routes for it); an agent id addresses the agent's default conversation.
fn conv_of(st: &Store, id: &str) -> Option<String> {
    st.conversations.contains_key(id).then(|| id.to_string())
}

/// The message variants of a conversation's history, oldest first, with their ids and dates
/// (letta-protocol.md §1.4, §6; captures/letta_e2e flow d's listing shapes).
pub fn variants(st: &Store, conv_id: &str, epoch_ms: u64) -> Vec<Value> {
    let Some(conv) = st.conversations.get(conv_id) else {
        return Vec::new();
    };
    // The system message every conversation starts with (captures/letta_e2e: a fresh
    // conversation's only in-context message; listings filter it out by type).
    let mut out = vec![json!({
        "id": format!("message-system-{conv_id}"), "date": ids::iso_date(epoch_ms),
        "message_type": "system_message", "otid": null, "content": "You are a helpful agent.",
    })];
    for (i, m) in conv.history.iter().enumerate() {
        // One second apart, in history order (the store keeps no write times).
        let date = ids::iso_date(epoch_ms + (i as u64 + 1) * 1000);
        match m {
            StoredMessage::User { id, text, otid } => out.push(json!({
                "id": id, "date": date, "message_type": "user_message", "otid": otid,
                "content": text,
            })),
            StoredMessage::Assistant {
                id,
                text,
                tool_calls,
            } => {
                if !text.is_empty() {
                    out.push(json!({
                        "id": id, "date": date, "message_type": "assistant_message",
                        "otid": null, "content": text,
                    }));
                }
                if !tool_calls.is_empty() {
                    let calls: Vec<Value> = tool_calls
                        .iter()
                        .map(|c| json!({"name": c.name, "arguments": c.arguments, "tool_call_id": c.id}))
                        .collect();
                    out.push(json!({
                        "id": id, "date": date, "message_type": "approval_request_message",
                        "otid": id, "tool_call": calls[0], "tool_calls": calls,
                    }));
                }
            }
            StoredMessage::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => out.push(json!({
                "id": format!("message-return-{tool_call_id}"), "date": date,
                "message_type": "tool_return_message", "otid": null,
                "tool_call_id": tool_call_id, "tool_return": content,
                "status": if *is_error { "error" } else { "success" },
            })),
        }
    }
    out
}

fn message_ids(st: &Store, conv_id: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for v in variants(st, conv_id, 0) {
        if let Some(id) = v.get("id").and_then(Value::as_str)
            && !ids.iter().any(|x| x == id)
        {
            ids.push(id.to_string());
        }
    }
    ids
}

fn listing(st: &Store, conv_id: &str, epoch_ms: u64, q: &[(String, String)]) -> Value {
    let limit: usize = q
        .iter()
        .find(|(k, _)| k == "limit")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(100);
    let asc = q.iter().any(|(k, v)| k == "order" && v == "asc");
    let types: Vec<&str> = q
        .iter()
        .filter(|(k, _)| k == "include_return_message_types")
        .map(|(_, v)| v.as_str())
        .collect();
    let mut all: Vec<Value> = variants(st, conv_id, epoch_ms)
        .into_iter()
        .filter(|v| {
            types.is_empty()
                || types.contains(&v.get("message_type").and_then(Value::as_str).unwrap_or(""))
        })
        .collect();
    if !asc {
        all.reverse();
    }
    all.truncate(limit);
    Value::Array(all)
}

fn cancel_run<E: Env>(env: &E, st: &mut Store, run_id: &str) -> bool {
    let active = st.runs.get(run_id).is_some_and(|r| !r.finished);
    if !active {
        return false;
    }
    record(
        env,
        st,
        run_id,
        LettaChunk::StopReason(StopReasonChunk {
            message_type: "stop_reason".into(),
            stop_reason: StopReason::Cancelled,
        }),
        None,
    );
    finish_run(env, st, run_id, StopReason::Cancelled, true);
    true
}

/// Answers one of the routes of [`handles`].
pub async fn route<E: Env>(
    env: &E,
    config: &std::sync::Arc<ServerConfig>,
    store: &SharedStore,
    method: &Method,
    parts: &[&str],
    query: Option<&str>,
    body: &[u8],
) -> Response<Body> {
    let q = query_pairs(query);
    let epoch = env.epoch_ms();
    let not_found = |what: &str| detail(StatusCode::NOT_FOUND, what);
    match (method, parts) {
        (&Method::POST, ["v1", "conversations", conv, "stream"]) => {
            let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let after = v.get("starting_after").and_then(Value::as_u64).unwrap_or(0);
            let by_run = v.get("run_id").and_then(Value::as_str).map(str::to_string);
            let otid = v.get("otid").and_then(Value::as_str).map(str::to_string);
            for (i, wait) in std::iter::once(0).chain(OTID_ATTACH_POLLS_MS).enumerate() {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                let found = {
                    let st = store.lock().unwrap();
                    match (&by_run, &otid) {
                        (Some(r), _) if st.runs.contains_key(r) => Some(r.clone()),
                        (_, Some(o)) => st.otids.get(o).cloned(),
                        _ => st
                            .conversations
                            .get(*conv)
                            .and_then(|c| c.active_run.clone()),
                    }
                };
                if let Some(run_id) = found {
                    return stream_response(config, store, &run_id, after);
                }
            }
            not_found(&format!(
                "No run found for otid={}. The run may have expired or never existed.",
                otid.unwrap_or_default()
            ))
        }
        (&Method::GET, ["v1", "conversations", id]) => {
            let st = store.lock().unwrap();
            match conv_of(&st, id) {
                Some(c) => http::json_response(
                    StatusCode::OK,
                    &json!({
                        "id": c, "agent_id": st.conversations[&c].agent_id, "summary": null,
                        "in_context_message_ids": message_ids(&st, &c),
                    }),
                ),
                None => not_found(&format!("Conversation not found: {id}")),
            }
        }
        (&Method::GET, ["v1", "conversations", id, "messages"]) => {
            let st = store.lock().unwrap();
            match conv_of(&st, id) {
                Some(c) => http::json_response(StatusCode::OK, &listing(&st, &c, epoch, &q)),
                None => not_found(&format!("Conversation not found: {id}")),
            }
        }
        (&Method::GET, ["v1", "agents", id]) => {
            let st = store.lock().unwrap();
            match conv_of(&st, id) {
                Some(c) => {
                    let ids = message_ids(&st, &c);
                    http::json_response(
                        StatusCode::OK,
                        &json!({"id": c, "name": c, "tags": [], "in_context_message_ids": ids, "message_ids": ids}),
                    )
                }
                None => not_found(&format!("Agent not found: {id}")),
            }
        }
        (&Method::GET, ["v1", "agents", id, "messages"]) => {
            let st = store.lock().unwrap();
            match conv_of(&st, id) {
                Some(c) => http::json_response(StatusCode::OK, &listing(&st, &c, epoch, &q)),
                None => not_found(&format!("Agent not found: {id}")),
            }
        }
        (&Method::GET, ["v1", "messages", id]) => {
            let st = store.lock().unwrap();
            let mut found: Vec<Value> = Vec::new();
            for c in st.conversations.keys() {
                for v in variants(&st, c, epoch) {
                    if v.get("id").and_then(Value::as_str) == Some(*id) {
                        found.push(v);
                    }
                }
            }
            if found.is_empty() {
                not_found(&format!("Message not found: {id}"))
            } else {
                http::json_response(StatusCode::OK, &Value::Array(found))
            }
        }
        (&Method::GET, ["v1", "runs"]) => {
            let st = store.lock().unwrap();
            let get = |k: &str| q.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
            let statuses: Vec<&str> = q
                .iter()
                .filter(|(k, _)| k == "statuses")
                .map(|(_, v)| v.as_str())
                .collect();
            let mut runs: Vec<Value> = st
                .runs
                .values()
                .filter(|r| get("conversation_id").is_none_or(|c| c == r.conversation_id))
                .filter(|r| get("agent_id").is_none_or(|a| a == r.agent_id))
                .map(|r| run_json(r, epoch))
                .filter(|r| {
                    statuses.is_empty()
                        || statuses.contains(&r.get("status").and_then(Value::as_str).unwrap_or(""))
                })
                .collect();
            runs.sort_by_key(|r| {
                r.get("created_at")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            if get("order").as_deref() != Some("asc") {
                runs.reverse();
            }
            if let Some(n) = get("limit").and_then(|l| l.parse::<usize>().ok()) {
                runs.truncate(n);
            }
            http::json_response(StatusCode::OK, &Value::Array(runs))
        }
        (&Method::POST, ["v1", "conversations", id, "cancel"]) => {
            let mut st = store.lock().unwrap();
            let active = st.conversations.get(*id).and_then(|c| c.active_run.clone());
            match active {
                Some(r) if cancel_run(env, &mut st, &r) => {
                    http::json_response(StatusCode::OK, &json!({"cancelled_run_ids": [r]}))
                }
                _ => detail(
                    StatusCode::CONFLICT,
                    &format!("No active runs to cancel for conversation {id}"),
                ),
            }
        }
        (&Method::POST, ["v1", "agents", agent, "messages", "cancel"]) => {
            let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let ids: Vec<String> = v
                .get("run_ids")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let mut st = store.lock().unwrap();
            let cancelled: Vec<String> = ids
                .into_iter()
                .filter(|r| cancel_run(env, &mut st, r))
                .collect();
            if cancelled.is_empty() {
                detail(
                    StatusCode::CONFLICT,
                    &format!("No active runs to cancel for agent {agent}"),
                )
            } else {
                http::json_response(StatusCode::OK, &json!({"cancelled_run_ids": cancelled}))
            }
        }
        _ => not_found("Not Found"),
    }
}
