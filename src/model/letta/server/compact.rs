//! Compaction in the server (letta-protocol.md §8): a conversation's transcript as the
//! [`compaction`](super::compaction) code sees it, the summariser as a model call through the
//! provider, the store effects (the summary message, the new in-context ids), the trace's
//! `compaction` event, the `event_message` + `summary_message` chunks, and
//! `POST /v1/conversations/{id}/compact`.
//!
//! Every profile keeps the context estimate and compacts with the local backend's algorithm;
//! the cloud profiles emit the chunks only when the request asked for them
//! (`include_compaction_messages`, §10.2). docs/server.md "Compaction".

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use super::compaction::estimate::js_len;
use super::compaction::estimate::{CtxMessage, CtxToolCall, Role, provider_estimate};
use super::compaction::summary::{CompactionStats, package_summary, read_packed};
use super::compaction::{
    self, Failed, Mode, Outcome, Settings, Summariser, SummariserError, SummaryRequest, Trigger,
    threshold,
};
use super::errors::{conflict, not_found_conversation};
use super::store::{IdKind, Message, MessageBody, Store, SummaryRecord};
use super::{APPROVAL_PENDING_DETAIL, Profile, ServerConfig, SharedStore, ids, record};
use crate::model::port::env::Env;
use crate::model::port::http::{self as mhttp, Body};
use crate::model::port::observe::Observation;
use crate::model::provider::request_path;
use crate::wire::letta::{ClientTool, Content, Envelope, GenericMessage, LettaChunk};
use crate::wire::provider::{ProviderDecoder, ProviderEvent, ProviderFormat};
use crate::wire::sse::SseDecoder;

/// Context-overflow markers of a provider error (letta-protocol.md §7.7), matched lower-cased.
pub const OVERFLOW_MARKERS: [&str; 13] = [
    "context_length_exceeded",
    "context window",
    "maximum context length",
    "max context length",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "exceeds the context",
    "exceeded the context",
    "reduce the length",
    "request too large",
    "request_too_large",
    "model_context_window_exceeded",
];

/// Whether a provider error text says the request was too long (§7.7).
pub fn is_context_overflow(text: &str) -> bool {
    let l = text.to_lowercase();
    OVERFLOW_MARKERS.iter().any(|m| l.contains(m))
}

/// The error a turn ends with when compaction leaves the context above the threshold. The
/// reference does not say what the local backend does then; this text is loopsim's
/// (docs/server.md "Compaction").
pub fn still_over_threshold(tokens: u64, threshold: u64) -> String {
    format!(
        "Compaction could not bring the context under the threshold: {tokens} tokens after compaction, threshold {threshold}."
    )
}

/// The agent's context window: `context_window_limit` as created or PATCHed. None: the agent
/// has no window and never compacts on its own (§8.1).
pub fn context_window(st: &Store, agent_id: &str) -> Option<u64> {
    let a = st.agents.get(agent_id)?;
    a.extra
        .get("context_window_limit")
        .and_then(Value::as_u64)
        .filter(|w| *w > 0)
}

/// The agent's `compaction_settings` (§8.2): `mode`, `sliding_window_percentage`, `prompt`,
/// `clip_chars`; a mode other than `all`/`sliding_window` keeps the default.
pub fn settings(st: &Store, agent_id: &str) -> Settings {
    let mut s = Settings::default();
    let Some(c) = st
        .agents
        .get(agent_id)
        .and_then(|a| a.extra.get("compaction_settings"))
    else {
        return s;
    };
    if let Some(m) = c
        .get("mode")
        .and_then(Value::as_str)
        .and_then(Mode::from_name)
    {
        s.mode = m;
    }
    s.sliding_window_percentage = c.get("sliding_window_percentage").and_then(Value::as_f64);
    s.prompt = c.get("prompt").and_then(Value::as_str).map(str::to_string);
    match c.get("clip_chars") {
        Some(Value::Null) => s.clip_chars = None,
        Some(v) => {
            if let Some(n) = v.as_u64() {
                s.clip_chars = Some(n as usize);
            }
        }
        None => {}
    }
    s
}

