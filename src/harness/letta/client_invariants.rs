//! The Letta client's oracles (DESIGN.md §5, docs/invariants.md) over the trace of a Letta run.
//! Pure: they read a finished trace and nothing else. `lock-safety` is shared with the agent
//! loop: same statement, its own checker per system.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::port::observe::{HistoryEntry, Observation};

use crate::harness::invariants::{
    APPROVAL_ATTRIBUTION, ARGS_INTACT, BUDGET_RESPECTED, LOCK_SAFETY, NO_DOUBLE_EXECUTION,
    OTIDS_FRESH, RESULT_STATUS_INTACT, RESULTS_ORDERED, STOP_REASON_CONSISTENT, STREAM_GAPLESS,
    Violation,
};
use crate::harness::trace::TraceEvent;

use super::budget_respected::budget_respected;
use super::otids_fresh::otids_fresh;

/// An invariant's checker.
pub type Checker = fn(&[TraceEvent]) -> Vec<Violation>;

/// The client invariants checked on every run, with their checkers.
pub fn client_invariants() -> [(&'static str, Checker); 10] {
    [
        (NO_DOUBLE_EXECUTION, no_double_execution),
        (STREAM_GAPLESS, stream_gapless),
        (STOP_REASON_CONSISTENT, stop_reason_consistent),
        (ARGS_INTACT, args_intact),
        (RESULT_STATUS_INTACT, result_status_intact),
        (BUDGET_RESPECTED, budget_respected),
        (APPROVAL_ATTRIBUTION, approval_attribution),
        (RESULTS_ORDERED, results_ordered),
        (LOCK_SAFETY, client_lock_safety),
        (OTIDS_FRESH, otids_fresh),
    ]
}

fn v(invariant: &'static str, event: usize, message: String) -> Violation {
    Violation::at(invariant, event, message)
}

/// `no-double-execution`: a tool call's side effect happens at most once, across resume, 409
/// retries, restarts and duplicate sends. The workspace counts executions per call id and
/// survives client crashes, so `executions > 1` is a second side effect.
pub fn no_double_execution(events: &[TraceEvent]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if let Observation::ToolExecuted {
            tool_call_id,
            executions,
            ..
        } = &e.obs
            && *executions > 1
        {
            out.push(v(
                NO_DOUBLE_EXECUTION,
                i,
                format!("tool call {tool_call_id} took effect {executions} times"),
            ));
        }
    }
    out
}

/// `stream-gapless`: for every run, the chunks the client processed are the server's recorded
/// chunks, in seq order, with no gap and no duplicate (a prefix of the recorded log when the
/// client stopped early). The cloud profiles' stop_reason and usage_statistics frames show no
/// seq id (the local backend's do, letta-protocol.md §7.4); they are the last chunks of a run,
/// so what the client saw is still a prefix. A keepalive ping repeats the last seq id and is
/// not a duplicate.
pub fn stream_gapless(events: &[TraceEvent]) -> Vec<Violation> {
    let mut recorded: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in events {
        if let Observation::ChunkRecorded { run_id, seq_id, .. } = &e.obs {
            recorded.entry(run_id.clone()).or_default().push(*seq_id);
        }
    }
    let mut processed: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut out = Vec::new();
    let mut reported: Vec<String> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let Observation::ClientChunk {
            run_id: Some(run),
            seq_id: Some(seq),
            message_type,
        } = &e.obs
        else {
            continue;
        };
        let seen = processed.entry(run.clone()).or_default();
        if message_type == "ping" && seen.contains(seq) {
            continue; // a keepalive ping repeating the last seq id
        }
        let repeated = seen.contains(seq);
        seen.push(*seq);
        if reported.contains(run) {
            continue;
        }
        let k = seen.len() - 1;
        let expected = recorded.get(run).and_then(|r| r.get(k)).copied();
        // Chunks are recorded before they are streamed: the recorded log is never behind.
        let ok = match expected {
            Some(x) => x == *seq,
            None => false,
        };
        if !ok {
            let why = match expected {
                _ if repeated => format!("duplicate: seq {seq} was already processed"),
                Some(x) if *seq > x => format!("gap: expected seq {x}, got {seq}"),
                Some(x) => format!("duplicate or out of order: expected seq {x}, got {seq}"),
                None => format!("seq {seq} was never recorded for this run"),
            };
            out.push(v(
                STREAM_GAPLESS,
                i,
                format!("run {run}: processed chunk #{} {why}", k + 1),
            ));
            reported.push(run.clone());
        }
    }
    out
}

