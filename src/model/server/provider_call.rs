//! The run task: one provider call, its events translated into Letta chunks as they arrive,
//! and the run's ending.
//!
//! Translation follows the real 0.16.8 server in token-streaming mode
//! (captures/letta_server/PROVENANCE.md, "Token streaming"): one `assistant_message` per text
//! delta, all with the same `message-<uuid>` id and the derived otid; an
//! `approval_request_message` per tool-call delta, the first carrying the name and
//! `arguments:null`, later ones `name:null` and an argument fragment, with `otid == id` and
//! `tool_calls` a single object. Then `stop_reason` (`requires_approval` when the model called a
//! client tool, else `end_turn`), `usage_statistics`, `[DONE]`.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use serde_json::{Value, json};

use super::{
    ServerConfig, SharedStore, StoredMessage, StoredToolCall, fail_run, finish_run, ids, record,
    tool_defs,
};
use crate::model::env::Env;
use crate::model::http;
use crate::model::observe::{HistoryEntry, Observation};
use crate::model::provider::api_path;
use crate::wire::letta::{
    AssistantMessage, ClientTool, Content, Envelope, LettaChunk, StopReason, StopReasonChunk,
    ToolCallDelta, ToolCallMessage, ToolCalls, UsageStatistics,
};
use crate::wire::provider::{ProviderDecoder, ProviderEvent, ProviderFormat, ProviderStop};
use crate::wire::sse::SseDecoder;

/// What a run needs from the request that started it.
pub struct RunJob {
    pub run_id: String,
    pub conversation_id: String,
    pub model: String,
    pub history: Vec<StoredMessage>,
    pub client_tools: Vec<ClientTool>,
}

