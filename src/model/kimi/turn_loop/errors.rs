//! Errors that cross the loop (kimi-loop.md §2.8, §6). JavaScript throws arbitrary values; the
//! loop only ever distinguishes abort-shaped errors, provider errors (for retry and the
//! projection fallbacks), `KimiError` codes and everything else, so those are the variants.

use std::fmt;

use serde_json::{Value, json};

use super::classify;

/// Message of a user cancellation (`utils/abort.ts` `UserCancellationError`).
pub const USER_CANCELLATION_MESSAGE: &str = "Aborted by the user";

/// Message of an abort without a reason. Choice (the facts are silent on the DOM default):
/// the DOMException text, `This operation was aborted`.
pub const DEFAULT_ABORT_MESSAGE: &str = "This operation was aborted";

/// `KimiError.code` of the max-steps error (kimi-loop.md §2.8).
pub const MAX_STEPS_EXCEEDED_CODE: &str = "loop.max_steps_exceeded";

/// An abort-shaped error (`name == "AbortError"`). `user_cancelled` marks a
/// `UserCancellationError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortError {
    /// The error message.
    pub message: String,
    /// True for a deliberate user cancellation.
    pub user_cancelled: bool,
}

impl AbortError {
    /// An abort with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            user_cancelled: false,
        }
    }

    /// The default abort reason.
    pub fn default_reason() -> Self {
        Self::new(DEFAULT_ABORT_MESSAGE)
    }

    /// `userCancellationReason()`: `Aborted by the user`, flagged as user-cancelled.
    pub fn user_cancellation() -> Self {
        Self {
            message: USER_CANCELLATION_MESSAGE.to_owned(),
            user_cancelled: true,
        }
    }
}

/// A `KimiError`: a coded error with structured details.
#[derive(Debug, Clone, PartialEq)]
pub struct KimiError {
    /// Stable code, e.g. `loop.max_steps_exceeded`.
    pub code: String,
    /// Human-readable message.
    pub message: String,
    /// Structured details.
    pub details: Value,
}

/// The HTTP-status subclass of an `APIStatusError` (kosong `errors.ts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    /// A plain `APIStatusError`.
    Plain,
    /// `APIProviderRateLimitError` (a 429 that is not about quota).
    RateLimit,
    /// `APIProviderQuotaExhaustedError` (a 429 about quota or balance): never retried.
    QuotaExhausted,
    /// `APIRequestTooLargeError` (413 body size): triggers the media fallbacks.
    RequestTooLarge,
    /// `APIContextOverflowError`: the host compacts and reruns the turn.
    ContextOverflow,
}

/// What kind of provider failure this is (kosong error classes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderErrorKind {
    /// `APIConnectionError` (including a mid-stream `terminated` drop).
    Connection,
    /// `APITimeoutError`.
    Timeout,
    /// `APIEmptyResponseError`.
    EmptyResponse,
    /// `APIStatusError` and subclasses.
    Status {
        /// The HTTP status.
        status: u16,
        /// The subclass.
        class: StatusClass,
    },
    /// Any other, unclassified `ChatProviderError`.
    Other,
}

/// A provider failure, with what `chatWithRetry` needs: status, `Retry-After`, trace id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    /// The class.
    pub kind: ProviderErrorKind,
    /// The message.
    pub message: String,
    /// The server `Retry-After`, in milliseconds.
    pub retry_after_ms: Option<u64>,
    /// The provider trace id of the failed request.
    pub trace_id: Option<String>,
}

