//! Gemini `streamGenerateContent?alt=sse` decoder.
//!
//! Each event is a data-only `GenerateContentResponse` chunk (CRLF framing, which the SSE
//! decoder handles); there is no end marker, the last chunk carries `finishReason`. Choices:
//! - Only candidate 0 is decoded, as for OpenAI Chat's choices.
//! - The first chunk is `MessageStart` (`responseId`, `modelVersion`).
//! - A `text` part is a `TextDelta`, a `text` part with `thought: true` a `ThinkingDelta`, both
//!   at index 0; empty texts are skipped. `thoughtSignature`s carry no text and are skipped.
//! - A `functionCall` part arrives whole: `ToolCallStart` (its `id`, or `""` when Gemini gives
//!   none; indexes count the calls from 0), one `ToolCallArgsDelta` with `args` as compact
//!   JSON, `ToolCallEnd`.
//! - `finishReason` ends the stream: `Usage` from that chunk's `usageMetadata` (the counts are
//!   running totals, so the last report is the one kept: `promptTokenCount`,
//!   `candidatesTokenCount`, `cachedContentTokenCount`, `thoughtsTokenCount`), then `Stop`
//!   (`STOP` is `ToolUse` when a function call was streamed, else `EndTurn`; `MAX_TOKENS` is
//!   `MaxTokens`; `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII` are
//!   `Refusal`), then `Done`: that chunk is Gemini's end marker. Only the first counts.
//! - A prompt blocked before any candidate (`promptFeedback.blockReason`) stops with `Refusal`.
//! - A chunk with an `error` object is an `Error` (`error.status`, else `error.code`).

use serde_json::Value;

use super::{ProviderDecodeError, ProviderEvent, ProviderStop, ProviderUsage, StreamFormat};
use crate::wire::sse::SseEvent;

const FORMAT: StreamFormat = StreamFormat::Gemini;

/// Stateful decoder for one Gemini stream. Feed it every SSE event in order.
#[derive(Debug, Clone, Default)]
pub struct GeminiDecoder {
    started: bool,
    calls: u32,
    stopped: bool,
}

fn stop_of(raw: &str, called: bool) -> ProviderStop {
    match raw {
        "STOP" if called => ProviderStop::ToolUse,
        "STOP" => ProviderStop::EndTurn,
        "MAX_TOKENS" => ProviderStop::MaxTokens,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" => {
            ProviderStop::Refusal
        }
        other => ProviderStop::Other(other.to_string()),
    }
}

fn usage(u: &Value) -> ProviderUsage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    ProviderUsage {
        input_tokens: n("promptTokenCount"),
        output_tokens: n("candidatesTokenCount"),
        cache_read_tokens: n("cachedContentTokenCount"),
        cache_write_tokens: None,
        reasoning_tokens: n("thoughtsTokenCount"),
    }
}

impl GeminiDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn on_event(&mut self, ev: &SseEvent) -> Result<Vec<ProviderEvent>, ProviderDecodeError> {
        let name = ev.event.clone().unwrap_or_else(|| "chunk".into());
        let v: Value = serde_json::from_str(&ev.data)
            .map_err(|e| ProviderDecodeError::new(FORMAT, &name, format!("malformed data: {e}")))?;
        if !v.is_object() {
            return Err(ProviderDecodeError::new(
                FORMAT,
                &name,
                "a chunk is a JSON object",
            ));
        }
        let mut out = Vec::new();
        if let Some(err) = v.get("error") {
            let t = |k: &str| match err.get(k) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            out.push(ProviderEvent::Error {
                error_type: t("status")
                    .or_else(|| t("code"))
                    .unwrap_or_else(|| "error".into()),
                message: t("message").unwrap_or_default(),
            });
            return Ok(out);
        }
        if !self.started {
            self.started = true;
            out.push(ProviderEvent::MessageStart {
                id: v
                    .get("responseId")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                model: v
                    .get("modelVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
        }
        if self.stopped {
            return Ok(out);
        }
        let candidate = v.get("candidates").and_then(Value::as_array).and_then(|c| {
            c.iter()
                .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        });
        let Some(candidate) = candidate else {
            if let Some(reason) = v
                .get("promptFeedback")
                .and_then(|f| f.get("blockReason"))
                .and_then(Value::as_str)
            {
                self.stopped = true;
                out.push(ProviderEvent::Stop {
                    reason: ProviderStop::Refusal,
                    raw: reason.to_string(),
                });
                out.push(ProviderEvent::Done);
            }
            return Ok(out);
        };
        let parts = candidate
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (k, part) in parts.iter().enumerate() {
            if let Some(call) = part.get("functionCall") {
                let name = call.get("name").and_then(Value::as_str).ok_or_else(|| {
                    ProviderDecodeError::new(
                        FORMAT,
                        &name,
                        format!("candidates[0].content.parts[{k}].functionCall has no `name`"),
                    )
                })?;
                let index = self.calls;
                self.calls += 1;
                out.push(ProviderEvent::ToolCallStart {
                    index,
                    id: call
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    name: name.to_string(),
                });
                let args = call
                    .get("args")
                    .cloned()
                    .unwrap_or(Value::Object(Default::default()));
                out.push(ProviderEvent::ToolCallArgsDelta {
                    index,
                    delta: args.to_string(),
                });
                out.push(ProviderEvent::ToolCallEnd { index });
            } else if let Some(t) = part.get("text").and_then(Value::as_str) {
                if t.is_empty() {
                    continue;
                }
                let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
                out.push(if thought {
                    ProviderEvent::ThinkingDelta {
                        index: 0,
                        text: t.to_string(),
                    }
                } else {
                    ProviderEvent::TextDelta {
                        index: 0,
                        text: t.to_string(),
                    }
                });
            }
        }
        if let Some(raw) = candidate.get("finishReason").and_then(Value::as_str) {
            self.stopped = true;
            if let Some(u) = v.get("usageMetadata").map(usage).filter(|u| !u.is_empty()) {
                out.push(ProviderEvent::Usage(u));
            }
            out.push(ProviderEvent::Stop {
                reason: stop_of(raw, self.calls > 0),
                raw: raw.to_string(),
            });
            out.push(ProviderEvent::Done);
        }
        Ok(out)
    }

    /// Nothing is added at the end: a stream cut before `finishReason` has no `Stop`.
    pub fn finish(&mut self) -> Vec<ProviderEvent> {
        Vec::new()
    }
}
