//! Anthropic Messages API stream decoder.
//!
//! Choices where the API documentation is silent or real streams misbehave:
//! - The event kind is the SSE `event:` name; a data-only event falls back to its JSON `type`
//!   (some proxies and test harnesses strip `event:` lines).
//! - Only `tool_use` blocks become tool calls. `server_tool_use`, `mcp_tool_use` and their result
//!   blocks run on Anthropic's side; the client never executes or approves them, so they and
//!   their `input_json_delta`s produce no events. `redacted_thinking` has no readable text.
//! - Empty `text_delta`/`thinking_delta`/`input_json_delta` fragments (the API opens every tool
//!   block with `""`) carry nothing and are skipped; non-empty fragments pass verbatim.
//! - Block indices are keys, not positions: a block may start at index 1 with no index 0 (the
//!   out-of-order capture). Only attributing tool arguments is strict: an `input_json_delta` for
//!   an index that never started, a delta after its block stopped, or a second start of an
//!   open block are errors, because the arguments could otherwise land on the wrong call.
//! - `ToolCallEnd` comes only from `content_block_stop`. A `max_tokens` stream that never stops
//!   its tool block leaves the call open: its arguments are truncated and must not run.
//! - A second `message_start` begins a new message: block state is reset.
//! - `signature_delta`, `citations_delta`, `ping`, unknown event types and unknown fields are
//!   ignored. An `error` event whose data is not JSON is still an `Error` (the text is the
//!   message): the stream said it failed, and that is what the consumer must see.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{ProviderDecodeError, ProviderEvent, ProviderFormat, ProviderStop, ProviderUsage};
use crate::wire::sse::SseEvent;

const FORMAT: ProviderFormat = ProviderFormat::Anthropic;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Thinking,
    ToolUse,
    /// Server-side tools, their results, redacted thinking, unknown block types.
    Other,
}

#[derive(Debug, Clone, Copy)]
struct Block {
    kind: BlockKind,
    open: bool,
}

/// Stateful decoder for one Anthropic Messages stream. Feed it every SSE event in order.
#[derive(Debug, Clone, Default)]
pub struct AnthropicDecoder {
    blocks: BTreeMap<u32, Block>,
}

#[derive(Deserialize)]
struct TypeOnly {
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize, Default)]
struct Usage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct OutputDetails {
    thinking_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct MessageStart {
    message: MessageInfo,
}

#[derive(Deserialize)]
struct MessageInfo {
    id: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct BlockStart {
    index: u32,
    content_block: ContentBlock,
}

#[derive(Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    name: Option<String>,
    text: Option<String>,
    thinking: Option<String>,
}

#[derive(Deserialize)]
struct BlockDelta {
    index: u32,
    delta: Delta,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    thinking: Option<String>,
    partial_json: Option<String>,
}

#[derive(Deserialize)]
struct BlockStop {
    index: u32,
}

#[derive(Deserialize)]
struct MessageDelta {
    delta: MessageDeltaBody,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

fn err(event: &str, detail: impl Into<String>) -> ProviderDecodeError {
    ProviderDecodeError::new(FORMAT, event, detail)
}

fn parse<T: serde::de::DeserializeOwned>(
    event: &str,
    data: &str,
) -> Result<T, ProviderDecodeError> {
    super::parse_json(FORMAT, event, data)
}

fn stop_reason(raw: &str) -> ProviderStop {
    match raw {
        "end_turn" => ProviderStop::EndTurn,
        "tool_use" => ProviderStop::ToolUse,
        "max_tokens" => ProviderStop::MaxTokens,
        "stop_sequence" => ProviderStop::StopSequence,
        "refusal" => ProviderStop::Refusal,
        "pause_turn" => ProviderStop::PauseTurn,
        other => ProviderStop::Other(other.to_string()),
    }
}

fn push_text(out: &mut Vec<ProviderEvent>, index: u32, text: String, thinking: bool) {
    if text.is_empty() {
        return;
    }
    out.push(if thinking {
        ProviderEvent::ThinkingDelta { index, text }
    } else {
        ProviderEvent::TextDelta { index, text }
    });
}

fn error_event(data: &str) -> ProviderEvent {
    let value: Option<serde_json::Value> = serde_json::from_str(data).ok();
    let body = value.as_ref().and_then(|v| v.get("error"));
    let field = |name: &str| {
        body.and_then(|b| b.get(name))
            .and_then(|s| s.as_str())
            .map(str::to_string)
    };
    ProviderEvent::Error {
        error_type: field("type").unwrap_or_else(|| "error".to_string()),
        message: field("message").unwrap_or_else(|| data.to_string()),
    }
}

impl AnthropicDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes one SSE event into zero or more provider events.
    pub fn on_event(&mut self, ev: &SseEvent) -> Result<Vec<ProviderEvent>, ProviderDecodeError> {
        let name = match &ev.event {
            Some(name) => name.clone(),
            None => {
                if ev.data.trim().is_empty() {
                    return Ok(Vec::new());
                }
                match parse::<TypeOnly>("data", &ev.data)?.kind {
                    Some(kind) => kind,
                    None => return Ok(Vec::new()),
                }
            }
        };
        let mut out = Vec::new();
        match name.as_str() {
            "message_start" => self.message_start(&name, &ev.data, &mut out)?,
            "content_block_start" => self.block_start(&name, &ev.data, &mut out)?,
            "content_block_delta" => self.block_delta(&name, &ev.data, &mut out)?,
            "content_block_stop" => {
                let stop: BlockStop = parse(&name, &ev.data)?;
                if let Some(block) = self.blocks.get_mut(&stop.index) {
                    if block.open && block.kind == BlockKind::ToolUse {
                        out.push(ProviderEvent::ToolCallEnd { index: stop.index });
                    }
                    block.open = false;
                }
            }
            "message_delta" => {
                let md: MessageDelta = parse(&name, &ev.data)?;
                if let Some(raw) = md.delta.stop_reason {
                    out.push(ProviderEvent::Stop {
                        reason: stop_reason(&raw),
                        raw,
                    });
                }
                let u = md.usage.unwrap_or_default();
                let usage = ProviderUsage {
                    input_tokens: u.input_tokens,
                    output_tokens: u.output_tokens,
                    cache_read_tokens: u.cache_read_input_tokens,
                    cache_write_tokens: u.cache_creation_input_tokens,
                    reasoning_tokens: u.output_tokens_details.and_then(|d| d.thinking_tokens),
                };
                if !usage.is_empty() {
                    out.push(ProviderEvent::Usage(usage));
                }
            }
            "message_stop" => out.push(ProviderEvent::Done),
            "error" => out.push(error_event(&ev.data)),
            _ => {}
        }
        Ok(out)
    }

