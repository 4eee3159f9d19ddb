//! What a Letta run adds to the harness's run flow: its world run, its invariants (the server's
//! on every run, `durable-ack` when the plan crashes the server, `client-faults-fire` when it
//! scripts a fault after a chunk, `send-faults-fire` when it numbers a send fault, the client's
//! on every run),
//! its liveness diagnosis, and the expected failures of a client profile (docs/findings.md).

use crate::harness::faults::Fault;
use crate::harness::invariants::{
    ABANDONED_RUN_CANCELLED, ANSWERS_TYPED, APPROVAL_CONFLICT_RECOVERED, BACKFILL_FAITHFUL,
    CHUNKS_NAMED, CLIENT_FAULTS_FIRE, COMPACTION_SAFE, DATES_TRUE, DURABLE_ACK, HISTORY_VALID,
    ONE_RUN_PER_REQUEST, PENDING_DENIED_AT_START, REQUESTS_ROUTED, RESPONSE_STATE_REUSED,
    SEND_FAULTS_FIRE, STREAM_STAYS_IN_CONVERSATION, TOOL_CALL_RESOLVED, Violation, history_valid,
};
use crate::harness::letta::abandoned_run::abandoned_run_cancelled;
use crate::harness::letta::backfill::backfill_faithful;
use crate::harness::letta::client_faults_fire::{client_faults_fire, scripts_chunk_faults};
use crate::harness::letta::client_invariants::client_invariants;
use crate::harness::letta::compaction_safe::compaction_safe;
use crate::harness::letta::conflict_recovered::approval_conflict_recovered;
use crate::harness::letta::dates_true::dates_true;
use crate::harness::letta::invariants::{
    answers_typed, chunks_named, durable_ack, one_run_per_request, pending_tool_calls,
    requests_routed, stream_stays_in_conversation, tool_call_resolved,
};
use crate::harness::letta::pending_at_start::pending_denied_at_start;
use crate::harness::letta::response_state::response_state_reused;
use crate::harness::letta::send_faults_fire::{plans_send_faults, send_faults_fire};
use crate::harness::letta::{findings, world};
use crate::harness::report::Expectations;
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::trace::TraceEvent;
use crate::harness::world::WorldRun;
use crate::model::port::observe::Observation;

/// Runs the Letta world once and reads what the run flow needs off it.
pub fn run_world(scenario: &Scenario, seed: u64) -> Result<WorldRun, InputError> {
    let out = world::run_once(scenario, seed)?;
    Ok(WorldRun {
        outcomes: out
            .outcomes
            .as_ref()
            .map(|o| o.iter().map(ToString::to_string).collect()),
        pending: pending_tool_calls(&out.trace),
        trace: out.trace,
        stopped: out.stopped,
        end_ms: out.end_ms,
        requests: out.requests,
    })
}

/// The invariants of a Letta run, in report order.
pub fn invariants(
    scenario: &Scenario,
    trace: &[TraceEvent],
) -> Vec<(&'static str, Vec<Violation>)> {
    let mut checked = vec![
        (TOOL_CALL_RESOLVED, tool_call_resolved(trace)),
        (ONE_RUN_PER_REQUEST, one_run_per_request(trace)),
        (HISTORY_VALID, history_valid(trace)),
        (
            COMPACTION_SAFE,
            compaction_safe(trace, scenario.network.start),
        ),
        (
            STREAM_STAYS_IN_CONVERSATION,
            stream_stays_in_conversation(trace),
        ),
        (
            APPROVAL_CONFLICT_RECOVERED,
            approval_conflict_recovered(trace),
        ),
        (PENDING_DENIED_AT_START, pending_denied_at_start(trace)),
        (ANSWERS_TYPED, answers_typed(trace)),
        (REQUESTS_ROUTED, requests_routed(trace)),
        (CHUNKS_NAMED, chunks_named(trace)),
        (DATES_TRUE, dates_true(trace, scenario.network.start)),
        (RESPONSE_STATE_REUSED, response_state_reused(trace)),
        (BACKFILL_FAITHFUL, backfill_faithful(trace)),
        (ABANDONED_RUN_CANCELLED, abandoned_run_cancelled(trace)),
    ];
    let crashes_server = scenario
        .faults
        .iter()
        .any(|f| matches!(f.get_ref(), Fault::Crash { host, .. } if host == "server"));
    if crashes_server {
        checked.push((DURABLE_ACK, durable_ack(trace)));
    }
    if scripts_chunk_faults(scenario) {
        checked.push((CLIENT_FAULTS_FIRE, client_faults_fire(scenario, trace)));
    }
    if plans_send_faults(scenario) {
        let plan = scenario.faults.iter().map(|f| f.get_ref());
        checked.push((SEND_FAULTS_FIRE, send_faults_fire(plan, trace)));
    }
    for (id, check) in client_invariants() {
        checked.push((id, check(trace)));
    }
    checked
}

