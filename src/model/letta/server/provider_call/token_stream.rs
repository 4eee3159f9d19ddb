//! Token streaming: the provider's streamed events translated into Letta chunks as they arrive
//! (the cloud and local shapes are described in the parent module), then the run ended on
//! what the stream said.

use std::sync::Arc;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::json;

use super::outcome::{Turn, finish_turn, is_finished, vendor};
use super::pressure::{Deferred, finish_after_compaction};
use super::request::RunJob;
use crate::model::letta::server::store::{IdKind, Store};
use crate::model::letta::server::{
    Profile, ServerConfig, SharedStore, StoredToolCall, fail_run, ids, record,
};
use crate::model::port::env::Env;
use crate::model::port::http;
use crate::model::port::observe::Observation;
use crate::wire::letta::{
    AssistantMessage, Content, Envelope, LettaChunk, StopReason, StopReasonChunk, ToolCallDelta,
    ToolCallMessage, ToolCalls, UsageStatistics,
};
use crate::wire::provider::{ProviderDecoder, ProviderEvent, ProviderStop};
use crate::wire::sse::SseDecoder;

/// A tool call being assembled from provider deltas.
struct OpenCall {
    index: u32,
    id: String,
    name: String,
    arguments: String,
    /// The provider closed the call (Anthropic `content_block_stop`, OpenAI `finish_reason`).
    complete: bool,
}

/// One streamed model step being translated: what it has said and called so far and how it
/// stopped.
struct Translation<'a, E: Env> {
    env: &'a E,
    config: &'a ServerConfig,
    job: &'a RunJob,
    local: bool,
    oss: bool,
    message_id: String,
    step_id: String,
    date: String,
    text: String,
    calls: Vec<OpenCall>,
    usage: UsageStatistics,
    stop_seen: bool,
    provider_stop: Option<ProviderStop>,
    provider_error: Option<String>,
    /// Local: the segment otid of the current text run (letta-protocol.md §7.6).
    text_otid: Option<String>,
}

/// Whether reading goes on after a provider event.
enum Flow {
    Next,
    Stop,
}

/// How reading the provider's body ended.
enum Read {
    /// The body ended, failed or stopped: the run ends on what was read.
    Ended,
    /// The run ended meanwhile (a cancel): nothing more is written.
    Cancelled,
}

/// Translates the provider's streamed answer into the run's chunks and ends the run.
pub(super) async fn translate<E: Env>(
    env: E,
    config: Arc<ServerConfig>,
    store: SharedStore,
    job: RunJob,
    resp: hyper::Response<Incoming>,
) {
    let local = config.profile == Profile::Local;
    let oss = config.profile.oss();
    let mut decoder = ProviderDecoder::new(config.provider_api);
    let mut sse = SseDecoder::new();
    let mut body = resp.into_body();

    let (message_id, step_id, date) = {
        let mut st = store.lock().unwrap();
        let message_id = st.new_id(config.profile, IdKind::Message);
        let step_id = st.new_id(config.profile, IdKind::Step);
        // 0.16.8 lists the send's input under this step (`Store::file_input_under_step`).
        if oss {
            st.file_input_under_step(&job.conversation_id, &job.run_id, &step_id);
        }
        (
            message_id,
            step_id,
            ids::iso_date(env.epoch_ms() + env.now_ms()),
        )
    };
    let mut t = Translation {
        env: &env,
        config: &config,
        job: &job,
        local,
        oss,
        message_id,
        step_id,
        date,
        text: String::new(),
        calls: Vec::new(),
        usage: UsageStatistics {
            message_type: "usage_statistics".into(),
            step_count: 1,
            ..Default::default()
        },
        stop_seen: false,
        provider_stop: None,
        provider_error: None,
        text_otid: None,
    };
    if let Read::Cancelled = t.read(&store, &mut body, &mut sse, &mut decoder).await {
        return;
    }
    for f in sse.finish() {
        if let Some(ev) = f.as_event()
            && let Ok(evs) = decoder.on_event(ev)
        {
            t.stop_seen |= evs
                .iter()
                .any(|e| matches!(e, ProviderEvent::Stop { .. } | ProviderEvent::Done));
        }
    }
    let _ = decoder.finish();

    env.observe(Observation::ProviderResult {
        run_id: job.run_id.clone(),
        outcome: match &t.provider_error {
            Some(e) => format!("error: {e}"),
            None if t.stop_seen => "complete".into(),
            None => "ended without a stop".into(),
        },
    });
    if let Some(deferred) = t.end(&store) {
        finish_after_compaction(&env, &config, &store, job, deferred).await;
    }
}