    /// End of body. Anthropic closes everything explicitly, so nothing is synthesised: a stream
    /// cut before `message_stop` simply has no `Done`.
    pub fn finish(&mut self) -> Vec<ProviderEvent> {
        Vec::new()
    }

    fn message_start(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderDecodeError> {
        let ms: MessageStart = parse(name, data)?;
        self.blocks.clear();
        out.push(ProviderEvent::MessageStart {
            id: ms.message.id,
            model: ms.message.model,
        });
        // The start's `output_tokens` is a placeholder; the real count comes in message_delta.
        let u = ms.message.usage.unwrap_or_default();
        let usage = ProviderUsage {
            input_tokens: u.input_tokens,
            cache_read_tokens: u.cache_read_input_tokens,
            cache_write_tokens: u.cache_creation_input_tokens,
            ..ProviderUsage::default()
        };
        if !usage.is_empty() {
            out.push(ProviderEvent::Usage(usage));
        }
        Ok(())
    }

    fn block_start(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderDecodeError> {
        let bs: BlockStart = parse(name, data)?;
        let index = bs.index;
        if self.blocks.get(&index).is_some_and(|b| b.open) {
            return Err(err(
                name,
                format!("block at index {index} started again while still open"),
            ));
        }
        let cb = bs.content_block;
        let kind = match cb.kind.as_str() {
            "text" => {
                push_text(out, index, cb.text.unwrap_or_default(), false);
                BlockKind::Text
            }
            "thinking" => {
                push_text(out, index, cb.thinking.unwrap_or_default(), true);
                BlockKind::Thinking
            }
            "tool_use" => {
                let missing = |field: &str| {
                    err(
                        name,
                        format!("tool_use block at index {index} has no `content_block.{field}`"),
                    )
                };
                let id = cb.id.ok_or_else(|| missing("id"))?;
                let tool = cb.name.ok_or_else(|| missing("name"))?;
                out.push(ProviderEvent::ToolCallStart {
                    index,
                    id,
                    name: tool,
                });
                BlockKind::ToolUse
            }
            _ => BlockKind::Other,
        };
        self.blocks.insert(index, Block { kind, open: true });
        Ok(())
    }

    fn block_delta(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderDecodeError> {
        let bd: BlockDelta = parse(name, data)?;
        let index = bd.index;
        let d = bd.delta;
        let missing = |field: &str| {
            err(
                name,
                format!("{} at index {index} has no `delta.{field}`", d.kind),
            )
        };
        match d.kind.as_str() {
            "text_delta" => {
                let text = d.text.clone().ok_or_else(|| missing("text"))?;
                push_text(out, index, text, false);
            }
            "thinking_delta" => {
                let text = d.thinking.clone().ok_or_else(|| missing("thinking"))?;
                push_text(out, index, text, true);
            }
            "input_json_delta" => {
                let delta = d
                    .partial_json
                    .clone()
                    .ok_or_else(|| missing("partial_json"))?;
                match self.blocks.get(&index) {
                    None => {
                        return Err(err(
                            name,
                            format!(
                                "input_json_delta for index {index}, which has no content_block_start"
                            ),
                        ));
                    }
                    Some(Block {
                        kind: BlockKind::ToolUse,
                        open: false,
                    }) => {
                        return Err(err(
                            name,
                            format!(
                                "input_json_delta for index {index} after its content_block_stop"
                            ),
                        ));
                    }
                    Some(Block {
                        kind: BlockKind::ToolUse,
                        open: true,
                    }) => {
                        if !delta.is_empty() {
                            out.push(ProviderEvent::ToolCallArgsDelta { index, delta });
                        }
                    }
                    // Server-side tool input: not the client's to run.
                    Some(_) => {}
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[(&str, &str)]) -> Result<Vec<ProviderEvent>, ProviderDecodeError> {
        let mut d = AnthropicDecoder::new();
        let mut out = Vec::new();
        for (name, data) in events {
            out.extend(d.on_event(&SseEvent::named(*name, *data))?);
        }
        out.extend(d.finish());
        Ok(out)
    }

    #[test]
    fn error_event_with_details_and_request_id() {
        let got = run(&[(
            "error",
            r#"{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#,
        )])
        .unwrap();
        assert_eq!(
            got,
            vec![ProviderEvent::Error {
                error_type: "overloaded_error".into(),
                message: "Overloaded".into()
            }]
        );
        let got = run(&[("error", "upstream timed out")]).unwrap();
        assert_eq!(
            got,
            vec![ProviderEvent::Error {
                error_type: "error".into(),
                message: "upstream timed out".into()
            }]
        );
    }

    #[test]
    fn malformed_json_names_event() {
        let e = run(&[("content_block_delta", "{\"index\":0,")]).unwrap_err();
        assert_eq!(e.event, "content_block_delta");
        assert!(e.detail.starts_with("malformed data"), "{e}");
        let e = run(&[(
            "content_block_delta",
            r#"{"delta":{"type":"text_delta","text":"x"}}"#,
        )])
        .unwrap_err();
        assert!(e.detail.contains("`index`"), "{e}");
    }

    #[test]
    fn tool_args_attribution_is_strict() {
        let delta = r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{"}}"#;
        let e = run(&[("content_block_delta", delta)]).unwrap_err();
        assert!(e.detail.contains("no content_block_start"), "{e}");
        let start =
            r#"{"index":2,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}"#;
        let e = run(&[
            ("content_block_start", start),
            ("content_block_stop", r#"{"index":2}"#),
            ("content_block_delta", delta),
        ])
        .unwrap_err();
        assert!(e.detail.contains("after its content_block_stop"), "{e}");
        let e = run(&[
            ("content_block_start", start),
            ("content_block_start", start),
        ])
        .unwrap_err();
        assert!(e.detail.contains("started again"), "{e}");
        let no_id = r#"{"index":0,"content_block":{"type":"tool_use","name":"n"}}"#;
        let e = run(&[("content_block_start", no_id)]).unwrap_err();
        assert!(e.detail.contains("content_block.id"), "{e}");
    }

    #[test]
    fn data_only_events_use_json_type() {
        let mut d = AnthropicDecoder::new();
        let got = d
            .on_event(&SseEvent::data(r#"{"type":"message_stop"}"#))
            .unwrap();
        assert_eq!(got, vec![ProviderEvent::Done]);
        assert!(d.on_event(&SseEvent::data("not json")).is_err());
    }

    #[test]
    fn second_message_start_resets_blocks() {
        let start = r#"{"index":0,"content_block":{"type":"tool_use","id":"a","name":"n"}}"#;
        let ms = r#"{"message":{"id":"m"}}"#;
        let got = run(&[
            ("message_start", ms),
            ("content_block_start", start),
            ("message_start", ms),
            ("content_block_start", start),
        ])
        .unwrap();
        assert_eq!(got.len(), 4);
    }
}
