//! The agent-loop oracles (DESIGN.md §5, docs/invariants.md): `loop-envelope`, `lock-safety`
//! and `budget-respected`, over the trace of an agent-loop run. Pure: they read a finished trace.
//!
//! A user turn is `turn_start … turn_end`. Inside it, each `runTurn` call is a *run*; a run
//! ends with `loop_interrupted` (its `turn.interrupted`) or with the turn. The host may start
//! another run in the same turn after compacting (a context overflow).

use std::collections::BTreeMap;

use super::access_rule::conflict;
use super::stop_rule;
use crate::harness::invariants::{LOCK_SAFETY, LOOP_ENVELOPE, TRANSCRIPT_RESUMES, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::kimi::turn_loop::access::ToolAccesses;
use crate::model::kimi::turn_loop::types::TokenUsage;
use crate::model::port::observe::Observation;

/// kimi-loop.md §8.1: how the host ends a turn whose last step was `filtered`.
const FILTERED_OUTCOME: &str =
    "failed: provider.filtered: Provider safety policy blocked the response.";

fn usage_text(u: &TokenUsage) -> String {
    format!(
        "in={} out={} cache_read={} cache_creation={}",
        u.input_other, u.output, u.input_cache_read, u.input_cache_creation
    )
}

/// Two usages summed field by field (§3.2 `addUsage`), by the oracle's own arithmetic rather
/// than the loop's `TokenUsage::add`, so a wrong sum in the loop cannot agree with itself.
fn usage_sum(a: &TokenUsage, b: &TokenUsage) -> TokenUsage {
    TokenUsage {
        input_other: a.input_other + b.input_other,
        output: a.output + b.output,
        input_cache_read: a.input_cache_read + b.input_cache_read,
        input_cache_creation: a.input_cache_creation + b.input_cache_creation,
    }
}

struct OpenStep {
    step: u32,
    uuid: String,
    /// Tool calls of the step still waiting for their result, in provider order.
    pending: Vec<String>,
    /// Each model response returned inside the step.
    returns: Vec<Returned>,
    /// Every `tool.call` of the step, with its result once it came.
    recorded: Vec<stop_rule::Recorded>,
}

/// What `loop_model_return` said of a response: what its step's `step.end` must agree with.
struct Returned {
    usage: TokenUsage,
    tool_calls: usize,
    provider_finish: Option<String>,
    raw_finish: Option<String>,
}

/// What a `step.end` reported.
struct StepEnd<'a> {
    step: u32,
    uuid: &'a str,
    usage: &'a TokenUsage,
    reported: stop_rule::Reported<'a>,
}

#[derive(Default)]
struct Run {
    next_step: u32,
    open: Option<OpenStep>,
    returned: TokenUsage,
    interrupted: bool,
    /// The `reason` of the run's `turn.interrupted`, once it was interrupted.
    interrupt_reason: Option<String>,
    /// The stop reason of the run's last `step.end`.
    last_finish: Option<String>,
    /// The sum of the four usage fields of the run's last `step.end`, when it is not 0: what
    /// the context's token count becomes (kimi-loop.md §8.3; a 0 sum makes it an estimate).
    last_step_total: Option<u64>,
    /// Any loop event (including its `turn.interrupted`) belongs to this run.
    active: bool,
}