/// One stored message as a transcript message; the system message and approval responses are
/// not transcript messages.
fn to_ctx(st: &Store, m: &Message) -> Option<CtxMessage> {
    let mut c = match &m.body {
        MessageBody::System { .. } | MessageBody::ApprovalResponse { .. } => return None,
        MessageBody::User { content } => {
            let content: Content =
                serde_json::from_value(content.clone()).unwrap_or(Content::Text(String::new()));
            let images = match &content {
                Content::Parts(p) => p.iter().filter(|x| x["type"] == "image").count() as u64,
                Content::Text(_) => 0,
            };
            let parts: Vec<String> = match &content {
                Content::Parts(p) if p.len() > 1 => p
                    .iter()
                    .filter_map(|x| x.get("text").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect(),
                _ => Vec::new(),
            };
            CtxMessage {
                images,
                parts,
                summary: st.summaries.get(&m.id).map(|r| r.summary.clone()),
                ..CtxMessage::new(Role::User, &content.text())
            }
        }
        MessageBody::Assistant { text, tool_calls } => CtxMessage {
            tool_calls: tool_calls
                .iter()
                .map(|t| CtxToolCall {
                    id: t.id.clone(),
                    name: t.name.clone(),
                    arguments: t.arguments.clone(),
                })
                .collect(),
            usage: st.usage.get(&m.id).copied(),
            ..CtxMessage::new(Role::Assistant, text)
        },
        MessageBody::Tool {
            tool_call_id,
            content,
            ..
        } => CtxMessage {
            tool_call_id: Some(tool_call_id.clone()),
            ..CtxMessage::new(Role::ToolResult, content)
        },
    };
    c.at_ms = m.at_ms;
    c.id = m.id.clone();
    Some(c)
}

/// The conversation's in-context transcript, in order.
pub fn transcript(st: &Store, conv_id: &str) -> Vec<CtxMessage> {
    st.conversation_messages(conv_id)
        .into_iter()
        .filter_map(|m| to_ctx(st, m))
        .collect()
}

/// The preflight estimate of a turn (§8.4): the system prompt, the transcript and the client
/// tools.
pub fn preflight_tokens(st: &Store, conv_id: &str, tools: &[ClientTool]) -> Option<u64> {
    let system: String = st
        .conversation_messages(conv_id)
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::System { text } => Some(text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let tools_json = if tools.is_empty() {
        String::new()
    } else {
        serde_json::to_string(tools).expect("json")
    };
    provider_estimate(&system, &transcript(st, conv_id), &tools_json)
}

/// Where a compaction's chunks go: the run, and whether they are emitted at all.
#[derive(Debug, Clone, Copy)]
pub struct Emit<'a> {
    pub run_id: Option<&'a str>,
    pub chunks: bool,
}

/// What a compaction left behind.
#[derive(Debug, Clone)]
pub struct Applied {
    pub outcome: Outcome,
    pub messages_before: usize,
    pub messages_after: usize,
    /// The estimate after it, against the threshold (None without a window).
    pub tokens_after: u64,
    pub threshold: Option<u64>,
}

/// Compacts `conv_id` now: the plan and summariser of [`compaction::compact`] against the
/// provider, then the store effects, the trace event and (when asked) the chunks. The
/// summary is written and the in-context ids swapped under one lock, so a crash leaves the
/// old history or the new one, never a mix.
pub async fn run_compaction<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    conv_id: &str,
    trigger: Trigger,
    emit: Emit<'_>,
) -> Result<Applied, Failed> {
    let (msgs, snapshot, model, window, settings) = {
        let st = store.lock().unwrap();
        let conv = &st.conversations[conv_id];
        let model = st
            .agents
            .get(&conv.agent_id)
            .map(|a| a.model.clone())
            .unwrap_or_default();
        (
            transcript(&st, conv_id),
            conv.messages.clone(),
            model,
            context_window(&st, &conv.agent_id),
            settings(&st, &conv.agent_id),
        )
    };
    // The sliding pass's summary message as the CLI stores it before an `all` fallback lists
    // the store: the packed summary with that pass's stats and the time it is written (§8.2,
    // §8.6); only the fallback's stats read its text.
    let summary_message = |s: &str, stats: &CompactionStats| CtxMessage {
        summary: Some(s.to_string()),
        ..CtxMessage::new(
            Role::User,
            &package_summary(
                true,
                stats,
                s,
                &ids::letta_time(env.epoch_ms() + env.now_ms()),
            ),
        )
    };
    let mut summariser = ProviderSummariser {
        env,
        config,
        conv_id,
        model: &model,
        window,
    };
    let outcome = compaction::compact(
        &msgs,
        &settings,
        window,
        trigger,
        &summary_message,
        &mut summariser,
    )
    .await?;
    let mut st = store.lock().unwrap();
    Ok(apply(
        env, config, &mut st, conv_id, &msgs, &snapshot, outcome, emit,
    ))
}