impl<E: Env> Translation<'_, E> {
    fn envelope(&self, message_type: &str, id: String, otid: Option<String>) -> Envelope {
        Envelope {
            id,
            date: self.date.clone(),
            message_type: message_type.into(),
            otid: otid.filter(|_| !self.config.bugs.unnamed_chunks),
            step_id: (!self.local).then(|| self.step_id.clone()),
            ..Default::default()
        }
    }

    /// An `approval_request_message` delta under the step's message id (cloud).
    fn delta_chunk(&self, delta: ToolCallDelta) -> LettaChunk {
        approval_chunk(
            self.envelope(
                "approval_request_message",
                self.message_id.clone(),
                Some(self.message_id.clone()),
            ),
            delta,
            true,
        )
    }

    /// The provider closed a tool call: it is a call now. Local streams show it here, as one
    /// complete chunk per tool call with no otid (letta-protocol.md §7.6).
    fn close_call(&mut self, st: &mut Store, i: usize) {
        self.calls[i].complete = true;
        if self.local {
            let c = &self.calls[i];
            let d = ToolCallDelta {
                name: Some(c.name.clone()),
                arguments: Some(c.arguments.clone()),
                tool_call_id: Some(c.id.clone()),
            };
            let id = st.new_id(self.config.profile, IdKind::Chunk);
            record(
                self.env,
                self.config,
                st,
                &self.job.run_id,
                approval_chunk(
                    self.envelope("approval_request_message", id, None),
                    d,
                    false,
                ),
                None,
            );
        }
    }

    /// Reads the body frame by frame, translating each provider event under the store's lock.
    async fn read(
        &mut self,
        store: &SharedStore,
        body: &mut Incoming,
        sse: &mut SseDecoder,
        decoder: &mut ProviderDecoder,
    ) -> Read {
        let config = self.config;
        let clock = self.env.clock();
        'read: loop {
            let frame = match clock
                .timeout(config.provider_idle_timeout, body.frame())
                .await
            {
                Err(_) => {
                    self.provider_error =
                        Some("INTERNAL_SERVER_ERROR: Provider stream timed out".into());
                    break 'read;
                }
                Ok(None) => break 'read,
                Ok(Some(Err(e))) => {
                    // 0.16.8 shows an empty cause after the colon (captures g_cutstream_*).
                    self.provider_error = Some(format!(
                        "INTERNAL_SERVER_ERROR: Network error during {} streaming: {}",
                        vendor(config.provider_api),
                        if self.oss {
                            String::new()
                        } else {
                            http::error_chain(&e)
                        }
                    ));
                    break 'read;
                }
                Ok(Some(Ok(f))) => f,
            };
            if is_finished(store, &self.job.run_id) {
                // Cancelled: stop reading; the provider connection closes with the body.
                return Read::Cancelled;
            }
            let Ok(bytes) = frame.into_data() else {
                continue;
            };
            for f in sse.push(&bytes) {
                let Some(ev) = f.as_event() else { continue };
                let events = match decoder.on_event(ev) {
                    Ok(evs) => evs,
                    Err(e) => {
                        self.provider_error = Some(format!(
                            "INTERNAL_SERVER_ERROR: Invalid provider stream: {e}"
                        ));
                        break 'read;
                    }
                };
                for pe in events {
                    let mut st = store.lock().unwrap();
                    if let Flow::Stop = self.on_event(&mut st, pe) {
                        break 'read;
                    }
                }
            }
        }
        Read::Ended
    }

    /// One provider event: its chunks recorded, its text and calls kept.
    fn on_event(&mut self, st: &mut Store, pe: ProviderEvent) -> Flow {
        let (env, config, job) = (self.env, self.config, self.job);
        match pe {
            ProviderEvent::TextDelta { text: delta, .. } => {
                self.text.push_str(&delta);
                let chunk = if self.local {
                    let otid = self
                        .text_otid
                        .get_or_insert_with(|| format!("provider-assistant-0-{}", st.uuid()))
                        .clone();
                    let id = st.new_id(config.profile, IdKind::Chunk);
                    LettaChunk::AssistantMessage(AssistantMessage {
                        env: self.envelope("assistant_message", id, Some(otid)),
                        content: Content::Parts(vec![json!({"type": "text", "text": delta})]),
                    })
                } else {
                    let otid = ids::assistant_otid(&self.message_id, 0);
                    LettaChunk::AssistantMessage(AssistantMessage {
                        env: self.envelope(
                            "assistant_message",
                            self.message_id.clone(),
                            Some(otid),
                        ),
                        content: Content::Text(delta),
                    })
                };
                record(env, config, st, &job.run_id, chunk, None);
            }
            ProviderEvent::ToolCallStart { index, id, name } => {
                // Gemini names no call id (captures/gemini: the `functionCall` has none): the
                // server gives the call a fresh one, so the approval and its result can name it
                // (choice: the real server's id shape for Gemini calls is not captured).
                let id = if id.is_empty() {
                    format!("call_{}", st.uuid())
                } else {
                    id
                };
                self.calls.push(OpenCall {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                    complete: false,
                });
                if !self.local {
                    let delta = ToolCallDelta {
                        name: Some(name),
                        arguments: None,
                        tool_call_id: Some(id),
                    };
                    record(env, config, st, &job.run_id, self.delta_chunk(delta), None);
                }
            }
            ProviderEvent::ToolCallArgsDelta { index, delta } => {
                if delta.is_empty() {
                    return Flow::Next;
                }
                let Some(call) = self.calls.iter_mut().find(|c| c.index == index) else {
                    return Flow::Next;
                };
                call.arguments.push_str(&delta);
                let call_id = call.id.clone();
                if !self.local {
                    let d = ToolCallDelta {
                        name: None,
                        arguments: Some(delta),
                        tool_call_id: Some(call_id),
                    };
                    record(env, config, st, &job.run_id, self.delta_chunk(d), None);
                }
            }
            ProviderEvent::ToolCallEnd { index } => {
                if let Some(i) = self.calls.iter().position(|c| c.index == index) {
                    self.close_call(st, i);
                }
            }
            ProviderEvent::Usage(u) => {
                if let Some(n) = u.input_tokens {
                    self.usage.prompt_tokens = n;
                }
                if let Some(n) = u.output_tokens {
                    self.usage.completion_tokens = n;
                }
            }
            ProviderEvent::Stop { reason, .. } => {
                self.stop_seen = true;
                // A message that ends `tool_use` closes every call it started, block close seen
                // or not, whatever its arguments: the provider SDKs build the final message from
                // each block's start and deltas, so a lost `content_block_stop` loses nothing,
                // and the client, shown each call's deltas as they came, is never shown a call
                // the run then does not ask for. Arguments that are not JSON are stored as the
                // model wrote them, as a closed block's are (the server parses them leniently
                // for itself, `_safe_load_tool_call_str`; the client decides, letta-protocol.md
                // §5.4). A call cut by max_tokens stays open.
                if reason == ProviderStop::ToolUse {
                    for i in 0..self.calls.len() {
                        if !self.calls[i].complete {
                            self.close_call(st, i);
                        }
                    }
                }
                self.provider_stop = Some(reason);
            }
            ProviderEvent::Error {
                error_type,
                message,
            } => {
                // An SSE error object (PROVENANCE.md, g_miderr): 0.16.8 reports the provider's
                // message as an invalid argument.
                self.provider_error = Some(if self.oss {
                    format!(
                        "INVALID_ARGUMENT: {} API error: {message}",
                        vendor(config.provider_api)
                    )
                } else {
                    format!("INTERNAL_SERVER_ERROR: {error_type}: {message}")
                });
                return Flow::Stop;
            }
            ProviderEvent::Done => {
                self.stop_seen = true;
                return Flow::Stop;
            }
            ProviderEvent::MessageStart { .. } | ProviderEvent::ThinkingDelta { .. } => {}
        }
        Flow::Next
    }

    /// Ends the run on what the stream said: failed when it errored, ended without a stop, or
    /// lost the stop of an open call; else the model turn is stored.
    fn end(self, store: &SharedStore) -> Option<Deferred> {
        let Translation {
            env,
            config,
            job,
            local,
            message_id,
            step_id,
            text,
            calls,
            usage,
            stop_seen,
            provider_stop,
            provider_error,
            ..
        } = self;
        let mut st = store.lock().unwrap();
        if st.runs.get(&job.run_id).is_none_or(|r| r.finished) {
            return None;
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
        // fails like a stream without a stop.
        let open_call_without_reason = provider_stop.is_none() && calls.iter().any(|c| !c.complete);
        if provider_error.is_some() || !stop_seen || open_call_without_reason {
            let detail = provider_error.unwrap_or_else(|| {
                "INTERNAL_SERVER_ERROR: Provider stream ended without a stop reason".into()
            });
            if local {
                // Errors after model output are not retried; error chunk then stop_reason (§7.6).
                fail_run(
                    env,
                    config,
                    &mut st,
                    &job.run_id,
                    StopReason::LlmApiError,
                    "llm_error",
                    "An error occurred during agent execution.",
                    &detail,
                );
                return None;
            }
            // A cut provider stream: two stop_reason frames (error, llm_api_error) then the error
            // frame (captures g_cutstream_*). Partial output is not kept in history.
            record(
                env,
                config,
                &mut st,
                &job.run_id,
                LettaChunk::StopReason(StopReasonChunk::new(StopReason::Error)),
                None,
            );
            fail_run(
                env,
                config,
                &mut st,
                &job.run_id,
                StopReason::LlmApiError,
                "internal_error",
                "An error occurred during agent execution.",
                &detail,
            );
            return None;
        }
        finish_turn(
            env,
            config,
            &mut st,
            job,
            Turn {
                message_id,
                step_id,
                text,
                calls: stored_calls,
                provider_stop,
                usage,
            },
            true,
        )
    }
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
