//! The judge of a real-client run: the invariants that can be checked from the server's side
//! and the client's working directory (docs/real-client.md "Judging").
//!
//! The server's invariants run unchanged on the server's trace. The client's are checked on
//! what the client showed the server: its decisions and the order of its results as its message
//! sends carry them, and its side effects as the working directory holds them. Where an
//! existing checker applies, the client's part of the trace is rebuilt from those and the
//! checker runs on it (`no-double-execution`, `results-ordered`, `approval-attribution`);
//! `budget-respected` is measured on the request log in real time, with [`TOLERANCE_MS`].

use std::collections::BTreeMap;

use serde_json::Value;

use super::launch::CliRun;
use super::serve::Request;
use crate::harness::faults::Fault;
use crate::harness::invariants::{
    APPROVAL_ATTRIBUTION, BACKFILL_FAITHFUL, BUDGET_RESPECTED, COMPACTION_SAFE, HISTORY_VALID,
    NO_DOUBLE_EXECUTION, ONE_RUN_PER_REQUEST, OTIDS_FRESH, REQUESTS_ROUTED, RESPONSE_STATE_REUSED,
    RESULTS_ORDERED, SEND_FAULTS_FIRE, STREAM_STAYS_IN_CONVERSATION, TOOL_CALL_RESOLVED,
    TURN_TERMINATES, Violation, history_valid,
};
use crate::harness::letta::backfill::{backfill_faithful, is_listing};
use crate::harness::letta::client_invariants::{
    approval_attribution, no_double_execution, results_ordered,
};
use crate::harness::letta::compaction_safe::compaction_safe;
use crate::harness::letta::invariants::{
    one_run_per_request, pending_tool_calls, requests_routed, stream_stays_in_conversation,
    tool_call_resolved,
};
use crate::harness::letta::otids_fresh::otids_fresh;
use crate::harness::letta::response_state::response_state_reused;
use crate::harness::letta::send_faults_fire::send_faults_fire;
use crate::harness::trace::TraceEvent;
use crate::harness::world_start::WorldStart;
use crate::model::letta::client::policy as p;
use crate::model::port::observe::{HistoryEntry, Observation};

/// The client's own outcome: it printed a `result` event.
pub const CLI_RESULT: &str = "cli-result";

/// How much earlier than its documented delay a retry may come in real time: the stdout line
/// that announces a wait is stamped when it is read and a request when its response head is
/// ready, both a little after the fact.
pub const TOLERANCE_MS: u64 = 250;

/// The file in the working directory whose lines are the side effects of the scenario's tool
/// calls (one line per execution; scenarios/real-client/bash_effect.toml's Bash call appends `e2e-ok`).
pub const EFFECTS_FILE: &str = "sim-effects.log";

/// The invariants a real-client run is judged by, in report order.
pub const CHECKED: [&str; 16] = [
    TOOL_CALL_RESOLVED,
    ONE_RUN_PER_REQUEST,
    HISTORY_VALID,
    COMPACTION_SAFE,
    STREAM_STAYS_IN_CONVERSATION,
    REQUESTS_ROUTED,
    NO_DOUBLE_EXECUTION,
    RESULTS_ORDERED,
    APPROVAL_ATTRIBUTION,
    OTIDS_FRESH,
    RESPONSE_STATE_REUSED,
    BACKFILL_FAITHFUL,
    SEND_FAULTS_FIRE,
    BUDGET_RESPECTED,
    TURN_TERMINATES,
    CLI_RESULT,
];

/// One broken invariant, with the real time (server clock) of the event that broke it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Finding {
    pub invariant: String,
    pub message: String,
    pub t_ms: Option<u64>,
}

/// What the judge was given about one run.
pub struct Evidence<'a> {
    pub trace: &'a [TraceEvent],
    pub requests: &'a [Request],
    pub cli: &'a CliRun,
    /// The contents of [`EFFECTS_FILE`] (empty when the client wrote none).
    pub effects: &'a str,
    /// The run's plan (numbered sends tell a 409 busy from an approval conflict).
    pub plan: &'a [Fault],
    pub budget_ms: u64,
    /// The scenario's `[network] start`: real time zero on the server's dates.
    pub start: WorldStart,
}

