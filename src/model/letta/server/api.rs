//! Every route of the HTTP surface except the message send (docs/server.md lists them all):
//! the start-up routes the real CLI calls (reference B.3: models, agents create / retrieve /
//! patch, conversations create / retrieve), the endpoints of letta-protocol.md §2.1 (stream
//! attach by otid, run replay, runs, cancel, message listing and retrieval, compact), and the
//! error answers of a FastAPI server (404 `{"detail":"Not Found"}` for unknown paths, 405 for a
//! wrong method, 422 for a body that is not JSON).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, Response, StatusCode};
use serde_json::{Value, json};

use super::errors::{
    conflict, detail, method_not_allowed, not_found, not_found_agent, not_found_conversation,
    not_found_run, unprocessable,
};
use super::send::{Endpoint, send_message};
use super::store::{Agent, Conversation, DEFAULT_USER, IdKind, Message, MessageBody};
use super::{
    OTID_ATTACH_POLLS_MS, Profile, ServerConfig, SharedStore, finish_run, ids, no_run_for_otid,
    record, settle_unresolved, stream,
};
use crate::model::port::env::Env;
use crate::model::port::http::{self as mhttp, Body};
use crate::model::port::observe::Observation;
use crate::wire::letta::{LettaChunk, StopReason, StopReasonChunk};

/// Query parameters in order (repeated keys kept), percent-decoded.
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let Some(q) = query else { return Vec::new() };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn q<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn q_all<'a>(pairs: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    pairs
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

fn body_json(bytes: &[u8]) -> Result<Value, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

