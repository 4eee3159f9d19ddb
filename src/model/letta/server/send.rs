//! `POST /v1/conversations/{id}/messages`: dedupe, the conversation lock, approval validation,
//! writing the request into history, and starting the run.
//!
//! Order of checks (cloud; letta-protocol.md §2.4, §3.2, §11; captures win):
//! 1. malformed body → 422; unknown conversation or agent → 404;
//! 2. injected send faults (busy, 503 shutting down, an approval appearing);
//! 3. request-token dedupe, before the lock and across conversations (captures/letta_e2e d3x):
//!    a known token re-attaches to its run's stream, read-only, from the start;
//! 4. the conversation lock: another unfinished run → 409 busy naming it (captures e1/e2/h1);
//! 5. approvals: the approval container must come first and answer exactly the pending set
//!    (400 "Invalid tool call IDs…"); an approval with nothing pending is refused in-band;
//! 6. a plain message while an approval is pending: in-band error (captures d1-d8), or 409
//!    with [`ApprovalConflict::Http409`] and for non-streaming sends (capture d7);
//! 7. history written (approval response, tool results and denials, user messages), run
//!    started, response follows the run's log.
//!
//! Local profile (§7.1): no dedupe, no lock; a non-approval turn first settles orphaned tool
//! calls with "Turn did not complete"; approval items for unknown ids are ignored; only
//! `role:"user"` items are kept.

use std::sync::Arc;

use hyper::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::errors::{conflict, detail, not_found_agent, not_found_conversation, unprocessable};
use super::store::{IdKind, Message, MessageBody, Run};
use super::{
    ApprovalConflict, Profile, SendFault, ServerConfig, SharedStore, StoredToolCall, fail_run, ids,
    plant_pending_approval, provider_call, record, settle_unresolved, stream,
};
use crate::model::port::env::Env;
use crate::model::port::http::{self, Body};
use crate::model::port::observe::{HistoryEntry, Observation};
use crate::wire::letta::{
    ApprovalItem, GenericMessage, LettaChunk, MessageItem, RunStatus, SendMessageRequest,
    StopReason,
};

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

/// Python's `str()` of a list of strings, as the "Invalid tool call IDs" text shows them.
fn py_list(items: &[&str]) -> String {
    let inner: Vec<String> = items.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", inner.join(", "))
}

/// Which route a send came in on. Only the conversations endpoint exists in the cloud and
/// local profiles; `letta-oss-0.16` also serves the two agents endpoints of 0.16.8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `POST /v1/conversations/{id}/messages`: streams unless `streaming:false` (captures d4,
    /// d7), takes the conversation lock (captures e1, e2, h1).
    Conversations,
    /// `POST /v1/agents/{id}/messages`: JSON unless `streaming:true`, which needs an SDK client
    /// (capture x1; `sdk_client` is the header check of PROVENANCE.md x1). No lock.
    Agents { sdk_client: bool },
    /// `POST /v1/agents/{id}/messages/stream`, deprecated: always streams and takes no lock
    /// (capture e3: two runs interleave).
    AgentsStream,
}

/// The 422 of `streaming:true` on `/v1/agents/{id}/messages` from a client that is not an SDK
/// v1 (capture x1).
pub const STREAMING_NEEDS_SDK_DETAIL: &str =
    "streaming=true is only supported for SDK v1.0+ clients.";

