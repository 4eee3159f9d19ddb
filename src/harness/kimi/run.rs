//! `sim run` for `system = "agent-loop"`: the same report, verdicts and exit codes as
//! `harness::run`, with the agent-loop world, its oracles (`loop-envelope`, `lock-safety`)
//! and its own liveness diagnosis.

use crate::harness::guard::guarded;
use crate::harness::invariants::{
    DETERMINISTIC, LOCK_SAFETY, LOOP_ENVELOPE, TURN_TERMINATES, Violation,
};
use crate::harness::kimi::invariants::{lock_safety, loop_envelope};
use crate::harness::kimi::world::{LoopRunOutput, run_once};
use crate::harness::report::{RunReport, Verdict};
use crate::harness::run::divergence;
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::trace::{hash_text, render_events};
use crate::model::port::observe::Observation;

/// Runs the agent-loop `scenario` with `seed` `runs` times (2 or more checks `deterministic`).
pub fn run_scenario(scenario: &Scenario, seed: u64, runs: u32) -> Result<RunReport, InputError> {
    let runs = runs.max(1);
    let base = RunReport {
        scenario_name: scenario.scenario.name.clone(),
        scenario_path: scenario.path.display().to_string(),
        repro_flags: scenario.repro_flags.clone(),
        seed,
        faults: scenario
            .faults
            .iter()
            .map(|f| f.get_ref().to_string())
            .collect(),
        turn_outcomes: Vec::new(),
        trace_text: String::new(),
        trace_hash: String::new(),
        events: 0,
        end_ms: 0,
        runs,
        invariants: Vec::new(),
        pending: Vec::new(),
        goals: Vec::new(),
        expected: Vec::new(),
        requests: Vec::new(),
        verdict: Verdict::Pass,
    };
    let first = match guarded(|| run_once(scenario, seed))? {
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
        goals: crate::harness::coverage::reached_for(
            crate::harness::system::System::Kimi,
            &first.trace,
        ),
        trace_text: text,
        ..base
    };
    report
        .invariants
        .push((LOOP_ENVELOPE, loop_envelope(&first.trace)));
    report
        .invariants
        .push((LOCK_SAFETY, lock_safety(&first.trace)));

    let mut det = Vec::new();
    for _ in 1..runs {
        match guarded(|| run_once(scenario, seed))? {
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
    report.verdict = if report
        .invariants
        .iter()
        .any(|(id, v)| *id != TURN_TERMINATES && !v.is_empty())
    {
        Verdict::Correctness
    } else if let Some(d) = liveness {
        Verdict::Liveness(d)
    } else {
        Verdict::Pass
    };
    Ok(report)
}

/// What the agent was doing when the run ran out of time.
pub fn liveness_diagnosis(out: &LoopRunOutput, scenario: &Scenario) -> String {
    let agent: Vec<(usize, &Observation, u64)> = out
        .trace
        .iter()
        .enumerate()
        .filter(|(_, e)| e.host == "client")
        .map(|(i, e)| (i, &e.obs, e.t_ms))
        .collect();
    let turn = agent
        .iter()
        .rev()
        .find_map(|(_, o, _)| match o {
            Observation::TurnStart { turn, .. } => Some(*turn),
            _ => None,
        })
        .unwrap_or(0);
    let step = agent.iter().rev().find_map(|(_, o, _)| match o {
        Observation::LoopStepBegin { step, .. } => Some(*step),
        _ => None,
    });
    // Tools started and never ended.
    let mut running: Vec<(String, String, u64)> = Vec::new();
    for (_, o, t) in &agent {
        match o {
            Observation::LoopToolStart {
                tool_call_id, tool, ..
            } => running.push((tool.clone(), tool_call_id.clone(), *t)),
            Observation::LoopToolEnd { tool_call_id, .. } => {
                running.retain(|(_, id, _)| id != tool_call_id)
            }
            _ => {}
        }
    }
    let last = agent.last().map(|(_, o, _)| *o);
    let waiting = if let Some((tool, id, since)) = running.first() {
        format!(
            "waiting for tool {tool} {id}, running since {since} ms and not honouring the abort"
        )
    } else {
        match last {
            Some(Observation::LoopProviderRequest { call, .. }) => {
                format!("waiting for the provider's answer to call {call}")
            }
            Some(Observation::LoopProviderResponse { call, .. }) => {
                format!("reading the provider's stream of call {call}")
            }
            Some(Observation::LoopRetrying { delay_ms, .. }) => {
                format!("sleeping {delay_ms} ms before a retry")
            }
            _ => "between events".into(),
        }
    };
    let step = step.map(|s| format!(" in step {s}")).unwrap_or_default();
    format!(
        "turn {turn} stuck{step} {waiting}; the world healed at {} ms and the run stopped at {} ms ({}); last agent event: {}",
        scenario.limits.heal_at_ms,
        out.end_ms,
        out.stopped.as_deref().unwrap_or("stopped"),
        agent
            .last()
            .map(|(i, _, _)| out.trace[*i].render().trim().to_string())
            .unwrap_or_else(|| "none".into())
    )
}