/// Writes the summary message and swaps the in-context ids (§8.6): `[system, summary,
/// ...kept]`, plus anything written to the conversation while the summariser ran.
#[allow(clippy::too_many_arguments)]
fn apply<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    conv_id: &str,
    msgs: &[CtxMessage],
    snapshot: &[String],
    outcome: Outcome,
    emit: Emit<'_>,
) -> Applied {
    let now = env.now_ms();
    let time = ids::letta_time(env.epoch_ms() + now);
    let sliding = outcome.mode == Mode::SlidingWindow;
    let packed = package_summary(sliding, &outcome.stats, &outcome.summary, &time);
    let stored = read_packed(&packed);
    let summary_id = st.new_id(config.profile, IdKind::Message);
    st.messages.insert(
        summary_id.clone(),
        Message {
            id: summary_id.clone(),
            otid: None,
            run_id: emit.run_id.map(str::to_string),
            step_id: None,
            at_ms: now,
            body: MessageBody::User {
                content: json!(packed),
            },
        },
    );
    // Indexes into `msgs` of the messages the summariser was shown.
    let shown: Vec<usize> = summarized_ids(&outcome, msgs);
    st.summaries.insert(
        summary_id.clone(),
        SummaryRecord {
            summary: outcome.summary.clone(),
            stats: outcome.stats.to_json(),
            mode: outcome.mode.as_str().to_string(),
            stands_for: shown.iter().map(|&i| msgs[i].id.clone()).collect(),
        },
    );
    let current = st.conversations[conv_id].messages.clone();
    let system: Vec<String> = current
        .iter()
        .filter(|id| {
            st.messages
                .get(*id)
                .is_some_and(|m| matches!(m.body, MessageBody::System { .. }))
        })
        .cloned()
        .collect();
    let mut next = system;
    next.push(summary_id.clone());
    let first_kept = outcome.kept.first().map(|&i| &msgs[i].id);
    match first_kept.map(|id| current.iter().position(|c| c == id)) {
        // Another compaction applied while the summariser ran and evicted the plan's first
        // kept message: keep what the plan kept, as the CLI does (it writes `[summary,
        // ...kept]`), then what was written since the plan, less a summary that stands only
        // for messages this one summarises or keeps. Cutting the current list instead would
        // drop the kept messages the other compaction's summary did not stand for.
        Some(None) => {
            let accounted: Vec<&String> = shown
                .iter()
                .chain(&outcome.kept)
                .map(|&i| &msgs[i].id)
                .collect();
            next.extend(outcome.kept.iter().map(|&i| msgs[i].id.clone()));
            next.extend(
                current
                    .iter()
                    .filter(|id| {
                        !snapshot.contains(id)
                            && !next.contains(id)
                            && !st.summaries.get(*id).is_some_and(|s| {
                                s.stands_for.iter().all(|t| accounted.contains(&t))
                            })
                    })
                    .cloned()
                    .collect::<Vec<_>>(),
            );
        }
        // Keep from the first kept message; with nothing kept, from what came after the
        // snapshot.
        found => {
            let from = found.flatten().unwrap_or(snapshot.len().min(current.len()));
            let from = planted_cut(config, st, &current, from);
            next.extend(current[from..].iter().cloned());
        }
    }
    let messages_before = current.len();
    let removed: Vec<String> = current
        .iter()
        .filter(|id| !next.contains(id))
        .filter_map(|id| st.messages.get(id).and_then(|m| to_ctx(st, m)))
        .map(|m| describe(&m))
        .collect();
    let summarized: Vec<String> = shown.iter().map(|&i| describe(&msgs[i])).collect();
    let conv = st.conversations.get_mut(conv_id).expect("known");
    conv.messages = next;
    let messages_after = conv.messages.len();
    let after_msgs = transcript(st, conv_id);
    let window = outcome.stats.context_window;
    let tokens_after = compaction::estimate::context_estimate(&after_msgs).tokens;
    let threshold = window.map(threshold);
    let appended: Vec<String> = after_msgs
        .iter()
        .filter(|m| m.id != summary_id && !snapshot.contains(&m.id))
        .map(describe)
        .collect();
    env.observe(Observation::Compaction {
        conversation_id: conv_id.to_string(),
        run_id: emit.run_id.map(str::to_string),
        trigger: outcome.stats.trigger.clone(),
        mode: outcome.mode.as_str().to_string(),
        removed,
        summarized,
        kept: after_msgs.iter().map(describe).collect(),
        appended,
        tokens_after,
        threshold,
        fell_back: outcome.fell_back_to_all,
        laddered: outcome.laddered,
        summary: Box::new(stored),
    });
    // A run that ended meanwhile (a cancel) gets no more chunks.
    if let (Some(run_id), true) = (emit.run_id, emit.chunks)
        && st.runs.get(run_id).is_some_and(|r| !r.finished)
    {
        record_chunks(env, config, st, run_id, &outcome, &summary_id);
    }
    Applied {
        outcome,
        messages_before,
        messages_after,
        tokens_after,
        threshold,
    }
}

