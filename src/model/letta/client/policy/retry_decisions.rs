//! The decision functions of letta-protocol.md §3.7: whether a pre-stream error, a run's error
//! metadata or a stop reason is retried, and the empty-response and approval-recovery checks.

use serde_json::Value;

use super::classifiers::is_empty_response_error;
use super::provider_errors::{
    NON_RETRYABLE_RUN_ERROR_TYPES, is_non_retryable_provider_detail, is_quota_limit_detail,
    is_retryable_provider_detail, matches_retryable_429,
};
use crate::wire::letta::StopReason;

/// `shouldRetryPreStreamTransientError({status, detail})` (letta-protocol.md §3.7).
pub fn should_retry_pre_stream_transient_error(status: Option<u16>, detail: &str) -> bool {
    if is_quota_limit_detail(detail) {
        return false;
    }
    match status {
        Some(429) => true,
        Some(s) if s >= 500 => true,
        Some(s) if s >= 400 => false,
        _ => {
            if matches_retryable_429(detail) {
                true
            } else if is_non_retryable_provider_detail(detail) {
                false
            } else {
                is_retryable_provider_detail(detail)
            }
        }
    }
}

/// `shouldRetryRunMetadataError(errorType, detail)` (letta-protocol.md §3.7).
pub fn should_retry_run_metadata_error(error_type: Option<&str>, detail: &str) -> bool {
    if error_type.is_some_and(|t| NON_RETRYABLE_RUN_ERROR_TYPES.contains(&t)) {
        return false;
    }
    if is_quota_limit_detail(detail) {
        return false;
    }
    if is_non_retryable_provider_detail(detail) && !matches_retryable_429(detail) {
        return false;
    }
    if error_type == Some("llm_error") {
        return true;
    }
    matches_retryable_429(detail) || is_retryable_provider_detail(detail)
}

/// The error metadata of a run (`metadata.error`, or the nested `metadata.error.error`;
/// letta-protocol.md §3.7 `isRetriableError`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunErrorMeta {
    pub error_type: Option<String>,
    pub detail: Option<String>,
    pub retryable: Option<bool>,
}

impl RunErrorMeta {
    /// Reads `metadata.error.{error_type, detail, retryable}`, falling back one level to
    /// `metadata.error.error.{…}` (letta-protocol.md §3.7, A.4.1); `detail` falls back to
    /// `message` (§3.10 step 1).
    pub fn from_run(run: &Value) -> Option<RunErrorMeta> {
        let e = run.pointer("/metadata/error")?;
        if e.is_null() {
            return None;
        }
        let read = |v: &Value| RunErrorMeta {
            error_type: v
                .get("error_type")
                .and_then(Value::as_str)
                .map(str::to_string),
            detail: v
                .get("detail")
                .and_then(Value::as_str)
                .or_else(|| v.get("message").and_then(Value::as_str))
                .map(str::to_string),
            retryable: v.get("retryable").and_then(Value::as_bool),
        };
        let top = read(e);
        let nested = e.get("error").filter(|n| n.is_object()).map(read);
        Some(match nested {
            Some(n) => RunErrorMeta {
                error_type: top.error_type.or(n.error_type),
                detail: top.detail.or(n.detail),
                retryable: top.retryable.or(n.retryable),
            },
            None => top,
        })
    }
}

/// `shouldRetryPostStreamRunError({stopReason, errorType, detail, retryable})`
/// (letta-protocol.md §3.7).
pub fn should_retry_post_stream_run_error(
    stop_reason: &StopReason,
    error_type: Option<&str>,
    detail: &str,
    retryable: Option<bool>,
) -> bool {
    match retryable {
        Some(false) => return false,
        Some(true) => return true,
        None => {}
    }
    if should_retry_run_metadata_error(error_type, detail) {
        return true;
    }
    if *stop_reason != StopReason::LlmApiError {
        return false;
    }
    if error_type.is_some_and(|t| NON_RETRYABLE_RUN_ERROR_TYPES.contains(&t))
        || is_quota_limit_detail(detail)
        || is_non_retryable_provider_detail(detail)
    {
        return false;
    }
    true
}

/// Stop reasons the client never retries (letta-protocol.md §1.5, `src/cli/app/retry.ts`).
pub const NON_RETRIABLE_STOP_REASONS: [&str; 8] = [
    "cancelled",
    "requires_approval",
    "max_steps",
    "max_tokens_exceeded",
    "context_window_overflow_in_system_prompt",
    "end_turn",
    "tool_rule",
    "no_tool_call",
];

pub fn is_non_retriable_stop(stop: &StopReason) -> bool {
    NON_RETRIABLE_STOP_REASONS.contains(&stop.as_str())
}

/// The pure half of `isRetriableError(stopReason, runId, fallbackDetail)` (letta-protocol.md
/// §3.7): `meta` is what `GET /v1/runs/{id}` returned (`None` when there was no run id or the
/// lookup failed; then `fallback_detail` is used).
pub fn is_retriable_error(
    stop: &StopReason,
    meta: Option<&RunErrorMeta>,
    fallback_detail: &str,
) -> bool {
    if is_non_retriable_stop(stop) {
        return false;
    }
    match meta {
        Some(m) => should_retry_post_stream_run_error(
            stop,
            m.error_type.as_deref(),
            m.detail.as_deref().unwrap_or(fallback_detail),
            m.retryable,
        ),
        None => should_retry_post_stream_run_error(stop, None, fallback_detail, None),
    }
}

/// `isEmptyResponseRetryable(errorType, detail, retries, max)` (letta-protocol.md §3.7).
pub fn is_empty_response_retryable(
    error_type: Option<&str>,
    detail: &str,
    retries: u32,
    max: u32,
) -> bool {
    retries < max
        && error_type == Some("llm_error")
        && is_empty_response_error(&Value::String(detail.to_string()))
}

/// `shouldAttemptApprovalRecovery({approvalPendingDetected, retries, maxRetries})` (A.3.1).
pub fn should_attempt_approval_recovery(detected: bool, retries: u32, max_retries: u32) -> bool {
    detected && retries < max_retries
}
