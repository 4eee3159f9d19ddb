//! The scripted fake model: an OpenAI-compatible Chat Completions endpoint that decides what
//! to answer from the request itself, as the fake model behind the real-server captures did
//! (captures/letta_server/harness/fake_openai.py; PROVENANCE.md "The fake model"). With it the
//! server model receives the same answers the real Letta 0.16.8 server received, so its
//! streams can be compared with the captured ones byte for byte (tests/golden_letta_oss.rs).
//!
//! What it answers is chosen from the **last** message of the request (fake_openai.py
//! `decide`), in this order:
//!
//! | last message | answer |
//! |---|---|
//! | `role: tool` | text `Tool result received: <first 80 chars of it, newlines as spaces>` |
//! | contains `FAIL500` | HTTP 500 `{"error":{"message":"fake upstream exploded (FAIL500)",…}}`, every attempt |
//! | contains `CUTSTREAM` | 4 words of text, then the connection is reset inside the chunked body |
//! | contains `MIDERR` | 4 words, then `data: {"error":{"message":"fake upstream error mid-stream (MIDERR)",…}}`, then the body ends |
//! | contains `SLOW` | 12 words, [`ScriptConfig::slow_delay`] between chunks |
//! | contains `PLAIN` | text `Hello from the fake model. This is plain text.` |
//! | no tools in the request | text `Plain text reply (request had no tools).` |
//! | otherwise | a call to `get_secret_weather` (else the first tool) with `{"city": "Paris"}` in three argument fragments `{"cit` / `y": "Pa` / `ris"}`, `finish_reason: tool_calls` |
//!
//! Streaming answers: a role chunk, then one chunk per word (or the call's chunks), each
//! followed by the chunk delay ([`ScriptConfig::chunk_delay`], 0.05 s), a finish chunk, a usage
//! chunk when `stream_options.include_usage`, `data: [DONE]`. Non-streaming requests get one
//! `chat.completion` object. Every POST takes the next request number `n` (the script's
//! `next_id`): ids are `chatcmpl-fakeNNNN` / `call_fakeNNNN` and usage is
//! `prompt_tokens: 100+n, completion_tokens: 12` (captures: `call_fake0002`, `prompt_tokens:102`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::model::port::clock::Clock;
use crate::model::port::env::Env;
use crate::model::port::http::{self, Body};
use crate::model::port::observe::Observation;

/// How the scripted model behaves (fake_openai.py's environment variables).
#[derive(Debug, Clone)]
pub struct ScriptConfig {
    pub port: u16,
    /// `SLOW_DELAY`: the pause between chunks of a `SLOW` answer (1.5 s; 3.5 s for captures
    /// k1/k2).
    pub slow_delay: Duration,
    /// The pause between chunks of every other streamed answer (0.05 s).
    pub chunk_delay: Duration,
    /// `FAKE_MODEL`: the model `GET /v1/models` lists (`gpt-4o-mini`).
    pub model: String,
    /// `FAKE_TOOL`: the tool it prefers to call (`get_secret_weather`).
    pub preferred_tool: String,
}

impl ScriptConfig {
    /// The settings the captures were recorded with (PROVENANCE.md; `SLOW_DELAY=1.5`).
    pub fn captured(port: u16) -> Self {
        ScriptConfig {
            port,
            slow_delay: Duration::from_millis(1500),
            chunk_delay: Duration::from_millis(50),
            model: "gpt-4o-mini".into(),
            preferred_tool: "get_secret_weather".into(),
        }
    }
}

/// The script's durable state: the number of the last POST it answered (fake_openai.py's
/// `_counter`; the next request is `requests + 1`). Survives a provider crash.
#[derive(Debug, Default)]
pub struct ScriptState {
    pub requests: u32,
}

/// What the script decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Text(String),
    Fail500,
    Cut(String),
    MidErr(String),
    Slow(String),
    Tool(String),
}

