//! `chatWithRetry` (kimi-loop.md §6): attempts, exponential backoff with seeded jitter, server
//! `Retry-After`, and the one live event it emits, `step.retrying`.

use serde_json::{Map, Value, json};

use super::abort::AbortSignal;
use super::bugs::LoopBugs;
use super::clock::{Clock, LoopPrng};
use super::errors::LoopError;
use super::events::{EventDispatch, LoopLiveOnlyEvent, StepRetryingEvent};
use super::llm::{ChatParams, ChatResponse, ChatStreamSink, Llm, RequestLogFields, RequestTrace};
use super::log::{LogLevel, LoopLog};
use super::types::{Message, ToolSpec};

/// kimi-loop.md §6: `DEFAULT_MAX_RETRY_ATTEMPTS` (raised from 3 in #1740).
pub const DEFAULT_MAX_RETRY_ATTEMPTS: u32 = 10;
/// kimi-loop.md §6: `BASE_DELAY_MS`.
pub const BASE_DELAY_MS: u64 = 500;
/// kimi-loop.md §6: `RETRY_FACTOR`.
pub const RETRY_FACTOR: u64 = 2;
/// kimi-loop.md §6: `MAX_DELAY_MS`.
pub const MAX_DELAY_MS: u64 = 32_000;
/// kimi-loop.md §6: `JITTER_FACTOR`.
pub const JITTER_FACTOR: f64 = 0.25;

/// `retryBackoffDelays(maxAttempts)`: `max(maxAttempts − 1, 0)` delays, where delay `i` is
/// `base + U[0,1)·0.25·base` and `base = min(500·2^i, 32000)`.
///
/// Choice (JavaScript keeps fractional milliseconds): the jittered delay is floored to whole
/// milliseconds; `U[0,1)` is drawn from the seeded PRNG instead of `Math.random`.
pub fn retry_backoff_delays(max_attempts: u32, prng: &LoopPrng) -> Vec<u64> {
    (0..max_attempts.saturating_sub(1))
        .map(|index| {
            let exponential = RETRY_FACTOR
                .saturating_pow(index)
                .saturating_mul(BASE_DELAY_MS);
            let base = exponential.min(MAX_DELAY_MS);
            let jitter = prng.unit_f64() * JITTER_FACTOR * base as f64;
            base + jitter.floor() as u64
        })
        .collect()
}

/// Everything one `chatWithRetry` call needs.
pub struct ChatWithRetryInput<'a> {
    /// The model.
    pub llm: &'a dyn Llm,
    /// The messages (cloned into each attempt).
    pub messages: Vec<Message>,
    /// The tool table.
    pub tools: Vec<ToolSpec>,
    /// The turn's signal.
    pub signal: &'a AbortSignal,
    /// Streaming callbacks.
    pub sink: &'a dyn ChatStreamSink,
    /// The caller's log fields (kept on every attempt, including `projection`).
    pub request_log_fields: RequestLogFields,
    /// The step's trace state.
    pub trace: &'a RequestTrace,
    /// The turn id.
    pub turn_id: &'a str,
    /// The step number.
    pub step: u32,
    /// The step uuid.
    pub step_uuid: &'a str,
    /// `maxAttempts`; `None` means [`DEFAULT_MAX_RETRY_ATTEMPTS`].
    pub max_attempts: Option<u32>,
    /// Where `step.retrying` goes.
    pub dispatcher: &'a dyn EventDispatch,
    /// Sleeps between attempts.
    pub clock: &'a dyn Clock,
    /// Jitter.
    pub prng: &'a LoopPrng,
    /// Logs.
    pub log: &'a dyn LoopLog,
    /// Planted defects (oracle tests only; `Default` is the faithful loop).
    pub bugs: LoopBugs,
}

impl ChatWithRetryInput<'_> {
    fn params(&self, request_log_fields: RequestLogFields) -> ChatParams<'_> {
        ChatParams {
            messages: self.messages.clone(),
            tools: self.tools.clone(),
            signal: self.signal,
            request_log_fields,
            sink: self.sink,
            trace: self.trace,
        }
    }

    fn turn_step(&self) -> String {
        format!("{}.{}", self.turn_id, self.step)
    }

    fn log_failure(&self, error: &LoopError, attempt: &str) {
        if error.is_abort() || self.signal.aborted() {
            return;
        }
        let mut payload = Map::new();
        payload.insert("turnStep".to_owned(), json!(self.turn_step()));
        payload.insert("attempt".to_owned(), json!(attempt));
        payload.insert("model".to_owned(), json!(self.llm.model_name()));
        payload.insert("errorName".to_owned(), json!(error.name()));
        payload.insert("errorMessage".to_owned(), json!(error.message()));
        if let Some(status) = error.status_code() {
            payload.insert("statusCode".to_owned(), json!(status));
        }
        self.log
            .log(LogLevel::Warn, "llm request failed", Value::Object(payload));
    }
}

