//! The loop's [`ChatProvider`] over HTTP: one streaming request per model call to the
//! provider host, its SSE body decoded with `wire::provider` into [`ProviderEvent`]s.
//!
//! Error mapping (the host adapter's, kimi-loop.md §2.7 and §6; choices where the facts are
//! silent are marked):
//! - no connection, or no response head within the idle timeout → `APIConnectionError` /
//!   `APITimeoutError` (retryable);
//! - an error status → `ProviderError::from_http(status, error.message, Retry-After)`, so 429
//!   about quota is `APIProviderQuotaExhaustedError`, a 413 worded as a body too big is
//!   `APIRequestTooLargeError`, ... (kosong's patterns, `turn_loop::classify`);
//! - the body breaks mid-stream → `APIConnectionError` ("terminated", kosong #201);
//! - choice: the body is silent for longer than the idle timeout → `APITimeoutError` (the SDKs'
//!   read timeout; the loop itself has none, so without it a stalled stream hangs the turn);
//! - choice: an undecodable stream → an unclassified provider error (retryable).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Incoming;
use serde_json::{Map, Value, json};

use super::Probe;
use crate::model::kimi::turn_loop::errors::{ProviderError, ProviderErrorKind};
use crate::model::kimi::turn_loop::provider::{ChatProvider, ChatRequest, ProviderEventStream};
use crate::model::kimi::turn_loop::types::{ContentPart, Message, Role, ToolSpec};
use crate::model::port::clock::Clock;
use crate::model::port::env::Env;
use crate::model::port::http::{self, ClientError};
use crate::model::port::observe::Observation;
use crate::model::provider::request_path;
use crate::wire::provider::{ProviderDecoder, ProviderEvent, ProviderFormat};
use crate::wire::sse::SseDecoder;

/// The text each tool message of a request shows the model, by call id (the first message
/// of an id when a projection repeats one), cut for the trace as a recorded result is. A
/// message of several parts reads as its texts joined by lines, a media part as `[media]`.
fn shown_results(messages: &[Message]) -> BTreeMap<String, String> {
    let mut shown = BTreeMap::new();
    for message in messages.iter().filter(|m| m.role == Role::Tool) {
        let Some(id) = &message.tool_call_id else {
            continue;
        };
        let text: Vec<&str> = message
            .content
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => text.as_str(),
                ContentPart::Think { think, .. } => think.as_str(),
                _ => "[media]",
            })
            .collect();
        shown
            .entry(id.clone())
            .or_insert_with(|| super::shorten(&text.join("\n")));
    }
    shown
}

/// `max_tokens` of every Anthropic request.
pub const MAX_TOKENS: u32 = 4096;

/// A [`ChatProvider`] that calls the provider host over the network.
pub struct HttpChatProvider<E: Env> {
    env: E,
    addr: String,
    api: ProviderFormat,
    idle_timeout: Duration,
    probe: Arc<Probe>,
    calls: Mutex<u32>,
}

impl<E: Env> HttpChatProvider<E> {
    pub fn new(
        env: E,
        addr: impl Into<String>,
        api: ProviderFormat,
        idle_timeout: Duration,
        probe: Arc<Probe>,
    ) -> Self {
        HttpChatProvider {
            env,
            addr: addr.into(),
            api,
            idle_timeout,
            probe,
            calls: Mutex::new(0),
        }
    }

    async fn open_call(&self, request: ChatRequest) -> Result<ProviderEventStream, ProviderError> {
        let call = {
            let mut calls = self.calls.lock().expect("calls poisoned");
            *calls += 1;
            *calls - 1
        };
        let path = request_path(self.api, &request.model);
        self.probe.observe(Observation::LoopProviderRequest {
            call,
            path: path.clone(),
            messages: request.messages.len(),
            tools: request.tools.len(),
            results: shown_results(&request.messages),
        });
        let body = request_body(self.api, &request).to_string();
        let req = Request::post(path.as_str())
            .header("host", self.addr.as_str())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("valid request");
        let resp = match http::send(&self.env, &self.addr, req, self.idle_timeout).await {
            Ok(resp) => resp,
            Err(e) => {
                self.probe.observe(Observation::LoopProviderResponse {
                    call,
                    status: None,
                    error: Some(e.to_string()),
                });
                return Err(match e {
                    ClientError::Timeout => ProviderError::new(
                        ProviderErrorKind::Timeout,
                        format!("Request timed out: {e}"),
                    ),
                    other => ProviderError::connection(format!("Connection error: {other}")),
                });
            }
        };
        let status = resp.status().as_u16();
        self.probe.observe(Observation::LoopProviderResponse {
            call,
            status: Some(status),
            error: None,
        });
        if !resp.status().is_success() {
            let retry_after_ms = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| s.saturating_mul(1000));
            // Bounded like the stream: an error body that never completes is read as empty.
            let body = self.env.clock().timeout(
                self.idle_timeout,
                http::read_body(resp.into_body(), 1 << 20),
            );
            let text = match body.await {
                Ok(Ok(b)) => String::from_utf8_lossy(&b).into_owned(),
                _ => String::new(),
            };
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or(text);
            return Err(ProviderError::from_http(status, message, retry_after_ms));
        }
        let state = BodyReader {
            body: resp.into_body(),
            sse: SseDecoder::new(),
            decoder: ProviderDecoder::new(self.api),
            idle_timeout: self.idle_timeout,
            clock: self.env.clock(),
            probe: Arc::clone(&self.probe),
            call,
            ended: false,
        };
        let stream = futures::stream::unfold(state, |mut reader| async move {
            let batch = reader.next_batch().await?;
            Some((futures::stream::iter(batch), reader))
        })
        .flatten();
        Ok(stream.boxed())
    }
}

