//! Interrupts (letta-protocol.md §9): branch A (tools executing), branch B (streaming, or the
//! approval dialog open), the fire-and-forget cancel, and scripted crashes.

use crate::model::letta::client::approvals::{ApprovalResult, Decision, Origin};
use crate::model::letta::client::backend::Backend;
use crate::model::letta::client::policy::{self, USER_INTERRUPTED_THE_STREAM};
use crate::model::letta::client::stream_processor::Approval;
use crate::model::letta::client::{Client, Mode, Profile, QueuedResults, TurnOutcome};
use crate::model::port::observe::Observation;

impl<B: Backend> Client<B> {
    pub(super) fn interrupted_outcome(&self) -> TurnOutcome {
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
        let handle = self.io.spawner.spawn(async move {
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
    pub(super) async fn settle_cancel(&mut self) {
        if let Some(h) = self.pending_cancel.take() {
            let _ = self.io.clock.timeout(self.config.request_timeout, h).await;
        }
    }

    /// Branch B (streaming) after the drain ended `cancelled` (interactive), or SIGINT
    /// (headless: no HTTP call, nothing queued).
    pub(super) async fn on_stream_interrupted(&mut self, _turn: u32) -> TurnOutcome {
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
    pub(super) async fn on_dialog_interrupted(
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
    pub(super) fn on_tools_interrupted(
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

    /// A scripted crash: tell the harness, then wait for the host to be killed.
    pub(super) async fn crash_now(&mut self, plan: usize) -> TurnOutcome {
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
}