/// Judges one run: every invariant of [`CHECKED`] with its findings (empty = held).
pub fn judge(ev: &Evidence<'_>) -> Vec<(&'static str, Vec<Finding>)> {
    let trace = ev.trace;
    let on_trace = |vs: Vec<Violation>, events: &[TraceEvent]| -> Vec<Finding> {
        vs.into_iter()
            .map(|v| Finding {
                invariant: v.invariant.to_string(),
                message: v.message,
                t_ms: v.event.and_then(|i| events.get(i)).map(|e| e.t_ms),
            })
            .collect()
    };
    let mut resolved = on_trace(tool_call_resolved(trace), trace);
    resolved.extend(left_pending(ev));
    let client = client_side(ev);
    vec![
        (TOOL_CALL_RESOLVED, resolved),
        (
            ONE_RUN_PER_REQUEST,
            on_trace(one_run_per_request(trace), trace),
        ),
        (HISTORY_VALID, on_trace(history_valid(trace), trace)),
        (
            COMPACTION_SAFE,
            on_trace(compaction_safe(trace, ev.start), trace),
        ),
        (
            STREAM_STAYS_IN_CONVERSATION,
            on_trace(stream_stays_in_conversation(trace), trace),
        ),
        (REQUESTS_ROUTED, routed(trace)),
        (NO_DOUBLE_EXECUTION, double_execution(ev)),
        (RESULTS_ORDERED, on_trace(results_ordered(&client), &client)),
        (
            APPROVAL_ATTRIBUTION,
            on_trace(approval_attribution(&client), &client),
        ),
        (OTIDS_FRESH, on_trace(otids_fresh(&client), &client)),
        (
            RESPONSE_STATE_REUSED,
            on_trace(response_state_reused(trace), trace),
        ),
        (BACKFILL_FAITHFUL, {
            let listings = listings(ev);
            on_trace(backfill_faithful(&listings), &listings)
        }),
        (
            SEND_FAULTS_FIRE,
            on_trace(send_faults_fire(ev.plan, trace), trace),
        ),
        (BUDGET_RESPECTED, budget(ev)),
        (TURN_TERMINATES, terminates(ev)),
        (CLI_RESULT, cli_result(ev)),
    ]
}

/// The agent routes the published CLI calls that Letta 0.16.8 does not serve either: the real
/// server answered each `GET /v1/agents/{id}/<route>` with its bare 404 and the CLI carried on,
/// in every flow of captures/letta_e2e (PROVENANCE.md).
pub const ROUTES_THE_REAL_SERVER_LACKS: [&str; 3] = ["secrets", "mcp-servers", "repositories"];

/// `requests-routed` on the server's trace, less the 404s the real server gives too
/// ([`ROUTES_THE_REAL_SERVER_LACKS`]): a route the server model lacks and the real server has,
/// or one the CLI calls that neither has, is a finding.
fn routed(trace: &[TraceEvent]) -> Vec<Finding> {
    let judged: Vec<TraceEvent> = trace
        .iter()
        .filter(|e| !lacked_by_the_real_server(&e.obs))
        .cloned()
        .collect();
    requests_routed(&judged)
        .into_iter()
        .map(|v| {
            let t_ms = v.event.and_then(|i| judged.get(i)).map(|e| e.t_ms);
            finding(REQUESTS_ROUTED, v.message, t_ms)
        })
        .collect()
}

/// A 404 for `GET /v1/agents/{id}/<route>`, `<route>` one of [`ROUTES_THE_REAL_SERVER_LACKS`].
fn lacked_by_the_real_server(obs: &Observation) -> bool {
    let Observation::ServerUnrouted {
        method,
        path,
        status: 404,
    } = obs
    else {
        return false;
    };
    let route = path
        .strip_prefix("/v1/agents/")
        .map(|rest| rest.trim_end_matches('/').split('/').collect::<Vec<_>>());
    method == "GET"
        && matches!(route.as_deref(), Some([id, route])
            if !id.is_empty() && ROUTES_THE_REAL_SERVER_LACKS.contains(route))
}

