//! The agent-loop oracles (DESIGN.md §5, docs/invariants.md): `loop-envelope`, `lock-safety`
//! and `budget-respected`, over the trace of an agent-loop run. Pure: they read a finished trace.
//!
//! A user turn is `turn_start … turn_end`. Inside it, each `runTurn` call is a *run*; a run
//! ends with `loop_interrupted` (its `turn.interrupted`) or with the turn. The host may start
//! another run in the same turn after compacting (a context overflow).

use crate::harness::invariants::{BUDGET_RESPECTED, LOCK_SAFETY, LOOP_ENVELOPE, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::kimi::turn_loop::access::ToolAccesses;
use crate::model::kimi::turn_loop::types::TokenUsage;
use crate::model::port::observe::Observation;

fn usage_text(u: &TokenUsage) -> String {
    format!(
        "in={} out={} cache_read={} cache_creation={}",
        u.input_other, u.output, u.input_cache_read, u.input_cache_creation
    )
}

struct OpenStep {
    step: u32,
    uuid: String,
    /// Tool calls of the step still waiting for their result, in provider order.
    pending: Vec<String>,
    /// Usage of each model response returned inside the step.
    returns: Vec<TokenUsage>,
}

#[derive(Default)]
struct Run {
    next_step: u32,
    open: Option<OpenStep>,
    returned: TokenUsage,
    interrupted: bool,
    /// Any loop event (including its `turn.interrupted`) belongs to this run.
    active: bool,
}

struct Turn {
    turn: u32,
    run: Run,
    /// The previous run of the turn, once a new one started.
    previous: Option<Run>,
}

impl Turn {
    fn new(turn: u32) -> Self {
        Turn {
            turn,
            run: Run {
                next_step: 1,
                ..Run::default()
            },
            previous: None,
        }
    }

    /// The run a `runTurn` result belongs to: the current one if it did anything, else the
    /// one that just ended (an aborted run returns after its `turn.interrupted`).
    fn result_run(&self) -> &Run {
        match &self.previous {
            Some(prev) if !self.run.active => prev,
            _ => &self.run,
        }
    }

    /// Follows one agent event of the turn; what it broke, in words.
    fn observe(&mut self, obs: &Observation) -> Vec<String> {
        let tn = self.turn;
        match obs {
            Observation::LoopStepBegin { step, uuid, .. } => self.step_begin(*step, uuid),
            Observation::LoopContentPart { step, .. } | Observation::LoopToolCall { step, .. } => {
                self.step_part(obs, *step)
            }
            Observation::LoopToolResult { tool_call_id, .. } => self.tool_result(tool_call_id),
            Observation::LoopModelReturn { usage, .. } => {
                self.run.active = true;
                self.run.returned = self.run.returned.add(usage);
                match self.run.open.as_mut() {
                    Some(open) => {
                        open.returns.push(*usage);
                        Vec::new()
                    }
                    None => vec![format!(
                        "turn {tn}: a model response returned outside any step"
                    )],
                }
            }
            Observation::LoopStepEnd {
                step, uuid, usage, ..
            } => self.step_end(*step, uuid, usage),
            Observation::LoopInterrupted { .. } => {
                self.run.active = true;
                self.run.interrupted = true;
                Vec::new()
            }
            Observation::LoopBackstopResult { tool_call_id } if !self.run.interrupted => {
                vec![format!(
                    "turn {tn}: the host had to close tool call {tool_call_id}, left without a result by a run that was not interrupted"
                )]
            }
            Observation::LoopTurnResult { usage, .. } => {
                let run = self.result_run();
                if run.returned != *usage {
                    vec![format!(
                        "turn {tn}: runTurn reported usage {} but the responses its run returned sum to {}",
                        usage_text(usage),
                        usage_text(&run.returned)
                    )]
                } else {
                    Vec::new()
                }
            }
            Observation::TurnEnd { outcome, .. } => self.turn_end(outcome),
            _ => Vec::new(),
        }
    }

    fn step_begin(&mut self, step: u32, uuid: &str) -> Vec<String> {
        let tn = self.turn;
        let mut out = Vec::new();
        if self.run.interrupted {
            // A new run of the same turn (the host retried after compacting).
            let ended = std::mem::replace(
                &mut self.run,
                Run {
                    next_step: 1,
                    ..Run::default()
                },
            );
            self.previous = Some(ended);
        }
        let run = &mut self.run;
        run.active = true;
        if let Some(open) = &run.open {
            out.push(format!(
                "turn {tn}: step.begin of step {step} while step {} ({}) has not ended",
                open.step, open.uuid
            ));
        }
        if step != run.next_step {
            out.push(format!(
                "turn {tn}: step.begin numbered {step}, expected step {}",
                run.next_step
            ));
        }
        run.next_step = step + 1;
        run.open = Some(OpenStep {
            step,
            uuid: uuid.to_string(),
            pending: Vec::new(),
            returns: Vec::new(),
        });
        out
    }

    /// A `content.part` or `tool.call` of `step`: it belongs inside that step.
    fn step_part(&mut self, obs: &Observation, step: u32) -> Vec<String> {
        let tn = self.turn;
        let what = if matches!(obs, Observation::LoopToolCall { .. }) {
            "tool.call"
        } else {
            "content.part"
        };
        match self.run.open.as_mut() {
            Some(open) if open.step == step => {
                if let Observation::LoopToolCall { tool_call_id, .. } = obs {
                    open.pending.push(tool_call_id.clone());
                }
                Vec::new()
            }
            Some(open) => vec![format!(
                "turn {tn}: {what} of step {step} inside step {}",
                open.step
            )],
            None => vec![format!("turn {tn}: {what} of step {step} outside any step")],
        }
    }

    fn tool_result(&mut self, tool_call_id: &str) -> Vec<String> {
        let tn = self.turn;
        let Some(open) = self.run.open.as_mut() else {
            return vec![format!(
                "turn {tn}: tool.result for {tool_call_id} outside any step"
            )];
        };
        match open.pending.iter().position(|id| id == tool_call_id) {
            Some(0) => {
                open.pending.remove(0);
                Vec::new()
            }
            Some(k) => {
                let message = format!(
                    "turn {tn} step {}: tool.result for {tool_call_id} out of provider order: the result of {} comes first (calls waiting, in provider order: {})",
                    open.step,
                    open.pending[0],
                    open.pending.join(", ")
                );
                open.pending.remove(k);
                vec![message]
            }
            None => vec![format!(
                "turn {tn} step {}: tool.result for {tool_call_id}, which has no tool.call waiting for it",
                open.step
            )],
        }
    }

    fn step_end(&mut self, step: u32, uuid: &str, usage: &TokenUsage) -> Vec<String> {
        let tn = self.turn;
        let Some(open) = self.run.open.take() else {
            return vec![format!(
                "turn {tn}: step.end of step {step} without an open step"
            )];
        };
        let mut out = Vec::new();
        if open.step != step || open.uuid != uuid {
            out.push(format!(
                "turn {tn}: step.end of step {step} ({uuid}) closes step {} ({})",
                open.step, open.uuid
            ));
        }
        if !open.pending.is_empty() {
            out.push(format!(
                "turn {tn}: step {step} ended with tool calls still without a result: {}",
                open.pending.join(", ")
            ));
        }
        match open.returns.last() {
            None => out.push(format!(
                "turn {tn}: step.end of step {step} but no model response returned in the step"
            )),
            Some(r) if r != usage => out.push(format!(
                "turn {tn}: step.end of step {step} reports usage {} but its response returned {}",
                usage_text(usage),
                usage_text(r)
            )),
            Some(_) => {}
        }
        out
    }

    /// A turn that was not interrupted ends completed, with no step open.
    fn turn_end(&self, outcome: &str) -> Vec<String> {
        let tn = self.turn;
        let run = &self.run;
        let mut out = Vec::new();
        if !run.interrupted {
            if let Some(open) = &run.open {
                out.push(format!(
                    "turn {tn} ended ({outcome}) with step {} open and no turn.interrupted",
                    open.step
                ));
            }
            if !outcome.starts_with("completed") {
                out.push(format!(
                    "turn {tn} ended ({outcome}) without a turn.interrupted"
                ));
            }
        }
        out
    }
}

/// `loop-envelope`: every run's `step.begin`/`step.end` are well formed (numbered 1, 2, … in
/// order, one open at a time, each `step.end` closing its own `step.begin`); a step left open
/// only by a run that was interrupted; every `tool.call` followed by its `tool.result`, the
/// results in provider order, all before the step's `step.end`; each `step.end` carries the
/// usage of the response its step returned; a turn's reported usage equals the sum of the
/// responses its run returned, aborted steps included.
pub fn loop_envelope(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut turn: Option<Turn> = None;
    for (i, e) in events.iter().enumerate() {
        if e.host != "client" {
            continue;
        }
        if let Observation::TurnStart { turn: n, .. } = &e.obs {
            turn = Some(Turn::new(*n));
            continue;
        }
        let Some(t) = turn.as_mut() else {
            continue;
        };
        let messages = t.observe(&e.obs);
        if matches!(e.obs, Observation::TurnEnd { .. }) {
            turn = None;
        }
        out.extend(messages.into_iter().map(|message| Violation {
            invariant: LOOP_ENVELOPE,
            event: Some(i),
            message,
        }));
    }
    out
}

/// `lock-safety`: two tool executions whose accesses conflict (kimi-loop.md §5.1, judged on
/// the accesses each execution really touched) never overlap in simulated time, and within a
/// batch the one earlier in provider order starts first.
pub fn lock_safety(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut running: Vec<Running> = Vec::new();
    let mut batch = Batch::default();
    for (i, e) in events.iter().enumerate() {
        if e.host != "client" {
            continue;
        }
        match &e.obs {
            Observation::LoopStepBegin { .. } | Observation::TurnStart { .. } => {
                batch = Batch::default();
            }
            Observation::LoopToolCall { tool_call_id, .. } => {
                batch.calls.push(tool_call_id.clone())
            }
            Observation::LoopToolStart {
                tool_call_id,
                tool,
                accesses,
                ..
            } => {
                let start = Running {
                    id: tool_call_id.clone(),
                    tool: tool.clone(),
                    accesses: accesses.0.clone(),
                    shown: accesses.to_string(),
                    start: i,
                };
                out.extend(
                    start_conflicts(&start, &running, &batch)
                        .into_iter()
                        .map(|message| Violation {
                            invariant: LOCK_SAFETY,
                            event: Some(i),
                            message,
                        }),
                );
                batch.started.push((
                    start.id.clone(),
                    start.accesses.clone(),
                    start.shown.clone(),
                ));
                running.push(start);
            }
            Observation::LoopToolEnd { tool_call_id, .. } => {
                if let Some(k) = running.iter().position(|r| r.id == *tool_call_id) {
                    running.remove(k);
                }
            }
            _ => {}
        }
    }
    out
}

/// A tool execution that started and has not ended.
struct Running {
    id: String,
    tool: String,
    accesses: ToolAccesses,
    shown: String,
    /// The event it started at.
    start: usize,
}

/// The current batch: its calls in provider order, and the executions that started
/// (call id, accesses, accesses as shown).
#[derive(Default)]
struct Batch {
    calls: Vec<String>,
    started: Vec<(String, ToolAccesses, String)>,
}

/// What the start of `me` broke: it overlaps a running execution it conflicts with, or it
/// starts after a conflicting execution that comes later in provider order.
fn start_conflicts(me: &Running, running: &[Running], batch: &Batch) -> Vec<String> {
    let (tool, tool_call_id, accesses) = (&me.tool, &me.id, &me.shown);
    let mut out = Vec::new();
    for r in running {
        if r.accesses.conflicts_with(&me.accesses) {
            out.push(format!(
                "{tool} {tool_call_id} ({accesses}) started while {} {} ({}), which conflicts with it, was still running (since event {})",
                r.tool,
                r.id,
                r.shown,
                r.start + 1
            ));
        }
    }
    let mine = batch.calls.iter().position(|c| c == tool_call_id);
    for (other, other_accesses, shown) in &batch.started {
        let its = batch.calls.iter().position(|c| c == other);
        if let (Some(mine), Some(its)) = (mine, its)
            && its > mine
            && other_accesses.conflicts_with(&me.accesses)
        {
            out.push(format!(
                "{tool} {tool_call_id} ({accesses}) started after {other} ({shown}), a later call in provider order that conflicts with it"
            ));
        }
    }
    out
}

/// kimi-loop.md §6 ("What counts as retryable"): the statuses `isRetryableGenerateError` retries.
pub const RETRYABLE_STATUSES: [u16; 8] = [408, 409, 429, 500, 502, 503, 504, 529];

/// The §7.13 strict cases' texts (verbatim, cases 1–3) and the §4.7 3 "roles that do not
/// alternate": a 400/422 carrying one is a request-structure rejection the host's strict
/// projection answers. Read off the reference, not off the loop's classifier, so a broken
/// classifier cannot hide its own mistake.
const STRICT_REJECTIONS: [&str; 4] = [
    "`tool_use` ids were found without `tool_result` blocks immediately after",
    "tool_call_id  is not found",
    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
    "roles must alternate",
];

/// kimi-loop.md §6 backoff: retry `failed_attempt` (1-based) waits `base + U[0,1)·0.25·base`,
/// `base = min(500·2^i, 32000)` for `i = failed_attempt − 1`. The window, both ends inclusive.
pub fn backoff_window(failed_attempt: u32) -> (u64, u64) {
    let i = failed_attempt.saturating_sub(1);
    let base = 2u64.saturating_pow(i).saturating_mul(500).min(32_000);
    (base, base + base / 4)
}

/// The fallback resend kimi-loop.md §4.7 prescribes for a rejection, if any: a 413 body-size
/// rejection (not one about the context, which is an overflow) gets the media-degraded
/// projection, the §7.13 case 11 image-format 400 the media-stripped one, a request-structure
/// 400/422 the strict one.
fn fallback_for(status: u16, message: &str) -> Option<&'static str> {
    let lower = message.to_lowercase();
    match status {
        413 if !lower.contains("context") => Some("media-degraded"),
        400 if lower.contains("unsupported image format") => Some("media-stripped"),
        400 | 422 if STRICT_REJECTIONS.iter().any(|m| message.contains(m)) => Some("strict"),
        _ => None,
    }
}

