//! Draining one stream (letta-protocol.md §4.2-4.3): the UI buffer the drain maintains
//! ([`Transcript`]), the interrupt signal with its abort generation ([`Interrupt`]), and
//! [`drain`] itself with the end_turn → requires_approval coercion, the terminal-EOF guard and
//! the stall reconciler. What it reads is a [`ChunkSource`], the SDK's view of a stream.
//!
//! Every wait is bounded: the EOF guard after a stop reason, the stall reconciler before one,
//! and an absolute silence bound (the SDK request timeout, `LETTA_REQUEST_TIMEOUT_MS` = 10 min,
//! letta-protocol.md §2.8) that ends a read no keepalive or reconciler would end.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::Value;
// tokio's clock: simulated time under turmoil (and paused in tests), never the wall clock.

use super::policy::{
    INTERRUPTED_BY_USER, STALL_RECONCILER_STATUS, STREAM_ERROR, TERMINAL_EOF_STATUS,
};
use super::sdk_stream::{ChunkSource, SdkEvent, Thrown};
use super::stream_processor::{Approval, ErrorInfo, Processed, StreamProcessor, merge_approvals};
use crate::model::port::observe::Observation;
use crate::model::port::signal;
use crate::wire::letta::{LettaChunk, StopReason};

/// `LETTA_STREAM_TERMINAL_EOF_GRACE_MS` default (letta-protocol.md §4.3).
pub const TERMINAL_EOF_GRACE_MS: u64 = 2000;
/// `LETTA_STREAM_STALL_RECONCILE_MS` default: "3x the ~20 s server keepalive"
/// (letta-protocol.md §4.3).
pub const STALL_RECONCILE_MS: u64 = 60_000;
/// Why the reference ended a read that stayed silent for the stall window before any run id
/// arrived (ours; the published client re-arms, letta-protocol.md §4.3).
pub const STALL_NO_RUN_ID: &str = "Stream stalled before its first chunk";

/// `LETTA_REQUEST_TIMEOUT_MS` default: 10 minutes (letta-protocol.md §2.8). The drain's
/// absolute bound on silence.
pub const REQUEST_TIMEOUT_MS: u64 = 600_000;
/// Run statuses the stall reconciler treats as active (letta-protocol.md §4.3).
pub const ACTIVE_RUN_STATUSES: [&str; 4] = ["created", "not_started", "pending", "running"];

// ---------------------------------------------------------------------------------------------
// The interrupt signal (letta-protocol.md §9.1, §4.2)
// ---------------------------------------------------------------------------------------------

/// The turn's abort controller plus the buffer's `abortGeneration`. Cloning shares it.
#[derive(Clone, Debug)]
pub struct Interrupt {
    tx: std::sync::Arc<signal::Sender<(bool, u64)>>,
}

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt {
            tx: std::sync::Arc::new(signal::channel((false, 0)).0),
        }
    }
}

impl Interrupt {
    pub fn aborted(&self) -> bool {
        self.tx.with(|s| s.0)
    }

    pub fn generation(&self) -> u64 {
        self.tx.with(|s| s.1)
    }

    /// Aborts the controller.
    pub fn abort(&self) {
        self.tx.send_modify(|s| s.0 = true);
    }

    /// Bumps `abortGeneration` (stales a running drain without aborting the controller).
    pub fn bump_generation(&self) {
        self.tx.send_modify(|s| s.1 += 1);
    }

    /// A fresh controller for the next turn (the generation keeps counting).
    pub fn reset(&self) {
        self.tx.send_modify(|s| s.0 = false);
    }

    pub fn subscribe(&self) -> signal::Receiver<(bool, u64)> {
        self.tx.subscribe()
    }
}

// ---------------------------------------------------------------------------------------------
// The UI buffer (letta-protocol.md §4.2 cleanup, §4.6 tool lines)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolPhase {
    Streaming,
    Ready,
    Running,
    Finished,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLine {
    pub name: String,
    pub phase: ToolPhase,
    pub result_ok: Option<bool>,
    pub result_text: Option<String>,
}

