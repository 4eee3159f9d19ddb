//! `sim run`: one scenario, one seed, run twice; invariants checked; a report and an exit code.

use super::guard::guarded;
use super::invariants::{self, DETERMINISTIC, TOOL_CALL_RESOLVED, TURN_TERMINATES, Violation};
use super::letta::world::{RunOutput, run_once};
use super::report::{RunReport, Verdict};
use super::scenario::{InputError, Scenario};
use super::trace::{first_divergence, hash_text, render_events};
use crate::model::port::observe::Observation;

/// Runs the scenario once, turning panics anywhere in the world into `Err(message)`.
fn run_guarded(scenario: &Scenario, seed: u64) -> Result<Result<RunOutput, String>, InputError> {
    guarded(|| run_once(scenario, seed))
}

/// Runs `scenario` with `seed` `runs` times (at least 1; 2 checks `deterministic`).
pub fn run_scenario(scenario: &Scenario, seed: u64, runs: u32) -> Result<RunReport, InputError> {
    scenario.system().run(scenario, seed, runs)
}

/// [`run_scenario`] in the Letta world.
pub(crate) fn run_letta(
    scenario: &Scenario,
    seed: u64,
    runs: u32,
) -> Result<RunReport, InputError> {
    let runs = runs.max(1);
    let faults = scenario
        .faults
        .iter()
        .map(|f| f.get_ref().to_string())
        .collect();
    let base = RunReport {
        scenario_name: scenario.scenario.name.clone(),
        scenario_path: scenario.path.display().to_string(),
        repro_flags: scenario.repro_flags.clone(),
        seed,
        faults,
        turn_outcomes: Vec::new(),
        trace_text: String::new(),
        trace_hash: String::new(),
        events: 0,
        end_ms: 0,
        runs,
        invariants: Vec::new(),
        pending: Vec::new(),
        expected: Vec::new(),
        requests: Vec::new(),
        goals: Vec::new(),
        verdict: Verdict::Pass,
    };
    let first = match run_guarded(scenario, seed)? {
        Ok(out) => out,
        Err(panic) => {
            return Ok(RunReport {
                verdict: Verdict::Crash(panic),
                ..base
            });
        }
    };
    let text = render_events(&first.trace);
    let mut report = RunReport {
        turn_outcomes: first
            .outcomes
            .as_ref()
            .map(|o| o.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
        trace_hash: hash_text(&text),
        events: first.trace.len(),
        end_ms: first.end_ms,
        pending: invariants::pending_tool_calls(&first.trace),
        goals: super::coverage::reached_for(super::system::System::Letta, &first.trace),
        trace_text: text,
        requests: first.requests.clone(),
        ..base
    };

    report.invariants.push((
        TOOL_CALL_RESOLVED,
        invariants::tool_call_resolved(&first.trace),
    ));
    // Server invariants (issue 3).
    report.invariants.push((
        invariants::ONE_RUN_PER_REQUEST,
        invariants::one_run_per_request(&first.trace),
    ));
    report.invariants.push((
        invariants::HISTORY_VALID,
        invariants::history_valid(&first.trace),
    ));
    if scenario.faults.iter().any(
        |f| matches!(f.get_ref(), super::scenario::Fault::Crash { host, .. } if host == "server"),
    ) {
        report.invariants.push((
            invariants::DURABLE_ACK,
            invariants::durable_ack(&first.trace),
        ));
    }
    // client-model: the client invariants, on every run.
    for (id, check) in invariants::client_invariants() {
        report.invariants.push((id, check(&first.trace)));
    }

    let mut det = Vec::new();
    for _ in 1..runs {
        match run_guarded(scenario, seed)? {
            Ok(again) => {
                if let Some(v) = divergence(&report.trace_text, &render_events(&again.trace)) {
                    det.push(v);
                    break;
                }
            }
            Err(panic) => {
                report.verdict = Verdict::Crash(format!("on a repeat run: {panic}"));
                return Ok(report);
            }
        }
    }
    if runs > 1 {
        report.invariants.push((DETERMINISTIC, det));
    }

    let liveness = first
        .outcomes
        .is_none()
        .then(|| liveness_diagnosis(&first, scenario));
    report.invariants.push((
        TURN_TERMINATES,
        liveness
            .iter()
            .map(|d| Violation {
                invariant: TURN_TERMINATES,
                event: None,
                message: d.clone(),
            })
            .collect(),
    ));
    // client-model: expected failures of this profile (docs/findings.md) are reported, not
    // counted; an expected failure that does not happen is itself a failure (the finding no
    // longer reproduces).
    let profile = scenario.scenario.client_profile.get_ref();
    let mode = scenario.client.mode.get_ref();
    let server = scenario.server.profile.get_ref();
    let mut unexpected_pass = false;
    for e in &scenario.expect {
        let e = e.get_ref();
        if !e.applies(profile, mode, server) {
            continue;
        }
        if let Some((id, violations)) = report
            .invariants
            .iter()
            .find(|(id, _)| *id == e.invariant.as_str())
        {
            let failed = !violations.is_empty();
            if e.sometimes {
                // Seed-dependent: expected only where the trace shows this finding.
                if failed && super::letta::findings::shows(&e.finding, &first.trace) {
                    report.expected.push((id, e.finding.clone(), true));
                }
                continue;
            }
            unexpected_pass |= !failed;
            report.expected.push((id, e.finding.clone(), failed));
        }
    }
    let is_expected = |id: &str| report.expected.iter().any(|(x, _, _)| *x == id);
    report.verdict = if unexpected_pass
        || report
            .invariants
            .iter()
            .any(|(id, v)| *id != TURN_TERMINATES && !v.is_empty() && !is_expected(id))
    {
        Verdict::Correctness
    } else if let Some(d) = liveness {
        Verdict::Liveness(d)
    } else {
        Verdict::Pass
    };
    Ok(report)
}

fn liveness_diagnosis(out: &RunOutput, scenario: &Scenario) -> String {
    let last_client = out.trace.iter().rev().find(|e| e.host == "client");
    let turn = out
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
            let last = out.trace.iter().rev().find_map(|e| match &e.obs {
                Observation::ClientChunk { run_id, seq_id, .. } => Some(format!(
                    "run {} after seq {}",
                    run_id.as_deref().unwrap_or("?"),
                    seq_id.map_or("-".to_string(), |s| s.to_string())
                )),
                _ => None,
            });
            format!(
                "reading a stream ({})",
                last.unwrap_or_else(|| "no chunk yet".into())
            )
        }
        Some(_) | None => "between requests".into(),
    };
    let pending = invariants::pending_tool_calls(&out.trace);
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
        out.end_ms,
        out.stopped.as_deref().unwrap_or("stopped"),
        last_client
            .map(|e| e.render().trim().to_string())
            .unwrap_or_else(|| "none".into())
    )
}

/// `deterministic`'s violation when a repeat run's trace differs from the first: the first
/// divergent line and its simulated time.
pub(crate) fn divergence(first: &str, again: &str) -> Option<Violation> {
    let (line, left, right) = first_divergence(first, again)?;
    let t = left
        .split_whitespace()
        .next()
        .or_else(|| right.split_whitespace().next())
        .unwrap_or("?");
    Some(Violation {
        invariant: DETERMINISTIC,
        event: Some(line - 1),
        message: format!(
            "the same seed gave a different trace; first divergence at line {line}, simulated time {t} ms:\n    run 1: {left}\n    run 2: {right}"
        ),
    })
}