/// What the agent knows of the answer to its latest request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// No answer read yet, or one whose `Retry-After` the trace does not tell (a cassette's
    /// error answer): no delay rule is checked.
    Unknown,
    /// No `Retry-After` (no response head, a success head whose stream then broke, or a
    /// fault's error answer without one): the backoff table applies.
    NoRetryAfter,
    /// A fault's error answer with `Retry-After: s`, in milliseconds.
    RetryAfter(u64),
}

/// `error` of a `loop_retrying` or `loop_model_error`: `Name S: message` or `Name: message`.
fn split_error(error: &str) -> (&str, Option<u16>, &str) {
    let (head, message) = error.split_once(": ").unwrap_or((error, ""));
    let mut words = head.split(' ');
    let name = words.next().unwrap_or("");
    let status = words.next().and_then(|w| w.parse().ok());
    (name, status, message)
}

/// The `retry_after_s` of a reported `provider_error` fault (`provider_error call=0 status=429
/// retry_after_s=2`), `Some(None)` for one without.
fn fault_retry_after(fault: &str) -> Option<Option<u64>> {
    let rest = fault.strip_prefix("provider_error ")?;
    Some(
        rest.split(' ')
            .find_map(|w| w.strip_prefix("retry_after_s="))
            .and_then(|v| v.parse().ok()),
    )
}