/// Tool calls the server recorded for each run: `History::ToolCall` events between a run's
/// start and end on its conversation. The local backend takes no lock, so two runs can be open
/// on one conversation: a call goes to the run whose provider result the server just wrote
/// (the entries follow their `ProviderResult`), else to the conversation's latest open run.
fn run_tool_calls(events: &[TraceEvent]) -> BTreeMap<String, Vec<String>> {
    let mut open: BTreeMap<String, Vec<String>> = BTreeMap::new(); // conversation → runs
    let mut calls: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut last_result: Option<String> = None;
    for e in events {
        match &e.obs {
            Observation::RunStarted {
                run_id,
                conversation_id,
                ..
            } => {
                open.entry(conversation_id.clone())
                    .or_default()
                    .push(run_id.clone());
                calls.entry(run_id.clone()).or_default();
            }
            Observation::RunEnded { run_id, .. } => {
                for runs in open.values_mut() {
                    runs.retain(|r| r != run_id);
                }
            }
            Observation::ProviderResult { run_id, .. } => last_result = Some(run_id.clone()),
            Observation::History {
                conversation_id,
                entry: HistoryEntry::ToolCall { tool_call_id, .. },
            } => {
                let runs = open.get(conversation_id).map(Vec::as_slice).unwrap_or(&[]);
                let run = last_result
                    .as_ref()
                    .filter(|r| runs.contains(r))
                    .or(runs.last());
                if let Some(run) = run {
                    calls
                        .entry(run.clone())
                        .or_default()
                        .push(tool_call_id.clone());
                }
            }
            _ => {}
        }
    }
    calls
}

/// `stop-reason-consistent`: a run that emitted approval requests is acted on as
/// `requires_approval`, with exactly the run's tool calls; a run acted on as
/// `requires_approval` asked for exactly those calls. A call the server already closed when
/// the client acted (another client's new turn settled it on the lock-free local backend,
/// letta-protocol.md §7.2) has nothing left to answer, so the client may leave it out.
pub fn stop_reason_consistent(events: &[TraceEvent]) -> Vec<Violation> {
    let calls = run_tool_calls(events);
    let mut closed: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if let Observation::History {
            entry:
                HistoryEntry::ToolReturn { tool_call_id, .. }
                | HistoryEntry::Denial { tool_call_id, .. }
                | HistoryEntry::Settled { tool_call_id, .. },
            ..
        } = &e.obs
        {
            closed.insert(tool_call_id);
            continue;
        }
        let Observation::ClientActedOn {
            run_id: Some(run),
            stop_reason,
            approvals,
        } = &e.obs
        else {
            continue;
        };
        let Some(requested) = calls.get(run) else {
            continue;
        };
        let mut got = approvals.clone();
        got.sort();
        let mut want = requested.clone();
        want.sort();
        if !requested.is_empty() && stop_reason == "end_turn" {
            out.push(v(
                STOP_REASON_CONSISTENT,
                i,
                format!(
                    "run {run} asked for tool calls {requested:?} but was acted on as end_turn"
                ),
            ));
        } else if stop_reason == "requires_approval"
            && (got.windows(2).any(|w| w[0] == w[1])
                || got.iter().any(|c| !want.contains(c))
                || want
                    .iter()
                    .any(|c| !got.contains(c) && !closed.contains(c.as_str())))
        {
            out.push(v(
                STOP_REASON_CONSISTENT,
                i,
                format!(
                    "run {run} was acted on as requires_approval with approvals {approvals:?}, but it asked for {requested:?}"
                ),
            ));
        }
    }
    out
}

