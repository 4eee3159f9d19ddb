//! §A.3.4 (503 shutting down) and §A.4 (`isRetriableError` and the listener twin).

use super::*;

fn shutdown(admitted: bool, retryable: bool, code: &str) -> Value {
    api_error(
        503,
        &json!({"error": "Service temporarily unavailable. Please retry your request.",
                "errorCode": code, "admitted": admitted, "retryable": retryable})
        .to_string(),
        &[("Retry-After".into(), "2".into())],
    )
}

#[test]
fn a34_cloud_shutdown_rule() {
    assert!(is_cloud_shutdown_retryable(&shutdown(
        false,
        true,
        "cloud_api_shutting_down"
    )));
    assert!(!is_cloud_shutdown_retryable(&shutdown(
        true,
        true,
        "cloud_api_shutting_down"
    )));
    assert!(!is_cloud_shutdown_retryable(&shutdown(
        false,
        false,
        "cloud_api_shutting_down"
    )));
    assert!(!is_cloud_shutdown_retryable(&shutdown(
        false,
        true,
        "service_unavailable"
    )));
    let mut other = shutdown(false, true, "cloud_api_shutting_down");
    other["status"] = json!(502);
    assert!(!is_cloud_shutdown_retryable(&other));
    assert_eq!(
        error_header(&shutdown(false, true, "x"), "retry-after"),
        Some("2")
    );
    assert_eq!(CLOUD_API_SHUTDOWN_MAX_RETRIES + 1, 4, "4 attempts in total");
}

// ---- A.4 isRetriableError and the listener twin ------------------------------------------------

fn run_with(meta: Value) -> Value {
    json!({"id": "run-1", "status": "failed", "metadata": {"error": meta}})
}

#[test]
fn a41_is_retriable_error() {
    let m = RunErrorMeta::from_run(&run_with(
        json!({"error_type": "llm_error", "detail": "HTTP 503: provider overloaded", "retryable": true}),
    ));
    assert!(is_retriable_error(&StopReason::Error, m.as_ref(), ""));
    let m = RunErrorMeta::from_run(&run_with(
        json!({"error_type": "llm_error", "detail": "Authentication error", "retryable": false}),
    ));
    assert!(!is_retriable_error(&StopReason::Error, m.as_ref(), ""));
    let m = RunErrorMeta::from_run(&run_with(
        json!({"error_type": "llm_authentication", "detail": "Z.ai API error (401): Authentication Failed", "retryable": false}),
    ));
    assert!(!is_retriable_error(
        &StopReason::LlmApiError,
        m.as_ref(),
        ""
    ));
    // The non-retriable stop list short-circuits.
    for stop in [
        "cancelled",
        "requires_approval",
        "max_steps",
        "max_tokens_exceeded",
        "context_window_overflow_in_system_prompt",
        "end_turn",
        "tool_rule",
        "no_tool_call",
    ] {
        let st: StopReason = serde_json::from_value(json!(stop)).unwrap();
        assert!(!is_retriable_error(&st, None, "Connection error"), "{stop}");
    }
    // Nested metadata.error.error is read.
    let m = RunErrorMeta::from_run(&run_with(
        json!({"error": {"error_type": "llm_error", "detail": "x", "retryable": true}}),
    ))
    .unwrap();
    assert_eq!(m.retryable, Some(true));
    assert_eq!(m.error_type.as_deref(), Some("llm_error"));
    // Lookup failure: the fallback detail decides.
    assert!(is_retriable_error(
        &StopReason::Error,
        None,
        "Connection error during streaming"
    ));
}

#[test]
fn a42_listener_twin() {
    assert!(is_retriable_error(
        &StopReason::Error,
        None,
        CF_521_FORMATTED
    ));
    let m = RunErrorMeta::from_run(&run_with(
        json!({"error_type": "internal_error", "detail": "Authentication error", "retryable": true}),
    ));
    assert!(is_retriable_error(&StopReason::Error, m.as_ref(), ""));
    let m = RunErrorMeta::from_run(&run_with(
        json!({"error_type": "llm_error", "detail": "HTTP 503 provider overloaded", "retryable": false}),
    ));
    assert!(!is_retriable_error(&StopReason::Error, m.as_ref(), ""));
    let m = RunErrorMeta::from_run(&run_with(
        json!({"error_type": "llm_authentication", "detail": "x", "retryable": false}),
    ));
    assert!(!is_retriable_error(
        &StopReason::LlmApiError,
        m.as_ref(),
        ""
    ));
}