impl ProviderError {
    /// An error of the given kind.
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after_ms: None,
            trace_id: None,
        }
    }

    /// `APIConnectionError`.
    pub fn connection(message: impl Into<String>) -> Self {
        Self::new(ProviderErrorKind::Connection, message)
    }

    /// A plain `APIStatusError`.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        Self::new(
            ProviderErrorKind::Status {
                status,
                class: StatusClass::Plain,
            },
            message,
        )
    }

    /// A status error of a given subclass.
    pub fn status_class(status: u16, class: StatusClass, message: impl Into<String>) -> Self {
        Self::new(ProviderErrorKind::Status { status, class }, message)
    }

    /// Classify an HTTP failure the way the provider adapter does: kosong's
    /// `normalizeAPIStatusError` (see `classify`). A 429 is a rate limit, or, a choice (kosong
    /// reads each provider's own error codes, which the fake provider does not send), quota
    /// exhaustion when its message mentions quota, balance, billing or credit; then a context
    /// overflow (400, 413 or 422 worded so, checked first because Vertex says it with a 413),
    /// then a body-size 413; anything else is a plain status error, whose message gains the
    /// thinking-effort hint when it refuses the effort.
    pub fn from_http(status: u16, message: impl Into<String>, retry_after_ms: Option<u64>) -> Self {
        let message = message.into();
        let lower = message.to_lowercase();
        let (class, message) = if status == 429 {
            let quota = ["quota", "balance", "billing", "credit"]
                .iter()
                .any(|word| lower.contains(word));
            let class = if quota {
                StatusClass::QuotaExhausted
            } else {
                StatusClass::RateLimit
            };
            (class, message)
        } else if classify::is_context_overflow_status(status, &message) {
            (StatusClass::ContextOverflow, message)
        } else if classify::is_request_too_large_status(status, &message) {
            (StatusClass::RequestTooLarge, message)
        } else {
            (
                StatusClass::Plain,
                classify::with_thinking_effort_hint(status, message),
            )
        };
        let mut error = Self::status_class(status, class, message);
        error.retry_after_ms = retry_after_ms;
        error
    }

    /// With a `Retry-After` in milliseconds.
    pub fn with_retry_after_ms(mut self, retry_after_ms: u64) -> Self {
        self.retry_after_ms = Some(retry_after_ms);
        self
    }

    /// With a trace id.
    pub fn with_trace_id(mut self, trace_id: impl Into<String>) -> Self {
        self.trace_id = Some(trace_id.into());
        self
    }

    /// The JS class name (`error.name`).
    pub fn name(&self) -> &'static str {
        match self.kind {
            ProviderErrorKind::Connection => "APIConnectionError",
            ProviderErrorKind::Timeout => "APITimeoutError",
            ProviderErrorKind::EmptyResponse => "APIEmptyResponseError",
            ProviderErrorKind::Status { class, .. } => match class {
                StatusClass::Plain => "APIStatusError",
                StatusClass::RateLimit => "APIProviderRateLimitError",
                StatusClass::QuotaExhausted => "APIProviderQuotaExhaustedError",
                StatusClass::RequestTooLarge => "APIRequestTooLargeError",
                StatusClass::ContextOverflow => "APIContextOverflowError",
            },
            ProviderErrorKind::Other => "ChatProviderError",
        }
    }

    /// The HTTP status, for status errors.
    pub fn status_code(&self) -> Option<u16> {
        match self.kind {
            ProviderErrorKind::Status { status, .. } => Some(status),
            _ => None,
        }
    }
}

/// Everything the loop can fail with. A Rust port cannot compare error identity, so the
/// "rethrows the same object" cases compare by value.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopError {
    /// An abort-shaped error.
    Aborted(AbortError),
    /// A provider failure.
    Provider(ProviderError),
    /// A coded `KimiError`.
    Kimi(KimiError),
    /// Any other error, with its JS class name (`Error`, `PathSecurityError`, ...).
    Other {
        /// The class name.
        name: String,
        /// The message.
        message: String,
    },
}

impl LoopError {
    /// A plain `Error(message)`.
    pub fn plain(message: impl Into<String>) -> Self {
        Self::Other {
            name: "Error".to_owned(),
            message: message.into(),
        }
    }

    /// An error with a class name.
    pub fn named(name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Other {
            name: name.into(),
            message: message.into(),
        }
    }

    /// The max-steps `KimiError` (kimi-loop.md §2.8), message verbatim.
    pub fn max_steps(max_steps: u32) -> Self {
        Self::Kimi(KimiError {
            code: MAX_STEPS_EXCEEDED_CODE.to_owned(),
            message: format!(
                "Turn exceeded maxSteps={max_steps}. If max_steps_per_turn is too small, raise it \
                 in config.toml (loop_control.max_steps_per_turn), or run \"/update-config\" to \
                 update it, then \"/reload\"."
            ),
            details: json!({ "maxSteps": max_steps }),
        })
    }

    /// `error.name`.
    pub fn name(&self) -> &str {
        match self {
            Self::Aborted(_) => "AbortError",
            Self::Provider(error) => error.name(),
            Self::Kimi(_) => "KimiError",
            Self::Other { name, .. } => name,
        }
    }