/// Whether request headers pass 0.16.8's SDK check (PROVENANCE.md x1): any
/// `X-Stainless-Package-Version`, no `User-Agent` at all, or a `User-Agent` of
/// `letta-client/1.x` or `@letta-ai/letta-client/1.x`.
pub fn is_sdk_client(headers: &hyper::HeaderMap) -> bool {
    if headers.contains_key("x-stainless-package-version") {
        return true;
    }
    let Some(ua) = headers.get(hyper::header::USER_AGENT) else {
        return true;
    };
    let ua = ua.to_str().unwrap_or("");
    ["letta-client/", "@letta-ai/letta-client/"]
        .iter()
        .any(|p| {
            ua.strip_prefix(p)
                .is_some_and(|v| v.split('.').next() == Some("1"))
        })
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

/// 0.16.8's `{"type":"tool_return","tool_returns":[…]}` item (capture b2) as the approval
/// container it stands for; other items are left alone.
fn tool_return_as_approval(item: MessageItem) -> MessageItem {
    let MessageItem::Unknown(v) = &item else {
        return item;
    };
    if v.get("type").and_then(Value::as_str) != Some("tool_return") {
        return item;
    }
    let approvals: Option<Vec<ApprovalItem>> = v
        .get("tool_returns")
        .and_then(|r| serde_json::from_value(r.clone()).ok());
    match approvals {
        Some(approvals) => MessageItem::Approval(crate::wire::letta::ApprovalCreate {
            kind: "approval".into(),
            approvals,
            otid: v.get("otid").and_then(Value::as_str).map(str::to_string),
        }),
        None => item,
    }
}

pub(crate) fn send_message<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    conv_path_id: &str,
    body: &[u8],
    endpoint: Endpoint,
) -> Response<Body> {
    let mut req: SendMessageRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return unprocessable(&e.to_string()),
    };
    let oss = config.profile.oss();
    let streaming_field = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("streaming").and_then(Value::as_bool));
    req.streaming = match endpoint {
        // The conversations endpoint streams unless told otherwise (captures d4, d7; the SDK's
        // docstring: "By default (streaming=true)").
        Endpoint::Conversations => streaming_field.unwrap_or(true),
        // The agents endpoint answers JSON unless told to stream (captures d3, a3).
        Endpoint::Agents { sdk_client } => {
            let streaming = streaming_field.unwrap_or(false);
            if streaming && !sdk_client {
                return detail(StatusCode::UNPROCESSABLE_ENTITY, STREAMING_NEEDS_SDK_DETAIL);
            }
            streaming
        }
        Endpoint::AgentsStream => true,
    };
    if oss {
        req.messages = req
            .messages
            .into_iter()
            .map(tool_return_as_approval)
            .collect();
    }
    // Only the conversations endpoint takes the conversation lock (capture e3).
    let locking = endpoint == Endpoint::Conversations;
    let local = config.profile == Profile::Local;
    let mut st = store.lock().unwrap();
    if endpoint != Endpoint::Conversations && !st.agents.contains_key(conv_path_id) {
        return not_found_agent(conv_path_id);
    }
    let conv_id = if conv_path_id == "default" {
        match &req.agent_id {
            Some(a) => a.clone(),
            None => {
                return detail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "agent_id is required when conversation_id is 'default'",
                );
            }
        }
    } else {
        conv_path_id.to_string()
    };
    let Some(conv) = st.conversations.get(&conv_id) else {
        return not_found_conversation(&conv_id);
    };
    let agent_id = conv.agent_id.clone();
    if !st.agents.contains_key(&agent_id) {
        return not_found_agent(&agent_id);
    }
    let now = env.now_ms();
    st.ensure_system_message(config.profile, &conv_id, now);

    // Injected faults (sim serve and scenarios), before the server looks at the request.
    st.sends += 1;
    // client-model (issue 4): `BusyOwnRun` answers 409 after the run has started.
    let mut busy_own_run = false;
    match config.hooks.on_send(st.sends) {
        SendFault::Pass => {}
        // ---- client-model (issue 4) ----
        SendFault::BusyOwnRun => {
            env.observe(Observation::Fault {
                fault: format!("busy_own_run send={}", st.sends),
            });
            busy_own_run = true;
        }
        SendFault::ApprovalAppearsInBand(call) => {
            env.observe(Observation::Fault {
                fault: format!(
                    "approval_pending_in_band send={} tool_call_id={}",
                    st.sends, call.id
                ),
            });
            // client-model (issue 4): the planted history in the trace.
            for o in super::planted_history(&conv_id, &call) {
                env.observe(o);
            }
            plant_pending_approval(&mut st, config.profile, &conv_id, &agent_id, call, now);
        }
        // ---- end client-model ----
        SendFault::Busy => {
            env.observe(Observation::Fault {
                fault: format!("busy_409 send={}", st.sends),
            });
            return conflict(&config, json!({ "detail": super::BUSY_DETAIL }));
        }
        SendFault::ShuttingDown => {
            env.observe(Observation::Fault {
                fault: format!("shutting_down_503 send={}", st.sends),
            });
            return http::json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &super::shutting_down_body(),
            );
        }
        SendFault::ApprovalAppears(call) => {
            env.observe(Observation::Fault {
                fault: format!(
                    "approval_pending_on_send send={} tool_call_id={}",
                    st.sends, call.id
                ),
            });
            // client-model (issue 4): the planted history in the trace.
            for o in super::planted_history(&conv_id, &call) {
                env.observe(o);
            }
            plant_pending_approval(&mut st, config.profile, &conv_id, &agent_id, call, now);
            return conflict(&config, json!({ "detail": super::APPROVAL_PENDING_DETAIL }));
        }
    }

    let otids: Vec<&str> = req.messages.iter().filter_map(MessageItem::otid).collect();
    // Dedupe applies to background runs only (captures/letta_e2e d3x).
    let token = if local || !req.background {
        None
    } else {
        ids::request_token(&otids)
    };
    if let Some(existing) = token.as_ref().and_then(|t| st.tokens.get(t)).cloned()
        && !config.bugs.ignore_request_token
    {
        env.observe(Observation::RunAttached {
            run_id: existing.clone(),
            how: "request_token".into(),
        });
        drop(st);
        return stream::follow(&env, &config, &store, &existing, 0, true);
    }

    let conv = st.conversations.get(&conv_id).expect("checked above");
    if !local
        && locking
        && let Some(active) = conv.active_run.clone()
        && st.runs.get(&active).is_some_and(|r| !r.finished)
    {
        return conflict(
            &config,
            json!({"detail": super::busy_detail(&active), "run_id": active}),
        );
    }

    let approval_pos = req
        .messages
        .iter()
        .position(|m| matches!(m, MessageItem::Approval(_)));
    let approvals: Option<Vec<ApprovalItem>> = approval_pos.map(|i| match &req.messages[i] {
        MessageItem::Approval(a) => a.approvals.clone(),
        _ => unreachable!("position found an approval"),
    });
    let has_pending = !conv.pending.is_empty();

    if !local && let Some(items) = &approvals {
        if approval_pos != Some(0) {
            return detail(
                StatusCode::BAD_REQUEST,
                "Invalid request: the approval response must be the first message.",
            );
        }
        if has_pending {
            let mut expected: Vec<&str> = conv.pending.iter().map(|c| c.id.as_str()).collect();
            let mut got: Vec<&str> = items.iter().map(ApprovalItem::tool_call_id).collect();
            expected.sort_unstable();
            got.sort_unstable();
            if expected != got {
                return detail(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "Invalid tool call IDs. Expected '{}', but received '{}'.",
                        py_list(&expected),
                        py_list(&got)
                    ),
                );
            }
        }
    }
    let plain_while_pending =
        !local && approvals.is_none() && has_pending && !config.bugs.accept_message_while_pending;
    if plain_while_pending
        && (config.approval_conflict == ApprovalConflict::Http409 || !req.streaming)
    {
        // The agents endpoint's 409 has an object `detail` naming the pending request
        // (capture d3); the conversations endpoint's a string (capture d7).
        if oss && matches!(endpoint, Endpoint::Agents { .. }) {
            return conflict(
                &config,
                json!({"detail": {
                    "code": "PENDING_APPROVAL",
                    "message": super::APPROVAL_PENDING_DETAIL,
                    "pending_request_id": conv.pending_message_id,
                }}),
            );
        }
        return conflict(&config, json!({ "detail": super::APPROVAL_PENDING_DETAIL }));
    }
    let nothing_pending = !local && approvals.is_some() && !has_pending;
    if nothing_pending && !req.streaming {
        return detail(StatusCode::BAD_REQUEST, super::NOTHING_PENDING_DETAIL);
    }

    // Start the run.
    let run_id = st.new_id(config.profile, IdKind::Run);
    let (changed, _) = watch::channel(0);
    st.runs.insert(
        run_id.clone(),
        Run {
            id: run_id.clone(),
            agent_id: agent_id.clone(),
            conversation_id: conv_id.clone(),
            status: RunStatus::Running,
            stop_reason: None,
            background: req.background || local,
            log: Vec::new(),
            done_marker: false,
            finished: false,
            error: None,
            request_token: token.clone(),
            created_ms: now,
            completed_ms: None,
            cancel_requested: false,
            changed,
        },
    );
    if let Some(t) = &token {
        st.tokens.insert(t.clone(), run_id.clone());
    }
    if !local && req.background {
        for o in &otids {
            st.otids.insert((*o).to_string(), run_id.clone());
        }
    }
    env.observe(Observation::RunStarted {
        run_id: run_id.clone(),
        conversation_id: conv_id.clone(),
        request_token: token.clone().unwrap_or_default(),
    });
    if locking || local {
        st.conversations
            .get_mut(&conv_id)
            .expect("checked above")
            .active_run = Some(run_id.clone());
    }
    if !local && req.include_pings {
        let ping_id = st.new_id(config.profile, IdKind::Ping);
        let date = ids::iso_date(env.epoch_ms() + now);
        record(
            &env,
            &config,
            &mut st,
            &run_id,
            ping_chunk(&ping_id, &date),
            None,
        );
    }

    if plain_while_pending || nothing_pending {
        let text = if plain_while_pending {
            super::APPROVAL_PENDING_DETAIL
        } else {
            super::NOTHING_PENDING_DETAIL
        };
        // The pending-approval refusal (captures d8): error_type internal_error, message =
        // detail = the conflict text.
        fail_run(
            &env,
            &config,
            &mut st,
            &run_id,
            StopReason::Error,
            "internal_error",
            text,
            text,
        );
        drop(st);
        return respond(&env, &config, &store, &run_id, req.streaming);
    }

    if local && approvals.is_none() && !config.bugs.skip_orphan_settling {
        settle_unresolved(
            &env,
            &config,
            &mut st,
            &conv_id,
            Some(&run_id),
            super::TURN_DID_NOT_COMPLETE,
        );
    }

    let tool_messages = write_history(
        &env,
        &config,
        &mut st,
        &conv_id,
        &run_id,
        &req,
        approvals.as_deref(),
    );
    // Step streaming echoes the client's tool results before the model's answer; token
    // streaming does not (PROVENANCE.md "Step streaming": b2 echoes, b and c do not).
    if oss && !req.stream_tokens {
        for id in &tool_messages {
            if let Some(chunk) = st
                .messages
                .get(id)
                .and_then(|m| tool_return_chunk(m, env.epoch_ms()))
            {
                record(&env, &config, &mut st, &run_id, chunk, None);
            }
        }
    }

    let history: Vec<Message> = st
        .conversation_messages(&conv_id)
        .into_iter()
        .cloned()
        .collect();
    let agent = st.agents.get(&agent_id).expect("checked above");
    let job = provider_call::request::RunJob {
        run_id: run_id.clone(),
        conversation_id: conv_id,
        model: agent.model.clone(),
        history,
        client_tools: req.client_tools.clone(),
        stream_tokens: req.stream_tokens,
    };
    drop(st);
    spawn_run(&env, &config, &store, job);
    if busy_own_run {
        // client-model (issue 4): the run goes on; the answer names it as the lock holder.
        return conflict(
            &config,
            json!({"detail": super::busy_detail(&run_id), "run_id": run_id}),
        );
    }
    respond(&env, &config, &store, &run_id, req.streaming)
}