/// Builds the provider request body from the conversation history.
fn provider_body(api: ProviderFormat, job: &RunJob) -> Value {
    match api {
        ProviderFormat::Anthropic => {
            let mut messages: Vec<Value> = Vec::new();
            for m in &job.history {
                match m {
                    StoredMessage::User { text, .. } => {
                        messages.push(json!({"role": "user", "content": text}))
                    }
                    StoredMessage::Assistant {
                        text, tool_calls, ..
                    } => {
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
                    StoredMessage::ToolResult {
                        tool_call_id,
                        content,
                        is_error,
                    } => messages.push(json!({"role": "user", "content": [{
                        "type": "tool_result", "tool_use_id": tool_call_id,
                        "content": content, "is_error": is_error}]})),
                }
            }
            json!({"model": job.model, "max_tokens": 4096, "stream": true,
                   "messages": messages, "tools": tool_defs(&job.client_tools)})
        }
        ProviderFormat::OpenAiChat => {
            let mut messages: Vec<Value> = Vec::new();
            for m in &job.history {
                match m {
                    StoredMessage::User { text, .. } => {
                        messages.push(json!({"role": "user", "content": text}))
                    }
                    StoredMessage::Assistant {
                        text, tool_calls, ..
                    } => {
                        let calls: Vec<Value> = tool_calls
                            .iter()
                            .map(|c| {
                                json!({
                            "id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}})
                            })
                            .collect();
                        let mut m = json!({"role": "assistant", "content": text});
                        if !calls.is_empty() {
                            m["tool_calls"] = Value::Array(calls);
                        }
                        messages.push(m);
                    }
                    StoredMessage::ToolResult {
                        tool_call_id,
                        content,
                        ..
                    } => messages.push(
                        json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
                    ),
                }
            }
            let tools: Vec<Value> = tool_defs(&job.client_tools)
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

/// Runs one model step for `job` and ends the run.
pub async fn execute<E: Env>(env: E, config: Arc<ServerConfig>, store: SharedStore, job: RunJob) {
    env.observe(Observation::ProviderCall {
        run_id: job.run_id.clone(),
        attempt: 1,
    });
    let body = provider_body(config.provider_api, &job).to_string();
    let req = Request::post(api_path(config.provider_api))
        .header("host", config.provider_addr.as_str())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
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
                &store,
                &job,
                "llm_error",
                "An error occurred with the LLM request.",
                &format!("INTERNAL_SERVER_ERROR: Network error during provider call: {e}"),
            );
        }
    };
    let status = resp.status();
    if !status.is_success() {
        let text = http::read_body(resp.into_body(), 1 << 20)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        // client-model (interim): the legacy server's error types by provider status, so a run's
        // `metadata.error` says whether it is retryable (letta-protocol.md §1.1, §3.6).
        let error_type = match status.as_u16() {
            401 | 403 => "llm_authentication",
            400 => "llm_bad_request",
            404 => "llm_not_found",
            422 => "llm_unprocessable_entity",
            429 => "llm_rate_limit",
            _ => "llm_error",
        };
        return provider_failed(
            &env,
            &store,
            &job,
            error_type,
            "An error occurred with the LLM request.",
            &format!(
                "INTERNAL_SERVER_ERROR: API error: Error code: {} - {text}",
                status.as_u16()
            ),
        );
    }

    let mut decoder = ProviderDecoder::new(config.provider_api);
    let mut sse = SseDecoder::new();
    let mut body = resp.into_body();

    let (message_id, date) = {
        let mut st = store.lock().unwrap();
        (
            format!("message-{}", st.uuid()),
            ids::iso_date(env.epoch_ms() + env.now_ms()),
        )
    };
    let step_id = format!("step-{}", store.lock().unwrap().uuid());
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

    let envelope = |message_type: &str, otid: String| Envelope {
        id: message_id.clone(),
        date: date.clone(),
        message_type: message_type.into(),
        otid: Some(otid),
        step_id: Some(step_id.clone()),
        ..Default::default()
    };

    'read: loop {
        let frame = match tokio::time::timeout(config.provider_idle_timeout, body.frame()).await {
            Err(_) => {
                provider_error = Some("Provider stream timed out".into());
                break 'read;
            }
            Ok(None) => break 'read,
            Ok(Some(Err(e))) => {
                provider_error = Some(format!(
                    "Network error during provider streaming: {}",
                    http::error_chain(&e)
                ));
                break 'read;
            }
            Ok(Some(Ok(f))) => f,
        };
        let Ok(bytes) = frame.into_data() else {
            continue;
        };
        for f in sse.push(&bytes) {
            let Some(ev) = f.as_event() else { continue };
            let events = match decoder.on_event(ev) {
                Ok(evs) => evs,
                Err(e) => {
                    provider_error = Some(format!("Invalid provider stream: {e}"));
                    break 'read;
                }
            };
            for pe in events {
                let mut st = store.lock().unwrap();
                match pe {
                    ProviderEvent::TextDelta { text: delta, .. } => {
                        text.push_str(&delta);
                        let otid = ids::assistant_otid(&message_id, 0);
                        record(
                            &env,
                            &mut st,
                            &job.run_id,
                            LettaChunk::AssistantMessage(AssistantMessage {
                                env: envelope("assistant_message", otid),
                                content: Content::Text(delta),
                            }),
                            None,
                        );
                    }
                    ProviderEvent::ToolCallStart { index, id, name } => {
                        calls.push(OpenCall {
                            index,
                            id: id.clone(),
                            name: name.clone(),
                            arguments: String::new(),
                            complete: false,
                        });
                        let delta = ToolCallDelta {
                            name: Some(name),
                            arguments: None,
                            tool_call_id: Some(id),
                        };
                        record(
                            &env,
                            &mut st,
                            &job.run_id,
                            approval_chunk(
                                envelope("approval_request_message", message_id.clone()),
                                delta,
                            ),
                            None,
                        );
                    }
                    ProviderEvent::ToolCallArgsDelta { index, delta } => {
                        if delta.is_empty() {
                            continue;
                        }
                        let Some(call) = calls.iter_mut().find(|c| c.index == index) else {
                            continue;
                        };
                        call.arguments.push_str(&delta);
                        let d = ToolCallDelta {
                            name: None,
                            arguments: Some(delta),
                            tool_call_id: Some(call.id.clone()),
                        };
                        record(
                            &env,
                            &mut st,
                            &job.run_id,
                            approval_chunk(
                                envelope("approval_request_message", message_id.clone()),
                                d,
                            ),
                            None,
                        );
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
                        provider_stop = Some(reason);
                    }
                    ProviderEvent::ToolCallEnd { index } => {
                        if let Some(c) = calls.iter_mut().find(|c| c.index == index) {
                            c.complete = true;
                        }
                    }
                    ProviderEvent::Error {
                        error_type,
                        message,
                    } => {
                        provider_error = Some(format!("{error_type}: {message}"));
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
    // What the model produced is history, whatever happens next.
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
    if provider_error.is_some() || !stop_seen {
        // A cut provider stream: two stop_reason frames (error, llm_api_error) then the error
        // frame (captures g_cutstream_*). Partial output is not kept in history.
        let detail = format!(
            "INTERNAL_SERVER_ERROR: {}",
            provider_error.unwrap_or_else(|| "Provider stream ended without a stop reason".into())
        );
        record(
            &env,
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
            &mut st,
            &job.run_id,
            StopReason::LlmApiError,
            "internal_error",
            "An error occurred during agent execution.",
            &detail,
        );
        return;
    }
    // client-model (interim): a run cancelled meanwhile keeps nothing of its model turn.
    if st.runs.get(&job.run_id).is_some_and(|r| r.finished) {
        return;
    }
    // client-model (interim): an empty model response is an `llm_api_error` whose detail
    // carries "empty content in" (letta-protocol.md §3.7; legacy error type llm_empty_response).
    if text.is_empty() && stored_calls.is_empty() && provider_stop != Some(ProviderStop::MaxTokens)
    {
        fail_run(
            &env,
            &mut st,
            &job.run_id,
            StopReason::LlmApiError,
            "llm_empty_response",
            "LLM provider returned empty content in response",
            "LLM provider returned empty content in response (no text and no tool calls)",
        );
        return;
    }
    let conv = st
        .conversations
        .get_mut(&job.conversation_id)
        .expect("run of a known conversation");
    conv.history.push(StoredMessage::Assistant {
        id: message_id.clone(),
        text: text.clone(),
        tool_calls: stored_calls.clone(),
    });
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
        conv.pending = stored_calls;
        conv.pending_message_id = Some(message_id);
        StopReason::RequiresApproval
    };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    usage.context_tokens = Some(usage.total_tokens);
    record(
        &env,
        &mut st,
        &job.run_id,
        LettaChunk::StopReason(StopReasonChunk {
            message_type: "stop_reason".into(),
            stop_reason: stop.clone(),
        }),
        None,
    );
    record(
        &env,
        &mut st,
        &job.run_id,
        LettaChunk::UsageStatistics(usage),
        None,
    );
    finish_run(&env, &mut st, &job.run_id, stop, true);
}

fn approval_chunk(env: Envelope, delta: ToolCallDelta) -> LettaChunk {
    LettaChunk::ApprovalRequestMessage(ToolCallMessage {
        env,
        tool_call: Some(delta.clone()),
        tool_calls: Some(ToolCalls::One(delta)),
    })
}

fn provider_failed<E: Env>(
    env: &E,
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
    fail_run(
        env,
        &mut st,
        &job.run_id,
        StopReason::LlmApiError,
        error_type,
        message,
        detail,
    );
}
