//! The run task: one provider call (with the provider SDK's retries), its events translated
//! into Letta chunks as they arrive, and the run's ending.
//!
//! Cloud translation follows the real 0.16.8 server in token-streaming mode
//! (captures/letta_server/PROVENANCE.md, "Token streaming"): one `assistant_message` per text
//! delta, all with the same `message-<uuid>` id and the derived otid; an
//! `approval_request_message` per tool-call delta, the first carrying the name and
//! `arguments:null`, later ones `name:null` and an argument fragment, with `otid == id` and
//! `tool_calls` a single object. Then `stop_reason` (`requires_approval` when the model called a
//! client tool, else `end_turn`), `usage_statistics`, `[DONE]`.
//!
//! Local translation follows the provider turn executor (letta-protocol.md §7.6): text deltas
//! as `assistant_message` with a parts array and a segment otid, one complete
//! `approval_request_message` per finished tool call, `usage_statistics` at the provider's
//! stop, `stop_reason` last; errors as an `error_message` chunk then `stop_reason`.
//!
//! A run that is finished while this task runs (a cancel) is left alone: the task stops
//! reading and writes nothing more; the partial step is not kept (letta-protocol.md §7.2).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use serde_json::{Value, json};

use super::store::{IdKind, Message, MessageBody, Store};
use super::{
    Profile, ServerConfig, SharedStore, StoredToolCall, fail_run, finish_run, ids, record,
};
use crate::model::port::env::Env;
use crate::model::port::http;
use crate::model::port::observe::{HistoryEntry, Observation};
use crate::model::provider::api_path;
use crate::wire::letta::{
    AssistantMessage, ClientTool, Content, Envelope, LettaChunk, StopReason, StopReasonChunk,
    ToolCallDelta, ToolCallMessage, ToolCalls, UsageStatistics,
};
use crate::wire::provider::{ProviderDecoder, ProviderEvent, ProviderFormat, ProviderStop};
use crate::wire::sse::SseDecoder;

/// The provider SDK's automatic retries of an error status before any output: 2 retries
/// (3 calls: captures/letta_server g_fail500, "3 (Letta retried twice)"), after 0.5 s and 1 s
/// (the OpenAI SDK's `min(0.5 s · 2^n, 8 s)`, without its jitter; the capture's 1.6 s total fits).
pub const PROVIDER_RETRY_DELAYS_MS: [u64; 2] = [500, 1000];

/// What a run needs from the request that started it.
pub struct RunJob {
    pub run_id: String,
    pub conversation_id: String,
    pub model: String,
    pub history: Vec<Message>,
    pub client_tools: Vec<ClientTool>,
    /// `stream_tokens` of the request. `letta-oss-0.16` with `false` makes a non-streaming
    /// model call and sends each message whole (PROVENANCE.md "Step streaming", a3/b2).
    pub stream_tokens: bool,
}

fn content_text(v: &Value) -> String {
    serde_json::from_value::<Content>(v.clone())
        .map(|c| c.text())
        .unwrap_or_default()
}

