//! The provider seam and the LLM adapter over it (the host's `kosong-llm.ts`, kimi-loop.md
//! §2.7), plus kosong's error classifiers (§6, §4.7).
//!
//! The harness implements [`ChatProvider`]: one request in, a stream of
//! [`ProviderEvent`]s out (a fake provider fed from cassettes or a script, over turmoil or
//! loopback TCP). [`StreamingLlm`] drains that stream into one [`ChatResponse`]: deltas fire
//! while the stream runs; completed text/think blocks are handed to the sink only after the
//! stream has fully drained, once per merged block, in content order, so a failed or aborted
//! attempt produces deltas but never `content.part`.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use indexmap::IndexMap;

use super::abort::AbortSignal;
use super::classify;
use super::clock::Clock;
use super::errors::{LoopError, ProviderError, ProviderErrorKind, StatusClass};
use super::events::ToolCallDeltaEvent;
use super::llm::{ChatParams, ChatResponse, Llm, RequestLogFields, RetryClassifier};
use super::types::{
    ContentPart, FinishReason, Message, StreamTiming, TokenUsage, ToolCall, ToolSpec,
};
use crate::wire::provider::{ProviderEvent, ProviderStop, ProviderUsage};

/// One model request as the provider sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The model name.
    pub model: String,
    /// The system prompt (carried by the LLM, never in `messages`).
    pub system_prompt: String,
    /// The messages.
    pub messages: Vec<Message>,
    /// The tools.
    pub tools: Vec<ToolSpec>,
    /// Observability fields.
    pub request_log_fields: RequestLogFields,
}

/// A provider's event stream. An `Err` item is a transport failure (a connection drop mid-
/// stream is `ProviderErrorKind::Connection`, as kosong maps undici's `terminated`).
pub type ProviderEventStream = BoxStream<'static, Result<ProviderEvent, ProviderError>>;

/// The provider seam the harness implements.
pub trait ChatProvider: Send + Sync {
    /// Open one streaming request. An `Err` is an HTTP-level failure (status, quota, ...).
    fn open(
        &self,
        request: ChatRequest,
    ) -> BoxFuture<'_, Result<ProviderEventStream, ProviderError>>;
}

/// Map the wire stop reason to kosong's `FinishReason`.
pub fn finish_reason(stop: &ProviderStop) -> FinishReason {
    match stop {
        ProviderStop::EndTurn | ProviderStop::StopSequence => FinishReason::Completed,
        ProviderStop::ToolUse => FinishReason::ToolCalls,
        ProviderStop::MaxTokens => FinishReason::Truncated,
        ProviderStop::Refusal => FinishReason::Filtered,
        ProviderStop::PauseTurn => FinishReason::Paused,
        ProviderStop::Other(_) => FinishReason::Other,
    }
}

/// Map provider usage to `TokenUsage`. Choice: `input_tokens` is read as Anthropic's
/// "input not served from or written to the cache"; missing fields are 0 (the host adapter's
/// `emptyUsage()` fallback).
pub fn token_usage(usage: &ProviderUsage) -> TokenUsage {
    TokenUsage {
        input_other: usage.input_tokens.unwrap_or(0),
        output: usage.output_tokens.unwrap_or(0),
        input_cache_read: usage.cache_read_tokens.unwrap_or(0),
        input_cache_creation: usage.cache_write_tokens.unwrap_or(0),
    }
}

/// kosong `isRetryableGenerateError` (kimi-loop.md §6).
pub fn is_retryable_generate_error(error: &LoopError) -> bool {
    let Some(provider) = error.provider() else {
        return false;
    };
    match provider.kind {
        ProviderErrorKind::Connection
        | ProviderErrorKind::Timeout
        | ProviderErrorKind::EmptyResponse => true,
        ProviderErrorKind::Status {
            class: StatusClass::QuotaExhausted,
            ..
        } => false,
        ProviderErrorKind::Status { status, .. } => {
            matches!(status, 408 | 409 | 429 | 500 | 502 | 503 | 504 | 529)
        }
        ProviderErrorKind::Other => !is_image_format_error(error),
    }
}

