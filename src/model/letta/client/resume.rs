//! Mid-stream resume (letta-protocol.md §4.4, §2.5-2.6): run id discovery, `canResume`, the
//! resume loop with its policy, the approval merge after a successful resume, and
//! `isReplayableRun`.

use std::time::Duration;

use serde_json::{Value, json};

use super::backend::{Backend, BackendLookup};
use super::policy::{
    RESUME_BATCH_SIZE, RESUMED_STREAM_ENDED_UNEXPECTEDLY, RUN_DISCOVERY_TIMEOUT_MS, ResumePolicy,
    is_approval_pending_conflict,
};
use super::stream::{DrainOptions, DrainResult, Interrupt, Transcript, drain, mark_stream_error};
use super::stream_processor::{Approval, merge_approvals};
use crate::model::port::observe::Observation;
use crate::wire::letta::StopReason;

/// Where a resume reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeSource {
    Run(String),
    Otid(String),
}

/// What the request that produced the stream looked like.
#[derive(Debug, Clone, Default)]
pub struct RequestContext {
    /// As addressed: `default` or a conversation id.
    pub conversation_id: String,
    /// The conversation `default` resolves to (the agent's default conversation).
    pub resolved_conversation_id: String,
    pub agent_id: String,
    /// The otid of the first message item (letta-protocol.md §2.4).
    pub stream_otid: Option<String>,
    /// Epoch ms when the send began (timestamp discovery's lower bound, §2.6).
    pub request_started_at_ms: u64,
}

/// Knobs of [`drain_stream_with_resume`].
#[derive(Debug, Clone)]
pub struct ResumeOptions {
    /// `None`: the TUI/listener (one immediate attempt, never `replayGenericError`).
    pub policy: Option<ResumePolicy>,
    pub drain: DrainOptions,
    /// Planted defect (breaks `args-intact`): an approval with no arguments yet contributes
    /// `"{}"` to the prefix + suffix merge, the bug upstream fixed in `7f5029629`.
    pub planted_braces_args_fallback: bool,
    /// Planted defect (breaks `stream-gapless`): resume from seq 0 with no threshold.
    pub planted_resume_from_zero: bool,
    /// Keep originals the resume did not mention (the reference; see [`merge_after_resume`]).
    pub keep_unresumed_approvals: bool,
}

/// Resume bookkeeping for the trace and the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResumeInfo {
    pub attempts: u32,
    pub source: Option<ResumeSource>,
    pub skip_reason: Option<&'static str>,
}

/// `isReplayableRun(run)` (letta-protocol.md §4.4 step 6).
pub fn is_replayable_run(run: &Value) -> bool {
    if run.pointer("/metadata/error").is_some_and(|e| !e.is_null()) {
        return false;
    }
    match run.get("status").and_then(Value::as_str) {
        Some("created" | "running") => true,
        Some("completed") => !matches!(
            run.get("stop_reason").and_then(Value::as_str),
            Some("error" | "llm_api_error")
        ),
        _ => false,
    }
}

/// Epoch ms of an ISO 8601 timestamp (`2026-11-30T00:46:19.402295Z`, `…+00:00`); `None` when
/// unparseable (discovery counts that as 0, §2.6).
pub fn parse_iso8601_ms(s: &str) -> Option<u64> {
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let (y, m, dd): (i64, u32, u32) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    let (clock, offset_ms): (&str, i64) = if let Some(c) = time.strip_suffix('Z') {
        (c, 0)
    } else if let Some(pos) = time.rfind(['+', '-']) {
        let (c, off) = time.split_at(pos);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let mut hm = off[1..].split(':');
        let h: i64 = hm.next()?.parse().ok()?;
        let mi: i64 = hm.next().unwrap_or("0").parse().ok()?;
        (c, sign * (h * 3600 + mi * 60) * 1000)
    } else {
        (time, 0)
    };
    let mut parts = clock.split(':');
    let h: u64 = parts.next()?.parse().ok()?;
    let mi: u64 = parts.next()?.parse().ok()?;
    let sec_str = parts.next().unwrap_or("0");
    let (sec, frac) = sec_str.split_once('.').unwrap_or((sec_str, ""));
    let sec: u64 = sec.parse().ok()?;
    let ms: u64 = format!("{:0<3}", &frac[..frac.len().min(3)])
        .parse()
        .unwrap_or(0);
    let days = super::policy::days_from_civil(y, m, dd);
    let t = days * 86_400_000 + (h * 3600 + mi * 60 + sec) as i64 * 1000 + ms as i64 - offset_ms;
    u64::try_from(t).ok()
}

