//! The narrow data surface of the loop: stop reasons, token usage, content parts, tool calls,
//! messages and the turn result (kimi-loop.md §2).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Why one completed model step stopped (kimi-loop.md §2.1 `LoopStepStopReason`).
/// `ToolUse` is a loop-control signal: run the tools, then do another step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStopReason {
    /// The model finished its answer.
    EndTurn,
    /// The provider truncated the answer (`truncated`).
    MaxTokens,
    /// The model asked for tools.
    ToolUse,
    /// The provider's safety filter stopped the answer.
    Filtered,
    /// The provider paused the answer.
    Paused,
    /// Any other provider reason, or `tool_calls` without calls.
    Unknown,
}

impl StepStopReason {
    /// The wire spelling (`end_turn`, `tool_use`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EndTurn => "end_turn",
            Self::MaxTokens => "max_tokens",
            Self::ToolUse => "tool_use",
            Self::Filtered => "filtered",
            Self::Paused => "paused",
            Self::Unknown => "unknown",
        }
    }

    /// The terminal form, or `None` for `tool_use`.
    pub fn terminal(self) -> Option<TerminalStopReason> {
        match self {
            Self::EndTurn => Some(TerminalStopReason::EndTurn),
            Self::MaxTokens => Some(TerminalStopReason::MaxTokens),
            Self::ToolUse => None,
            Self::Filtered => Some(TerminalStopReason::Filtered),
            Self::Paused => Some(TerminalStopReason::Paused),
            Self::Unknown => Some(TerminalStopReason::Unknown),
        }
    }
}

/// A step stop reason other than `tool_use` (kimi-loop.md §2.1 `LoopTerminalStepStopReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalStopReason {
    /// See [`StepStopReason::EndTurn`].
    EndTurn,
    /// See [`StepStopReason::MaxTokens`].
    MaxTokens,
    /// See [`StepStopReason::Filtered`].
    Filtered,
    /// See [`StepStopReason::Paused`].
    Paused,
    /// See [`StepStopReason::Unknown`].
    Unknown,
}

impl From<TerminalStopReason> for StepStopReason {
    fn from(reason: TerminalStopReason) -> Self {
        match reason {
            TerminalStopReason::EndTurn => Self::EndTurn,
            TerminalStopReason::MaxTokens => Self::MaxTokens,
            TerminalStopReason::Filtered => Self::Filtered,
            TerminalStopReason::Paused => Self::Paused,
            TerminalStopReason::Unknown => Self::Unknown,
        }
    }
}

/// What a normal [`TurnResult`] can report (kimi-loop.md §2.1 `LoopTurnStopReason`). `tool_use`,
/// `error` and `max_steps` are deliberately not members: errors and max-steps exhaustion are
/// returned as `Err`, and compaction is a host retry, not a stop reason.
///
/// Type-level locks (kimi-loop.md §7.14): no `error`, `max_steps` or `tool_use`.
///
/// ```compile_fail
/// let _ = loopsim::model::kimi::turn_loop::TurnStopReason::ToolUse;
/// ```
/// ```compile_fail
/// let _ = loopsim::model::kimi::turn_loop::TurnStopReason::MaxSteps;
/// ```
/// ```compile_fail
/// let _ = loopsim::model::kimi::turn_loop::TurnStopReason::Error;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStopReason {
    /// See [`StepStopReason::EndTurn`].
    EndTurn,
    /// See [`StepStopReason::MaxTokens`].
    MaxTokens,
    /// See [`StepStopReason::Filtered`].
    Filtered,
    /// See [`StepStopReason::Paused`].
    Paused,
    /// See [`StepStopReason::Unknown`].
    Unknown,
    /// The abort signal fired (or an abort-shaped error was raised).
    Aborted,
}

impl From<TerminalStopReason> for TurnStopReason {
    fn from(reason: TerminalStopReason) -> Self {
        match reason {
            TerminalStopReason::EndTurn => Self::EndTurn,
            TerminalStopReason::MaxTokens => Self::MaxTokens,
            TerminalStopReason::Filtered => Self::Filtered,
            TerminalStopReason::Paused => Self::Paused,
            TerminalStopReason::Unknown => Self::Unknown,
        }
    }
}

/// kosong `FinishReason`: the provider's own reason, normalised by the LLM adapter
/// (kimi-loop.md §2.7). Absence means the provider gave none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The answer is complete.
    Completed,
    /// The answer ends with tool calls.
    ToolCalls,
    /// The answer was cut at the token limit.
    Truncated,
    /// The provider's safety filter intervened.
    Filtered,
    /// The provider paused.
    Paused,
    /// Anything else.
    Other,
}

impl FinishReason {
    /// The wire spelling (`completed`, `tool_calls`, ...), as `step.end` carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::ToolCalls => "tool_calls",
            Self::Truncated => "truncated",
            Self::Filtered => "filtered",
            Self::Paused => "paused",
            Self::Other => "other",
        }
    }
}