/// kosong `isImageFormatError` (see `classify`): a status error other than an overflow or a
/// body-size rejection, if it is a 400 about an image's format or data; any other provider
/// error (kosong's `ChatProviderError` and its transport subclasses), if its message is one of
/// kosong's own image refusals.
pub fn is_image_format_error(error: &LoopError) -> bool {
    let Some(provider) = error.provider() else {
        return false;
    };
    match provider.kind {
        ProviderErrorKind::Status {
            class: StatusClass::ContextOverflow | StatusClass::RequestTooLarge,
            ..
        } => false,
        ProviderErrorKind::Status { status, .. } => {
            classify::is_image_format_status(status, &provider.message)
        }
        _ => classify::is_image_format_provider_message(&provider.message),
    }
}

/// kosong `isRecoverableRequestStructureError` (kimi-loop.md §4.7; patterns in `classify`): a
/// 400/422 status error, not an overflow, about the tool-exchange pairing or the message
/// array's structure.
pub fn is_recoverable_request_structure_error(error: &LoopError) -> bool {
    let Some(provider) = error.provider() else {
        return false;
    };
    match provider.kind {
        ProviderErrorKind::Status {
            class: StatusClass::ContextOverflow,
            ..
        } => false,
        ProviderErrorKind::Status { status, .. } => {
            classify::is_request_structure_status(status, &provider.message)
        }
        _ => false,
    }
}

#[derive(Default)]
struct ToolCallDraft {
    id: String,
    name: String,
    arguments: Option<String>,
}

enum Block {
    Text(String),
    Think(String),
}

/// Drains one provider stream.
#[derive(Default)]
struct StreamAssembly {
    blocks: IndexMap<(u8, u32), Block>,
    tool_calls: IndexMap<u32, ToolCallDraft>,
    usage: ProviderUsage,
    finish: Option<(FinishReason, String)>,
    message_id: Option<String>,
    first_token_ms: Option<u64>,
}

impl StreamAssembly {
    fn merge_usage(&mut self, usage: ProviderUsage) {
        let merge = |slot: &mut Option<u64>, value: Option<u64>| {
            if value.is_some() {
                *slot = value;
            }
        };
        merge(&mut self.usage.input_tokens, usage.input_tokens);
        merge(&mut self.usage.output_tokens, usage.output_tokens);
        merge(&mut self.usage.cache_read_tokens, usage.cache_read_tokens);
        merge(&mut self.usage.cache_write_tokens, usage.cache_write_tokens);
        merge(&mut self.usage.reasoning_tokens, usage.reasoning_tokens);
    }

    /// Append to the (kind, index) block, creating it on first sight.
    fn push_block(&mut self, key: (u8, u32), make: fn(String) -> Block, text: &str) {
        match self
            .blocks
            .entry(key)
            .or_insert_with(|| make(String::new()))
        {
            Block::Text(buffer) | Block::Think(buffer) => buffer.push_str(text),
        }
    }