fn capture_error_trace(trace: &RequestTrace, error: &LoopError) {
    if let Some(trace_id) = error
        .provider()
        .and_then(|provider| provider.trace_id.as_deref())
    {
        trace.capture(Some(trace_id));
    }
}

/// `chatWithRetry` (kimi-loop.md §6). Returns the original error when attempts run out or the
/// error is not retryable; an abort before a retry becomes the abort reason.
pub async fn chat_with_retry(input: ChatWithRetryInput<'_>) -> Result<ChatResponse, LoopError> {
    let max_attempts = input
        .max_attempts
        .unwrap_or(if input.bugs.retry_default_of_three {
            3
        } else {
            DEFAULT_MAX_RETRY_ATTEMPTS
        });
    let classifier = match input.llm.retry_classifier() {
        Some(classifier) if max_attempts > 1 => classifier,
        _ => return chat_once(&input, max_attempts).await,
    };
    let delays = retry_backoff_delays(max_attempts, input.prng);
    let mut attempt: u32 = 1;
    loop {
        input.trace.reset();
        let mut fields = input.request_log_fields.clone();
        fields.turn_step = Some(input.turn_step());
        if attempt >= 2 {
            fields.attempt = Some(format!("{attempt}/{max_attempts}"));
        }
        let error = match input.llm.chat(input.params(fields)).await {
            Ok(response) => {
                input.trace.capture(response.trace_id.as_deref());
                return Ok(response);
            }
            Err(error) => error,
        };
        capture_error_trace(input.trace, &error);
        if attempt >= max_attempts || !classifier(&error) {
            input.log_failure(&error, &format!("{attempt}/{max_attempts}"));
            return Err(error);
        }
        let delay_ms = error
            .provider()
            .and_then(|provider| provider.retry_after_ms)
            .filter(|_| !input.bugs.retry_ignores_retry_after)
            .filter(|&ms| ms > 0)
            .or_else(|| delays.get(attempt as usize - 1).copied())
            .unwrap_or(0);
        input.signal.throw_if_aborted()?;
        input
            .dispatcher
            .publish(LoopLiveOnlyEvent::StepRetrying(StepRetryingEvent {
                turn_id: input.turn_id.to_owned(),
                step: input.step,
                step_uuid: input.step_uuid.to_owned(),
                failed_attempt: attempt,
                next_attempt: attempt + 1,
                max_attempts,
                delay_ms,
                error_name: error.name().to_owned(),
                error_message: error.message().to_owned(),
                status_code: error.status_code(),
            }));
        abortable_sleep(input.clock, input.signal, delay_ms).await?;
        attempt += 1;
    }
}

/// The single-attempt path: no classifier, or `maxAttempts <= 1`.
///
/// Choice (the facts only describe the retry path's fields): the caller's log fields are
/// passed unchanged here, without `turnStep`.
async fn chat_once(
    input: &ChatWithRetryInput<'_>,
    max_attempts: u32,
) -> Result<ChatResponse, LoopError> {
    input.trace.reset();
    match input
        .llm
        .chat(input.params(input.request_log_fields.clone()))
        .await
    {
        Ok(response) => {
            input.trace.capture(response.trace_id.as_deref());
            Ok(response)
        }
        Err(error) => {
            capture_error_trace(input.trace, &error);
            input.log_failure(&error, &format!("1/{}", max_attempts.max(1)));
            Err(error)
        }
    }
}

/// An abortable sleep: on abort it fails with the signal's reason.
pub async fn abortable_sleep(
    clock: &dyn Clock,
    signal: &AbortSignal,
    delay_ms: u64,
) -> Result<(), LoopError> {
    tokio::select! {
        biased;
        reason = signal.cancelled() => Err(LoopError::Aborted(reason)),
        () = clock.sleep(delay_ms) => Ok(()),
    }
}