fn finding(invariant: &str, message: String, t_ms: Option<u64>) -> Finding {
    Finding {
        invariant: invariant.to_string(),
        message,
        t_ms,
    }
}

/// A client that says its turn succeeded leaves no call the server asked about unresolved (a
/// headless turn cannot pause for a human).
fn left_pending(ev: &Evidence<'_>) -> Vec<Finding> {
    let success = ev.cli.result().is_some_and(|r| r["subtype"] == "success");
    if !success {
        return Vec::new();
    }
    pending_tool_calls(ev.trace)
        .into_iter()
        .map(|(conv, id)| {
            finding(
                TOOL_CALL_RESOLVED,
                format!(
                    "conversation {conv}: the client reported success, but tool call {id} is still awaiting its result"
                ),
                None,
            )
        })
        .collect()
}

/// The tool calls the server asked about, in order: (id, tool, arguments).
fn server_calls(trace: &[TraceEvent]) -> Vec<(String, String, String)> {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for e in trace {
        if let Observation::History {
            entry:
                HistoryEntry::ToolCall {
                    tool_call_id,
                    name,
                    arguments,
                },
            ..
        } = &e.obs
            && !calls.iter().any(|(id, _, _)| id == tool_call_id)
        {
            calls.push((tool_call_id.clone(), name.clone(), arguments.clone()));
        }
    }
    calls
}

/// `no-double-execution` on the working directory: each line of [`EFFECTS_FILE`] is one
/// execution of a call whose arguments contain it; more lines than such calls is a second
/// side effect. With one such call the model's checker runs on its execution count.
fn double_execution(ev: &Evidence<'_>) -> Vec<Finding> {
    let mut lines: BTreeMap<&str, u32> = BTreeMap::new();
    for l in ev.effects.lines().map(str::trim).filter(|l| !l.is_empty()) {
        *lines.entry(l).or_default() += 1;
    }
    let calls = server_calls(ev.trace);
    let mut executed = Vec::new();
    let mut out = Vec::new();
    for (line, n) in lines {
        let carriers: Vec<&(String, String, String)> =
            calls.iter().filter(|(_, _, a)| a.contains(line)).collect();
        match carriers.as_slice() {
            [(id, tool, arguments)] => executed.push(TraceEvent {
                t_ms: ev.cli.elapsed_ms,
                host: "client".into(),
                obs: Observation::ToolExecuted {
                    tool_call_id: id.clone(),
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    executions: n,
                    status: "success".into(),
                },
            }),
            many if n as usize > many.len() => out.push(finding(
                NO_DOUBLE_EXECUTION,
                format!(
                    "{EFFECTS_FILE} holds {line:?} {n} times, but {} tool call(s) asked for it{}",
                    many.len(),
                    if many.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " ({})",
                            many.iter()
                                .map(|(id, _, _)| id.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                ),
                None,
            )),
            _ => {}
        }
    }
    out.extend(no_double_execution(&executed).into_iter().map(|v| {
        finding(
            v.invariant,
            format!("{} (lines of {EFFECTS_FILE})", v.message),
            None,
        )
    }));
    out
}

/// Who made a denial, from its reason: the fixed texts of the origins that are not a human
/// (letta-protocol.md §3.11-3.12, §5.4). A one-shot headless run has no human, so any other
/// reason is of an unknown origin, which the checker holds against every origin's text.
fn origin_of(reason: &str) -> &'static str {
    if reason == p::STALE_APPROVAL_RECOVERY_DENIAL_REASON {
        "stale-recovery"
    } else if reason == p::HEADLESS_ASK_DENY_REASON {
        "headless-ask"
    } else if reason == p::USER_INTERRUPTED_THE_STREAM {
        "interrupt"
    } else if reason == p::USER_CANCELLED_NEW_MESSAGE_QUEUED {
        "user-cancel"
    } else if reason == p::MISSING_NAME_REASON_TUI
        || reason == p::MISSING_NAME_REASON_HEADLESS
        || reason.contains(" tool missing required parameter")
        || reason.contains(" were not valid JSON, so they were probably truncated")
    {
        "incomplete"
    } else if reason.starts_with("Permission denied: ") {
        "policy"
    } else {
        "unknown"
    }
}