struct Turn {
    turn: u32,
    run: Run,
    /// The previous run of the turn, once a new one started.
    previous: Option<Run>,
    /// The reason of the simulated user's abort of this turn (`user` or `signal`), once one
    /// fired: the turn's signal carries it from then on.
    abort: Option<String>,
    /// The host compacted in this turn, which sets the token count to an estimate.
    compacted: bool,
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
            abort: None,
            compacted: false,
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
            Observation::LoopToolResult {
                tool_call_id,
                is_error,
                output,
            } => self.tool_result(tool_call_id, (*is_error, output.clone())),
            Observation::LoopModelReturn {
                usage,
                tool_calls,
                finish,
                provider_finish,
                ..
            } => {
                self.run.active = true;
                self.run.returned = usage_sum(&self.run.returned, usage);
                match self.run.open.as_mut() {
                    Some(open) => {
                        open.returns.push(Returned {
                            usage: *usage,
                            tool_calls: *tool_calls,
                            provider_finish: provider_finish.clone(),
                            raw_finish: finish.clone(),
                        });
                        Vec::new()
                    }
                    None => vec![format!(
                        "turn {tn}: a model response returned outside any step"
                    )],
                }
            }
            Observation::LoopStepEnd {
                step,
                uuid,
                usage,
                finish_reason,
                provider_finish_reason,
                raw_finish_reason,
                ..
            } => self.step_end(StepEnd {
                step: *step,
                uuid,
                usage,
                reported: stop_rule::Reported {
                    finish_reason,
                    provider: provider_finish_reason.as_deref(),
                    raw: raw_finish_reason.as_deref(),
                },
            }),
            Observation::LoopUserAbort { reason, .. } => {
                self.abort.get_or_insert_with(|| reason.clone());
                Vec::new()
            }
            Observation::LoopInterrupted { reason, cause, .. } => {
                self.run.active = true;
                self.run.interrupted = true;
                self.run.interrupt_reason = Some(reason.clone());
                self.interrupt_cause(reason, cause)
            }
            Observation::LoopBackstopResult { tool_call_id } if !self.run.interrupted => {
                vec![format!(
                    "turn {tn}: the host had to close tool call {tool_call_id}, left without a result by a run that was not interrupted"
                )]
            }
            Observation::LoopCompaction { .. } => {
                self.compacted = true;
                Vec::new()
            }
            Observation::LoopTurnResult {
                usage,
                context_tokens,
                ..
            } => {
                let run = self.result_run();
                let mut out = Vec::new();
                if run.returned != *usage {
                    out.push(format!(
                        "turn {tn}: runTurn reported usage {} but the responses its run returned sum to {}",
                        usage_text(usage),
                        usage_text(&run.returned)
                    ));
                }
                // A compaction's estimate is not judged: the trace reports compactions when the
                // turn ends, so it cannot say whether one came after the run's last step.
                if let Some(total) = run.last_step_total.filter(|_| !self.compacted)
                    && *context_tokens != total
                {
                    out.push(format!(
                        "turn {tn}: the context counts {context_tokens} tokens at the turn's end, but its last step.end reported usage summing to {total} (kimi-loop.md §8.3: the count is the sum of all four fields)"
                    ));
                }
                out
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
            recorded: Vec::new(),
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
                    open.recorded.push(stop_rule::Recorded {
                        id: tool_call_id.clone(),
                        result: None,
                    });
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

    fn tool_result(&mut self, tool_call_id: &str, result: (bool, String)) -> Vec<String> {
        let tn = self.turn;
        let Some(open) = self.run.open.as_mut() else {
            return vec![format!(
                "turn {tn}: tool.result for {tool_call_id} outside any step"
            )];
        };
        if let Some(call) = open.recorded.iter_mut().find(|c| c.id == tool_call_id) {
            call.result.get_or_insert(result);
        }
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

    fn step_end(&mut self, end: StepEnd<'_>) -> Vec<String> {
        let StepEnd {
            step,
            uuid,
            usage,
            reported,
        } = end;
        let tn = self.turn;
        let Some(open) = self.run.open.take() else {
            return vec![format!(
                "turn {tn}: step.end of step {step} without an open step"
            )];
        };
        self.run.last_finish = Some(reported.finish_reason.to_string());
        let total =
            usage.input_other + usage.output + usage.input_cache_read + usage.input_cache_creation;
        self.run.last_step_total = (total > 0).then_some(total);
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
            Some(r) => {
                if r.usage != *usage {
                    out.push(format!(
                        "turn {tn}: step.end of step {step} reports usage {} but its response returned {}",
                        usage_text(usage),
                        usage_text(&r.usage)
                    ));
                }
                let response = stop_rule::Response {
                    tool_calls: r.tool_calls,
                    provider: r.provider_finish.as_deref(),
                    raw: r.raw_finish.as_deref(),
                };
                out.extend(
                    stop_rule::violations(&reported, &response, &open.recorded)
                        .into_iter()
                        .map(|v| format!("turn {tn}: step.end of step {step} {v}")),
                );
            }
        }
        out
    }

    /// A run interrupted after the user's abort is aborted, and names who aborted it:
    /// `interruptReason` is `user_cancelled` exactly when the signal's reason is a
    /// `UserCancellationError` (kimi-loop.md §3.3 "Catch-all rule", §9 item 2), so a user's abort
    /// (`user`) gives `user_cancelled` and a plain one (`signal`) gives `aborted`.
    fn interrupt_cause(&self, reason: &str, cause: &str) -> Vec<String> {
        let Some(abort) = self.abort.as_deref() else {
            return Vec::new();
        };
        // The turn's signal stays aborted, and runTurn returns any error thrown once it fired
        // as `aborted` (kimi-loop.md §3.3 catch-all), a rejection or the max-steps error too.
        if reason != "aborted" {
            return vec![format!(
                "turn {}: turn.interrupted with reason {reason} after a {abort} abort; once the signal fired, runTurn ends any run as aborted",
                self.turn
            )];
        }
        let want = if abort == "user" {
            "user_cancelled"
        } else {
            "aborted"
        };
        if cause == want {
            return Vec::new();
        }
        vec![format!(
            "turn {}: turn.interrupted names the cause {cause} after a {abort} abort; its signal's reason makes it {want}",
            self.turn
        )]
    }

    /// A turn that was not interrupted ends completed, with no step open; a turn whose last
    /// run was interrupted for `max_steps` fails with the max-steps error, and one that fails
    /// with it was interrupted for `max_steps` (kimi-loop.md §2 errors, §3.3 case D).
    fn turn_end(&self, outcome: &str) -> Vec<String> {
        let tn = self.turn;
        let run = &self.run;
        let mut out = Vec::new();
        if let Some(reason) = run.interrupt_reason.as_deref().filter(|_| run.interrupted) {
            let out_of_steps = outcome.starts_with("failed: loop.max_steps_exceeded:");
            if out_of_steps != (reason == "max_steps") {
                out.push(format!(
                    "turn {tn} ended ({outcome}) after a turn.interrupted with reason {reason}: a run interrupted for max_steps fails with loop.max_steps_exceeded, and only such a run"
                ));
            }
            // The loop checks the limit before each step, so a run out of steps began exactly
            // as many as the error names (kimi-loop.md §3.3 case D).
            let began = run.next_step - 1;
            if let Some(limit) =
                max_steps_named(outcome).filter(|&l| reason == "max_steps" && l != began)
            {
                out.push(format!(
                    "turn {tn} failed for maxSteps={limit} after its last run began {began} step(s): a run is out of steps after exactly {limit}"
                ));
            }
        }
        if !run.interrupted {
            if let Some(open) = &run.open {
                out.push(format!(
                    "turn {tn} ended ({outcome}) with step {} open and no turn.interrupted",
                    open.step
                ));
            }
            // kimi-loop.md §8.1: the host fails a turn whose last step was `filtered`, and
            // completes any other that was not interrupted.
            let filtered = run.last_finish.as_deref() == Some("filtered");
            if filtered != outcome.starts_with(FILTERED_OUTCOME) {
                out.push(format!(
                    "turn {tn} ended ({outcome}) without a turn.interrupted, its last step {}: kimi-loop.md §8.1 fails a filtered step with {FILTERED_OUTCOME:?} and completes any other",
                    run.last_finish.as_deref().unwrap_or("never ended")
                ));
            } else if !filtered && !outcome.starts_with("completed") {
                out.push(format!(
                    "turn {tn} ended ({outcome}) without a turn.interrupted"
                ));
            }
        }
        out
    }
}

/// The limit a `loop.max_steps_exceeded` outcome names ("Turn exceeded maxSteps=N.").
fn max_steps_named(outcome: &str) -> Option<u32> {
    let rest = outcome.split_once("Turn exceeded maxSteps=")?.1;
    let digits = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// `loop-envelope`: every run's `step.begin`/`step.end` are well formed (numbered 1, 2, … in
/// order, one open at a time, each `step.end` closing its own `step.begin`); a step left open
/// only by a run that was interrupted; every `tool.call` followed by its `tool.result`, the
/// results in provider order, all before the step's `step.end`; each `step.end` carries the
/// usage of the response its step returned, and the stop reason, diagnostics and recorded
/// calls `stop_rule` gives for that response (kimi-loop.md §4.1, §3.2, §4.2); a call whose
/// arguments break its tool's schema never runs (`preflight_rule`, §4.6); a tool's result is
/// an error exactly when its execution ended in one (`outcome_rule`, §4.3); a turn's reported
/// usage equals the sum of the responses its run returned, aborted steps included; a turn
/// not interrupted completes, or fails with `provider.filtered` after a filtered step (§8.1);
/// an aborted run's `interruptReason` says whether the user cancelled it; a turn fails with
/// `loop.max_steps_exceeded` exactly when its last run was interrupted for `max_steps`, after
/// that run began exactly the steps the error names; each step has its own UUIDv4.
pub fn loop_envelope(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut turn: Option<Turn> = None;
    // Each step's uuid → the event of its `step.begin`.
    let mut step_uuids: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        if e.host != "client" {
            continue;
        }
        if let Observation::TurnStart { turn: n, .. } = &e.obs {
            turn = Some(Turn::new(*n));
            continue;
        }
        if let Observation::LoopStepBegin { step, uuid, .. } = &e.obs {
            let message = if !is_uuid_v4(uuid) {
                Some(format!(
                    "step.begin of step {step} has uuid {uuid:?}, not a random UUIDv4 (kimi-loop.md §3.2)"
                ))
            } else {
                step_uuids.get(uuid.as_str()).map(|first| {
                    format!(
                        "step.begin of step {step} reuses uuid {uuid} of the step begun at event {}: each step draws its own (kimi-loop.md §3.2)",
                        first + 1
                    )
                })
            };
            out.extend(message.map(|message| Violation::at(LOOP_ENVELOPE, i, message)));
            step_uuids.entry(uuid).or_insert(i);
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
    out.extend(super::preflight_rule::violations(events));
    out.extend(super::outcome_rule::violations(events));
    out
}

/// `randomUUID()`'s shape: 8-4-4-4-12 lowercase hex digits, version 4, variant 10.
fn is_uuid_v4(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(c),
        })
        && b[14] == b'4'
        && matches!(b[19], b'8' | b'9' | b'a' | b'b')
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
        if conflict(&r.accesses, &me.accesses) {
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
            && conflict(other_accesses, &me.accesses)
        {
            out.push(format!(
                "{tool} {tool_call_id} ({accesses}) started after {other} ({shown}), a later call in provider order that conflicts with it"
            ));
        }
    }
    out
}

/// `transcript-resumes`: at every turn's end, a session resumed from the host's `wire.jsonl`
/// holds the context the host holds (kimi-loop.md §8.2-8.3: the history is rebuilt from the
/// records by the same code path as live). A record the host forgot, wrote wrong or wrote in
/// another order shows only when a session resumes, which no turn's outcome shows. The agent
/// reads its log back at each turn end and reports a divergence (`loop_resume_diverged`).
pub fn transcript_resumes(events: &[TraceEvent]) -> Vec<Violation> {
    events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.obs {
            Observation::LoopResumeDiverged { turn, difference } => Some(Violation {
                invariant: TRANSCRIPT_RESUMES,
                event: Some(i),
                message: format!(
                    "turn {turn}: a session resumed from the host's wire.jsonl would hold another context: {difference}"
                ),
            }),
            _ => None,
        })
        .collect()
}

pub use super::budget::{RETRYABLE_STATUSES, backoff_window, budget_respected};

#[cfg(test)]
mod tests;