/// Builds the provider request body from the conversation history.
pub(crate) fn provider_body(api: ProviderFormat, job: &RunJob) -> Value {
    let system: String = job
        .history
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::System { text } => Some(text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    match api {
        ProviderFormat::Anthropic => {
            let mut messages: Vec<Value> = Vec::new();
            for m in &job.history {
                match &m.body {
                    MessageBody::System { .. } | MessageBody::ApprovalResponse { .. } => {}
                    MessageBody::User { content } => {
                        messages.push(json!({"role": "user", "content": content_text(content)}))
                    }
                    MessageBody::Assistant { text, tool_calls } => {
                        let mut content = Vec::new();
                        if !text.is_empty() {
                            content.push(json!({"type": "text", "text": text}));
                        }
                        for c in tool_calls {
                            let input: Value =
                                serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                            content.push(
                                json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                            );
                        }
                        messages.push(json!({"role": "assistant", "content": content}));
                    }
                    MessageBody::Tool {
                        tool_call_id,
                        content,
                        is_error,
                        ..
                    } => {
                        let block = json!({"type": "tool_result", "tool_use_id": tool_call_id,
                            "content": content, "is_error": is_error});
                        // Consecutive results share one user message, as the API requires.
                        match messages.last_mut() {
                            Some(last)
                                if last["role"] == "user"
                                    && last["content"].as_array().is_some_and(|a| {
                                        a.iter().all(|b| b["type"] == "tool_result")
                                    }) =>
                            {
                                last["content"].as_array_mut().expect("array").push(block)
                            }
                            _ => messages.push(json!({"role": "user", "content": [block]})),
                        }
                    }
                }
            }
            json!({"model": job.model, "max_tokens": 4096, "stream": true, "system": system,
                   "messages": messages, "tools": super::tool_defs(&job.client_tools)})
        }
        ProviderFormat::OpenAiChat => {
            let mut messages: Vec<Value> = vec![json!({"role": "system", "content": system})];
            for m in &job.history {
                match &m.body {
                    MessageBody::System { .. } | MessageBody::ApprovalResponse { .. } => {}
                    MessageBody::User { content } => {
                        messages.push(json!({"role": "user", "content": content_text(content)}))
                    }
                    MessageBody::Assistant { text, tool_calls } => {
                        let calls: Vec<Value> = tool_calls
                            .iter()
                            .map(|c| {
                                json!({"id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": c.arguments}})
                            })
                            .collect();
                        // Content is null when the message only calls tools
                        // (captures/letta_e2e a model summary).
                        let content = if text.is_empty() {
                            Value::Null
                        } else {
                            json!(text)
                        };
                        let mut m = json!({"role": "assistant", "content": content});
                        if !calls.is_empty() {
                            m["tool_calls"] = Value::Array(calls);
                        }
                        messages.push(m);
                    }
                    MessageBody::Tool {
                        tool_call_id,
                        content,
                        ..
                    } => messages.push(
                        json!({"role": "tool", "content": content, "tool_call_id": tool_call_id}),
                    ),
                }
            }
            let tools: Vec<Value> = super::tool_defs(&job.client_tools)
                .into_iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                    "name": t["name"], "description": t["description"],
                    "parameters": t["input_schema"]}})
                })
                .collect();
            json!({"model": job.model, "stream": true, "messages": messages, "tools": tools,
                   "stream_options": {"include_usage": true}, "parallel_tool_calls": false,
                   "tool_choice": "auto"})
        }
    }
}

/// A tool call being assembled from provider deltas.
struct OpenCall {
    index: u32,
    id: String,
    name: String,
    arguments: String,
    /// The provider closed the call (Anthropic `content_block_stop`, OpenAI `finish_reason`).
    complete: bool,
}

/// The name Letta's error details give a provider (captures g_fail500: "OpenAI API error").
fn vendor(api: ProviderFormat) -> &'static str {
    match api {
        ProviderFormat::Anthropic => "Anthropic",
        ProviderFormat::OpenAiChat => "OpenAI",
    }
}

/// A JSON value as Python's `repr` prints the parsed object (captures g_fail500: the error body
/// in the detail is `{'error': {'message': …}}`).
pub fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            if s.contains('\'') && !s.contains('"') {
                format!("\"{s}\"")
            } else {
                format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
            }
        }
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}: {}", py_repr(&json!(k)), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The run's `error_type` for a provider error status (Letta's LLM error classes; the names
/// are the client's NON_RETRYABLE_RUN_ERROR_TYPES, letta-protocol.md §3.6).
fn error_type_for(status: u16) -> &'static str {
    match status {
        400 => "llm_bad_request",
        401 => "llm_authentication",
        403 => "llm_permission_denied",
        404 => "llm_not_found",
        422 => "llm_unprocessable_entity",
        429 => "llm_rate_limit",
        _ => "llm_error",
    }
}

fn is_finished(store: &SharedStore, run_id: &str) -> bool {
    store
        .lock()
        .unwrap()
        .runs
        .get(run_id)
        .is_none_or(|r| r.finished)
}