impl<E: Env> ChatProvider for HttpChatProvider<E> {
    fn open(
        &self,
        request: ChatRequest,
    ) -> BoxFuture<'_, Result<ProviderEventStream, ProviderError>> {
        Box::pin(self.open_call(request))
    }
}

type Batch = Vec<Result<ProviderEvent, ProviderError>>;

/// Reads a streaming body and decodes it, a batch of events per body frame.
struct BodyReader {
    body: Incoming,
    sse: SseDecoder,
    decoder: ProviderDecoder,
    idle_timeout: Duration,
    clock: Clock,
    probe: Arc<Probe>,
    call: u32,
    ended: bool,
}

impl BodyReader {
    fn end(&mut self, how: String) {
        self.ended = true;
        self.probe.observe(Observation::LoopProviderStreamEnd {
            call: self.call,
            how,
        });
    }

    /// A tool call the provider gave no id (Gemini's `functionCall` carries none,
    /// captures/gemini) gets `call_<call>_<index>`, so its result can name it (choice: the
    /// adapter's own id shape is not in the references).
    fn named(&self, event: ProviderEvent) -> ProviderEvent {
        match event {
            ProviderEvent::ToolCallStart { index, id, name } if id.is_empty() => {
                ProviderEvent::ToolCallStart {
                    index,
                    id: format!("call_{}_{index}", self.call),
                    name,
                }
            }
            other => other,
        }
    }

    fn decode(&mut self, frames: Vec<crate::wire::sse::SseFrame>) -> Batch {
        let mut out = Vec::new();
        for frame in frames {
            let Some(event) = frame.as_event() else {
                continue;
            };
            match self.decoder.on_event(event) {
                Ok(events) => {
                    let done = events.iter().any(|e| matches!(e, ProviderEvent::Done));
                    out.extend(events.into_iter().map(|e| Ok(self.named(e))));
                    if done {
                        self.end("done".into());
                        return out;
                    }
                }
                Err(e) => {
                    self.end(format!("undecodable: {e}"));
                    out.push(Err(ProviderError::new(
                        ProviderErrorKind::Other,
                        format!("Invalid provider stream: {e}"),
                    )));
                    return out;
                }
            }
        }
        out
    }