/// One approval item of a send: (tool_call_id, decision), decision `allow` or `deny: reason`.
fn approvals(message: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for a in message["approvals"].as_array().into_iter().flatten() {
        let Some(id) = a["tool_call_id"].as_str() else {
            continue;
        };
        let decision = if a["type"] == "tool" || a["approve"] == true {
            "allow".to_string()
        } else {
            format!("deny: {}", a["reason"].as_str().unwrap_or(""))
        };
        out.push((id.to_string(), decision));
    }
    out
}

/// The message listings the client requested, as the server logged them (path and query):
/// its tail reads. Its backfilled transcript is on its screen, not in any log.
fn listings(ev: &Evidence<'_>) -> Vec<TraceEvent> {
    ev.requests
        .iter()
        .filter(|r| r.method == "GET" && is_listing(r.path.split('?').next().unwrap_or("")))
        .map(|r| TraceEvent {
            t_ms: r.t_ms,
            host: "client".into(),
            obs: Observation::ClientRequest {
                method: r.method.clone(),
                path: r.path.clone(),
                retry: 0,
            },
        })
        .collect()
}

/// The client's part of the trace as its sends show it, followed by the server's trace: one
/// `client_decision` per call it answered (in the order the server asked, each with the last
/// answer it sent), then one `client_send` per message send with its items.
fn client_side(ev: &Evidence<'_>) -> Vec<TraceEvent> {
    let mut decided: Vec<(String, String, u64)> = Vec::new(); // id, decision, t
    let mut sends = Vec::new();
    for r in ev.requests.iter().filter(|r| r.is_send()) {
        let mut items = Vec::new();
        let mut otids = Vec::new();
        for m in r.body["messages"].as_array().into_iter().flatten() {
            if let Some(o) = m["otid"].as_str() {
                otids.push(o.to_string());
            }
            if m["type"] == "approval" {
                let mut parts = Vec::new();
                for (id, d) in approvals(m) {
                    let kind = if d == "allow" { "tool" } else { "deny" };
                    parts.push(format!("{kind}:{id}"));
                    decided.retain(|(x, _, _)| *x != id);
                    decided.push((id, d, r.t_ms));
                }
                items.push(format!("approval[{}]", parts.join(",")));
            } else {
                items.push(m["role"].as_str().unwrap_or("message").to_string());
            }
        }
        sends.push(TraceEvent {
            t_ms: r.t_ms,
            host: "client".into(),
            obs: Observation::ClientSend {
                turn: 1,
                method: r.method.clone(),
                path: r.path.clone(),
                items: items.join("+"),
                otids,
                // The request log keeps no headers; the server trace has the ones it received.
                response_state: false,
            },
        });
    }
    let asked = server_calls(ev.trace);
    let rank = |id: &str| {
        asked
            .iter()
            .position(|(x, _, _)| x == id)
            .unwrap_or(usize::MAX)
    };
    decided.sort_by_key(|(id, _, _)| rank(id));
    let tool_of = |id: &str| {
        asked
            .iter()
            .find(|(x, _, _)| x == id)
            .map(|(_, t, _)| t.clone())
            .unwrap_or_default()
    };
    let mut out: Vec<TraceEvent> = decided
        .into_iter()
        .map(|(id, decision, t)| {
            let origin = match decision.strip_prefix("deny: ") {
                Some(reason) => origin_of(reason),
                None => "policy",
            };
            TraceEvent {
                t_ms: t,
                host: "client".into(),
                obs: Observation::ClientDecision {
                    tool: tool_of(&id),
                    tool_call_id: id,
                    decision,
                    origin: origin.into(),
                },
            }
        })
        .collect();
    out.extend(sends);
    out.extend(ev.trace.iter().cloned());
    out
}