/// What the user sees: tool lines keyed by `tool_call_id`, status lines, usage, and the
/// `interrupted` flag that suspends accumulation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transcript {
    pub tools: IndexMap<String, ToolLine>,
    pub interrupted: bool,
    pub status_lines: Vec<String>,
    pub total_tokens: u64,
    /// Text of assistant lines, in order (one per message id).
    pub assistant: IndexMap<String, String>,
    /// Compaction lines and the post-compaction usage flag (letta-protocol.md §8.6).
    pub compactions: super::compaction::Compactions,
}

impl Transcript {
    /// Accumulates one output chunk (skipped while `interrupted`, letta-protocol.md §4.2).
    pub fn accumulate(&mut self, chunk: &LettaChunk) {
        if self.interrupted {
            return;
        }
        // Compaction chunks are never turn content.
        if self.compactions.take(chunk) {
            return;
        }
        match chunk {
            LettaChunk::ToolCallMessage(m) | LettaChunk::ApprovalRequestMessage(m) => {
                let approval = matches!(chunk, LettaChunk::ApprovalRequestMessage(_));
                // One tool call per chunk for rendering: the legacy tool_call, else the first
                // entry of tool_calls (§4.6).
                let call = m
                    .tool_call
                    .as_ref()
                    .or_else(|| m.tool_calls.as_ref().and_then(|c| c.as_slice().first()));
                if let Some(call) = call
                    && let Some(id) = &call.tool_call_id
                {
                    let line = self.tools.entry(id.clone()).or_insert(ToolLine {
                        name: String::new(),
                        phase: ToolPhase::Streaming,
                        result_ok: None,
                        result_text: None,
                    });
                    if let Some(n) = &call.name {
                        line.name = n.clone();
                    }
                    if approval && line.phase == ToolPhase::Streaming {
                        line.phase = ToolPhase::Ready;
                    }
                }
            }
            LettaChunk::ToolReturnMessage(m) => {
                let mut finish = |id: &str, ok: bool, text: String| {
                    if let Some(line) = self.tools.get_mut(id) {
                        line.phase = ToolPhase::Finished;
                        line.result_ok = Some(ok);
                        line.result_text = Some(text);
                    }
                };
                if let Some(returns) = &m.tool_returns {
                    for r in returns {
                        if let Some(id) = r.get("tool_call_id").and_then(Value::as_str) {
                            let text = r
                                .get("tool_return")
                                .or_else(|| r.get("func_response"))
                                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                                .unwrap_or_default();
                            finish(
                                id,
                                r.get("status").and_then(Value::as_str) == Some("success"),
                                text,
                            );
                        }
                    }
                }
                if !m.tool_call_id.is_empty() {
                    finish(
                        &m.tool_call_id,
                        m.status == "success",
                        m.tool_return.clone(),
                    );
                }
            }
            LettaChunk::AssistantMessage(m) => {
                self.assistant
                    .entry(m.env.id.clone())
                    .or_default()
                    .push_str(&m.content.text());
            }
            LettaChunk::UsageStatistics(u) => self.total_tokens += u.total_tokens,
            _ => {}
        }
    }

