//! The turn loop: `processConversation` of the TUI (letta-protocol.md §3.4, §3.10, §4.5, §5.4,
//! §9.1) and its headless counterpart (§3.4 "Headless differences", §3.10 "Headless order").

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::approvals::{
    self, ApprovalResult, ClassifyOptions, Decision, HumanAnswer, LockScheme, Origin, ToolRun,
    classify_approvals, normalize_approval_results, resource_key,
};
use super::backend::{Backend, Thrown};
use super::policy::{
    self, Budgets, CONVERSATION_BUSY_MAX_RETRIES, DelayCategory, HEADLESS_ASK_DENY_REASON,
    HeadlessPostStreamAction, HeadlessPostStreamInput, INTERRUPT_REMINDER, MAX_TRANSIENT_RETRIES,
    MISSING_NAME_REASON_HEADLESS, MISSING_NAME_REASON_TUI, PostStreamAction, PostStreamInput,
    PreStreamAction, RESUME_BATCH_SIZE, ResumePolicy, RunErrorMeta,
    STALE_APPROVAL_RECOVERY_DENIAL_REASON, ServerApproval, TransientOptions,
    USER_CANCELLED_NEW_MESSAGE_QUEUED, USER_INTERRUPTED_THE_STREAM, extract_conflict_detail,
    get_pre_stream_error_action, get_retry_delay_ms,
};
use super::response_state::scope_key;
use super::resume::{RequestContext, ResumeEnv, ResumeOptions, drain_stream_with_resume};
use super::stream::{DrainOptions, DrainResult};
use super::stream_processor::Approval;
use super::{Client, CrashWhen, InterruptWhen, Mode, Profile, QueuedResults, TurnOutcome};
use crate::model::port::observe::Observation;
use crate::wire::letta::{
    ApprovalCreate, ApprovalItem, Content, LettaChunk, MessageCreate, MessageItem,
    SendMessageRequest, StopReason,
};

/// Upper bound on the denial-only rounds of headless `resolveAllPendingApprovals` (the source
/// repeats "until none"; every loop is bounded, DESIGN.md §4 rule 5).
pub const RESOLVE_ALL_MAX_ROUNDS: u32 = 5;

/// "Forever" for the planted `waits_forever_on_silence` (ten years of simulated time).
const PLANTED_FOREVER_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// The planted busy budget that breaks `budget-respected`.
const PLANTED_BUSY_RETRIES: u32 = 5;

/// What the pre-stream handler decided.
enum PreStep {
    Retry,
    Drained(Box<DrainResult>),
    Done(TurnOutcome),
}

/// What approval handling decided.
enum ApprovalStep {
    Send(Vec<MessageItem>, bool),
    Done(TurnOutcome),
}

fn is_user_only(items: &[MessageItem]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|i| matches!(i, MessageItem::Message(m) if m.role == "user"))
}

fn has_approval(items: &[MessageItem]) -> bool {
    items.iter().any(|i| matches!(i, MessageItem::Approval(_)))
}

