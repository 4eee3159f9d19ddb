//! OpenAI Responses API stream decoder (`POST /v1/responses` with `stream: true`).
//!
//! Every event is named by its `type` (the `event:` line repeats it). Choices where real
//! streams leave room:
//! - `response.created` is `MessageStart` (the response's `id` and `model`).
//! - `index` is the item's `output_index`, for text, reasoning and tool calls alike, so items
//!   stay apart.
//! - A `function_call` item starts with `response.output_item.added` (`call_id`, `name`; any
//!   arguments already in the item follow as a delta), its arguments stream as
//!   `response.function_call_arguments.delta` exactly as sent, and it ends with
//!   `response.output_item.done`. The `*.done` events that repeat the whole text or arguments
//!   are skipped: the deltas already carried them. A `function_call` item added again at an
//!   `output_index` still open is an error, as a block started twice is for Anthropic.
//! - `response.output_text.delta` and `response.refusal.delta` are text;
//!   `response.reasoning_summary_text.delta` and `response.reasoning_text.delta` are thinking.
//!   Encrypted reasoning (`encrypted_content`) carries no text and yields nothing.
//! - `response.completed` ends the stream: `Usage` (`input_tokens`, `output_tokens`, cached and
//!   reasoning token details), then `Stop` (`ToolUse` when a function call was streamed, else
//!   `EndTurn`; raw `completed`), then `Done`. `response.incomplete` stops with its
//!   `incomplete_details.reason` (`max_output_tokens` is `MaxTokens`, `content_filter` is
//!   `Refusal`). `response.failed` is an `Error` (its `response.error`), then `Done`.
//! - An `error` event (HTTP 200, mid-stream) is an `Error`: `error_type` is `error.type`, else
//!   `error.code`, else the top-level `code`.
//! - Other `response.*` events (`queued`, `in_progress`, content parts, annotations, web search
//!   progress …) carry nothing this event model has and are skipped; an event without a
//!   `type` is an error.

use serde_json::Value;

use super::{ProviderDecodeError, ProviderEvent, ProviderStop, ProviderUsage, StreamFormat};
use crate::wire::sse::SseEvent;

const FORMAT: StreamFormat = StreamFormat::OpenAiResponses;

