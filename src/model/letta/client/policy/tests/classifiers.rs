//! §A.3.1-A.3.2: the classifiers, `extractConflictDetail`, the pre-stream action, the retry
//! decisions and delays, the approval-recovery and empty-response checks.

use super::*;

#[test]
fn a31_is_approval_pending_error() {
    assert!(is_approval_pending_error(&s(APPROVAL_CONFLICT_SHORT)));
    assert!(is_approval_pending_error(&s(APPROVAL_CONFLICT)));
    assert!(is_approval_pending_error(&s("WAITING FOR APPROVAL")));
    assert!(!is_approval_pending_error(&s(BUSY)));
    assert!(!is_approval_pending_error(&json!(42)));
    assert!(!is_approval_pending_error(&Value::Null));
    // A.3.2: objects are not strings.
    assert!(!is_approval_pending_error(
        &json!({"detail": APPROVAL_CONFLICT})
    ));
}

#[test]
fn a31_is_conversation_busy_error() {
    assert!(is_conversation_busy_error(&s(
        "Another request is currently being processed for this conversation."
    )));
    assert!(is_conversation_busy_error(&s(BUSY_WITH_RUN)));
    assert!(is_conversation_busy_error(&s(
        "Conversation conv-123 is busy with another active run."
    )));
    assert!(!is_conversation_busy_error(&s(
        "The agent is waiting for approval"
    )));
    assert!(!is_conversation_busy_error(&json!(1)));
}

#[test]
fn a31_extract_conversation_busy_run_id() {
    assert_eq!(
        extract_conversation_busy_run_id(
            "CONFLICT: Another request (run_id=run-46b3f831-aaaa-bbbb) is currently being processed"
        )
        .as_deref(),
        Some("run-46b3f831-aaaa-bbbb")
    );
    assert_eq!(
        extract_conversation_busy_run_id(BUSY_WITH_RUN).as_deref(),
        Some("run-abc-123")
    );
    assert_eq!(
        extract_conversation_busy_run_id("run_id=run-abc but no busy text"),
        None
    );
    // `\b`: "xrun_id=" is not a match.
    assert_eq!(
        extract_conversation_busy_run_id("xrun_id=r1 is currently being processed"),
        None
    );
}

#[test]
fn a31_is_invalid_tool_call_ids_error() {
    assert!(is_invalid_tool_call_ids_error(&s(
        "Invalid tool call IDs: Expected ['tc_abc'], got ['tc_xyz']"
    )));
    assert!(!is_invalid_tool_call_ids_error(&s("Connection refused")));
}

#[test]
fn a31_classify_pre_stream_conflict() {
    assert_eq!(
        classify_pre_stream_conflict("waiting for approval on a tool call"),
        Some(PreStreamConflict::ApprovalPending)
    );
    assert_eq!(
        classify_pre_stream_conflict("another request is currently being processed"),
        Some(PreStreamConflict::ConversationBusy)
    );
    assert_eq!(
        classify_pre_stream_conflict("Conversation is busy with another active run."),
        Some(PreStreamConflict::ConversationBusy)
    );
    assert_eq!(classify_pre_stream_conflict("Connection refused"), None);
}

#[test]
fn a31_get_pre_stream_error_action() {
    use PreStreamAction::*;
    assert_eq!(
        get_pre_stream_error_action(APPROVAL_CONFLICT, 0, 3, None),
        ResolveApprovalPending
    );
    // Regardless of counters.
    assert_eq!(
        get_pre_stream_error_action(APPROVAL_CONFLICT, 3, 3, None),
        ResolveApprovalPending
    );
    assert_eq!(
        get_pre_stream_error_action(BUSY, 0, 3, None),
        RetryConversationBusy
    );
    assert_eq!(get_pre_stream_error_action(BUSY, 3, 3, None), Rethrow);
    assert_eq!(
        get_pre_stream_error_action("something else", 0, 3, None),
        Rethrow
    );
    let opts = |status, n| {
        Some(TransientOptions {
            status,
            transient_retries: n,
            max_transient_retries: 3,
        })
    };
    assert_eq!(
        get_pre_stream_error_action(
            "ChatGPT server error: upstream connect error",
            0,
            3,
            opts(Some(502), 0)
        ),
        RetryTransient
    );
    assert_eq!(
        get_pre_stream_error_action("Connection error during streaming", 0, 3, opts(None, 3)),
        Rethrow
    );
    // Deterministic: same inputs, same output.
    let a = get_pre_stream_error_action(BUSY, 1, 3, opts(Some(409), 0));
    let b = get_pre_stream_error_action(BUSY, 1, 3, opts(Some(409), 0));
    assert_eq!(a, b);
    // A.3.2: (approval, 0, 1) resolve; (busy, 0, 1) retry; (busy, 1, 1) rethrow.
    assert_eq!(
        get_pre_stream_error_action(APPROVAL_CONFLICT, 0, 1, None),
        ResolveApprovalPending
    );
    assert_eq!(
        get_pre_stream_error_action(BUSY, 0, 1, None),
        RetryConversationBusy
    );
    assert_eq!(get_pre_stream_error_action(BUSY, 1, 1, None), Rethrow);
}