/// Whether the server model refused to plant the stale pending call of send `n`
/// (`approval_pending send=N … not planted: …` on the trace).
fn stale_call_refused_at(trace: &[TraceEvent], n: u64) -> bool {
    let send = format!(" send={n} ");
    trace.iter().any(|e| {
        matches!(&e.obs, Observation::Fault { fault }
            if fault.starts_with("approval_pending") && fault.contains(&send)
                && fault.contains(" not planted: "))
    })
}

/// The 1-based number of each message send, as the server counts them.
fn send_numbers(requests: &[Request]) -> Vec<(u64, &Request)> {
    requests
        .iter()
        .filter(|r| r.is_send())
        .enumerate()
        .map(|(i, r)| (i as u64 + 1, r))
        .collect()
}

fn first_otid(r: &Request) -> Option<&str> {
    r.body["messages"]
        .as_array()?
        .iter()
        .find_map(|m| m["otid"].as_str())
}

fn approval_only(r: &Request) -> bool {
    r.body["messages"]
        .as_array()
        .is_some_and(|ms| !ms.is_empty() && ms.iter().all(|m| m["type"] == "approval"))
}

/// `budget-respected` in real time (letta-protocol.md §3.3, §3.8, §4.4): every wait the client
/// announces on stdout is kept until its next message send; a send answered 409 busy is sent
/// again (same otid) no sooner than 10 s · 2^(n-1) later and at most 3 times; one answered 503
/// shutting down no sooner than 1 s later and at most 3 times; a run's stream is resumed at most
/// 20 times (60 POSTs: the SDK tries each 500 three times, reference B.5.6). Each wait may come
/// [`TOLERANCE_MS`] early.
fn budget(ev: &Evidence<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let sends = send_numbers(ev.requests);
    // Announced waits.
    for (t, e) in ev.cli.events() {
        if e["type"] != "retry" {
            continue;
        }
        let attempt = e["attempt"].as_u64().unwrap_or(0);
        if let Some(max) = e["max_attempts"].as_u64()
            && attempt > max
        {
            out.push(finding(
                BUDGET_RESPECTED,
                format!("retry attempt {attempt} exceeds its max_attempts {max}: {e}"),
                Some(t),
            ));
        }
        let delay = e["delay_ms"].as_u64().unwrap_or(0);
        if let Some((_, next)) = sends.iter().find(|(_, r)| r.t_ms >= t)
            && next.t_ms + TOLERANCE_MS < t + delay
        {
            out.push(finding(
                BUDGET_RESPECTED,
                format!(
                    "the client announced a {delay} ms wait (retry attempt {attempt}), but sent request #{} {} ms later",
                    next.n,
                    next.t_ms - t
                ),
                Some(next.t_ms),
            ));
        }
    }
    // 409 busy and 503 shutting down, per otid. A send whose plan leaves another client's call
    // pending is answered 409 for that call, unless the server refused to plant it (a run held
    // the conversation, or a call already waited) and said so on the trace: then its 409 is a
    // busy one and counts against the busy budget.
    let approval_conflict_at = |n: u64| {
        let planned = ev.plan.iter().any(|f| {
            matches!(f, Fault::ApprovalPendingOnSend { send, .. }
                | Fault::ApprovalPendingInBand { send, .. } if *send == n)
        });
        planned && !stale_call_refused_at(ev.trace, n)
    };
    let mut busy: BTreeMap<String, u32> = BTreeMap::new();
    let mut down: BTreeMap<String, u32> = BTreeMap::new();
    for (k, (n, r)) in sends.iter().enumerate() {
        let Some(otid) = first_otid(r) else { continue };
        let (kind, counter, base, max) = match r.status {
            409 if !approval_conflict_at(*n) => ("409 busy", &mut busy, 10_000u64, 3u32),
            503 => ("503 shutting down", &mut down, 1_000, 3),
            _ => continue,
        };
        let tries = counter.entry(otid.to_string()).or_default();
        *tries += 1;
        let again = sends[k + 1..]
            .iter()
            .take_while(|(_, x)| !approval_only(x))
            .find(|(_, x)| first_otid(x) == Some(otid));
        let Some((_, next)) = again else { continue };
        if *tries > max {
            out.push(finding(
                BUDGET_RESPECTED,
                format!(
                    "send #{} (otid {otid}) is a retry after {kind} number {}; the budget is {max}",
                    next.n, *tries
                ),
                Some(next.t_ms),
            ));
        }
        let want = if base == 10_000 {
            base.saturating_mul(1 << (*tries - 1).min(20))
        } else {
            base
        };
        let gap = next.t_ms.saturating_sub(r.t_ms);
        if gap + TOLERANCE_MS < want {
            out.push(finding(
                BUDGET_RESPECTED,
                format!(
                    "request #{} was answered {kind}; the same message (otid {otid}) came again as request #{} after {gap} ms, before the documented {want} ms",
                    r.n, next.n
                ),
                Some(next.t_ms),
            ));
        }
    }
    // Resumes of a run's stream.
    let mut resumes: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for r in ev.requests {
        let path = r.path.split('?').next().unwrap_or("");
        if r.method == "POST"
            && let Some(run) = path
                .strip_prefix("/v1/runs/")
                .and_then(|x| x.strip_suffix("/stream"))
        {
            let e = resumes.entry(run).or_insert((0, r.t_ms));
            e.0 += 1;
            e.1 = r.t_ms;
        }
    }
    for (run, (n, t)) in resumes {
        if n > 60 {
            out.push(finding(
                BUDGET_RESPECTED,
                format!(
                    "run {run}'s stream was resumed with {n} POSTs; the headless budget is 20 attempts of 3 tries"
                ),
                Some(t),
            ));
        }
    }
    out
}

