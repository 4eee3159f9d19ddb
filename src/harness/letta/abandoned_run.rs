//! `abandoned-run-cancelled` (docs/invariants.md): a headless client that gives a turn up on a
//! stream error does not leave its run running. letta-tests-and-real-client.md B.5.6: after an
//! unrecoverable stream error (`stop_reason=error`) with the run still `created`/`running`, the
//! one-shot client sends `POST /v1/agents/{agent_id}/messages/cancel {"run_ids":[run_id]}`
//! before it exits; the TUI does not. A run left running holds the conversation's lock, so the
//! next process's send is refused busy until the run ends on its own, and nothing in the turn
//! that gave up shows it.
//!
//! - Every headless turn that ends `error: stop_reason=error …` after a read of its run
//!   (`GET /v1/runs/{id}`, since the turn's last send) that found the run active sends a run
//!   cancel after that read.
//! - Every run cancel the client sends directly follows a read of a run that found it active.
//!
//! What a read found is the server's side of it: the run was active when the server answered
//! the read (no `run_ended` for it yet). A read whose answer the client never got whole (an
//! error status, no answer, a body that failed) found nothing; when two reads of one run were
//! answered across its end before the client got one of them, which answer it got is unknown,
//! and the oracle judges neither half on it.

use std::collections::{BTreeMap, BTreeSet};

use crate::harness::invariants::{ABANDONED_RUN_CANCELLED, Violation};
use crate::harness::trace::TraceEvent;
use crate::model::port::observe::Observation;

/// What a client process's latest run read found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    /// The run was active when the server answered (event index of the client's answer).
    Active(usize),
    /// The run had ended when the server answered.
    Ended(usize),
    /// The read failed, or which answer arrived is unknown.
    Unknown,
}

/// One client process, between its sends.
#[derive(Default)]
struct Process {
    headless: bool,
    /// The latest run read since the last send: the run id and what it found.
    read: Option<(String, Found)>,
    /// A run cancel was sent after that read.
    cancelled: bool,
}

/// `abandoned-run-cancelled` over a Letta trace.
pub fn abandoned_run_cancelled(events: &[TraceEvent]) -> Vec<Violation> {
    let mut ended: BTreeSet<&str> = BTreeSet::new();
    // Per run, whether it was active at each read the server answered that no client has got.
    let mut answers: BTreeMap<&str, Vec<bool>> = BTreeMap::new();
    let mut clients: BTreeMap<&str, Process> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.obs {
            Observation::RunEnded { run_id, .. } => {
                ended.insert(run_id);
            }
            Observation::ServerRequest {
                method,
                path,
                status: 200,
            } if method == "GET" => {
                if let Some(run) = run_read(path) {
                    answers.entry(run).or_default().push(!ended.contains(run));
                }
            }
            Observation::ClientStarted { mode, .. } => {
                clients.insert(
                    &e.host,
                    Process {
                        headless: mode == "headless",
                        ..Process::default()
                    },
                );
            }
            Observation::ClientSend { .. } | Observation::TurnStart { .. } => {
                let p = clients.entry(&e.host).or_default();
                p.read = None;
                p.cancelled = false;
            }
            Observation::ClientResponse {
                method,
                path,
                status,
                ..
            } if method == "GET" => {
                let Some(run) = run_read(path) else { continue };
                let found = match (status, answers.remove(run)) {
                    (200, Some(a)) if a.iter().all(|&x| x) => Found::Active(i),
                    (200, Some(a)) if a.iter().all(|&x| !x) => Found::Ended(i),
                    _ => Found::Unknown,
                };
                let p = clients.entry(&e.host).or_default();
                p.read = Some((run.to_string(), found));
                p.cancelled = false;
            }
            Observation::ClientConnectError { method, path, .. }
            | Observation::ClientBodyFailed { method, path, .. }
                if method == "GET" =>
            {
                if let Some(run) = run_read(path) {
                    clients.entry(&e.host).or_default().read = Some((run.into(), Found::Unknown));
                }
            }
            Observation::ClientRequest { method, path, .. }
                if method == "POST" && is_run_cancel(path) =>
            {
                let p = clients.entry(&e.host).or_default();
                p.cancelled = true;
                let why = match &p.read {
                    None => Some("no read of a run since the turn's last send".to_string()),
                    Some((run, Found::Ended(at))) => Some(format!(
                        "its last read of {run} (event {at}) found the run already ended"
                    )),
                    Some((_, Found::Active(_) | Found::Unknown)) => None,
                };
                if let Some(why) = why {
                    out.push(Violation::at(
                        ABANDONED_RUN_CANCELLED,
                        i,
                        format!(
                            "POST {path} cancels a run, but {why}: the client cancels only a run it read still created or running (letta-tests-and-real-client.md B.5.6)"
                        ),
                    ));
                }
            }
            Observation::TurnEnd { turn, outcome } => {
                let p = clients.entry(&e.host).or_default();
                if p.headless
                    && gave_up_on_stream_error(outcome)
                    && !p.cancelled
                    && let Some((run, Found::Active(at))) = &p.read
                {
                    out.push(Violation::at(
                        ABANDONED_RUN_CANCELLED,
                        i,
                        format!(
                            "headless turn {turn} gave up ({outcome}) and left run {run} running: its last read of the run (event {at}) found it active, and no POST /v1/agents/{{agent_id}}/messages/cancel followed (letta-tests-and-real-client.md B.5.6)"
                        ),
                    ));
                }
                p.read = None;
                p.cancelled = false;
            }
            _ => {}
        }
    }
    out
}

/// The run id of `GET /v1/runs/{id}` (not the run listing, not a run's stream).
pub(crate) fn run_read(path: &str) -> Option<&str> {
    let id = path.strip_prefix("/v1/runs/")?;
    (!id.is_empty() && !id.contains(['/', '?'])).then_some(id)
}

/// `POST /v1/agents/{agent_id}/messages/cancel`.
pub(crate) fn is_run_cancel(path: &str) -> bool {
    path.strip_prefix("/v1/agents/")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(agent, tail)| !agent.is_empty() && tail == "messages/cancel")
}

/// The outcome of a turn given up on a stream that stopped `error` (the post-stream order's
/// last step, letta-protocol.md §3.10): `error: stop_reason=error` with the error's detail.
fn gave_up_on_stream_error(outcome: &str) -> bool {
    outcome
        .strip_prefix("error: stop_reason=error")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(" ("))
}

#[cfg(test)]
mod tests;