#[test]
fn a31_provider_detail_helpers() {
    for d in [
        "ChatGPT server error: upstream connect error or disconnect/reset before headers",
        "Connection error during streaming: incomplete chunked read",
        "Connection error during OpenRouter streaming: incomplete chunked read",
        "Codex error: {\"type\":\"error\",\"error\":{\"type\":\"server_error\"}}",
        "WebSocket closed 1006 Connection ended",
    ] {
        assert!(is_retryable_provider_detail(d), "{d}");
    }
    for d in [
        "OpenAI API error: invalid API key",
        "Z.ai API error (401): Authentication Failed",
        "Error code: 401",
    ] {
        assert!(is_non_retryable_provider_detail(d), "{d}");
    }
}

#[test]
fn a31_should_retry_run_metadata_error() {
    assert!(should_retry_run_metadata_error(
        Some("llm_error"),
        "upstream connect error"
    ));
    assert!(!should_retry_run_metadata_error(
        Some("llm_error"),
        "OpenAI API error: invalid_request_error"
    ));
    assert!(!should_retry_run_metadata_error(
        Some("llm_error"),
        "Error code: 429 - {\"reasons\": [\"exceeded-quota\"]}"
    ));
    assert!(!should_retry_run_metadata_error(
        Some("llm_error"),
        "You've reached your hosted model usage limit."
    ));
    for t in [Some("internal_error"), None] {
        assert!(should_retry_run_metadata_error(
            t,
            "Connection error during OpenRouter streaming: incomplete chunked read"
        ));
        assert!(should_retry_run_metadata_error(
            t,
            "OpenAI API error: Connection error during streaming: incomplete chunked read"
        ));
    }
    assert!(should_retry_run_metadata_error(
        None,
        "Codex error: {\"error\":{\"type\":\"server_error\"}}"
    ));
    assert!(should_retry_run_metadata_error(
        None,
        "WebSocket closed 1006 Connection ended"
    ));
    assert!(!should_retry_run_metadata_error(
        Some("llm_error"),
        "ChatGPT rate limit: {\"error\":{\"type\":\"usage_limit_reached\"}}"
    ));
    assert!(should_retry_run_metadata_error(None, CF_521_HTML));
    assert!(should_retry_run_metadata_error(None, CF_521_FORMATTED));
}

#[test]
fn a31_should_retry_post_stream_run_error() {
    assert!(!should_retry_post_stream_run_error(
        &StopReason::LlmApiError,
        Some("llm_authentication"),
        "Z.ai API error (401): Authentication Failed",
        Some(false)
    ));
    assert!(should_retry_post_stream_run_error(
        &StopReason::LlmApiError,
        None,
        "unclassified provider transport failure",
        None
    ));
    // Not llm_api_error and unclassified: no.
    assert!(!should_retry_post_stream_run_error(
        &StopReason::Error,
        None,
        "unclassified provider transport failure",
        None
    ));
    // Explicit flags win both ways.
    assert!(should_retry_post_stream_run_error(
        &StopReason::Error,
        Some("llm_authentication"),
        "Authentication error",
        Some(true)
    ));
}

#[test]
fn a31_should_retry_pre_stream_transient_error() {
    assert!(should_retry_pre_stream_transient_error(Some(503), ""));
    assert!(should_retry_pre_stream_transient_error(
        Some(429),
        "rate limited"
    ));
    assert!(!should_retry_pre_stream_transient_error(
        Some(429),
        "{\"reasons\":[\"agents-limit-exceeded\"]}"
    ));
    assert!(!should_retry_pre_stream_transient_error(
        Some(429),
        "{\"reasons\":[\"premium-usage-exceeded\"]}"
    ));
    assert!(!should_retry_pre_stream_transient_error(
        Some(401),
        "Unauthorized"
    ));
    assert!(should_retry_pre_stream_transient_error(
        None,
        "Connection error during streaming"
    ));
    assert!(!should_retry_pre_stream_transient_error(
        Some(429),
        "ChatGPT usage_limit_reached"
    ));
    assert!(should_retry_pre_stream_transient_error(None, CF_521_HTML));
    // A 409 is a 4xx: not transient.
    assert!(!should_retry_pre_stream_transient_error(Some(409), BUSY));
}