impl<B: Backend> Client<B> {
    /// One user turn.
    pub(super) async fn run_turn(&mut self, turn: u32, text: &str) -> TurnOutcome {
        self.settle_cancel().await;
        self.interrupt.reset();
        self.turn_chunks = 0;
        self.tools_batches = 0;
        self.override_model = None;
        let mut budgets = Budgets::default();
        let mut input = self.build_submission(turn, text).await;
        let mut threshold: Option<u64> = None;
        let mut reuse_allowed = false;
        for _ in 0..self.config.max_requests_per_turn {
            if is_user_only(&input) {
                self.last_user_only_input = Some(input.clone());
            }
            let scope = scope_key(&self.config.conversation_id, Some(&self.config.agent_id));
            let header = self.response_state.take_for_request(
                &scope,
                policy::is_approval_only(&input),
                reuse_allowed,
            );
            reuse_allowed = false;
            let body = self.request_body(&input);
            let started = (self.io.epoch_now_ms)();
            let drained = match self.send_with_shutdown_retry(&body, header).await {
                Ok(mut stream) => {
                    self.drain_stream(turn, &mut stream, &input, started, threshold)
                        .await
                }
                Err(thrown) => {
                    if self.interrupt.aborted() {
                        return self.interrupted_outcome();
                    }
                    match self
                        .pre_stream(turn, thrown, &mut input, &mut budgets, &mut threshold)
                        .await
                    {
                        PreStep::Retry => continue,
                        PreStep::Drained(d) => *d,
                        PreStep::Done(o) => return o,
                    }
                }
            };
            if let Some(i) = self.crash_pending.take() {
                return self.crash_now(i).await;
            }
            if self.config.mode == Mode::Interactive {
                threshold = match (threshold, drained.last_seq_id) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
            let mut drained = drained;
            if drained.stop_reason == StopReason::RequiresApproval
                && drained.approvals.is_empty()
                && self.config.profile == Profile::Reference
                // The planted defect loses the approvals inside this client; a client that
                // drops them has no reason to look for them either.
                && !self.config.bugs.drop_approvals_on_resume
            {
                self.recover_unseen_approvals(&mut drained).await;
            } else if drained.stop_reason == StopReason::RequiresApproval
                && self.config.profile == Profile::Reference
                // The planted braces fallback models a client that does not check (args-intact's
                // canary): the server's whole arguments would hide its torn ones.
                && !self.config.bugs.braces_args_fallback
            {
                self.confirm_arguments_with_server(&mut drained).await;
            }
            self.observe(Observation::ClientActedOn {
                run_id: drained.last_run_id.clone(),
                stop_reason: drained.stop_reason.as_str().into(),
                approvals: drained
                    .approvals
                    .iter()
                    .map(|a| a.tool_call_id.clone())
                    .collect(),
            });
            if self.interrupt.aborted() {
                return self.on_stream_interrupted(turn).await;
            }
            if drained.stop_reason == StopReason::Cancelled {
                // The server cancelled the run; nobody interrupted this turn.
                return TurnOutcome::Stopped("cancelled".into());
            }
            match drained.stop_reason {
                StopReason::EndTurn => {
                    budgets.reset();
                    return TurnOutcome::Stopped("end_turn".into());
                }
                StopReason::RequiresApproval => {
                    let approvals = std::mem::take(&mut drained.approvals);
                    match self.handle_approvals(turn, &approvals).await {
                        ApprovalStep::Send(items, reuse) => {
                            input = items;
                            reuse_allowed = reuse;
                            // A reentrant processConversation: a new threshold, same budgets.
                            threshold = None;
                            continue;
                        }
                        ApprovalStep::Done(o) => return o,
                    }
                }
                _ => {}
            }
            let step = match self.config.mode {
                Mode::Interactive => {
                    self.post_stream_interactive(
                        turn,
                        &drained,
                        &mut input,
                        &mut budgets,
                        &mut threshold,
                    )
                    .await
                }
                Mode::Headless => {
                    self.post_stream_headless(turn, &drained, &mut input, &mut budgets)
                        .await
                }
            };
            match step {
                Some(o) => return o,
                None => continue,
            }
        }
        TurnOutcome::Error(format!(
            "turn exceeded {} requests",
            self.config.max_requests_per_turn
        ))
    }

    // ---- the submission ---------------------------------------------------------------------

    fn user_message(&mut self, content: Content) -> MessageItem {
        // The published client sends the user turn without `type` (captures/letta_e2e, B.3).
        MessageItem::Message(MessageCreate {
            kind: None,
            role: "user".into(),
            content,
            otid: Some(self.otid()),
        })
    }

    fn decision_event(&self, a: &Approval, d: &str, origin: Origin) {
        self.observe(Observation::ClientDecision {
            tool_call_id: a.tool_call_id.clone(),
            tool: a.tool_name.clone(),
            decision: d.into(),
            origin: origin.as_str().into(),
        });
    }

    /// The next submission (letta-protocol.md §9.1 "Next submission", §6.4, §3.12): queued
    /// interrupt results, the open dialog's approvals denied because a new message was queued,
    /// stale approvals from start-up, interrupt recovery, then the user message.
    async fn build_submission(&mut self, turn: u32, text: &str) -> Vec<MessageItem> {
        let mut items: Vec<ApprovalItem> = Vec::new();
        if let Some(q) = self.queued.take()
            && q.conversation_id == self.config.conversation_id
            && q.generation == self.generation
        {
            let interrupted: Vec<String> = q
                .results
                .iter()
                .filter(|r| matches!(r, ApprovalResult::Tool { tool_return: Some(Content::Text(t)), .. } if t == policy::INTERRUPTED_BY_USER))
                .map(|r| r.tool_call_id().to_string())
                .collect();
            items.extend(normalize_approval_results(&q.results, &interrupted, false));
        }
        for a in std::mem::take(&mut self.open_dialog) {
            self.decision_event(
                &a,
                &format!("deny: {USER_CANCELLED_NEW_MESSAGE_QUEUED}"),
                Origin::UserCancel,
            );
            items.push(ApprovalItem::Approval {
                tool_call_id: a.tool_call_id,
                approve: false,
                reason: Some(USER_CANCELLED_NEW_MESSAGE_QUEUED.into()),
            });
        }
        let stale = std::mem::take(&mut self.stale_at_startup);
        let reason = if self.config.bugs.stale_denial_as_user {
            PLANTED_USER_STYLE_DENIAL
        } else {
            STALE_APPROVAL_RECOVERY_DENIAL_REASON
        };
        for s in &stale {
            let a = Approval {
                tool_call_id: s.tool_call_id.clone(),
                tool_name: s.tool_name.clone(),
                tool_args: String::new(),
                message_id: None,
            };
            self.decision_event(&a, &format!("deny: {reason}"), Origin::StaleRecovery);
        }
        items.extend(policy::build_fresh_denial_approvals(&stale, reason));
        let planted = std::mem::take(&mut self.planted_reexecute);
        if !planted.is_empty() {
            let decisions: Vec<Decision> = planted
                .iter()
                .map(|a| Decision::Approve {
                    approval: a.clone(),
                    comment: None,
                    origin: Origin::Policy,
                })
                .collect();
            for d in &decisions {
                self.decision_event(d.approval(), "allow", Origin::Policy);
            }
            let (results, _) = self.execute_batch(turn, &decisions).await;
            items.extend(normalize_approval_results(&results, &[], false));
        }
        let mut out = Vec::new();
        if !items.is_empty() {
            out.push(MessageItem::Approval(ApprovalCreate {
                kind: "approval".into(),
                approvals: items,
                otid: Some(self.otid()),
            }));
        }
        let recovering = self.interrupted_conversation.take().as_deref()
            == Some(self.config.conversation_id.as_str());
        if recovering {
            if let Some(old) = self.last_user_only_input.take() {
                for i in old {
                    let o = self.otid();
                    out.push(policy::with_otid(&i, o));
                }
            }
            self.observe(Observation::ClientRecovery {
                kind: "interrupt".into(),
                detail: "resend interrupted user messages with a reminder".into(),
            });
            let content = Content::Parts(vec![
                json!({"type": "text", "text": INTERRUPT_REMINDER}),
                json!({"type": "text", "text": text}),
            ]);
            let m = self.user_message(content);
            out.push(m);
        } else {
            let m = self.user_message(Content::Text(text.to_string()));
            out.push(m);
        }
        out
    }

    fn request_body(&self, messages: &[MessageItem]) -> SendMessageRequest {
        // Exactly the keys letta-code sends (letta-protocol.md §2.2).
        SendMessageRequest {
            messages: messages.to_vec(),
            streaming: true,
            stream_tokens: true,
            include_pings: true,
            background: true,
            client_skills: Vec::new(),
            client_tools: self.config.client_tools.clone(),
            include_compaction_messages: true,
            override_model: self.override_model.clone(),
            agent_id: (self.config.conversation_id == "default")
                .then(|| self.config.agent_id.clone()),
        }
    }

    // ---- waits --------------------------------------------------------------------------------

    /// Waits `ms`; `false` if the turn was aborted meanwhile. With `poll_100` the abort is
    /// polled every 100 ms (the busy wait, letta-protocol.md §3.4).
    async fn wait(&self, ms: u64, poll_100: bool) -> bool {
        if poll_100 {
            let mut left = ms;
            while left > 0 {
                if self.interrupt.aborted() {
                    return false;
                }
                let step = left.min(policy::BUSY_WAIT_ABORT_POLL_MS);
                tokio::time::sleep(Duration::from_millis(step)).await;
                left -= step;
            }
            return !self.interrupt.aborted();
        }
        let mut sig = self.interrupt.subscribe();
        tokio::select! {
            biased;
            _ = sig.wait_for(|s| s.0) => false,
            _ = tokio::time::sleep(Duration::from_millis(ms)) => !self.interrupt.aborted(),
        }
    }

    fn retry_event(&self, kind: &str, attempt: u32, delay_ms: u64, detail: &str) {
        self.retry_event_after(kind, attempt, delay_ms, detail, None);
    }

    fn retry_event_after(
        &self,
        kind: &str,
        attempt: u32,
        delay_ms: u64,
        detail: &str,
        retry_after_ms: Option<u64>,
    ) {
        self.observe(Observation::ClientRetry {
            kind: kind.into(),
            attempt,
            delay_ms,
            detail: detail.into(),
            retry_after_ms,
        });
    }

    // ---- send and drain ---------------------------------------------------------------------

    /// The send with the 503 `cloud_api_shutting_down` retry inside it (letta-protocol.md §3.3):
    /// up to 3 retries, same body and otids, delay Retry-After or 1000 ms.
    async fn send_with_shutdown_retry(
        &mut self,
        body: &SendMessageRequest,
        header: Option<String>,
    ) -> Result<B::Stream, Thrown> {
        let mut attempt = 0;
        loop {
            match self
                .io
                .backend
                .send_message(&self.config.conversation_id, body, header.clone())
                .await
            {
                Ok(s) => return Ok(s),
                Err(e)
                    if policy::is_cloud_shutdown_retryable(&e)
                        && attempt < policy::CLOUD_API_SHUTDOWN_MAX_RETRIES =>
                {
                    attempt += 1;
                    let ra = policy::error_header(&e, "retry-after").and_then(|v| {
                        policy::parse_retry_after_header_ms(v, (self.io.epoch_now_ms)())
                    });
                    let delay = ra.unwrap_or(policy::CLOUD_API_SHUTDOWN_DEFAULT_DELAY_MS);
                    self.retry_event_after(
                        "shutdown_503",
                        attempt,
                        delay,
                        &extract_conflict_detail(&e),
                        ra,
                    );
                    if !self.wait(delay, false).await {
                        return Err(policy::transport_error("The operation was aborted"));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn request_context(
        &self,
        input: &[MessageItem],
        started: u64,
        otid: Option<String>,
    ) -> RequestContext {
        RequestContext {
            conversation_id: self.config.conversation_id.clone(),
            // The server keeps the agent's default conversation under the agent id.
            resolved_conversation_id: if self.config.conversation_id == "default" {
                self.config.agent_id.clone()
            } else {
                self.config.conversation_id.clone()
            },
            agent_id: self.config.agent_id.clone(),
            stream_otid: otid.or_else(|| policy::stream_otid(input)),
            request_started_at_ms: started,
        }
    }

    /// Drains a stream with resume; runs the scripted interrupt and crash hooks on chunks.
    async fn drain_stream(
        &mut self,
        turn: u32,
        stream: &mut B::Stream,
        input: &[MessageItem],
        started: u64,
        threshold: Option<u64>,
    ) -> DrainResult {
        let ctx = self.request_context(input, started, None);
        self.drain_ctx(turn, stream, &ctx, threshold).await
    }

    async fn drain_ctx(
        &mut self,
        turn: u32,
        stream: &mut B::Stream,
        ctx: &RequestContext,
        threshold: Option<u64>,
    ) -> DrainResult {
        let opts = ResumeOptions {
            policy: match self.config.mode {
                Mode::Interactive => None,
                Mode::Headless => Some(ResumePolicy::HEADLESS),
            },
            drain: DrainOptions {
                threshold,
                eof_grace_ms: self.config.timers.eof_grace_ms,
                stall_ms: if self.config.bugs.waits_forever_on_silence {
                    PLANTED_FOREVER_MS
                } else {
                    self.config.timers.stall_ms
                },
                max_silence_ms: if self.config.bugs.waits_forever_on_silence {
                    PLANTED_FOREVER_MS
                } else {
                    self.config.timers.max_silence_ms
                },
                skip_cancel_tools_on_error: true,
                is_resume: false,
                consult_tool_returns: self.config.profile == Profile::Reference,
                drop_repeated_seq: self.config.profile == Profile::Reference,
                starting_after: None,
                stall_without_run_id_aborts: self.config.profile == Profile::Reference
                    && !self.config.bugs.waits_forever_on_silence,
                torn_args_end_the_read: self.config.profile == Profile::Reference,
                prior_approvals: Vec::new(),
            },
            planted_braces_args_fallback: self.config.bugs.braces_args_fallback,
            planted_resume_from_zero: self.config.bugs.resume_from_zero,
            keep_unresumed_approvals: self.config.profile == Profile::Reference,
        };
        let interrupt_at: Option<u32> = self.config.interrupts.iter().find_map(|p| match p.when {
            InterruptWhen::AfterChunk(n) if p.turn == turn => Some(n),
            _ => None,
        });
        let fired = self.io.progress.lock().unwrap().fired_crashes.clone();
        let crash_at: Option<(usize, u32)> =
            self.config
                .crashes
                .iter()
                .enumerate()
                .find_map(|(i, p)| match p.when {
                    CrashWhen::AfterChunk(n) if p.turn == turn && !fired.contains(&i) => {
                        Some((i, n))
                    }
                    _ => None,
                });
        let scope = scope_key(&self.config.conversation_id, Some(&self.config.agent_id));
        let mode = self.config.mode;
        let interrupt = self.interrupt.clone();
        let observe = self.io.observe.clone();
        let mut chunks = self.turn_chunks;
        let mut crash_now: Option<usize> = None;
        let mut interrupted_now = false;
        let cache = &mut self.response_state;
        let mut hook = |chunk: &LettaChunk, _: &super::stream_processor::Processed| {
            chunks += 1;
            cache.observe(&scope, chunk);
            if interrupt_at == Some(chunks) && !interrupted_now {
                interrupted_now = true;
                observe(Observation::ClientInterrupt {
                    turn,
                    during: "stream".into(),
                });
                if mode == Mode::Interactive {
                    // Branch B: bump abortGeneration, abort the controller.
                    interrupt.bump_generation();
                }
                interrupt.abort();
            }
            if let Some((i, n)) = crash_at
                && n == chunks
                && crash_now.is_none()
            {
                crash_now = Some(i);
                // Stop processing: the process is about to die.
                interrupt.bump_generation();
            }
        };
        let (mut result, info) = drain_stream_with_resume::<B>(
            stream,
            Some(ctx),
            &opts,
            ResumeEnv {
                backend: &self.io.backend,
                interrupt: &self.interrupt,
                transcript: &mut self.transcript,
                observe: &*self.io.observe,
                hook: &mut hook,
            },
        )
        .await;
        self.turn_chunks = chunks;
        if crash_now.is_some() {
            self.crash_pending = crash_now;
        }
        if self.config.bugs.drop_approvals_on_resume && info.attempts > 0 {
            result.approvals.clear();
        }
        result
    }

    // ---- pre-stream errors (§3.4) -------------------------------------------------------------

    async fn pre_stream(
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
                    self.resolve_all_pending(turn).await;
                    if let Some(i) = self.crash_pending.take() {
                        return PreStep::Done(self.crash_now(i).await);
                    }
                    PreStep::Retry
                }
            },
            PreStreamAction::RetryConversationBusy => {
                budgets.conversation_busy_retries += 1;
                let attempt = budgets.conversation_busy_retries;
                // First try to attach to the in-flight run by otid (§2.5).
                let otid = policy::first_otid(input);
                let mut body =
                    json!({"otid": otid, "starting_after": 0, "batch_size": RESUME_BATCH_SIZE});
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
                    let d = self.drain_ctx(turn, &mut stream, &ctx, *threshold).await;
                    if self.config.mode == Mode::Headless {
                        budgets.reset_busy();
                    }
                    return PreStep::Drained(Box::new(d));
                }
                let delay = if self.config.bugs.unbounded_busy_retries {
                    policy::CONVERSATION_BUSY_BASE_DELAY_MS
                } else {
                    get_retry_delay_ms(DelayCategory::ConversationBusy, attempt, &detail, None)
                };
                self.retry_event("busy", attempt, delay, &detail);
                self.transcript.status(policy::CONVERSATION_BUSY_WAITING);
                if !self.wait(delay, true).await {
                    return PreStep::Done(self.interrupted_outcome());
                }
                PreStep::Retry
            }
            PreStreamAction::RetryTransient => {
                budgets.llm_api_error_retries += 1;
                let attempt = budgets.llm_api_error_retries;
                let retry_after = policy::error_header(&thrown, "retry-after")
                    .and_then(|v| policy::parse_retry_after_header_ms(v, (self.io.epoch_now_ms)()));
                let delay = policy::get_transient_retry_delay_ms(attempt, &detail, retry_after);
                budgets.reset_busy();
                self.retry_event_after("transient", attempt, delay, &detail, retry_after);
                if !self.wait(delay, false).await {
                    return PreStep::Done(self.interrupted_outcome());
                }
                PreStep::Retry
            }
            PreStreamAction::Rethrow => {
                budgets.reset_busy();
                if has_approval(input)
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
                PreStep::Done(TurnOutcome::Error(if detail.is_empty() {
                    "request failed".into()
                } else {
                    detail
                }))
            }
        }
    }

    /// (reference) A `requires_approval` whose approval frames never arrived: the frame was
    /// lost where no numbered frame shows the gap (the local profile's one complete chunk per
    /// call, then seq-less stop frames). The server's pending approvals (§6 resume data) are
    /// what the run asks for; the published client stops with "Unexpected empty approvals"
    /// (difference 19).
    async fn recover_unseen_approvals(&mut self, drained: &mut DrainResult) {
        let Ok(data) = self.server_resume_data(self.config.backfill).await else {
            return;
        };
        if data.pending_approvals.is_empty() {
            return;
        }
        self.observe(Observation::ClientRecovery {
            kind: "unseen_approvals".into(),
            detail: data
                .pending_approvals
                .iter()
                .map(|a| a.tool_call_id.as_str())
                .collect::<Vec<_>>()
                .join(","),
        });
        drained.approvals = data.pending_approvals;
    }

    /// (reference) The arguments of each approval as the server stored them. The stop_reason
    /// and usage frames carry no seq_id, so a lost last numbered frame never shows as a gap:
    /// when it held the last fragment the arguments are torn (difference 18 replays it), but a
    /// lost fragment can also leave whole JSON that differs from what the server stored (a
    /// duplicated provider fragment dropped on the way). One `GET /v1/messages/{id}` per
    /// approval message settles it; the published client runs what it assembled (difference
    /// 21). A failed read keeps what the stream gave.
    async fn confirm_arguments_with_server(&mut self, drained: &mut DrainResult) {
        let mut messages: Vec<String> = Vec::new();
        for a in &drained.approvals {
            if let Some(m) = &a.message_id
                && !messages.contains(m)
            {
                messages.push(m.clone());
            }
        }
        for m in messages {
            let Ok(variants) = self.io.backend.retrieve_message(&m).await else {
                continue;
            };
            let stored: Vec<Approval> = variants
                .iter()
                .filter(|v| {
                    v.get("message_type").and_then(serde_json::Value::as_str)
                        == Some("approval_request_message")
                })
                .flat_map(super::resume_data::extract_approvals)
                .collect();
            for a in drained.approvals.iter_mut() {
                if let Some(s) = stored.iter().find(|s| s.tool_call_id == a.tool_call_id)
                    && s.tool_args != a.tool_args
                {
                    self.observe(Observation::ClientRecovery {
                        kind: "server_arguments".into(),
                        detail: a.tool_call_id.clone(),
                    });
                    a.tool_args = s.tool_args.clone();
                }
            }
        }
    }

    /// Fetches the server's pending approvals and rebuilds the input with fresh stale denials;
    /// on fetch failure strips approval items and refreshes otids (letta-protocol.md §3.4).
    async fn rebuild_with_server_denials(&mut self, input: &mut Vec<MessageItem>) {
        let data = self.server_resume_data(self.config.backfill).await;
        let mut otids = Vec::new();
        for _ in 0..input.len() + 1 {
            otids.push(self.otid());
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
    async fn resolve_all_pending(&mut self, turn: u32) {
        for _ in 0..RESOLVE_ALL_MAX_ROUNDS {
            let Ok(data) = self.server_resume_data(self.config.backfill).await else {
                return;
            };
            if data.pending_approvals.is_empty() {
                return;
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
                return;
            };
            let d = self
                .drain_stream(turn, &mut stream, &input, started, None)
                .await;
            self.observe(Observation::ClientActedOn {
                run_id: d.last_run_id.clone(),
                stop_reason: d.stop_reason.as_str().into(),
                approvals: d.approvals.iter().map(|a| a.tool_call_id.clone()).collect(),
            });
            if self.crash_pending.is_some() || self.interrupt.aborted() {
                return;
            }
        }
    }

    // ---- approvals (§5.4 TUI flow / headless) ---------------------------------------------------

    fn classify_options(&self) -> ClassifyOptions {
        let mut required = indexmap::IndexMap::new();
        for t in &self.config.client_tools {
            let keys: Vec<String> = t
                .parameters
                .as_ref()
                .and_then(|p| p.get("required"))
                .and_then(|r| r.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|k| k.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            if !keys.is_empty() {
                required.insert(t.name.clone(), keys);
            }
        }
        ClassifyOptions {
            treat_ask_as_deny: self.config.mode == Mode::Headless,
            deny_reason_for_ask: HEADLESS_ASK_DENY_REASON.into(),
            missing_name_reason: match self.config.mode {
                Mode::Headless => MISSING_NAME_REASON_HEADLESS.into(),
                Mode::Interactive => MISSING_NAME_REASON_TUI.into(),
            },
            require_args_for_auto_approve: true,
            required_args: required,
            // The planted braces fallback models a client that does not check (args-intact's
            // canary): it must reach the tool.
            deny_unparseable_args: self.config.profile == Profile::Reference
                && !self.config.bugs.braces_args_fallback,
        }
    }

    async fn handle_approvals(&mut self, turn: u32, approvals: &[Approval]) -> ApprovalStep {
        if approvals.is_empty() {
            return ApprovalStep::Done(TurnOutcome::Error(format!(
                "{} requires_approval",
                policy::UNEXPECTED_EMPTY_APPROVALS
            )));
        }
        let c = classify_approvals(
            approvals,
            &self.config.permissions,
            &self.classify_options(),
        );
        let mut decisions: Vec<Decision> = Vec::new();
        let mut human_involved = false;
        let mut unanswered: Vec<Approval> = Vec::new();
        for a in approvals {
            let id = &a.tool_call_id;
            if let Some(d) = c
                .auto_denied
                .iter()
                .find(|x| &x.approval.tool_call_id == id)
            {
                let origin = if a.tool_name.is_empty()
                    || d.missing_required_args.is_some()
                    || (d.permission.is_none() && d.args_parse == approvals::ArgsParse::ParseFailed)
                {
                    Origin::Incomplete
                } else if d.permission.as_ref().is_some_and(|p| {
                    matches!(
                        p.decision,
                        approvals::Permission::Ask | approvals::Permission::AlwaysAsk
                    )
                }) {
                    Origin::HeadlessAsk
                } else {
                    Origin::Policy
                };
                decisions.push(Decision::Deny {
                    approval: a.clone(),
                    reason: d.deny_reason.clone().unwrap_or_default(),
                    origin,
                });
            } else if c
                .auto_allowed
                .iter()
                .any(|x| &x.approval.tool_call_id == id)
            {
                decisions.push(Decision::Approve {
                    approval: a.clone(),
                    comment: None,
                    origin: Origin::Policy,
                });
            } else {
                human_involved = true;
                match self.human.answer() {
                    HumanAnswer::Approve => decisions.push(Decision::Approve {
                        approval: a.clone(),
                        comment: None,
                        origin: Origin::Human,
                    }),
                    HumanAnswer::ApproveWithComment(cm) => decisions.push(Decision::Approve {
                        approval: a.clone(),
                        comment: Some(cm),
                        origin: Origin::Human,
                    }),
                    HumanAnswer::Deny(r) => decisions.push(Decision::Deny {
                        approval: a.clone(),
                        reason: r,
                        origin: Origin::Human,
                    }),
                    HumanAnswer::Never => unanswered.push(a.clone()),
                }
            }
        }
        let interrupt_in_dialog = self
            .config
            .interrupts
            .iter()
            .any(|p| p.turn == turn && p.when == InterruptWhen::AwaitingApproval);
        if !unanswered.is_empty() && interrupt_in_dialog && self.config.mode == Mode::Interactive {
            return ApprovalStep::Done(
                self.on_dialog_interrupted(turn, approvals, decisions, unanswered)
                    .await,
            );
        }
        if !unanswered.is_empty() {
            for a in &unanswered {
                self.observe(Observation::ClientDecision {
                    tool_call_id: a.tool_call_id.clone(),
                    tool: a.tool_name.clone(),
                    decision: "await-human".into(),
                    origin: Origin::Human.as_str().into(),
                });
            }
            // The dialog stays open with every approval of the batch.
            self.open_dialog = approvals.to_vec();
            let first = &unanswered[0];
            return ApprovalStep::Done(TurnOutcome::Paused(format!(
                "waiting for a decision on {} ({})",
                first.tool_call_id, first.tool_name
            )));
        }
        for d in &decisions {
            self.decision_event(d.approval(), &d.describe(), d.origin());
        }
        self.tools_batches += 1;
        let (results, interrupted) = self.execute_batch(turn, &decisions).await;
        let fired = self.io.progress.lock().unwrap().fired_crashes.clone();
        if let Some(i) = self.config.crashes.iter().enumerate().position(|(i, p)| {
            p.turn == turn && p.when == CrashWhen::AfterTools && !fired.contains(&i)
        }) {
            return ApprovalStep::Done(self.crash_now(i).await);
        }
        if interrupted {
            return ApprovalStep::Done(self.on_tools_interrupted(&decisions, results));
        }
        let items = normalize_approval_results(&results, &[], false);
        let otid = self.otid();
        ApprovalStep::Send(
            vec![MessageItem::Approval(ApprovalCreate {
                kind: "approval".into(),
                approvals: items,
                otid: Some(otid),
            })],
            !human_involved,
        )
    }

    /// Runs a batch on the workspace with simulated durations; returns results (in decision
    /// order, or completion order with the planted defect) and whether an interrupt cut it.
    async fn execute_batch(
        &mut self,
        turn: u32,
        decisions: &[Decision],
    ) -> (Vec<ApprovalResult>, bool) {
        let scheme = if self.config.bugs.no_resource_locks {
            LockScheme::Unlocked
        } else {
            match self.config.profile {
                Profile::LettaCode => LockScheme::PerKey,
                Profile::Reference => LockScheme::GlobalExclusive,
            }
        };
        let interrupt_after: Option<u64> = if self.tools_batches == 1 {
            self.config.interrupts.iter().find_map(|p| match p.when {
                InterruptWhen::ToolsRunning { after_ms } if p.turn == turn => Some(after_ms),
                _ => None,
            })
        } else {
            None
        };
        let workspace = self.io.workspace.clone();
        let observe = self.io.observe.clone();
        let interrupt = self.interrupt.clone();
        let cwd = self.config.cwd.clone();
        let tool_ms = self.config.tool_ms.clone();
        let default_ms = self.config.default_tool_ms;
        let completion: Arc<std::sync::Mutex<Vec<usize>>> = Default::default();
        let done = completion.clone();
        let memo = (self.config.profile == Profile::Reference).then(|| self.tool_results.clone());
        let runner = move |i: usize, a: Approval| {
            let workspace = workspace.clone();
            let observe = observe.clone();
            let interrupt = interrupt.clone();
            let ms = tool_ms.get(&a.tool_name).copied().unwrap_or(default_ms);
            let key = resource_key(&a.tool_name, &a.tool_args, &cwd);
            let done = done.clone();
            let memo = memo.clone();
            async move {
                let known = memo
                    .as_ref()
                    .and_then(|m| m.lock().unwrap().get(&a.tool_call_id).cloned());
                if let Some(r) = known {
                    done.lock().unwrap().push(i);
                    observe(Observation::ClientRecovery {
                        kind: "reused_tool_result".into(),
                        detail: a.tool_call_id.clone(),
                    });
                    return r;
                }
                observe(Observation::ToolStarted {
                    tool_call_id: a.tool_call_id.clone(),
                    tool: a.tool_name.clone(),
                    arguments: a.tool_args.clone(),
                    resource_key: key,
                });
                let mut sig = interrupt.subscribe();
                let finished = tokio::select! {
                    biased;
                    _ = sig.wait_for(|s| s.0) => false,
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => true,
                };
                done.lock().unwrap().push(i);
                if !finished {
                    observe(Observation::ToolAborted {
                        tool_call_id: a.tool_call_id.clone(),
                    });
                    return ToolRun::Aborted;
                }
                let (outcome, executions) =
                    workspace
                        .lock()
                        .unwrap()
                        .execute(&a.tool_call_id, &a.tool_name, &a.tool_args);
                observe(Observation::ToolExecuted {
                    tool_call_id: a.tool_call_id.clone(),
                    tool: a.tool_name.clone(),
                    arguments: a.tool_args.clone(),
                    executions,
                    status: outcome.status.as_str().into(),
                });
                let run = ToolRun::Done {
                    tool_return: Content::Text(outcome.tool_return),
                    status: outcome.status.as_str().into(),
                    stdout: None,
                    stderr: None,
                };
                if let Some(m) = &memo {
                    m.lock()
                        .unwrap()
                        .insert(a.tool_call_id.clone(), run.clone());
                }
                run
            }
        };
        let check = self.interrupt.clone();
        let aborted = move || check.aborted();
        let batch = approvals::execute_approval_batch(
            decisions,
            &self.config.cwd,
            scheme,
            &aborted,
            runner,
        );
        tokio::pin!(batch);
        let mut interrupted = false;
        let mut results = match interrupt_after {
            Some(ms) => {
                tokio::select! {
                    biased;
                    r = &mut batch => r,
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => {
                        interrupted = true;
                        self.observe(Observation::ClientInterrupt { turn, during: "tools".into() });
                        self.interrupt.abort();
                        batch.await
                    }
                }
            }
            None => batch.await,
        };
        if self.config.bugs.results_in_completion_order {
            let order = completion.lock().unwrap().clone();
            let mut sorted: Vec<ApprovalResult> = Vec::new();
            for (i, d) in decisions.iter().enumerate() {
                if matches!(d, Decision::Deny { .. }) {
                    sorted.push(results[i].clone());
                }
            }
            for i in order {
                sorted.push(results[i].clone());
            }
            results = sorted;
        }
        (results, interrupted || self.interrupt.aborted())
    }

    // ---- interrupts (§9) ------------------------------------------------------------------------

    fn interrupted_outcome(&self) -> TurnOutcome {
        match self.config.mode {
            Mode::Interactive => TurnOutcome::Interrupted(policy::INTERRUPT_MESSAGE.into()),
            Mode::Headless => TurnOutcome::Interrupted("Interrupted by SIGINT".into()),
        }
    }

    fn cancel_fire_and_forget(&mut self) {
        // `cancelConversation(conversationId, or agentId for "default")` (§9.1).
        let target = if self.config.conversation_id == "default" {
            self.config.agent_id.clone()
        } else {
            self.config.conversation_id.clone()
        };
        let backend = self.io.backend.clone();
        let handle = tokio::spawn(async move {
            let _ = backend.cancel_conversation(&target).await;
        });
        // The reference does not release the next submission before the cancel settled (the
        // listener's rule, reference A.10.5); the published TUI's eager cancel is truly
        // fire-and-forget and can race the next message (docs/findings.md).
        if self.config.profile == Profile::Reference {
            self.pending_cancel = Some(handle);
        }
    }

    /// Waits (bounded) for a cancel the previous turn fired.
    async fn settle_cancel(&mut self) {
        if let Some(h) = self.pending_cancel.take() {
            let _ = tokio::time::timeout(self.config.request_timeout, h).await;
        }
    }

    /// Branch B (streaming) after the drain ended `cancelled` (interactive), or SIGINT
    /// (headless: no HTTP call, nothing queued).
    async fn on_stream_interrupted(&mut self, _turn: u32) -> TurnOutcome {
        if self.config.mode == Mode::Headless {
            return self.interrupted_outcome();
        }
        self.generation += 1;
        // Denials for the approvals of an open dialog (there is none while streaming in this
        // model; the queue is kept for its metadata check).
        let denials: Vec<ApprovalResult> = std::mem::take(&mut self.open_dialog)
            .iter()
            .map(|a| ApprovalResult::denial(&a.tool_call_id, USER_INTERRUPTED_THE_STREAM))
            .collect();
        if !denials.is_empty() {
            self.queued = Some(QueuedResults {
                conversation_id: self.config.conversation_id.clone(),
                generation: self.generation,
                results: denials,
            });
        }
        self.interrupted_conversation = Some(self.config.conversation_id.clone());
        self.cancel_fire_and_forget();
        self.interrupted_outcome()
    }

    /// Branch B while the approval dialog waits (letta-protocol.md §9.1): queue the
    /// auto-handled results (the TUI ran the auto-allowed tools before it opened the dialog),
    /// the auto-denials, and "User interrupted the stream" denials for the approvals awaiting
    /// the user, in approval order; clear the dialog; fire-and-forget cancel.
    async fn on_dialog_interrupted(
        &mut self,
        turn: u32,
        approvals: &[Approval],
        decisions: Vec<Decision>,
        unanswered: Vec<Approval>,
    ) -> TurnOutcome {
        self.observe(Observation::ClientInterrupt {
            turn,
            during: "approval".into(),
        });
        for d in &decisions {
            self.decision_event(d.approval(), &d.describe(), d.origin());
        }
        let (results, _) = self.execute_batch(turn, &decisions).await;
        let mut queued = Vec::new();
        for a in approvals {
            if let Some(i) = decisions
                .iter()
                .position(|d| d.approval().tool_call_id == a.tool_call_id)
            {
                queued.push(results[i].clone());
            } else if unanswered.iter().any(|u| u.tool_call_id == a.tool_call_id) {
                self.decision_event(
                    a,
                    &format!("deny: {USER_INTERRUPTED_THE_STREAM}"),
                    Origin::Interrupt,
                );
                queued.push(ApprovalResult::denial(
                    &a.tool_call_id,
                    USER_INTERRUPTED_THE_STREAM,
                ));
            }
        }
        self.generation += 1;
        self.queued = Some(QueuedResults {
            conversation_id: self.config.conversation_id.clone(),
            generation: self.generation,
            results: queued,
        });
        self.interrupt.bump_generation();
        self.interrupted_conversation = Some(self.config.conversation_id.clone());
        self.cancel_fire_and_forget();
        self.interrupted_outcome()
    }

    /// Branch A (tools executing, letta-protocol.md §9.1): abort the tools, bump the
    /// generation, queue results for the next send, fire-and-forget cancel. The published
    /// client queues "Interrupted by user" for every executing tool unless the batch had
    /// completed; the reference keeps the real results of tools that finished.
    fn on_tools_interrupted(
        &mut self,
        decisions: &[Decision],
        results: Vec<ApprovalResult>,
    ) -> TurnOutcome {
        if self.config.mode == Mode::Headless {
            // Tool results produced after an interrupt are not sent (§9.2).
            return self.interrupted_outcome();
        }
        self.generation += 1;
        let queued: Vec<ApprovalResult> = decisions
            .iter()
            .zip(results)
            .map(|(d, r)| match (d, self.config.profile) {
                (Decision::Deny { .. }, _) => r,
                (Decision::Approve { approval, .. }, Profile::LettaCode) => {
                    ApprovalResult::interrupted(&approval.tool_call_id)
                }
                (Decision::Approve { .. }, Profile::Reference) => r,
            })
            .collect();
        self.queued = Some(QueuedResults {
            conversation_id: self.config.conversation_id.clone(),
            generation: self.generation,
            results: queued,
        });
        self.interrupt.bump_generation();
        self.transcript.mark_incomplete(policy::INTERRUPTED_BY_USER);
        self.interrupted_conversation = Some(self.config.conversation_id.clone());
        self.cancel_fire_and_forget();
        self.interrupted_outcome()
    }

    // ---- crashes ----------------------------------------------------------------------------------

    /// A scripted crash: tell the harness, then wait for the host to be killed.
    async fn crash_now(&mut self, plan: usize) -> TurnOutcome {
        self.io.progress.lock().unwrap().fired_crashes.push(plan);
        match self.io.crash.clone() {
            Some(crash) => {
                crash();
                std::future::pending::<()>().await;
                TurnOutcome::Crashed
            }
            None => TurnOutcome::Crashed,
        }
    }

    // ---- post-stream (§3.10) ----------------------------------------------------------------------

    async fn run_error_meta(&self, run_id: Option<&str>) -> Option<RunErrorMeta> {
        let run = self.io.backend.retrieve_run(run_id?).await.ok()?;
        RunErrorMeta::from_run(&run)
    }

    fn fallback_detail(d: &DrainResult) -> String {
        d.fallback_error
            .clone()
            .or_else(|| {
                d.error_info
                    .as_ref()
                    .map(|e| e.detail.clone().unwrap_or_else(|| e.message.clone()))
            })
            .unwrap_or_default()
    }

    /// The empty-response retry of both post-stream orders (letta-protocol.md §3.7): wait,
    /// then resend with fresh otids, the second retry with a nudge. `false`: interrupted while
    /// waiting.
    async fn empty_response_retry(
        &mut self,
        input: &mut Vec<MessageItem>,
        attempt: u32,
        delay_ms: u64,
        nudge: bool,
        line: &str,
    ) -> bool {
        self.retry_event("empty_response", attempt, delay_ms, line);
        if !self.wait(delay_ms, false).await {
            return false;
        }
        if nudge {
            let o = self.otid();
            input.push(MessageItem::Message(MessageCreate {
                kind: Some("message".into()),
                role: "system".into(),
                content: Content::Text(policy::EMPTY_RESPONSE_NUDGE.into()),
                otid: Some(o),
            }));
        }
        *input = self.refresh(input);
        true
    }

    fn refresh(&mut self, input: &[MessageItem]) -> Vec<MessageItem> {
        let mut otids: Vec<String> = (0..input.len()).map(|_| self.otid()).collect();
        otids.reverse();
        policy::refresh_input_otids_for_new_request(input, &mut || otids.pop().unwrap_or_default())
    }

    /// The TUI's post-stream order (letta-protocol.md §3.10). `None`: loop again.
    async fn post_stream_interactive(
        &mut self,
        turn: u32,
        d: &DrainResult,
        input: &mut Vec<MessageItem>,
        budgets: &mut Budgets,
        threshold: &mut Option<u64>,
    ) -> Option<TurnOutcome> {
        let line = Self::fallback_detail(d);
        let meta = self.run_error_meta(d.last_run_id.as_deref()).await;
        let retriable = policy::is_retriable_error(&d.stop_reason, meta.as_ref(), &line);
        let ps = PostStreamInput {
            stop_reason: Some(d.stop_reason.clone()),
            run_detail: meta.as_ref().and_then(|m| m.detail.clone()),
            error_line: Some(line.clone()),
            payload_had_approval: has_approval(input),
            retriable,
            hosted: true,
            auto_swap_enabled: true,
            on_letta_auto: self.override_model.as_deref() == Some(policy::LETTA_AUTO_MODEL),
            local_persisted_state: false,
        };
        let faithful = self.config.profile == Profile::LettaCode;
        match policy::post_stream_action(&ps, budgets) {
            PostStreamAction::ShowServerApprovals => match self.show_server_approvals(turn).await {
                Some(ApprovalStep::Send(items, _)) => {
                    *input = items;
                    None
                }
                Some(ApprovalStep::Done(o)) => Some(o),
                None => Some(TurnOutcome::Error(line)),
            },
            PostStreamAction::ResolveApprovalPending => {
                self.retry_event("approval_pending", budgets.llm_api_error_retries, 0, &line);
                self.rebuild_with_server_denials(input).await;
                self.transcript.interrupted = false;
                // The published client keeps the threshold into the new run (§10.3 item 1).
                if !faithful {
                    *threshold = None;
                }
                None
            }
            PostStreamAction::QuotaAutoSwap => {
                self.retry_event("quota_swap", 1, 0, &line);
                self.override_model = Some(policy::LETTA_AUTO_MODEL.into());
                if faithful {
                    // "Keep going." without an otid, the old otids kept (§10.3 item 2).
                    input.push(MessageItem::Message(MessageCreate {
                        kind: Some("message".into()),
                        role: "user".into(),
                        content: Content::Text(policy::KEEP_GOING.into()),
                        otid: None,
                    }));
                } else {
                    input.push(MessageItem::Message(MessageCreate {
                        kind: Some("message".into()),
                        role: "user".into(),
                        content: Content::Text(policy::KEEP_GOING.into()),
                        otid: None,
                    }));
                    *input = self.refresh(input);
                    *threshold = None;
                }
                None
            }
            PostStreamAction::EmptyResponseRetry {
                delay_ms,
                attempt,
                nudge,
            } => {
                if !self
                    .empty_response_retry(input, attempt, delay_ms, nudge, &line)
                    .await
                {
                    return Some(self.interrupted_outcome());
                }
                if !faithful {
                    *threshold = None;
                }
                None
            }
            PostStreamAction::TransientRetry {
                delay_ms, attempt, ..
            } => {
                self.retry_event("post_stream", attempt, delay_ms, &line);
                if !self.wait(delay_ms, false).await {
                    return Some(self.interrupted_outcome());
                }
                *input = self.refresh(input);
                // "new run starts from seq_id 1" (§4.5).
                *threshold = None;
                None
            }
            PostStreamAction::Fail => {
                self.transcript.mark_incomplete(policy::STREAM_ERROR);
                Some(stream_error_outcome(d, &line))
            }
        }
    }

    /// The headless post-stream order (letta-protocol.md §3.10). `None`: loop again.
    async fn post_stream_headless(
        &mut self,
        turn: u32,
        d: &DrainResult,
        input: &mut Vec<MessageItem>,
        budgets: &mut Budgets,
    ) -> Option<TurnOutcome> {
        let line = Self::fallback_detail(d);
        let reference = self.config.profile == Profile::Reference;
        // The published CLI first reads the run's error detail on its own
        // (`fetchRunErrorDetail`) and prefers it to the stream's error text in the checks
        // below; then it reads the run again for the retry decision and once more before a
        // cancel: three lookups where the reference makes two (difference 17; the real CLI's
        // request log in tests/interop_cli.rs flow 7).
        let error_line = if reference {
            line.clone()
        } else {
            match self.run_error_meta(d.last_run_id.as_deref()).await {
                Some(RunErrorMeta {
                    detail: Some(detail),
                    ..
                }) => detail,
                _ => line.clone(),
            }
        };
        // The published CLI does not recover from an in-band approval conflict
        // (captures/letta_e2e flow d3); the reference raises the flag.
        let flag = reference
            && policy::is_approval_pending_error(&serde_json::Value::String(line.clone()));
        let meta = if d.stop_reason == StopReason::LlmApiError && !reference {
            None
        } else {
            self.run_error_meta(d.last_run_id.as_deref()).await
        };
        let hi = HeadlessPostStreamInput {
            stop_reason: Some(d.stop_reason.clone()),
            approval_pending_flag: flag,
            error_line: Some(error_line),
            honour_retryable_false: reference,
            run_meta: meta,
            empty_response_step: reference,
        };
        match policy::headless_post_stream_action(&hi, budgets) {
            HeadlessPostStreamAction::ResolveAllPendingApprovals => {
                self.observe(Observation::ClientRecovery {
                    kind: "approval_pending".into(),
                    detail: policy::APPROVAL_PENDING_RECOVERY_NOTICE.into(),
                });
                self.resolve_all_pending(turn).await;
                if let Some(i) = self.crash_pending.take() {
                    return Some(self.crash_now(i).await);
                }
                // The conflicted request never started a run: resend it as a new request.
                *input = self.refresh(input);
                None
            }
            HeadlessPostStreamAction::Retry { delay_ms, attempt } => {
                self.retry_event("post_stream", attempt, delay_ms, &line);
                if !self.wait(delay_ms, false).await {
                    return Some(self.interrupted_outcome());
                }
                *input = self.refresh(input);
                None
            }
            HeadlessPostStreamAction::EmptyResponseRetry {
                delay_ms,
                attempt,
                nudge,
            } => {
                if !self
                    .empty_response_retry(input, attempt, delay_ms, nudge, &line)
                    .await
                {
                    return Some(self.interrupted_outcome());
                }
                None
            }
            HeadlessPostStreamAction::ApprovalResync => {
                self.rebuild_with_server_denials(input).await;
                if input.is_empty() {
                    return Some(TurnOutcome::Error(policy::APPROVAL_RESYNC_EMPTY.into()));
                }
                None
            }
            HeadlessPostStreamAction::Done => Some(TurnOutcome::Stopped("end_turn".into())),
            HeadlessPostStreamAction::ExecuteApprovals => None,
            HeadlessPostStreamAction::Fail => {
                // An unrecoverable stream error with the run still active: cancel it (B.5.6).
                if d.stop_reason == StopReason::Error
                    && let Some(run_id) = &d.last_run_id
                    && let Ok(run) = self.io.backend.retrieve_run(run_id).await
                    && matches!(
                        run.get("status").and_then(|s| s.as_str()),
                        Some("created" | "running")
                    )
                {
                    let _ = self
                        .io
                        .backend
                        .cancel_run(&self.config.agent_id, run_id)
                        .await;
                }
                Some(stream_error_outcome(d, &line))
            }
        }
    }

    /// Invalid tool call ids: fetch the server's pending approvals and decide them
    /// (letta-protocol.md §3.4 "otherwise", §3.10 step 2).
    async fn show_server_approvals(&mut self, turn: u32) -> Option<ApprovalStep> {
        let data = self.server_resume_data(false).await.ok()?;
        if data.pending_approvals.is_empty() {
            return None;
        }
        self.observe(Observation::ClientRecovery {
            kind: "server_approvals".into(),
            detail: data
                .pending_approvals
                .iter()
                .map(|p| p.tool_call_id.clone())
                .collect::<Vec<_>>()
                .join(","),
        });
        Some(self.handle_approvals(turn, &data.pending_approvals).await)
    }
}

/// The planted user-style denial that breaks `approval-attribution`.
pub const PLANTED_USER_STYLE_DENIAL: &str = "The user denied this tool call.";

/// A turn that ends on a stream error: `stop_reason=<reason> (<detail>)`.
fn stream_error_outcome(d: &DrainResult, line: &str) -> TurnOutcome {
    TurnOutcome::Error(format!(
        "stop_reason={}{}",
        d.stop_reason.as_str(),
        if line.is_empty() {
            String::new()
        } else {
            format!(" ({line})")
        }
    ))
}
