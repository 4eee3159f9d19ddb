//! The post-stream decision order of letta-protocol.md §3.10, of the TUI and of headless mode.

use serde_json::Value;

use super::budgets::{Budgets, EMPTY_RESPONSE_MAX_RETRIES};
use super::classifiers::{
    is_approval_pending_error, is_empty_response_error, is_invalid_tool_call_ids_error,
};
use super::delays::{DelayCategory, get_retry_delay_ms, get_transient_retry_delay_ms};
use super::provider_errors::is_quota_limit_detail;
use super::retry_decisions::{
    RunErrorMeta, is_empty_response_retryable, is_non_retriable_stop,
    should_retry_post_stream_run_error,
};
use crate::wire::letta::StopReason;

/// What the TUI does after a stop reason other than end_turn/cancelled/requires_approval
/// (letta-protocol.md §3.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostStreamAction {
    /// Step 2: the payload had an approval and the error says "invalid tool call ids": fetch the
    /// server's approvals and show them.
    ShowServerApprovals,
    /// Step 3: fresh-denial rebuild, loop.
    ResolveApprovalPending,
    /// Step 5: temporary model override `letta/auto`, append "Keep going.", loop.
    QuotaAutoSwap,
    /// Step 6: wait, refresh otids, loop; `nudge` appends the empty-response system reminder.
    EmptyResponseRetry {
        delay_ms: u64,
        attempt: u32,
        nudge: bool,
    },
    /// Step 7: wait, then resend (`empty_messages` for a local persisted-state backend) with
    /// refreshed otids; the seq threshold resets.
    TransientRetry {
        delay_ms: u64,
        attempt: u32,
        empty_messages: bool,
    },
    /// Step 8: reset counters, cancel incomplete tools ("Stream error"), show the error.
    Fail,
}

/// Inputs of [`post_stream_action`] (the run lookup of step 1 is done by the caller).
#[derive(Debug, Clone, Default)]
pub struct PostStreamInput {
    pub stop_reason: Option<StopReason>,
    /// `metadata.error.detail ?? message` of the run (step 1).
    pub run_detail: Option<String>,
    /// The latest error line text (the drain's fallback error).
    pub error_line: Option<String>,
    pub payload_had_approval: bool,
    /// `isRetriableError`'s verdict (computed by the caller from the run lookup).
    pub retriable: bool,
    /// The backend is hosted (not `localModelCatalog`).
    pub hosted: bool,
    /// Setting `autoSwapOnQuotaLimit` is not false.
    pub auto_swap_enabled: bool,
    pub on_letta_auto: bool,
    /// The backend keeps local persisted state (`localModelCatalog && !remoteMemfs`).
    pub local_persisted_state: bool,
}

/// The TUI's post-stream decision (letta-protocol.md §3.10 steps 2-8, in order; step 4, the
/// ChatGPT plan rotation of upstream HEAD, applies only to ChatGPT BYOK providers, which the
/// simulation does not have). Increments the budgets the chosen step consumes.
pub fn post_stream_action(input: &PostStreamInput, budgets: &mut Budgets) -> PostStreamAction {
    let detail = input.run_detail.clone().unwrap_or_default();
    let line = input.error_line.clone().unwrap_or_default();
    let says = |f: fn(&Value) -> bool| {
        f(&Value::String(detail.clone())) || f(&Value::String(line.clone()))
    };
    // 2.
    if input.payload_had_approval && says(is_invalid_tool_call_ids_error) {
        return PostStreamAction::ShowServerApprovals;
    }
    // 3.
    if says(is_approval_pending_error) && budgets.llm_budget_left() {
        budgets.llm_api_error_retries += 1;
        return PostStreamAction::ResolveApprovalPending;
    }
    // 5.
    let quota = is_quota_limit_detail(&detail) || is_quota_limit_detail(&line);
    if quota
        && input.hosted
        && input.auto_swap_enabled
        && !input.on_letta_auto
        && !budgets.quota_swap_tried
    {
        budgets.quota_swap_tried = true;
        return PostStreamAction::QuotaAutoSwap;
    }
    // 6. The TUI passes `llm_error` iff the stop reason is llm_api_error (§3.7).
    let error_type = (input.stop_reason == Some(StopReason::LlmApiError)).then_some("llm_error");
    let empty_detail = if is_empty_response_error(&Value::String(detail.clone())) {
        detail.clone()
    } else {
        line.clone()
    };
    if is_empty_response_retryable(
        error_type,
        &empty_detail,
        budgets.empty_response_retries,
        EMPTY_RESPONSE_MAX_RETRIES,
    ) {
        budgets.empty_response_retries += 1;
        let attempt = budgets.empty_response_retries;
        return PostStreamAction::EmptyResponseRetry {
            delay_ms: get_retry_delay_ms(
                DelayCategory::EmptyResponse,
                attempt,
                &empty_detail,
                None,
            ),
            attempt,
            nudge: attempt == EMPTY_RESPONSE_MAX_RETRIES,
        };
    }
    // 7.
    if input.retriable && budgets.llm_budget_left() {
        budgets.llm_api_error_retries += 1;
        let attempt = budgets.llm_api_error_retries;
        let d = if detail.is_empty() { &line } else { &detail };
        return PostStreamAction::TransientRetry {
            delay_ms: get_transient_retry_delay_ms(attempt, d, None),
            attempt,
            empty_messages: input.local_persisted_state,
        };
    }
    // 8.
    budgets.reset();
    PostStreamAction::Fail
}

