//! Unit tests of the recovery policy: every case of letta-tests-and-real-client.md Part A §A.3
//! and §A.4, and every entry of every table of letta-protocol.md §3.5-3.6.

use super::*;
use crate::wire::letta::{Content, MessageCreate};

const APPROVAL_CONFLICT: &str = "CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call. Please approve or deny the pending request before continuing.";
const APPROVAL_CONFLICT_SHORT: &str =
    "CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call.";
const BUSY: &str = "CONFLICT: Cannot send a new message: Another request is currently being processed for this conversation. Please wait for the current request to complete.";
const BUSY_WITH_RUN: &str = "CONFLICT: Cannot send a new message: Another request (run_id=run-abc-123) is currently being processed for this conversation. Please wait for it to complete.";
const CF_521_HTML: &str = "<!DOCTYPE html><html><head><title>example.com | 521: Web server is down</title></head><body>Cloudflare Ray ID: 1 error code 521</body></html>";
const CF_521_FORMATTED: &str = "Cloudflare 521: Web server is down (host example.com)";

fn s(v: &str) -> Value {
    Value::String(v.into())
}

// ---- A.3.1 classifiers -----------------------------------------------------------------------

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

fn user(text: &str, otid: &str) -> MessageItem {
    MessageItem::Message(MessageCreate {
        kind: Some("message".into()),
        role: "user".into(),
        content: Content::Text(text.into()),
        otid: Some(otid.into()),
    })
}

fn approval(ids: &[&str], otid: &str) -> MessageItem {
    MessageItem::Approval(ApprovalCreate {
        kind: "approval".into(),
        approvals: ids
            .iter()
            .map(|id| ApprovalItem::Approval {
                tool_call_id: id.to_string(),
                approve: false,
                reason: Some("old".into()),
            })
            .collect(),
        otid: Some(otid.into()),
    })
}

fn counter() -> impl FnMut() -> String {
    let mut n = 0;
    move || {
        n += 1;
        format!("fresh-{n}")
    }
}

fn server(ids: &[&str]) -> Vec<ServerApproval> {
    ids.iter()
        .map(|id| ServerApproval {
            tool_call_id: id.to_string(),
            tool_name: "Bash".into(),
        })
        .collect()
}

#[test]
fn a31_refresh_input_otids_for_new_request() {
    let input = vec![approval(&["a"], "o1"), user("hi", "o2")];
    let out = refresh_input_otids_for_new_request(&input, &mut counter());
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].otid(), Some("fresh-1"));
    assert_eq!(out[1].otid(), Some("fresh-2"));
    assert!(matches!(out[0], MessageItem::Approval(_)));
    assert!(matches!(out[1], MessageItem::Message(_)));
    // The input is untouched (new array, new objects).
    assert_eq!(input[0].otid(), Some("o1"));
}

