//! Budgets, the post-stream decision order (TUI and headless), the resume policy, the SDK
//! retry layer.

use super::*;

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
    i.judge_run_metadata = true;
    assert_eq!(
        headless_post_stream_action(&i, &mut b),
        HeadlessPostStreamAction::Fail
    );
    // Without a flag (the server writes none) the reference judges the run as the TUI does:
    // a non-retryable type ends the turn, a provider 500 is retried.
    let unflagged = |error_type: &str, detail: &str| HeadlessPostStreamInput {
        stop_reason: Some(StopReason::LlmApiError),
        judge_run_metadata: true,
        run_meta: Some(RunErrorMeta {
            error_type: Some(error_type.into()),
            detail: Some(detail.into()),
            retryable: None,
        }),
        ..Default::default()
    };
    assert_eq!(
        headless_post_stream_action(
            &unflagged("llm_authentication", "Error code: 401 - invalid x-api-key"),
            &mut Budgets::default()
        ),
        HeadlessPostStreamAction::Fail
    );
    assert!(matches!(
        headless_post_stream_action(
            &unflagged("llm_error", "Error code: 500 - Internal server error"),
            &mut Budgets::default()
        ),
        HeadlessPostStreamAction::Retry { attempt: 1, .. }
    ));
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
    // The turn loop acts on these two stop reasons before it asks this policy, so only this
    // test holds the function to §3.10's order for them.
    let approvals = HeadlessPostStreamInput {
        stop_reason: Some(StopReason::RequiresApproval),
        error_line: Some("Invalid tool call IDs. Expected".into()),
        ..Default::default()
    };
    assert_eq!(
        headless_post_stream_action(&approvals, &mut b),
        HeadlessPostStreamAction::ExecuteApprovals
    );
    // The reference retries an empty response before reading metadata.
    let empty = HeadlessPostStreamInput {
        stop_reason: Some(StopReason::LlmApiError),
        error_line: Some("LLM provider returned empty content in response".into()),
        judge_run_metadata: true,
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