pub(crate) async fn route<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    req: &::http::request::Parts,
    body: Bytes,
) -> Response<Body> {
    let method = req.method.clone();
    let path = req.uri.path().trim_end_matches('/').to_string();
    let query = query_pairs(req.uri.query());
    let parts: Vec<String> = path.split('/').skip(1).map(percent_decode).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let epoch = env.epoch_ms();
    let now = env.now_ms();
    match (parts.as_slice(), method) {
        (["v1", "health"], Method::GET) => mhttp::json_response(
            StatusCode::OK,
            &json!({"version": "0.16.8", "status": "ok"}),
        ),
        (["v1", "models"], Method::GET) => {
            let st = store.lock().unwrap();
            let mut handles: Vec<String> = st.agents.values().map(|a| a.model.clone()).collect();
            handles.sort();
            handles.dedup();
            let models: Vec<Value> = handles.iter().map(|h| model_json(h)).collect();
            mhttp::json_response(StatusCode::OK, &Value::Array(models))
        }
        (["v1", "tools", "add-base-tools"], Method::POST) => {
            mhttp::json_response(StatusCode::OK, &json!([]))
        }
        (["v1", "agents"], Method::GET) => {
            let st = store.lock().unwrap();
            let limit = q(&query, "limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(50);
            let list: Vec<Value> = st
                .agents
                .values()
                .take(limit)
                .map(|a| agent_json(&st, a, epoch))
                .collect();
            mhttp::json_response(StatusCode::OK, &Value::Array(list))
        }
        (["v1", "agents"], Method::POST) => {
            let body = match body_json(&body) {
                Ok(b) => b,
                Err(e) => return unprocessable(&e),
            };
            let mut st = store.lock().unwrap();
            let id = st.new_id(config.profile, IdKind::Agent);
            let default_model = config
                .agents
                .first()
                .map(|a| a.model.clone())
                .unwrap_or_default();
            let mut agent = Agent {
                id: id.clone(),
                name: body["name"].as_str().unwrap_or("agent").to_string(),
                model: body["model"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or(default_model),
                system: body["system"]
                    .as_str()
                    .unwrap_or(super::store::DEFAULT_SYSTEM)
                    .to_string(),
                tags: Vec::new(),
                extra: serde_json::Map::new(),
                created_ms: now,
                updated_ms: now,
            };
            apply_agent_patch(&mut agent, &body);
            st.agents.insert(id.clone(), agent);
            st.conversations.insert(
                id.clone(),
                Conversation {
                    id: id.clone(),
                    agent_id: id.clone(),
                    created_ms: now,
                    updated_ms: now,
                    ..Conversation::default()
                },
            );
            st.ensure_system_message(config.profile, &id, now);
            let a = &st.agents[&id];
            mhttp::json_response(StatusCode::OK, &agent_json(&st, a, epoch))
        }
        (["v1", "agents", agent_id], m) => {
            let agent_id = agent_id.to_string();
            match m {
                Method::GET => {
                    let mut st = store.lock().unwrap();
                    if !st.agents.contains_key(&agent_id) {
                        return not_found_agent(&agent_id);
                    }
                    st.ensure_system_message(config.profile, &agent_id, now);
                    mhttp::json_response(
                        StatusCode::OK,
                        &agent_json(&st, &st.agents[&agent_id], epoch),
                    )
                }
                Method::PATCH => {
                    let body = match body_json(&body) {
                        Ok(b) => b,
                        Err(e) => return unprocessable(&e),
                    };
                    let mut st = store.lock().unwrap();
                    let Some(agent) = st.agents.get_mut(&agent_id) else {
                        return not_found_agent(&agent_id);
                    };
                    apply_agent_patch(agent, &body);
                    agent.updated_ms = now;
                    mhttp::json_response(
                        StatusCode::OK,
                        &agent_json(&st, &st.agents[&agent_id], epoch),
                    )
                }
                _ => method_not_allowed(),
            }
        }
        (["v1", "agents", agent_id, "messages"], Method::GET) => {
            let st = store.lock().unwrap();
            if !st.agents.contains_key(*agent_id) {
                return not_found_agent(agent_id);
            }
            list_messages(&st, config.profile, agent_id, &query, epoch)
        }
        (["v1", "agents", agent_id, "messages", "cancel"], Method::POST) => {
            let agent_id = agent_id.to_string();
            let body = match body_json(&body) {
                Ok(b) => b,
                Err(e) => return unprocessable(&e),
            };
            cancel_runs(&env, &config, &store, &agent_id, &body)
        }
        (["v1", "conversations"], Method::POST) => {
            let Some(agent_id) = q(&query, "agent_id").map(str::to_string) else {
                return mhttp::json_response(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &json!({"detail": [{"type": "missing", "loc": ["query", "agent_id"], "msg": "Field required"}]}),
                );
            };
            let body = match body_json(&body) {
                Ok(b) => b,
                Err(e) => return unprocessable(&e),
            };
            let mut st = store.lock().unwrap();
            if !st.agents.contains_key(&agent_id) {
                return not_found_agent(&agent_id);
            }
            let id = st.new_id(config.profile, IdKind::Conversation);
            st.conversations.insert(
                id.clone(),
                Conversation {
                    id: id.clone(),
                    agent_id,
                    summary: body["summary"].as_str().map(str::to_string),
                    created_ms: now,
                    updated_ms: now,
                    ..Conversation::default()
                },
            );
            st.ensure_system_message(config.profile, &id, now);
            mhttp::json_response(StatusCode::OK, &conversation_json(&st, &id, epoch))
        }
        (["v1", "conversations", conv_id], Method::GET) => {
            let mut st = store.lock().unwrap();
            if !st.conversations.contains_key(*conv_id) {
                return not_found_conversation(conv_id);
            }
            st.ensure_system_message(config.profile, conv_id, now);
            mhttp::json_response(StatusCode::OK, &conversation_json(&st, conv_id, epoch))
        }
        (["v1", "conversations", conv_id, "messages"], Method::POST) => {
            let conv = conv_id.to_string();
            send_message(env, config, store, &conv, &body, Endpoint::Conversations)
        }
        // The agents endpoints of 0.16.8 (captures a–e3, x1); the other profiles do not serve
        // them.
        (["v1", "agents", agent_id, "messages"], Method::POST) if config.profile.oss() => {
            let agent = agent_id.to_string();
            let sdk_client = super::send::is_sdk_client(&req.headers);
            send_message(
                env,
                config,
                store,
                &agent,
                &body,
                Endpoint::Agents { sdk_client },
            )
        }
        (["v1", "agents", agent_id, "messages", "stream"], Method::POST)
            if config.profile.oss() =>
        {
            let agent = agent_id.to_string();
            send_message(env, config, store, &agent, &body, Endpoint::AgentsStream)
        }
        (["v1", "conversations", conv_id, "messages"], Method::GET) => {
            let st = store.lock().unwrap();
            let id = if *conv_id == "default" {
                match q(&query, "agent_id") {
                    Some(a) => a.to_string(),
                    None => {
                        return detail(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "agent_id is required when conversation_id is 'default'",
                        );
                    }
                }
            } else {
                conv_id.to_string()
            };
            if !st.conversations.contains_key(&id) {
                return not_found_conversation(&id);
            }
            list_messages(&st, config.profile, &id, &query, epoch)
        }
        (["v1", "conversations", conv_id, "stream"], Method::POST) => {
            let conv = conv_id.to_string();
            let body = match body_json(&body) {
                Ok(b) => b,
                Err(e) => return unprocessable(&e),
            };
            attach(env, config, store, &conv, body).await
        }
        (["v1", "conversations", conv_id, "cancel"], Method::POST) => {
            let conv = conv_id.to_string();
            cancel_conversation(&env, &config, &store, &conv)
        }
        (["v1", "conversations", conv_id, "compact"], Method::POST) => {
            let conv = conv_id.to_string();
            compact(&env, &config, &store, &conv)
        }
        (["v1", "messages", message_id], Method::GET) => {
            let st = store.lock().unwrap();
            // Local projected ids carry a `:(assistant|reasoning|tool):…` suffix (§1.7).
            let source = strip_variant(message_id);
            match st.messages.get(source) {
                Some(m) => mhttp::json_response(
                    StatusCode::OK,
                    &Value::Array(project(m, config.profile, epoch)),
                ),
                None => detail(
                    StatusCode::NOT_FOUND,
                    &format!("Message not found with id='{message_id}'"),
                ),
            }
        }
        (["v1", "runs"], Method::GET) => {
            let st = store.lock().unwrap();
            let statuses = q_all(&query, "statuses");
            let conv = q(&query, "conversation_id");
            let agent = q(&query, "agent_id");
            let mut runs: Vec<&super::Run> = st
                .runs
                .values()
                .filter(|r| conv.is_none_or(|c| r.conversation_id == c))
                .filter(|r| agent.is_none_or(|a| r.agent_id == a))
                .filter(|r| {
                    statuses.is_empty()
                        || statuses.iter().any(|s| {
                            serde_json::to_value(r.status)
                                .ok()
                                .and_then(|v| v.as_str().map(|x| x == *s))
                                == Some(true)
                        })
                })
                .collect();
            runs.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            if q(&query, "order") != Some("asc") {
                runs.reverse();
            }
            let limit = q(&query, "limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(usize::MAX);
            let list: Vec<Value> = runs.iter().take(limit).map(|r| r.to_json(epoch)).collect();
            mhttp::json_response(StatusCode::OK, &Value::Array(list))
        }
        (["v1", "runs", run_id], Method::GET) => {
            let st = store.lock().unwrap();
            match st.runs.get(*run_id) {
                Some(r) => mhttp::json_response(StatusCode::OK, &r.to_json(epoch)),
                None => not_found_run(&config, epoch, run_id),
            }
        }
        (["v1", "runs", run_id, "stream"], Method::POST) => {
            let run_id = run_id.to_string();
            let body = match body_json(&body) {
                Ok(b) => b,
                Err(e) => return unprocessable(&e),
            };
            let n = {
                let mut st = store.lock().unwrap();
                st.run_streams += 1;
                st.run_streams
            };
            if config.hooks.fail_run_stream(n) {
                env.observe(Observation::Fault {
                    fault: format!("run_stream_500 request={n}"),
                });
                return Response::builder()
                    .status(StatusCode::INTERNAL_SERVER_ERROR)
                    .header("content-type", "text/plain; charset=utf-8")
                    .body(mhttp::full("Internal Server Error"))
                    .expect("valid response");
            }
            let after = body["starting_after"].as_u64().unwrap_or(0);
            {
                let st = store.lock().unwrap();
                match st.runs.get(&run_id) {
                    None => return not_found_run(&config, epoch, &run_id),
                    Some(r) if !r.background => {
                        return detail(StatusCode::BAD_REQUEST, super::NOT_BACKGROUND_DETAIL);
                    }
                    Some(_) => {}
                }
            }
            stream::follow(&env, &config, &store, &run_id, after, true)
        }
        // Known paths with another method: 405, as FastAPI answers.
        (["v1", "models"], _)
        | (["v1", "agents"], _)
        | (["v1", "conversations"], _)
        | (["v1", "conversations", _], _)
        | (["v1", "conversations", _, "messages"], _)
        | (["v1", "conversations", _, "stream" | "cancel" | "compact"], _)
        | (["v1", "runs"], _)
        | (["v1", "runs", _], _)
        | (["v1", "runs", _, "stream"], _)
        | (["v1", "messages", _], _) => method_not_allowed(),
        _ => not_found(),
    }
}

/// `POST /v1/conversations/{id}/stream` (letta-protocol.md §2.1, §2.5): attach to a run by
/// `run_id`, by `otid` (polled three times before a 404, captures/letta_e2e flow e), or to the
/// conversation's active run. Local profile: a new turn with no messages (§7.1).
async fn attach<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    conv_path_id: &str,
    body: Value,
) -> Response<Body> {
    let conv_id = if conv_path_id == "default" {
        match body["agent_id"].as_str() {
            Some(a) => a.to_string(),
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
    if !store.lock().unwrap().conversations.contains_key(&conv_id) {
        return not_found_conversation(&conv_id);
    }
    if config.profile == Profile::Local {
        let mut b = body.clone();
        b["messages"] = json!([]);
        let bytes = b.to_string();
        return send_message(
            env,
            config,
            store,
            &conv_id,
            bytes.as_bytes(),
            Endpoint::Conversations,
        );
    }
    let after = body["starting_after"].as_u64().unwrap_or(0);
    let run_id = if let Some(r) = body["run_id"].as_str() {
        let st = store.lock().unwrap();
        match st.runs.get(r) {
            Some(_) => r.to_string(),
            None => return not_found_run(&config, env.epoch_ms(), r),
        }
    } else if let Some(otid) = body["otid"].as_str() {
        let mut found = store.lock().unwrap().otids.get(otid).cloned();
        for wait in OTID_ATTACH_POLLS_MS {
            if found.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(wait)).await;
            found = store.lock().unwrap().otids.get(otid).cloned();
        }
        match found {
            Some(r) => r,
            None => return detail(StatusCode::NOT_FOUND, &no_run_for_otid(otid)),
        }
    } else {
        let st = store.lock().unwrap();
        match st.conversations[&conv_id].active_run.clone() {
            Some(r) => r,
            None => {
                return detail(
                    StatusCode::NOT_FOUND,
                    &format!("No active run found for conversation {conv_id}."),
                );
            }
        }
    };
    env.observe(Observation::RunAttached {
        run_id: run_id.clone(),
        how: "conversation_stream".into(),
    });
    stream::follow(&env, &config, &store, &run_id, after, true)
}

/// Ends a running run `cancelled`: the stop_reason chunk, status `cancelled`, the lock
/// released (letta-protocol.md §7.4, §9.3). The run task sees the run finished and stops.
fn cancel_one<E: Env>(env: &E, config: &ServerConfig, st: &mut super::Store, run_id: &str) {
    env.observe(Observation::RunCancelled {
        run_id: run_id.to_string(),
    });
    if let Some(r) = st.runs.get_mut(run_id) {
        r.cancel_requested = true;
    }
    record(
        env,
        config,
        st,
        run_id,
        LettaChunk::StopReason(StopReasonChunk {
            message_type: "stop_reason".into(),
            stop_reason: StopReason::Cancelled,
        }),
        None,
    );
    finish_run(env, config, st, run_id, StopReason::Cancelled, true);
}

/// `POST /v1/conversations/{id}/cancel`. Cloud: the active run ends `cancelled`, and the
/// conversation's tool calls left without a result are settled "Interrupted by user"; with no
/// active run, 409 "No active runs to cancel…" and nothing changes, so an approval the run left
/// pending stays pending (letta-protocol.md §9.3; open question 3). Local: always settles and
/// answers `{"status":"cancelled"}` (§7.4).
fn cancel_conversation<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    conv_path_id: &str,
) -> Response<Body> {
    let mut st = store.lock().unwrap();
    // The client passes the agent id for the default conversation (§2.1).
    let conv_id = conv_path_id.to_string();
    if !st.conversations.contains_key(&conv_id) {
        return not_found_conversation(&conv_id);
    }
    let active = st.conversations[&conv_id]
        .active_run
        .clone()
        .filter(|r| st.runs.get(r).is_some_and(|r| !r.finished));
    match (config.profile, active) {
        (Profile::Cloud | Profile::LettaOss016, None) => conflict(
            config,
            json!({
                "detail": format!("No active runs to cancel for conversation {conv_id}")
            }),
        ),
        (profile, active) => {
            if let Some(run_id) = &active {
                cancel_one(env, config, &mut st, run_id);
            }
            let pending_kept = profile != Profile::Local && active.is_none();
            if !pending_kept {
                settle_unresolved(
                    env,
                    config,
                    &mut st,
                    &conv_id,
                    active.as_deref(),
                    super::INTERRUPTED_BY_USER,
                );
            }
            let mut out = json!({"status": "cancelled"});
            if let Some(r) = active {
                out[r] = json!("cancelled");
            }
            mhttp::json_response(StatusCode::OK, &out)
        }
    }
}

/// `POST /v1/agents/{agent_id}/messages/cancel` `{run_ids}`: each known, running run of that
/// agent ends `cancelled`; others answer `failed` (letta-protocol.md §7.4 cancelRun).
fn cancel_runs<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    agent_id: &str,
    body: &Value,
) -> Response<Body> {
    let mut st = store.lock().unwrap();
    if !st.agents.contains_key(agent_id) {
        return not_found_agent(agent_id);
    }
    let mut ids_: Vec<String> = body["run_ids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if ids_.is_empty() {
        // No ids: every running run of the agent.
        ids_ = st
            .runs
            .values()
            .filter(|r| r.agent_id == agent_id && !r.finished)
            .map(|r| r.id.clone())
            .collect();
    }
    let mut out = serde_json::Map::new();
    for run_id in ids_ {
        let ok = st
            .runs
            .get(&run_id)
            .is_some_and(|r| r.agent_id == agent_id && !r.finished);
        if ok {
            let conv = st.runs[&run_id].conversation_id.clone();
            cancel_one(env, config, &mut st, &run_id);
            if config.profile == Profile::Local {
                settle_unresolved(
                    env,
                    config,
                    &mut st,
                    &conv,
                    Some(&run_id),
                    super::INTERRUPTED_BY_USER,
                );
            }
        }
        out.insert(run_id, json!(if ok { "cancelled" } else { "failed" }));
    }
    mhttp::json_response(StatusCode::OK, &Value::Object(out))
}

/// `POST /v1/conversations/{id}/compact`: everything before the last user message that starts a
/// clean turn (no tool call open across it) becomes one summary message. The summary is a
/// deterministic placeholder; no model is called (docs/server.md). A tool call and its result
/// are never separated.
fn compact<E: Env>(
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
        return conflict(config, json!({"detail": super::APPROVAL_PENDING_DETAIL}));
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

fn strip_variant(id: &str) -> &str {
    for marker in [":assistant:", ":reasoning:", ":tool:"] {
        if let Some(i) = id.find(marker) {
            return &id[..i];
        }
    }
    id
}

/// The model object of `GET /v1/models/` (captures/letta_e2e a, exchange 1).
fn model_json(handle: &str) -> Value {
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

fn apply_agent_patch(agent: &mut Agent, body: &Value) {
    let Some(obj) = body.as_object() else { return };
    for (k, v) in obj {
        match k.as_str() {
            "model" => {
                if let Some(m) = v.as_str() {
                    agent.model = m.to_string();
                }
            }
            "name" => {
                if let Some(n) = v.as_str() {
                    agent.name = n.to_string();
                }
            }
            "system" => {
                if let Some(s) = v.as_str() {
                    agent.system = s.to_string();
                }
            }
            "tags" => {
                agent.tags = v
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|t| t.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            }
            // Not echoed: large create-only inputs.
            "memory_blocks" | "initial_message_sequence" | "tools" => {}
            _ => {
                agent.extra.insert(k.clone(), v.clone());
            }
        }
    }
}

fn agent_json(st: &super::Store, a: &Agent, epoch: u64) -> Value {
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

fn conversation_json(st: &super::Store, id: &str, epoch: u64) -> Value {
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

/// `GET /v1/conversations/{id}/messages` and `GET /v1/agents/{id}/messages`: a bare JSON array.
/// System messages are not listed (captures/letta_e2e a: a new conversation lists `[]`).
/// `order` is `desc` unless `asc`; `before`/`after` are cursors relative to that order, as the
/// cloud API interprets them (letta-protocol.md §0.1); `include_return_message_types` filters
/// before the limit (§10.2).
fn list_messages(
    st: &super::Store,
    profile: Profile,
    conv_id: &str,
    query: &[(String, String)],
    epoch: u64,
) -> Response<Body> {
    let mut all: Vec<Value> = st
        .conversation_messages(conv_id)
        .into_iter()
        .flat_map(|m| project(m, profile, epoch))
        .filter(|v| v["message_type"] != "system_message")
        .collect();
    if q(query, "order") != Some("asc") {
        all.reverse();
    }
    let types = q_all(query, "include_return_message_types");
    if !types.is_empty() {
        all.retain(|v| types.iter().any(|t| v["message_type"] == *t));
    }
    if let Some(after) = q(query, "after")
        && let Some(i) = all.iter().position(|v| v["id"] == after)
    {
        all.drain(..=i);
    }
    if let Some(before) = q(query, "before")
        && let Some(i) = all.iter().position(|v| v["id"] == before)
    {
        all.truncate(i);
    }
    let limit = q(query, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(100);
    all.truncate(limit);
    mhttp::json_response(StatusCode::OK, &Value::Array(all))
}