/// Where the deliberate defects of [`ServerBugs`](super::ServerBugs) move a cut that starts
/// the kept part at `from`; the faithful server leaves it alone.
fn planted_cut(config: &ServerConfig, st: &Store, current: &[String], from: usize) -> usize {
    let bugs = &config.bugs;
    let body = |i: usize| {
        current
            .get(i)
            .and_then(|id| st.messages.get(id))
            .map(|m| &m.body)
    };
    let calls_tools = |i: usize| matches!(body(i), Some(MessageBody::Assistant { tool_calls, .. }) if !tool_calls.is_empty());
    if bugs.compaction_splits_tool_call {
        // Past the first tool-call assistant message at or after the cut.
        if let Some(k) = (from..current.len()).find(|&k| calls_tools(k)) {
            return k + 1;
        }
    }
    if bugs.compaction_cuts_at_user
        && let Some(k) = (0..from)
            .rev()
            .find(|&k| matches!(body(k), Some(MessageBody::User { .. })))
    {
        return k;
    }
    if bugs.compaction_loses_message && from < current.len() {
        return from + 1;
    }
    from
}

/// Indexes into `msgs` the summariser was shown: the head the first pass cut off, and on an
/// `all` pass over a compacted transcript the kept messages it summarised too.
fn summarized_ids(outcome: &Outcome, msgs: &[CtxMessage]) -> Vec<usize> {
    let kept_from = outcome.kept.first().copied().unwrap_or(msgs.len());
    (0..kept_from).collect()
}