/// `discoverFallbackRunIdForResume` (letta-protocol.md §2.6): the latest running run created
/// at or after the request start, conversation-scoped first, then by agent; 5 s for the whole
/// discovery.
pub async fn discover_fallback_run_id<B: Backend>(
    backend: &B,
    ctx: &RequestContext,
) -> Option<String> {
    let mut queries: Vec<(String, String)> = Vec::new();
    if ctx.conversation_id != "default" {
        queries.push(("conversation_id".into(), ctx.conversation_id.clone()));
        if ctx.resolved_conversation_id != ctx.conversation_id {
            queries.push((
                "conversation_id".into(),
                ctx.resolved_conversation_id.clone(),
            ));
        }
    } else {
        queries.push((
            "conversation_id".into(),
            ctx.resolved_conversation_id.clone(),
        ));
    }
    if !ctx.agent_id.is_empty() {
        queries.push(("agent_id".into(), ctx.agent_id.clone()));
    }
    let work = async {
        for (k, v) in queries {
            let q = vec![
                (k, v),
                ("statuses".into(), "running".into()),
                ("order".into(), "desc".into()),
                ("limit".into(), "1".into()),
            ];
            let Ok(runs) = backend.list_runs(q).await else {
                continue;
            };
            for r in runs {
                let Some(id) = r.get("id").and_then(Value::as_str) else {
                    continue;
                };
                let created = r
                    .get("created_at")
                    .and_then(Value::as_str)
                    .and_then(parse_iso8601_ms)
                    .unwrap_or(0);
                if r.get("status").and_then(Value::as_str) == Some("running")
                    && created >= ctx.request_started_at_ms
                {
                    return Some(id.to_string());
                }
            }
        }
        None
    };
    backend
        .clock()
        .timeout(Duration::from_millis(RUN_DISCOVERY_TIMEOUT_MS), work)
        .await
        .ok()
        .flatten()
}

/// The merge after a successful resume (letta-protocol.md §4.4 step 8). Returns the stop reason
/// and approvals to act on.
///
/// `keep_unresumed` (the reference): an original the resume did not mention is kept, in
/// stream order. The published client drops it (§4.4 step 8 case 2), although a call complete
/// before the cut is not replayed after `starting_after` and so is never mentioned: the call
/// then goes unanswered and the approval send fails with "Invalid tool call IDs"
/// (docs/findings.md#resume-drops-approvals-completed-before-the-cut).
pub fn merge_after_resume(
    stop: &StopReason,
    original: &[Approval],
    resumed: &[Approval],
    braces_fallback: bool,
    keep_unresumed: bool,
) -> (StopReason, Vec<Approval>) {
    match stop {
        StopReason::RequiresApproval if !original.is_empty() => {
            if resumed.is_empty() {
                (stop.clone(), original.to_vec())
            } else {
                let merged: Vec<Approval> = resumed
                    .iter()
                    .map(
                        |r| match original.iter().find(|o| o.tool_call_id == r.tool_call_id) {
                            Some(o) => {
                                let mut args = o.tool_args.clone();
                                if braces_fallback && args.is_empty() {
                                    args = "{}".into();
                                }
                                args.push_str(&r.tool_args);
                                Approval {
                                    tool_call_id: r.tool_call_id.clone(),
                                    tool_name: if r.tool_name.is_empty() {
                                        o.tool_name.clone()
                                    } else {
                                        r.tool_name.clone()
                                    },
                                    tool_args: args,
                                    message_id: r
                                        .message_id
                                        .clone()
                                        .or_else(|| o.message_id.clone()),
                                }
                            }
                            None => r.clone(),
                        },
                    )
                    .collect();
                if !keep_unresumed {
                    return (stop.clone(), merged);
                }
                // Originals in stream order (merged where the resume continued them), then the
                // calls only the resume saw.
                let mut out: Vec<Approval> = original
                    .iter()
                    .map(|o| {
                        merged
                            .iter()
                            .find(|m| m.tool_call_id == o.tool_call_id)
                            .cloned()
                            .unwrap_or_else(|| o.clone())
                    })
                    .collect();
                for m in merged {
                    if !out.iter().any(|o| o.tool_call_id == m.tool_call_id) {
                        out.push(m);
                    }
                }
                (stop.clone(), out)
            }
        }
        StopReason::EndTurn if !original.is_empty() => {
            (StopReason::RequiresApproval, original.to_vec())
        }
        _ => (stop.clone(), resumed.to_vec()),
    }
}

/// Everything a resume needs from the client.
pub struct ResumeEnv<'a, B: Backend> {
    pub backend: &'a B,
    pub interrupt: &'a Interrupt,
    pub transcript: &'a mut Transcript,
    pub observe: &'a dyn Fn(Observation),
    pub hook: super::stream::ChunkHook<'a>,
}