/// The scenario's `[[expect]]` entries that apply to its client profile, mode and server
/// profile, held against the invariants: an expected failure is reported, not counted, and one
/// that does not happen is itself a failure (the finding no longer reproduces) on a run of the
/// scenario's own faults; under a sweep's plan it may simply not show. A `sometimes` entry is
/// expected only on a run whose trace shows the finding's signature, and so is each of the
/// profile's own findings (`findings::OF_PROFILE`) in any scenario.
pub fn expectations(
    scenario: &Scenario,
    invariants: &[(&'static str, Vec<Violation>)],
    trace: &[TraceEvent],
) -> Expectations {
    let profile = scenario.scenario.client_profile.get_ref();
    let mode = scenario.client.mode.get_ref();
    let server = scenario.server.profile.get_ref();
    let mut out = Expectations::default();
    for e in &scenario.expect {
        let e = e.get_ref();
        if !e.applies(profile, mode, server) {
            continue;
        }
        let Some((id, violations)) = invariants
            .iter()
            .find(|(id, _)| *id == e.invariant.as_str())
        else {
            continue;
        };
        let failed = !violations.is_empty();
        if e.sometimes {
            if failed && findings::shows(&e.finding, trace) {
                out.expected.push((id, e.finding.clone(), true));
            }
            continue;
        }
        out.unexpected_pass |= !failed && scenario.keeps_its_faults();
        out.expected.push((id, e.finding.clone(), failed));
    }
    // The profile's own findings, wherever the trace shows them.
    for (p, finding, broken) in findings::OF_PROFILE {
        if p != profile || !findings::shows(finding, trace) {
            continue;
        }
        for (id, violations) in invariants {
            let already = out.expected.iter().any(|(e, _, _)| e == id);
            if broken.contains(id) && !violations.is_empty() && !already {
                out.expected.push((id, finding.to_string(), true));
            }
        }
    }
    out
}

/// Where the client was when the run ran out of time: the turn, what it was waiting for, the
/// tool calls left awaiting approval and its last event.
pub fn liveness_diagnosis(run: &WorldRun, scenario: &Scenario) -> String {
    let last_client = run.trace.iter().rev().find(|e| e.host == "client");
    let turn = run
        .trace
        .iter()
        .rev()
        .find_map(|e| match &e.obs {
            Observation::TurnStart { turn, .. } => Some(*turn),
            _ => None,
        })
        .unwrap_or(0);
    let waiting = match last_client.map(|e| &e.obs) {
        Some(Observation::ClientSend { path, .. }) => {
            format!("waiting for the response to POST {path}")
        }
        Some(Observation::ClientResponse { .. }) | Some(Observation::ClientChunk { .. }) => {
            format!("reading a stream ({})", last_chunk(&run.trace))
        }
        Some(_) | None => "between requests".into(),
    };
    let pending = pending_tool_calls(&run.trace);
    let pending = if pending.is_empty() {
        String::new()
    } else {
        format!(
            "; tool calls awaiting approval: {}",
            pending
                .iter()
                .map(|(_, id)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "turn {turn} stuck {waiting}{pending}; the world healed at {} ms and the run stopped at {} ms ({}); last client event: {}",
        scenario.limits.heal_at_ms,
        run.end_ms,
        run.stopped.as_deref().unwrap_or("stopped"),
        last_client
            .map(|e| e.render().trim().to_string())
            .unwrap_or_else(|| "none".into())
    )
}

/// The last chunk the client read: its run and sequence number.
fn last_chunk(trace: &[TraceEvent]) -> String {
    trace
        .iter()
        .rev()
        .find_map(|e| match &e.obs {
            Observation::ClientChunk { run_id, seq_id, .. } => Some(format!(
                "run {} after seq {}",
                run_id.as_deref().unwrap_or("?"),
                seq_id.map_or("-".to_string(), |s| s.to_string())
            )),
            _ => None,
        })
        .unwrap_or_else(|| "no chunk yet".into())
}