/// `turn-terminates`: the client ended by itself within its wall-clock budget. Every fault a
/// real-client plan holds is one-shot (a numbered send or response) and healed once it fired,
/// except a stall, which the client has to give up on by itself (its stall reconciler, 60 s,
/// reference B.4): the budget covers that.
fn terminates(ev: &Evidence<'_>) -> Vec<Finding> {
    if !ev.cli.killed {
        return Vec::new();
    }
    let last = ev
        .requests
        .last()
        .map(|r| format!("; the last request was {}", r.line()))
        .unwrap_or_default();
    vec![finding(
        TURN_TERMINATES,
        format!(
            "the client was still running when its budget of {} ms ran out{last}",
            ev.budget_ms
        ),
        ev.requests.last().map(|r| r.t_ms),
    )]
}

/// The client's own outcome: it ended by itself and said how its turn went, with a `result`
/// event (`success`, `error`, `interrupted`) or, on a turn it gave up, a last `error` event
/// and a non-zero exit code (what the CLI prints then, reference B.5.6). A crash without
/// either, or a `success` with a failing exit code, is not an outcome.
fn cli_result(ev: &Evidence<'_>) -> Vec<Finding> {
    let cli = ev.cli;
    let last = cli.events().into_iter().map(|(_, e)| e).next_back();
    let problem = match (cli.killed, cli.result(), cli.code) {
        (true, _, _) => Some("it was killed at its budget".to_string()),
        (false, Some(r), Some(code)) if r["subtype"] == "success" && code != 0 => Some(format!(
            "its result is success but it exited with code {code}"
        )),
        (false, Some(_), _) => None,
        (false, None, Some(code))
            if code != 0 && last.as_ref().is_some_and(|e| e["type"] == "error") =>
        {
            None
        }
        (false, None, Some(code)) => Some(format!(
            "it printed no result event and no final error event (exit code {code})"
        )),
        (false, None, None) => Some("a signal ended it before any result event".to_string()),
    };
    problem
        .map(|p| {
            vec![finding(
                CLI_RESULT,
                format!("the client stated no outcome: {p}"),
                None,
            )]
        })
        .unwrap_or_default()
}

