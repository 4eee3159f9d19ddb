//! One request of the turn and its stream: the send with the 503 `cloud_api_shutting_down`
//! retry inside it (letta-protocol.md §3.3), the drain with resume (§4.4) and the scripted
//! interrupt and crash hooks on chunks, and the reference's checks of what a stream that asked
//! for approvals delivered.

use crate::model::letta::client::backend::{Backend, Thrown};
use crate::model::letta::client::policy::Budgets;
use crate::model::letta::client::policy::{self, ResumePolicy, extract_conflict_detail};
use crate::model::letta::client::response_state::scope_key;
use crate::model::letta::client::resume::{
    RequestContext, ResumeEnv, ResumeOptions, drain_stream_with_resume,
};
use crate::model::letta::client::stream::{DrainOptions, DrainResult};
use crate::model::letta::client::stream_processor::{Approval, Processed};
use crate::model::letta::client::{Client, CrashWhen, InterruptWhen, Mode, Profile, TurnOutcome};
use crate::model::port::observe::Observation;
use crate::wire::letta::{LettaChunk, MessageItem, SendMessageRequest};

/// "Forever" for the planted `waits_forever_on_silence` (ten years of simulated time).
const PLANTED_FOREVER_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

impl<B: Backend> Client<B> {
    /// The send with the 503 `cloud_api_shutting_down` retry inside it (letta-protocol.md §3.3):
    /// up to 3 retries, same body and otids, delay Retry-After or 1000 ms.
    pub(super) async fn send_with_shutdown_retry(
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

    pub(crate) fn request_context(
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
    pub(super) async fn drain_stream(
        &mut self,
        turn: u32,
        stream: &mut B::Stream,
        input: &[MessageItem],
        started: u64,
        threshold: Option<u64>,
    ) -> DrainResult {
        let ctx = self.request_context(input, started, None);
        self.drain_ctx(turn, stream, &ctx, threshold, true).await
    }

    /// The options of a drain with resume: the profile's stream checks, the configured timers
    /// (or the planted wait forever), the headless resume policy.
    fn resume_options(&self, threshold: Option<u64>) -> ResumeOptions {
        ResumeOptions {
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
        }
    }

    /// `with_abort_signal`: the caller passes the turn's abort signal, without which
    /// `drainStreamWithResume` never resumes (`canResume` needs it; letta-protocol.md §4.4
    /// step 5). The stall reconciler still reads the request's otid either way.
    pub(super) async fn drain_ctx(
        &mut self,
        turn: u32,
        stream: &mut B::Stream,
        ctx: &RequestContext,
        threshold: Option<u64>,
        with_abort_signal: bool,
    ) -> DrainResult {
        let mut opts = self.resume_options(threshold);
        // The published CLI ends a read that stayed silent for the whole stall window without
        // a run id when its request carried an otid, and resumes by that otid
        // (stream-stall-reconciler.ts `canResumeWithoutRunId: Boolean(requestContext?.otid)`,
        // 0.32.18); the reference ends it regardless (`stall_without_run_id_aborts`).
        if self.config.profile == Profile::LettaCode
            && ctx.stream_otid.is_some()
            && !self.config.bugs.waits_forever_on_silence
        {
            opts.drain.stall_without_run_id_aborts = true;
        }
        let ignores = self.config.bugs.ignores_chunk_faults;
        let interrupt_at: Option<u32> = self.config.interrupts.iter().find_map(|p| match p.when {
            InterruptWhen::AfterChunk(n) if p.turn == turn && !ignores => Some(n),
            _ => None,
        });
        let fired = self.io.progress.lock().unwrap().fired_crashes.clone();
        let crash_at: Option<(usize, u32)> =
            self.config
                .crashes
                .iter()
                .enumerate()
                .find_map(|(i, p)| match p.when {
                    CrashWhen::AfterChunk(n)
                        if p.turn == turn && !fired.contains(&i) && !ignores =>
                    {
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
        let mut hook = |chunk: &LettaChunk, _: &Processed| {
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
            with_abort_signal.then_some(ctx),
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

    /// (reference) A `requires_approval` whose approval frames never arrived: the frame was
    /// lost where no numbered frame shows the gap (the local profile's one complete chunk per
    /// call, then seq-less stop frames). The server's pending approvals (§6 resume data) are
    /// what the run asks for; the published client stops with "Unexpected empty approvals"
    /// (difference 19).
    pub(super) async fn recover_unseen_approvals(&mut self, drained: &mut DrainResult) {
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
    /// 21). A server that answers it holds no such message (404/422) leaves the stream's
    /// arguments standing. A read that fails is retried as a pre-stream transient error, on the
    /// turn's shared budget and with its delays (letta-protocol.md §3.4, §3.9); when the budget
    /// is spent or the error is not retryable, the turn ends in that error and nothing runs: a
    /// tool never runs on arguments the server could not be asked to confirm. An interrupt
    /// during the wait stops the check and leaves the aborted turn to its caller.
    pub(super) async fn confirm_arguments_with_server(
        &mut self,
        drained: &mut DrainResult,
        budgets: &mut Budgets,
    ) -> Result<(), TurnOutcome> {
        let mut messages: Vec<String> = Vec::new();
        for a in &drained.approvals {
            if let Some(m) = &a.message_id
                && !messages.contains(m)
            {
                messages.push(m.clone());
            }
        }
        for m in messages {
            let variants = loop {
                let thrown = match self.io.backend.retrieve_message(&m).await {
                    Ok(v) => break v,
                    Err(thrown) => thrown,
                };
                let status = policy::error_status(&thrown);
                // The server answered that it holds no such message (letta-protocol.md §6.3:
                // 404/422 → no variants): nothing to confirm against; the stream's arguments stand.
                if matches!(status, Some(404 | 422)) {
                    break Vec::new();
                }
                let detail = extract_conflict_detail(&thrown);
                let retryable = policy::should_retry_pre_stream_transient_error(status, &detail);
                if !retryable || !budgets.llm_budget_left() {
                    return Err(TurnOutcome::Error(super::pre_stream::failed(detail)));
                }
                if !self.wait_transient_retry(&thrown, &detail, budgets).await {
                    return Ok(());
                }
            };
            let stored: Vec<Approval> = variants
                .iter()
                .filter(|v| {
                    v.get("message_type").and_then(serde_json::Value::as_str)
                        == Some("approval_request_message")
                })
                .flat_map(crate::model::letta::client::resume_data::extract_approvals)
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
        Ok(())
    }
}
