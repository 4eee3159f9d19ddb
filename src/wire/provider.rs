//! One provider-event model for every LLM provider stream, and the decoders that produce it.
//!
//! A provider stream (Anthropic Messages SSE, OpenAI Chat Completions SSE, …) is decoded into
//! [`ProviderEvent`]s; the server model translates those into Letta chunks
//! (letta-protocol.md §7.6). Tool arguments stay strings: they are accumulated, never parsed,
//! so a split inside a JSON string survives byte for byte (invariant `args-intact`).
//!
//! Pure: no I/O, no clock.

use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
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