/// How the client said its turn went: the `result` event's subtype, `error` for a final
/// `error` event, `none` otherwise.
pub fn outcome(cli: &CliRun) -> String {
    if let Some(r) = cli.result() {
        return r["subtype"].as_str().unwrap_or("?").to_string();
    }
    match cli.events().into_iter().map(|(_, e)| e).next_back() {
        Some(e) if e["type"] == "error" => "error".into(),
        _ => "none".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(n: u64, t_ms: u64, status: u16) -> Request {
        Request {
            n,
            t_ms,
            method: "POST".into(),
            path: "/v1/conversations/conv-1/messages".into(),
            body: serde_json::json!({"messages": [{"type": "message", "otid": "otid-1"}]}),
            status,
        }
    }

    fn fault(t_ms: u64, fault: &str) -> TraceEvent {
        TraceEvent {
            t_ms,
            host: "server".into(),
            obs: Observation::Fault {
                fault: fault.into(),
            },
        }
    }

    /// The budget findings of a client that sends the same message again 100 ms after a 409,
    /// under a plan that leaves a stale call pending on that send.
    fn budget_after_a_quick_resend(trace: &[TraceEvent]) -> Vec<Finding> {
        let requests = [send(1, 0, 409), send(2, 100, 200)];
        let cli = CliRun {
            stdout: Vec::new(),
            stderr: String::new(),
            code: Some(0),
            killed: false,
            elapsed_ms: 200,
            work: std::path::PathBuf::new(),
        };
        let plan = [Fault::ApprovalPendingOnSend {
            send: 1,
            tool_call_id: "call-stale".into(),
            tool: "Bash".into(),
            arguments: "{}".into(),
        }];
        budget(&Evidence {
            trace,
            requests: &requests,
            cli: &cli,
            effects: "",
            plan: &plan,
            budget_ms: 60_000,
            start: WorldStart::default(),
        })
    }

    fn unrouted(t_ms: u64, method: &str, path: &str, status: u16) -> TraceEvent {
        TraceEvent {
            t_ms,
            host: "server".into(),
            obs: Observation::ServerUnrouted {
                method: method.into(),
                path: path.into(),
                status,
            },
        }
    }

    /// The three agent routes Letta 0.16.8 lacks too are the real CLI's to call; any other
    /// request the server could not route is a finding, with the time it came.
    #[test]
    fn requests_routed_spares_only_the_routes_the_real_server_lacks() {
        let agent = "/v1/agents/agent-1";
        let tolerated = [
            unrouted(1, "GET", &format!("{agent}/secrets"), 404),
            unrouted(2, "GET", &format!("{agent}/mcp-servers/"), 404),
            unrouted(3, "GET", &format!("{agent}/repositories"), 404),
        ];
        assert_eq!(routed(&tolerated), []);
        let trace = [
            tolerated.as_slice(),
            &[
                unrouted(4, "GET", &format!("{agent}/folders"), 404),
                unrouted(5, "POST", &format!("{agent}/secrets"), 405),
                unrouted(6, "GET", "/v1/agents//secrets", 404),
            ],
        ]
        .concat();
        let found = routed(&trace);
        assert_eq!(
            found.iter().map(|f| f.t_ms).collect::<Vec<_>>(),
            [Some(4), Some(5), Some(6)],
            "{found:?}"
        );
        assert_eq!(
            found[0].message,
            "GET /v1/agents/agent-1/folders matched no route of the server, which answered 404 (Not Found); the client calls only routes the Letta server serves"
        );
    }

    #[test]
    fn a_409_for_a_planted_stale_call_is_no_busy_answer() {
        let planted = [fault(0, "approval_pending send=1 tool_call_id=call-stale")];
        assert_eq!(budget_after_a_quick_resend(&planted), []);
    }

    #[test]
    fn a_409_where_the_stale_call_was_not_planted_is_held_to_the_busy_backoff() {
        let refused = [fault(
            0,
            "approval_pending send=1 tool_call_id=call-stale not planted: run run-1 holds the conversation",
        )];
        let found = budget_after_a_quick_resend(&refused);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].message.contains("answered 409 busy")
                && found[0].message.contains("before the documented 10000 ms"),
            "{}",
            found[0].message
        );
        // A refusal on another send says nothing about this one.
        let elsewhere = [fault(
            0,
            "approval_pending send=11 tool_call_id=call-stale not planted: run run-1 holds the conversation",
        )];
        assert_eq!(budget_after_a_quick_resend(&elsewhere), []);
    }
}
