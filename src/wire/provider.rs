//! One provider-event model for every LLM provider stream, and the decoders that produce it.
//!
//! A provider stream (Anthropic Messages SSE, OpenAI Chat Completions SSE, …) is decoded into
//! [`ProviderEvent`]s; the server model translates those into Letta chunks
//! (letta-protocol.md §7.6). Tool arguments stay strings: they are accumulated, never parsed,
//! so a split inside a JSON string survives byte for byte (invariant `args-intact`).
//!
//! Decoders: [`AnthropicDecoder`] (Messages API), [`OpenAiChatDecoder`] (Chat Completions),
//! [`OpenAiResponsesDecoder`] (Responses API) and [`GeminiDecoder`] (`streamGenerateContent`),
//! all driven one SSE event at a time; [`ProviderDecoder`] picks one by [`StreamFormat`] (a
//! [`ProviderFormat`], the formats a model speaks, converts into one), and
//! [`decode_stream`] decodes a whole list of frames. [`ToolCallAccumulator`] folds events back
//! into complete tool calls. The per-format choices (what is skipped, what is an error) are
//! documented on each decoder.
//!
//! Pure: no I/O, no clock.

mod accumulate;
mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;

use std::fmt;

use serde::{Deserialize, Serialize};

use super::sse::{SseEvent, SseFrame};

pub use accumulate::{ToolCall, ToolCallAccumulator};
pub use anthropic::AnthropicDecoder;
pub use gemini::GeminiDecoder;
pub use openai_chat::OpenAiChatDecoder;
pub use openai_responses::OpenAiResponsesDecoder;

/// Why the provider stopped, normalised across providers. `raw` keeps the provider's own word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderStop {
    /// Anthropic `end_turn`, OpenAI `stop`.
    EndTurn,
    /// Anthropic `tool_use`, OpenAI `tool_calls` / `function_call`.
    ToolUse,
    /// Anthropic `max_tokens`, OpenAI `length`.
    MaxTokens,
    /// Anthropic `stop_sequence`.
    StopSequence,
    /// Anthropic `refusal`, OpenAI `content_filter`.
    Refusal,
    /// Anthropic `pause_turn`.
    PauseTurn,
    /// Anything else, verbatim.
    Other(String),
}

/// Token usage as reported by the provider. Fields the provider did not report are `None`.
///
/// Numbers are the provider's own, not normalised: OpenAI's `prompt_tokens` includes cached
/// tokens, Anthropic's `input_tokens` does not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
}

impl ProviderUsage {
    /// True if no field was reported (decoders emit no `Usage` event then).
    pub fn is_empty(&self) -> bool {
        *self == ProviderUsage::default()
    }

    /// Folds a later report into this one. Providers report cumulative counts (Anthropic's
    /// `message_delta` usage is the running total), so a later field replaces an earlier one
    /// and an unreported field keeps its earlier value.
    pub fn merge_from(&mut self, later: &ProviderUsage) {
        fn take(slot: &mut Option<u64>, v: Option<u64>) {
            if v.is_some() {
                *slot = v;
            }
        }
        take(&mut self.input_tokens, later.input_tokens);
        take(&mut self.output_tokens, later.output_tokens);
        take(&mut self.cache_read_tokens, later.cache_read_tokens);
        take(&mut self.cache_write_tokens, later.cache_write_tokens);
        take(&mut self.reasoning_tokens, later.reasoning_tokens);
    }
}

/// A provider-neutral streaming event. `index` is the provider's content-block (Anthropic) or
/// tool-call (OpenAI) index, so interleaved blocks stay apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProviderEvent {
    /// The response began (Anthropic `message_start`, the first OpenAI chunk).
    MessageStart {
        id: Option<String>,
        model: Option<String>,
    },
    TextDelta {
        index: u32,
        text: String,
    },
    ThinkingDelta {
        index: u32,
        text: String,
    },
    ToolCallStart {
        index: u32,
        id: String,
        name: String,
    },
    /// A fragment of the tool call's JSON arguments, exactly as sent.
    ToolCallArgsDelta {
        index: u32,
        delta: String,
    },
    ToolCallEnd {
        index: u32,
    },
    /// Usage; may arrive more than once (Anthropic reports input at start, output at the end).
    /// Counts are cumulative: fold them with [`ProviderUsage::merge_from`], do not add them.
    Usage(ProviderUsage),
    Stop {
        reason: ProviderStop,
        raw: String,
    },
    /// An error the provider sent inside the stream (Anthropic `event: error`, an OpenAI chunk
    /// with an `error` object).
    Error {
        error_type: String,
        message: String,
    },
    /// The stream's own end marker (Anthropic `message_stop`, OpenAI `[DONE]`).
    Done,
}