/// `drainStreamWithResume` (letta-protocol.md §4.4): the initial drain (with
/// `skipCancelToolsOnError`), then, when `canResume`, the resume loop.
pub async fn drain_stream_with_resume<B: Backend>(
    initial: &mut B::Stream,
    ctx: Option<&RequestContext>,
    opts: &ResumeOptions,
    env: ResumeEnv<'_, B>,
) -> (DrainResult, ResumeInfo) {
    let ResumeEnv {
        backend,
        interrupt,
        transcript,
        observe,
        hook,
    } = env;
    let lookup = BackendLookup(backend);
    let mut first_opts = opts.drain.clone();
    first_opts.skip_cancel_tools_on_error = true;
    let mut result = drain(
        initial,
        &first_opts,
        interrupt,
        &lookup,
        transcript,
        observe,
        &mut *hook,
    )
    .await;
    let mut info = ResumeInfo::default();

    // 2. Run id discovery.
    let source = resume_source(backend, &result, ctx, interrupt).await;
    // 3-4.
    let approval_conflict = is_approval_pending_conflict(result.fallback_error.as_deref());
    let mut replay_generic_error = false;
    if opts.policy.is_some()
        && result.stop_reason == StopReason::Error
        && result.saw_stop_chunk
        && let Some(ResumeSource::Run(run_id)) = &source
        && let Ok(run) = backend.retrieve_run(run_id).await
    {
        replay_generic_error = is_replayable_run(&run);
    }
    // 5.
    let can_resume = result.stop_reason == StopReason::Error
        && (!result.saw_stop_chunk || replay_generic_error)
        && !approval_conflict
        && source.is_some()
        && ctx.is_some()
        && !interrupt.aborted();
    if !can_resume {
        if result.stop_reason == StopReason::Error {
            info.skip_reason = Some(if interrupt.aborted() {
                "user_aborted"
            } else if ctx.is_none() {
                "no_abort_signal"
            } else if result.saw_stop_chunk {
                "terminal_stop_reason"
            } else if approval_conflict {
                "approval_conflict"
            } else {
                "no_run_id"
            });
            mark_stream_error(transcript);
        }
        finish_interrupted(&mut result, transcript);
        return (result, info);
    }
    let ctx = ctx.expect("checked by can_resume");
    let source = source.expect("checked by can_resume");
    info.source = Some(source.clone());

    // 7. The resume loop.
    let original_fallback = result.fallback_error.clone();
    let mut progress = Progress {
        approvals: result.approvals.clone(),
        last_run_id: result.last_run_id.clone(),
        next_seq: if opts.planted_resume_from_zero {
            0
        } else {
            result.last_seq_id.unwrap_or(0)
        },
        error: None,
    };
    let env = ResumeEnv {
        backend,
        interrupt,
        transcript: &mut *transcript,
        observe,
        hook: &mut *hook,
    };
    let success = resume_loop(env, ctx, &source, opts, &mut info, &mut progress).await;

    match success {
        Some(cand) => {
            // 8. Approval merge after a successful resume.
            let (stop, approvals) = merge_after_resume(
                &cand.stop_reason,
                &progress.approvals,
                &cand.approvals,
                opts.planted_braces_args_fallback,
                opts.keep_unresumed_approvals,
            );
            result = DrainResult {
                stop_reason: stop,
                approvals,
                ..cand
            };
        }
        None => {
            // 9. Failure.
            mark_stream_error(transcript);
            result.fallback_error = original_fallback.or(progress.error);
            result.approvals = progress.approvals;
            result.last_run_id = progress.last_run_id;
            result.last_seq_id = Some(progress.next_seq);
        }
    }
    finish_interrupted(&mut result, transcript);
    (result, info)
}

/// Step 2, run id discovery: the run the stream named, else (after an error, with a request
/// context and no abort) the request's otid, else the run `discoverFallbackRunIdForResume`
/// finds.
async fn resume_source<B: Backend>(
    backend: &B,
    result: &DrainResult,
    ctx: Option<&RequestContext>,
    interrupt: &Interrupt,
) -> Option<ResumeSource> {
    let mut source: Option<ResumeSource> = result.last_run_id.clone().map(ResumeSource::Run);
    if source.is_none()
        && result.stop_reason == StopReason::Error
        && let Some(ctx) = ctx
        && !interrupt.aborted()
    {
        source = match &ctx.stream_otid {
            Some(o) => Some(ResumeSource::Otid(o.clone())),
            None => discover_fallback_run_id(backend, ctx)
                .await
                .map(ResumeSource::Run),
        };
    }
    source
}

/// What the resume loop carries from one attempt to the next.
struct Progress {
    /// The approvals so far: the originals, continued by each failed attempt.
    approvals: Vec<Approval>,
    last_run_id: Option<String>,
    /// The `starting_after` of the next attempt.
    next_seq: u64,
    /// Why the last attempt failed.
    error: Option<String>,
}