impl Mode {
    fn name(&self) -> &'static str {
        match self {
            Mode::Text(_) => "text",
            Mode::Fail500 => "fail500",
            Mode::Cut(_) => "cut",
            Mode::MidErr(_) => "miderr",
            Mode::Slow(_) => "text_slow",
            Mode::Tool(_) => "tool",
        }
    }
}

/// A message's text: a string content, or its parts' `text` joined by newlines
/// (fake_openai.py `text_of`).
fn text_of(msg: &Value) -> String {
    match &msg["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.is_object())
            .map(|p| match &p["text"] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// fake_openai.py `decide`: the answer for a chat request, from its last message.
pub fn decide(body: &Value, preferred_tool: &str) -> Mode {
    let empty = Vec::new();
    let msgs = body["messages"].as_array().unwrap_or(&empty);
    let tools = body["tools"].as_array().unwrap_or(&empty);
    let last = msgs.last().cloned().unwrap_or(Value::Null);
    let last_text = text_of(&last);
    if last["role"] == "tool" {
        let head: String = last_text.chars().take(80).collect();
        return Mode::Text(format!("Tool result received: {}", head.replace('\n', " ")));
    }
    if last_text.contains("FAIL500") {
        return Mode::Fail500;
    }
    if last_text.contains("CUTSTREAM") {
        return Mode::Cut("This answer will be cut off in the middle of the stream".into());
    }
    if last_text.contains("MIDERR") {
        return Mode::MidErr("This answer will hit a provider error event".into());
    }
    if last_text.contains("SLOW") {
        return Mode::Slow(
            "Slow streamed answer number one two three four five six seven eight".into(),
        );
    }
    if last_text.contains("PLAIN") {
        return Mode::Text("Hello from the fake model. This is plain text.".into());
    }
    let names: Vec<&str> = tools
        .iter()
        .filter(|t| t["type"] == "function")
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    match names
        .iter()
        .find(|n| **n == preferred_tool)
        .or(names.first())
    {
        Some(name) => Mode::Tool((*name).to_string()),
        None => Mode::Text("Plain text reply (request had no tools).".into()),
    }
}

/// Runs the scripted model on `env` until the host stops.
pub async fn run<E: Env>(
    env: E,
    config: Arc<ScriptConfig>,
    state: Arc<Mutex<ScriptState>>,
) -> std::io::Result<()> {
    let port = config.port;
    let served = env.clone();
    let handler = move |req: Request<Incoming>| {
        let env = served.clone();
        let config = config.clone();
        let state = state.clone();
        async move { answer(env, &config, &state, req).await }
    };
    http::serve(env, port, handler).await
}

fn not_found() -> Response<Body> {
    http::json_response(
        StatusCode::NOT_FOUND,
        &json!({"error": {"message": "not found", "type": "invalid_request_error"}}),
    )
}

/// One streamed piece of an answer.
enum Piece {
    Data(String),
    Sleep(Duration),
    /// The connection is reset (fake_openai.py `abort`: SO_LINGER 0, then close).
    Reset,
}

async fn answer<E: Env>(
    env: E,
    config: &ScriptConfig,
    state: &Mutex<ScriptState>,
    req: Request<Incoming>,
) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let raw = match http::read_body(req.into_body(), 64 << 20).await {
        Ok(b) => b,
        Err(_) => return not_found(),
    };
    if method == Method::GET {
        if path.trim_end_matches('/').ends_with("/models") {
            return http::json_response(
                StatusCode::OK,
                &json!({"object": "list", "data": [
                    {"id": config.model, "object": "model", "created": 1_700_000_000u64, "owned_by": "fake"}]}),
            );
        }
        return not_found();
    }
    // A body that is not JSON is answered like an empty request (fake_openai.py keeps it raw).
    let body: Value = serde_json::from_slice(&raw).unwrap_or_else(|_| json!({}));
    let n = {
        let mut st = state.lock().unwrap();
        st.requests += 1;
        st.requests
    };
    if method != Method::POST || !path.ends_with("/chat/completions") {
        return not_found();
    }
    let mode = decide(&body, &config.preferred_tool);
    let call = n.saturating_sub(1);
    if mode == Mode::Fail500 {
        env.observe(Observation::ProviderServe {
            call,
            cassette: format!("script:{}#{n}", mode.name()),
            status: 500,
            frames: 0,
        });
        return http::json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"error": {"message": "fake upstream exploded (FAIL500)", "type": "server_error", "code": "fake_500"}}),
        );
    }
    let reply = Reply {
        model: body["model"].as_str().unwrap_or(&config.model).to_string(),
        cid: format!("chatcmpl-fake{n:04}"),
        created: (env.epoch_ms() + env.now_ms()) / 1000,
        usage: json!({"prompt_tokens": 100 + n, "completion_tokens": 12, "total_tokens": 112 + n}),
        call_id: format!("call_fake{n:04}"),
    };

    if body["stream"].as_bool() != Some(true) {
        env.observe(Observation::ProviderServe {
            call,
            cassette: format!("script:{}#{n}", mode.name()),
            status: 200,
            frames: 0,
        });
        return reply.whole(&mode);
    }

    let delay = if matches!(mode, Mode::Slow(_)) {
        config.slow_delay
    } else {
        config.chunk_delay
    };
    let include_usage = body["stream_options"]["include_usage"].as_bool() == Some(true);
    let pieces = reply.pieces(&mode, delay, include_usage);
    let frames = pieces
        .iter()
        .filter(|p| matches!(p, Piece::Data(_)))
        .count();
    env.observe(Observation::ProviderServe {
        call,
        cassette: format!("script:{}#{n}", mode.name()),
        status: 200,
        frames,
    });
    streamed(pieces, env.clock())
}

