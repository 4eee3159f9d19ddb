//! Every route of the HTTP surface except the message send (docs/server.md lists them all):
//! the start-up routes the real CLI calls (reference B.3: models, agents create / retrieve /
//! patch, conversations create / retrieve), the endpoints of letta-protocol.md §2.1 (stream
//! attach by otid, run replay, runs, cancel, message listing and retrieval, compact), and the
//! error answers of a FastAPI server (404 `{"detail":"Not Found"}` for unknown paths, 405 for a
//! wrong method, 422 for a body that is not JSON).
//!
//! [`route`] only dispatches; each resource's handler follows it. The JSON shapes are in
//! `views`, cancel and compact in their own modules, the send in `send`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, Response, StatusCode};
use serde_json::{Value, json};

use super::cancel::{cancel_conversation, cancel_runs};
use super::compact::compact;
use super::errors::{
    add_retry_after, detail, method_not_allowed, not_found, not_found_agent,
    not_found_conversation, not_found_run, unprocessable,
};
use super::parse::{body_json, percent_decode, q, q_all, query_pairs};
use super::send::{Endpoint, is_sdk_client, send_message};
use super::store::{Agent, Conversation, DEFAULT_SYSTEM, IdKind};
use super::views::{agent_json, conversation_json, model_json, project_in, strip_variant};
use super::{
    NOT_BACKGROUND_DETAIL, OTID_ATTACH_POLLS_MS, Profile, Run, RunStreamFault, ServerConfig,
    SharedStore, Store, no_run_for_otid, stream,
};
use crate::model::port::env::Env;
use crate::model::port::http::{self as mhttp, Body};
use crate::model::port::observe::Observation;