/// Runs one model step for `job` and ends the run.
pub async fn execute<E: Env>(env: E, config: Arc<ServerConfig>, store: SharedStore, job: RunJob) {
    let local = config.profile == Profile::Local;
    let oss = config.profile.oss();
    // Step streaming: 0.16.8 calls the model without streaming (PROVENANCE.md "The fake
    // model": "With stream_tokens:false (a3, b2) it made non-streaming chat completion calls").
    let step_mode = oss && !job.stream_tokens && config.provider_api == ProviderFormat::OpenAiChat;
    let mut body = provider_body(config.provider_api, &job);
    if step_mode && let Some(o) = body.as_object_mut() {
        o.insert("stream".into(), json!(false));
        o.remove("stream_options");
    }
    let body = body.to_string();
    let mut attempt = 0u32;
    let resp = loop {
        attempt += 1;
        if is_finished(&store, &job.run_id) {
            return;
        }
        env.observe(Observation::ProviderCall {
            run_id: job.run_id.clone(),
            attempt,
        });
        let req = Request::post(api_path(config.provider_api))
            .header("host", config.provider_addr.as_str())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.clone())))
            .expect("valid request");
        let resp = match http::send(
            &env,
            &config.provider_addr,
            req,
            config.provider_idle_timeout,
        )
        .await
        {
            Ok(r) => r,
            Err(e) => {
                return provider_failed(
                    &env,
                    &config,
                    &store,
                    &job,
                    "llm_error",
                    "An error occurred with the LLM request.",
                    &format!(
                        "INTERNAL_SERVER_ERROR: Network error during {} streaming: {}",
                        vendor(config.provider_api),
                        if oss { String::new() } else { e.to_string() }
                    ),
                );
            }
        };
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            break resp;
        }
        let text = http::read_body(resp.into_body(), 1 << 20)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let retryable = matches!(status, 408 | 409 | 429) || status >= 500;
        if retryable && (attempt as usize) <= PROVIDER_RETRY_DELAYS_MS.len() {
            tokio::time::sleep(Duration::from_millis(
                PROVIDER_RETRY_DELAYS_MS[attempt as usize - 1],
            ))
            .await;
            continue;
        }
        let shown = serde_json::from_str::<Value>(&text)
            .map(|v| py_repr(&v))
            .unwrap_or(text);
        return provider_failed(
            &env,
            &config,
            &store,
            &job,
            error_type_for(status),
            "An error occurred with the LLM request.",
            &format!(
                "INTERNAL_SERVER_ERROR: {} API error: Error code: {status} - {shown}",
                vendor(config.provider_api)
            ),
        );
    };

    if step_mode {
        return step_call(env, config, store, job, resp).await;
    }
    let mut decoder = ProviderDecoder::new(config.provider_api);
    let mut sse = SseDecoder::new();
    let mut body = resp.into_body();

    let (message_id, step_id, date) = {
        let mut st = store.lock().unwrap();
        (
            st.new_id(config.profile, IdKind::Message),
            st.new_id(config.profile, IdKind::Step),
            ids::iso_date(env.epoch_ms() + env.now_ms()),
        )
    };
    let mut text = String::new();
    let mut calls: Vec<OpenCall> = Vec::new();
    let mut usage = UsageStatistics {
        message_type: "usage_statistics".into(),
        step_count: 1,
        ..Default::default()
    };
    let mut stop_seen = false;
    let mut provider_stop: Option<ProviderStop> = None;
    let mut provider_error: Option<String> = None;
    // Local: the segment otid of the current text run (letta-protocol.md §7.6).
    let mut text_otid: Option<String> = None;

    let envelope = |message_type: &str, id: String, otid: Option<String>| Envelope {
        id,
        date: date.clone(),
        message_type: message_type.into(),
        otid,
        step_id: (!local).then(|| step_id.clone()),
        ..Default::default()
    };

    // The provider closed a tool call: it is a call now. Local streams show it here, as one
    // complete chunk per tool call with no otid (letta-protocol.md §7.6).
    let close_call = |st: &mut Store, c: &mut OpenCall| {
        c.complete = true;
        if local {
            let d = ToolCallDelta {
                name: Some(c.name.clone()),
                arguments: Some(c.arguments.clone()),
                tool_call_id: Some(c.id.clone()),
            };
            let id = st.new_id(config.profile, IdKind::Chunk);
            record(
                &env,
                &config,
                st,
                &job.run_id,
                approval_chunk(envelope("approval_request_message", id, None), d, false),
                None,
            );
        }
    };

    'read: loop {
        let frame = match tokio::time::timeout(config.provider_idle_timeout, body.frame()).await {
            Err(_) => {
                provider_error = Some("INTERNAL_SERVER_ERROR: Provider stream timed out".into());
                break 'read;
            }
            Ok(None) => break 'read,
            Ok(Some(Err(e))) => {
                // 0.16.8 shows an empty cause after the colon (captures g_cutstream_*).
                provider_error = Some(format!(
                    "INTERNAL_SERVER_ERROR: Network error during {} streaming: {}",
                    vendor(config.provider_api),
                    if oss {
                        String::new()
                    } else {
                        http::error_chain(&e)
                    }
                ));
                break 'read;
            }
            Ok(Some(Ok(f))) => f,
        };
        if is_finished(&store, &job.run_id) {
            // Cancelled: stop reading; the provider connection closes with the body.
            return;
        }
        let Ok(bytes) = frame.into_data() else {
            continue;
        };
        for f in sse.push(&bytes) {
            let Some(ev) = f.as_event() else { continue };
            let events = match decoder.on_event(ev) {
                Ok(evs) => evs,
                Err(e) => {
                    provider_error = Some(format!(
                        "INTERNAL_SERVER_ERROR: Invalid provider stream: {e}"
                    ));
                    break 'read;
                }
            };
            for pe in events {
                let mut st = store.lock().unwrap();
                match pe {
                    ProviderEvent::TextDelta { text: delta, .. } => {
                        text.push_str(&delta);
                        let chunk = if local {
                            let otid = text_otid
                                .get_or_insert_with(|| {
                                    format!("provider-assistant-0-{}", st.uuid())
                                })
                                .clone();
                            let id = st.new_id(config.profile, IdKind::Chunk);
                            LettaChunk::AssistantMessage(AssistantMessage {
                                env: envelope("assistant_message", id, Some(otid)),
                                content: Content::Parts(vec![
                                    json!({"type": "text", "text": delta}),
                                ]),
                            })
                        } else {
                            let otid = ids::assistant_otid(&message_id, 0);
                            LettaChunk::AssistantMessage(AssistantMessage {
                                env: envelope("assistant_message", message_id.clone(), Some(otid)),
                                content: Content::Text(delta),
                            })
                        };
                        record(&env, &config, &mut st, &job.run_id, chunk, None);
                    }
                    ProviderEvent::ToolCallStart { index, id, name } => {
                        calls.push(OpenCall {
                            index,
                            id: id.clone(),
                            name: name.clone(),
                            arguments: String::new(),
                            complete: false,
                        });
                        if !local {
                            let delta = ToolCallDelta {
                                name: Some(name),
                                arguments: None,
                                tool_call_id: Some(id),
                            };
                            record(
                                &env,
                                &config,
                                &mut st,
                                &job.run_id,
                                approval_chunk(
                                    envelope(
                                        "approval_request_message",
                                        message_id.clone(),
                                        Some(message_id.clone()),
                                    ),
                                    delta,
                                    true,
                                ),
                                None,
                            );
                        }
                    }
                    ProviderEvent::ToolCallArgsDelta { index, delta } => {
                        if delta.is_empty() {
                            continue;
                        }
                        let Some(call) = calls.iter_mut().find(|c| c.index == index) else {
                            continue;
                        };
                        call.arguments.push_str(&delta);
                        if !local {
                            let d = ToolCallDelta {
                                name: None,
                                arguments: Some(delta),
                                tool_call_id: Some(call.id.clone()),
                            };
                            record(
                                &env,
                                &config,
                                &mut st,
                                &job.run_id,
                                approval_chunk(
                                    envelope(
                                        "approval_request_message",
                                        message_id.clone(),
                                        Some(message_id.clone()),
                                    ),
                                    d,
                                    true,
                                ),
                                None,
                            );
                        }
                    }
                    ProviderEvent::ToolCallEnd { index } => {
                        if let Some(c) = calls.iter_mut().find(|c| c.index == index) {
                            close_call(&mut st, c);
                        }
                    }
                    ProviderEvent::Usage(u) => {
                        if let Some(n) = u.input_tokens {
                            usage.prompt_tokens = n;
                        }
                        if let Some(n) = u.output_tokens {
                            usage.completion_tokens = n;
                        }
                    }
                    ProviderEvent::Stop { reason, .. } => {
                        stop_seen = true;
                        // A message that ends `tool_use` closes every call whose arguments
                        // are whole JSON, block close seen or not: the provider SDKs build the
                        // final message from each block's start and deltas, so a lost
                        // `content_block_stop` loses nothing. (A swarm `provider_stream` drop
                        // found the difference: the client had been shown a call the run
                        // then did not ask for.) A call cut by max_tokens stays open.
                        if reason == ProviderStop::ToolUse {
                            for c in calls.iter_mut() {
                                if !c.complete && whole_json(&c.arguments) {
                                    close_call(&mut st, c);
                                }
                            }
                        }
                        provider_stop = Some(reason);
                    }
                    ProviderEvent::Error {
                        error_type,
                        message,
                    } => {
                        // An SSE error object (PROVENANCE.md, g_miderr): 0.16.8 reports the
                        // provider's message as an invalid argument.
                        provider_error = Some(if oss {
                            format!(
                                "INVALID_ARGUMENT: {} API error: {message}",
                                vendor(config.provider_api)
                            )
                        } else {
                            format!("INTERNAL_SERVER_ERROR: {error_type}: {message}")
                        });
                        break 'read;
                    }
                    ProviderEvent::Done => {
                        stop_seen = true;
                        break 'read;
                    }
                    ProviderEvent::MessageStart { .. } | ProviderEvent::ThinkingDelta { .. } => {}
                }
            }
        }
    }
    for f in sse.finish() {
        if let Some(ev) = f.as_event()
            && let Ok(evs) = decoder.on_event(ev)
        {
            stop_seen |= evs
                .iter()
                .any(|e| matches!(e, ProviderEvent::Stop { .. } | ProviderEvent::Done));
        }
    }
    let _ = decoder.finish();

    env.observe(Observation::ProviderResult {
        run_id: job.run_id.clone(),
        outcome: match &provider_error {
            Some(e) => format!("error: {e}"),
            None if stop_seen => "complete".into(),
            None => "ended without a stop".into(),
        },
    });

    let mut st = store.lock().unwrap();
    if st.runs.get(&job.run_id).is_none_or(|r| r.finished) {
        return;
    }
    // A call the provider never closed (cut by max_tokens) is not a call: its arguments are
    // truncated JSON and it must not run.
    let stored_calls: Vec<StoredToolCall> = calls
        .iter()
        .filter(|c| c.complete)
        .map(|c| StoredToolCall {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        })
        .collect();
    // A message that stopped without saying why while a tool call was still open lost its
    // `message_delta`: the client has been shown a call the run cannot ask for, so the run
    // fails like a stream without a stop (a swarm `provider_stream` drop found it).
    let open_call_without_reason = provider_stop.is_none() && calls.iter().any(|c| !c.complete);
    if provider_error.is_some() || !stop_seen || open_call_without_reason {
        let detail = provider_error.unwrap_or_else(|| {
            "INTERNAL_SERVER_ERROR: Provider stream ended without a stop reason".into()
        });
        if local {
            // Errors after model output are not retried; error chunk then stop_reason (§7.6).
            fail_run(
                &env,
                &config,
                &mut st,
                &job.run_id,
                StopReason::LlmApiError,
                "llm_error",
                "An error occurred during agent execution.",
                &detail,
            );
            return;
        }
        // A cut provider stream: two stop_reason frames (error, llm_api_error) then the error
        // frame (captures g_cutstream_*). Partial output is not kept in history.
        record(
            &env,
            &config,
            &mut st,
            &job.run_id,
            LettaChunk::StopReason(StopReasonChunk {
                message_type: "stop_reason".into(),
                stop_reason: StopReason::Error,
            }),
            None,
        );
        fail_run(
            &env,
            &config,
            &mut st,
            &job.run_id,
            StopReason::LlmApiError,
            "internal_error",
            "An error occurred during agent execution.",
            &detail,
        );
        return;
    }
    finish_turn(
        &env,
        &config,
        &mut st,
        &job,
        Turn {
            message_id,
            step_id,
            text,
            calls: stored_calls,
            provider_stop,
            usage,
        },
    );
}