#[test]
fn a31_parse_retry_after_and_delays() {
    assert_eq!(parse_retry_after_header_ms("2", 0), Some(2000));
    assert_eq!(parse_retry_after_header_ms("1.5", 0), Some(1500));
    assert_eq!(parse_retry_after_header_ms("not-a-date", 0), None);
    // HTTP date minus now, never negative.
    let date = "Thu, 01 Jan 2026 00:00:10 GMT";
    let at = parse_imf_fixdate_ms(date).unwrap();
    assert_eq!(at, 1_767_225_610_000);
    assert_eq!(parse_retry_after_header_ms(date, at - 7000), Some(7000));
    assert_eq!(parse_retry_after_header_ms(date, at + 1), Some(0));

    use DelayCategory::*;
    assert_eq!(get_retry_delay_ms(TransientProvider, 1, "x", None), 1000);
    assert_eq!(get_retry_delay_ms(TransientProvider, 2, "x", None), 2000);
    assert_eq!(get_retry_delay_ms(TransientProvider, 3, "x", None), 4000);
    assert_eq!(
        get_retry_delay_ms(TransientProvider, 1, CF_521_HTML, None),
        5000
    );
    assert_eq!(
        get_retry_delay_ms(TransientProvider, 3, CF_521_HTML, None),
        20000
    );
    assert_eq!(
        get_retry_delay_ms(TransientProvider, 1, CF_521_FORMATTED, None),
        5000
    );
    assert_eq!(
        get_retry_delay_ms(TransientProvider, 1, "x", Some(7000)),
        7000
    );
    assert_eq!(get_retry_delay_ms(ConversationBusy, 1, "", None), 10000);
    assert_eq!(get_retry_delay_ms(ConversationBusy, 2, "", None), 20000);
    assert_eq!(get_retry_delay_ms(ConversationBusy, 3, "", None), 40000);
    assert_eq!(get_retry_delay_ms(EmptyResponse, 1, "", None), 500);
    assert_eq!(get_retry_delay_ms(EmptyResponse, 2, "", None), 1000);
    for attempt in 1..=3 {
        assert_eq!(
            get_transient_retry_delay_ms(attempt, "x", None),
            get_retry_delay_ms(TransientProvider, attempt, "x", None)
        );
    }
}

fn api(error: Value) -> Value {
    json!({"status": 409, "error": error, "message": "409 something"})
}

#[test]
fn a31_extract_conflict_detail() {
    // err.error.error.detail wins.
    assert_eq!(
        extract_conflict_detail(&api(
            json!({"error": {"detail": "d1", "message": "m1"}, "detail": "d2"})
        )),
        "d1"
    );
    assert_eq!(
        extract_conflict_detail(&api(json!({"error": {"message": "m1"}, "detail": "d2"}))),
        "m1"
    );
    assert_eq!(
        extract_conflict_detail(&api(json!({"error": "inner string", "detail": "d2"}))),
        "inner string"
    );
    assert_eq!(
        extract_conflict_detail(&json!({"error": "top string", "message": "m"})),
        "top string"
    );
    assert_eq!(
        extract_conflict_detail(&api(json!({"detail": "d2", "message": "m2"}))),
        "d2"
    );
    assert_eq!(
        extract_conflict_detail(&api(json!({"message": "m2"}))),
        "m2"
    );
    assert_eq!(
        extract_conflict_detail(&json!({"message": "Error.message"})),
        "Error.message"
    );
    assert_eq!(extract_conflict_detail(&Value::Null), "");
    assert_eq!(extract_conflict_detail(&json!(42)), "");
    assert_eq!(extract_conflict_detail(&json!("string")), "");
    // End to end: the nested SDK error body of an interrupted→CONFLICT error.
    let nested = json!({"status": 409, "error": {"error": {
        "detail": APPROVAL_CONFLICT, "run_id": "run-d056a979-0000"}}, "message": "409 {...}"});
    let d = extract_conflict_detail(&nested);
    assert!(is_approval_pending_error(&s(&d)));
    assert!(!is_conversation_busy_error(&s(&d)));
    assert_eq!(
        get_pre_stream_error_action(&d, 0, 3, None),
        PreStreamAction::ResolveApprovalPending
    );
    let ts_core =
        json!({"status": 409, "error": {"error": "Conversation is busy with another active run."}});
    assert_eq!(
        get_pre_stream_error_action(&extract_conflict_detail(&ts_core), 0, 3, None),
        PreStreamAction::RetryConversationBusy
    );
    // The real server's d3 body: detail is an object.
    let d3 = api_error(
        409,
        &json!({"detail": {"code": "PENDING_APPROVAL", "message": APPROVAL_CONFLICT, "pending_request_id": "message-1"}}).to_string(),
        &[],
    );
    assert_eq!(extract_conflict_detail(&d3), APPROVAL_CONFLICT);
    // A non-JSON error body: the SDK message "<status> <text>" is all there is.
    let html = api_error(502, "<html>Bad gateway</html>", &[]);
    assert_eq!(
        extract_conflict_detail(&html),
        "502 <html>Bad gateway</html>"
    );
}