#[test]
fn a31_rebuild_input_with_fresh_denials() {
    // [stale approval, user] + 1 server approval → [approval, message].
    let out = rebuild_input_with_fresh_denials(
        &[approval(&["old"], "o1"), user("hi", "o2")],
        &server(&["new-1"]),
        STALE_APPROVAL_RECOVERY_DENIAL_REASON,
        &mut counter(),
    );
    assert_eq!(out.len(), 2);
    let MessageItem::Approval(a) = &out[0] else {
        panic!()
    };
    assert_eq!(
        a.approvals,
        vec![ApprovalItem::Approval {
            tool_call_id: "new-1".into(),
            approve: false,
            reason: Some(STALE_APPROVAL_RECOVERY_DENIAL_REASON.into())
        }]
    );
    // Remaining items first get fresh otids, then the container.
    assert_eq!(out[1].otid(), Some("fresh-1"));
    assert_eq!(a.otid.as_deref(), Some("fresh-2"));
    // [approval(empty), user] + none → [message].
    let out = rebuild_input_with_fresh_denials(
        &[approval(&[], "o1"), user("hi", "o2")],
        &[],
        STALE_APPROVAL_RECOVERY_DENIAL_REASON,
        &mut counter(),
    );
    assert_eq!(out.len(), 1);
    assert!(matches!(out[0], MessageItem::Message(_)));
    // [user] + 1 → 2.
    let out =
        rebuild_input_with_fresh_denials(&[user("hi", "o2")], &server(&["x"]), "r", &mut counter());
    assert_eq!(out.len(), 2);
    // A.3.2: two stale items + two server approvals → one item with 2 denials in server order.
    let out = rebuild_input_with_fresh_denials(
        &[
            approval(&["s1"], "o1"),
            approval(&["s2"], "o3"),
            user("hi", "o2"),
        ],
        &server(&["new-1", "new-2"]),
        "r",
        &mut counter(),
    );
    assert_eq!(out.len(), 2);
    let MessageItem::Approval(a) = &out[0] else {
        panic!()
    };
    let ids: Vec<&str> = a.approvals.iter().map(ApprovalItem::tool_call_id).collect();
    assert_eq!(ids, vec!["new-1", "new-2"]);
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

// ---- A.3.4 503 shutting down -----------------------------------------------------------------

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

// ---- every table entry ---------------------------------------------------------------------

#[test]
fn every_retryable_pattern_is_case_sensitive_and_retryable() {
    for p in RETRYABLE_PROVIDER_DETAIL_PATTERNS {
        assert!(is_retryable_provider_detail(&format!("xx {p} yy")), "{p}");
        assert!(should_retry_run_metadata_error(None, p), "{p}");
    }
    // Case-sensitive: an upper-cased pattern that is not itself in the table does not match.
    assert!(!is_retryable_provider_detail("ANTHROPIC API ERROR"));
    assert!(!is_retryable_provider_detail("SOCKET HANG UP"));
}

#[test]
fn every_non_retryable_pattern_is_lower_cased_substring() {
    for p in NON_RETRYABLE_PROVIDER_DETAIL_PATTERNS {
        assert!(is_non_retryable_provider_detail(p), "{p}");
        assert!(
            is_non_retryable_provider_detail(&p.to_uppercase()),
            "case-insensitive: {p}"
        );
        // Beats a retryable pattern in the run-metadata rule.
        assert!(
            !should_retry_run_metadata_error(Some("llm_error"), &format!("Connection error: {p}")),
            "{p}"
        );
    }
}

#[test]
fn non_retryable_4xx_pattern_ranges() {
    for code in (400..=408).chain(410..=449).chain([451]) {
        assert!(
            matches_non_retryable_4xx(&format!("Error code: {code} - x")),
            "{code}"
        );
        assert!(
            matches_non_retryable_4xx(&format!("error code:{code}")),
            "{code}"
        );
    }
    for code in [409, 450, 452, 499, 500, 399] {
        assert!(
            !matches_non_retryable_4xx(&format!("Error code: {code} - x")),
            "{code}"
        );
    }
    assert!(!matches_non_retryable_4xx("Error code: 4000"));
    // The regex matches 429, but a 429 text stays retryable everywhere it is used.
    assert!(matches_non_retryable_4xx("Error code: 429"));
    assert!(should_retry_pre_stream_transient_error(
        None,
        "Error code: 429"
    ));
    assert!(should_retry_run_metadata_error(None, "Error code: 429"));
}

#[test]
fn zai_codes() {
    for (lo, hi) in ZAI_NON_RETRYABLE_CODE_RANGES {
        for c in lo..=hi {
            assert!(
                is_zai_non_retryable(&format!("Z.ai error: {{'code': {c}, 'message': 'x'}}")),
                "{c}"
            );
            assert!(
                is_zai_non_retryable(&format!("{{\"code\": {c}, \"message\": \"x\"}}")),
                "{c}"
            );
        }
    }
    for c in [999, 1005, 1099, 1122, 1200, 1234, 1299, 1311, 500] {
        assert!(
            !is_zai_non_retryable(&format!("{{'code': {c}, 'message': 'x'}}")),
            "{c}"
        );
    }
    assert_eq!(zai_error_code("'code': 1113 but no message"), None);
}

#[test]
fn run_error_types_and_quota_tables() {
    for t in NON_RETRYABLE_RUN_ERROR_TYPES {
        assert!(
            !should_retry_run_metadata_error(Some(t), "Connection error"),
            "{t}"
        );
        assert!(
            !should_retry_post_stream_run_error(&StopReason::LlmApiError, Some(t), "x", None),
            "{t}"
        );
    }
    for r in NON_RETRYABLE_429_REASONS
        .iter()
        .chain(NON_RETRYABLE_QUOTA_DETAIL_PATTERNS.iter())
    {
        assert!(is_quota_limit_detail(&r.to_uppercase()), "{r}");
        assert!(
            !should_retry_pre_stream_transient_error(Some(429), r),
            "{r}"
        );
        assert!(
            !should_retry_pre_stream_transient_error(Some(503), r),
            "{r}"
        );
        assert!(
            !should_retry_run_metadata_error(Some("llm_error"), r),
            "{r}"
        );
    }
    for d in [
        "Error code: 429",
        "error code:429",
        "Rate Limit hit",
        "Too Many Requests",
    ] {
        assert!(matches_retryable_429(d), "{d}");
        assert!(should_retry_pre_stream_transient_error(None, d), "{d}");
    }
    assert!(!matches_retryable_429("Error code: 430"));
}

#[test]
fn cloudflare_edge_texts() {
    for code in CLOUDFLARE_EDGE_CODES {
        assert!(
            is_cloudflare_edge_52x(&format!("Cloudflare {code}")),
            "{code}"
        );
        assert!(
            is_cloudflare_edge_52x(&format!(
                "<!DOCTYPE html><title>x | {code}: down</title> cloudflare"
            )),
            "{code}"
        );
        assert!(
            is_cloudflare_edge_52x(&format!("cloudflare error code {code}")),
            "{code}"
        );
        assert!(
            is_cloudflare_edge_52x(&format!("{code} <!DOCTYPE html> cloudflare")),
            "{code}"
        );
        assert_eq!(
            get_transient_retry_delay_ms(1, &format!("Cloudflare {code}"), None),
            5000
        );
    }
    assert!(is_cloudflare_edge_52x(
        "{\"cloudflare_error\": true, \"status\": 521}"
    ));
    assert!(!is_cloudflare_edge_52x("Cloudflare 5210"));
    assert!(!is_cloudflare_edge_52x("Cloudflare 503"));
    assert!(!is_cloudflare_edge_52x("<html>error code 521</html>"));
}

#[test]
fn display_busy_patterns() {
    for p in DISPLAY_BUSY_PATTERNS {
        assert!(is_display_busy_error(&p.to_uppercase()), "{p}");
    }
    assert!(is_display_busy_error("another request is processed"));
    assert!(is_display_busy_error("Another request is being processed"));
}

// ---- budgets, post-stream order, resume policy, SDK retry --------------------------------------

#[test]
fn budgets_reset_rules() {
    let mut b = Budgets {
        llm_api_error_retries: 2,
        empty_response_retries: 1,
        conversation_busy_retries: 3,
        quota_swap_tried: true,
    };
    b.reset_busy();
    assert_eq!(b.conversation_busy_retries, 0);
    assert_eq!(b.llm_api_error_retries, 2);
    b.reset();
    assert_eq!(b, Budgets::default());
    assert_eq!(
        (
            LLM_API_ERROR_MAX_RETRIES,
            EMPTY_RESPONSE_MAX_RETRIES,
            CONVERSATION_BUSY_MAX_RETRIES,
            CLOUD_API_SHUTDOWN_MAX_RETRIES
        ),
        (3, 2, 3, 3)
    );
}

#[test]
fn resume_policy_delays() {
    let h = ResumePolicy::HEADLESS;
    let d: Vec<u64> = (1..=6).map(|a| h.delay_after(a)).collect();
    assert_eq!(d, vec![250, 500, 1000, 2000, 2000, 2000]);
    assert_eq!(h.max_attempts, 20);
    assert_eq!(ResumePolicy::INTERACTIVE.delay_after(1), 0);
    assert_eq!(ResumePolicy::INTERACTIVE.max_attempts, 1);
}

fn post(stop: StopReason, detail: &str) -> PostStreamInput {
    PostStreamInput {
        stop_reason: Some(stop),
        run_detail: Some(detail.into()),
        hosted: true,
        auto_swap_enabled: true,
        ..Default::default()
    }
}

#[test]
fn post_stream_order() {
    let mut b = Budgets::default();
    let mut i = post(StopReason::Error, "Invalid tool call IDs. Expected");
    i.payload_had_approval = true;
    assert_eq!(
        post_stream_action(&i, &mut b),
        PostStreamAction::ShowServerApprovals
    );
    // Approval pending beats everything after it and uses the shared budget.
    let i = post(StopReason::Error, APPROVAL_CONFLICT);
    assert_eq!(
        post_stream_action(&i, &mut b),
        PostStreamAction::ResolveApprovalPending
    );
    assert_eq!(b.llm_api_error_retries, 1);
    // Quota swap once per turn.
    let q = post(StopReason::LlmApiError, "exceeded-quota");
    assert_eq!(
        post_stream_action(&q, &mut b),
        PostStreamAction::QuotaAutoSwap
    );
    assert_ne!(
        post_stream_action(&q, &mut b),
        PostStreamAction::QuotaAutoSwap
    );
    // Empty response: 500 ms then 1000 ms with the nudge, then no more.
    let mut b = Budgets::default();
    let e = post(
        StopReason::LlmApiError,
        "LLM provider returned empty content in response",
    );
    assert_eq!(
        post_stream_action(&e, &mut b),
        PostStreamAction::EmptyResponseRetry {
            delay_ms: 500,
            attempt: 1,
            nudge: false
        }
    );
    assert_eq!(
        post_stream_action(&e, &mut b),
        PostStreamAction::EmptyResponseRetry {
            delay_ms: 1000,
            attempt: 2,
            nudge: true
        }
    );
    // Only for llm_api_error (the TUI passes llm_error iff the stop is llm_api_error).
    let mut b = Budgets::default();
    let e2 = post(
        StopReason::Error,
        "LLM provider returned empty content in response",
    );
    assert_eq!(post_stream_action(&e2, &mut b), PostStreamAction::Fail);
    // Transient: 1, 2, 4 s, then fail and reset.
    let mut b = Budgets::default();
    let mut t = post(StopReason::LlmApiError, "Connection error");
    t.retriable = true;
    for (attempt, delay) in [(1, 1000), (2, 2000), (3, 4000)] {
        assert_eq!(
            post_stream_action(&t, &mut b),
            PostStreamAction::TransientRetry {
                delay_ms: delay,
                attempt,
                empty_messages: false
            }
        );
    }
    assert_eq!(post_stream_action(&t, &mut b), PostStreamAction::Fail);
    assert_eq!(b, Budgets::default());
    // Local persisted state resends an empty messages array.
    let mut b = Budgets::default();
    t.local_persisted_state = true;
    assert!(matches!(
        post_stream_action(&t, &mut b),
        PostStreamAction::TransientRetry {
            empty_messages: true,
            ..
        }
    ));
}

#[test]
fn headless_post_stream_order() {
    let mut b = Budgets::default();
    let mut i = HeadlessPostStreamInput {
        stop_reason: Some(StopReason::LlmApiError),
        run_meta: Some(RunErrorMeta {
            error_type: Some("llm_authentication".into()),
            detail: Some("401".into()),
            retryable: Some(false),
        }),
        ..Default::default()
    };
    // The published client retries llm_api_error without looking at metadata (§10.3 item 9).
    assert!(matches!(
        headless_post_stream_action(&i, &mut b),
        HeadlessPostStreamAction::Retry { attempt: 1, .. }
    ));
    // The reference honours retryable:false.
    let mut b = Budgets::default();
    i.honour_retryable_false = true;
    assert_eq!(
        headless_post_stream_action(&i, &mut b),
        HeadlessPostStreamAction::Fail
    );
    i.approval_pending_flag = true;
    assert_eq!(
        headless_post_stream_action(&i, &mut b),
        HeadlessPostStreamAction::ResolveAllPendingApprovals
    );
    let done = HeadlessPostStreamInput {
        stop_reason: Some(StopReason::EndTurn),
        ..Default::default()
    };
    assert_eq!(
        headless_post_stream_action(&done, &mut b),
        HeadlessPostStreamAction::Done
    );
    // The reference retries an empty response before reading metadata.
    let empty = HeadlessPostStreamInput {
        stop_reason: Some(StopReason::LlmApiError),
        error_line: Some("LLM provider returned empty content in response".into()),
        honour_retryable_false: true,
        empty_response_step: true,
        run_meta: Some(RunErrorMeta {
            error_type: Some("llm_empty_response".into()),
            detail: None,
            retryable: Some(false),
        }),
        ..Default::default()
    };
    let mut b = Budgets::default();
    assert_eq!(
        headless_post_stream_action(&empty, &mut b),
        HeadlessPostStreamAction::EmptyResponseRetry {
            delay_ms: 500,
            attempt: 1,
            nudge: false
        }
    );
    let resync = HeadlessPostStreamInput {
        stop_reason: Some(StopReason::Error),
        error_line: Some("Invalid tool call IDs. Expected".into()),
        ..Default::default()
    };
    assert_eq!(
        headless_post_stream_action(&resync, &mut b),
        HeadlessPostStreamAction::ApprovalResync
    );
}

#[test]
fn sdk_retry_layer() {
    assert!(sdk_should_retry(Some(409), None));
    assert!(sdk_should_retry(Some(500), None));
    assert!(sdk_should_retry(Some(408), None));
    assert!(sdk_should_retry(Some(429), None));
    assert!(!sdk_should_retry(Some(404), None));
    assert!(!sdk_should_retry(Some(409), Some("false")));
    assert!(sdk_should_retry(Some(400), Some("true")));
    assert_eq!(sdk_retry_delay_ms(0, None, None, 0, 0.0), 500);
    assert_eq!(sdk_retry_delay_ms(1, None, None, 0, 0.0), 1000);
    assert_eq!(sdk_retry_delay_ms(5, None, None, 0, 0.0), 8000);
    assert_eq!(sdk_retry_delay_ms(0, None, None, 0, 1.0), 375);
    assert_eq!(sdk_retry_delay_ms(0, Some("1234"), Some("9"), 0, 0.5), 1234);
    assert_eq!(sdk_retry_delay_ms(0, None, Some("3"), 0, 0.5), 3000);
}

#[test]
fn stream_otid_and_approval_only() {
    let items = vec![approval(&["a"], "o1"), user("hi", "o2")];
    assert_eq!(stream_otid(&items).as_deref(), Some("o1"));
    assert!(!is_approval_only(&items));
    assert!(is_approval_only(&items[..1]));
    let no_otid = MessageItem::Message(MessageCreate {
        kind: None,
        role: "user".into(),
        content: Content::Text(KEEP_GOING.into()),
        otid: None,
    });
    assert_eq!(stream_otid(&[no_otid.clone(), user("x", "o9")]), None);
    assert_eq!(
        first_otid(&[no_otid, user("x", "o9")]).as_deref(),
        Some("o9")
    );
    assert!(is_approval_pending_conflict(Some(APPROVAL_CONFLICT)));
    assert!(!is_approval_pending_conflict(Some(BUSY)));
    assert_eq!(
        approval_comment_text("Ship it"),
        "The user approved the tool execution with the following comment: \"Ship it\""
    );
}