    async fn next_batch(&mut self) -> Option<Batch> {
        while !self.ended {
            let frame = match self
                .clock
                .timeout(self.idle_timeout, self.body.frame())
                .await
            {
                Err(_) => {
                    let ms = self.idle_timeout.as_millis();
                    self.end(format!("idle {ms} ms"));
                    return Some(vec![Err(ProviderError::new(
                        ProviderErrorKind::Timeout,
                        format!("Request timed out: no data for {ms} ms"),
                    ))]);
                }
                Ok(None) => {
                    let rest = std::mem::take(&mut self.sse).finish();
                    let mut batch = self.decode(rest);
                    if !self.ended {
                        batch.extend(self.decoder.finish().into_iter().map(Ok));
                        self.end("eof".into());
                    }
                    return Some(batch);
                }
                Ok(Some(Err(e))) => {
                    let chain = http::error_chain(&e);
                    self.end(format!("broken: {chain}"));
                    return Some(vec![Err(ProviderError::connection(format!(
                        "terminated: {chain}"
                    )))]);
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(bytes) = frame.into_data() else {
                continue;
            };
            let frames = self.sse.push(&bytes);
            let batch = self.decode(frames);
            if !batch.is_empty() {
                return Some(batch);
            }
        }
        None
    }
}

impl Drop for BodyReader {
    fn drop(&mut self) {
        if !self.ended {
            // The loop let go of the stream before it ended (an abort mid-stream).
            self.end("dropped".into());
        }
    }
}

/// The request body for `api`: the loop's messages (system prompt apart), tools and model.
pub fn request_body(api: ProviderFormat, request: &ChatRequest) -> Value {
    match api {
        ProviderFormat::Anthropic => anthropic_body(request),
        ProviderFormat::OpenAiChat => openai_body(request),
        ProviderFormat::OpenAiResponses => responses_body(request),
        ProviderFormat::Gemini => gemini_body(request),
    }
}

fn text_of(parts: &[ContentPart]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn media_url(part: &ContentPart) -> Option<&str> {
    match part {
        ContentPart::ImageUrl { image_url: m }
        | ContentPart::AudioUrl { audio_url: m }
        | ContentPart::VideoUrl { video_url: m } => Some(m.url.as_str()),
        _ => None,
    }
}

fn anthropic_blocks(parts: &[ContentPart], with_thinking: bool) -> Vec<Value> {
    let mut blocks = Vec::new();
    for part in parts {
        match part {
            ContentPart::Text { text } if !text.is_empty() => {
                blocks.push(json!({"type": "text", "text": text}))
            }
            ContentPart::Text { .. } => {}
            ContentPart::Think { think, encrypted } if with_thinking => blocks.push(json!({
                "type": "thinking", "thinking": think, "signature": encrypted.clone().unwrap_or_default()
            })),
            ContentPart::Think { .. } => {}
            media => {
                if let Some(url) = media_url(media) {
                    blocks.push(json!({"type": "image", "source": {"type": "url", "url": url}}));
                }
            }
        }
    }
    blocks
}

fn tool_input(arguments: &Option<String>) -> Value {
    arguments
        .as_deref()
        .and_then(|a| serde_json::from_str::<Value>(a).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(Map::new()))
}

fn anthropic_body(request: &ChatRequest) -> Value {
    // Anthropic wants alternating roles: consecutive messages of one role are merged.
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in &request.messages {
        let (role, blocks) = match m.role {
            Role::Assistant => {
                let mut blocks = anthropic_blocks(&m.content, true);
                for c in &m.tool_calls {
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name,
                        "input": tool_input(&c.arguments)}));
                }
                ("assistant", blocks)
            }
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": anthropic_blocks(&m.content, false),
                })],
            ),
            Role::User | Role::System => ("user", anthropic_blocks(&m.content, false)),
        };
        match messages.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    json!({
        "model": request.model,
        "max_tokens": MAX_TOKENS,
        "stream": true,
        "system": request.system_prompt,
        "messages": messages,
        "tools": request.tools.iter().map(|t: &ToolSpec| json!({
            "name": t.name, "description": t.description, "input_schema": t.parameters
        })).collect::<Vec<_>>(),
    })
}

fn openai_message(m: &Message) -> Value {
    match m.role {
        Role::Assistant => {
            let text = text_of(&m.content);
            let mut v = json!({"role": "assistant",
                "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
            if !m.tool_calls.is_empty() {
                v["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function", "function": {
                        "name": c.name, "arguments": c.arguments.clone().unwrap_or_default()}})
                    })
                    .collect();
            }
            v
        }
        Role::Tool => json!({"role": "tool",
            "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": text_of(&m.content)}),
        Role::User | Role::System => json!({"role": "user", "content": text_of(&m.content)}),
    }
}

fn openai_body(request: &ChatRequest) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system_prompt})];
    messages.extend(request.messages.iter().map(openai_message));
    json!({
        "model": request.model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages,
        "tools": request.tools.iter().map(|t| json!({"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters
        }})).collect::<Vec<_>>(),
    })
}

/// An OpenAI Responses request (captures/openai_responses, the requests of
/// `pydanticai_function_call_args_delta__and__output_text_after_tool`): the system prompt as
/// `instructions`, the messages as `input` items (a tool call is a `function_call` item, its
/// result a `function_call_output` with the same `call_id`), flat `function` tools. Thinking
/// and media parts are not sent, as on the Chat body.
fn responses_body(request: &ChatRequest) -> Value {
    let mut input = Vec::new();
    for m in &request.messages {
        match m.role {
            Role::Assistant => {
                let text = text_of(&m.content);
                if !text.is_empty() {
                    input.push(json!({"role": "assistant", "content": text}));
                }
                for c in &m.tool_calls {
                    input.push(
                        json!({"type": "function_call", "call_id": c.id, "name": c.name,
                        "arguments": c.arguments.clone().unwrap_or_default()}),
                    );
                }
            }
            Role::Tool => input.push(json!({"type": "function_call_output",
                "call_id": m.tool_call_id.clone().unwrap_or_default(),
                "output": text_of(&m.content)})),
            Role::User | Role::System => {
                input.push(json!({"role": "user", "content": text_of(&m.content)}))
            }
        }
    }
    json!({
        "model": request.model,
        "instructions": request.system_prompt,
        "input": input,
        "stream": true,
        "tool_choice": "auto",
        "tools": request.tools.iter().map(|t| json!({"type": "function", "name": t.name,
            "description": t.description, "parameters": t.parameters, "strict": false}))
            .collect::<Vec<_>>(),
    })
}