    /// `errorMessage(e)`.
    pub fn message(&self) -> &str {
        match self {
            Self::Aborted(error) => &error.message,
            Self::Provider(error) => &error.message,
            Self::Kimi(error) => &error.message,
            Self::Other { message, .. } => message,
        }
    }

    /// `isAbortError(e)`.
    pub fn is_abort(&self) -> bool {
        matches!(self, Self::Aborted(_))
    }

    /// `isUserCancellation(e)`.
    pub fn is_user_cancellation(&self) -> bool {
        matches!(
            self,
            Self::Aborted(AbortError {
                user_cancelled: true,
                ..
            })
        )
    }

    /// The numeric `statusCode`, if any.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::Provider(error) => error.status_code(),
            _ => None,
        }
    }

    /// The provider error, if this is one.
    pub fn provider(&self) -> Option<&ProviderError> {
        match self {
            Self::Provider(error) => Some(error),
            _ => None,
        }
    }

    /// The `KimiError` code, if any.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Kimi(error) => Some(&error.code),
            _ => None,
        }
    }
}

impl fmt::Display for LoopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name(), self.message())
    }
}

impl std::error::Error for LoopError {}

impl From<AbortError> for LoopError {
    fn from(error: AbortError) -> Self {
        Self::Aborted(error)
    }
}

impl From<ProviderError> for LoopError {
    fn from(error: ProviderError) -> Self {
        Self::Provider(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(status: u16, message: &str) -> (StatusClass, &'static str) {
        let error = ProviderError::from_http(status, message, Some(42));
        assert_eq!(error.retry_after_ms, Some(42));
        assert_eq!(error.status_code(), Some(status));
        match error.kind {
            ProviderErrorKind::Status { class, .. } => (class, error.name()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_413_is_request_too_large_unless_it_is_about_the_context() {
        // kimi-loop.md §4.7 1 and §7.13 media harness: the 413 body-size rejection.
        assert_eq!(
            class(413, "Request exceeds the maximum size"),
            (StatusClass::RequestTooLarge, "APIRequestTooLargeError")
        );
        assert_eq!(
            class(413, "prompt exceeds the maximum context length").0,
            StatusClass::ContextOverflow
        );
        assert_eq!(
            class(400, "This model's maximum context length is 200000 tokens").0,
            StatusClass::ContextOverflow
        );
    }

    /// Each of kosong's overflow wordings is enough on its own, on a 400, 413 or 422; a 413
    /// worded neither as an overflow nor as a body too big stays a plain status error.
    #[test]
    fn each_context_overflow_wording_alone_is_an_overflow() {
        for message in [
            "input exceeds the context length",
            "the prompt exceeds the context window",
            "error code: context_length_exceeded",
            "reduce the prompt to fit the maximum context",
            "input exceeded the max tokens",
            "too many tokens in the input",
            "prompt is too long: 210000 tokens > 200000 maximum",
            "input token count exceeds the maximum number of tokens",
            "request exceeded model token limit",
        ] {
            for status in [400, 413, 422] {
                assert_eq!(
                    class(status, message).0,
                    StatusClass::ContextOverflow,
                    "{status} {message}"
                );
            }
        }
        assert_eq!(class(400, "the context is fine").0, StatusClass::Plain);
        assert_eq!(
            class(400, "prompt is too long for the context window").0,
            StatusClass::Plain
        );
        assert_eq!(class(413, "Bad request").0, StatusClass::Plain);
    }

    #[test]
    fn a_429_is_a_rate_limit_unless_it_is_about_quota() {
        assert_eq!(
            class(
                429,
                "Number of request tokens has exceeded your per-minute rate limit"
            ),
            (StatusClass::RateLimit, "APIProviderRateLimitError")
        );
        for message in [
            "You exceeded your current quota",
            "insufficient balance",
            "check your billing details",
            "out of credit",
        ] {
            assert_eq!(
                class(429, message),
                (
                    StatusClass::QuotaExhausted,
                    "APIProviderQuotaExhaustedError"
                ),
                "{message}"
            );
        }
    }

    #[test]
    fn every_other_status_is_a_plain_status_error() {
        for status in [400, 401, 403, 404, 408, 409, 422, 500, 502, 503, 504, 529] {
            assert_eq!(
                class(status, "Request exceeds the maximum size"),
                (StatusClass::Plain, "APIStatusError"),
                "{status}"
            );
        }
    }
}
