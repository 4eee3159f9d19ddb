//! The turn loop: `processConversation` of the TUI (letta-protocol.md §3.4, §3.10, §4.5, §5.4,
//! §9.1) and its headless counterpart (§3.4 "Headless differences", §3.10 "Headless order").
//!
//! This file holds the loop and the submission it starts from; each step of the loop is a
//! child: `send_and_drain` (one request and its stream), `pre_stream` (errors before a stream,
//! §3.4), `approval_step` (deciding and running approvals, §5.4), `post_stream` (§3.10) and
//! `interrupts` (§9, and scripted crashes).

mod approval_step;
mod interrupts;
mod post_stream;
mod pre_stream;
mod send_and_drain;

use std::time::Duration;

use serde_json::json;

use self::approval_step::ApprovalStep;
use self::pre_stream::PreStep;
use super::approvals::{ApprovalResult, Decision, Origin, normalize_approval_results};
use super::backend::Backend;
use super::policy::{
    self, Budgets, INTERRUPT_REMINDER, STALE_APPROVAL_RECOVERY_DENIAL_REASON,
    USER_CANCELLED_NEW_MESSAGE_QUEUED,
};
use super::response_state::scope_key;
use super::stream_processor::Approval;
use super::{Client, Mode, Profile, TurnOutcome};
use crate::model::port::observe::Observation;
use crate::wire::letta::{
    ApprovalCreate, ApprovalItem, Content, MessageCreate, MessageItem, SendMessageRequest,
    StopReason,
};

/// The planted user-style denial that breaks `approval-attribution`.
pub const PLANTED_USER_STYLE_DENIAL: &str = "The user denied this tool call.";

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
            if policy::is_user_only(&input) {
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
                && let Err(o) = self
                    .confirm_arguments_with_server(&mut drained, &mut budgets)
                    .await
            {
                return o;
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

    /// Waits `ms`; `false` if the turn was aborted meanwhile. With `poll_100` the abort is
    /// polled every 100 ms (the busy wait, letta-protocol.md §3.4): an abort at `t` ms into
    /// the wait is seen at the first poll at or after it, `min(⌈t/100⌉·100, ms)`. The task
    /// sleeps until the abort or the end rather than waking every 100 ms, which gives those
    /// same instants and leaves the wait idle, so the simulation can skip it.
    async fn wait(&self, ms: u64, poll_100: bool) -> bool {
        if self.interrupt.aborted() {
            return false;
        }
        let start = self.io.clock.now_ms();
        let mut sig = self.interrupt.subscribe();
        tokio::select! {
            biased;
            _ = sig.wait_for(|s| s.0) => {
                if poll_100 {
                    let t = self.io.clock.now_ms().saturating_sub(start);
                    let seen = t
                        .div_ceil(policy::BUSY_WAIT_ABORT_POLL_MS)
                        .saturating_mul(policy::BUSY_WAIT_ABORT_POLL_MS)
                        .min(ms);
                    if seen > t {
                        self.io.clock.sleep(Duration::from_millis(seen - t)).await;
                    }
                }
                false
            }
            _ = self.io.clock.sleep(Duration::from_millis(ms)) => !self.interrupt.aborted(),
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
}