/// Stateful decoder for one Responses stream. Feed it every SSE event in order.
#[derive(Debug, Clone, Default)]
pub struct OpenAiResponsesDecoder {
    /// Output indexes of the function calls started and not yet ended.
    open_calls: Vec<u32>,
    called: bool,
    ended: bool,
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn number_or_text(v: &Value, key: &str) -> Option<String> {
    match v.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

fn usage(u: &Value) -> ProviderUsage {
    let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64);
    ProviderUsage {
        input_tokens: n(u, "input_tokens"),
        output_tokens: n(u, "output_tokens"),
        cache_read_tokens: u
            .get("input_tokens_details")
            .and_then(|d| n(d, "cached_tokens")),
        cache_write_tokens: None,
        reasoning_tokens: u
            .get("output_tokens_details")
            .and_then(|d| n(d, "reasoning_tokens")),
    }
}

fn error_event(err: &Value, fallback_type: Option<String>) -> ProviderEvent {
    ProviderEvent::Error {
        error_type: number_or_text(err, "type")
            .or_else(|| number_or_text(err, "code"))
            .or(fallback_type)
            .unwrap_or_else(|| "error".into()),
        message: text(err, "message").unwrap_or("").to_string(),
    }
}

impl OpenAiResponsesDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn on_event(&mut self, ev: &SseEvent) -> Result<Vec<ProviderEvent>, ProviderDecodeError> {
        let name = ev.event.clone().unwrap_or_else(|| "data".into());
        let v: Value = serde_json::from_str(&ev.data)
            .map_err(|e| ProviderDecodeError::new(FORMAT, &name, format!("malformed data: {e}")))?;
        let Some(ty) = text(&v, "type") else {
            return Err(ProviderDecodeError::new(FORMAT, &name, "no `type` field"));
        };
        let index = || {
            v.get("output_index")
                .and_then(Value::as_u64)
                .map(|i| i as u32)
                .unwrap_or(0)
        };
        let delta = || text(&v, "delta").unwrap_or("").to_string();
        let mut out = Vec::new();
        match ty {
            "response.created" => {
                let r = v.get("response").unwrap_or(&Value::Null);
                out.push(ProviderEvent::MessageStart {
                    id: text(r, "id").map(str::to_string),
                    model: text(r, "model").map(str::to_string),
                });
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let t = delta();
                if !t.is_empty() {
                    out.push(ProviderEvent::TextDelta {
                        index: index(),
                        text: t,
                    });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let t = delta();
                if !t.is_empty() {
                    out.push(ProviderEvent::ThinkingDelta {
                        index: index(),
                        text: t,
                    });
                }
            }
            "response.output_item.added" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                if text(item, "type") == Some("function_call") {
                    let id = text(item, "call_id")
                        .or_else(|| text(item, "id"))
                        .ok_or_else(|| {
                            ProviderDecodeError::new(
                                FORMAT,
                                ty,
                                "a function_call item without `call_id`",
                            )
                        })?;
                    let name = text(item, "name").ok_or_else(|| {
                        ProviderDecodeError::new(FORMAT, ty, "a function_call item without `name`")
                    })?;
                    let i = index();
                    // As a block started twice in Anthropic's stream: the item is open, so a
                    // second `added` cannot be a new item (a duplicated event).
                    if self.open_calls.contains(&i) {
                        return Err(ProviderDecodeError::new(
                            FORMAT,
                            ty,
                            format!("item at output_index {i} added again while still open"),
                        ));
                    }
                    self.open_calls.push(i);
                    self.called = true;
                    out.push(ProviderEvent::ToolCallStart {
                        index: i,
                        id: id.to_string(),
                        name: name.to_string(),
                    });
                    if let Some(args) = text(item, "arguments").filter(|a| !a.is_empty()) {
                        out.push(ProviderEvent::ToolCallArgsDelta {
                            index: i,
                            delta: args.to_string(),
                        });
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                let d = delta();
                if !d.is_empty() {
                    out.push(ProviderEvent::ToolCallArgsDelta {
                        index: index(),
                        delta: d,
                    });
                }
            }
            "response.output_item.done" => {
                let i = index();
                if let Some(p) = self.open_calls.iter().position(|&c| c == i) {
                    self.open_calls.remove(p);
                    out.push(ProviderEvent::ToolCallEnd { index: i });
                }
            }
            "response.completed" | "response.incomplete" => {
                let r = v.get("response").unwrap_or(&Value::Null);
                let u = r.get("usage").map(usage).unwrap_or_default();
                if !u.is_empty() {
                    out.push(ProviderEvent::Usage(u));
                }
                let (reason, raw) = if ty == "response.completed" {
                    let reason = if self.called {
                        ProviderStop::ToolUse
                    } else {
                        ProviderStop::EndTurn
                    };
                    (reason, "completed".to_string())
                } else {
                    let why = r
                        .get("incomplete_details")
                        .and_then(|d| text(d, "reason"))
                        .unwrap_or("incomplete")
                        .to_string();
                    let reason = match why.as_str() {
                        "max_output_tokens" => ProviderStop::MaxTokens,
                        "content_filter" => ProviderStop::Refusal,
                        other => ProviderStop::Other(other.to_string()),
                    };
                    (reason, why)
                };
                out.push(ProviderEvent::Stop { reason, raw });
                out.push(ProviderEvent::Done);
                self.ended = true;
            }
            "response.failed" => {
                let r = v.get("response").unwrap_or(&Value::Null);
                let err = r.get("error").unwrap_or(&Value::Null);
                out.push(error_event(err, Some("response.failed".into())));
                out.push(ProviderEvent::Done);
                self.ended = true;
            }
            "error" => {
                let err = v.get("error").unwrap_or(&v);
                out.push(error_event(err, number_or_text(&v, "code")));
            }
            _ => {}
        }
        Ok(out)
    }

    /// Nothing is added at the end: a stream cut before `response.completed` leaves its calls
    /// open and has no `Stop`, so the consumer sees the truncation.
    pub fn finish(&mut self) -> Vec<ProviderEvent> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_call_added_twice_while_open_is_an_error() {
        let added = SseEvent::named(
            "response.output_item.added",
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_1","name":"f","arguments":""}}"#,
        );
        let mut d = OpenAiResponsesDecoder::new();
        assert_eq!(
            d.on_event(&added).unwrap(),
            [ProviderEvent::ToolCallStart {
                index: 1,
                id: "call_1".into(),
                name: "f".into()
            }]
        );
        let e = d.on_event(&added).unwrap_err();
        assert_eq!(
            e.to_string(),
            "openai_responses stream, event `response.output_item.added`: item at output_index 1 added again while still open"
        );
        // Once the item is done, the index may be reused.
        let done = SseEvent::named(
            "response.output_item.done",
            r#"{"type":"response.output_item.done","output_index":1}"#,
        );
        let mut d = OpenAiResponsesDecoder::new();
        d.on_event(&added).unwrap();
        d.on_event(&done).unwrap();
        assert!(d.on_event(&added).is_ok());
    }
}