/// `args-intact`: the arguments a tool ran with equal the arguments the provider produced (as
/// the server stored them), across splits and resumes.
pub fn args_intact(events: &[TraceEvent]) -> Vec<Violation> {
    let mut produced: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::History {
                entry:
                    HistoryEntry::ToolCall {
                        tool_call_id,
                        arguments,
                        ..
                    },
                ..
            } => {
                produced.insert(tool_call_id.clone(), arguments.clone());
            }
            Observation::ToolStarted {
                tool_call_id,
                arguments,
                ..
            } => {
                if let Some(p) = produced.get(tool_call_id)
                    && p != arguments
                {
                    out.push(v(
                        ARGS_INTACT,
                        i,
                        format!(
                            "tool call {tool_call_id} ran with arguments {arguments:?}, but the provider produced {p:?}"
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// `result-status-intact`: the status the server records for a tool's result (`success` or
/// `error`) is the status the client's last run of that tool produced. A result sent with the
/// other status tells the model a tool failed that worked, or worked that failed. A call the
/// client aborted, or ran before the user interrupted, goes back as `error` whatever it
/// produced (letta-protocol.md §9), and is not judged.
pub fn result_status_intact(events: &[TraceEvent]) -> Vec<Violation> {
    let mut ran: BTreeMap<&str, &str> = BTreeMap::new();
    let mut exempt: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::ToolExecuted {
                tool_call_id,
                status,
                ..
            } => {
                ran.insert(tool_call_id, status);
            }
            Observation::ToolAborted { tool_call_id } => {
                exempt.insert(tool_call_id);
            }
            Observation::ClientInterrupt { .. } => exempt.extend(ran.keys()),
            Observation::History {
                entry:
                    HistoryEntry::ToolReturn {
                        tool_call_id,
                        status,
                    },
                ..
            } => {
                if let Some(produced) = ran.get(tool_call_id.as_str())
                    && !exempt.contains(tool_call_id.as_str())
                    && produced != status
                {
                    out.push(v(
                        RESULT_STATUS_INTACT,
                        i,
                        format!(
                            "the server recorded tool call {tool_call_id}'s result as {status}, but the client's run of it produced {produced}"
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// The fixed denial texts of each non-human origin (letta-protocol.md §3.11-3.12, §5.4).
fn origin_allows(origin: &str, reason: &str) -> bool {
    use crate::model::letta::client::policy as p;
    match origin {
        "stale-recovery" => reason == p::STALE_APPROVAL_RECOVERY_DENIAL_REASON,
        "interrupt" => reason == p::USER_INTERRUPTED_THE_STREAM,
        "user-cancel" => reason == p::USER_CANCELLED_NEW_MESSAGE_QUEUED,
        "headless-ask" => reason == p::HEADLESS_ASK_DENY_REASON,
        "incomplete" => {
            reason == p::MISSING_NAME_REASON_TUI
                || reason == p::MISSING_NAME_REASON_HEADLESS
                || reason.contains(" tool missing required parameter")
                || reason.contains(" were not valid JSON, so they were probably truncated")
        }
        "policy" => reason.starts_with("Permission denied: "),
        _ => false,
    }
}

/// `approval-attribution`: a denial that no user made is never presented as the user's, and the
/// model sees exactly one decision per call — the one the client made. Every denial the server
/// recorded must come from a client decision; a human's denial carries the human's reason; any
/// other denial carries the fixed text of its origin; a call the client allowed is never
/// recorded as denied (and vice versa). A call a scenario's probe answered too (a second party
/// on the conversation) may reach the model with the probe's answer; the model still sees one.
pub fn approval_attribution(events: &[TraceEvent]) -> Vec<Violation> {
    // tool_call_id → (origin, decision) of the latest client decision.
    let mut decided: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut probe_answered: BTreeSet<String> = BTreeSet::new();
    // (conversation, tool_call_id) → decisions recorded: the model's context is one
    // conversation's, so a call id planted in two conversations is decided once in each.
    let mut resolved: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::ClientDecision {
                tool_call_id,
                decision,
                origin,
                ..
            } => {
                decided.insert(tool_call_id.clone(), (origin.clone(), decision.clone()));
            }
            Observation::ProbeRequest { approvals, .. } => {
                probe_answered.extend(approvals.iter().cloned());
            }
            Observation::History {
                entry:
                    HistoryEntry::Denial {
                        tool_call_id,
                        reason,
                    },
                ..
            } => {
                if !probe_answered.contains(tool_call_id)
                    && let Some(m) = denial_problem(tool_call_id, reason, decided.get(tool_call_id))
                {
                    out.push(v(APPROVAL_ATTRIBUTION, i, m));
                }
            }
            Observation::History {
                entry: HistoryEntry::ToolReturn { tool_call_id, .. },
                ..
            } => {
                if let Some((_, decision)) = decided.get(tool_call_id)
                    && decision.starts_with("deny")
                    && !probe_answered.contains(tool_call_id)
                {
                    out.push(v(
                        APPROVAL_ATTRIBUTION,
                        i,
                        format!("tool call {tool_call_id} was denied ({decision:?}) but the model sees a tool result"),
                    ));
                }
            }
            _ => {}
        }
        if let Observation::History {
            conversation_id,
            entry,
        } = &e.obs
            && let HistoryEntry::ToolReturn { tool_call_id, .. }
            | HistoryEntry::Denial { tool_call_id, .. } = entry
        {
            let n = resolved
                .entry((conversation_id.clone(), tool_call_id.clone()))
                .or_default();
            *n += 1;
            if *n > 1 {
                out.push(v(
                    APPROVAL_ATTRIBUTION,
                    i,
                    format!("the model sees a second decision for tool call {tool_call_id}"),
                ));
            }
        }
    }
    out
}

/// What is wrong with the denial of `tool_call_id` the model sees, given the client's latest
/// decision for it (origin, decision): no decision, a decision that was not a denial, or a
/// reason that is not the decider's.
fn denial_problem(
    tool_call_id: &str,
    reason: &str,
    decided: Option<&(String, String)>,
) -> Option<String> {
    let Some((origin, decision)) = decided else {
        return Some(format!(
            "tool call {tool_call_id} was denied ({reason:?}) but the client never decided it"
        ));
    };
    if !decision.starts_with("deny") {
        Some(format!(
            "tool call {tool_call_id} was decided {decision:?} but the model sees a denial"
        ))
    } else if origin == "human" {
        (decision.strip_prefix("deny: ") != Some(reason)).then(|| {
            format!(
                "the human denied {tool_call_id} with {decision:?}, but the model sees {reason:?}"
            )
        })
    } else if !origin_allows(origin, reason) {
        Some(format!(
            "tool call {tool_call_id} was denied by {origin}, not by the user, but its reason {reason:?} is not that origin's text"
        ))
    } else {
        None
    }
}

/// Parses `approval[tool:a,deny:b]+user` into the approval item ids, in order.
fn sent_approval_ids(items: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for part in items.split('+') {
        if let Some(inner) = part
            .strip_prefix("approval[")
            .and_then(|r| r.strip_suffix(']'))
        {
            for item in inner.split(',').filter(|x| !x.is_empty()) {
                if let Some((_, id)) = item.split_once(':') {
                    ids.push(id.to_string());
                }
            }
        }
    }
    ids
}

/// `results-ordered`: approval results are sent in decision order, whatever order the tools
/// finished in.
pub fn results_ordered(events: &[TraceEvent]) -> Vec<Violation> {
    let mut order: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::ClientDecision {
                tool_call_id,
                decision,
                ..
            } if decision != "await-human" => {
                order.retain(|x| x != tool_call_id);
                order.push(tool_call_id.clone());
            }
            Observation::ClientSend { items, .. } => {
                let sent = sent_approval_ids(items);
                if sent.is_empty() {
                    continue;
                }
                let mut decided: Vec<&String> =
                    order.iter().filter(|id| sent.contains(id)).collect();
                decided.dedup();
                let sent_known: Vec<&String> =
                    sent.iter().filter(|id| order.contains(id)).collect();
                if decided != sent_known {
                    out.push(v(
                        RESULTS_ORDERED,
                        i,
                        format!("approval results sent in order {sent_known:?}, decided in order {decided:?}"),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// `lock-safety`: conflicting tool executions never overlap in simulated time. Two executions
/// conflict when neither tool is parallel-safe and they share a resource key, or either holds
/// the global key; the keys and the rule are the oracle's own ([`Lock`], from
/// letta-protocol.md §5.1-5.2), not the client's.
///
/// [`Lock`]: crate::harness::letta::lock_rule::Lock
pub fn client_lock_safety(events: &[TraceEvent]) -> Vec<Violation> {
    use crate::harness::letta::lock_rule::Lock;
    struct Exec {
        id: String,
        tool: String,
        lock: Lock,
        start: u64,
        end: Option<u64>,
    }
    let mut execs: Vec<Exec> = Vec::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::ToolStarted {
                tool_call_id,
                tool,
                arguments,
                ..
            } => {
                let lock = Lock::of(tool, arguments);
                for other in execs
                    .iter()
                    .filter(|x| x.end.is_none_or(|end| end > e.t_ms))
                {
                    if lock.conflicts(&other.lock)
                        && other.start <= e.t_ms
                        && other.id != *tool_call_id
                    {
                        out.push(v(
                            LOCK_SAFETY,
                            i,
                            format!(
                                "{tool} ({tool_call_id}, key {}) started while {} ({}, key {}) was running",
                                lock.key().unwrap_or("-"),
                                other.tool,
                                other.id,
                                other.lock.key().unwrap_or("-")
                            ),
                        ));
                    }
                }
                execs.push(Exec {
                    id: tool_call_id.clone(),
                    tool: tool.clone(),
                    lock,
                    start: e.t_ms,
                    end: None,
                });
            }
            Observation::ToolExecuted { tool_call_id, .. }
            | Observation::ToolAborted { tool_call_id } => {
                if let Some(x) = execs
                    .iter_mut()
                    .rev()
                    .find(|x| x.id == *tool_call_id && x.end.is_none())
                {
                    x.end = Some(e.t_ms);
                }
            }
            _ => {}
        }
    }
    out
}