/// Token usage (kosong `TokenUsage`, kimi-loop.md §2.3). All four fields are always present.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Input tokens that were neither cache-read nor cache-created.
    pub input_other: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub input_cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub input_cache_creation: u64,
}

impl TokenUsage {
    /// `emptyUsage()`: all zeros.
    pub fn empty() -> Self {
        Self::default()
    }

    /// `addUsage(a, b)`: field-by-field sum.
    pub fn add(&self, other: &TokenUsage) -> TokenUsage {
        TokenUsage {
            input_other: self.input_other + other.input_other,
            output: self.output + other.output,
            input_cache_read: self.input_cache_read + other.input_cache_read,
            input_cache_creation: self.input_cache_creation + other.input_cache_creation,
        }
    }

    /// `inputTotal(u)` = other + cache read + cache creation.
    pub fn input_total(&self) -> u64 {
        self.input_other + self.input_cache_read + self.input_cache_creation
    }

    /// `grandTotal(u)` = input total + output.
    pub fn grand_total(&self) -> u64 {
        self.input_total() + self.output
    }
}

/// A media reference inside a content part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaUrl {
    /// The URL (often a `data:` URL).
    pub url: String,
    /// Optional provider id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// kosong `ContentPart` (kimi-loop.md §2.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning; `encrypted` is the provider's signature, preserved verbatim.
    Think {
        /// The reasoning text.
        think: String,
        /// The provider signature, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted: Option<String>,
    },
    /// An image.
    ImageUrl {
        /// Where the image is.
        #[serde(rename = "imageUrl")]
        image_url: MediaUrl,
    },
    /// An audio clip.
    AudioUrl {
        /// Where the clip is.
        #[serde(rename = "audioUrl")]
        audio_url: MediaUrl,
    },
    /// A video clip.
    VideoUrl {
        /// Where the clip is.
        #[serde(rename = "videoUrl")]
        video_url: MediaUrl,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// A think part without a signature.
    pub fn think(think: impl Into<String>) -> Self {
        Self::Think {
            think: think.into(),
            encrypted: None,
        }
    }

    /// An image part.
    pub fn image(url: impl Into<String>) -> Self {
        Self::ImageUrl {
            image_url: MediaUrl {
                url: url.into(),
                id: None,
            },
        }
    }

    /// True for image, audio and video parts.
    pub fn is_media(&self) -> bool {
        matches!(
            self,
            Self::ImageUrl { .. } | Self::AudioUrl { .. } | Self::VideoUrl { .. }
        )
    }
}

/// A provider tool call (kosong `ToolCall`, kimi-loop.md §2.4). `arguments` is the raw JSON
/// string as the provider produced it (or `None`); the loop parses it.
///
/// Type-level lock (kimi-loop.md §7.14): a tool call has raw `arguments`, no parsed `args`.
///
/// ```compile_fail
/// fn f(call: &loopsim::model::kimi::turn_loop::ToolCall) { let _ = &call.args; }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The provider's tool-call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// Raw JSON arguments.
    pub arguments: Option<String>,
    /// Provider-specific data (e.g. Gemini thought signatures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extras: Option<Map<String, Value>>,
}

impl ToolCall {
    /// A call whose arguments are the JSON encoding of `args` (the fixture `makeToolCall`).
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: &Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: Some(args.to_string()),
            extras: None,
        }
    }

    /// A call with raw (possibly broken) argument text.
    pub fn raw(id: impl Into<String>, name: impl Into<String>, arguments: Option<&str>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.map(str::to_owned),
            extras: None,
        }
    }
}

/// A message role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The system (the loop never puts the system prompt into messages).
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

/// A model-visible message (kosong `Message`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The content parts.
    pub content: Vec<ContentPart>,
    /// The tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A user message with one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentPart::text(text)],
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// The spec of a tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its JSON Schema.
    pub parameters: Value,
}

/// Stream timing reported by the LLM adapter (all in milliseconds of the injected clock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamTiming {
    /// Request start to first token.
    pub first_token_latency_ms: u64,
    /// Request start to end of stream.
    pub stream_duration_ms: u64,
    /// Time spent building the request.
    pub request_build_ms: Option<u64>,
    /// Server-reported time to first token.
    pub server_first_token_ms: Option<u64>,
    /// Server-reported decode time.
    pub server_decode_ms: Option<u64>,
    /// Time spent consuming the stream on the client.
    pub client_consume_ms: Option<u64>,
}

/// The result of a turn that did not fail (kimi-loop.md §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnResult {
    /// Why the turn stopped.
    pub stop_reason: TurnStopReason,
    /// Steps started, including an aborted in-flight step; 0 if aborted on entry.
    pub steps: u32,
    /// Sum of the usage of every step whose model call returned.
    pub usage: TokenUsage,
}