/// A transcript message in the trace: `role:id`, with the tool call ids it makes or answers
/// (`assistant:ui-msg-3[t1,t2]`, `tool:ui-msg-4[t1]`); a summary is `summary:id`.
pub fn describe(m: &CtxMessage) -> String {
    match m.role {
        Role::User if m.summary.is_some() => format!("summary:{}", m.id),
        Role::User => format!("user:{}", m.id),
        Role::Assistant if m.tool_calls.is_empty() => format!("assistant:{}", m.id),
        Role::Assistant => {
            let ids: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
            format!("assistant:{}[{}]", m.id, ids.join(","))
        }
        Role::ToolResult => format!(
            "tool:{}[{}]",
            m.id,
            m.tool_call_id.as_deref().unwrap_or_default()
        ),
    }
}

/// The `event_message` then `summary_message` of a compaction (§8.6), with store ids, dates,
/// the run id and seq ids, no otid.
fn record_chunks<E: Env>(
    env: &E,
    config: &ServerConfig,
    st: &mut Store,
    run_id: &str,
    outcome: &Outcome,
    summary_id: &str,
) {
    let date = ids::iso_date(env.epoch_ms() + env.now_ms());
    let local = config.profile == Profile::Local;
    let event_id = st.new_id(config.profile, IdKind::Chunk);
    let mut fields = serde_json::Map::new();
    fields.insert("event_type".into(), json!("compaction"));
    fields.insert(
        "event_data".into(),
        json!({"trigger": outcome.stats.trigger}),
    );
    let event = LettaChunk::EventMessage(GenericMessage {
        env: Envelope {
            id: event_id,
            date: date.clone(),
            message_type: "event_message".into(),
            ..Default::default()
        },
        fields,
    });
    record(env, config, st, run_id, event, None);
    let id = if local {
        st.new_id(config.profile, IdKind::Chunk)
    } else {
        summary_id.to_string()
    };
    let mut fields = serde_json::Map::new();
    fields.insert("summary".into(), json!(outcome.summary));
    fields.insert("compaction_stats".into(), outcome.stats.to_json());
    let summary = LettaChunk::SummaryMessage(GenericMessage {
        env: Envelope {
            id,
            date,
            message_type: "summary_message".into(),
            ..Default::default()
        },
        fields,
    });
    record(env, config, st, run_id, summary, None);
}

/// The summariser of a server: the provider.
struct ProviderSummariser<'a, E: Env> {
    env: &'a E,
    config: &'a ServerConfig,
    conv_id: &'a str,
    model: &'a str,
    /// The conversation's context window (the model's, as the CLI's catalog reports it).
    window: Option<u64>,
}

impl<E: Env> Summariser for ProviderSummariser<'_, E> {
    fn summarise(
        &mut self,
        req: SummaryRequest,
    ) -> futures::future::BoxFuture<'_, Result<String, SummariserError>> {
        Box::pin(async move {
            let call = (self.model, self.window);
            summarise(self.env, self.config, self.conv_id, call, &req).await
        })
    }
}

/// One summariser call through the provider: the prompt as the system prompt, the transcript
/// as the one user message, no tools (§8.5). Overflow errors are told apart (§7.7).
async fn summarise<E: Env>(
    env: &E,
    config: &ServerConfig,
    conv_id: &str,
    (model, window): (&str, Option<u64>),
    req: &SummaryRequest,
) -> Result<String, SummariserError> {
    let result = summarise_call(env, config, model, window, req).await;
    env.observe(Observation::SummariserCall {
        conversation_id: conv_id.to_string(),
        budget: req.budget.map(|b| b as u64),
        transcript_chars: crate::model::letta::server::compaction::estimate::js_len(
            &req.transcript,
        ),
        outcome: match &result {
            Ok(s) => format!("ok chars={}", s.chars().count()),
            Err(SummariserError::Overflow(e)) => format!("overflow: {e}"),
            Err(SummariserError::Other(e)) => format!("error: {e}"),
        },
    });
    result
}