/// The provider stream formats this crate decodes. Serialised by [`as_str`](Self::as_str) name,
/// as in cassette headers and scenario files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ProviderFormat {
    /// Anthropic Messages API streaming (`event:` names + JSON data, ends with `message_stop`).
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI Chat Completions streaming (data-only JSON chunks, ends with `[DONE]`).
    #[serde(rename = "openai_chat")]
    OpenAiChat,
    /// OpenAI Responses API streaming (`POST /v1/responses`; see [`StreamFormat::OpenAiResponses`]).
    #[serde(rename = "openai_responses")]
    OpenAiResponses,
    /// Gemini `streamGenerateContent?alt=sse` (see [`StreamFormat::Gemini`]).
    #[serde(rename = "gemini")]
    Gemini,
}

impl ProviderFormat {
    pub const ALL: [ProviderFormat; 4] = [
        ProviderFormat::Anthropic,
        ProviderFormat::OpenAiChat,
        ProviderFormat::OpenAiResponses,
        ProviderFormat::Gemini,
    ];

    /// The formats a version 1 cassette file can name (version 1 is closed: later formats
    /// are written as version 2, docs/cassette.md).
    pub const V1: [ProviderFormat; 2] = [ProviderFormat::Anthropic, ProviderFormat::OpenAiChat];

    /// The stable name used in cassettes and scenario files.
    pub fn as_str(self) -> &'static str {
        StreamFormat::from(self).as_str()
    }

    /// The names, quoted and comma-separated, for error messages.
    pub fn names() -> String {
        StreamFormat::names()
    }

    /// Inverse of [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<ProviderFormat> {
        ProviderFormat::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// Guesses the format from the first recognisable event: an Anthropic event name or JSON
    /// `type` (`message_start`, `content_block_*`, …), or an OpenAI chunk (`object` is
    /// `chat.completion.chunk`, or a `choices` array). `None` for anything else (OpenAI
    /// Responses, Gemini, an empty stream): [`StreamFormat::detect`] recognises those too.
    pub fn detect(frames: &[SseFrame]) -> Option<ProviderFormat> {
        const ANTHROPIC: [&str; 7] = [
            "message_start",
            "message_delta",
            "message_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "ping",
        ];
        for ev in frames.iter().filter_map(SseFrame::as_event) {
            if ev.event.as_deref().is_some_and(|n| ANTHROPIC.contains(&n)) {
                return Some(ProviderFormat::Anthropic);
            }
            let Ok(serde_json::Value::Object(obj)) =
                serde_json::from_str::<serde_json::Value>(&ev.data)
            else {
                continue;
            };
            if obj
                .get("type")
                .and_then(|t| t.as_str())
                .is_some_and(|t| ANTHROPIC.contains(&t))
            {
                return Some(ProviderFormat::Anthropic);
            }
            let is_chunk =
                obj.get("object").and_then(|o| o.as_str()) == Some("chat.completion.chunk");
            if is_chunk || obj.get("choices").is_some_and(|c| c.is_array()) {
                return Some(ProviderFormat::OpenAiChat);
            }
        }
        None
    }
}

/// Every provider stream format this crate records and decodes, as a recording names it. Each
/// is also a format a model can be configured to speak ([`ProviderFormat`], the same names).
/// Serialised by [`as_str`](Self::as_str) name, as in cassette headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum StreamFormat {
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "openai_chat")]
    OpenAiChat,
    /// OpenAI Responses API streaming (`event:` names equal to the JSON `type`, ends with
    /// `response.completed`, `response.failed` or `response.incomplete`).
    #[serde(rename = "openai_responses")]
    OpenAiResponses,
    /// Gemini `streamGenerateContent?alt=sse` (data-only `GenerateContentResponse` chunks, CRLF
    /// framing, no end marker: the last chunk carries `finishReason`).
    #[serde(rename = "gemini")]
    Gemini,
}

impl StreamFormat {
    pub const ALL: [StreamFormat; 4] = [
        StreamFormat::Anthropic,
        StreamFormat::OpenAiChat,
        StreamFormat::OpenAiResponses,
        StreamFormat::Gemini,
    ];