/// Starts the run task; if it ends without a terminal chunk, the run gets the
/// `stream_incomplete` synthesis (letta-protocol.md §1.1).
pub(crate) fn spawn_run<E: Env>(
    env: &E,
    config: &Arc<ServerConfig>,
    store: &SharedStore,
    job: provider_call::request::RunJob,
) {
    let task_env = env.clone();
    let task_store = store.clone();
    let task_config = config.clone();
    tokio::spawn(async move {
        let run_id = job.run_id.clone();
        provider_call::execute(
            task_env.clone(),
            task_config.clone(),
            task_store.clone(),
            job,
        )
        .await;
        let mut st = task_store.lock().unwrap();
        if st.runs.get(&run_id).is_some_and(|r| !r.finished) {
            fail_run(
                &task_env,
                &task_config,
                &mut st,
                &run_id,
                StopReason::Error,
                "stream_incomplete",
                super::STREAM_INCOMPLETE_MESSAGE,
                super::STREAM_INCOMPLETE_MESSAGE,
            );
        }
    });
}

/// A streaming response following the run, or (non-streaming sends) the finished run as JSON.
fn respond<E: Env>(
    env: &E,
    config: &Arc<ServerConfig>,
    store: &SharedStore,
    run_id: &str,
    streaming: bool,
) -> Response<Body> {
    if streaming {
        stream::follow(env, config, store, run_id, 0, false)
    } else {
        stream::collect_json(store, run_id)
    }
}