/// The arguments of the scripted tool call.
const TOOL_ARGS: &str = r#"{"city": "Paris"}"#;

/// The ids and counts of one answer.
struct Reply {
    model: String,
    cid: String,
    created: u64,
    usage: Value,
    call_id: String,
}

impl Reply {
    /// A non-streaming chat completion.
    fn whole(&self, mode: &Mode) -> Response<Body> {
        let (message, finish) = match mode {
            Mode::Tool(name) => (
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": self.call_id, "type": "function", "function": {"name": name, "arguments": TOOL_ARGS}}]}),
                "tool_calls",
            ),
            Mode::Text(t) | Mode::Cut(t) | Mode::MidErr(t) | Mode::Slow(t) => {
                (json!({"role": "assistant", "content": t}), "stop")
            }
            Mode::Fail500 => (Value::Null, "stop"),
        };
        http::json_response(
            StatusCode::OK,
            &json!({"id": self.cid, "object": "chat.completion", "created": self.created, "model": self.model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": self.usage}),
        )
    }

    /// One `chat.completion.chunk`.
    fn chunk(&self, delta: Value, finish: Value) -> Piece {
        Piece::Data(
            json!({"id": self.cid, "object": "chat.completion.chunk", "created": self.created,
                   "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string(),
        )
    }

    /// The streamed answer: the role chunk, the tool call in three argument fragments or the
    /// text word by word (cut or failed after the fourth word in those modes), the finish
    /// chunk, usage when asked for, `[DONE]`.
    fn pieces(&self, mode: &Mode, delay: Duration, include_usage: bool) -> Vec<Piece> {
        let args = TOOL_ARGS;
        let mut pieces = vec![
            self.chunk(json!({"role": "assistant", "content": null}), Value::Null),
            Piece::Sleep(delay),
        ];
        let mut ends_early = false;
        match mode {
            Mode::Tool(name) => {
                pieces.push(self.chunk(
                    json!({"tool_calls": [{"index": 0, "id": self.call_id, "type": "function",
                            "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                for piece in [&args[..5], &args[5..12], &args[12..]] {
                    pieces.push(Piece::Sleep(delay));
                    pieces.push(self.chunk(
                        json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                        Value::Null,
                    ));
                }
                pieces.push(Piece::Sleep(delay));
                pieces.push(self.chunk(json!({}), json!("tool_calls")));
            }
            Mode::Text(t) | Mode::Cut(t) | Mode::MidErr(t) | Mode::Slow(t) => {
                for (i, w) in t.split(' ').enumerate() {
                    let piece = if i == 0 {
                        w.to_string()
                    } else {
                        format!(" {w}")
                    };
                    pieces.push(self.chunk(json!({"content": piece}), Value::Null));
                    pieces.push(Piece::Sleep(delay));
                    if i == 3 && matches!(mode, Mode::Cut(_)) {
                        pieces.push(Piece::Reset);
                        ends_early = true;
                        break;
                    }
                    if i == 3 && matches!(mode, Mode::MidErr(_)) {
                        pieces.push(Piece::Data(
                            json!({"error": {"message": "fake upstream error mid-stream (MIDERR)",
                                    "type": "server_error", "code": "fake_mid_stream"}})
                            .to_string(),
                        ));
                        ends_early = true;
                        break;
                    }
                }
                if !ends_early {
                    pieces.push(self.chunk(json!({}), json!("stop")));
                }
            }
            Mode::Fail500 => {}
        }
        if !ends_early {
            if include_usage {
                pieces.push(Piece::Data(
                    json!({"id": self.cid, "object": "chat.completion.chunk", "created": self.created,
                           "model": self.model, "choices": [], "usage": self.usage})
                    .to_string(),
                ));
            }
            pieces.push(Piece::Data("[DONE]".into()));
        }
        pieces
    }
}

/// The pieces as an SSE response body, sleeping where they say.
fn streamed(pieces: Vec<Piece>, clock: Clock) -> Response<Body> {
    let stream =
        futures::stream::unfold((pieces.into_iter(), clock), |(mut it, clock)| async move {
            loop {
                match it.next()? {
                    Piece::Sleep(d) => clock.sleep(d).await,
                    Piece::Data(d) => {
                        return Some((
                            Ok(Frame::data(Bytes::from(format!("data: {d}\n\n")))),
                            (it, clock),
                        ));
                    }
                    Piece::Reset => {
                        let e = std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "script: connection reset (CUTSTREAM)",
                        );
                        return Some((Err(e), (it, clock)));
                    }
                }
            }
        });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(StreamBody::new(stream).boxed())
        .expect("valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(messages: Value, tools: Value) -> Value {
        json!({"messages": messages, "tools": tools})
    }

    #[test]
    fn decides_from_the_last_message_like_the_python_fake() {
        let tools = json!([{"type": "function", "function": {"name": "a"}},
                           {"type": "function", "function": {"name": "get_secret_weather"}}]);
        let m = |t: &str| json!([{"role": "user", "content": t}]);
        assert_eq!(
            decide(&req(m("weather?"), tools.clone()), "get_secret_weather"),
            Mode::Tool("get_secret_weather".into())
        );
        assert_eq!(
            decide(&req(m("weather?"), tools.clone()), "other"),
            Mode::Tool("a".into())
        );
        assert_eq!(
            decide(&req(m("x FAIL500"), tools.clone()), ""),
            Mode::Fail500
        );
        assert!(matches!(
            decide(&req(m("SLOW"), json!([])), ""),
            Mode::Slow(_)
        ));
        assert_eq!(
            decide(&req(m("hi"), json!([])), ""),
            Mode::Text("Plain text reply (request had no tools).".into())
        );
        // A tool result wins over keywords; 80 characters, newlines as spaces.
        let tool = json!([{"role": "user", "content": "PLAIN"},
                          {"role": "tool", "content": format!("{{\n  \"status\": \"OK\",\n{}", "x".repeat(100))}]);
        let Mode::Text(t) = decide(&req(tool, tools), "") else {
            panic!("text expected")
        };
        assert!(t.starts_with("Tool result received: {   \"status\": \"OK\", xx"));
        assert_eq!(t.chars().count(), "Tool result received: ".len() + 80);
    }
}
