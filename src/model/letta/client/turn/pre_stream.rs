//! Errors before a stream (letta-protocol.md §3.4): approval pending (the TUI's fresh-denial
//! rebuild, headless `resolveAllPendingApprovals`), a busy conversation, transient errors, and
//! invalid tool call ids.

use serde_json::json;

use super::approval_step::ApprovalStep;
use crate::model::letta::client::approvals::Origin;
use crate::model::letta::client::backend::{Backend, Thrown};
use crate::model::letta::client::policy::{
    self, APPROVAL_DRAIN_ENDED, Budgets, CONVERSATION_BUSY_MAX_RETRIES, DelayCategory,
    MAX_TRANSIENT_RETRIES, PreStreamAction, RESUME_BATCH_SIZE,
    STALE_APPROVAL_RECOVERY_DENIAL_REASON, ServerApproval, TransientOptions,
    extract_conflict_detail, get_pre_stream_error_action, get_retry_delay_ms,
};
use crate::model::letta::client::stream::DrainResult;
use crate::model::letta::client::{Client, Mode, Profile, TurnOutcome};
use crate::model::port::observe::Observation;
use crate::wire::letta::{ApprovalCreate, MessageItem, StopReason};

/// Upper bound on the denial-only rounds of headless `resolveAllPendingApprovals` (the source
/// repeats "until none"; every loop is bounded, DESIGN.md §4 rule 5).
pub const RESOLVE_ALL_MAX_ROUNDS: u32 = 5;

/// The planted busy budget that breaks `budget-respected`.
const PLANTED_BUSY_RETRIES: u32 = 5;

/// What the pre-stream handler decided.
pub(super) enum PreStep {
    Retry,
    Drained(Box<DrainResult>),
    Done(TurnOutcome),
}

impl<B: Backend> Client<B> {
    pub(super) async fn pre_stream(
        &mut self,
        turn: u32,
        thrown: Thrown,
        input: &mut Vec<MessageItem>,
        budgets: &mut Budgets,
        threshold: &mut Option<u64>,
    ) -> PreStep {
        let detail = extract_conflict_detail(&thrown);
        let status = policy::error_status(&thrown);
        let max_busy = if self.config.bugs.unbounded_busy_retries {
            PLANTED_BUSY_RETRIES
        } else {
            CONVERSATION_BUSY_MAX_RETRIES
        };
        let action = get_pre_stream_error_action(
            &detail,
            budgets.conversation_busy_retries,
            max_busy,
            Some(TransientOptions {
                status,
                transient_retries: budgets.llm_api_error_retries,
                max_transient_retries: MAX_TRANSIENT_RETRIES,
            }),
        );
        match action {
            PreStreamAction::ResolveApprovalPending => match self.config.mode {
                Mode::Interactive => {
                    if !budgets.llm_budget_left() {
                        return PreStep::Done(TurnOutcome::Error(detail));
                    }
                    budgets.llm_api_error_retries += 1;
                    self.retry_event(
                        "approval_pending",
                        budgets.llm_api_error_retries,
                        0,
                        &detail,
                    );
                    self.rebuild_with_server_denials(input).await;
                    self.transcript.interrupted = false;
                    if self.config.profile == Profile::Reference {
                        *threshold = None;
                    }
                    PreStep::Retry
                }
                Mode::Headless => {
                    self.observe(Observation::ClientRecovery {
                        kind: "approval_pending".into(),
                        detail: policy::APPROVAL_PENDING_RECOVERY_NOTICE.into(),
                    });
                    let resolved = self.resolve_all_pending(turn).await;
                    if let Some(i) = self.crash_pending.take() {
                        return PreStep::Done(self.crash_now(i).await);
                    }
                    match resolved {
                        Ok(()) => PreStep::Retry,
                        Err(e) => PreStep::Done(TurnOutcome::Error(e)),
                    }
                }
            },
            PreStreamAction::RetryConversationBusy => {
                self.retry_conversation_busy(turn, &detail, input, budgets, *threshold)
                    .await
            }
            PreStreamAction::RetryTransient => {
                if !self.wait_transient_retry(&thrown, &detail, budgets).await {
                    return PreStep::Done(self.interrupted_outcome());
                }
                PreStep::Retry
            }
            PreStreamAction::Rethrow => {
                budgets.reset_busy();
                if policy::has_approval(input)
                    && policy::is_invalid_tool_call_ids_error(&serde_json::Value::String(
                        detail.clone(),
                    ))
                {
                    return match self.show_server_approvals(turn).await {
                        Some(ApprovalStep::Send(items, _)) => {
                            *input = items;
                            PreStep::Retry
                        }
                        Some(ApprovalStep::Done(o)) => PreStep::Done(o),
                        None => PreStep::Done(TurnOutcome::Error(detail)),
                    };
                }
                PreStep::Done(TurnOutcome::Error(failed(detail)))
            }
        }
    }