    /// Apply one event; `Err` for an in-stream error, `Ok(true)` at `Done`.
    fn apply(
        &mut self,
        event: ProviderEvent,
        params: &ChatParams<'_>,
        now_ms: u64,
    ) -> Result<bool, LoopError> {
        let mut token = || {
            self.first_token_ms.get_or_insert(now_ms);
        };
        match event {
            ProviderEvent::MessageStart { id, .. } => self.message_id = id,
            ProviderEvent::TextDelta { index, text } => {
                token();
                params.sink.on_text_delta(&text);
                self.push_block((0, index), Block::Text, &text);
            }
            ProviderEvent::ThinkingDelta { index, text } => {
                token();
                params.sink.on_think_delta(&text);
                self.push_block((1, index), Block::Think, &text);
            }
            ProviderEvent::ToolCallStart { index, id, name } => {
                token();
                params.sink.on_tool_call_delta(ToolCallDeltaEvent {
                    tool_call_id: id.clone(),
                    name: Some(name.clone()),
                    arguments_part: None,
                });
                self.tool_calls.insert(
                    index,
                    ToolCallDraft {
                        id,
                        name,
                        arguments: None,
                    },
                );
            }
            ProviderEvent::ToolCallArgsDelta { index, delta } => {
                let draft = self.tool_calls.entry(index).or_default();
                params.sink.on_tool_call_delta(ToolCallDeltaEvent {
                    tool_call_id: draft.id.clone(),
                    name: None,
                    arguments_part: Some(delta.clone()),
                });
                draft
                    .arguments
                    .get_or_insert_with(String::new)
                    .push_str(&delta);
            }
            ProviderEvent::ToolCallEnd { .. } => {}
            ProviderEvent::Usage(usage) => self.merge_usage(usage),
            ProviderEvent::Stop { reason, raw } => {
                self.finish = Some((finish_reason(&reason), raw))
            }
            ProviderEvent::Error {
                error_type,
                message,
            } => {
                return Err(LoopError::Provider(stream_error(&error_type, message)));
            }
            ProviderEvent::Done => return Ok(true),
        }
        Ok(false)
    }

    fn is_empty(&self) -> bool {
        self.tool_calls.is_empty()
            && self.blocks.values().all(|block| match block {
                Block::Text(text) | Block::Think(text) => text.is_empty(),
            })
    }
}

/// An error event inside the stream. Choice: Anthropic `overloaded_error` is a 529, a
/// `rate_limit_error` a 429, `api_error` a 500; anything else is an unclassified (retryable)
/// provider error.
fn stream_error(error_type: &str, message: String) -> ProviderError {
    match error_type {
        "overloaded_error" => ProviderError::status(529, message),
        "rate_limit_error" => ProviderError::from_http(429, message, None),
        "api_error" => ProviderError::status(500, message),
        _ => ProviderError::new(ProviderErrorKind::Other, message),
    }
}

/// The production [`Llm`]: a [`ChatProvider`] stream assembled into a response, with kosong's
/// retry classifier.
pub struct StreamingLlm {
    provider: Arc<dyn ChatProvider>,
    clock: Arc<dyn Clock>,
    model_name: String,
    system_prompt: String,
}

impl StreamingLlm {
    /// An adapter over a provider.
    pub fn new(
        provider: Arc<dyn ChatProvider>,
        clock: Arc<dyn Clock>,
        model_name: impl Into<String>,
        system_prompt: impl Into<String>,
    ) -> Self {
        Self {
            provider,
            clock,
            model_name: model_name.into(),
            system_prompt: system_prompt.into(),
        }
    }

    async fn next_event(
        stream: &mut ProviderEventStream,
        signal: &AbortSignal,
    ) -> Result<Option<ProviderEvent>, LoopError> {
        tokio::select! {
            biased;
            reason = signal.cancelled() => Err(LoopError::Aborted(reason)),
            item = stream.next() => item.transpose().map_err(LoopError::Provider),
        }
    }