    /// The stable name used in cassettes.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamFormat::Anthropic => "anthropic",
            StreamFormat::OpenAiChat => "openai_chat",
            StreamFormat::OpenAiResponses => "openai_responses",
            StreamFormat::Gemini => "gemini",
        }
    }

    /// Inverse of [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<StreamFormat> {
        StreamFormat::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// The names, quoted and comma-separated, for error messages.
    pub fn names() -> String {
        StreamFormat::ALL
            .iter()
            .map(|f| format!("{:?}", f.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The path a request of this format is sent to by default (Gemini's names a model:
    /// any `…:streamGenerateContent` path is the same API).
    pub fn api_path(self) -> &'static str {
        match self {
            StreamFormat::Anthropic => "/v1/messages",
            StreamFormat::OpenAiChat => "/v1/chat/completions",
            StreamFormat::OpenAiResponses => "/v1/responses",
            StreamFormat::Gemini => "/v1beta/models/gemini:streamGenerateContent?alt=sse",
        }
    }

    /// The same format as a model speaks it.
    pub fn model_format(self) -> ProviderFormat {
        match self {
            StreamFormat::Anthropic => ProviderFormat::Anthropic,
            StreamFormat::OpenAiChat => ProviderFormat::OpenAiChat,
            StreamFormat::OpenAiResponses => ProviderFormat::OpenAiResponses,
            StreamFormat::Gemini => ProviderFormat::Gemini,
        }
    }

    /// The format a request path addresses: a path ending in `/v1/messages` (Anthropic), a path ending in
    /// `/chat/completions` or `/responses` (OpenAI), or a Gemini `:streamGenerateContent` /
    /// `:generateContent` call. The query is ignored.
    pub fn of_path(path_and_query: &str) -> Option<StreamFormat> {
        let path = path_and_query.split('?').next().unwrap_or("");
        let path = path.trim_end_matches('/');
        if path.ends_with("/v1/messages") {
            Some(StreamFormat::Anthropic)
        } else if path.ends_with("/chat/completions") {
            Some(StreamFormat::OpenAiChat)
        } else if path.ends_with("/responses") {
            Some(StreamFormat::OpenAiResponses)
        } else if path.ends_with(":streamGenerateContent") || path.ends_with(":generateContent") {
            Some(StreamFormat::Gemini)
        } else {
            None
        }
    }

    /// Guesses the format from the stream itself: [`ProviderFormat::detect`], else an OpenAI
    /// Responses event (`type` starting `response.`), else a Gemini chunk (a `candidates` array
    /// or `usageMetadata`).
    pub fn detect(frames: &[SseFrame]) -> Option<StreamFormat> {
        if let Some(f) = ProviderFormat::detect(frames) {
            return Some(f.into());
        }
        for ev in frames.iter().filter_map(SseFrame::as_event) {
            let Ok(serde_json::Value::Object(obj)) =
                serde_json::from_str::<serde_json::Value>(&ev.data)
            else {
                continue;
            };
            if obj
                .get("type")
                .and_then(|t| t.as_str())
                .is_some_and(|t| t.starts_with("response."))
            {
                return Some(StreamFormat::OpenAiResponses);
            }
            if obj.get("candidates").is_some_and(|c| c.is_array())
                || obj.contains_key("usageMetadata")
            {
                return Some(StreamFormat::Gemini);
            }
        }
        None
    }
}

impl From<ProviderFormat> for StreamFormat {
    fn from(f: ProviderFormat) -> StreamFormat {
        match f {
            ProviderFormat::Anthropic => StreamFormat::Anthropic,
            ProviderFormat::OpenAiChat => StreamFormat::OpenAiChat,
            ProviderFormat::OpenAiResponses => StreamFormat::OpenAiResponses,
            ProviderFormat::Gemini => StreamFormat::Gemini,
        }
    }
}

impl fmt::Display for StreamFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for ProviderFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider stream event that could not be decoded. It names the format, the SSE event
/// (its `event:` name, or what the data said it was) and what was wrong with which field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderDecodeError {
    pub format: StreamFormat,
    /// The event's name: the `event:` field, else the JSON `type`, else `chunk` / `data`.
    pub event: String,
    /// What was wrong, naming the field (serde's message for malformed JSON).
    pub detail: String,
    /// 1-based position of the offending frame in the stream, when the caller knows it
    /// ([`decode_stream`] and the cassette fill it in).
    pub frame: Option<usize>,
}

impl ProviderDecodeError {
    pub(crate) fn new(
        format: impl Into<StreamFormat>,
        event: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        ProviderDecodeError {
            format: format.into(),
            event: event.into(),
            detail: detail.into(),
            frame: None,
        }
    }
}

impl fmt::Display for ProviderDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} stream", self.format)?;
        if let Some(n) = self.frame {
            write!(f, ", frame {n}")?;
        }
        write!(f, ", event `{}`: {}", self.event, self.detail)
    }
}

impl std::error::Error for ProviderDecodeError {}

/// Any decoder, chosen at run time by [`StreamFormat`].
#[derive(Debug, Clone)]
pub enum ProviderDecoder {
    Anthropic(AnthropicDecoder),
    OpenAiChat(OpenAiChatDecoder),
    OpenAiResponses(OpenAiResponsesDecoder),
    Gemini(GeminiDecoder),
}