    /// One pre-stream transient retry (letta-protocol.md §3.4, §3.9): the next attempt of the
    /// turn's shared LLM budget, its delay (`Retry-After`, else the backoff), the busy count
    /// reset, the retry on the trace, and the wait. False when the user interrupted the wait.
    pub(super) async fn wait_transient_retry(
        &mut self,
        thrown: &Thrown,
        detail: &str,
        budgets: &mut Budgets,
    ) -> bool {
        budgets.llm_api_error_retries += 1;
        let attempt = budgets.llm_api_error_retries;
        let retry_after = policy::error_header(thrown, "retry-after")
            .and_then(|v| policy::parse_retry_after_header_ms(v, (self.io.epoch_now_ms)()));
        let delay = policy::get_transient_retry_delay_ms(attempt, detail, retry_after);
        budgets.reset_busy();
        self.retry_event_after("transient", attempt, delay, detail, retry_after);
        self.wait(delay, false).await
    }

    /// A busy conversation (letta-protocol.md §3.4, §2.5): attach to the in-flight run by otid
    /// and drain it, or wait the busy delay (polling the abort) and retry.
    async fn retry_conversation_busy(
        &mut self,
        turn: u32,
        detail: &str,
        input: &[MessageItem],
        budgets: &mut Budgets,
        threshold: Option<u64>,
    ) -> PreStep {
        budgets.conversation_busy_retries += 1;
        let attempt = budgets.conversation_busy_retries;
        // First try to attach to the in-flight run by otid (§2.5).
        let otid = policy::first_otid(input);
        let mut body = json!({"otid": otid, "starting_after": 0, "batch_size": RESUME_BATCH_SIZE});
        if self.config.conversation_id == "default" {
            body["agent_id"] = json!(self.config.agent_id);
        }
        let conv = self.config.conversation_id.clone();
        let started = (self.io.epoch_now_ms)();
        if let Ok(mut stream) = self.io.backend.stream_conversation(&conv, body).await {
            self.observe(Observation::ClientRecovery {
                kind: "busy_attach".into(),
                detail: otid.clone().unwrap_or_default(),
            });
            let ctx = self.request_context(input, started, otid);
            let d = self
                .drain_ctx(turn, &mut stream, &ctx, threshold, true)
                .await;
            if self.config.mode == Mode::Headless {
                budgets.reset_busy();
            }
            return PreStep::Drained(Box::new(d));
        }
        let delay = if self.config.bugs.unbounded_busy_retries {
            policy::CONVERSATION_BUSY_BASE_DELAY_MS
        } else {
            get_retry_delay_ms(DelayCategory::ConversationBusy, attempt, detail, None)
        };
        self.retry_event("busy", attempt, delay, detail);
        self.transcript.status(policy::CONVERSATION_BUSY_WAITING);
        if !self.wait(delay, true).await {
            return PreStep::Done(self.interrupted_outcome());
        }
        PreStep::Retry
    }