#[derive(Default)]
struct RetryState {
    turn: u32,
    step: u32,
    /// The provider's latest answer: status and `Retry-After` (None when a cassette's).
    served: Option<(u16, Option<Option<u64>>)>,
    /// A reported `provider_error` fault not yet served: its `Retry-After`.
    fault: Option<Option<u64>>,
    /// The agent's latest answer, and its status.
    answer: Option<(Answer, Option<u16>)>,
    /// A retry's sleep: when `step.retrying` was heard, its delay.
    sleeping: Option<(u64, u64, u32)>,
    /// A rejection with a fallback whose resend must come: its projection and error.
    owed: Option<(&'static str, String, u16)>,
    /// Media fallbacks the run was already owed (the first takes the degraded projection).
    media_rejections: u32,
    /// Rejections with a fallback already seen in this step.
    step_rejections: u32,
}

/// `budget-respected` (agent loop): the retry and fallback budgets of kimi-loop.md §6 and
/// §4.7, read off the trace.
/// - Only retryable errors are retried: never a status outside 408, 409, 429, 500, 502, 503,
///   504, 529, never a quota-exhausted 429.
/// - Each retry waits what §6 says: the failed answer's `Retry-After` when it is > 0 (no cap),
///   else the backoff table's delay for that retry (`min(500·2^i, 32000)` plus under 25 %
///   jitter); and the next attempt is not sent before that delay has passed.
/// - A provider rejection the loop has a fallback for is answered with its one resend: the
///   first 413 body-size rejection of a run (media-degraded), or image-format 400 (media-
///   stripped), and the first request-structure 400/422 of a step (strict), never fail the run.
pub fn budget_respected(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut st = RetryState::default();
    for (i, e) in events.iter().enumerate() {
        let mut flag = |message: String| {
            out.push(Violation {
                invariant: BUDGET_RESPECTED,
                event: Some(i),
                message,
            })
        };
        match &e.obs {
            Observation::Fault { fault } => {
                if let Some(retry_after) = fault_retry_after(fault) {
                    st.fault = Some(retry_after);
                }
                continue;
            }
            Observation::ProviderServe {
                cassette, status, ..
            } => {
                let retry_after = if cassette == "<fault>" {
                    Some(st.fault.take().unwrap_or(None))
                } else {
                    None
                };
                st.served = Some((*status, retry_after));
                continue;
            }
            _ => {}
        }
        if e.host != "client" {
            continue;
        }
        let tn = st.turn;
        match &e.obs {
            Observation::TurnStart { turn, .. } => {
                st = RetryState {
                    turn: *turn,
                    served: st.served,
                    fault: st.fault,
                    ..RetryState::default()
                };
            }
            Observation::LoopStepBegin { step, .. } => {
                st.step = *step;
                st.step_rejections = 0;
                if *step == 1 {
                    // A new run (the first, or one after the host compacted).
                    st.media_rejections = 0;
                }
            }
            Observation::LoopProviderRequest { .. } => {
                if let Some((at, delay, attempt)) = st.sleeping.take()
                    && e.t_ms < at + delay
                {
                    flag(format!(
                        "turn {tn} step {}: attempt {} was sent {} ms after step.retrying, before its delay of {delay} ms had passed (kimi-loop.md §6: sleep delayMs, then retry)",
                        st.step,
                        attempt + 1,
                        e.t_ms - at
                    ));
                }
                st.owed = None;
                st.answer = None;
            }
            Observation::LoopProviderResponse { status, .. } => {
                let answer = match (status, st.served) {
                    (None, _) => Answer::NoRetryAfter,
                    (Some(s), _) if *s < 400 => Answer::NoRetryAfter,
                    (Some(s), Some((served, Some(retry_after)))) if served == *s => {
                        match retry_after {
                            Some(secs) => Answer::RetryAfter(secs.saturating_mul(1000)),
                            None => Answer::NoRetryAfter,
                        }
                    }
                    _ => Answer::Unknown,
                };
                st.answer = Some((answer, *status));
            }
            Observation::LoopModelError { error, .. } => {
                let status = st.answer.and_then(|(_, s)| s);
                let (_, _, message) = split_error(error);
                if let Some(projection) = status.and_then(|s| fallback_for(s, message)) {
                    let media = projection != "strict";
                    let first = if media {
                        st.media_rejections == 0
                    } else {
                        true
                    };
                    if first && st.step_rejections == 0 {
                        st.owed = Some((projection, error.clone(), status.unwrap_or(0)));
                    }
                    st.step_rejections += 1;
                    if media {
                        st.media_rejections += 1;
                    }
                }
            }
            Observation::LoopRetrying {
                step,
                failed_attempt,
                delay_ms,
                error,
                ..
            } => {
                let (name, status, _) = split_error(error);
                if name == "APIProviderQuotaExhaustedError" {
                    flag(format!(
                        "turn {tn} step {step}: retried {error} (kimi-loop.md §6: a quota-exhausted 429 is never retried, even with retry-after)"
                    ));
                } else if let Some(s) = status
                    && !RETRYABLE_STATUSES.contains(&s)
                {
                    flag(format!(
                        "turn {tn} step {step}: retried {error} (kimi-loop.md §6: only 408, 409, 429, 500, 502, 503, 504 and 529 are retried)"
                    ));
                }
                match st.answer.map(|(a, _)| a) {
                    Some(Answer::RetryAfter(ms)) if ms > 0 && *delay_ms != ms => flag(format!(
                        "turn {tn} step {step}: retry {failed_attempt} waited {delay_ms} ms, but the failed answer said Retry-After {ms} ms (kimi-loop.md §6: delayMs = error.retryAfterMs when > 0, with no cap)"
                    )),
                    Some(Answer::RetryAfter(ms)) if ms > 0 => {}
                    Some(Answer::RetryAfter(_) | Answer::NoRetryAfter) => {
                        let (lo, hi) = backoff_window(*failed_attempt);
                        if !(lo..=hi).contains(delay_ms) {
                            flag(format!(
                                "turn {tn} step {step}: retry {failed_attempt} waited {delay_ms} ms, outside the backoff table's {lo}–{hi} ms for it (kimi-loop.md §6: min(500·2^i, 32000) plus up to 25 % jitter; the answer had no Retry-After)"
                            ));
                        }
                    }
                    Some(Answer::Unknown) | None => {}
                }
                st.sleeping = Some((e.t_ms, *delay_ms, *failed_attempt));
                st.answer = None;
            }
            Observation::LoopInterrupted {
                reason, message, ..
            } => {
                if let Some((projection, error, status)) = st.owed.take()
                    && reason == "error"
                {
                    let said = message.as_deref().unwrap_or(error.as_str());
                    flag(format!(
                        "turn {tn} step {}: the run failed on HTTP {status} ({error}) without the {projection} resend kimi-loop.md §4.7 prescribes for it (turn.interrupted: {said})",
                        st.step
                    ));
                }
                st.sleeping = None;
            }
            Observation::TurnEnd { .. } => {
                st.sleeping = None;
                st.owed = None;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kimi::turn_loop::access::ToolAccesses;
    use crate::model::port::observe::AccessList;

    fn ev(obs: Observation) -> TraceEvent {
        TraceEvent {
            t_ms: 0,
            host: "client".into(),
            obs,
        }
    }

    fn usage(input: u64, output: u64) -> TokenUsage {
        TokenUsage {
            input_other: input,
            output,
            ..TokenUsage::default()
        }
    }

    fn begin(step: u32) -> TraceEvent {
        ev(Observation::LoopStepBegin {
            turn_id: "1".into(),
            step,
            uuid: format!("u{step}"),
        })
    }

    fn end(step: u32, u: TokenUsage) -> TraceEvent {
        ev(Observation::LoopStepEnd {
            turn_id: "1".into(),
            step,
            uuid: format!("u{step}"),
            finish_reason: "tool_use".into(),
            usage: u,
        })
    }

    fn ret(u: TokenUsage) -> TraceEvent {
        ev(Observation::LoopModelReturn {
            turn_step: None,
            usage: u,
            tool_calls: 0,
            finish: None,
        })
    }

    fn call(id: &str) -> TraceEvent {
        call_in(1, id)
    }

    fn call_in(step: u32, id: &str) -> TraceEvent {
        ev(Observation::LoopToolCall {
            step,
            tool_call_id: id.into(),
            name: "Read".into(),
            args: "{}".into(),
        })
    }

    fn result(id: &str) -> TraceEvent {
        ev(Observation::LoopToolResult {
            tool_call_id: id.into(),
            is_error: false,
            output: String::new(),
        })
    }

    fn turn_start() -> TraceEvent {
        ev(Observation::TurnStart {
            turn: 1,
            text: String::new(),
        })
    }

    fn turn_end(outcome: &str) -> TraceEvent {
        ev(Observation::TurnEnd {
            turn: 1,
            outcome: outcome.into(),
        })
    }

    fn turn_result(u: TokenUsage) -> TraceEvent {
        ev(Observation::LoopTurnResult {
            turn: 1,
            stop_reason: "end_turn".into(),
            steps: 1,
            usage: u,
        })
    }

    fn messages(v: Vec<Violation>) -> Vec<String> {
        v.into_iter().map(|v| v.message).collect()
    }

    #[test]
    fn a_well_formed_turn_passes() {
        let u = usage(10, 2);
        let trace = vec![
            turn_start(),
            begin(1),
            ret(u),
            call("a"),
            call("b"),
            result("a"),
            result("b"),
            end(1, u),
            turn_result(u),
            turn_end("completed: end_turn"),
        ];
        assert_eq!(messages(loop_envelope(&trace)), Vec::<String>::new());
    }

    #[test]
    fn each_envelope_rule_has_its_message() {
        let u = usage(10, 2);
        let trace = vec![
            turn_start(),
            begin(2),
            ret(u),
            call_in(2, "a"),
            call("b"),
            end(2, usage(99, 2)),
            ev(Observation::LoopBackstopResult {
                tool_call_id: "a".into(),
            }),
            turn_result(usage(11, 2)),
            turn_end("completed: end_turn"),
        ];
        assert_eq!(
            messages(loop_envelope(&trace)),
            [
                "turn 1: step.begin numbered 2, expected step 1",
                "turn 1: tool.call of step 1 inside step 2",
                "turn 1: step 2 ended with tool calls still without a result: a",
                "turn 1: step.end of step 2 reports usage in=99 out=2 cache_read=0 cache_creation=0 but its response returned in=10 out=2 cache_read=0 cache_creation=0",
                "turn 1: the host had to close tool call a, left without a result by a run that was not interrupted",
                "turn 1: runTurn reported usage in=11 out=2 cache_read=0 cache_creation=0 but the responses its run returned sum to in=10 out=2 cache_read=0 cache_creation=0",
            ]
        );
    }

    #[test]
    fn an_open_step_is_allowed_only_when_the_run_was_interrupted() {
        let u = usage(1, 1);
        let interrupted = ev(Observation::LoopInterrupted {
            reason: "aborted".into(),
            cause: "user_cancelled".into(),
            attempted_steps: 1,
            active_step: Some(1),
            message: None,
        });
        let ok = vec![
            turn_start(),
            begin(1),
            ret(u),
            call("a"),
            interrupted,
            turn_result(u),
            turn_end("cancelled"),
        ];
        assert_eq!(messages(loop_envelope(&ok)), Vec::<String>::new());
        let bad = vec![turn_start(), begin(1), ret(u), turn_end("cancelled")];
        assert_eq!(
            messages(loop_envelope(&bad)),
            [
                "turn 1 ended (cancelled) with step 1 open and no turn.interrupted",
                "turn 1 ended (cancelled) without a turn.interrupted",
            ]
        );
    }

    fn at(t_ms: u64, host: &str, obs: Observation) -> TraceEvent {
        TraceEvent {
            t_ms,
            host: host.into(),
            obs,
        }
    }

    /// A 429 answered by a fault with `Retry-After: 2`, then a retry that waited `delay` and
    /// was sent at `sent`.
    fn retried_429(delay: u64, sent: u64) -> Vec<TraceEvent> {
        vec![
            turn_start(),
            begin(1),
            at(
                0,
                "client",
                Observation::LoopProviderRequest {
                    call: 0,
                    path: "/v1/messages".into(),
                    messages: 1,
                    tools: 0,
                },
            ),
            at(
                0,
                "harness",
                Observation::Fault {
                    fault: "provider_error call=0 status=429 retry_after_s=2".into(),
                },
            ),
            at(
                0,
                "provider",
                Observation::ProviderServe {
                    call: 0,
                    cassette: "<fault>".into(),
                    status: 429,
                    frames: 0,
                },
            ),
            at(
                1,
                "client",
                Observation::LoopProviderResponse {
                    call: 0,
                    status: Some(429),
                    error: None,
                },
            ),
            at(
                1,
                "client",
                Observation::LoopRetrying {
                    step: 1,
                    failed_attempt: 1,
                    next_attempt: 2,
                    delay_ms: delay,
                    error: "APIProviderRateLimitError 429: rate limited".into(),
                },
            ),
            at(
                sent,
                "client",
                Observation::LoopProviderRequest {
                    call: 1,
                    path: "/v1/messages".into(),
                    messages: 1,
                    tools: 0,
                },
            ),
        ]
    }

    #[test]
    fn a_retry_waits_the_servers_retry_after_else_the_backoff_table() {
        assert_eq!(
            messages(budget_respected(&retried_429(2000, 2001))),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(budget_respected(&retried_429(612, 613))),
            [
                "turn 1 step 1: retry 1 waited 612 ms, but the failed answer said Retry-After 2000 ms (kimi-loop.md §6: delayMs = error.retryAfterMs when > 0, with no cap)"
            ]
        );
        assert_eq!(
            messages(budget_respected(&retried_429(2000, 1500))),
            [
                "turn 1 step 1: attempt 2 was sent 1499 ms after step.retrying, before its delay of 2000 ms had passed (kimi-loop.md §6: sleep delayMs, then retry)"
            ]
        );
        // Without a Retry-After the backoff table rules: retry 1 waits 500–625 ms.
        let mut no_header = retried_429(700, 701);
        no_header[3] = at(
            0,
            "harness",
            Observation::Fault {
                fault: "provider_error call=0 status=429".into(),
            },
        );
        assert_eq!(
            messages(budget_respected(&no_header)),
            [
                "turn 1 step 1: retry 1 waited 700 ms, outside the backoff table's 500–625 ms for it (kimi-loop.md §6: min(500·2^i, 32000) plus up to 25 % jitter; the answer had no Retry-After)"
            ]
        );
        assert_eq!(backoff_window(7), (32_000, 40_000));
        assert_eq!(backoff_window(9), (32_000, 40_000));
    }

    #[test]
    fn only_retryable_errors_are_retried() {
        let mut t = retried_429(2000, 2001);
        t[6] = at(
            1,
            "client",
            Observation::LoopRetrying {
                step: 1,
                failed_attempt: 1,
                next_attempt: 2,
                delay_ms: 2000,
                error: "APIRequestTooLargeError 413: Request exceeds the maximum size".into(),
            },
        );
        assert_eq!(
            messages(budget_respected(&t)),
            [
                "turn 1 step 1: retried APIRequestTooLargeError 413: Request exceeds the maximum size (kimi-loop.md §6: only 408, 409, 429, 500, 502, 503, 504 and 529 are retried)"
            ]
        );
    }

    #[test]
    fn a_rejection_with_a_fallback_never_fails_the_run_before_its_resend() {
        let mut t = retried_429(2000, 2001);
        t.truncate(4);
        t[3] = at(
            0,
            "harness",
            Observation::Fault {
                fault: "provider_error call=0 status=413".into(),
            },
        );
        t.extend([
            at(
                0,
                "provider",
                Observation::ProviderServe {
                    call: 0,
                    cassette: "<fault>".into(),
                    status: 413,
                    frames: 0,
                },
            ),
            at(
                1,
                "client",
                Observation::LoopProviderResponse {
                    call: 0,
                    status: Some(413),
                    error: None,
                },
            ),
            at(
                1,
                "client",
                Observation::LoopModelError {
                    turn_step: Some("1.1".into()),
                    error: "APIStatusError: Request exceeds the maximum size".into(),
                },
            ),
        ]);
        let mut failed = t.clone();
        failed.push(ev(Observation::LoopInterrupted {
            reason: "error".into(),
            cause: "error".into(),
            attempted_steps: 1,
            active_step: Some(1),
            message: Some("Request exceeds the maximum size".into()),
        }));
        assert_eq!(
            messages(budget_respected(&failed)),
            [
                "turn 1 step 1: the run failed on HTTP 413 (APIStatusError: Request exceeds the maximum size) without the media-degraded resend kimi-loop.md §4.7 prescribes for it (turn.interrupted: Request exceeds the maximum size)"
            ]
        );
        let mut resent = t;
        resent.push(at(
            1,
            "client",
            Observation::LoopProviderRequest {
                call: 1,
                path: "/v1/messages".into(),
                messages: 1,
                tools: 0,
            },
        ));
        assert_eq!(messages(budget_respected(&resent)), Vec::<String>::new());
        // A context overflow is the host's to compact, not a media fallback.
        assert_eq!(
            fallback_for(413, "prompt exceeds the maximum context length"),
            None
        );
        assert_eq!(fallback_for(400, "Bad request"), None);
        assert_eq!(
            fallback_for(422, "messages: roles must alternate between"),
            Some("strict")
        );
    }

    fn bundled(name: &str) -> crate::harness::scenario::Scenario {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/kimi")
            .join(name);
        crate::harness::scenario::Scenario::load(&path).unwrap()
    }

    fn with_fault(
        mut s: crate::harness::scenario::Scenario,
        f: crate::harness::faults::Fault,
    ) -> crate::harness::scenario::Scenario {
        s.faults.push(toml::Spanned::new(0..0, f));
        s
    }

    /// The violations of `budget-respected` in one run, each shown with the event it points at.
    fn report(out: &crate::harness::kimi::world::LoopRunOutput) -> Vec<String> {
        budget_respected(&out.trace)
            .into_iter()
            .map(|v| {
                let at = v.event.map(|i| out.trace[i].render()).unwrap_or_default();
                format!("{}: {} @ {}", v.invariant, v.message, at.trim())
            })
            .collect()
    }

    /// The planted canary: a loop that ignores the server's `Retry-After` waits the backoff
    /// table's delay after provider_errors.toml's `429 + Retry-After: 2`, and
    /// `budget-respected` says so; the faithful loop passes.
    #[test]
    fn budget_respected_fails_on_a_loop_that_ignores_retry_after() {
        use crate::harness::kimi::world::{run_once, run_once_planted};
        let s = bundled("provider_errors.toml");
        let faithful = run_once(&s, 1).unwrap();
        assert_eq!(report(&faithful), Vec::<String>::new());
        let planted = run_once_planted(&s, 1, |b| b.retry_ignores_retry_after = true).unwrap();
        let found = report(&planted);
        println!("{}", found.join("\n"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("budget-respected: turn 1 step 1: retry 2 waited 1")
                && found[0].contains("but the failed answer said Retry-After 2000 ms"),
            "{found:?}"
        );
    }

    /// A 413 body-size rejection and a request-structure 400 (kimi-loop.md §7.13, verbatim)
    /// on the first model call: the loop resends on the degraded or strict projection and
    /// the turn completes, with `budget-respected` clean. A loop that misclassifies either
    /// fails the turn on it, and `budget-respected` names the resend it skipped.
    #[test]
    fn rejections_with_a_fallback_are_resent_and_the_turn_completes() {
        use crate::harness::faults::Fault;
        use crate::harness::kimi::world::run_once;
        for (status, message) in [
            (413, "Request exceeds the maximum size"),
            (
                400,
                "messages.142: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01",
            ),
            (
                422,
                "messages: roles must alternate between \"user\" and \"assistant\"",
            ),
            (400, "unsupported image format"),
        ] {
            let s = with_fault(
                bundled("recorded_tool_use.toml"),
                Fault::ProviderError {
                    call: 0,
                    status,
                    retry_after_s: None,
                    message: Some(message.into()),
                },
            );
            let out = run_once(&s, 1).unwrap();
            assert_eq!(report(&out), Vec::<String>::new(), "{status} {message}");
            let outcomes: Vec<String> = out
                .outcomes
                .unwrap()
                .iter()
                .map(ToString::to_string)
                .collect();
            assert!(
                outcomes.iter().all(|o| o.starts_with("completed")),
                "{status} {message}: {outcomes:?}"
            );
        }
    }

    /// The rejections the loop has no fallback for fail the turn at once, never retried.
    #[test]
    fn rejections_without_a_fallback_fail_the_turn_unretried() {
        use crate::harness::faults::Fault;
        use crate::harness::kimi::world::run_once;
        for (status, message) in [
            (400, "Bad request"),
            (401, "invalid x-api-key"),
            (
                403,
                "Your API key does not have permission to use the specified resource",
            ),
            (404, "model: the requested model does not exist"),
        ] {
            let s = with_fault(
                bundled("recorded_tool_use.toml"),
                Fault::ProviderError {
                    call: 0,
                    status,
                    retry_after_s: None,
                    message: Some(message.into()),
                },
            );
            let out = run_once(&s, 1).unwrap();
            assert_eq!(report(&out), Vec::<String>::new(), "{status}");
            assert!(
                !out.trace
                    .iter()
                    .any(|e| matches!(e.obs, Observation::LoopRetrying { .. })),
                "{status}"
            );
            let outcomes = out.outcomes.unwrap();
            let outcome = outcomes[0].to_string();
            assert!(
                outcome.starts_with(&format!("failed: APIStatusError: {message}")),
                "{status}: {outcome}"
            );
        }
    }

    #[test]
    fn lock_safety_flags_overlap_and_provider_order() {
        let start = |id: &str, a: ToolAccesses| {
            ev(Observation::LoopToolStart {
                tool_call_id: id.into(),
                tool: "T".into(),
                execution: 1,
                accesses: AccessList(a),
            })
        };
        let stop = |id: &str| {
            ev(Observation::LoopToolEnd {
                tool_call_id: id.into(),
                how: "ok".into(),
            })
        };
        // Disjoint or read-only overlap is fine.
        let fine = vec![
            begin(1),
            call("a"),
            call("b"),
            start("a", ToolAccesses::read_file("/x")),
            start("b", ToolAccesses::read_tree("/")),
            stop("a"),
            stop("b"),
        ];
        assert!(lock_safety(&fine).is_empty());
        // b starts before the earlier conflicting a, and they overlap.
        let bad = vec![
            begin(1),
            call("a"),
            call("b"),
            start("b", ToolAccesses::write_file("/X")),
            start("a", ToolAccesses::search_tree("/")),
            stop("a"),
            stop("b"),
        ];
        assert_eq!(
            messages(lock_safety(&bad)),
            [
                "T a (search-tree:/) started while T b (write:/X), which conflicts with it, was still running (since event 4)",
                "T a (search-tree:/) started after b (write:/X), a later call in provider order that conflicts with it",
            ]
        );
    }
}