/// pi-ai's context ceiling for a local endpoint's model (`LOCAL_ENDPOINT_DEFAULT_CONTEXT_WINDOW`,
/// letta-tests-and-real-client.md B.7): the catalog's context length, at most 128,000.
const LOCAL_CONTEXT_WINDOW: u64 = 128_000;
/// pi-ai's default output ceiling for a local endpoint's model (`LOCAL_ENDPOINT_DEFAULT_MAX_TOKENS`).
const LOCAL_MAX_TOKENS: u64 = 32_000;
/// pi-ai keeps this many tokens of the window free when it clamps the output ceiling
/// (`CONTEXT_SAFETY_TOKENS`).
const CONTEXT_SAFETY_TOKENS: u64 = 4096;

/// The summariser's `max_completion_tokens` as the CLI sends it on an OpenAI-compatible
/// endpoint (pi-ai's `clampMaxTokensToContext`): the model's output ceiling, `min(32000,
/// window)`, clamped to the window less the safety margin and the request's estimate (the
/// system prompt's and the transcript's ceil(length / 4) each), at least 1. Checked against
/// the real CLI's summariser requests by tests/interop/compaction.rs.
pub fn summariser_max_tokens(window: Option<u64>, req: &SummaryRequest) -> u64 {
    let window = window
        .unwrap_or(LOCAL_CONTEXT_WINDOW)
        .min(LOCAL_CONTEXT_WINDOW);
    let estimate = js_len(&req.prompt).div_ceil(4) + js_len(&req.transcript).div_ceil(4);
    let available = window
        .saturating_sub(CONTEXT_SAFETY_TOKENS + estimate)
        .max(1);
    LOCAL_MAX_TOKENS.min(window).min(available)
}

/// The summariser's request body in the provider's format; `window` is the conversation's
/// context window (the OpenAI chat body's output ceiling depends on it).
pub fn summariser_body(
    api: ProviderFormat,
    model: &str,
    window: Option<u64>,
    req: &SummaryRequest,
) -> Value {
    match api {
        ProviderFormat::Anthropic => json!({
            "model": model, "max_tokens": 4096, "stream": true, "system": req.prompt,
            "messages": [{"role": "user", "content": req.transcript}],
        }),
        ProviderFormat::OpenAiChat => json!({
            "model": model, "stream": true,
            "messages": [{"role": "system", "content": req.prompt},
                         {"role": "user", "content": req.transcript}],
            "stream_options": {"include_usage": true},
            "store": false,
            "max_completion_tokens": summariser_max_tokens(window, req),
        }),
        ProviderFormat::OpenAiResponses => json!({
            "model": model, "stream": true, "instructions": req.prompt,
            "input": [{"role": "user", "content": req.transcript}],
        }),
        ProviderFormat::Gemini => json!({
            "systemInstruction": {"role": "user", "parts": [{"text": req.prompt}]},
            "contents": [{"role": "user", "parts": [{"text": req.transcript}]}],
            "generationConfig": {"maxOutputTokens": 4096},
        }),
    }
}

fn classify(text: String) -> SummariserError {
    if is_context_overflow(&text) {
        SummariserError::Overflow(text)
    } else {
        SummariserError::Other(text)
    }
}

