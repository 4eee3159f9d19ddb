//! OpenAI Chat Completions stream decoder (also OpenAI-compatible servers such as OpenRouter).
//!
//! Choices where the API documentation is silent or real streams misbehave:
//! - Only choice index 0 is decoded. With `n > 1` the choices interleave; the agent loop uses
//!   one answer, and mixing choices would corrupt text and tool arguments.
//! - Text and thinking have no index of their own in this format; their events carry the choice
//!   index (always 0). Tool-call events carry the provider's tool-call index.
//! - `delta.reasoning_content` (DeepSeek-style) or else `delta.reasoning` (OpenRouter-style) is
//!   thinking; providers that send both send the same text twice.
//! - `delta.refusal` text is what the user sees, so it is a `TextDelta`; when refusal text was
//!   streamed, `finish_reason: "stop"` is normalised to `Refusal` (raw stays `stop`).
//! - Empty fragments (the role chunk's `content: ""`, a new call's `arguments: ""`) are skipped.
//! - A tool call starts when its index has both `id` and `function.name`; arguments that arrive
//!   before that are held and released right after the start. When `finish_reason` arrives,
//!   every open call ends (a call named but never given an id starts with id `""`, as some
//!   compatible servers omit ids; a call never named is an error), then `Stop`. Only the first
//!   `finish_reason` counts: OpenRouter repeats it.
//! - Within one chunk the order is: `MessageStart` (first chunk), deltas, ends + `Stop`,
//!   `Usage`, then `Error` last, because an error ends the stream for the consumer.
//! - A chunk's `error` object (HTTP 200 with an error mid-stream) is an `Error`: `error_type` is
//!   `error.type`, else `error.code`, else `error`. An SSE event named `error` is an `Error` even
//!   if its data is not JSON.
//! - A stream cut before `finish_reason` leaves calls open; [`OpenAiChatDecoder::finish`] adds
//!   nothing, so the consumer sees the truncation.

use serde::Deserialize;

use super::{ProviderDecodeError, ProviderEvent, ProviderFormat, ProviderStop, ProviderUsage};
use crate::wire::sse::SseEvent;

const FORMAT: ProviderFormat = ProviderFormat::OpenAiChat;

#[derive(Debug, Clone)]
struct Call {
    index: u32,
    id: Option<String>,
    name: Option<String>,
    started: bool,
    /// Arguments received before the call could start.
    pending: String,
}

/// Stateful decoder for one Chat Completions stream. Feed it every SSE event in order.
#[derive(Debug, Clone, Default)]
pub struct OpenAiChatDecoder {
    seen_chunk: bool,
    /// Open tool calls of choice 0, in order of first appearance.
    open: Vec<Call>,
    stopped: bool,
    refused: bool,
}