/// What headless does after a drain (letta-protocol.md §3.10, "Headless order").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadlessPostStreamAction {
    ResolveAllPendingApprovals,
    Done,
    ExecuteApprovals,
    /// Retry with refreshed otids after `delay_ms`.
    Retry {
        delay_ms: u64,
        attempt: u32,
    },
    /// Invalid ids: rebuild the input from the server's resume data with fresh denials.
    ApprovalResync,
    /// The reference only: the empty-response retry of §3.7 (500 ms · attempt, the nudge on the
    /// last attempt) before any metadata-based decision.
    EmptyResponseRetry {
        delay_ms: u64,
        attempt: u32,
        nudge: bool,
    },
    Fail,
}

/// Inputs of [`headless_post_stream_action`].
#[derive(Debug, Clone, Default)]
pub struct HeadlessPostStreamInput {
    pub stop_reason: Option<StopReason>,
    /// The drain raised the approval-pending flag.
    pub approval_pending_flag: bool,
    pub error_line: Option<String>,
    /// `llm_api_error` retries ignore run metadata (`retryable:false` included) in the published
    /// client (letta-protocol.md §10.3 item 9); the reference judges it as the TUI does (§3.7).
    pub judge_run_metadata: bool,
    /// `metadata.error` of the run, when the caller fetched it.
    pub run_meta: Option<RunErrorMeta>,
    /// Retry an empty response as the TUI does (§3.7) before reading metadata (the reference:
    /// an empty response is retryable whatever `retryable` its run says).
    pub empty_response_step: bool,
}

/// The headless post-stream order (letta-protocol.md §3.10): approval-pending flag →
/// resolve; end_turn → done; requires_approval → execute; llm_api_error with budget → retry
/// (no metadata check in the published client); invalid ids → resync; run-metadata based retry;
/// else fail.
pub fn headless_post_stream_action(
    input: &HeadlessPostStreamInput,
    budgets: &mut Budgets,
) -> HeadlessPostStreamAction {
    if input.approval_pending_flag {
        return HeadlessPostStreamAction::ResolveAllPendingApprovals;
    }
    let stop = input.stop_reason.clone().unwrap_or(StopReason::Error);
    match stop {
        StopReason::EndTurn => return HeadlessPostStreamAction::Done,
        StopReason::RequiresApproval => return HeadlessPostStreamAction::ExecuteApprovals,
        _ => {}
    }
    let line = input.error_line.clone().unwrap_or_default();
    let meta_detail = input
        .run_meta
        .as_ref()
        .and_then(|m| m.detail.clone())
        .unwrap_or_else(|| line.clone());
    if input.empty_response_step
        && stop == StopReason::LlmApiError
        && is_empty_response_retryable(
            Some("llm_error"),
            &line,
            budgets.empty_response_retries,
            EMPTY_RESPONSE_MAX_RETRIES,
        )
    {
        budgets.empty_response_retries += 1;
        let attempt = budgets.empty_response_retries;
        return HeadlessPostStreamAction::EmptyResponseRetry {
            delay_ms: get_retry_delay_ms(DelayCategory::EmptyResponse, attempt, &line, None),
            attempt,
            nudge: attempt == EMPTY_RESPONSE_MAX_RETRIES,
        };
    }
    // What the run read back says of a retry, when the client read it: one verdict serves the
    // reference's veto and the metadata-based retry below.
    let metadata_says_retry = input.run_meta.as_ref().map(|m| {
        should_retry_post_stream_run_error(
            &stop,
            m.error_type.as_deref(),
            &meta_detail,
            m.retryable,
        )
    });
    // The reference judges a run it read back as the TUI does (§3.7
    // `shouldRetryPostStreamRunError`): an explicit `retryable` flag, else the error type, quota
    // and provider texts. The server writes no flag (its error message has none), so a flag-only
    // veto would retry a provider 401 three times, as the published client does.
    let vetoed = input.judge_run_metadata && metadata_says_retry == Some(false);
    if stop == StopReason::LlmApiError && budgets.llm_budget_left() && !vetoed {
        budgets.llm_api_error_retries += 1;
        let attempt = budgets.llm_api_error_retries;
        return HeadlessPostStreamAction::Retry {
            delay_ms: get_transient_retry_delay_ms(attempt, &meta_detail, None),
            attempt,
        };
    }
    if is_invalid_tool_call_ids_error(&Value::String(line.clone())) {
        return HeadlessPostStreamAction::ApprovalResync;
    }
    if !is_non_retriable_stop(&stop)
        && budgets.llm_budget_left()
        && metadata_says_retry == Some(true)
    {
        budgets.llm_api_error_retries += 1;
        let attempt = budgets.llm_api_error_retries;
        return HeadlessPostStreamAction::Retry {
            delay_ms: get_transient_retry_delay_ms(attempt, &meta_detail, None),
            attempt,
        };
    }
    HeadlessPostStreamAction::Fail
}