async fn summarise_call<E: Env>(
    env: &E,
    config: &ServerConfig,
    model: &str,
    window: Option<u64>,
    req: &SummaryRequest,
) -> Result<String, SummariserError> {
    let body = summariser_body(config.provider_api, model, window, req).to_string();
    let request = Request::post(request_path(config.provider_api, model))
        .header("host", config.provider_addr.as_str())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("valid request");
    let resp = mhttp::send(
        env,
        &config.provider_addr,
        request,
        config.provider_idle_timeout,
    )
    .await
    .map_err(|e| SummariserError::Other(format!("Network error: {e}")))?;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        let text = mhttp::read_body(resp.into_body(), 1 << 20)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        return Err(classify(format!("HTTP {status}: {text}")));
    }
    let mut decoder = ProviderDecoder::new(config.provider_api);
    let mut sse = SseDecoder::new();
    let mut body = resp.into_body();
    let mut text = String::new();
    let mut stopped = false;
    let clock = env.clock();
    loop {
        let frame = match clock.timeout(idle(config), body.frame()).await {
            Err(_) => return Err(SummariserError::Other("Provider stream timed out".into())),
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(SummariserError::Other(format!(
                    "Network error: {}",
                    mhttp::error_chain(&e)
                )));
            }
            Ok(Some(Ok(f))) => f,
        };
        let Ok(bytes) = frame.into_data() else {
            continue;
        };
        for f in sse.push(&bytes) {
            let Some(ev) = f.as_event() else { continue };
            let events = decoder
                .on_event(ev)
                .map_err(|e| SummariserError::Other(format!("Invalid provider stream: {e}")))?;
            for pe in events {
                match pe {
                    ProviderEvent::TextDelta { text: d, .. } => text.push_str(&d),
                    ProviderEvent::Error {
                        error_type,
                        message,
                    } => return Err(classify(format!("{error_type}: {message}"))),
                    ProviderEvent::Stop { .. } | ProviderEvent::Done => stopped = true,
                    _ => {}
                }
            }
        }
    }
    if !stopped {
        return Err(SummariserError::Other(
            "Provider stream ended without a stop reason".into(),
        ));
    }
    Ok(text)
}

fn idle(config: &ServerConfig) -> Duration {
    config.provider_idle_timeout
}

/// `POST /v1/conversations/{id}/compact` (trigger `manual`): a real compaction, answered with
/// `{num_messages_before, num_messages_after, summary}`. Refused (409) while a tool call is
/// open in the cloud profiles; the local backend plans around it (§8.3's maximum cutoff).
pub(crate) async fn compact<E: Env>(
    env: &E,
    config: &ServerConfig,
    store: &SharedStore,
    conv_id: &str,
) -> Response<Body> {
    {
        let st = store.lock().unwrap();
        if !st.conversations.contains_key(conv_id) {
            return not_found_conversation(conv_id);
        }
        if config.profile != Profile::Local && !st.open_calls(conv_id).is_empty() {
            return conflict(config, json!({"detail": APPROVAL_PENDING_DETAIL}));
        }
    }
    let emit = Emit {
        run_id: None,
        chunks: false,
    };
    match run_compaction(env, config, store, conv_id, Trigger::Manual, emit).await {
        Ok(a) => mhttp::json_response(
            StatusCode::OK,
            &json!({"num_messages_before": a.messages_before,
                    "num_messages_after": a.messages_after,
                    "summary": a.outcome.summary}),
        ),
        Err(f) => {
            let text = match f.error {
                SummariserError::Overflow(e) | SummariserError::Other(e) => e,
            };
            mhttp::json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &json!({"detail": format!("Compaction failed: {text}")}),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::AgentConfig;
    use super::super::compaction::summary::render_line;
    use super::*;

    /// A user message of several text parts reaches the summariser's transcript with its parts
    /// a blank line apart, as the published CLI writes it (A.9.3); one part is its text.
    #[test]
    fn a_user_message_of_several_parts_is_one_transcript_line_with_a_blank_line_between() {
        let agent = "agent-1";
        let mut st = Store::new(
            0,
            &[AgentConfig {
                id: agent.into(),
                model: "anthropic/claude-sonnet-4-20250514".into(),
            }],
        );
        for (id, content) in [
            (
                "m1",
                json!([{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]),
            ),
            ("m2", json!([{"type": "text", "text": "only"}])),
        ] {
            st.push_message(
                agent,
                Message {
                    id: id.into(),
                    otid: None,
                    run_id: None,
                    step_id: None,
                    at_ms: 0,
                    body: MessageBody::User { content },
                },
            );
        }
        let lines: Vec<String> = transcript(&st, agent)
            .iter()
            .filter_map(render_line)
            .collect();
        assert_eq!(lines, ["[user] first\n\nsecond", "[user] only"]);
    }
}