impl ProviderDecoder {
    pub fn new(format: impl Into<StreamFormat>) -> Self {
        match format.into() {
            StreamFormat::Anthropic => ProviderDecoder::Anthropic(AnthropicDecoder::new()),
            StreamFormat::OpenAiChat => ProviderDecoder::OpenAiChat(OpenAiChatDecoder::new()),
            StreamFormat::OpenAiResponses => {
                ProviderDecoder::OpenAiResponses(OpenAiResponsesDecoder::new())
            }
            StreamFormat::Gemini => ProviderDecoder::Gemini(GeminiDecoder::new()),
        }
    }

    pub fn format(&self) -> StreamFormat {
        match self {
            ProviderDecoder::Anthropic(_) => StreamFormat::Anthropic,
            ProviderDecoder::OpenAiChat(_) => StreamFormat::OpenAiChat,
            ProviderDecoder::OpenAiResponses(_) => StreamFormat::OpenAiResponses,
            ProviderDecoder::Gemini(_) => StreamFormat::Gemini,
        }
    }

    pub fn on_event(&mut self, ev: &SseEvent) -> Result<Vec<ProviderEvent>, ProviderDecodeError> {
        match self {
            ProviderDecoder::Anthropic(d) => d.on_event(ev),
            ProviderDecoder::OpenAiChat(d) => d.on_event(ev),
            ProviderDecoder::OpenAiResponses(d) => d.on_event(ev),
            ProviderDecoder::Gemini(d) => d.on_event(ev),
        }
    }

    /// Comments (keepalives) carry no provider event and are skipped.
    pub fn on_frame(
        &mut self,
        frame: &SseFrame,
    ) -> Result<Vec<ProviderEvent>, ProviderDecodeError> {
        match frame {
            SseFrame::Event(ev) => self.on_event(ev),
            SseFrame::Comment(_) => Ok(Vec::new()),
        }
    }

    pub fn finish(&mut self) -> Vec<ProviderEvent> {
        match self {
            ProviderDecoder::Anthropic(d) => d.finish(),
            ProviderDecoder::OpenAiChat(d) => d.finish(),
            ProviderDecoder::OpenAiResponses(d) => d.finish(),
            ProviderDecoder::Gemini(d) => d.finish(),
        }
    }
}

/// Decodes a whole stream. The first undecodable frame stops decoding; its 1-based position in
/// `frames` is recorded in the error.
pub fn decode_stream(
    format: impl Into<StreamFormat>,
    frames: &[SseFrame],
) -> Result<Vec<ProviderEvent>, ProviderDecodeError> {
    let mut dec = ProviderDecoder::new(format);
    let mut out = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        let evs = dec.on_frame(frame).map_err(|mut e| {
            e.frame = Some(i + 1);
            e
        })?;
        out.extend(evs);
    }
    out.extend(dec.finish());
    Ok(out)
}

/// Parses an event's data as JSON into `T`, naming the event in the error.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    format: impl Into<StreamFormat>,
    event: &str,
    data: &str,
) -> Result<T, ProviderDecodeError> {
    serde_json::from_str(data)
        .map_err(|e| ProviderDecodeError::new(format, event, format!("malformed data: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_are_stable() {
        for f in ProviderFormat::ALL {
            assert_eq!(ProviderFormat::from_name(f.as_str()), Some(f));
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.as_str()));
            assert_eq!(serde_json::from_str::<ProviderFormat>(&json).unwrap(), f);
        }
        assert_eq!(ProviderFormat::from_name("openai"), None);
    }

    #[test]
    fn usage_merge_keeps_latest_reported_fields() {
        let mut u = ProviderUsage {
            input_tokens: Some(10),
            output_tokens: Some(1),
            ..ProviderUsage::default()
        };
        u.merge_from(&ProviderUsage {
            output_tokens: Some(7),
            ..ProviderUsage::default()
        });
        assert_eq!((u.input_tokens, u.output_tokens), (Some(10), Some(7)));
        assert!(ProviderUsage::default().is_empty());
    }

    #[test]
    fn detect_needs_a_recognisable_event() {
        assert_eq!(ProviderFormat::detect(&[]), None);
        let frames = [
            SseFrame::Comment("x".into()),
            SseFrame::Event(SseEvent::data("[DONE]")),
            SseFrame::Event(SseEvent::data(r#"{"choices":[]}"#)),
        ];
        assert_eq!(
            ProviderFormat::detect(&frames),
            Some(ProviderFormat::OpenAiChat)
        );
        let frames = [SseFrame::Event(SseEvent::data(
            r#"{"type":"message_start"}"#,
        ))];
        assert_eq!(
            ProviderFormat::detect(&frames),
            Some(ProviderFormat::Anthropic)
        );
    }
}