/// A Gemini `streamGenerateContent` request (captures/gemini, the requests of
/// `pydanticai_function_call_thought_signature` and `pydanticai_thinking_parts`): the system
/// prompt as `systemInstruction`, the messages as `contents` (the model's with role `model`,
/// its tool calls as `functionCall` parts; consecutive tool results as one `user` turn of
/// `functionResponse` parts, their `output` the result text), one `functionDeclarations` list
/// with JSON Schema parameters, the output budget of the Anthropic body. Consecutive messages
/// of one role are merged, as the API wants turns to alternate.
fn gemini_body(request: &ChatRequest) -> Value {
    let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut names: Vec<(&str, &str)> = Vec::new();
    for m in &request.messages {
        let (role, parts) = match m.role {
            Role::Assistant => {
                let text = text_of(&m.content);
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(json!({"text": text}));
                }
                for c in &m.tool_calls {
                    names.push((c.id.as_str(), c.name.as_str()));
                    parts.push(json!({"functionCall": {"id": c.id, "name": c.name,
                        "args": tool_input(&c.arguments)}}));
                }
                ("model", parts)
            }
            Role::Tool => {
                let id = m.tool_call_id.clone().unwrap_or_default();
                let name = names.iter().find(|(i, _)| *i == id).map_or("", |(_, n)| n);
                (
                    "user",
                    vec![json!({"functionResponse": {"id": id, "name": name,
                        "response": {"output": text_of(&m.content)}}})],
                )
            }
            Role::User | Role::System => ("user", vec![json!({"text": text_of(&m.content)})]),
        };
        match contents.last_mut() {
            Some((last, p)) if *last == role => p.extend(parts),
            _ => contents.push((role, parts)),
        }
    }
    let contents: Vec<Value> = contents
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    let mut body = json!({
        "contents": contents,
        "systemInstruction": {"role": "user", "parts": [{"text": request.system_prompt}]},
        "generationConfig": {"maxOutputTokens": MAX_TOKENS},
    });
    if !request.tools.is_empty() {
        body["tools"] = json!([{"functionDeclarations": request.tools.iter().map(|t| json!({
            "name": t.name, "description": t.description, "parametersJsonSchema": t.parameters
        })).collect::<Vec<_>>()}]);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kimi::turn_loop::types::ToolCall;
    use crate::model::provider::validate::validate;

    fn request() -> ChatRequest {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "Read".into(),
            arguments: Some(r#"{"path":"/a"}"#.into()),
            extras: None,
        };
        let result = |id: &str, text: &str| Message {
            role: Role::Tool,
            content: vec![ContentPart::text(text)],
            tool_calls: Vec::new(),
            tool_call_id: Some(id.into()),
        };
        ChatRequest {
            model: "gemini-2.5-pro".into(),
            system_prompt: "be brief".into(),
            messages: vec![
                Message::user("read a and b"),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentPart::text("reading")],
                    tool_calls: vec![call("c1"), call("c2")],
                    tool_call_id: None,
                },
                result("c1", "A"),
                result("c2", "B"),
            ],
            tools: vec![ToolSpec {
                name: "Read".into(),
                description: "reads".into(),
                parameters: json!({"type": "object"}),
            }],
            request_log_fields: Default::default(),
        }
    }

    #[test]
    fn every_format_builds_a_request_its_api_accepts() {
        for api in ProviderFormat::ALL {
            let body = request_body(api, &request());
            assert_eq!(validate(api, body.to_string().as_bytes()), Ok(()), "{api}");
        }
    }

    #[test]
    fn gemini_and_responses_requests_carry_calls_and_results_their_way() {
        let g = request_body(ProviderFormat::Gemini, &request());
        let roles: Vec<&str> = g["contents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "model", "user"]);
        assert_eq!(
            g["contents"][2]["parts"][1]["functionResponse"],
            json!({"id": "c2", "name": "Read", "response": {"output": "B"}})
        );
        assert_eq!(g["systemInstruction"]["parts"][0]["text"], "be brief");
        let r = request_body(ProviderFormat::OpenAiResponses, &request());
        assert_eq!(r["instructions"], "be brief");
        assert_eq!(r["input"][2]["type"], "function_call");
        assert_eq!(r["input"][4]["type"], "function_call_output");
        assert_eq!(r["input"][4]["call_id"], "c1");
        assert_eq!(r["tools"][0]["parameters"], json!({"type": "object"}));
    }
}