/// Step 7, the resume loop: up to the policy's attempts, each a replay from `p.next_seq` by run
/// id or by otid, with the policy's delay between them. The first attempt that ends in
/// anything but `error` is the result; `None` when every attempt failed, a run turned out not
/// replayable, or the turn was aborted.
async fn resume_loop<B: Backend>(
    env: ResumeEnv<'_, B>,
    ctx: &RequestContext,
    source: &ResumeSource,
    opts: &ResumeOptions,
    info: &mut ResumeInfo,
    p: &mut Progress,
) -> Option<DrainResult> {
    let ResumeEnv {
        backend,
        interrupt,
        transcript,
        observe,
        hook,
    } = env;
    let lookup = BackendLookup(backend);
    let policy = opts.policy.unwrap_or(ResumePolicy::INTERACTIVE);
    let mut resume_opts = opts.drain.clone();
    resume_opts.skip_cancel_tools_on_error = true;
    resume_opts.is_resume = true;
    if opts.planted_resume_from_zero {
        resume_opts.threshold = None;
    }
    for attempt in 1..=policy.max_attempts {
        if interrupt.aborted() {
            break;
        }
        info.attempts = attempt;
        transcript.interrupted = false;
        let (path_kind, ident) = match source {
            ResumeSource::Run(r) => ("run", r.clone()),
            ResumeSource::Otid(o) => ("otid", o.clone()),
        };
        observe(Observation::ClientResume {
            attempt,
            source: path_kind.into(),
            id: ident.clone(),
            starting_after: p.next_seq,
        });
        let opened = match source {
            ResumeSource::Run(run_id) => {
                backend
                    .stream_run(
                        run_id,
                        json!({"starting_after": p.next_seq, "batch_size": RESUME_BATCH_SIZE}),
                    )
                    .await
            }
            ResumeSource::Otid(otid) => {
                let mut body = json!({"otid": otid, "starting_after": p.next_seq, "batch_size": RESUME_BATCH_SIZE});
                if ctx.conversation_id == "default" {
                    body["agent_id"] = json!(ctx.agent_id);
                }
                backend
                    .stream_conversation(&ctx.conversation_id, body)
                    .await
            }
        };
        let run_for_check = p.last_run_id.clone();
        resume_opts.starting_after = Some(p.next_seq);
        resume_opts.prior_approvals = p.approvals.clone();
        match opened {
            Ok(mut stream) => {
                let mut cand = drain(
                    &mut stream,
                    &resume_opts,
                    interrupt,
                    &lookup,
                    transcript,
                    observe,
                    &mut *hook,
                )
                .await;
                if cand.last_run_id.is_none() {
                    cand.last_run_id = p.last_run_id.clone();
                }
                if cand.last_seq_id.is_none() {
                    cand.last_seq_id = Some(p.next_seq);
                }
                if cand.stop_reason != StopReason::Error {
                    return Some(cand);
                }
                p.error = Some(
                    cand.fallback_error
                        .clone()
                        .unwrap_or_else(|| RESUMED_STREAM_ENDED_UNEXPECTEDLY.into()),
                );
                p.next_seq = cand.last_seq_id.unwrap_or(p.next_seq);
                p.last_run_id = cand.last_run_id.clone();
                p.approvals = merge_approvals(
                    &p.approvals,
                    &cand.approvals,
                    opts.planted_braces_args_fallback,
                );
                if cand.saw_stop_chunk
                    && let Some(run_id) = &cand.last_run_id
                    && let Ok(run) = backend.retrieve_run(run_id).await
                    && !is_replayable_run(&run)
                {
                    break;
                }
            }
            Err(e) => {
                p.error = Some(super::policy::extract_conflict_detail(&e));
                if let Some(run_id) = run_for_check
                    && let Ok(run) = backend.retrieve_run(&run_id).await
                    && !is_replayable_run(&run)
                {
                    break;
                }
            }
        }
        if attempt < policy.max_attempts {
            let delay = policy.delay_after(attempt);
            if delay > 0 {
                observe(Observation::ClientRetry {
                    kind: "resume".into(),
                    attempt,
                    delay_ms: delay,
                    detail: p.error.clone().unwrap_or_default(),
                    retry_after_ms: None,
                });
                let mut sig = interrupt.subscribe();
                tokio::select! {
                    biased;
                    _ = sig.wait_for(|s| s.0) => break,
                    _ = backend.clock().sleep(Duration::from_millis(delay)) => {}
                }
            }
        }
    }
    None
}

/// Step 11: a complete `requires_approval` clears `interrupted`.
fn finish_interrupted(result: &mut DrainResult, transcript: &mut Transcript) {
    if result.stop_reason == StopReason::RequiresApproval && !result.approvals.is_empty() {
        transcript.interrupted = false;
    }
}

#[cfg(test)]
mod tests;