    /// Fetches the server's pending approvals and rebuilds the input with fresh stale denials;
    /// on fetch failure strips approval items and refreshes otids (letta-protocol.md §3.4).
    pub(super) async fn rebuild_with_server_denials(&mut self, input: &mut Vec<MessageItem>) {
        let data = self.server_resume_data(self.config.backfill).await;
        let mut otids = Vec::new();
        for _ in 0..input.len() + 1 {
            otids.push(self.otid());
        }
        if self.config.bugs.keeps_otids_on_rebuild {
            // The resent items first, in order, then the fresh ones.
            let kept = input
                .iter()
                .filter(|i| !matches!(i, MessageItem::Approval(_)))
                .filter_map(|i| i.otid().map(str::to_string));
            otids = kept.chain(otids).collect();
        }
        let mut it = otids.into_iter();
        let mut gen_otid = move || it.next().unwrap_or_default();
        match data {
            Ok(d) => {
                let server: Vec<ServerApproval> = d
                    .pending_approvals
                    .iter()
                    .map(|p| ServerApproval {
                        tool_call_id: p.tool_call_id.clone(),
                        tool_name: p.tool_name.clone(),
                    })
                    .collect();
                for p in &d.pending_approvals {
                    self.decision_event(
                        p,
                        &format!("deny: {STALE_APPROVAL_RECOVERY_DENIAL_REASON}"),
                        Origin::StaleRecovery,
                    );
                }
                *input = policy::rebuild_input_with_fresh_denials(
                    input,
                    &server,
                    STALE_APPROVAL_RECOVERY_DENIAL_REASON,
                    &mut gen_otid,
                );
            }
            Err(_) => *input = policy::strip_approvals_and_refresh(input, &mut gen_otid),
        }
    }

    /// Headless `resolveAllPendingApprovals` (letta-protocol.md §3.4): a denial-only request
    /// for every pending approval, drained, repeated until none (bounded).
    ///
    /// The published CLI drains each denial without the turn's abort signal, so a broken
    /// stream there is never resumed, and a drain that ends `error` or `cancelled` throws and
    /// ends the turn (`Approval drain ended with stop reason: …`, headless.ts in 0.32.18; the
    /// real CLI in the real-client sweep). The reference resumes that drain like any other
    /// and goes on. `Err` is the turn's error.
    pub(super) async fn resolve_all_pending(&mut self, turn: u32) -> Result<(), String> {
        let published = self.config.profile == Profile::LettaCode;
        for _ in 0..RESOLVE_ALL_MAX_ROUNDS {
            let Ok(data) = self.server_resume_data(self.config.backfill).await else {
                return Ok(());
            };
            if data.pending_approvals.is_empty() {
                return Ok(());
            }
            let server: Vec<ServerApproval> = data
                .pending_approvals
                .iter()
                .map(|p| ServerApproval {
                    tool_call_id: p.tool_call_id.clone(),
                    tool_name: p.tool_name.clone(),
                })
                .collect();
            for p in &data.pending_approvals {
                self.decision_event(
                    p,
                    &format!("deny: {STALE_APPROVAL_RECOVERY_DENIAL_REASON}"),
                    Origin::StaleRecovery,
                );
            }
            let input = vec![MessageItem::Approval(ApprovalCreate {
                kind: "approval".into(),
                approvals: policy::build_fresh_denial_approvals(
                    &server,
                    STALE_APPROVAL_RECOVERY_DENIAL_REASON,
                ),
                otid: Some(self.otid()),
            })];
            let body = self.request_body(&input);
            let started = (self.io.epoch_now_ms)();
            let Ok(mut stream) = self.send_with_shutdown_retry(&body, None).await else {
                return Ok(());
            };
            let ctx = self.request_context(&input, started, None);
            let d = self
                .drain_ctx(turn, &mut stream, &ctx, None, !published)
                .await;
            self.observe(Observation::ClientActedOn {
                run_id: d.last_run_id.clone(),
                stop_reason: d.stop_reason.as_str().into(),
                approvals: d.approvals.iter().map(|a| a.tool_call_id.clone()).collect(),
            });
            if self.crash_pending.is_some() || self.interrupt.aborted() {
                return Ok(());
            }
            if published && matches!(d.stop_reason, StopReason::Error | StopReason::Cancelled) {
                return Err(format!("{APPROVAL_DRAIN_ENDED}{}", d.stop_reason.as_str()));
            }
        }
        Ok(())
    }
}

/// The error a failed request ends its turn with: the server's detail, or a generic text when
/// it gave none.
pub(super) fn failed(detail: String) -> String {
    if detail.is_empty() {
        "request failed".into()
    } else {
        detail
    }
}