/// Dispatches one request by path and method.
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
    if let Some(header) = req.headers.get("x-letta-response-state") {
        env.observe(Observation::ServerResponseStateHeader {
            method: method.to_string(),
            path: path.clone(),
            header: String::from_utf8_lossy(header.as_bytes()).into_owned(),
        });
    }
    match (parts.as_slice(), method) {
        (["v1", "health"], Method::GET) => mhttp::json_response(
            StatusCode::OK,
            &json!({"version": "0.16.8", "status": "ok"}),
        ),
        (["v1", "models"], Method::GET) => list_models(&store),
        (["v1", "tools", "add-base-tools"], Method::POST) => {
            mhttp::json_response(StatusCode::OK, &json!([]))
        }
        (["v1", "agents"], Method::GET) => list_agents(&store, &query, epoch),
        (["v1", "agents"], Method::POST) => create_agent(&config, &store, &body, epoch, now),
        (["v1", "agents", agent_id], m) => {
            let agent_id = agent_id.to_string();
            match m {
                Method::GET => get_agent(&config, &store, &agent_id, epoch, now),
                Method::PATCH => patch_agent(&store, &agent_id, &body, epoch, now),
                _ => unrouted(&env, req, method_not_allowed()),
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
            create_conversation(&config, &store, &query, &body, epoch, now)
        }
        (["v1", "conversations", conv_id], Method::GET) => {
            get_conversation(&config, &store, conv_id, epoch, now)
        }
        (["v1", "conversations", conv_id, "messages"], Method::POST) => {
            let conv = conv_id.to_string();
            send_message(env, config, store, &conv, &body, Endpoint::Conversations)
        }
        // The agents endpoints of 0.16.8 (captures a–e3, x1); the other profiles do not serve
        // them.
        (["v1", "agents", agent_id, "messages"], Method::POST) if config.profile.oss() => {
            let agent = agent_id.to_string();
            let sdk_client = is_sdk_client(&req.headers);
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
            list_conversation_messages(&config, &store, conv_id, &query, epoch)
        }
        (["v1", "conversations", conv_id, "stream"], Method::POST) => {
            let conv = conv_id.to_string();
            let body = match body_json(&body) {
                Ok(b) => b,
                Err(e) => return unprocessable(&e),
            };
            attach(env, config, store, &conv, body).await
        }
        (["v1", "conversations", conv_id, "cancel"], Method::POST)
            if !config.bugs.unserved_conversation_cancel =>
        {
            let conv = conv_id.to_string();
            cancel_conversation(&env, &config, &store, &conv)
        }
        (["v1", "conversations", conv_id, "compact"], Method::POST) => {
            let conv = conv_id.to_string();
            compact(&env, &config, &store, &conv).await
        }
        (["v1", "messages", message_id], Method::GET) => {
            get_message(&config, &store, message_id, epoch)
        }
        (["v1", "runs"], Method::GET) => list_runs(&store, &query, epoch),
        (["v1", "runs", run_id], Method::GET) => {
            let mut st = store.lock().unwrap();
            st.run_reads += 1;
            let n = st.run_reads;
            if config.hooks.fail_run_read(n) {
                env.observe(Observation::Fault {
                    fault: format!("run_read_500 request={n}"),
                });
                return internal_server_error();
            }
            match st.runs.get(*run_id) {
                Some(r) => mhttp::json_response(StatusCode::OK, &r.to_json(epoch)),
                None => not_found_run(&config, epoch, run_id),
            }
        }
        (["v1", "runs", run_id, "stream"], Method::POST) => {
            replay_run(&env, &config, &store, run_id, &body, epoch)
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
        | (["v1", "messages", _], _) => unrouted(&env, req, method_not_allowed()),
        _ => unrouted(&env, req, not_found()),
    }
}

/// Reports a request that matched no route (`server_unrouted`, for `requests-routed`) and
/// gives FastAPI's answer for it.
fn unrouted<E: Env>(
    env: &E,
    req: &::http::request::Parts,
    answer: Response<Body>,
) -> Response<Body> {
    env.observe(Observation::ServerUnrouted {
        method: req.method.to_string(),
        path: req.uri.path().to_string(),
        status: answer.status().as_u16(),
    });
    answer
}

// ---- models and agents ------------------------------------------------------------------------

/// `GET /v1/models`: one model object per distinct agent model, sorted.
fn list_models(store: &SharedStore) -> Response<Body> {
    let st = store.lock().unwrap();
    let mut handles: Vec<String> = st.agents.values().map(|a| a.model.clone()).collect();
    handles.sort();
    handles.dedup();
    let models: Vec<Value> = handles.iter().map(|h| model_json(h)).collect();
    mhttp::json_response(StatusCode::OK, &Value::Array(models))
}

/// `GET /v1/agents` (`limit`, default 50).
fn list_agents(store: &SharedStore, query: &[(String, String)], epoch: u64) -> Response<Body> {
    let st = store.lock().unwrap();
    let limit = q(query, "limit").and_then(|l| l.parse().ok()).unwrap_or(50);
    let list: Vec<Value> = st
        .agents
        .values()
        .take(limit)
        .map(|a| agent_json(&st, a, epoch))
        .collect();
    mhttp::json_response(StatusCode::OK, &Value::Array(list))
}

/// `POST /v1/agents`: a new agent with its default conversation (kept under the agent id).
fn create_agent(
    config: &ServerConfig,
    store: &SharedStore,
    body: &[u8],
    epoch: u64,
    now: u64,
) -> Response<Body> {
    let body = match body_json(body) {
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
            .unwrap_or(DEFAULT_SYSTEM)
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

/// `GET /v1/agents/{id}`.
fn get_agent(
    config: &ServerConfig,
    store: &SharedStore,
    agent_id: &str,
    epoch: u64,
    now: u64,
) -> Response<Body> {
    let mut st = store.lock().unwrap();
    if !st.agents.contains_key(agent_id) {
        return not_found_agent(agent_id);
    }
    st.ensure_system_message(config.profile, agent_id, now);
    mhttp::json_response(
        StatusCode::OK,
        &agent_json(&st, &st.agents[agent_id], epoch),
    )
}

/// `PATCH /v1/agents/{id}`.
fn patch_agent(
    store: &SharedStore,
    agent_id: &str,
    body: &[u8],
    epoch: u64,
    now: u64,
) -> Response<Body> {
    let body = match body_json(body) {
        Ok(b) => b,
        Err(e) => return unprocessable(&e),
    };
    let mut st = store.lock().unwrap();
    let Some(agent) = st.agents.get_mut(agent_id) else {
        return not_found_agent(agent_id);
    };
    apply_agent_patch(agent, &body);
    agent.updated_ms = now;
    mhttp::json_response(
        StatusCode::OK,
        &agent_json(&st, &st.agents[agent_id], epoch),
    )
}

/// Applies the fields of a create or patch body; fields it does not model are kept in
/// `extra` and echoed back.
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

// ---- conversations and messages ---------------------------------------------------------------

/// `POST /v1/conversations?agent_id=…`.
fn create_conversation(
    config: &ServerConfig,
    store: &SharedStore,
    query: &[(String, String)],
    body: &[u8],
    epoch: u64,
    now: u64,
) -> Response<Body> {
    let Some(agent_id) = q(query, "agent_id").map(str::to_string) else {
        return mhttp::json_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            &json!({"detail": [{"type": "missing", "loc": ["query", "agent_id"], "msg": "Field required"}]}),
        );
    };
    let body = match body_json(body) {
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

/// `GET /v1/conversations/{id}`.
fn get_conversation(
    config: &ServerConfig,
    store: &SharedStore,
    conv_id: &str,
    epoch: u64,
    now: u64,
) -> Response<Body> {
    let mut st = store.lock().unwrap();
    if !st.conversations.contains_key(conv_id) {
        return not_found_conversation(conv_id);
    }
    st.ensure_system_message(config.profile, conv_id, now);
    let mut answer = mhttp::json_response(StatusCode::OK, &conversation_json(&st, conv_id, epoch));
    if config.bugs.untyped_answers {
        answer.headers_mut().remove(hyper::header::CONTENT_TYPE);
    }
    answer
}

/// `GET /v1/conversations/{id}/messages`; `default` needs `agent_id` in the query.
fn list_conversation_messages(
    config: &ServerConfig,
    store: &SharedStore,
    conv_id: &str,
    query: &[(String, String)],
    epoch: u64,
) -> Response<Body> {
    let st = store.lock().unwrap();
    let id = if conv_id == "default" {
        match q(query, "agent_id") {
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
    list_messages(&st, config.profile, &id, query, epoch)
}

/// `GET /v1/messages/{id}`: the stored message's variants.
fn get_message(
    config: &ServerConfig,
    store: &SharedStore,
    message_id: &str,
    epoch: u64,
) -> Response<Body> {
    let st = store.lock().unwrap();
    // Local projected ids carry a `:(assistant|reasoning|tool):…` suffix (§1.7).
    let source = strip_variant(message_id);
    match st.messages.get(source) {
        Some(m) => mhttp::json_response(
            StatusCode::OK,
            &Value::Array(project_in(&st, m, config.profile, epoch)),
        ),
        None => detail(
            StatusCode::NOT_FOUND,
            &format!("Message not found with id='{message_id}'"),
        ),
    }
}

/// `GET /v1/conversations/{id}/messages` and `GET /v1/agents/{id}/messages`: a bare JSON array.
/// System messages are not listed (captures/letta_e2e a: a new conversation lists `[]`).
/// `order` is `desc` unless `asc`; `before`/`after` are cursors relative to that order, as the
/// cloud API interprets them (letta-protocol.md §0.1); `include_return_message_types` filters
/// before the limit (§10.2).
fn list_messages(
    st: &Store,
    profile: Profile,
    conv_id: &str,
    query: &[(String, String)],
    epoch: u64,
) -> Response<Body> {
    let mut all: Vec<Value> = st
        .conversation_messages(conv_id)
        .into_iter()
        .filter(|m| st.listed(m, profile))
        .flat_map(|m| project_in(st, m, profile, epoch))
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

// ---- runs and stream attach -------------------------------------------------------------------

/// `GET /v1/runs`: filtered by `conversation_id`, `agent_id` and `statuses`, newest first
/// unless `order=asc`, then `limit`.
fn list_runs(store: &SharedStore, query: &[(String, String)], epoch: u64) -> Response<Body> {
    let st = store.lock().unwrap();
    let statuses = q_all(query, "statuses");
    let conv = q(query, "conversation_id");
    let agent = q(query, "agent_id");
    let mut runs: Vec<&Run> = st
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
    if q(query, "order") != Some("asc") {
        runs.reverse();
    }
    let limit = q(query, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(usize::MAX);
    let list: Vec<Value> = runs.iter().take(limit).map(|r| r.to_json(epoch)).collect();
    mhttp::json_response(StatusCode::OK, &Value::Array(list))
}

/// A 500 as uvicorn writes it when the application raised: plain text, no detail (the shape of
/// a proxy's or a crashed handler's answer the client cannot read a reason from).
fn internal_server_error() -> Response<Body> {
    Response::builder()
        .status(StatusCode::INTERNAL_SERVER_ERROR)
        .header("content-type", "text/plain; charset=utf-8")
        .body(mhttp::full("Internal Server Error"))
        .expect("valid response")
}

/// `POST /v1/runs/{id}/stream`: replays a background run's log after `starting_after`, then
/// follows it live.
fn replay_run<E: Env>(
    env: &E,
    config: &Arc<ServerConfig>,
    store: &SharedStore,
    run_id: &str,
    body: &[u8],
    epoch: u64,
) -> Response<Body> {
    let run_id = run_id.to_string();
    let body = match body_json(body) {
        Ok(b) => b,
        Err(e) => return unprocessable(&e),
    };
    let n = {
        let mut st = store.lock().unwrap();
        st.run_streams += 1;
        st.run_streams
    };
    if let RunStreamFault::Fail500(retry_after) = config.hooks.fail_run_stream(n) {
        env.observe(Observation::Fault {
            fault: format!("run_stream_500 request={n}"),
        });
        let mut answer = internal_server_error();
        if let Some(retry_after) = retry_after {
            add_retry_after(env, config, &mut answer, retry_after, env.now_ms());
        }
        return answer;
    }
    let after = body["starting_after"].as_u64().unwrap_or(0);
    {
        let st = store.lock().unwrap();
        match st.runs.get(&run_id) {
            None => return not_found_run(config, epoch, &run_id),
            Some(r) if !r.background || config.bugs.refuse_run_resume => {
                return detail(StatusCode::BAD_REQUEST, NOT_BACKGROUND_DETAIL);
            }
            Some(_) => {}
        }
    }
    stream::follow(env, config, store, &run_id, after, true)
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
            env.clock().sleep(Duration::from_millis(wait)).await;
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