/// Step streaming (`letta-oss-0.16`, `stream_tokens:false`): one non-streaming chat
/// completion, then each message whole: an `assistant_message` with all the text, an
/// `approval_request_message` with every call and `tool_calls` a list (capture a3), and usage
/// with the cache and reasoning counts `0` rather than null (PROVENANCE.md "Observations").
async fn step_call<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    job: RunJob,
    resp: hyper::Response<hyper::body::Incoming>,
) {
    let read = tokio::time::timeout(
        config.provider_idle_timeout,
        http::read_body(resp.into_body(), 64 << 20),
    )
    .await;
    let parsed: Result<Value, String> = match read {
        Err(_) => Err("INTERNAL_SERVER_ERROR: Provider response timed out".into()),
        Ok(Err(_)) => Err(format!(
            "INTERNAL_SERVER_ERROR: Network error during {} request: ",
            vendor(config.provider_api)
        )),
        Ok(Ok(bytes)) => serde_json::from_slice(&bytes)
            .map_err(|e| format!("INTERNAL_SERVER_ERROR: Invalid provider response: {e}")),
    };
    let completion = match parsed {
        Ok(v) => v,
        Err(detail) => {
            return provider_failed(
                &env,
                &config,
                &store,
                &job,
                "internal_error",
                "An error occurred during agent execution.",
                &detail,
            );
        }
    };
    env.observe(Observation::ProviderResult {
        run_id: job.run_id.clone(),
        outcome: "complete".into(),
    });
    let choice = &completion["choices"][0];
    let message = &choice["message"];
    let text = message["content"].as_str().unwrap_or("").to_string();
    let calls: Vec<StoredToolCall> = message["tool_calls"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| StoredToolCall {
                    id: c["id"].as_str().unwrap_or("").to_string(),
                    name: c["function"]["name"].as_str().unwrap_or("").to_string(),
                    arguments: c["function"]["arguments"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let provider_stop = match choice["finish_reason"].as_str() {
        Some("length") => Some(ProviderStop::MaxTokens),
        _ => None,
    };
    let count = |k: &str| completion["usage"][k].as_u64().unwrap_or(0);
    let usage = UsageStatistics {
        message_type: "usage_statistics".into(),
        step_count: 1,
        prompt_tokens: count("prompt_tokens"),
        completion_tokens: count("completion_tokens"),
        cached_input_tokens: Some(0),
        cache_write_tokens: Some(0),
        reasoning_tokens: Some(0),
        ..Default::default()
    };
    let mut st = store.lock().unwrap();
    if st.runs.get(&job.run_id).is_none_or(|r| r.finished) {
        return;
    }
    let message_id = st.new_id(config.profile, IdKind::Message);
    let step_id = st.new_id(config.profile, IdKind::Step);
    let date = ids::iso_date(env.epoch_ms() + env.now_ms());
    let envelope = |message_type: &str, otid: String| Envelope {
        id: message_id.clone(),
        date: date.clone(),
        message_type: message_type.into(),
        otid: Some(otid),
        step_id: Some(step_id.clone()),
        ..Default::default()
    };
    if !text.is_empty() {
        let chunk = LettaChunk::AssistantMessage(AssistantMessage {
            env: envelope("assistant_message", ids::assistant_otid(&message_id, 0)),
            content: Content::Text(text.clone()),
        });
        record(&env, &config, &mut st, &job.run_id, chunk, None);
    }
    if !calls.is_empty() {
        let deltas: Vec<ToolCallDelta> = calls
            .iter()
            .map(|c| ToolCallDelta {
                name: Some(c.name.clone()),
                arguments: Some(c.arguments.clone()),
                tool_call_id: Some(c.id.clone()),
            })
            .collect();
        let chunk = LettaChunk::ApprovalRequestMessage(ToolCallMessage {
            env: envelope("approval_request_message", message_id.clone()),
            tool_call: deltas.first().cloned(),
            tool_calls: Some(ToolCalls::Many(deltas)),
        });
        record(&env, &config, &mut st, &job.run_id, chunk, None);
    }
    finish_turn(
        &env,
        &config,
        &mut st,
        &job,
        Turn {
            message_id,
            step_id,
            text,
            calls,
            provider_stop,
            usage,
        },
    );
}

/// A model turn that ended well: what it said and called, how it stopped, what it cost.
struct Turn {
    message_id: String,
    step_id: String,
    text: String,
    calls: Vec<StoredToolCall>,
    provider_stop: Option<ProviderStop>,
    usage: UsageStatistics,
}

/// Stores the assistant message, leaves its client tool calls pending, and ends the run:
/// `stop_reason` (`requires_approval` with calls, else `end_turn`), `usage_statistics`,
/// `[DONE]` (captures a, b; local: usage then stop_reason, §1.6).
fn finish_turn<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut super::Store,
    job: &RunJob,
    turn: Turn,
) {
    let local = config.profile == Profile::Local;
    let Turn {
        message_id,
        step_id,
        text,
        calls: stored_calls,
        provider_stop,
        mut usage,
    } = turn;
    // ---- client-model (issue 4) ---------------------------------------------------------
    // An empty model answer (no text, no tool calls, not cut by max tokens) fails the run as
    // `llm_api_error` whose detail carries "empty content in": the shape letta-code's
    // empty-response retry recognises (letta-protocol.md §3.7, §3.10 step 6; the legacy error
    // type `llm_empty_response`, §1.4). Not captured from 0.16.8 (so not in `letta-oss-0.16`);
    // see docs/client.md.
    if config.profile == Profile::Cloud
        && text.is_empty()
        && stored_calls.is_empty()
        && provider_stop != Some(ProviderStop::MaxTokens)
    {
        fail_run(
            env,
            config,
            st,
            &job.run_id,
            StopReason::LlmApiError,
            "llm_empty_response",
            "LLM provider returned empty content in response",
            "LLM provider returned empty content in response (no text and no tool calls)",
        );
        return;
    }
    // ---- end client-model ---------------------------------------------------------------
    let now = env.now_ms();
    st.push_message(
        &job.conversation_id,
        Message {
            id: message_id.clone(),
            otid: Some(if stored_calls.is_empty() {
                ids::assistant_otid(&message_id, 0)
            } else {
                message_id.clone()
            }),
            run_id: Some(job.run_id.clone()),
            step_id: Some(step_id.clone()),
            at_ms: now,
            body: MessageBody::Assistant {
                text: text.clone(),
                tool_calls: stored_calls.clone(),
            },
        },
    );
    env.observe(Observation::History {
        conversation_id: job.conversation_id.clone(),
        entry: HistoryEntry::Assistant {
            chars: text.chars().count(),
        },
    });
    for c in &stored_calls {
        env.observe(Observation::History {
            conversation_id: job.conversation_id.clone(),
            entry: HistoryEntry::ToolCall {
                tool_call_id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            },
        });
    }
    // letta-protocol.md §7.6: tool calls → requires_approval; `length` → max_tokens_exceeded.
    let stop = if stored_calls.is_empty() {
        if provider_stop == Some(ProviderStop::MaxTokens) {
            StopReason::MaxTokensExceeded
        } else {
            StopReason::EndTurn
        }
    } else {
        let conv = st
            .conversations
            .get_mut(&job.conversation_id)
            .expect("run of a known conversation");
        conv.pending = stored_calls;
        conv.pending_message_id = Some(message_id);
        StopReason::RequiresApproval
    };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    usage.context_tokens = Some(usage.total_tokens);
    let stop_chunk = LettaChunk::StopReason(StopReasonChunk {
        message_type: "stop_reason".into(),
        stop_reason: stop.clone(),
    });
    let usage_chunk = LettaChunk::UsageStatistics(usage);
    // Cloud: stop_reason, usage (captures); local: usage, then stop_reason last (§1.6).
    let (first, second) = if local {
        (usage_chunk, stop_chunk)
    } else {
        (stop_chunk, usage_chunk)
    };
    record(env, config, st, &job.run_id, first, None);
    record(env, config, st, &job.run_id, second, None);
    finish_run(env, config, st, &job.run_id, stop, true);
}

/// An `approval_request_message`. Cloud token streaming: `tool_calls` is the same single
/// object as `tool_call` (captures PROVENANCE "Token streaming"); local: only `tool_call`.
fn approval_chunk(env: Envelope, delta: ToolCallDelta, with_calls: bool) -> LettaChunk {
    LettaChunk::ApprovalRequestMessage(ToolCallMessage {
        env,
        tool_call: Some(delta.clone()),
        tool_calls: with_calls.then_some(ToolCalls::One(delta)),
    })
}

fn provider_failed<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    job: &RunJob,
    error_type: &str,
    message: &str,
    detail: &str,
) {
    env.observe(Observation::ProviderResult {
        run_id: job.run_id.clone(),
        outcome: format!("error: {detail}"),
    });
    let mut st = store.lock().unwrap();
    if st.runs.get(&job.run_id).is_none_or(|r| r.finished) {
        return;
    }
    fail_run(
        env,
        config,
        &mut st,
        &job.run_id,
        StopReason::LlmApiError,
        error_type,
        message,
        detail,
    );
}

/// Arguments a provider SDK would accept as a finished tool input: empty (no deltas, `{}`) or
/// one JSON value.
fn whole_json(arguments: &str) -> bool {
    arguments.trim().is_empty() || serde_json::from_str::<serde_json::Value>(arguments).is_ok()
}