#[test]
fn a31_should_attempt_approval_recovery() {
    assert!(should_attempt_approval_recovery(true, 0, 3));
    assert!(should_attempt_approval_recovery(true, 2, 3));
    assert!(!should_attempt_approval_recovery(true, 3, 3));
    assert!(!should_attempt_approval_recovery(true, 5, 3));
    assert!(!should_attempt_approval_recovery(false, 0, 3));
}

#[test]
fn a31_empty_response() {
    assert!(is_empty_response_error(&s(
        "LLM provider returned empty content in response (model x)"
    )));
    assert!(is_empty_response_error(&s(
        "LLM provider returned empty content in streaming response (model x)"
    )));
    assert!(is_empty_response_error(&s("EMPTY CONTENT IN RESPONSE")));
    for d in [
        s("Connection error"),
        s("Rate limit exceeded"),
        Value::Null,
        json!(123),
    ] {
        assert!(!is_empty_response_error(&d));
    }
    let empty = "LLM provider returned empty content in response";
    assert!(is_empty_response_retryable(Some("llm_error"), empty, 0, 2));
    assert!(is_empty_response_retryable(Some("llm_error"), empty, 1, 2));
    assert!(!is_empty_response_retryable(Some("llm_error"), empty, 2, 2));
    assert!(!is_empty_response_retryable(
        Some("internal_error"),
        empty,
        0,
        2
    ));
    assert!(!is_empty_response_retryable(
        Some("llm_error"),
        "Connection error occurred",
        0,
        2
    ));
}

#[test]
fn a32_nothing_awaiting_is_neither_pending_nor_invalid_ids() {
    let t = "Cannot process approval response: No tool call is currently awaiting approval. Please send a regular message to interact with the agent.";
    assert!(!is_approval_pending_error(&s(t)));
    assert!(!is_invalid_tool_call_ids_error(&s(t)));
    // Partial matches.
    assert!(is_approval_pending_error(&s(
        "the agent is Waiting For Approval on something"
    )));
}

/// The port reads an HTTP-date `Retry-After` in RFC 9110's IMF-fixdate form only and refuses
/// the rest. The published client's `Date.parse` is V8's and more lenient (`24:00:00`, a second
/// of 61, `31 Nov`, no `GMT`; a named difference, docs/client.md), so these are the port's own
/// refusals, pinned here because no oracle judges them.
#[test]
fn an_http_date_out_of_the_imf_fixdate_form_is_refused() {
    let valid = "Sat, 31 Dec 2100 23:59:60 GMT";
    assert_eq!(parse_imf_fixdate_ms(valid), Some(4_133_980_800_000));
    for refused in [
        "Sat, 31 Dec 2100 23:59:59 UTC",
        "Sat, 31 Dec 2100 23:59:59",
        "Sat, 31 Dec 2100 23:59 GMT",
        "Sat, 31 Dec 2100 24:00:00 GMT",
        "Sat, 31 Dec 2100 23:60:00 GMT",
        "Sat, 31 Dec 2100 23:59:61 GMT",
        "Sat, 32 Dec 2100 23:59:59 GMT",
        "Sat, 00 Dec 2100 23:59:59 GMT",
        "Sat, 31 Dec 1969 23:59:59 GMT",
        "Sat 31 Dec 2100 23:59:59 GMT",
    ] {
        assert_eq!(parse_imf_fixdate_ms(refused), None, "{refused}");
    }
    // Days before 1 January 1970 are refused; the first day after is day 0.
    assert_eq!(
        parse_imf_fixdate_ms("Thu, 01 Jan 1970 00:00:01 GMT"),
        Some(1000)
    );
    assert_eq!(days_from_civil(2100, 3, 1), 47_541);
    assert_eq!(days_from_civil(2000, 2, 29), 11_016);
}
