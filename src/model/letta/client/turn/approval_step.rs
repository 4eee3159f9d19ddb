//! Deciding and running the approvals a run asked for (letta-protocol.md §5.4, TUI flow and
//! headless): classification, the human's answers, the open dialog, and the batch on the
//! workspace with simulated durations.

use std::sync::Arc;
use std::time::Duration;

use crate::model::letta::client::approval_batch::{self, LockScheme, ToolRun};
use crate::model::letta::client::approvals::{
    self, ApprovalResult, Classification, ClassifyOptions, Decision, HumanAnswer, Origin,
    classify_approvals, normalize_approval_results, resource_key,
};
use crate::model::letta::client::backend::Backend;
use crate::model::letta::client::policy::{
    self, HEADLESS_ASK_DENY_REASON, MISSING_NAME_REASON_HEADLESS, MISSING_NAME_REASON_TUI,
};
use crate::model::letta::client::stream_processor::Approval;
use crate::model::letta::client::{Client, CrashWhen, InterruptWhen, Mode, Profile, TurnOutcome};
use crate::model::port::observe::Observation;
use crate::model::tools::ToolStatus;
use crate::wire::letta::{ApprovalCreate, Content, MessageItem};

/// What approval handling decided.
pub(super) enum ApprovalStep {
    Send(Vec<MessageItem>, bool),
    Done(TurnOutcome),
}

impl<B: Backend> Client<B> {
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

    pub(super) async fn handle_approvals(
        &mut self,
        turn: u32,
        approvals: &[Approval],
    ) -> ApprovalStep {
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
        let (decisions, human_involved, unanswered) = self.decide(approvals, &c);
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

    /// Each approval decided: the classification's auto-denials (with their origin) and
    /// auto-approvals, the rest asked of the human. Returns the decisions, whether the human
    /// was asked, and the approvals the human left unanswered.
    fn decide(
        &mut self,
        approvals: &[Approval],
        c: &Classification,
    ) -> (Vec<Decision>, bool, Vec<Approval>) {
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
        (decisions, human_involved, unanswered)
    }

    /// Runs a batch on the workspace with simulated durations; returns results (in decision
    /// order, or completion order with the planted defect) and whether an interrupt cut it.
    pub(super) async fn execute_batch(
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
        let clock = self.io.clock.clone();
        let cwd = self.config.cwd.clone();
        let tool_ms = self.config.tool_ms.clone();
        let default_ms = self.config.default_tool_ms;
        let completion: Arc<std::sync::Mutex<Vec<usize>>> = Default::default();
        let done = completion.clone();
        let memo = (self.config.profile == Profile::Reference).then(|| self.tool_results.clone());
        let flip_status = self.config.bugs.flips_result_status;
        let runner = move |i: usize, a: Approval| {
            let workspace = workspace.clone();
            let observe = observe.clone();
            let interrupt = interrupt.clone();
            let clock = clock.clone();
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
                    _ = clock.sleep(Duration::from_millis(ms)) => true,
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
                let status = match (flip_status, outcome.status) {
                    (true, ToolStatus::Success) => ToolStatus::Error,
                    (true, ToolStatus::Error) => ToolStatus::Success,
                    (false, s) => s,
                };
                let run = ToolRun::Done {
                    tool_return: Content::Text(outcome.tool_return),
                    status: status.as_str().into(),
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
        let batch = approval_batch::execute_approval_batch(
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
                    _ = self.io.clock.sleep(Duration::from_millis(ms)) => {
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

    /// Invalid tool call ids: fetch the server's pending approvals and decide them
    /// (letta-protocol.md §3.4 "otherwise", §3.10 step 2).
    pub(super) async fn show_server_approvals(&mut self, turn: u32) -> Option<ApprovalStep> {
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