/// Writes the request into the conversation: the approval response and one tool message per
/// result or denial, then the user messages. Returns the ids of the tool messages written.
fn write_history<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut super::Store,
    conv_id: &str,
    run_id: &str,
    req: &SendMessageRequest,
    approvals: Option<&[ApprovalItem]>,
) -> Vec<String> {
    let mut tool_messages = Vec::new();
    let local = config.profile == Profile::Local;
    let oss = config.profile.oss();
    let now = env.now_ms();
    let unix = env.epoch_ms() + now;
    let step_id = st.new_id(config.profile, IdKind::Step);
    if let Some(items) = approvals {
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
            let (content, tool_return, status, is_error, entry) = match item {
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
                    (
                        content,
                        text,
                        status.clone(),
                        is_error,
                        HistoryEntry::ToolReturn {
                            tool_call_id: tool_call_id.clone(),
                            status: status.clone(),
                        },
                    )
                }
                ApprovalItem::Approval {
                    tool_call_id,
                    approve: false,
                    reason,
                } => {
                    let reason = reason
                        .clone()
                        .unwrap_or_else(|| super::DEFAULT_DENIAL_REASON.into());
                    let content = if local {
                        reason.clone()
                    } else {
                        denial_content(&reason, unix)
                    };
                    (
                        content.clone(),
                        content,
                        "error".to_string(),
                        true,
                        HistoryEntry::Denial {
                            tool_call_id: tool_call_id.clone(),
                            reason,
                        },
                    )
                }
                // `approve:true` without a result is ignored (letta-protocol.md §7.3).
                ApprovalItem::Approval { approve: true, .. } => continue,
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
                    .unwrap_or_else(|| step_id.clone())
            } else {
                step_id.clone()
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
    }
    for m in &req.messages {
        let MessageItem::Message(m) = m else { continue };
        // Items with other roles (the `system` empty-response nudge) are dropped
        // (letta-protocol.md §7.1 step 3).
        if m.role != "user" {
            continue;
        }
        let id = st.new_id(config.profile, IdKind::Message);
        st.push_message(
            conv_id,
            Message {
                id,
                otid: m.otid.clone(),
                run_id: Some(run_id.to_string()),
                step_id: Some(step_id.clone()),
                at_ms: now,
                body: MessageBody::User {
                    content: serde_json::to_value(&m.content).expect("json"),
                },
            },
        );
        env.observe(Observation::History {
            conversation_id: conv_id.to_string(),
            entry: HistoryEntry::User {
                otid: m.otid.clone(),
            },
        });
    }
    tool_messages
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

pub(crate) fn ping_chunk(id: &str, date: &str) -> LettaChunk {
    LettaChunk::Ping(GenericMessage {
        env: crate::wire::letta::Envelope {
            id: id.to_string(),
            date: date.to_string(),
            message_type: "ping".into(),
            ..Default::default()
        },
        fields: Default::default(),
    })
}