    fn incomplete(&self) -> Vec<String> {
        self.tools
            .iter()
            .filter(|(_, l)| l.phase != ToolPhase::Finished)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Marks every incomplete tool line finished with an error text ("Interrupted by user",
    /// "Stream error").
    pub fn mark_incomplete(&mut self, text: &str) {
        for id in self.incomplete() {
            let l = self.tools.get_mut(&id).expect("listed above");
            l.phase = ToolPhase::Finished;
            l.result_ok = Some(false);
            l.result_text = Some(text.into());
        }
    }

    /// Removes incomplete tool lines entirely.
    pub fn remove_incomplete(&mut self) {
        for id in self.incomplete() {
            self.tools.shift_remove(&id);
        }
    }

    pub fn status(&mut self, line: &str) {
        self.status_lines.push(line.into());
    }
}

// ---------------------------------------------------------------------------------------------
// drainStream
// ---------------------------------------------------------------------------------------------

/// Options of one drain.
#[derive(Debug, Clone)]
pub struct DrainOptions {
    /// `seenSeqIdThreshold` (letta-protocol.md §4.5).
    pub threshold: Option<u64>,
    pub eof_grace_ms: u64,
    pub stall_ms: u64,
    pub max_silence_ms: u64,
    /// `skipCancelToolsOnError` (the resume path sets it).
    pub skip_cancel_tools_on_error: bool,
    pub is_resume: bool,
    /// StreamProcessor rule 6 reads `tool_returns[]` (reference profile).
    pub consult_tool_returns: bool,
    /// Drop frames repeating a seq id already processed in this drain (reference profile;
    /// see `StreamProcessor::dropping_repeats`).
    pub drop_repeated_seq: bool,
    /// The `starting_after` of a replay (resume drains): its first chunk is the next seq id.
    pub starting_after: Option<u64>,
    /// (reference) A stall window with no run id yet ends the read instead of re-arming.
    pub stall_without_run_id_aborts: bool,
    /// (reference) A stop reason that finds a tool call's arguments torn (not whole JSON) ends
    /// the read as a gap when this read delivered a numbered frame: the frame that finished
    /// them was lost where no later numbered frame shows the gap (the stop_reason and usage
    /// frames carry no seq_id), and the resume replays it.
    pub torn_args_end_the_read: bool,
    /// The approvals collected before this read (a resume's originals): arguments continue
    /// across the cut.
    pub prior_approvals: Vec<Approval>,
}

impl Default for DrainOptions {
    fn default() -> Self {
        DrainOptions {
            threshold: None,
            eof_grace_ms: TERMINAL_EOF_GRACE_MS,
            stall_ms: STALL_RECONCILE_MS,
            max_silence_ms: REQUEST_TIMEOUT_MS,
            skip_cancel_tools_on_error: false,
            is_resume: false,
            consult_tool_returns: false,
            drop_repeated_seq: false,
            starting_after: None,
            stall_without_run_id_aborts: false,
            torn_args_end_the_read: false,
            prior_approvals: Vec::new(),
        }
    }
}

/// The result of one drain (letta-protocol.md §4.2).
#[derive(Debug, Clone, PartialEq)]
pub struct DrainResult {
    pub stop_reason: StopReason,
    /// The processor saw a stop_reason chunk.
    pub saw_stop_chunk: bool,
    pub approvals: Vec<Approval>,
    pub last_run_id: Option<String>,
    pub last_seq_id: Option<u64>,
    pub fallback_error: Option<String>,
    /// The thrown error's attached JSON, when the stream threw.
    pub thrown: Option<Thrown>,
    /// The last error chunk seen (`error_message` or a bare `{error}` object).
    pub error_info: Option<ErrorInfo>,
    pub terminal_eof_guard_fired: bool,
    pub stall_reconciler_fired: bool,
    /// How the read ended (for the trace).
    pub how: String,
}

impl DrainResult {
    /// The first approval.
    pub fn approval(&self) -> Option<&Approval> {
        self.approvals.first()
    }
}

/// Looks up a run's status for the stall reconciler: `Ok(Some(status))`, `Ok(None)` when the
/// run object has no status, `Err(())` when the lookup failed.
pub trait RunStatusLookup {
    fn run_status(&self, run_id: &str) -> impl Future<Output = Result<Option<String>, ()>>;
}

/// The per-chunk hook: called with each processed chunk; returning `true` aborts the stream
/// (the client uses it for scripted interrupts).
pub type ChunkHook<'a> = &'a mut dyn FnMut(&LettaChunk, &Processed);

/// `drainStream` (letta-protocol.md §4.2-4.3).
pub async fn drain<S: ChunkSource, L: RunStatusLookup>(
    source: &mut S,
    opts: &DrainOptions,
    interrupt: &Interrupt,
    lookup: &L,
    transcript: &mut Transcript,
    observe: &dyn Fn(Observation),
    hook: ChunkHook<'_>,
) -> DrainResult {
    let mut proc = StreamProcessor::new(opts.threshold)
        .consulting_tool_returns(opts.consult_tool_returns)
        .dropping_repeats(opts.drop_repeated_seq)
        .starting_after(opts.starting_after);
    let gen0 = interrupt.generation();
    let mut signal = interrupt.subscribe();
    let mut fallback_error: Option<String> = None;
    let mut thrown: Option<Thrown> = None;
    let mut error_info: Option<ErrorInfo> = None;
    let mut cancelled = false;
    let mut guard_fired = false;
    let mut stall_fired = false;
    let clock = source.clock();
    let now = clock.now();
    let stall = Duration::from_millis(opts.stall_ms);
    let mut stall_at = now + stall;
    let mut eof_at: Option<Duration> = None;
    let silence = Duration::from_millis(opts.max_silence_ms);
    let mut silence_at = now + silence;
    type Lookup<'a> = Pin<Box<dyn Future<Output = Result<Option<String>, ()>> + 'a>>;
    let mut lookup_in_flight: Option<Lookup<'_>> = None;

    let how: String = loop {
        if interrupt.aborted() {
            cancelled = true;
            transcript.mark_incomplete(INTERRUPTED_BY_USER);
            source.abort();
            break "aborted".into();
        }
        if interrupt.generation() != gen0 {
            cancelled = true;
            source.abort();
            break "abort-generation".into();
        }
        let stall_armed = !stall_fired && lookup_in_flight.is_none() && proc.stop_reason.is_none();
        tokio::select! {
            biased;
            _ = signal.changed() => continue,
            ev = source.next() => {
                match ev {
                    SdkEvent::Chunk(chunk) => {
                        // Re-arm the stall timer on every chunk, pings included.
                        stall_at = clock.now() + stall;
                        silence_at = clock.now() + silence;
                        let processed = match take_chunk(
                            &mut proc,
                            &chunk,
                            opts,
                            observe,
                            &mut *hook,
                            &mut error_info,
                            &mut fallback_error,
                        ) {
                            Ok(processed) => processed,
                            Err(gap) => {
                                fallback_error = Some(gap);
                                source.abort();
                                break "gap".into();
                            }
                        };
                        if proc.stop_reason.is_some() {
                            // (Re-)arm the terminal-EOF guard after every chunk once a stop
                            // reason has been seen.
                            eof_at = Some(clock.now() + Duration::from_millis(opts.eof_grace_ms));
                        }
                        // The abort check runs again before accumulation.
                        if interrupt.aborted() || interrupt.generation() != gen0 {
                            continue;
                        }
                        if processed.output {
                            transcript.accumulate(&chunk);
                        }
                    }
                    SdkEvent::Thrown(t) => {
                        if proc.last_run_id.is_none()
                            && let Some(r) = t.error.as_ref().and_then(|e| e.get("run_id")).and_then(Value::as_str)
                        {
                            proc.last_run_id = Some(r.to_string());
                        }
                        fallback_error = Some(t.message.clone());
                        let how = t.kind.as_str().to_string();
                        thrown = Some(t);
                        break how;
                    }
                    SdkEvent::End => {
                        break "eof".into();
                    }
                }
            }
            _ = async { clock.sleep_until(eof_at.expect("guarded")).await }, if eof_at.is_some() => {
                guard_fired = true;
                transcript.status(TERMINAL_EOF_STATUS);
                source.abort();
                break "terminal-eof-guard".into();
            }
            status = async { lookup_in_flight.as_mut().expect("guarded").await }, if lookup_in_flight.is_some() => {
                lookup_in_flight = None;
                // A stop reason that arrived while the lookup was in flight: the EOF guard owns it.
                if proc.stop_reason.is_some() {
                    continue;
                }
                match status {
                    Ok(Some(s)) if !ACTIVE_RUN_STATUSES.contains(&s.as_str()) => {
                        stall_fired = true;
                        transcript.status(STALL_RECONCILER_STATUS);
                        source.abort();
                        break "stall-reconciler".into();
                    }
                    _ => stall_at = clock.now() + stall,
                }
            }
            _ = clock.sleep_until(stall_at), if stall_armed => {
                match proc.last_run_id.clone() {
                    // (reference) Silent for the whole window without even a run id: the read
                    // is dead; end it so the resume finds the run by the request's otid.
                    None if opts.stall_without_run_id_aborts => {
                        stall_fired = true;
                        fallback_error = Some(STALL_NO_RUN_ID.into());
                        source.abort();
                        break "stall-no-run-id".into();
                    }
                    None => stall_at = clock.now() + stall,
                    Some(run_id) => {
                        lookup_in_flight = Some(Box::pin(async move { lookup.run_status(&run_id).await }));
                    }
                }
            }
            _ = clock.sleep_until(silence_at) => {
                fallback_error = Some(format!("Request timed out after {} ms without data", opts.max_silence_ms));
                source.abort();
                break "timeout".into();
            }
        }
    };

    finish(
        proc,
        ReadEnd {
            how,
            cancelled,
            fallback_error,
            thrown,
            error_info,
            guard_fired,
            stall_fired,
        },
        opts,
        transcript,
        observe,
    )
}

/// One chunk through the processor: reported and handed to the hook unless skipped, its error
/// kept. `Err` with the read's error when the stream is broken: a lost frame (reference: the
/// resume replays from the last contiguous seq id) or, at the stop reason, a tool call's
/// arguments torn (see `DrainOptions::torn_args_end_the_read`).
fn take_chunk(
    proc: &mut StreamProcessor,
    chunk: &LettaChunk,
    opts: &DrainOptions,
    observe: &dyn Fn(Observation),
    hook: ChunkHook<'_>,
    error_info: &mut Option<ErrorInfo>,
    fallback_error: &mut Option<String>,
) -> Result<Processed, String> {
    let processed = proc.process(chunk);
    if let Some((expected, got)) = processed.gap {
        return Err(format!("Stream gap: expected seq_id {expected}, got {got}"));
    }
    if !processed.skipped {
        observe(Observation::ClientChunk {
            run_id: chunk.run_id().map(str::to_string),
            seq_id: chunk.seq_id(),
            message_type: chunk.message_type().to_string(),
        });
        if let Some(lacks) = unnamed(chunk) {
            observe(Observation::ClientChunkUnnamed {
                run_id: chunk.run_id().map(str::to_string),
                seq_id: chunk.seq_id(),
                message_type: chunk.message_type().to_string(),
                lacks: lacks.into(),
            });
        }
    }
    if let Some(e) = &processed.error {
        *error_info = Some(e.clone());
        if processed.output {
            *fallback_error = Some(e.message.clone());
        }
    }
    if !processed.skipped {
        hook(chunk, &processed);
    }
    if opts.torn_args_end_the_read
        && let Some(id) = torn_call(proc, opts)
    {
        proc.stop_reason = None;
        return Err(format!(
            "Stream gap: the arguments of tool call {id} are not whole JSON at the stop reason"
        ));
    }
    Ok(processed)
}

/// The name a chunk lacks of those every Letta server gives it, if any: a message id on every
/// chunk with an envelope but the error frame (letta-protocol.md §1.3 makes `id` required;
/// 0.16.8's `error_message` has none, captures/letta_server), and an otid on assistant and
/// reasoning text, which the accumulator keys their lines by (§4.6; local otids §1.7; every
/// `assistant_message` of captures/letta_server carries one).
fn unnamed(chunk: &LettaChunk) -> Option<&'static str> {
    let env = chunk.envelope()?;
    if env.id.is_empty() && !matches!(chunk, LettaChunk::ErrorMessage(_)) {
        return Some("id");
    }
    let text = matches!(
        chunk,
        LettaChunk::AssistantMessage(_) | LettaChunk::ReasoningMessage(_)
    );
    (text && env.otid.as_deref().is_none_or(str::is_empty)).then_some("otid")
}

/// How a read ended: the loop's outcome, settled by [`finish`].
struct ReadEnd {
    how: String,
    cancelled: bool,
    fallback_error: Option<String>,
    thrown: Option<Thrown>,
    error_info: Option<ErrorInfo>,
    guard_fired: bool,
    stall_fired: bool,
}

/// The end of a drain: its stop reason settled, the transcript cleaned up, the result
/// reported.
fn finish(
    mut proc: StreamProcessor,
    end: ReadEnd,
    opts: &DrainOptions,
    transcript: &mut Transcript,
    observe: &dyn Fn(Observation),
) -> DrainResult {
    let ReadEnd {
        how,
        cancelled,
        fallback_error,
        thrown,
        error_info,
        guard_fired,
        stall_fired,
    } = end;
    // Exception handling (§4.2): the streamed stop reason wins over the generic error.
    let saw_stop_chunk = proc.stop_reason.is_some();
    let mut stop_reason = match (&proc.stop_reason, cancelled) {
        (Some(s), _) => s.clone(),
        (None, true) => StopReason::Cancelled,
        (None, false) => StopReason::Error,
    };
    if cancelled {
        stop_reason = StopReason::Cancelled;
    }
    let errored = thrown.is_some() || how == "timeout" || how == "gap" || how == "stall-no-run-id";
    if errored && !cancelled {
        if opts.skip_cancel_tools_on_error {
            match stop_reason {
                StopReason::Error => transcript.interrupted = true,
                StopReason::LlmApiError => {
                    transcript.interrupted = false;
                    transcript.remove_incomplete();
                }
                _ => {}
            }
        } else {
            transcript.mark_incomplete(super::policy::STREAM_ERROR);
        }
    }
    let approvals = proc.take_approvals();
    // end_turn with collected approvals is coerced to requires_approval (§4.2).
    if stop_reason == StopReason::EndTurn && !approvals.is_empty() {
        stop_reason = StopReason::RequiresApproval;
    }
    match stop_reason {
        StopReason::EndTurn => transcript.remove_incomplete(),
        StopReason::LlmApiError if !errored => transcript.remove_incomplete(),
        StopReason::Cancelled if !transcript.tools.is_empty() && !cancelled => {
            transcript.mark_incomplete(INTERRUPTED_BY_USER)
        }
        _ => {}
    }
    observe(Observation::ClientStreamEnd { how: how.clone() });
    let result = DrainResult {
        stop_reason,
        saw_stop_chunk,
        approvals,
        last_run_id: proc.last_run_id.clone(),
        last_seq_id: proc.last_seq_id,
        fallback_error,
        thrown,
        error_info,
        terminal_eof_guard_fired: guard_fired,
        stall_reconciler_fired: stall_fired,
        how,
    };
    observe(Observation::ClientDrained {
        stop_reason: result.stop_reason.as_str().into(),
        approvals: result
            .approvals
            .iter()
            .map(|a| a.tool_call_id.clone())
            .collect(),
        last_seq_id: result.last_seq_id,
    });
    result
}

/// The first tool call whose arguments, continued across the cut, are torn when the stop
/// reason arrives (see `DrainOptions::torn_args_end_the_read`); `None` unless this read
/// delivered a numbered frame past its `starting_after`, so a replay that brings nothing new
/// accepts what it has (a model that really wrote broken JSON costs one replay).
fn torn_call(proc: &StreamProcessor, opts: &DrainOptions) -> Option<String> {
    if !matches!(
        proc.stop_reason,
        Some(StopReason::RequiresApproval | StopReason::EndTurn)
    ) || proc.last_seq_id <= opts.starting_after
        || proc.last_run_id.is_none()
    {
        return None;
    }
    let current: Vec<Approval> = proc.approvals().cloned().collect();
    merge_approvals(&opts.prior_approvals, &current, false)
        .into_iter()
        .find(|a| {
            !a.tool_args.trim().is_empty() && serde_json::from_str::<Value>(&a.tool_args).is_err()
        })
        .map(|a| a.tool_call_id)
}

/// Marks a stream failure in the transcript (letta-protocol.md §4.4 steps 9-10).
pub fn mark_stream_error(transcript: &mut Transcript) {
    transcript.mark_incomplete(STREAM_ERROR);
}

#[cfg(test)]
pub(crate) mod tests;