    async fn run(&self, params: ChatParams<'_>) -> Result<ChatResponse, LoopError> {
        let started_ms = self.clock.now_ms();
        params.signal.throw_if_aborted()?;
        let request = ChatRequest {
            model: self.model_name.clone(),
            system_prompt: self.system_prompt.clone(),
            messages: params.messages.clone(),
            tools: params.tools.clone(),
            request_log_fields: params.request_log_fields.clone(),
        };
        let mut stream = tokio::select! {
            biased;
            reason = params.signal.cancelled() => return Err(LoopError::Aborted(reason)),
            opened = self.provider.open(request) => opened?,
        };
        let mut assembly = StreamAssembly::default();
        // Choice: a stream that ends without `Done` counts as drained; one that ends with
        // nothing at all is `APIEmptyResponseError`.
        while let Some(event) = Self::next_event(&mut stream, params.signal).await? {
            if assembly.apply(event, &params, self.clock.now_ms())? {
                break;
            }
        }
        if assembly.is_empty() {
            return Err(LoopError::Provider(ProviderError::new(
                ProviderErrorKind::EmptyResponse,
                "The API returned an empty response",
            )));
        }
        let finished_ms = self.clock.now_ms();
        for block in std::mem::take(&mut assembly.blocks).into_values() {
            let part = match block {
                Block::Text(text) => ContentPart::text(text),
                Block::Think(think) => ContentPart::think(think),
            };
            params.sink.on_part(part).await?;
        }
        let (provider_finish_reason, raw_finish_reason) = match assembly.finish.take() {
            Some((reason, raw)) => (Some(reason), Some(raw)),
            None => (None, None),
        };
        Ok(ChatResponse {
            tool_calls: assembly
                .tool_calls
                .into_values()
                .map(|draft| ToolCall {
                    id: draft.id,
                    name: draft.name,
                    arguments: draft.arguments,
                    extras: None,
                })
                .collect(),
            provider_finish_reason,
            raw_finish_reason,
            message_id: assembly.message_id,
            usage: token_usage(&assembly.usage),
            stream_timing: Some(StreamTiming {
                first_token_latency_ms: assembly.first_token_ms.unwrap_or(finished_ms) - started_ms,
                stream_duration_ms: finished_ms - started_ms,
                ..StreamTiming::default()
            }),
            trace_id: None,
        })
    }
}

impl Llm for StreamingLlm {
    fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    fn model_name(&self) -> &str {
        &self.model_name
    }

    fn retry_classifier(&self) -> Option<RetryClassifier> {
        Some(is_retryable_generate_error)
    }

    fn chat<'a>(
        &'a self,
        params: ChatParams<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LoopError>> {
        Box::pin(self.run(params))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One message for each request-structure rejection kimi-loop.md §4.7 3 lists; the first
    /// three are the §7.13 strict cases 1–3 verbatim, the others the providers' wording.
    const STRUCTURE_MESSAGES: [&str; 9] = [
        "messages.142: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01",
        "400 tool_call_id  is not found",
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
        "messages: text content blocks must be non-empty",
        "messages: text content blocks must contain non-whitespace text",
        "messages: first message must use the \"user\" role",
        "messages: roles must alternate between \"user\" and \"assistant\"",
        "messages.3.content.1: `tool_use` ids must be unique",
        "message at position 2 with role 'assistant' must not be empty",
    ];

    fn status(code: u16, message: &str) -> LoopError {
        LoopError::Provider(ProviderError::from_http(code, message, None))
    }

    #[test]
    fn each_request_structure_pattern_alone_is_recoverable_on_400_and_422() {
        for message in STRUCTURE_MESSAGES {
            for code in [400, 422] {
                assert!(
                    is_recoverable_request_structure_error(&status(code, message)),
                    "{code} {message}"
                );
            }
        }
    }

    #[test]
    fn other_rejections_are_not_request_structure_errors() {
        // kimi-loop.md §7.13 strict case 4: a plain 400 is rethrown.
        assert!(!is_recoverable_request_structure_error(&status(
            400,
            "Bad request"
        )));
        // Only 400/422 qualify, whatever the message.
        for code in [401, 403, 404, 413, 429, 500, 529] {
            assert!(
                !is_recoverable_request_structure_error(&status(code, STRUCTURE_MESSAGES[0])),
                "{code}"
            );
        }
        assert!(!is_recoverable_request_structure_error(&LoopError::plain(
            STRUCTURE_MESSAGES[0]
        )));
        // Half a pattern is not the pattern.
        for message in ["`tool_use` block", "tool_call_id bad", "first message"] {
            assert!(
                !is_recoverable_request_structure_error(&status(400, message)),
                "{message}"
            );
        }
    }

    #[test]
    fn image_format_errors_are_400s_about_an_image() {
        assert!(is_image_format_error(&status(
            400,
            "unsupported image format"
        )));
        assert!(!is_image_format_error(&status(
            413,
            "unsupported image format"
        )));
        assert!(!is_image_format_error(&status(400, "unsupported format")));
    }
}