#[derive(Deserialize)]
struct Chunk {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<Usage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    index: Option<u32>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    reasoning: Option<String>,
    reasoning_content: Option<String>,
    refusal: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    index: Option<u32>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

fn stop_reason(raw: &str, refused: bool) -> ProviderStop {
    match raw {
        "stop" if refused => ProviderStop::Refusal,
        "stop" => ProviderStop::EndTurn,
        "tool_calls" | "function_call" => ProviderStop::ToolUse,
        "length" => ProviderStop::MaxTokens,
        "content_filter" => ProviderStop::Refusal,
        other => ProviderStop::Other(other.to_string()),
    }
}

fn error_from_value(err: &serde_json::Value, raw: &str) -> ProviderEvent {
    let text = |name: &str| match err.get(name) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let (error_type, message) = match err {
        serde_json::Value::String(s) => ("error".to_string(), s.clone()),
        _ => (
            text("type")
                .or_else(|| text("code"))
                .unwrap_or_else(|| "error".to_string()),
            text("message").unwrap_or_else(|| raw.to_string()),
        ),
    };
    ProviderEvent::Error {
        error_type,
        message,
    }
}

impl OpenAiChatDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes one SSE event into zero or more provider events.
    pub fn on_event(&mut self, ev: &SseEvent) -> Result<Vec<ProviderEvent>, ProviderDecodeError> {
        if ev.event.as_deref() == Some("error") {
            let value: serde_json::Value =
                serde_json::from_str(&ev.data).unwrap_or(serde_json::Value::Null);
            let body = value.get("error").unwrap_or(&value);
            return Ok(vec![error_from_value(body, &ev.data)]);
        }
        if ev.is_done() {
            return Ok(vec![ProviderEvent::Done]);
        }
        if ev.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let chunk: Chunk = super::parse_json(FORMAT, "chunk", &ev.data)?;
        let mut out = Vec::new();
        if !self.seen_chunk {
            self.seen_chunk = true;
            out.push(ProviderEvent::MessageStart {
                id: chunk.id,
                model: chunk.model,
            });
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) == 0 {
                self.choice(choice, &mut out)?;
            }
        }
        if let Some(u) = chunk.usage {
            let usage = ProviderUsage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
                cache_read_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
                cache_write_tokens: None,
                reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
            };
            if !usage.is_empty() {
                out.push(ProviderEvent::Usage(usage));
            }
        }
        if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
            out.push(error_from_value(&err, &ev.data));
        }
        Ok(out)
    }

    /// End of body. Nothing is synthesised: calls still open were cut off, and saying so is the
    /// consumer's job (it sees no `ToolCallEnd` and no `Stop`).
    pub fn finish(&mut self) -> Vec<ProviderEvent> {
        Vec::new()
    }

    fn choice(
        &mut self,
        choice: Choice,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderDecodeError> {
        if let Some(delta) = choice.delta {
            let thinking = non_empty(delta.reasoning_content).or(non_empty(delta.reasoning));
            if let Some(text) = thinking {
                out.push(ProviderEvent::ThinkingDelta { index: 0, text });
            }
            if let Some(text) = non_empty(delta.content) {
                out.push(ProviderEvent::TextDelta { index: 0, text });
            }
            if let Some(text) = non_empty(delta.refusal) {
                self.refused = true;
                out.push(ProviderEvent::TextDelta { index: 0, text });
            }
            for (pos, tc) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                self.tool_call_delta(pos, tc, out);
            }
        }
        if let Some(raw) = non_empty(choice.finish_reason)
            && !self.stopped
        {
            self.stopped = true;
            for mut call in std::mem::take(&mut self.open) {
                if !call.started {
                    if call.name.is_none() {
                        return Err(ProviderDecodeError::new(
                            FORMAT,
                            "chunk",
                            format!(
                                "finish_reason `{raw}`: tool call at index {} never received \
                                 `function.name`",
                                call.index
                            ),
                        ));
                    }
                    Self::start(&mut call, out);
                }
                out.push(ProviderEvent::ToolCallEnd { index: call.index });
            }
            out.push(ProviderEvent::Stop {
                reason: stop_reason(&raw, self.refused),
                raw,
            });
        }
        Ok(())
    }

    fn tool_call_delta(&mut self, pos: usize, tc: ToolCallDelta, out: &mut Vec<ProviderEvent>) {
        // `index` is always sent by OpenAI; the position in the array is a fallback for
        // compatible servers that omit it.
        let index = tc.index.unwrap_or(pos as u32);
        let slot = match self.open.iter().position(|c| c.index == index) {
            Some(i) => i,
            None => {
                self.open.push(Call {
                    index,
                    id: None,
                    name: None,
                    started: false,
                    pending: String::new(),
                });
                self.open.len() - 1
            }
        };
        let call = &mut self.open[slot];
        let (name, args) = match tc.function {
            Some(f) => (non_empty(f.name), non_empty(f.arguments)),
            None => (None, None),
        };
        if call.id.is_none() {
            call.id = non_empty(tc.id);
        }
        if call.name.is_none() {
            call.name = name;
        }
        if !call.started && call.id.is_some() && call.name.is_some() {
            Self::start(call, out);
        }
        if let Some(delta) = args {
            if call.started {
                out.push(ProviderEvent::ToolCallArgsDelta { index, delta });
            } else {
                call.pending.push_str(&delta);
            }
        }
    }

    fn start(call: &mut Call, out: &mut Vec<ProviderEvent>) {
        call.started = true;
        out.push(ProviderEvent::ToolCallStart {
            index: call.index,
            id: call.id.clone().unwrap_or_default(),
            name: call.name.clone().unwrap_or_default(),
        });
        if !call.pending.is_empty() {
            out.push(ProviderEvent::ToolCallArgsDelta {
                index: call.index,
                delta: std::mem::take(&mut call.pending),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&str]) -> Result<Vec<ProviderEvent>, ProviderDecodeError> {
        let mut d = OpenAiChatDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(d.on_event(&SseEvent::data(*c))?);
        }
        out.extend(d.finish());
        Ok(out)
    }

    #[test]
    fn args_before_id_are_held_until_start() {
        let got = run(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"\":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap();
        assert_eq!(
            &got[1..],
            &[
                ProviderEvent::ToolCallStart {
                    index: 0,
                    id: "c1".into(),
                    name: "f".into()
                },
                ProviderEvent::ToolCallArgsDelta {
                    index: 0,
                    delta: "{\"a".into()
                },
                ProviderEvent::ToolCallArgsDelta {
                    index: 0,
                    delta: "\":1}".into()
                },
                ProviderEvent::ToolCallEnd { index: 0 },
                ProviderEvent::Stop {
                    reason: ProviderStop::ToolUse,
                    raw: "tool_calls".into()
                },
            ]
        );
    }

    #[test]
    fn missing_id_starts_at_finish_and_missing_name_is_an_error() {
        let got = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap();
        assert!(got.contains(&ProviderEvent::ToolCallStart {
            index: 0,
            id: String::new(),
            name: "f".into()
        }));
        let e = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":3,"id":"x","function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap_err();
        assert!(
            e.detail.contains("index 3 never received `function.name`"),
            "{e}"
        );
    }

    #[test]
    fn refusal_text_and_stop() {
        let got = run(&[
            r#"{"choices":[{"index":0,"delta":{"content":null,"refusal":"no"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ])
        .unwrap();
        assert_eq!(
            got[2..],
            [ProviderEvent::Stop {
                reason: ProviderStop::Refusal,
                raw: "stop".into()
            }]
        );
    }

    #[test]
    fn malformed_and_error_events() {
        let e = run(&["{\"choices\":"]).unwrap_err();
        assert_eq!(e.event, "chunk");
        let e = run(&[r#"{"choices":[{"index":"zero"}]}"#]).unwrap_err();
        assert!(e.detail.contains("invalid type"), "{e}");
        let mut d = OpenAiChatDecoder::new();
        let got = d
            .on_event(&SseEvent::named(
                "error",
                r#"{"error":{"type":"server_error","message":"boom"}}"#,
            ))
            .unwrap();
        assert_eq!(
            got,
            vec![ProviderEvent::Error {
                error_type: "server_error".into(),
                message: "boom".into()
            }]
        );
    }

    #[test]
    fn repeated_finish_reason_counts_once() {
        let got = run(&[
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ])
        .unwrap();
        let stops = got
            .iter()
            .filter(|e| matches!(e, ProviderEvent::Stop { .. }))
            .count();
        assert_eq!(stops, 1);
    }
}
